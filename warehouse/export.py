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

from gpuledger.warehouse.freshness import provider_freshness
from gpuledger.warehouse.schema import SCHEMA_VERSION, column_names
from gpuledger.warehouse.store import WarehouseError, utcnow

# content_hash is the merge's own fingerprint of a row, not data.
EXPORT_TABLES: dict[str, tuple[str, ...]] = {
    table: tuple(c for c in column_names(table) if c != "content_hash")
    for table in ("offers", "egress_prices", "storage_prices", "providers", "gpu_models", "scrape_runs")}
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
    """The manifest's view of each provider's scrapes (warehouse.freshness)."""
    return {f.provider: {"last_success": f.last_ok.isoformat() if f.last_ok else None,
                         "last_attempt": f.last_attempt.isoformat() if f.last_attempt else None,
                         "last_state": f.last_state} for f in provider_freshness(con)}


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
