"""Novita AI adapter: the real client against the replayed products listing.

Hand-checked prices (adapters/recordings/novita/README.md): Novita's GPU page https://novita.ai/gpus
as transcribed on 2026-02-06: H100SXM 80GB on demand 1.45, spot 0.73; RTX4090 24GB on demand 0.67;
RTX5090 32GB on demand 0.63, spot 0.32 USD per GPU-hour. The API states them in 1/100000 USD.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import novita
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "novita" / "products.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(novita.API_KEY_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def product(doc: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in doc["data"] if p["id"] == pid)


def rows(batch: Any) -> dict[tuple[str, str, str], Any]:
    return {(o.instance_type, o.region, o.purchase_option): o for o in batch.offers}


def test_replayed_products_give_the_gpu_page_prices(replay: Any) -> None:
    server = replay("novita")
    batch = novita.fetch(replay_context(server, "novita"))
    r = rows(batch)
    assert batch.counts() == {"offers": 13, "egress": 0, "storage": 0, "quarantined": 0}
    h100 = r[("h100sxm-80g", "us-ca-01", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb) == (1.45, "H100-SXM", 1, 80.0)
    assert r[("h100sxm-80g", "eu-de-02", "spot")].price_per_hour == 0.73
    assert r[("rtx4090-24g", "as-jp-01", "on_demand")].price_per_hour == 0.67
    assert r[("rtx5090-32g", "us-ca-01", "on_demand")].price_per_hour == 0.63
    assert r[("rtx5090-32g", "us-ca-01", "spot")].price_per_hour == 0.32
    assert not [k for k in r if k[0] == "rtx4090-24g" and k[2] == "spot"]  # no spot price listed
    [(host, req)] = server.requests
    assert (host, req.method, req.path) == ("api.novita.ai", "GET", "/gpu-instance/openapi/v1/products")


def test_specs_availability_and_billing_come_from_the_product() -> None:
    r = rows(novita.parse_products(body()))
    h100 = r[("h100sxm-80g", "us-ca-01", "on_demand")]
    assert (h100.vcpus, h100.ram_gb, h100.local_disk_gb, h100.billing_granularity_s) == (16, 188, 200, 1)
    assert (h100.available, h100.availability_level, h100.interruption_risk_level) == (True, "normal", "none")
    assert r[("h100sxm-80g", "us-ca-01", "spot")].interruption_risk_level != "none"
    assert r[("h200sxm-141g", "us-tx-01", "on_demand")].available is False  # availableDeploy false
    sold_out = r[("rtx3090-24g", "global", "on_demand")]  # no cluster listed
    assert (sold_out.available, sold_out.price_per_hour) == (False, 0.21)


def test_bad_products_are_quarantined_whole_and_the_rest_load() -> None:
    doc = body()
    product(doc, "h100sxm-80g")["price"] = -145000  # its spot rows go with it
    product(doc, "rtx5090-32g")["price"] = math.nan
    del product(doc, "l40s-48g")["price"]
    product(doc, "rtx4090-24g")["name"] = "RTX4070 Super 12GB"
    doc["data"].append(dict(copy.deepcopy(product(doc, "a100sxm-80g")), price=200000))
    batch = novita.parse_products(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["h100sxm-80g"] == "price -145000.0 is not a positive number"
    assert reasons["rtx5090-32g"] == "price nan is not a positive number"
    assert reasons["l40s-48g"] == "schema: lacks 'price'"
    assert reasons["a100sxm-80g"].startswith("duplicate product a100sxm-80g")
    unknown = [q for q in batch.quarantined if q.reason.startswith("gpu: unknown GPU name 'RTX4070 Super 12GB'")]
    assert len(unknown) == 3  # one per cluster it is listed in
    assert {o.instance_type for o in batch.offers} == {"a100sxm-80g", "h200sxm-141g", "rtx3090-24g"}
    assert rows(batch)[("a100sxm-80g", "us-tx-01", "on_demand")].price_per_hour == 1.6  # the first listing kept


def test_a_changed_or_empty_answer_fails() -> None:
    with pytest.raises(SchemaDriftError, match="novita: .*'data'"):
        novita.parse_products({"products": []})
    with pytest.raises(SourceError, match="novita: the products answer returned no GPU products"):
        novita.parse_products({"data": []})


def test_missing_key_in_live_mode_raises_before_any_request() -> None:
    ctx = SourceContext(provider="novita", mode="live")
    with pytest.raises(MissingCredentialsError, match="novita: NOVITA_API_KEY is not set"):
        novita.fetch(ctx)
    assert ctx.requests_made == 0


def test_key_is_sent_as_bearer_and_never_appears_in_errors(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(novita.API_KEY_ENV, "nv_secret_abc123")
    server = replay("novita")
    assert len(novita.fetch(replay_context(server, "novita")).offers) == 13
    assert server.requests[0][1].headers["authorization"] == "Bearer nv_secret_abc123"

    def reject(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 401, {"Content-Type": "application/json"}, b'{"message": "invalid key nv_secret_abc123"}'

    server = replay("novita", hook=reject)
    with pytest.raises(SourceError, match="HTTP 401") as err:
        novita.fetch(replay_context(server, "novita"))
    assert "nv_secret_abc123" not in str(err.value)


def test_provider_declaration() -> None:
    spec = novita.PROVIDER
    assert (spec.name, spec.source_kind, spec.facts.kind, spec.credentials_required) == (
        "novita", "api", "gpu_cloud", True)
    assert spec.secret_env_vars == ("NOVITA_API_KEY",)
