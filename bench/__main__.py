"""Run the gpuledger benchmarks and print one table: figure, target, ratio, pass/fail.

    python -m bench            # full scale
    python -m bench --quick    # small scale, a few minutes
    python -m bench --only 1 --json out.json

See docs/benchmarks.md for what each benchmark measures and the figures last measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from contextlib import ExitStack

from gpuledger import flows  # noqa: F401  (Prefect offline/quiet defaults, AWS metadata off)
from bench.common import Result, say, shared_prefect_api, table

# The user scenarios measured: the world refresh (its wall against the slowest provider alone, its
# peak memory, what a reader waits, recommend() and the page on the warehouse it leaves), AWS without
# credentials over a real link, and history queries and exports on a year of history.
BENCHES = {
    "1": ("world refresh", "bench.world_lines"),
    "2": ("AWS without credentials over a link", "bench.ingest"),
    "3": ("history query, recommend and export on a year of history", "bench.warehouse_bench"),
    "4": ("unchanged world refresh", "bench.unchanged"),
}
# The benchmarks whose flows run against a Prefect API server that is already up.
SHARED_PREFECT = ("1", "4")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small-scale run (a few minutes)")
    ap.add_argument("--only", nargs="+", metavar="N", help="benchmarks to run: 1 2 3 4")
    ap.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    ap.add_argument("--keep", action="store_true", help="keep generated data in the bench tmp folder")
    args = ap.parse_args(argv)
    chosen = list(dict.fromkeys(args.only or BENCHES))
    unknown = [n for n in chosen if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}")
    load = os.getloadavg()
    say(f"gpuledger benchmarks ({'quick' if args.quick else 'full'}): python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at start")
    results: list[Result] = []
    failed: list[str] = []
    started = time.perf_counter()
    with ExitStack() as stack:
        flows_in = [n for n in chosen if n in SHARED_PREFECT]
        if flows_in:
            t0 = time.perf_counter()
            stack.enter_context(shared_prefect_api())
            say(f"Prefect API server up in {time.perf_counter() - t0:.0f} s, shared by benchmark(s) "
                f"{', '.join(flows_in)}\n")
        _run_all(chosen, args, results, failed)
    say(f"all benchmarks: {time.perf_counter() - started:.0f} s; load average now {os.getloadavg()[0]:.1f}\n")
    print(table(results))
    for r in results:
        if r.notes:
            print(f"  [{r.bench}] {r.name}: {r.notes}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"quick": args.quick, "results": [r.as_dict() for r in results], "crashed": failed}, f,
                      indent=1, default=str)
    return 0 if results and all(r.ok for r in results) and not failed else 1


def _run_all(chosen: list[str], args: argparse.Namespace, results: list[Result], failed: list[str]) -> None:
    for n in chosen:
        name, module = BENCHES[n]
        t0 = time.perf_counter()
        try:
            mod = __import__(module, fromlist=["run"])
            kwargs = {"quick": args.quick}
            if n in ("2", "3"):
                kwargs["keep"] = args.keep
            results += mod.run(**kwargs)
        except Exception:
            failed.append(n)
            say(f"benchmark {n} ({name}) crashed:\n{traceback.format_exc()}")
        say(f"  ({name}: {time.perf_counter() - t0:.0f} s)\n")


if __name__ == "__main__":
    sys.exit(main())
