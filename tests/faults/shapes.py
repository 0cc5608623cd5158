"""Data faults for a JSON API, from the shape its recording declares beside itself.

A source whose prices come as a JSON list of records needs no fault code of its own: its
recording folder holds `faults.json`, naming the request that carries the records and where
in each record the key, the price and (if any) the currency are:

    {
      "records": {
        "path": "/v1/instances",       request path whose answers hold the records
        "at": "data.instances",        dotted path from the body to the list (or an object's values: "data.*";
                                       ".": the body itself is the list; "data.sites[].gpus": the lists
                                       inside each element of a list, taken together)
        "key": "id",                   dotted path to the field that names a record (the victim is found by it)
        "price": "price.hourly",       dotted path to the price inside a record (a number or numeric text)
        "currency": "price.currency",  optional: the field holding the currency code
        "where": {"kind": "gpu"}       optional: only records with these values are the source's own
      },
      "outcome": {"currency": "n/a"}   optional: overrides of what a fault must lead to
    }

A dotted path steps into lists by index ("prices.0.value"). `where` keeps the one record a
row-level fault corrupts among those the source loads (a catalogue lists more than GPUs); its
keys are dotted paths too.

From it every data fault is a plausible change of that format: the list emptied, 90% of it
gone, every price x100 (cents read as dollars), one record's price negative or NaN, one record
duplicated at another price, the price field renamed, every currency switched to EUR.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SHAPE_FILE = "faults.json"


class RecordShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(pattern=r"^/")
    at: str = Field(min_length=1)
    key: str = Field(min_length=1)
    price: str = Field(min_length=1)
    currency: str | None = None
    where: dict[str, Any] = {}


class JsonShape(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    records: RecordShape
    outcome: dict[str, str] = {}


def load_shape(recording: Path) -> JsonShape | None:
    """The shape `recording` declares, or None when it declares none."""
    path = recording / SHAPE_FILE
    if not path.exists():
        return None
    return JsonShape.model_validate_json(path.read_text())


def _step(doc: Any, part: str) -> Any:
    return doc[int(part)] if isinstance(doc, list) else doc[part]


def _get(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = _step(doc, part)
    return doc


def _parent(doc: Any, dotted: str) -> tuple[Any, Any]:
    """The container holding the last step of `dotted`, and that step (an index into a list)."""
    *head, last = dotted.split(".")
    for part in head:
        doc = _step(doc, part)
    return doc, int(last) if isinstance(doc, list) else last


ROOT = "."  # `at` for a body that is the record list itself


NESTED = "[]."  # in `at`: every element of the list before it, then the path after it


def _lists(doc: Any, at: str) -> list[tuple[Any, Any]]:
    """The (container, field) pairs whose values are the record lists of `at` ("a.b", "a[].b", ".")."""
    if NESTED in at:
        outer, inner = at.split(NESTED, 1)
        return [pair for element in _get(doc, outer) for pair in _lists(element, inner)]
    return [_parent(doc, at)]


def _records(doc: Any, at: str) -> list[dict[str, Any]]:
    """The record list of a body (a live view: edits reach the body), for "a.b", "a.*", "a[].b" or "."."""
    if at == ROOT:
        return doc
    if at.endswith(".*") or at == "*":
        holder = _get(doc, at[:-2]) if at != "*" else doc
        return list(holder.values())
    return [r for parent, field in _lists(doc, at) for r in parent[field]]


def _set_records(doc: Any, at: str, records: list[dict[str, Any]], keep: set[int]) -> None:
    """Keep only the records whose id() is in `keep`."""
    if at == ROOT:
        doc[:] = [r for r in records if id(r) in keep]
    elif at.endswith(".*") or at == "*":
        holder = _get(doc, at[:-2]) if at != "*" else doc
        for k in [k for k, v in holder.items() if id(v) not in keep]:
            del holder[k]
    else:
        for parent, field in _lists(doc, at):
            parent[field] = [r for r in parent[field] if id(r) in keep]


def _value(record: Any, dotted: str) -> Any:
    try:
        return _get(record, dotted)
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _own(record: Any, where: dict[str, Any]) -> bool:
    return all(_value(record, k) == v for k, v in where.items())


def _price(record: dict[str, Any], dotted: str) -> float | None:
    try:
        value = float(_get(record, dotted))
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value > 0 else None


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, str):
        return f"{float(value) * factor:.4f}"
    return round(float(value) * factor, 6)


def edit_json(shape: JsonShape, edit: Any, req: Any, body: bytes) -> bytes | None:
    """The faulted body of one answer, or None when this fault leaves it alone."""
    spec = shape.records
    if req.path != spec.path:
        return None
    doc = json.loads(body)
    records = _records(doc, spec.at)
    if not records:
        return None
    priced = [r for r in records if _price(r, spec.price) is not None]
    own = [r for r in priced if _own(r, spec.where)]
    keys = [_value(r, spec.key) for r in records]
    victim = next((r for r in own if keys.count(_value(r, spec.key)) == 1), None)
    fault = edit.fault
    if fault == "empty":
        _set_records(doc, spec.at, records, set())
    elif fault == "rows_90pct_gone":
        _set_records(doc, spec.at, records, {id(r) for r in records[: max(1, len(records) // 10)]})
    elif fault == "price_x100":
        for r in priced:
            parent, last = _parent(r, spec.price)
            parent[last] = _scaled(parent[last], 100)
    elif fault in ("price_negative", "price_nan"):
        if victim is None:
            return None
        edit.victim = str(_value(victim, spec.key))
        if edit.oracle:
            _set_records(doc, spec.at, records, {id(r) for r in records if r is not victim})
        else:
            parent, last = _parent(victim, spec.price)
            number = float(parent[last])
            bad: Any = -number if fault == "price_negative" else float("nan")
            parent[last] = str(bad) if isinstance(parent[last], str) else bad
    elif fault == "duplicates":
        # An object's values cannot hold one key twice: a JSON object has no duplicates to fake.
        if victim is None or edit.oracle or spec.at.endswith("*"):
            return None
        edit.victim = str(_value(victim, spec.key))
        twin = copy.deepcopy(victim)
        parent, last = _parent(twin, spec.price)
        parent[last] = _scaled(parent[last], 1.25)
        lists = [doc] if spec.at == ROOT else [parent[field] for parent, field in _lists(doc, spec.at)]
        items = next(items for items in lists if any(r is victim for r in items))
        items.insert(next(n for n, r in enumerate(items) if r is victim) + 1, twin)
    elif fault == "schema_drift":  # the price field renamed in every record
        for r in priced:
            parent, last = _parent(r, spec.price)
            if isinstance(parent, list):
                raise ValueError(f"faults.json: the price path {spec.price!r} must end in a field name")
            parent[f"{last}_v2"] = parent.pop(last)
    elif fault == "currency":
        if spec.currency is None:
            return None
        for r in priced:
            parent, last = _parent(r, spec.currency)
            parent[last] = "EUR"
    else:
        return None
    return json.dumps(doc, allow_nan=True).encode()


def check_shape(shape: JsonShape, bodies: list[Any]) -> list[str]:
    """What is wrong with a declared shape against the recorded bodies of its request ([] if nothing)."""
    spec = shape.records
    problems: list[str] = []
    records: list[dict[str, Any]] = []
    for doc in bodies:
        try:
            records += _records(doc, spec.at)
        except (KeyError, IndexError, TypeError, ValueError):
            problems.append(f"`at` {spec.at!r} does not lead to a list in a recorded body")
    if not bodies:
        problems.append(f"no recorded answer to {spec.path}")
    priced = [r for r in records if _price(r, spec.price) is not None]
    if records and not priced:
        problems.append(f"no record has a positive price at {spec.price!r}")
    own = [r for r in priced if _own(r, spec.where)]
    if priced and not own:
        problems.append(f"no priced record matches `where` {spec.where}")
    if own and not all(_value(r, spec.key) is not None for r in own):
        problems.append(f"a record lacks the key field {spec.key!r}")
    if spec.currency is not None:
        for r in own:
            try:
                _get(r, spec.currency)
            except (KeyError, IndexError, TypeError, ValueError):
                problems.append(f"the currency path {spec.currency!r} does not resolve in every record")
                break
    return problems
