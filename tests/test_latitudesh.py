"""Latitude.sh adapter: the plans API through httpx against the replay server.

Hand-checked prices: latitude.sh/pricing's plan data as captured live on 2026-08-22
(adapters/recordings/latitudesh/README.md): g3-h100-small 3.37 USD per hour in the United States,
g4-b300-large 128 (8x B300), g4-rtx6kpro-large 66 in Australia, 48 in the United States.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import latitudesh
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "latitudesh" / "plans-gpu.json"


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(latitudesh.API_KEY_ENV, raising=False)


def plans() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def regions(doc: dict[str, Any], slug: str) -> list[dict[str, Any]]:
    return next(p for p in doc["data"] if p["attributes"]["slug"] == slug)["attributes"]["regions"]


def test_fetch_through_httpx_prices_each_gpu_plan_per_region(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(latitudesh.API_KEY_ENV, "lsh_test_token_0123456789")
    server = replay("latitudesh")
    batch = latitudesh.fetch(replay_context(server, "latitudesh"))
    assert batch.counts() == {"offers": 6, "egress": 0, "storage": 0, "quarantined": 0}
    rows = {(o.instance_type, o.region): o for o in batch.offers}
    h100 = rows["g3-h100-small", "United States"]
    assert (h100.price_per_hour, h100.gpu_model, h100.gpu_variant_exact, h100.gpu_count) == (3.37, "H100-SXM", False, 1)
    assert (h100.vcpus, h100.ram_gb, h100.available, h100.availability_level) == (16, 192, False, "unavailable")
    b300 = rows["g4-b300-large", "United States"]
    assert (b300.price_per_hour, b300.price_per_gpu_hour, b300.gpu_model, b300.total_gpu_memory_gb) == (128, 16, "B300", 2304)
    # Latitude's "interconnect" here is the 800 Gbps RoCE network between servers, not an NVLink
    assert (b300.interconnect, b300.multinode_fabric) == (None, "800Gbps Dual Plane RoCE")
    rtx = rows["g4-rtx6kpro-large", "Australia"]
    assert (rtx.price_per_hour, rtx.price_per_gpu_hour, rtx.gpu_model, rtx.available) == (66, 8.25, "RTX-PRO-6000-S", True)
    assert rows["g4-rtx6kpro-large", "United States"].price_per_hour == 48
    assert json.loads(rtx.provider_data)["locations"] == {"available": ["SYD", "SYD2"], "in_stock": ["SYD2"]}
    assert json.loads(h100.provider_data)["usd_month"] == 1230
    assert ("g4-rtx6kpro-large", "United Kingdom") not in rows  # no USD price there: counted, not loaded
    assert batch.notes == ["latitudesh: 3 GPU plans of 3 listed, 7 plan regions; "
                           "skipped: 1 plan regions without an hourly price (not sold there)"]
    [(_, request)] = server.requests
    assert (request.path, request.params) == ("/plans", {"filter[gpu]": "true"})
    assert request.headers["authorization"] == "lsh_test_token_0123456789"  # the key as it is, no scheme


def test_live_without_a_key_is_missing_credentials() -> None:
    with pytest.raises(MissingCredentialsError, match="LATITUDESH_AUTH_TOKEN is not set"):
        latitudesh.fetch(SourceContext(provider="latitudesh", mode="live"))


def test_bad_regions_are_quarantined_and_the_rest_still_load() -> None:
    doc = plans()
    rtx = regions(doc, "g4-rtx6kpro-large")
    rtx[1]["pricing"]["USD"]["hour"] = -66  # Australia
    rtx[2]["pricing"]["USD"]["hour"] = math.nan  # Japan
    twin = copy.deepcopy(rtx[0])
    twin["pricing"]["USD"]["hour"] = 50
    rtx.insert(1, twin)  # United States listed twice
    rtx[-1]["pricing"] = {"BRL": {"hour": 240, "month": 87600, "year": 735840}}  # Netherlands: BRL only
    regions(doc, "g3-h100-small")[0]["pricing"]["USD"]["hour"] = "cheap"
    batch = latitudesh.parse_plans(doc)
    why = {q.source_ref: q.reason for q in batch.quarantined}
    assert set(why) == {"g4-rtx6kpro-large/Australia", "g4-rtx6kpro-large/Japan", "g4-rtx6kpro-large/United States",
                        "g4-rtx6kpro-large/Netherlands", "g3-h100-small/United States"}
    assert "positive" in why["g4-rtx6kpro-large/Australia"] and "finite" in why["g4-rtx6kpro-large/Japan"]
    assert why["g4-rtx6kpro-large/United States"].startswith("duplicate plan region g4-rtx6kpro-large/United States")
    assert why["g4-rtx6kpro-large/Netherlands"] == "price in BRL, not USD; no conversion is configured"
    assert why["g3-h100-small/United States"] == "g3-h100-small/United States: USD hour 'cheap' is not a number"
    assert [(o.instance_type, o.region, o.price_per_hour) for o in batch.offers] == [
        ("g4-b300-large", "United States", 128), ("g4-rtx6kpro-large", "United States", 48)]


def test_an_unknown_gpu_is_quarantined_and_cpu_plans_are_left_out() -> None:
    doc = plans()
    doc["data"][2]["attributes"]["specs"]["gpu"]["type"] = "NVIDIA Z9000"
    cpu = copy.deepcopy(doc["data"][1])
    cpu["attributes"]["slug"], cpu["attributes"]["specs"]["gpu"] = "c3-large-x86", {}
    doc["data"].append(cpu)
    batch = latitudesh.parse_plans(doc)
    [bad] = batch.quarantined
    assert bad.source_ref == "g3-h100-small/United States" and bad.reason.startswith("gpu: unknown GPU name 'NVIDIA Z9000'")
    assert len(batch.offers) == 5 and batch.notes[0].startswith("latitudesh: 3 GPU plans of 4 listed")


def test_a_changed_answer_is_schema_drift_and_no_gpu_region_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'data' list"):
        latitudesh.parse_plans({"errors": [{"status": "401"}]})
    doc = plans()
    for plan in doc["data"]:
        for region in plan["attributes"]["regions"]:
            region["pricing"]["USD"]["hourly"] = region["pricing"]["USD"].pop("hour")
    with pytest.raises(SchemaDriftError, match="no GPU plan region has a USD 'hour' price"):
        latitudesh.parse_plans(doc)
    with pytest.raises(SourceError, match="returned no GPU plan regions"):
        latitudesh.parse_plans({"data": []})


def test_a_rejected_key_is_a_source_error_naming_the_status(replay: Any) -> None:
    server = replay("latitudesh", hook=lambda host, req, ex: (401, {}, b'{"errors":[{"code":"UNAUTHORIZED"}]}'))
    with pytest.raises(SourceError, match="latitudesh: HTTP 401 from api.latitude.sh/plans"):
        latitudesh.fetch(replay_context(server, "latitudesh"))
