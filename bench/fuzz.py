#!/usr/bin/env python3
"""Fuzzes blocklab's two HTTP/1.1 parsers with `cargo fuzz` (libFuzzer),
each for --minutes (10 by default): `response`, the parser `blocklab load`
reads responses with (src/http1.rs), and `request`, the request parser of
the lean server model (src/server/lean.rs). Each input is the bytes of one
connection; the targets check the properties of src/wire_properties.rs
(the same result however the reads split the bytes, heads and bodies
consumed exactly, bounded buffers, RFC 9112's framing and keep-alive rules),
not only that nothing panics.

The toolchain is stable: RUSTC_BOOTSTRAP=1 lets it take the unstable flags
cargo fuzz passes (the sanitizer). cargo-fuzz comes from crates.io
(`cargo install cargo-fuzz --locked`); libFuzzer itself is built from C++ by
libfuzzer-sys with the system's C++ compiler (g++ here). The targets are
built once, then run directly, each starting from what the repository
keeps (read only): fuzz/seeds/TARGET (real requests and responses, hand-made
ones, every finding's input) and fuzz/corpus/TARGET (what earlier runs
reached beyond them); new inputs go to a fresh directory.

Per target it prints the executions (and per second), the coverage at the
end (`cov`: code edges reached; `ft`: libFuzzer's finer features), the new
corpus entries (inputs that reached something the corpus did not) and the
crashes, with the file of each crash's input. A crash is any broken
property, panic, timeout (--timeout seconds for one input: an endless loop)
or input using more than --rss-mb of memory. Exit status 1 when any target
crashed.

--keep adds the new entries to fuzz/corpus/TARGET and minimizes it with
`cargo fuzz cmin` (-use_counters=0: one input per code edge reached, not per
hit count, which keeps the corpus a few hundred small files); `cargo test`
replays seeds and corpus (tests/fuzz_corpus.rs).
The machine's other load slows the executions per second, not what is found.

    bench/fuzz.py
    bench/fuzz.py --minutes 1 --targets request
    bench/fuzz.py --parallel --keep
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
TARGETS = ["response", "request"]
TRIPLE = "x86_64-unknown-linux-gnu"
# One lock for the lines the target threads print.
PRINT = threading.Lock()


def say(line):
    with PRINT:
        print(line, flush=True)


def cargo_fuzz(args, sanitizer):
    """A cargo fuzz command line and its environment; build and cmin share it
    so that neither rebuilds what the other built."""
    env = {**os.environ, "RUSTC_BOOTSTRAP": "1"}
    return ["cargo", "fuzz", *args, "--sanitizer", sanitizer, "--codegen-units", "16"], env


def build(sanitizer):
    cmd, env = cargo_fuzz(["build", "-O"], sanitizer)
    started = time.monotonic()
    say(f"building the fuzz targets: {' '.join(cmd)}")
    subprocess.run(cmd, cwd=ROOT, env=env, check=True)
    say(f"built in {time.monotonic() - started:.0f} s")


def fuzz(target, args, results):
    """Runs one target for --minutes; puts its figures in results[target]."""
    binary = os.path.join(FUZZ, "target", TRIPLE, "release", target)
    kept = os.path.join(FUZZ, "corpus", target)
    seeds = os.path.join(FUZZ, "seeds", target)
    work = tempfile.mkdtemp(prefix=f"fuzz-{target}-")
    new = os.path.join(work, "new")
    artifacts = os.path.join(FUZZ, "artifacts", target) + "/"
    os.makedirs(new)
    os.makedirs(artifacts, exist_ok=True)
    before = set(os.listdir(artifacts))
    seconds = int(args.minutes * 60)
    cmd = [binary, new, kept, seeds, f"-max_total_time={seconds}", f"-timeout={args.timeout}",
           f"-rss_limit_mb={args.rss_mb}", f"-max_len={args.max_len}", f"-artifact_prefix={artifacts}",
           f"-dict={os.path.join(FUZZ, 'http.dict')}", "-print_final_stats=1"]
    log_path = os.path.join(work, "libfuzzer.log")
    say(f"{target}: fuzzing for {seconds} s; libFuzzer's output in {log_path}")
    started = time.monotonic()
    last_said, cov, ft, stats = started, None, None, {}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                errors="replace")
        for line in proc.stderr:
            log.write(line)
            m = re.search(r"cov: (\d+) ft: (\d+)", line)
            if m:
                cov, ft = int(m.group(1)), int(m.group(2))
            m = re.match(r"stat::(\w+):\s+(\d+)", line)
            if m:
                stats[m.group(1)] = int(m.group(2))
            if time.monotonic() - last_said >= 60:
                last_said = time.monotonic()
                execs = re.match(r"#(\d+)", line)
                say(f"{target}: {last_said - started:.0f} s, cov {cov}, ft {ft}"
                    + (f", {int(execs.group(1)):,} executions" if execs else ""))
        status = proc.wait()
    crashes = sorted(set(os.listdir(artifacts)) - before)
    results[target] = {
        "seconds": time.monotonic() - started,
        "executions": stats.get("number_of_executed_units", 0),
        "per_second": stats.get("average_exec_per_sec", 0),
        "cov": cov,
        "ft": ft,
        "new": sorted(os.listdir(new)),
        "new_dir": new,
        "peak_rss_mb": stats.get("peak_rss_mb"),
        "crashes": [artifacts + c for c in crashes],
        "status": status,
        "log": log_path,
    }
    say(f"{target}: done after {results[target]['seconds']:.0f} s (libFuzzer exit status {status})")


def keep(target, result, sanitizer):
    """Adds the new entries to the kept corpus and minimizes it."""
    kept = os.path.join(FUZZ, "corpus", target)
    for name in result["new"]:
        shutil.copy(os.path.join(result["new_dir"], name), kept)
    cmd, env = cargo_fuzz(["cmin", "-O", target, kept], sanitizer)
    cmd += ["--", "-use_counters=0"]
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    say(f"{target}: corpus kept, minimized: {len(os.listdir(kept))} files in {kept}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10, help="how long each target runs (10)")
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=TARGETS)
    parser.add_argument("--parallel", action="store_true",
                        help="run the targets at once (one core each) instead of one after the other")
    parser.add_argument("--sanitizer", default="address", choices=["address", "none"],
                        help="address (ASan: the unsafe code of httparse and std is checked too) or none (faster)")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take (10)")
    parser.add_argument("--rss-mb", type=int, default=2048, help="memory a run may use, in MiB (2048)")
    parser.add_argument("--max-len", type=int, default=4096, help="longest input tried, in bytes (4096)")
    parser.add_argument("--keep", action="store_true",
                        help="add the new entries to fuzz/corpus/TARGET and minimize it (cargo fuzz cmin)")
    args = parser.parse_args()
    if shutil.which("cargo-fuzz") is None:
        sys.exit("cargo-fuzz is not installed: cargo install cargo-fuzz --locked")

    build(args.sanitizer)
    results = {}
    if args.parallel:
        threads = [threading.Thread(target=fuzz, args=(t, args, results)) for t in args.targets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for target in args.targets:
            fuzz(target, args, results)

    print()
    print(f"{'target':<10} {'time':>8} {'executions':>14} {'exec/s':>8} {'cov':>6} {'ft':>7} {'new':>5} "
          f"{'rss MiB':>8} {'crashes':>8}")
    for target in args.targets:
        r = results[target]
        print(f"{target:<10} {r['seconds']:>7.0f}s {r['executions']:>14,} {r['per_second']:>8,} {r['cov'] or 0:>6} "
              f"{r['ft'] or 0:>7} {len(r['new']):>5} {r['peak_rss_mb'] or 0:>8} {len(r['crashes']):>8}")
    print("cov: code edges reached; ft: libFuzzer's features (edges with hit counts, compared values);"
          " new: inputs that reached something the corpus did not.")
    crashed = False
    for target in args.targets:
        r = results[target]
        for crash in r["crashes"]:
            crashed = True
            print(f"{target}: crash, input in {crash}; replay: {FUZZ}/target/{TRIPLE}/release/{target} {crash}")
        if r["status"] != 0 and not r["crashes"]:
            crashed = True
            print(f"{target}: libFuzzer exited with {r['status']}; see {r['log']}")
    if crashed:
        print("Each crash is a finding: fix it, add a regression test beside the parser and put the input in "
              "fuzz/seeds/TARGET/finding-NAME.")
        sys.exit(1)
    if args.keep:
        for target in args.targets:
            keep(target, results[target], args.sanitizer)


if __name__ == "__main__":
    main()
