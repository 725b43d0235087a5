#!/usr/bin/env python3
"""Study 1 on PostgreSQL beside Neo4j, and the PostgreSQL issue's goals (issue 49),
from `blocklab bench`'s own results.json (Python 3 standard library only).

It runs, one after another, each a bench that starts, seeds, warms and wipes its database:

 1. `blocklab bench --db postgres  --apis A --runs R -n N`   PostgreSQL over loopback;
 2. `blocklab bench --db postgres  --apis 2,3,7 --runs R -n N --db-rtt 1ms --db-stall +50ms:10s`
    a round trip away, then each endpoint through a stall of the link (the README's command);
 3. `blocklab bench --db neo4j     --apis A --runs R -n N --db-warm W`      the same run on Neo4j;

then prints, each figure as the median over the runs with its range [min-max]:

 - the seed table (requests/s per Test ID) on PostgreSQL beside Neo4j;
 - the ceilings each bench measured (blocklab's own client, and pgbench or the Java driver),
   before and after its matrix, and each endpoint's share of its client's;
 - each goal: blocklab's /getDataAsync on PostgreSQL >= 0.9 of its own client's ceiling;
   at 1 ms, /getDataAsync / /getData >= 3 (the runs paired by Run ID), beside what
   Little's law gives for the blocking pool; and the server's CPU per /getDataAsync on
   PostgreSQL beside Neo4j (no goal). "met" when the whole range meets it, "at the edge"
   when the range straddles it.

    bench/study1-postgres.py                       # 8 APIs, 3 runs of 20000: ~20 minutes
    bench/study1-postgres.py --apis 2,3 --runs 3   # the goals alone: ~10 minutes
    bench/study1-postgres.py --json study1-pg.json
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import BLOCKLAB, ROOT  # noqa: E402

PATHS = {1: "/test", 2: "/getData", 3: "/getDataAsync", 4: "/getDataAsync2", 5: "/getDataAkka",
         7: "/getDataAkkaAsync", 8: "/getDataAkkaAsync2", 9: "/getDataSpawnBlocking"}


def spread(values):
    """'median [min-max]' of a list, or '-'."""
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} [{min(values):.0f}-{max(values):.0f}]"


def verdict(values, goal):
    """met / not met / at the edge, for a goal `value >= goal` over every value."""
    if not values:
        return "not measured"
    if min(values) >= goal:
        return "met"
    if max(values) < goal:
        return "not met"
    return "at the edge"


def bench(label, args, out):
    """Runs `blocklab bench ARGS --out OUT`; its results.json, or exits with its stderr's tail."""
    command = [BLOCKLAB, "bench", *args, "--out", out]
    print(f"# {label}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
    run = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if run.returncode != 0:
        sys.exit(f"{label} failed ({run.returncode}): {run.stderr[-2000:]}")
    with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
        return json.load(f)


def runs_of(results, test_id, target="blocklab"):
    """The run records of `target` on `test_id`."""
    for t in results["tests"]:
        if t["target"] == target and t["test_id"] == test_id and t["status"] == "ok":
            return t["runs"]
    return []


def ceiling_of(results, client):
    """The higher of before and after of `client`'s ceiling, with both."""
    for c in results["conditions"]["ceilings"]:
        if c["client"] == client:
            both = [m["reads_per_s"] for m in (c.get("before"), c.get("after")) if m]
            return (max(both) if both else None), c
    return None, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--apis", default="1,2,3,4,5,7,8,9", help="Test IDs of the seed table (default all)")
    parser.add_argument("--runs", type=int, default=3, help="runs per API in each bench (default 3)")
    parser.add_argument("-n", "--requests", type=int, default=20000, help="requests per run (default 20000)")
    parser.add_argument("--neo4j-warm", default="5m", help="--db-warm of the Neo4j bench (default 5m)")
    parser.add_argument("--pg-warm", default="1m",
                        help="--db-warm of the PostgreSQL benches (default 1m: its rate varied by ±30 %% from one "
                             "15 s window to the next with no trend, so the warm-up rule ran to its maximum)")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--pools", default="64,16",
                        help="--db-pool,--db-async-connections of one more run at 1 ms beside the defaults' "
                             "(default 64,16: the blocking pool larger, the async one smaller; 'none' to skip)")
    parser.add_argument("--keep", help="write each bench's whole output into this folder (pg, pg-rtt, neo4j)")
    args = parser.parse_args()
    if not os.path.exists(BLOCKLAB):
        subprocess.run(["cargo", "build", "--release", "--locked"], cwd=ROOT, check=True)
    common = ["--runs", str(args.runs), "-n", str(args.requests)]
    pg_common = [*common, "--db-warm", args.pg_warm]
    with tempfile.TemporaryDirectory(prefix="blocklab-study1-pg-") as scratch:
        tmp = args.keep or scratch
        pg = bench("PostgreSQL", ["--db", "postgres", "--apis", args.apis, *pg_common], f"{tmp}/pg")
        rtt = bench("PostgreSQL at 1 ms",
                    ["--db", "postgres", "--apis", "2,3,7", "--db-rtt", "1ms", "--db-stall", "+50ms:10s", *pg_common],
                    f"{tmp}/pg-rtt")
        other = None
        if args.pools != "none":
            pool, conns = args.pools.split(",")
            other = bench(f"PostgreSQL at 1 ms, --db-pool {pool} --db-async-connections {conns}",
                          ["--db", "postgres", "--apis", "2,3", "--db-rtt", "1ms", "--db-pool", pool,
                           "--db-async-connections", conns, *pg_common], f"{tmp}/pg-pools")
        neo = bench("Neo4j", ["--db", "neo4j", "--apis", args.apis, "--db-warm", args.neo4j_warm, *common],
                    f"{tmp}/neo4j")
    figures = {"commands": {}, "seed_table": {}, "ceilings": {}, "goals": {}}
    for name, results in (("postgres", pg), ("postgres_rtt_1ms", rtt), ("neo4j", neo)):
        figures["commands"][name] = results["conditions"]["command"]
        print(f"{name}: {results['conditions']['database_name']}")
        print(f"  {results['conditions']['command']}")

    print("\nThe seed table, requests/s, blocklab (median [range] over the runs)")
    print(f"| Test ID | API | PostgreSQL | Neo4j | PostgreSQL ÷ Neo4j |")
    print("|---|---|---|---|---|")
    for test_id in sorted({t["test_id"] for t in pg["tests"]}):
        a = [r["rps"] for r in runs_of(pg, test_id)]
        b = [r["rps"] for r in runs_of(neo, test_id)]
        ratio = f"{statistics.median(a) / statistics.median(b):.2f}" if a and b else "-"
        print(f"| {test_id} | {PATHS.get(test_id, '?')} | {spread(a)} | {spread(b)} | {ratio} |")
        figures["seed_table"][test_id] = {"postgres_rps": a, "neo4j_rps": b}

    print("\nCeilings, reads/s (before / after the matrix), and blocklab's shares of its own client's")
    for name, results in (("PostgreSQL", pg), ("PostgreSQL at 1 ms", rtt), ("Neo4j", neo)):
        for c in results["conditions"]["ceilings"]:
            before, after = c.get("before") or {}, c.get("after") or {}
            print(f"  {name}, {c['client']}: {before.get('reads_per_s', 0):.0f} / {after.get('reads_per_s', 0):.0f}"
                  f" (database {before.get('db_cpu_per_query_us') or 0:.0f} us CPU a read; set by "
                  f"{before.get('bound')}){'; ' + c['failure'] if c.get('failure') else ''}")
            figures["ceilings"].setdefault(name, []).append(c)
        own, _ = ceiling_of(results, "blocklab")
        if own:
            for t in results["tests"]:
                if t["target"] == "blocklab" and t["test_id"] != 1 and t["status"] == "ok":
                    shares = [r["rps"] * (2 if t["test_id"] in (4, 8) else 1) / own for r in t["runs"]]
                    print(f"    {PATHS.get(t['test_id'])}: share {', '.join(f'{s:.2f}' for s in shares)}")

    print("\nGoals")
    own, _ = ceiling_of(pg, "blocklab")
    shares = [r["rps"] / own for r in runs_of(pg, 3)] if own else []
    print(f"  /getDataAsync on PostgreSQL / its own client's ceiling ({own or 0:.0f}): "
          f"{', '.join(f'{s:.2f}' for s in shares)}; goal >= 0.9: {verdict(shares, 0.9)}")
    figures["goals"]["async_share_of_own_ceiling"] = {"values": shares, "goal": 0.9,
                                                      "verdict": verdict(shares, 0.9)}
    blocking = {r["run_id"]: r["rps"] for r in runs_of(rtt, 2)}
    ratios = [r["rps"] / blocking[r["run_id"]] for r in runs_of(rtt, 3) if blocking.get(r["run_id"])]
    pool = rtt["conditions"]["parameters"].get("db_pool")
    read_ms = rtt["conditions"].get("link", {}).get("linked_read_ms")
    little = f"; Little's law: {pool} connections / {read_ms:.2f} ms a read = {pool / read_ms * 1000:.0f} reads/s" \
        if pool and read_ms else ""
    print(f"  at 1 ms, /getDataAsync / /getData: {', '.join(f'{x:.2f}' for x in ratios)}; goal >= 3: "
          f"{verdict(ratios, 3.0)} (/getData {spread(list(blocking.values()))} req/s{little})")
    figures["goals"]["async_over_blocking_at_1ms"] = {"values": ratios, "goal": 3.0, "verdict": verdict(ratios, 3.0)}
    cpu_pg = [r["server_cpu_per_request_us"] for r in runs_of(pg, 3)]
    cpu_neo = [r["server_cpu_per_request_us"] for r in runs_of(neo, 3)]
    print(f"  server CPU per /getDataAsync, us: PostgreSQL {spread(cpu_pg)}, Neo4j {spread(cpu_neo)} (no goal)")
    figures["goals"]["server_cpu_per_async_us"] = {"postgres": cpu_pg, "neo4j": cpu_neo}
    if other:
        print("\nPools at 1 ms (requests/s, median [range]): defaults beside --pools")
        for test_id, flag in ((2, "db_pool"), (3, "db_async_connections")):
            a = [r["rps"] for r in runs_of(rtt, test_id)]
            b = [r["rps"] for r in runs_of(other, test_id)]
            print(f"  {PATHS[test_id]}: {flag} {rtt['conditions']['parameters'][flag]}: {spread(a)}; "
                  f"{flag} {other['conditions']['parameters'][flag]}: {spread(b)}")
            figures["goals"].setdefault("pools", {})[PATHS[test_id]] = {"default": a, "other": b}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
