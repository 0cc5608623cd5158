"""RunPod adapter: the real docs samples, and fetch through httpx against the replay server.

Hand-checked values: the docs sample's prices (tests/fixtures/runpod/README.md) and the
recording's anchored prices (adapters/recordings/runpod/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import runpod
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import Exchange, Request
from tests.conftest import replay_context
from gpuledger.warehouse.gpus import canonicalize
from gpuledger.warehouse.records import Batch

FIX = Path(__file__).parent / "fixtures" / "runpod"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(runpod.API_KEY_ENV, raising=False)


def by_key(batch: Batch) -> dict[tuple[str, str, str], Any]:
    return {(o.region, o.instance_type, o.purchase_option): o for o in batch.offers}


def graphql_body(doc: dict[str, Any]) -> Any:
    return lambda host, req, ex: (200, {"Content-Type": "application/json"}, json.dumps(doc).encode())


def test_docs_sample_gives_three_offers_and_no_secure_spot() -> None:
    gt = json.loads((FIX / "runpod_docs_get_gpu_A100_80GB_PCIe.json").read_text())
    batch = Batch("runpod")
    runpod.add_gpu_type(batch, gt)
    rows = {(o.region, o.purchase_option): o for o in batch.offers}
    assert {k: o.price_per_hour for k, o in rows.items()} == {
        ("secure-cloud", "on_demand"): 1.89,
        ("community-cloud", "on_demand"): 1.59,
        ("community-cloud", "interruptible"): 0.89,
    }  # secureSpotPrice is null: no secure spot row
    o = rows[("community-cloud", "on_demand")]
    assert (o.instance_type, o.gpu_model, o.gpu_variant_exact, o.gpu_count) == (
        "1x NVIDIA A100 80GB PCIe", "A100-PCIe-80", True, 1)
    assert (o.gpu_memory_gb, o.gpu_memory_gb_nominal, o.gpu_vendor) == (80, 80, "NVIDIA")
    assert (o.available, o.available_count, o.availability_level) == (None, None, None)  # no stock block asked
    assert json.loads(o.provider_data)["display_name"] == "A100 80GB"
    assert batch.quarantined == []


def test_docs_gpu_list_ids_map_to_canonical_models() -> None:
    gpus = json.loads((FIX / "runpod_docs_get_gpus.json").read_text())
    got = {g["id"]: canonicalize("runpod", g["id"], g["memoryInGb"] * 1024)[0].gpu_model for g in gpus}
    assert got == {"NVIDIA A100 80GB PCIe": "A100-PCIe-80", "NVIDIA A100-SXM4-80GB": "A100-SXM4-80"}


def test_gpu_type_without_price_fields_is_schema_drift() -> None:
    short = json.loads((FIX / "runpod_docs_get_gpus.json").read_text())[0]  # id/displayName/memoryInGb only
    with pytest.raises(SchemaDriftError, match="runpod: gpuType 'NVIDIA A100 80GB PCIe' lacks"):
        runpod.add_gpu_type(Batch("runpod"), short)


@pytest.mark.parametrize(
    "gpu_id, model, exact",
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM", True),
        ("NVIDIA H200", "H200-SXM", True),  # on RunPod the bare name is the SXM part
        ("NVIDIA B300 SXM6 AC", "B300", True),
        ("Tesla V100-FHHL-16GB", "V100-PCIe-16", True),
        ("AMD Instinct MI300X OAM", "MI300X", True),
        ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada", True),
    ],
)
def test_runpod_ids_map_to_canonical_models(gpu_id: str, model: str, exact: bool) -> None:
    m, e = canonicalize("runpod", gpu_id)
    assert (m.gpu_model, e) == (model, exact)


@pytest.mark.parametrize(
    "stock, expected",
    [
        ({"stockStatus": "High", "maxUnreservedGpuCount": 90}, (True, 90, "high")),
        ({"stockStatus": "Low", "maxUnreservedGpuCount": 3}, (True, 3, "low")),
        ({"stockStatus": None, "maxUnreservedGpuCount": 0}, (False, 0, "none")),
        (None, (None, None, None)),
    ],
)
def test_stock_status_becomes_availability(stock: Any, expected: tuple[Any, Any, Any]) -> None:
    a = runpod.availability(stock)
    assert (a["available"], a["available_count"], a["availability_level"]) == expected


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx(replay: Any) -> None:
    server = replay("runpod")
    batch = runpod.fetch(replay_context(server, "runpod"))
    assert batch.counts() == {"offers": 85, "egress": 2, "storage": 5, "quarantined": 1}
    assert sum(o.purchase_option == "on_demand" for o in batch.offers) == 45
    assert sum(o.purchase_option == "interruptible" for o in batch.offers) == 40
    rows = by_key(batch)
    assert len(rows) == 85

    h100 = "1x NVIDIA H100 80GB HBM3"
    assert rows[("community-cloud", h100, "on_demand")].price_per_hour == 2.69
    assert rows[("secure-cloud", h100, "on_demand")].price_per_hour == 3.99
    assert rows[("secure-cloud", h100, "interruptible")].price_per_hour == 1.75
    c = rows[("community-cloud", h100, "on_demand")]
    assert (c.gpu_model, c.available, c.available_count, c.availability_level) == ("H100-SXM", True, 5, "low")
    assert (c.vcpus, c.ram_gb, c.billing_granularity_s, c.zone) == (16, 125, 1, "")
    assert json.loads(c.provider_data) == {
        "gpu_type_id": "NVIDIA H100 80GB HBM3", "display_name": "H100 SXM", "max_gpu_count": 8,
        "cloud": "community-cloud", "available_gpu_counts": [1, 2, 4], "minimum_bid_price": 1.5,
        "uninterruptable_price": 2.69}
    assert rows[("community-cloud", "1x NVIDIA GeForce RTX 4090", "on_demand")].price_per_hour == 0.34
    assert rows[("secure-cloud", "1x NVIDIA A100-SXM4-80GB", "on_demand")].price_per_hour == 1.79

    h200 = rows[("community-cloud", "1x NVIDIA H200", "on_demand")]  # listed, no stock
    assert (h200.available, h200.availability_level, h200.available_count) == (False, "none", 0)
    assert rows[("secure-cloud", "1x NVIDIA B300 SXM6 AC", "on_demand")].available is False
    # communityCloud false: no community rows; null spot price: no spot row.
    assert not any(k[1] == "1x NVIDIA B200" and k[0] == "community-cloud" for k in rows)
    assert ("secure-cloud", "1x NVIDIA B200", "interruptible") not in rows

    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert list(reasons) == ["community-cloud/NVIDIA L4/interruptible"]
    assert "price_per_hour must be positive" in reasons["community-cloud/NVIDIA L4/interruptible"]
    # Workstation cards named as RunPod names them, priced as recorded.
    assert rows[("community-cloud", "1x NVIDIA RTX A5000", "on_demand")].gpu_model == "RTX-A5000"
    assert rows[("secure-cloud", "1x NVIDIA RTX A4000", "on_demand")].price_per_hour == 0.25
    assert rows[("community-cloud", "1x NVIDIA A30", "interruptible")].price_per_hour == 0.11

    assert {(s.region, s.storage_class, s.usd_per_gb_month) for s in batch.storage} == {
        ("secure-cloud", "network-volume", 0.07), ("secure-cloud", "container-disk", 0.10),
        ("community-cloud", "container-disk", 0.10), ("secure-cloud", "pod-volume", 0.10),
        ("community-cloud", "pod-volume", 0.10)}
    assert {(e.region, e.destination, e.usd_per_gb) for e in batch.egress} == {
        ("secure-cloud", "internet", 0.0), ("community-cloud", "internet", 0.0)}

    # Two requests, neither paginated: the prices, then the stock levels.
    [(host, prices), (_, stock)] = server.requests
    assert (host, prices.method, prices.path) == ("api.runpod.io", "POST", "/graphql")
    assert [r.json_body()["operationName"] for r in (prices, stock)] == ["GpuTypePrices", "GpuTypeStock"]
    assert "lowestPrice" not in prices.json_body()["query"]
    assert "secureStock: lowestPrice(input: {gpuCount: 1, secureCloud: true})" in stock.json_body()["query"]
    assert "api_key" not in prices.params


def on_stock(answer: tuple[int, dict[str, str], bytes]) -> Any:
    """A hook answering the stock query with `answer`; the price query as recorded."""
    return lambda host, req, ex: answer if (req.json_body() or {}).get("operationName") == "GpuTypeStock" else None


@pytest.mark.parametrize("answer, reason", [
    ((500, {}, b"upstream timeout"), "runpod: api.runpod.io/graphql failed after 2 attempts: HTTP 500"),
    ((404, {}, b"not found"), "runpod: HTTP 404 from api.runpod.io/graphql"),
    ((200, {"Content-Type": "application/json"}, b'{"data": null, "errors": [{"message": "lowestPrice timed out"}]}'),
     "runpod: GraphQL error: lowestPrice timed out"),
    ((200, {"Content-Type": "application/json"}, b'{"data": {"gpuTypes": [{"secureStock": null}]}}'),
     "runpod: stock levels: the answer is malformed (KeyError: 'id')"),
    ((200, {"Content-Type": "application/json"}, b'{"data": {"gpuTypes": [{"id": "NVIDIA H200", "secureSt'),
     "runpod: api.runpod.io/graphql did not answer JSON"),
])
def test_a_failing_stock_answer_costs_only_the_stock_columns(replay: Any, answer: Any, reason: str) -> None:
    server = replay("runpod", hook=on_stock(answer))
    ctx = replay_context(server, "runpod")
    batch = runpod.fetch(ctx)
    assert list(ctx.degraded) == ["stock levels"] and ctx.degraded["stock levels"].startswith(reason)
    # The core offers load as recorded, their stock columns left unknown (the warehouse keeps the
    # last ones: PROVIDER declares them the enrichment's).
    assert batch.counts() == {"offers": 85, "egress": 2, "storage": 5, "quarantined": 1}
    h100 = by_key(batch)[("community-cloud", "1x NVIDIA H100 80GB HBM3", "on_demand")]
    assert (h100.price_per_hour, h100.available, h100.availability_level, h100.vcpus) == (2.69, None, None, None)
    assert json.loads(h100.provider_data)["available_gpu_counts"] is None
    spot = by_key(batch)[("secure-cloud", "1x NVIDIA H100 80GB HBM3", "interruptible")]
    assert (spot.price_per_hour, spot.interruption_risk_level) == (1.75, "unknown")
    [enrichment] = runpod.PROVIDER.enrichments
    assert enrichment.name == "stock levels" and not enrichment.options
    assert {"available", "available_count", "availability_level", "interruption_risk_level"} <= set(enrichment.columns)


def test_graphql_error_with_http_200_names_runpods_message(replay: Any) -> None:
    doc = {"data": None, "errors": [{"message": "Something went wrong. Please try again later.",
                                     "path": ["gpuTypes"], "extensions": {"code": "INTERNAL_SERVER_ERROR"}}]}
    server = replay("runpod", hook=graphql_body(doc))
    with pytest.raises(SourceError, match="runpod: GraphQL error: Something went wrong") as err:
        runpod.fetch(replay_context(server, "runpod"))
    assert not isinstance(err.value, SchemaDriftError)


def test_graphql_validation_error_is_schema_drift(replay: Any) -> None:
    doc = {"errors": [{"message": 'Cannot query field "secureSpotPrice" on type "GpuType".',
                       "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]}
    server = replay("runpod", hook=graphql_body(doc))
    expected = 'runpod: GraphQL rejected the query .*Cannot query field "secureSpotPrice"'
    with pytest.raises(SchemaDriftError, match=expected):
        runpod.fetch(replay_context(server, "runpod"))


def test_answer_without_gpu_types_is_schema_drift(replay: Any) -> None:
    server = replay("runpod", hook=graphql_body({"data": {}}))
    with pytest.raises(SchemaDriftError, match="runpod: GraphQL answer lacks data.gpuTypes"):
        runpod.fetch(replay_context(server, "runpod"))


def test_server_errors_are_retried_then_raised_without_the_key(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runpod.API_KEY_ENV, "rpa_secret_XYZ")
    server = replay("runpod", hook=lambda host, req, ex: (502, {}, b"Bad Gateway"))
    with pytest.raises(SourceError, match="runpod: api.runpod.io/graphql failed after 2 attempts") as err:
        runpod.fetch(replay_context(server, "runpod"))
    assert "rpa_secret_XYZ" not in str(err.value)
    assert len(server.requests) == 2
    assert server.requests[0][1].params["api_key"] == "rpa_secret_XYZ"  # the documented auth parameter


def test_key_does_not_change_what_the_recording_answers(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runpod.API_KEY_ENV, "rpa_secret_XYZ")
    server = replay("runpod")
    assert len(runpod.fetch(replay_context(server, "runpod")).offers) == 85


def test_one_failed_attempt_then_success(replay: Any) -> None:
    calls: list[int] = []

    def flaky(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        calls.append(1)
        return (500, {}, b"oops") if len(calls) == 1 else None

    server = replay("runpod", hook=flaky)
    assert len(runpod.fetch(replay_context(server, "runpod")).offers) == 85


def test_provider_declaration() -> None:
    assert runpod.PROVIDER.name == runpod.NAME == "runpod"
    assert runpod.PROVIDER.secret_env_vars == ("RUNPOD_API_KEY",) and not runpod.PROVIDER.credentials_required
    assert (runpod.PROVIDER.facts.billing_granularity_s, runpod.PROVIDER.facts.minimum_charge_s) == (1, None)
