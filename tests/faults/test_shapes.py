"""The body shapes recordings declare for the fault matrix: checked in seconds, and the edits
they drive checked on a small body by hand."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from gpuledger.adapters.registry import SOURCES
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, load_manifest
from tests.faults.providers import CUSTOM
from tests.faults.shapes import JsonShape, check_shape, edit_json, load_shape

DECLARING = sorted(name for name in SOURCES if name not in CUSTOM)


@pytest.mark.parametrize("provider", DECLARING)
def test_a_source_without_fault_code_declares_a_shape_that_fits_its_recording(provider: str) -> None:
    folder = BUNDLED_RECORDINGS / provider
    shape = load_shape(folder)
    assert shape is not None, f"{provider}: add {folder.name}/faults.json (see tests/faults/shapes.py)"
    _, exchanges = load_manifest(folder)
    bodies = [json.loads(ex.body()) for ex in exchanges if ex.path == shape.records.path and ex.status == 200]
    assert check_shape(shape, bodies) == [], provider


CATALOGUE = {"data": {"items": [
    {"id": "vm-1", "kind": "cpu", "prices": [{"currency": "USD", "value": 0.10}]},
    {"id": "gpu-1", "kind": "gpu", "prices": [{"currency": "USD", "value": "2.00"}]},
    {"id": "gpu-2", "kind": "gpu", "prices": [{"currency": "USD", "value": 3.5}]},
]}}
SHAPE = JsonShape.model_validate({"records": {
    "path": "/v1/catalogue", "at": "data.items", "key": "id", "price": "prices.0.value",
    "currency": "prices.0.currency", "where": {"kind": "gpu"}}})


def edited(fault: str, oracle: bool = False) -> tuple[dict, SimpleNamespace]:
    edit = SimpleNamespace(fault=fault, oracle=oracle, victim=None)
    body = edit_json(SHAPE, edit, SimpleNamespace(path="/v1/catalogue"), json.dumps(CATALOGUE).encode())
    assert body is not None, fault
    return json.loads(body), edit


def test_row_level_faults_hit_the_first_record_the_source_owns() -> None:
    doc, edit = edited("price_negative")
    assert edit.victim == "gpu-1"  # vm-1 is priced but not the source's own (where)
    assert [i["prices"][0]["value"] for i in doc["data"]["items"]] == [0.10, "-2.0", 3.5]
    doc, _ = edited("price_nan")
    assert doc["data"]["items"][1]["prices"][0]["value"] == "nan"
    doc, _ = edited("price_negative", oracle=True)
    assert [i["id"] for i in doc["data"]["items"]] == ["vm-1", "gpu-2"]
    doc, edit = edited("duplicates")
    assert [(i["id"], i["prices"][0]["value"]) for i in doc["data"]["items"]] == [
        ("vm-1", 0.10), ("gpu-1", "2.00"), ("gpu-1", "2.5000"), ("gpu-2", 3.5)]


def test_whole_body_faults() -> None:
    doc, _ = edited("price_x100")
    assert [i["prices"][0]["value"] for i in doc["data"]["items"]] == [10.0, "200.0000", 350.0]
    doc, _ = edited("empty")
    assert doc["data"]["items"] == []
    doc, _ = edited("currency")
    assert {i["prices"][0]["currency"] for i in doc["data"]["items"]} == {"EUR"}
    doc, _ = edited("schema_drift")
    assert all("value" not in i["prices"][0] and "value_v2" in i["prices"][0] for i in doc["data"]["items"])


def test_a_shape_that_does_not_fit_says_why() -> None:
    wrong = JsonShape.model_validate({"records": {"path": "/v1/catalogue", "at": "data.items", "key": "id",
                                                  "price": "prices.0.amount", "where": {"kind": "gpu"}}})
    assert check_shape(wrong, [CATALOGUE]) == ["no record has a positive price at 'prices.0.amount'"]
    elsewhere = JsonShape.model_validate({"records": {"path": "/v1/catalogue", "at": "items", "key": "id",
                                                      "price": "prices.0.value"}})
    assert check_shape(elsewhere, [CATALOGUE]) == ["`at` 'items' does not lead to a list in a recorded body"]
