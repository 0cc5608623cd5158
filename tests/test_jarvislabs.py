"""Jarvislabs adapter: the SDK's catalogue through httpx against the replay server.

Hand-checked prices: https://jarvislabs.ai/pricing as transcribed on 2026-09-20 (see
adapters/recordings/jarvislabs/README.md): H100 SXM 2.69, H200 SXM 3.99, A100 80GB 1.49,
A100 40GB 0.89, L4 0.44 USD per GPU-hour; storage 0.10 USD per GB-month.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import jarvislabs
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

FOLDER = BUNDLED_RECORDINGS / "jarvislabs"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JL_API_KEY", raising=False)


def body() -> dict[str, Any]:
    return json.loads((FOLDER / "server_meta.json").read_text())


def offers(batch: Any) -> dict[tuple[str, str, str], Any]:
    return {(o.region, o.instance_type, o.purchase_option): o for o in batch.offers}


def test_fetch_through_httpx_prices_every_listing(replay: Any) -> None:
    server = replay("jarvislabs")
    batch = jarvislabs.fetch(replay_context(server, "jarvislabs"))
    assert batch.counts() == {"offers": 10, "egress": 3, "storage": 3, "quarantined": 0}
    rows = offers(batch)
    # Checked by hand against jarvislabs.ai/pricing (transcribed 2026-09-20), USD per GPU-hour:
    h100 = rows[("india-noida-01", "H100-container", "on_demand")]
    assert h100.price_per_hour == 2.69
    assert rows[("europe-01", "H200-container-or-vm", "on_demand")].price_per_hour == 3.99
    assert rows[("india-noida-01", "A100-80GB-vm", "on_demand")].price_per_hour == 1.49
    assert rows[("india-chennai-01", "A100-container", "on_demand")].price_per_hour == 0.89
    assert rows[("india-noida-01", "L4-vm", "on_demand")].price_per_hour == 0.44

    assert (h100.gpu_count, h100.gpu_memory_gb, h100.vcpus, h100.ram_gb) == (1, 80, 16, 200)
    assert (h100.source_currency, h100.billing_granularity_s) == ("USD", 60)
    assert json.loads(h100.provider_data)["max_gpus_per_instance"] == 8
    assert {o.region for o in batch.offers} == {"india-noida-01", "india-chennai-01", "europe-01"}

    storage = {(s.region, s.usd_per_gb_month) for s in batch.storage}
    assert storage == {(r, 0.10) for r in ("india-noida-01", "india-chennai-01", "europe-01")}
    assert {(e.destination, e.usd_per_gb) for e in batch.egress} == {("same_region", 0.0)}

    assert [(h, r.method, r.path) for h, r in server.requests] == [
        ("backendn.jarvislabs.net", "GET", "/misc/"), ("backendn.jarvislabs.net", "GET", "/misc/server_meta")]


@pytest.mark.parametrize("listing, model, exact", [
    ("H100-container", "H100-SXM", True),  # the pricing page: "NVIDIA H100 SXM"
    ("A100-80GB-vm", "A100-SXM4-80", False),  # "A100 80GB": the form factor is not stated
    ("L4-vm", "L4", True),
    ("A30-container", "A30", True),
])
def test_gpu_names_map_to_canonical_models(replay: Any, listing: str, model: str, exact: bool) -> None:
    batch = jarvislabs.fetch(replay_context(replay("jarvislabs"), "jarvislabs"))
    [row] = [o for o in batch.offers if o.instance_type == listing and o.purchase_option == "on_demand"]
    assert (row.gpu_model, row.gpu_variant_exact) == (model, exact)


def test_more_gpu_names_map_variant_exact_only_where_the_source_says() -> None:
    batch = jarvislabs.parse_server_meta(body())
    by_name = {o.instance_type: o for o in batch.offers}
    assert (by_name["H200-container-or-vm"].gpu_model, by_name["H200-container-or-vm"].gpu_variant_exact) == (
        "H200-SXM", True)
    assert (by_name["A100-container"].gpu_model, by_name["A100-container"].gpu_variant_exact) == (
        "A100-SXM4-40", False)  # vram "40" picks the 40 GB A100; SXM or PCIe is not stated
    assert (by_name["RTX-PRO6000-vm"].gpu_model, by_name["RTX-PRO6000-vm"].gpu_variant_exact) == (
        "RTX-PRO-6000-S", False)


def test_free_gpus_are_the_availability_and_servers_are_merged() -> None:
    rows = offers(jarvislabs.parse_server_meta(body()))
    h100 = rows[("india-noida-01", "H100-container", "on_demand")]
    assert (h100.available, h100.available_count) == (True, 10)  # two servers: 8 + 2 effective free
    assert json.loads(h100.provider_data)["servers"] == 2
    h200 = rows[("europe-01", "H200-container-or-vm", "on_demand")]
    assert (h200.available, h200.available_count, h200.availability_level) == (False, 0, "none free")
    spot = rows[("india-noida-01", "L4-container", "spot")]
    assert (spot.price_per_hour, spot.available_count, spot.spot_savings_pct) == (0.29, 2, 34.09)
    assert rows[("india-noida-01", "L4-container", "on_demand")].available_count == 3  # effective, spot included
    assert not any(p == "spot" for (_, name, p) in rows if name != "L4-container")


def test_what_is_not_loaded_is_counted_in_the_notes() -> None:
    batch = jarvislabs.parse_server_meta(body())
    assert batch.notes[-1] == ("jarvislabs: 11 GPU rows, 9 GPU x region x workload listings; skipped: "
                               "3 CPU-only VM sizes (cpu_meta), 1 rows in regions the SDK cannot create in (india-01)")
    assert any("internet egress is not priced" in n for n in batch.notes)


def test_bad_rows_are_quarantined_and_the_rest_still_load() -> None:
    doc = body()
    rows = doc["server_meta"]
    rows[3]["price_per_hour"] = -1.49  # A100-80GB vm: negative
    rows[2]["price_per_hour"] = "cheap"  # A30: not a number
    rows[7]["gpu_type"] = "QuantumGPU"  # unknown to the warehouse
    rows[1]["workload_type"] = "serverless"
    twin = copy.deepcopy(rows[9])
    twin["price_per_hour"] = 4.99  # H200 listed again at another price
    rows.append(twin)
    rows.append({"region": "india-noida-01", "price_per_hour": 1.0})
    batch = jarvislabs.parse_server_meta(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["A100-80GB-vm/india-noida-01"] == (
        "A100-80GB-vm/india-noida-01: price_per_hour -1.49 is not a positive finite number")
    assert reasons["A30-container/india-noida-01"] == "A30-container/india-noida-01: price_per_hour 'cheap' is not a number"
    assert reasons["QuantumGPU-vm/india-chennai-01"].startswith("gpu: unknown GPU name 'QuantumGPU'")
    assert reasons["L4-serverless/india-noida-01"] == (
        "L4-serverless: workload_type 'serverless' is not container, vm or null")
    assert reasons["H200-container-or-vm/europe-01"].startswith("duplicate listing H200-container-or-vm/europe-01 "
                                                                "at another price (4.99 against 3.99")
    assert reasons["None-container-or-vm"] == "schema: a server_meta row lacks 'gpu_type' or 'region'"
    assert len(batch.quarantined) == 6
    h200 = offers(batch)[("europe-01", "H200-container-or-vm", "on_demand")]
    assert h200.price_per_hour == 3.99  # the first listing kept
    assert len(batch.offers) == 10 - 4


def test_a_nan_price_is_quarantined_and_the_other_server_of_that_gpu_still_lists_it() -> None:
    doc = body()
    doc["server_meta"][4]["price_per_hour"] = math.nan  # the first of the two Noida H100 container servers
    batch = jarvislabs.parse_server_meta(doc)
    [bad] = batch.quarantined
    assert bad.source_ref == "H100-container/india-noida-01" and "finite" in bad.reason
    h100 = offers(batch)[("india-noida-01", "H100-container", "on_demand")]
    assert (h100.price_per_hour, h100.available_count) == (2.69, 2)  # the second server alone


def test_an_inr_account_is_quarantined_never_read_as_usd(replay: Any) -> None:
    def inr(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        return (200, JSON, b'{"success": true}') if req.path == "/misc/" else None

    batch = jarvislabs.fetch(replay_context(replay("jarvislabs", hook=inr), "jarvislabs"))
    assert not batch.offers and len(batch.quarantined) == 9
    assert {q.reason for q in batch.quarantined} == {"price in INR, not USD; no conversion is configured"}
    assert jarvislabs.parse_currency({"sucess": "True"}) == "INR"  # the backend's own misspelling, as the SDK reads it


def test_a_changed_answer_is_schema_drift_and_an_empty_one_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'server_meta' list"):
        jarvislabs.parse_server_meta({"detail": "Not authenticated"})
    renamed = {"server_meta": [{**{k: v for k, v in r.items() if k != "price_per_hour"}, "price": 1.0}
                               for r in body()["server_meta"]]}
    with pytest.raises(SchemaDriftError, match="no server_meta row has a 'price_per_hour'"):
        jarvislabs.parse_server_meta(renamed)
    with pytest.raises(SourceError, match="server_meta returned no GPU rows"):
        jarvislabs.parse_server_meta({"server_meta": [], "cpu_meta": {}})


def test_the_key_is_sent_as_a_bearer_token(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JL_API_KEY", "jl_test_key_0123456789")
    server = replay("jarvislabs")
    jarvislabs.fetch(replay_context(server, "jarvislabs"))
    assert {r.headers.get("authorization") for _, r in server.requests} == {"Bearer jl_test_key_0123456789"}


def test_live_without_a_key_is_missing_credentials() -> None:
    with pytest.raises(MissingCredentialsError, match="JL_API_KEY is not set"):
        jarvislabs.fetch(SourceContext(provider="jarvislabs", mode="live"))


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("jarvislabs", hook=lambda host, req, ex: (503, {}, b"busy"))
    with pytest.raises(SourceError, match="jarvislabs: backendn.jarvislabs.net/misc/ failed after 2"):
        jarvislabs.fetch(replay_context(server, "jarvislabs"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    def html(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        return (200, {"Content-Type": "text/html"}, b"<html>down</html>") if req.path == "/misc/server_meta" else None

    with pytest.raises(SourceError, match="jarvislabs: .*/misc/server_meta did not answer JSON"):
        jarvislabs.fetch(replay_context(replay("jarvislabs", hook=html), "jarvislabs"))


def test_provider_declaration() -> None:
    spec = jarvislabs.PROVIDER
    assert spec.name == jarvislabs.NAME == "jarvislabs" and spec.source_kind == "api"
    assert spec.secret_env_vars == ("JL_API_KEY",) and spec.credentials_required
    assert (spec.facts.access_jupyter, spec.facts.storage_persists_when_stopped) == (True, True)
