"""Benchmark 3 on a warehouse holding a year of nightly history (bench.warehouse_gen), 100,000 offers:

- history: "what did X cost on date D" point-in-time lookups in offer_history, p95 over many runs with
  varied parameters on a read-only connection; the baseline is the same statements with DuckDB's
  optimizer off (PRAGMA disable_optimizer) in the same process;
- recommend(): four requests (one a sharded full fine-tune) on a long-lived read-only connection, p95;
- exports: warehouse.export.export_snapshot of `offers` as CSV and as Parquet; the baseline writes
  the same rows from Python (csv.writer over fetched rows; pyarrow.parquet over a table built from
  fetched rows).
"""

from __future__ import annotations

import csv
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable

from bench.common import Result, percentile, say, tmp_root

RECOMMEND_P95_MS = 50.0
HISTORY_P95_MS = 200.0
EXPORT_TARGET_S = 1.0


def year_warehouse(offers: int) -> tuple[Path, dict[str, Any]]:
    from bench.warehouse_gen import build

    path = tmp_root() / f"year_{offers}.duckdb"
    info_path = path.with_suffix(".json")
    t0 = time.perf_counter()
    info = build(path, offers=offers)
    info["build_s"] = round(time.perf_counter() - t0, 1)
    info_path.write_text(json.dumps(info))
    say(f"  built {path.name}: {info['offers']:,} offers, {info['offer_history']:,} history rows, "
        f"{info['bytes'] / 1e6:.0f} MB, in {info['build_s']} s")
    return path, info


# -- history and recommend -------------------------------------------------------------------------

def _p95(fn: Callable[[Any], Any], params: list[Any]) -> tuple[float, float]:
    samples = []
    for x in params:
        t0 = time.perf_counter()
        fn(x)
        samples.append(time.perf_counter() - t0)
    return percentile(samples, 95) * 1000, percentile(samples, 50) * 1000


def bench_queries(path: Path, quick: bool) -> list[Result]:
    from gpuledger.warehouse.recommender.recommend import RecommendRequest
    from gpuledger.warehouse.store import open_reader

    say("[3] history query and recommend()")
    con = open_reader(path, allow_files=True)  # read-only; unlocked so the baseline can turn the optimizer off
    try:
        rng = random.Random(11)
        n = 20 if quick else 60
        keys = con.execute("select provider, region, zone, instance_type, purchase_option from offers "
                           "using sample 2000 rows").fetchall()
        t0, t1 = con.execute("select min(valid_from), max(valid_from) from offer_history").fetchall()[0]
        hist = [(k, t0 + (t1 - t0) * rng.random()) for k in (rng.choice(keys) for _ in range(n))]

        def point_in_time(kd: Any) -> Any:
            return con.execute("select price_per_hour from offer_history where provider = ? and region = ? and zone = ? "
                               "and instance_type = ? and purchase_option = ? and valid_from <= ? "
                               "and (valid_to is null or valid_to > ?)", [*kd[0], kd[1], kd[1]]).fetchall()

        point_in_time(hist[0])  # warm-up
        p95, p50 = _p95(point_in_time, hist)
        con.execute("pragma disable_optimizer")
        try:
            b95, _ = _p95(point_in_time, hist[: max(3, n // 3)])
        finally:
            con.execute("pragma enable_optimizer")
        say(f"  price of X on date D: p95 {p95:.1f} ms (p50 {p50:.1f} ms); optimizer off p95 {b95:.1f} ms")
        reqs = [RecommendRequest(model="llama-3-8b", method="qlora"),
                RecommendRequest(model="llama-3-70b", method="qlora", spot=True),
                RecommendRequest(model="mistral-7b", method="lora", region="eu-"),
                RecommendRequest(model="llama-3-8b", method="full", max_gpus=8)]
        rec = _bench_recommend(path, con, reqs, [reqs[i % len(reqs)] for i in range(12 if quick else 40)])
    finally:
        con.close()
    return [
        Result("3", "point-in-time history query, p95", p95, "ms", HISTORY_P95_MS, ratio=b95 / p95,
               ratio_label="optimizer-off p95 / p95"),
        Result("3", "recommend() (4 requests, incl. a sharded full fine-tune), p95", rec["p95_ms"], "ms",
               RECOMMEND_P95_MS, ratio=rec["optimizer_off_p95_ms"] / rec["p95_ms"],
               ratio_label="optimizer-off p95 / p95",
               notes=f"p50 {rec['p50_ms']:.0f} ms; first call on a new connection {rec['first_call_ms']:.0f} ms",
               extra=rec),
    ]


def _bench_recommend(path: Path, con: Any, reqs: list[Any], params: list[Any]) -> dict[str, float]:
    """recommend() on a long-lived read-only connection (as a service holds one), against the same
    requests with DuckDB's optimizer off in the same run; and the first call on a new connection."""
    from gpuledger.warehouse.recommender.recommend import recommend
    from gpuledger.warehouse.store import open_reader

    for r in reqs:
        if not recommend(con, r).candidates:
            raise AssertionError(f"recommend() found no candidate for {r}")
    p95, p50 = _p95(lambda r: recommend(con, r), params)
    con.execute("pragma disable_optimizer")
    try:
        off95, off50 = _p95(lambda r: recommend(con, r), params[: max(4, len(params) // 3)])
    finally:
        con.execute("pragma enable_optimizer")
    fresh = open_reader(path, allow_files=True)  # the configuration of `con`, which stays open
    try:
        t0 = time.perf_counter()
        recommend(fresh, reqs[0])
        first = (time.perf_counter() - t0) * 1000
    finally:
        fresh.close()
    say(f"  recommend(): p95 {p95:.1f} ms (p50 {p50:.1f} ms); optimizer off p95 {off95:.1f} ms (p50 "
        f"{off50:.1f}); first call on a new connection {first:.0f} ms")
    return {"p95_ms": p95, "p50_ms": p50, "optimizer_off_p95_ms": off95, "optimizer_off_p50_ms": off50,
            "first_call_ms": first}


# -- exports -------------------------------------------------------------------------

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _baseline_csv(con: Any, out: Path) -> None:
    from gpuledger.warehouse.export import EXPORT_TABLES

    cols = EXPORT_TABLES["offers"]
    rows = con.execute(f"select {', '.join(cols)} from offers order by {', '.join(cols[:3])}").fetchall()
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow(["'" + v if isinstance(v, str) and v.startswith(FORMULA_PREFIXES) else v for v in r])


def _baseline_parquet(con: Any, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gpuledger.warehouse.export import EXPORT_TABLES

    cols = EXPORT_TABLES["offers"]
    rows = con.execute(f"select {', '.join(cols)} from offers order by {', '.join(cols[:3])}").fetchall()
    table = pa.Table.from_pylist([dict(zip(cols, r)) for r in rows])
    pq.write_table(table, out, compression="zstd")


def bench_exports(path: Path, quick: bool) -> list[Result]:
    from gpuledger.warehouse.export import export_snapshot
    from gpuledger.warehouse.store import open_reader

    say("[3] exports")
    out_root = tmp_root() / "exports"
    shutil.rmtree(out_root, ignore_errors=True)
    con = open_reader(path, allow_files=True)
    results = []
    try:
        n = con.execute("select count(*) from offers").fetchall()[0][0]
        reps = 2 if quick else 3
        for fmt, base_fn in (("csv", _baseline_csv), ("parquet", _baseline_parquet)):
            export_snapshot(con, out_root / "warm", formats=(fmt,), tables=["offers"])
            ours = base = float("inf")
            for i in range(reps):
                t0 = time.perf_counter()
                folder = export_snapshot(con, out_root / fmt, formats=(fmt,), tables=["offers"])
                ours = min(ours, time.perf_counter() - t0)
                t0 = time.perf_counter()
                base_fn(con, out_root / f"baseline-{i}.{fmt}")
                base = min(base, time.perf_counter() - t0)
            size = (folder / f"offers.{fmt}").stat().st_size
            say(f"  {fmt}: export_snapshot {ours:.2f} s ({size / 1e6:.1f} MB), Python writer {base:.2f} s")
            results.append(Result("3", f"export_snapshot offers ({n:,} rows) as {fmt.upper()}", ours, "s",
                                  EXPORT_TARGET_S, ratio=base / ours, ratio_label="Python writer / export_snapshot",
                                  extra={"bytes": size, "baseline_s": base}))
    finally:
        con.close()
        shutil.rmtree(out_root, ignore_errors=True)
    return results


def run(quick: bool = False, keep: bool = False) -> list[Result]:
    offers = 100_000
    say(f"[3] building a warehouse with {offers:,} offers and a year of nightly history"
        + (" (quick: 30 nights)" if quick else ""))
    if quick:
        from bench.warehouse_gen import build

        path = tmp_root() / "year_quick.duckdb"
        t0 = time.perf_counter()
        info = build(path, offers=offers, nights=30)
        say(f"  built {path.name}: {info['offers']:,} offers, {info['offer_history']:,} history rows in "
            f"{time.perf_counter() - t0:.0f} s")
    else:
        path, info = year_warehouse(offers)
    try:
        results = bench_queries(path, quick)
        results += bench_exports(path, quick)
    finally:
        if not keep:
            for p in (path, Path(str(path) + ".wal"), path.with_suffix(".json")):
                p.unlink(missing_ok=True)
    for r in results:
        r.extra["warehouse"] = info
    return results
