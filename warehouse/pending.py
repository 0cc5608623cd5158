"""Fetched results waiting to be merged: the hand-off between a provider's fetch and the merge.

A fetch leaves in `<db>.pending/<refresh_id>/` a `<provider>.<table>.json` per table and, last and
atomically, `<provider>.json` (the run). `warehouse.store.merge_pending` removes them once the merged
warehouse is published; what a failed write leaves waits for the next refresh or `--resume`.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from gpuledger.warehouse.records import Batch, Quarantined
from gpuledger.warehouse.schema import (
    AVAILABILITY_FIELDS, CAPACITY_BLOCK_FIELDS, EGRESS, OFFERS, SPOT_PRICE_FIELDS, STORAGE, TABLES as COLUMNS,
    arrow_schema,
)

if TYPE_CHECKING:
    import pyarrow as pa

SCD2_TABLES = {"offers": OFFERS, "egress": EGRESS, "storage": STORAGE}  # Batch attribute -> its table
# Batch attribute -> (the warehouse table whose column types it takes, the columns it carries)
TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    **{name: (spec.table, spec.columns) for name, spec in SCD2_TABLES.items()},
    "spot_prices": ("spot_price_history", SPOT_PRICE_FIELDS),
    "capacity_blocks": ("capacity_block_offerings", CAPACITY_BLOCK_FIELDS),
    "availability": ("availability_history", AVAILABILITY_FIELDS),
}
FORMAT = 3


@dataclass
class ScrapeOutcome:
    """One provider's scrape as the merge takes it: its run and its rows as Arrow tables."""

    provider: str
    mode: str  # live | replay | record
    started_at: datetime
    finished_at: datetime
    state: str = "ok"  # ok | unchanged | failed | not_configured | interrupted
    error: str | None = None
    requests: int = 0
    bytes_fetched: int = 0
    provider_facts: dict[str, Any] | None = None
    min_row_ratio: float | None = None  # the source's own row-drop threshold
    side_tables_only: bool = False  # loads another provider's side tables only (capacity blocks)
    notes: list[str] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)  # Quarantined fields
    # Enrichments that failed: {"name", "reason", "options", "columns"} (adapters.contract.Enrichment)
    degraded: list[dict[str, Any]] = field(default_factory=list)
    # What proved the answers current (adapters.base.SourceContext.new_validators), kept by the merge
    validators: dict[str, str] = field(default_factory=dict)
    # TABLES keys -> the records (from a fetch) or their Arrow table (as the merge reads them)
    tables: dict[str, Any] = field(default_factory=dict, repr=False)
    refresh_id: str = ""  # the refresh that fetched it
    path: Path | None = None  # its JSON file, once saved

    def count(self, table: str) -> int:
        return len(self.tables.get(table, ()))  # a list of records or an Arrow table

    def table(self, name: str) -> pa.Table | None:
        """The rows of table `name` as Arrow (None when there are none)."""
        rows = self.tables.get(name)
        return records_table(name, rows) if isinstance(rows, list) else rows


def _dedupe(records: list[Any], kind: str, quarantined: list[dict[str, str]], provider: str) -> list[Any]:
    """One record per key: a repeat with equal values is dropped, one with other values quarantined."""
    seen: dict[Any, Any] = {}
    for r in records:
        prior = seen.setdefault(r.key, r)
        if prior is not r and prior != r:
            quarantined.append(Quarantined(
                provider=provider, kind=kind, source_ref="/".join(map(str, r.key)),
                reason="duplicate key with different values; kept the first occurrence",
                raw=r.model_dump_json()).model_dump())
    return list(seen.values())


def records_table(name: str, records: Sequence[Any]) -> pa.Table:
    """Records (pydantic models) as the Arrow table of TABLES[name], column by column."""
    import pyarrow as pa

    table, columns = TABLES[name]
    schema = arrow_schema(table, columns)
    return pa.table([pa.array([getattr(r, c) for r in records], type=schema.field(c).type) for c in columns],
                    schema=schema)


def outcome_of(batch: Batch, provider: str | None = None, **run: Any) -> ScrapeOutcome:
    """A scrape's batch as its outcome, each table's records deduplicated; `provider`: the source that
    fetched it when not the batch's own; `run`: the ScrapeOutcome fields."""
    quarantined = [q.model_dump() for q in batch.quarantined]
    tables = {}
    for name in TABLES:
        records = getattr(batch, name)
        if name in SCD2_TABLES:
            records = _dedupe(records, SCD2_TABLES[name].kind, quarantined, batch.provider)
        if records:
            tables[name] = records
    return ScrapeOutcome(provider=provider or batch.provider, notes=list(batch.notes), quarantined=quarantined,
                         tables=tables, **run)


class PendingError(Exception):
    """A saved result cannot be read; the message names it."""


def pending_dir(db: Path) -> Path:
    return Path(str(db) + ".pending")


def _write(path: Path, data: bytes) -> None:
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)


def write(folder: Path, outcome: ScrapeOutcome) -> Path:
    """Save `outcome` in `folder`, a refresh's pending folder, the run file last. Raises OSError."""
    from pydantic import TypeAdapter

    rows = TypeAdapter(Any)  # each record as its model writes itself, computed columns included
    files = {f"{outcome.provider}.{name}.json": rows.dump_json(records) for name, records in outcome.tables.items()}
    # (not dataclasses.asdict: it would deep-copy every record of the tables left out here)
    doc = {f.name: getattr(outcome, f.name) for f in fields(outcome) if f.name not in ("tables", "path", "refresh_id")}
    doc.update(format=FORMAT, tables={name: outcome.count(name) for name in sorted(outcome.tables)},
               started_at=outcome.started_at.isoformat(), finished_at=outcome.finished_at.isoformat())
    # ensure_ascii: a lone surrogate a provider sent ("\ud800") travels as its escape
    files[f"{outcome.provider}.json"] = json.dumps(doc, ensure_ascii=True, default=str).encode("ascii")
    return save(folder, files)


def unlabelled(provider: str, message: str) -> str:
    """A stored message without the provider's name it starts with, for a line already labelled with it:
    "aws: x failed" -> "x failed", "not configured: lambda: KEY is not set" -> "not configured: KEY is not set"."""
    if message.startswith(f"{provider}: "):
        return message[len(provider) + 2:]
    named = f"not configured: {provider}: "
    return "not configured: " + message[len(named):] if message.startswith(named) else message


def describe(doc: dict[str, Any]) -> str:
    """One line on a saved outcome (its run document), for the refresh's log."""
    sent = f"({doc['requests']} requests, {doc['bytes_fetched']:,} bytes)"
    provider, state = doc["provider"], doc["state"]
    if state != "ok":
        said = unlabelled(provider, doc["error"] or "; ".join(doc["notes"]))
        if state != "not_configured":  # whose message begins "not configured: " already
            said = f"{state}: {said}"
        return f"{provider}: {said} {sent}"
    n = doc["tables"]
    return (f"{doc['provider']}: fetched {n.get('offers', 0)} offers, {n.get('egress', 0)} egress, "
            f"{n.get('storage', 0)} storage, {len(doc['quarantined'])} quarantined {sent}")


def save(folder: Path, files: dict[str, bytes]) -> Path:
    """Keep the files `write` made elsewhere in `folder`, the run file last; its path. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True)
    run = next(n for n in files if n.count(".") == 1)
    try:
        for name in sorted(files, key=lambda n: n == run):
            _write(folder / name, files[name])
    except BaseException:  # a signal or a full disk part-way: without its run file, nothing of it is a result
        if not (folder / run).exists():
            for name in files:
                for f in (folder / name, folder / f"{name}.part"):
                    f.unlink(missing_ok=True)
        raise
    return folder / run


def remove_partial(db: Path) -> None:
    """Remove what a save stopped part-way left (a killed refresh): `.part` files, and a provider's table files
    without its run file (or the run file set aside as unreadable). None of it is a result; the caller holds
    the refresh lock, so no save is under way."""
    for folder in (p for p in pending_dir(db).glob("*") if p.is_dir()):
        names = {f.name for f in folder.iterdir()}
        for name in names - {"write-error.txt"}:
            provider = name.split(".")[0]
            if name.endswith(".part") or not {f"{provider}.json", f"{provider}.json.unreadable"} & names:
                (folder / name).unlink(missing_ok=True)
        if not any(f.name != "write-error.txt" for f in folder.iterdir()):
            (folder / "write-error.txt").unlink(missing_ok=True)
            with suppress(OSError):
                folder.rmdir()


def read(path: Path) -> ScrapeOutcome:
    """The outcome saved as `path` (its run file), its tables as Arrow; PendingError when it cannot be read."""
    import duckdb

    try:
        doc = json.loads(path.read_text(encoding="ascii"))
        if doc.pop("format", None) != FORMAT:
            raise ValueError("not a format this gpuledger reads")
        counts = doc.pop("tables")
        doc |= {k: datetime.fromisoformat(doc[k]) for k in ("started_at", "finished_at")}
        tables = {}
        with duckdb.connect() as con:  # its own: merges of several warehouses may read at once
            for name, rows in counts.items():
                table, columns = TABLES[name]
                types = {c.name: c.type for c in COLUMNS[table]}
                tables[name] = con.sql(
                    "select * from read_json($path, format = 'array', columns = $columns)",
                    params={"path": str(path.with_name(f"{doc['provider']}.{name}.json")),
                            "columns": {c: types[c] for c in columns}},
                ).to_arrow_table().cast(arrow_schema(table, columns))
                if tables[name].num_rows != rows:
                    raise ValueError(f"{name} has {tables[name].num_rows} rows, the run says {rows}")
        return ScrapeOutcome(**doc, tables=tables, refresh_id=path.parent.name, path=path)
    except Exception as err:  # noqa: BLE001 - every way a file can be wrong, said in one line
        raise PendingError(f"cannot read the saved result {path}: {type(err).__name__}: {err}"[:500]) from None


def waiting(db: Path) -> list[Path]:
    """The run files of the saved outcomes of this warehouse, oldest refresh first."""
    return sorted((p for p in pending_dir(db).glob("*/*.json") if p.name.count(".") == 1),
                  key=lambda p: (p.parent.name, p.name))


def write_error(path: Path) -> str | None:
    """Why the merge of the refresh that saved `path` failed, if it did."""
    marker = path.parent / "write-error.txt"
    return marker.read_text(encoding="utf-8") if marker.exists() else None


def record_write_error(paths: Sequence[Path], error: str) -> None:
    for folder in {p.parent for p in paths}:
        with suppress(OSError):  # the results themselves are on disk; only the reason is missing
            (folder / "write-error.txt").write_text(error, encoding="utf-8")


def done(path: Path) -> None:
    """The outcome saved as `path` is published: remove its files (and its folder once empty)."""
    for f in path.parent.glob(f"{path.stem}.*"):
        f.unlink(missing_ok=True)
    left = [f for f in path.parent.iterdir() if f.name != "write-error.txt"] if path.parent.exists() else []
    if not left:
        (path.parent / "write-error.txt").unlink(missing_ok=True)
        with suppress(OSError):
            path.parent.rmdir()
