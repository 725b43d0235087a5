#!/usr/bin/env python3
"""Study 2's closing table and its speed goal, from three `blocklab sweep` runs made one
after the other on the same machine (never two at once: they pin to the same cores):

  1. blocklab's client, every target (the four models and every built server peer),
     5 s delay, levels 100 ... 10,000 and beyond (15,000, 18,000, 20,000, 50,000);
     Rust and Go under a 50 MiB cap on the whole process, the JVMs at the seed's
     -Xms25M -Xmx50M heap, their process uncapped;
  2. the same targets with the JVM's whole process capped at 256 MiB (--jvm-memory),
     JVM targets only (the others are as in run 1);
  3. JMeter, the seed's client (--client jmeter), every target, levels up to 10,000
     (the jmeter peer is sized for 10,000 threads).

It prints, per target and client: the highest level held (100 % success, max <= 5.5 s,
alive after), the highest level at 100 % whatever the maximum, where and how it died,
and the memory per in-flight request (KiB, whole process; heap for a JVM). Then the
goal: lean's highest level held >= 5 x the best JVM peer's and >= 2 x Go's, with the
ratios, from run 1 and with the 256 MiB JVMs of run 2. A level the descriptor limit
stopped (status not_run_limit) makes a figure a lower bound, marked ">=".

The machine is shared: the script logs the load average before and after each run;
quote it with the figures.

    bench/study2-sweep.py                                  # the three runs: ~1 h here
    bench/study2-sweep.py --runs blocklab,jvm256           # without JMeter
    bench/study2-sweep.py --from DIR_BLOCKLAB,DIR_JVM256,DIR_JMETER   # re-read finished sweeps

Needs root (the memory caps are cgroups), target/release/blocklab ($BLOCKLAB names
another binary) and the peers built (scripts/peers build).
"""

import argparse
import json
import os
import subprocess
import sys
import time

from _common import BLOCKLAB, ROOT, loadavg
LEVELS = "100,200,400,600,700,800,1000,2000,5000,10000,15000,18000,20000,50000"
JMETER_LEVELS = "100,200,400,600,700,800,1000,2000,5000,10000"
JVM_TARGETS = "spring-web,spring-webflux,spring-web-vt,tomcat,netty"
HELD_MAX_MS = 5500
RUNS = {
    "blocklab": ["--levels", LEVELS],
    "jvm256": ["--targets", JVM_TARGETS, "--jvm-memory", "256MiB", "--levels", LEVELS],
    "jmeter": ["--client", "jmeter", "--levels", JMETER_LEVELS],
}
SPRING = ("spring-web", "spring-webflux", "spring-web-vt")
ENGINES = ("tomcat", "netty")


def run_sweep(name, out):
    command = [BLOCKLAB, "sweep", *RUNS[name], "--out", out]
    print(f"run {name}: {' '.join(command)}", flush=True)
    before, started = loadavg(), time.time()
    run = subprocess.run(command, stdout=subprocess.DEVNULL)
    print(f"  {time.time() - started:.0f} s, exit {run.returncode}; load average before {before}, after {loadavg()}",
          flush=True)
    if run.returncode != 0:
        sys.exit(f"blocklab sweep ({name}) failed with status {run.returncode}")
    return out


def held(step):
    return (step["status"] == "run" and step.get("success_rate") == 1.0 and step.get("alive_after")
            and step.get("max_ms") is not None and step["max_ms"] <= HELD_MAX_MS)


def highest_held(target):
    """The highest level held, and whether a higher level was not run for want of
    descriptors while the target was alive (then the figure is a lower bound)."""
    levels = [s["level"] for s in target["steps"] if held(s)]
    top = max(levels) if levels else None
    ran = [s for s in target["steps"] if s["status"] == "run"]
    limited = bool(ran) and held(ran[-1]) and any(s["status"] == "not_run_limit" for s in target["steps"])
    return top, limited


def died(target):
    d = target.get("died")
    if not d:
        limited = [str(s["level"]) for s in target["steps"] if s["status"] == "not_run_limit"]
        return "alive" + (f" (not run: {', '.join(limited)}, descriptor limit)" if limited else "")
    words = {"oom_killed": "OOM-killed", "exited": "exited", "unresponsive": "alive, not answering",
             "did_not_start": "did not start"}[d["how"]]
    if d["how"] == "unresponsive" and "OutOfMemoryError" in d["detail"]:
        words += " (OutOfMemoryError)"
    if d.get("answered_again") is not None and d["how"] == "unresponsive":
        words += ", answered again" if d["answered_again"] else ", never again"
    return f"{d['level']}: {words}"


def kib(target):
    p = target.get("per_request") or {}
    if p.get("process_kib") is None:
        return "-"
    text = f"{p['process_kib']:.1f}"
    if p.get("heap_kib") is not None:
        text += f" (heap {p['heap_kib']:.1f})"
    return text


def full(target):
    h = target.get("highest_full_success")
    if not h:
        return "never"
    step = next(s for s in target["steps"] if s["level"] == h)
    return f"{h} (max {step['max_ms'] / 1000:.1f} s)"


def held_text(target):
    top, limited = highest_held(target)
    if top is None:
        return "none"
    return (">= " if limited and not target.get("died") else "") + str(top)


def table(sweeps):
    names = []
    for results in sweeps.values():
        for t in results["targets"]:
            if t["name"] not in names:
                names.append(t["name"])
    print("\n| target | client | cap | highest level held (100 %, max <= 5.5 s) | highest at 100 % (its max) "
          "| where and how it died | KiB per in-flight request, process (heap) |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        for run, results in sweeps.items():
            t = next((t for t in results["targets"] if t["name"] == name), None)
            if t is None:
                continue
            cap = t["cap"].replace("none on the whole process (measured in a cgroup)", "process uncapped")
            cap = cap.replace(" (cgroup V1)", "").replace(" (cgroup V2)", "").replace(" (4/5 of the cap)", "")
            print(f"| {name} | {run} | {cap} | {held_text(t)} | {full(t)} | {died(t)} | {kib(t)} |")


def goal(label, lean, jvms, go):
    lean_top, lean_limited = highest_held(lean)
    bound = ">= " if lean_limited and not lean.get("died") else ""
    print(f"\n{label}: lean holds {bound}{lean_top}")
    best = max(jvms, key=lambda t: highest_held(t)[0] or 0, default=None)
    for who, target, want in [("the best JVM peer", best, 5), ("Go", go, 2)]:
        if target is None:
            print(f"  {who}: not measured")
            continue
        top = highest_held(target)[0]
        if not top or not lean_top:
            print(f"  {who} ({target['name']}): held {top}; no ratio")
            continue
        ratio = lean_top / top
        verdict = "met" if ratio >= want else f"not met: {want} x {top} = {want * top} needed"
        print(f"  lean / {who} ({target['name']}, {top}) = {bound}{ratio:.1f} (goal >= {want}: {verdict})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default="blocklab,jvm256,jmeter", help="which of blocklab, jvm256, jmeter to run")
    p.add_argument("--out", default=None, help="folder for the sweeps' folders")
    p.add_argument("--from", dest="previous", default=None,
                   help="comma-separated finished sweep folders (their results.json say which run each is)")
    args = p.parse_args()
    sweeps = {}
    if args.previous:
        for folder in args.previous.split(","):
            with open(os.path.join(folder, "results.json")) as f:
                results = json.load(f)
            jvm_capped = all(t.get("cap_bytes") for t in results["targets"]) and results["client"] == "blocklab" \
                and all(t["name"] in JVM_TARGETS.split(",") for t in results["targets"])
            sweeps["jvm256" if jvm_capped else results["client"]] = results
    else:
        if not os.path.exists(BLOCKLAB):
            subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
        out = args.out or os.path.join(ROOT, "results", time.strftime("study2-sweep-%Y%m%dT%H%M%S"))
        for name in args.runs.split(","):
            if name not in RUNS:
                sys.exit(f"--runs: unknown run '{name}' (blocklab, jvm256, jmeter)")
            folder = run_sweep(name, os.path.join(out, name))
            with open(os.path.join(folder, "results.json")) as f:
                sweeps[name] = json.load(f)
    for run, results in sweeps.items():
        print(f"{run}: sweep of {results['started']}, {results['wall_s']:.0f} s, client {results['client']}, "
              f"/delay {results['delay_ms']} ms, descriptor limit {results.get('descriptor_limit')}")
        for w in results["warnings"]:
            print(f"  warning: {w}")
    table(sweeps)
    if "blocklab" in sweeps:
        targets = {t["name"]: t for t in sweeps["blocklab"]["targets"]}
        lean, go = targets.get("lean"), targets.get("go-nethttp")
        if lean:
            jvms = [t for n, t in targets.items() if n in SPRING + ENGINES]
            goal("goal, heap -Xmx50M (run blocklab), Spring and the engines", lean, jvms, go)
            goal("goal, heap -Xmx50M (run blocklab), Spring only", lean, [t for t in jvms if t["name"] in SPRING], go)
            if "jvm256" in sweeps:
                capped = [t for t in sweeps["jvm256"]["targets"] if t["name"] in SPRING + ENGINES]
                goal("goal, JVM process capped at 256 MiB (run jvm256), Spring and the engines", lean, capped, go)
                goal("goal, JVM process capped at 256 MiB (run jvm256), Spring only", lean,
                     [t for t in capped if t["name"] in SPRING], go)
    if "jmeter" in sweeps:
        targets = {t["name"]: t for t in sweeps["jmeter"]["targets"]}
        if "lean" in targets:
            jvms = [t for n, t in targets.items() if n in SPRING + ENGINES]
            goal("goal, JMeter's client (run jmeter)", targets["lean"], jvms, targets.get("go-nethttp"))


if __name__ == "__main__":
    main()
