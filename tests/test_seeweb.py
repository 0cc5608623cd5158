"""Seeweb adapter: the ECS plans API through httpx against the replay server.

Hand-checked prices: SkyPilot's Seeweb catalog, built from Seeweb's API (adapters/recordings/seeweb/
README.md): ECS1GPU10 (1x H200) 2.6, ECS1GPU3 (1x A100 80GB) 0.99, ECS1GPU7 (1x L40S) 0.85 EUR per hour in
it-fr2. The recording converts at 1.1403 USD per EUR.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import seeweb
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "seeweb" / "plans.json"
RATE = 1.1403


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(seeweb.API_KEY_ENV, raising=False)
    monkeypatch.delenv("GPULEDGER_SEEWEB_USD_PER_EUR", raising=False)


def plans() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def test_fetch_through_httpx_converts_each_gpu_plans_eur_price(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(seeweb.API_KEY_ENV, "seeweb_test_token_0123456789")
    server = replay("seeweb")
    batch = seeweb.fetch(replay_context(server, "seeweb"))
    assert batch.counts() == {"offers": 7, "egress": 0, "storage": 0, "quarantined": 0}
    rows = {o.instance_type: o for o in batch.offers}
    h200 = rows["ECS1GPU10"]
    assert (h200.source_currency, h200.source_price_per_hour, h200.region) == ("EUR", 2.6, "it-fr2")
    assert h200.price_per_hour == pytest.approx(2.6 * RATE)
    assert (h200.gpu_model, h200.gpu_memory_gb, h200.vcpus, h200.ram_gb, h200.local_disk_gb) == (
        "H200-SXM", 141, 32, 256, 750)
    assert (rows["ECS1GPU3"].source_price_per_hour, rows["ECS1GPU3"].gpu_model) == (0.99, "A100-SXM4-80")
    assert (rows["ECS1GPU7"].source_price_per_hour, rows["ECS1GPU7"].gpu_model) == (0.85, "L40S")
    assert (rows["ECS2GPU7"].gpu_count, rows["ECS2GPU7"].source_price_per_hour) == (2, 1.7)
    assert rows["ECS1GPU12"].gpu_model == "RTX-PRO-6000-S"
    assert json.loads(h200.provider_data)["usd_per_eur"] == RATE
    assert "ECS1GPU8" not in rows  # the H100 plan is offered in no region now: counted in the notes
    assert "4 offered in no region now (ECS1GPU8, ECS1GPU, ECS1GPU11, ECS8GPU10)" in batch.notes[0]
    [(_, request)] = server.requests
    assert request.path == "/ecs/v2/plans" and request.headers["x-apitoken"] == "seeweb_test_token_0123456789"


def test_without_a_rate_every_eur_price_is_quarantined() -> None:
    batch = seeweb.parse_plans(plans(), None)
    assert batch.offers == [] and len(batch.quarantined) == 7
    assert {q.reason.split(": ", 1)[1] for q in batch.quarantined} == {
        "price in EUR, not USD; no conversion is configured (set GPULEDGER_SEEWEB_USD_PER_EUR)"}


def test_live_without_a_key_is_missing_credentials() -> None:
    with pytest.raises(MissingCredentialsError, match="ECSAPI_TOKEN is not set"):
        seeweb.fetch(SourceContext(provider="seeweb", mode="live"))


def test_live_without_a_rate_is_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ECSAPI_TOKEN", "seeweb-canary-token")
    monkeypatch.delenv("GPULEDGER_SEEWEB_USD_PER_EUR", raising=False)
    with pytest.raises(MissingCredentialsError, match="^seeweb: GPULEDGER_SEEWEB_USD_PER_EUR is not set; its prices are "
                                                      "in EUR"):
        seeweb.fetch(SourceContext(provider="seeweb", mode="live"))


def test_bad_plans_are_quarantined_and_the_rest_still_load() -> None:
    doc = plans()
    by_name = {p["name"]: p for p in doc["plans"]}
    by_name["ECS1GPU10"]["hourly_price"] = -2.6
    by_name["ECS1GPU3"]["hourly_price"] = math.nan
    by_name["ECS1GPU7"]["hourly_price"] = "n/a"
    by_name["ECS1GPU6"]["gpu_label"] = "Z9000 24GB"
    doc["plans"].append(copy.deepcopy(by_name["ECS1GPU2"]))
    batch = seeweb.parse_plans(doc, RATE)
    why = {q.source_ref: q.reason for q in batch.quarantined}
    assert "positive" in why["ECS1GPU10/it-fr2"] and "finite" in why["ECS1GPU3/it-fr2"]
    assert why["ECS1GPU7"] == "ECS1GPU7: hourly_price 'n/a' is not a number"
    assert why["ECS1GPU6/it-fr2"].startswith("gpu: unknown GPU name 'Z9000'")
    assert why["ECS1GPU2"].startswith("duplicate plan ECS1GPU2: listed again")
    assert sorted(o.instance_type for o in batch.offers) == ["ECS1GPU12", "ECS1GPU2", "ECS2GPU7"]


def test_a_changed_answer_is_schema_drift_and_no_gpu_plan_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'plans' list"):
        seeweb.parse_plans({"status": "error", "message": "invalid token"}, RATE)
    doc = plans()
    for p in doc["plans"]:
        p["price_hourly"] = p.pop("hourly_price")
    with pytest.raises(SchemaDriftError, match="no GPU plan has an 'hourly_price'"):
        seeweb.parse_plans(doc, RATE)
    with pytest.raises(SourceError, match="returned no GPU plans"):
        seeweb.parse_plans({"status": "ok", "plans": [p for p in plans()["plans"] if not p["gpu"]]}, RATE)
