"""python -m bench.world OUT [--scale small|world] [-p PROVIDER ...]: write a world-scale replay."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.world import SCALES, generate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.world", description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--scale", choices=SCALES, default="world")
    ap.add_argument("-p", "--provider", action="append", dest="providers")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    tallies = generate(args.out, args.scale, args.providers)
    print(f"{'provider':<14} {'source':<10} {'requests':>9} {'MB served':>10}")
    for t in tallies:
        print(f"{t['provider']:<14} {t['source']:<10} {t['exchanges']:>9,} {t['body_bytes'] / 1e6:>10.3f}")
    total = sum(t["body_bytes"] for t in tallies)
    print(f"{'all':<14} {'':<10} {sum(t['exchanges'] for t in tallies):>9,} {total / 1e6:>10.3f}"
          f"   ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
