"""Snapshots of the current tables as CSV and Parquet, with a manifest.

Each export goes to a new timestamped folder (never overwriting an earlier
one), written under a temporary name and renamed when complete, so a failed
export leaves no half snapshot. Columns are listed explicitly per table.
CSV text cells that a spreadsheet would run as a formula are prefixed with
an apostrophe; numeric columns stay numeric.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Sequence

import duckdb

from gpuledger.warehouse.schema import EGRESS, OFFERS, SCHEMA_VERSION, STORAGE
from gpuledger.warehouse.store import WarehouseError, utcnow

EXPORT_TABLES: dict[str, tuple[str, ...]] = {
    "offers": OFFERS.columns + ("first_seen", "last_seen", "run_id"),
    "egress_prices": EGRESS.columns + ("first_seen", "last_seen", "run_id"),
    "storage_prices": STORAGE.columns + ("first_seen", "last_seen", "run_id"),
    "providers": ("provider", "display_name", "kind", "billing_granularity_s", "minimum_charge_s", "billing_notes",
                  "storage_persists_when_stopped", "stopped_billing_notes", "access_ssh", "access_docker",
                  "access_jupyter", "multinode_interconnect", "interruptible_offer", "price_source",
                  "source_urls", "updated_at"),
    "gpu_models": ("gpu_model", "vendor", "family", "memory_gb", "memory_type", "memory_bandwidth_tbs",
                   "architecture", "bf16", "fp8", "fp4", "int8", "nvlink", "form_factor", "segment", "source"),
    "scrape_runs": ("run_id", "refresh_id", "provider", "mode", "started_at", "finished_at", "state",
                    "rows_parsed", "rows_loaded", "rows_quarantined", "egress_rows", "storage_rows",
                    "offers_new", "offers_changed", "offers_closed", "requests", "duration_s", "error", "notes"),
}
FORMATS = ("csv", "parquet")
# Leading characters that make a spreadsheet evaluate a cell (OWASP CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _select(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], neutralize: bool) -> str:
    types = dict(con.execute(
        "select column_name, data_type from information_schema.columns where table_name = ?", [table]).fetchall())
    parts = []
    for c in columns:
        if neutralize and types.get(c) == "VARCHAR":
            cond = " or ".join(f"starts_with({c}, {chr(39) + p + chr(39)})" for p in FORMULA_PREFIXES)
            parts.append(f"case when {cond} then '''' || {c} else {c} end as {c}")
        else:
            parts.append(c)
    order = ", ".join(columns[:3])
    return f"select {', '.join(parts)} from {table} order by {order}"


def freshness(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    rows = con.execute(
        """select provider, max(finished_at) filter (where state = 'ok') as last_success,
                  max(finished_at) as last_attempt, arg_max(state, finished_at) as last_state
           from scrape_runs group by provider order by provider""").fetchall()
    return {p: {"last_success": ls.isoformat() if ls else None, "last_attempt": la.isoformat() if la else None,
                "last_state": st} for p, ls, la, st in rows}


def export_snapshot(con: duckdb.DuckDBPyConnection, out_dir: str | os.PathLike[str],
                    formats: Sequence[str] = FORMATS, tables: Sequence[str] | None = None) -> Path:
    """Write the current tables to OUT_DIR/<UTC timestamp>/ and return that folder."""
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise WarehouseError(f"unknown export format(s) {bad}; choose from {', '.join(FORMATS)}")
    names = list(tables or EXPORT_TABLES)
    unknown = [t for t in names if t not in EXPORT_TABLES]
    if unknown:
        raise WarehouseError(f"unknown table(s) {unknown}; exportable: {', '.join(EXPORT_TABLES)}")
    root = Path(out_dir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise WarehouseError(f"cannot create export directory {root}: {err.strerror or err}") from err
    if not os.access(root, os.W_OK):
        raise WarehouseError(f"export directory {root} is not writable")
    now = utcnow()
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    final = root / stamp
    n = 1
    while final.exists():
        n += 1
        final = root / f"{stamp}-{n}"
    tmp = root / f".{final.name}.partial"
    try:
        tmp.mkdir()
        manifest: dict[str, Any] = {
            "exported_at": now.isoformat(timespec="seconds"), "schema_version": SCHEMA_VERSION,
            "formats": list(formats), "tables": {}, "freshness": freshness(con),
        }
        for table in names:
            cols = EXPORT_TABLES[table]
            count = con.execute(f"select count(*) from {table}").fetchall()[0][0]
            files = []
            for fmt in formats:
                path = tmp / f"{table}.{fmt}"
                query = _select(con, table, cols, neutralize=(fmt == "csv"))
                opts = "(format csv, header true)" if fmt == "csv" else "(format parquet, compression zstd)"
                con.execute(f"copy ({query}) to '{path.as_posix()}' {opts}")
                files.append(path.name)
            manifest["tables"][table] = {"rows": count, "files": files, "columns": list(cols)}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        tmp.rename(final)
    except (OSError, duckdb.Error) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WarehouseError(f"export to {root} failed, nothing written: {err}") from err
    return final
