"""Hyperbolic adapter: the real client against the replayed marketplace listing.

Hand-checked prices (adapters/recordings/hyperbolic/README.md): Hyperbolic's published maximum
prices per GPU-hour on https://docs.hyperbolic.xyz/docs/gpu-marketplace-pricing (H100 SXM 3.20,
A100 SXM 1.80, 4090 0.50, 3090 0.30 USD) and SkyPilot's catalog row of an H100 at 1.29 USD/h; the
API states them in US cents per GPU-hour.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuledger.adapters import hyperbolic
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "hyperbolic" / "marketplace.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hyperbolic.API_KEY_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def machine(doc: dict[str, Any], node: str) -> dict[str, Any]:
    return next(m for m in doc["instances"] if m["id"] == node)


def test_replayed_marketplace_gives_the_published_prices_per_gpu(replay: Any) -> None:
    server = replay("hyperbolic")
    batch = hyperbolic.fetch(replay_context(server, "hyperbolic"))
    rows = {o.instance_type: o for o in batch.offers}
    assert batch.counts() == {"offers": 9, "egress": 0, "storage": 0, "quarantined": 1}
    # maximum on-demand prices of the marketplace pricing page, in cents
    assert (rows["us-central-h100-001"].price_per_hour, rows["us-central-h100-001"].gpu_model) == (3.2, "H100-SXM")
    assert (rows["us-central-a100-007"].price_per_hour, rows["us-central-a100-007"].gpu_model) == (1.8, "A100-SXM4-80")
    assert (rows["us-west-4090-031"].price_per_hour, rows["us-west-4090-031"].gpu_model) == (0.5, "RTX-4090")
    assert rows["us-east-3090-052"].price_per_hour == 0.3
    assert rows["us-east-h100-014"].price_per_hour == 1.29  # SkyPilot's catalog
    [(host, req)] = server.requests
    assert (host, req.method, req.path, req.json_body()) == ("api.hyperbolic.xyz", "POST", "/v1/marketplace",
                                                              {"filters": {}})
    assert "authorization" not in req.headers  # the listing needs no key


def test_a_machine_is_one_gpu_with_its_free_gpus_as_the_count() -> None:
    rows = {o.instance_type: o for o in hyperbolic.parse_marketplace(body()).offers}
    h100 = rows["us-central-h100-001"]  # 8 GPUs, 3 reserved
    assert (h100.gpu_count, h100.available, h100.available_count, h100.region) == (1, True, 5, "us-central-1")
    assert (h100.gpu_memory_gb, h100.gpu_memory_gb_nominal, h100.gpu_name_reported) == (
        79.647, 80, "NVIDIA-H100-80GB-HBM3")
    assert json.loads(h100.provider_data)["gpus_total"] == 8
    assert (h100.billing_granularity_s, h100.minimum_charge_s) == (None, None)  # not documented
    assert (rows["us-east-h100-014"].available, rows["us-east-h100-014"].available_count) == (False, 0)  # all rented
    assert rows["us-east-3090-052"].available is False  # reserved
    assert (rows["us-west-h200-003"].gpu_model, rows["us-west-h200-003"].gpu_variant_exact) == ("H200-SXM", False)


def test_an_unknown_gpu_and_bad_machines_are_quarantined_and_the_rest_load() -> None:
    doc = body()
    machine(doc, "us-central-a100-007")["pricing"]["price"]["amount"] = -180
    del machine(doc, "us-west-4090-031")["pricing"]
    machine(doc, "eu-west-4090-044")["pricing"]["price"]["amount"] = "lots"
    doc["instances"].append(copy.deepcopy(machine(doc, "eu-north-a100-070")))
    batch = hyperbolic.parse_marketplace(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["us-east-3060ti-061"].startswith("gpu: unknown GPU name 'NVIDIA-GeForce-RTX-3060-Ti'")
    assert "price_per_hour must be positive" in reasons["us-central-a100-007"]
    assert reasons["us-west-4090-031"] == "schema: lacks 'pricing'"
    assert reasons["eu-west-4090-044"] == "pricing.price.amount 'lots' is not a number"
    assert reasons["eu-north-a100-070"].startswith("duplicate machine eu-north-a100-070")
    assert len(batch.offers) == 9 - 3


def test_a_changed_or_empty_answer_fails(replay: Any) -> None:
    with pytest.raises(SchemaDriftError, match="hyperbolic: .*'instances'"):
        hyperbolic.parse_marketplace({"machines": []})
    with pytest.raises(SourceError, match="hyperbolic: the marketplace returned no machines"):
        hyperbolic.parse_marketplace({"instances": []})
    server = replay("hyperbolic", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>down</html>"))
    with pytest.raises(SourceError, match="hyperbolic: .* did not answer JSON"):
        hyperbolic.fetch(replay_context(server, "hyperbolic"))


def test_the_key_is_sent_as_a_bearer_token_when_set(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hyperbolic.API_KEY_ENV, "hyp-test-key-123")
    server = replay("hyperbolic")
    assert len(hyperbolic.fetch(replay_context(server, "hyperbolic")).offers) == 9
    assert server.requests[0][1].headers["authorization"] == "Bearer hyp-test-key-123"


def test_provider_declaration() -> None:
    spec = hyperbolic.PROVIDER
    assert (spec.name, spec.source_kind, spec.facts.kind, spec.credentials_required) == (
        "hyperbolic", "api", "marketplace", False)
    assert spec.secret_env_vars == ("HYPERBOLIC_API_KEY",) and spec.anomaly.min_row_ratio == 0.2
