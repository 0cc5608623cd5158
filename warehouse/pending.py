"""Fetched results waiting to be merged: nothing a refresh fetched is thrown away.

A refresh saves every provider's outcome (the parsed records, quarantined ones, notes, errors)
to `<db>.pending/<refresh_id>.json` before its write window opens, and removes the file once
the window is published. If the write cannot happen (a full disk, a read-only folder, a crash)
the file stays, with the reason (`write_error`) when there was one; the next refresh, or
`gpuledger refresh --resume`, merges it before its own results, older first, and `status`
lists it meanwhile. A saved outcome older than what the warehouse already holds for its
provider is not merged over it (it would set prices back): its run is recorded as failed
with the reason instead.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, TypeAdapter
from pydantic_core import PydanticSerializationError

from gpuledger.warehouse.capacity_blocks import CapacityBlockOffering
from gpuledger.warehouse.records import Batch, Quarantined, RECORD_TYPES
from gpuledger.warehouse.spot import SpotPricePoint
from gpuledger.warehouse.store import ScrapeOutcome

FORMAT = 2  # 2 adds the side tables' rows, the batch's provider and side_tables_only
READABLE_FORMATS = (1, 2)  # a format 1 file reads as one without side tables, as it was saved
_KINDS = {"offers": "offer", "egress": "egress", "storage": "storage"}
# The rows of the tables outside the SCD2 merge a batch carries, by Batch attribute.
_SIDE_TABLES: dict[str, type[BaseModel]] = {"spot_prices": SpotPricePoint, "capacity_blocks": CapacityBlockOffering}
# Every list of rows a batch carries, by Batch attribute, with the model that reads it back.
_ROW_MODELS: dict[str, type[BaseModel]] = {**{name: RECORD_TYPES[kind] for name, kind in _KINDS.items()},
                                           **_SIDE_TABLES}


@dataclass
class PendingRefresh:
    """One refresh's saved outcomes."""

    path: Path
    refresh_id: str
    saved_at: datetime
    outcomes: list[ScrapeOutcome] = field(default_factory=list)
    write_error: str | None = None

    @property
    def providers(self) -> list[str]:
        return [o.provider for o in self.outcomes]


def pending_dir(db: Path) -> Path:
    return Path(str(db) + ".pending")


# A saved file's document holds the records themselves; pydantic's serializer writes each as its
# model_dump(mode="json") would, in one pass of compiled code (the file of a world-scale refresh
# is some 100,000 records, written while the refresh waits).
_DOCUMENT = TypeAdapter(Any)


def _batch_doc(batch: Batch) -> dict[str, Any]:
    doc: dict[str, Any] = {name: list(getattr(batch, name)) for name in _ROW_MODELS}
    doc["provider"] = batch.provider  # a unit's batch holds another provider's rows (capacity blocks: aws)
    doc["quarantined"] = list(batch.quarantined)
    doc["notes"] = list(batch.notes)
    return doc


def _batch(provider: str, doc: dict[str, Any]) -> Batch:
    batch = Batch(doc.get("provider", provider))
    for name, model in _ROW_MODELS.items():
        rows = doc[name] if name in _KINDS else doc.get(name, [])  # format 1 saved no side tables
        setattr(batch, name, [model.model_validate(r) for r in rows])
    batch.quarantined = [Quarantined.model_validate(q) for q in doc["quarantined"]]
    batch.notes = list(doc["notes"])
    return batch


def _outcome_doc(o: ScrapeOutcome) -> dict[str, Any]:
    return {"provider": o.provider, "mode": o.mode, "started_at": o.started_at.isoformat(),
            "finished_at": o.finished_at.isoformat(), "error": o.error, "requests": o.requests,
            "provider_facts": o.provider_facts, "min_row_ratio": o.min_row_ratio,
            "side_tables_only": o.side_tables_only,
            "batch": _batch_doc(o.batch) if o.batch is not None else None}


def _outcome(doc: dict[str, Any]) -> ScrapeOutcome:
    return ScrapeOutcome(
        provider=doc["provider"], mode=doc["mode"], started_at=datetime.fromisoformat(doc["started_at"]),
        finished_at=datetime.fromisoformat(doc["finished_at"]), error=doc["error"], requests=doc["requests"],
        provider_facts=doc["provider_facts"], min_row_ratio=doc["min_row_ratio"],
        side_tables_only=doc.get("side_tables_only", False),
        batch=_batch(doc["provider"], doc["batch"]) if doc["batch"] is not None else None)


def _document_json(doc: dict[str, Any]) -> bytes:
    try:
        return _DOCUMENT.dump_json(doc)
    except PydanticSerializationError:
        # Text no UTF-8 can hold (a lone surrogate, from a provider's "\ud800" escape) is kept as
        # json's own \u escape, which reads back to the same string.
        return json.dumps(_DOCUMENT.dump_python(doc, mode="json")).encode("ascii")


def _write_atomically(path: Path, doc: dict[str, Any]) -> None:
    part = path.with_name(path.name + ".part")
    try:
        with open(part, "wb") as f:
            f.write(_document_json(doc))
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def save(db: Path, refresh_id: str, saved_at: datetime, outcomes: Sequence[ScrapeOutcome]) -> Path:
    """Keep a refresh's outcomes on disk until its write window is published; raises OSError."""
    folder = pending_dir(db)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{refresh_id}.json"
    _write_atomically(path, {"format": FORMAT, "refresh_id": refresh_id, "saved_at": saved_at.isoformat(),
                             "write_error": None, "outcomes": [_outcome_doc(o) for o in outcomes]})
    return path


def record_write_error(path: Path, error: str) -> None:
    """Say in the saved file why its write window failed (shown by `status`, noted on resume)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["write_error"] = error
    _write_atomically(path, doc)


def done(path: Path) -> None:
    """The outcomes are in the published warehouse: forget them."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


class PendingError(Exception):
    """A saved file cannot be read; the message names it."""


def load(path: Path) -> PendingRefresh:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") not in READABLE_FORMATS:
            raise ValueError(f"format {doc.get('format')!r}, expected one of {READABLE_FORMATS}")
        return PendingRefresh(path, doc["refresh_id"], datetime.fromisoformat(doc["saved_at"]),
                              [_outcome(o) for o in doc["outcomes"]], doc.get("write_error"))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise PendingError(f"cannot read the saved refresh {path}: {type(err).__name__}: {err}") from err


def waiting(db: Path) -> list[PendingRefresh]:
    """The saved refreshes of this warehouse, oldest first."""
    folder = pending_dir(db)
    if not folder.is_dir():
        return []
    return sorted((load(p) for p in folder.glob("*.json")), key=lambda p: p.saved_at)


def resumed_outcome(o: ScrapeOutcome, saved: PendingRefresh, last_ok: datetime | None) -> ScrapeOutcome:
    """A saved outcome as it is merged now: what happened to it noted on its run; refused when
    the warehouse already holds a newer successful scrape of its provider (`last_ok`)."""
    why = f"fetched by {saved.refresh_id}"
    if saved.write_error:
        why += f", whose write failed ({saved.write_error})"
    if last_ok is not None and last_ok >= o.started_at:
        return ScrapeOutcome(o.provider, o.mode, o.started_at, o.finished_at, requests=o.requests,
                             error=f"not merged: {why}; the warehouse already holds a later scrape "
                                   f"(finished {last_ok.isoformat(timespec='seconds')})")
    if o.batch is not None:
        o.batch.notes.append(f"resumed: {why}; merged later")
    elif o.error:
        o.error = f"{o.error} (resumed: {why})"
    return o
