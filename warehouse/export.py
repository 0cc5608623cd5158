"""Snapshots of the warehouse's tables as CSV and Parquet in a new timestamped folder with a manifest; CSV
cells are safe for spreadsheets (no formulas, no NUL) and typed from their first rows."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import uuid
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

import duckdb

from gpuledger.warehouse.freshness import provider_freshness
from gpuledger.warehouse.schema import SCHEMA_VERSION, SPECS, column_names, current_version
from gpuledger.warehouse.store import WarehouseError, utcnow

# The tables an export writes unless told which.
DEFAULT_TABLES = ("offers", "egress_prices", "storage_prices", "providers", "gpu_models", "scrape_runs")
# The rows `since` keeps: history versions in force from then on, quarantine entries and runs made since.
SINCE: dict[str, str] = {**{spec.history: "valid_to is null or valid_to > $since" for spec in SPECS},
                          "quarantine": "quarantined_at >= $since", "scrape_runs": "started_at >= $since"}
# content_hash is the merge's own fingerprint of a row, not data.
EXPORT_TABLES: dict[str, tuple[str, ...]] = {
    table: tuple(c for c in column_names(table) if c != "content_hash") for table in (*DEFAULT_TABLES, *SINCE)}
# The order of each table's rows: its key, then the time of its versions or entries (others: their first
# column, which is unique, then the next two).
ORDER: dict[str, tuple[str, ...]] = {**{spec.table: spec.key for spec in SPECS},
                                     **{spec.history: (*spec.key, "valid_from") for spec in SPECS},
                                     "quarantine": ("quarantined_at", "provider", "kind", "source_ref")}
# COPY options per format; CSV timestamps are UTC by the TimeZone export_snapshot sets.
COPY_OPTIONS = {"csv": "(format csv, header true, timestampformat '%Y-%m-%dT%H:%M:%S.%fZ')",
                "parquet": "(format parquet, compression zstd)"}
FORMATS = tuple(COPY_OPTIONS)
# OWASP CSV injection: a tab or CR first, or a trigger (= + - @ |, or fullwidth) after blanks and controls.
FORMULA = r"^([\t\r]|[\s\p{Z}\p{Cc}]*[=+\-@|\x{FF1D}\x{FF0B}\x{FF0D}\x{FF20}\x{FF5C}])"
NUL_SHOWN = "\u2400"


def _select(table: str, columns: Sequence[str], types: dict[str, str], csv: bool, since: bool) -> str:
    order = ", ".join(ORDER.get(table, columns[:3]))
    where = f" where {SINCE[table]}" if since and table in SINCE else ""
    if not csv:
        return f"select {', '.join(columns)} from {table}{where} order by {order}"
    parts = [f"case when regexp_matches({c}, '{FORMULA}') then chr(39) else '' end || "
             f"replace({c}, chr(0), '{NUL_SHOWN}') as {c}" if types.get(c) == "VARCHAR" else c for c in columns]
    # pandas reads a CSV in blocks and warns when a boolean column's blocks differ (all NULL: float;
    # some NULL: object): the first block gets a NULL of each boolean column too
    witnesses = [f"min(_n) filter (where {c} is {nullness})" for c in columns if types.get(c) != "VARCHAR"
                 for nullness in ("not null", "null")[:2 if types.get(c) == "BOOLEAN" else 1]]
    return (f"with t as (select *, row_number() over (order by {order}) as _n from {table}{where}), "
            f"w as (select unnest([{', '.join(witnesses) or 'null'}]) as _n from t) "
            f"select {', '.join(parts)} from t order by _n not in (select _n from w where _n is not null), _n")


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def older_warehouse(con: duckdb.DuckDBPyConnection) -> str | None:
    """Why a query of the tables failed when the warehouse is older than this gpuledger (a column or table
    missing), in place of DuckDB's binder error; None otherwise."""
    try:
        version = current_version(con)
    except duckdb.Error:
        return None
    return (f"the warehouse is at schema version {version}, this gpuledger reads version {SCHEMA_VERSION}: "
            "the next `gpuledger refresh` upgrades it in place") if version < SCHEMA_VERSION else None


def freshness(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The manifest's view of each provider's scrapes (warehouse.freshness)."""
    return {f.provider: {"last_success": f.last_ok.isoformat() if f.last_ok else None,
                         "last_attempt": f.last_attempt.isoformat() if f.last_attempt else None,
                         "last_state": f.last_state} for f in provider_freshness(con)}


def missing_folders(path: Path) -> list[Path]:
    """The folders of `path`, itself first, that do not exist: those mkdir(parents=True) makes, deepest first."""
    return [p for p in (path, *path.parents) if not p.exists()]


def _rename_free(tmp: Path, root: Path, stamp: str) -> Path:
    """`tmp` renamed to ROOT/STAMP, or STAMP-2, -3 ... when that is taken (by an export of the same second,
    perhaps at this moment: a rename never replaces a folder with files in it)."""
    n = 1
    while True:
        final = root / (stamp if n == 1 else f"{stamp}-{n}")
        if not final.exists():
            try:
                tmp.rename(final)
                return final
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise
        n += 1


def export_snapshot(con: duckdb.DuckDBPyConnection, out_dir: str | os.PathLike[str],
                    formats: Sequence[str] = FORMATS, tables: Sequence[str] | None = None,
                    since: datetime | None = None) -> Path:
    """Write `tables` (default DEFAULT_TABLES) to OUT_DIR/<UTC timestamp>/ and return that folder;
    `since` (aware) keeps the rows of the SINCE tables from then on. Sets the connection's TimeZone to UTC.
    The command line has checked `formats` (FORMATS; none: both) and `tables` (EXPORT_TABLES)."""
    formats = list(formats) or list(FORMATS)
    if (version := current_version(con)) > SCHEMA_VERSION:  # its later columns would be left out in silence
        raise WarehouseError(f"the warehouse is at schema version {version}, newer than this gpuledger's "
                             f"{SCHEMA_VERSION}: upgrade gpuledger to export it (nothing written)")
    root = Path(out_dir)
    created = missing_folders(root)

    def remove_created() -> None:  # a failed export leaves no folder it made (only empty ones: never another's)
        for folder in created:
            with suppress(OSError):
                folder.rmdir()

    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        remove_created()
        raise WarehouseError(f"cannot create export directory {root}: {err.strerror or err}") from err
    if not os.access(root, os.W_OK):
        raise WarehouseError(f"export directory {root} is not writable")
    now = utcnow()
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    # this export's own: another export into OUT_DIR in the same second has another (and never removes this one)
    tmp = root / f".{stamp}.{uuid.uuid4().hex[:12]}.partial"
    try:
        tmp.mkdir()
        con.execute("set TimeZone = 'UTC'")
        manifest: dict[str, Any] = {"exported_at": now.isoformat(timespec="seconds"), "schema_version": SCHEMA_VERSION,
                                    "since": since.isoformat() if since else None, "formats": list(formats),
                                    "tables": {}, "freshness": freshness(con)}
        params = {"since": since} if since else {}
        for table in tables or DEFAULT_TABLES:
            cols = EXPORT_TABLES[table]
            types = dict(con.execute("select column_name, data_type from information_schema.columns "
                                     "where table_name = ?", [table]).fetchall())
            files = []
            for fmt in formats:
                path = tmp / f"{table}.{fmt}"
                query = _select(table, cols, types, csv=(fmt == "csv"), since=since is not None)
                target = "'" + path.as_posix().replace("'", "''") + "'"  # COPY ... TO takes no parameter
                rows = con.execute(f"copy ({query}) to {target} {COPY_OPTIONS[fmt]}",
                                   params if table in SINCE else {}).fetchall()[0][0]
                files.append({"name": path.name, "format": fmt, "rows": rows, "bytes": path.stat().st_size,
                              "sha256": sha256_file(path)})
            manifest["tables"][table] = {"rows": files[0]["rows"], "files": files,
                                         "columns": [{"name": c, "type": types[c]} for c in cols]}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        final = _rename_free(tmp, root, stamp)
    except BaseException as err:  # Ctrl-C included: no half-written folder is left behind
        shutil.rmtree(tmp, ignore_errors=True)
        remove_created()
        if not isinstance(err, (OSError, duckdb.Error)):
            raise
        why = isinstance(err, duckdb.Error) and older_warehouse(con) or err
        raise WarehouseError(f"export to {root} failed, nothing written: {why}") from err
    return final
