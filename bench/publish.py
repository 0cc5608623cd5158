"""What publishing a snapshot costs a refresh (warehouse/snapshot.py), on a built warehouse.

`python -m bench.publish WAREHOUSE [--nights N]` (build one with `python -m bench.warehouse_gen`):
for each of N nights, one refresh of every provider's next scrape through flows.pipeline.load_all
(working copy, merges, checkpoint, flush, rename), with the two publish steps timed apart:
`copy_s` (the published file copied to the working file) and `publish_s` (flushed to disk and
renamed over the path, the folder flushed); `window_s` is the whole load_all. Prints one JSON
line per night. It changes the warehouse: run it on a copy.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any


def run(path: Path, nights: int) -> list[dict[str, Any]]:
    import duckdb

    from bench.warehouse_gen import PROVIDERS, current_offers, next_night
    from gpuledger.flows import pipeline
    from gpuledger.warehouse import snapshot
    from gpuledger.warehouse.records import Batch
    from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, utcnow

    timers = {"copy_s": 0.0, "publish_s": 0.0}
    real = {"copy_s": snapshot.start_working_copy, "publish_s": snapshot.publish}

    def timed(name: str) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return real[name](*a, **k)
            finally:
                timers[name] += time.perf_counter() - t
        return wrapper

    pipeline.start_working_copy, pipeline.publish = timed("copy_s"), timed("publish_s")
    results = []
    for night in range(1, nights + 1):
        con = duckdb.connect(str(path), read_only=True)
        outcomes = []
        now = utcnow() + timedelta(days=night)
        for p in PROVIDERS:
            b = Batch(p)
            b.offers = next_night(current_offers(con, p), 1000 + night)
            outcomes.append(ScrapeOutcome(p, "live", now, now, batch=b))
        con.close()
        for k in timers:
            timers[k] = 0.0
        t0 = time.perf_counter()
        reports = pipeline.load_all(path, outcomes, f"refresh-bench-{night}", AnomalyPolicy())
        window = time.perf_counter() - t0
        assert all(r.ok for r in reports), [(r.provider, r.error) for r in reports]
        results.append({"night": night, "bytes": path.stat().st_size, "window_s": round(window, 3),
                        **{k: round(v, 3) for k, v in timers.items()}})
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--nights", type=int, default=3)
    args = ap.parse_args()
    for row in run(args.path, args.nights):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
