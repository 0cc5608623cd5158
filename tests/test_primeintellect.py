"""Prime Intellect adapter: the real client against the replayed, paged availability listing.

Hand-checked prices (adapters/recordings/primeintellect/README.md): SkyPilot's catalog generated from
this API (skypilot-catalog catalogs/v8/primeintellect/vms.csv): oblivus 1x A100 80 GB PCIe in MON1
1.4755 and 2x 2.9455, primecompute 8x H100 20.0, dc_roan 8x H100 15.92, dc_wildebeest 8x B200 35.2
and 1x H200 2.99 USD per hour for the whole offer.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest

from gpuledger.adapters import primeintellect as pi
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.registry import SOURCES
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "primeintellect" / "gpus-page-1.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pi.API_KEY_ENV, raising=False)


def items() -> list[dict[str, Any]]:
    return json.loads(BODY.read_text())["items"]


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.region): o for o in batch.offers}


def test_replayed_listing_gives_the_catalog_prices_and_names_the_clouds(replay: Any) -> None:
    server = replay("primeintellect")
    batch = pi.fetch(replay_context(server, "primeintellect"))
    r = rows(batch)
    assert batch.counts() == {"offers": 8, "egress": 0, "storage": 0, "quarantined": 1}
    assert r[("oblivus/A100_PCIE_80GB/1x", "MON1")].price_per_hour == 1.4755
    assert r[("oblivus/A100_PCIE_80GB/2x", "MON1")].price_per_gpu_hour == 2.9455 / 2
    h100 = r[("primecompute/NVIDIA H100 80GB HBM3_8/8x", "US")]
    assert (h100.price_per_hour, h100.gpu_count, h100.gpu_model, h100.operated_by) == (20.0, 8, "H100-SXM",
                                                                                         "primecompute")
    assert r[("dc_roan/h100-sxm5-80gb_eth/8x", "a3111bd4-550a-47d0-838a-0a52bff2ae3f")].price_per_hour == 15.92
    b200 = r[("dc_wildebeest/gpu-b200-sxm_8gpu-160vcpu-1792gb/8x", "us-central1")]
    assert (b200.price_per_hour, b200.gpu_model, b200.gpu_memory_gb, b200.vcpus, b200.ram_gb) == (
        35.2, "B200", 180.0, 160, 1792)
    assert r[("dc_wildebeest/gpu-h200-sxm_1gpu-16vcpu-200gb/1x", "eu-west1")].price_per_hour == 2.99
    assert r[("dc_wildebeest/gpu-h200-sxm_8gpu-128vcpu-1600gb/8x", "eu-north1")].available is False
    [(host, req)] = server.requests
    assert (host, req.path, req.params) == ("api.primeintellect.ai", "/api/v1/availability/gpus",
                                            {"page": "1", "page_size": "100"})


def test_clouds_with_their_own_source_are_skipped_and_counted() -> None:
    batch = pi.parse_offers(items(), sources=SOURCES)
    assert batch.notes == [
        "1 offer run by crusoecloud: skipped, crusoe is loaded from its own source",
        "2 offers run by datacrunch: skipped, verda is loaded from its own source",
        "1 offer run by hyperstack: skipped, hyperstack is loaded from its own source",
        "2 offers run by lambdalabs: skipped, lambda is loaded from its own source",
        "1 offer run by nebius: skipped, nebius is loaded from its own source"]
    assert not {o.operated_by for o in batch.offers} & {"lambdalabs", "hyperstack", "datacrunch", "nebius"}
    # with no source of its own, a cloud's offers are loaded under its name
    alone = pi.parse_offers(items(), sources=["aws"])
    assert Counter(o.operated_by for o in alone.offers)["lambdalabs"] == 2 and not alone.notes
    assert (pi.own_source("Massed-Compute", ["massedcompute"]), pi.own_source("latitude", ["latitudesh"])) == (
        "massedcompute", "latitudesh")


def test_an_unstated_edition_spot_offers_and_bad_items() -> None:
    data = items()
    pro6000 = next(i for i in data if i["gpuType"] == "RTX_PRO_6000B_96GB")
    bad = [copy.deepcopy(data[0]) for _ in range(4)]
    bad[0].update(cloudId="neg", prices=dict(bad[0]["prices"], onDemand=-1.0))
    bad[1].update(cloudId="eur", prices=dict(bad[1]["prices"], currency="EUR"))
    bad[2].pop("gpuCount")
    bad[2]["cloudId"] = "nocount"
    spot = dict(copy.deepcopy(data[0]), cloudId="spotty", isSpot=True, prices=dict(data[0]["prices"], onDemand=0.9))
    batch = pi.parse_offers(data + bad + [spot], sources=SOURCES)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons[f"primecompute/{pro6000['cloudId']}/US"].startswith(
        "gpu: unknown GPU name 'RTX_PRO_6000B_96GB PCIe'")  # server or workstation edition: not guessed
    assert "price_per_hour must be positive" in reasons["oblivus/neg/MON1"]
    assert reasons["oblivus/eur"] == "price in EUR, not USD; no conversion is configured"
    assert reasons["oblivus/nocount"] == "schema: lacks 'gpuCount'"
    assert reasons["oblivus/A100_PCIE_80GB/MON1"].startswith("duplicate offer oblivus/A100_PCIE_80GB in MON1")
    assert rows(batch)[("oblivus/spotty/1x", "MON1")].purchase_option == "spot"


def test_every_page_is_read_until_the_total_count(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pi, "PAGE_SIZE", 10)
    data = items()

    def pages(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        page, size = int(req.params["page"]), int(req.params["page_size"])
        doc = {"items": data[(page - 1) * size:page * size], "totalCount": len(data)}
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    server = replay("primeintellect", hook=pages)
    ctx = replay_context(server, "primeintellect")
    assert len(pi.fetch(ctx).offers) == 8
    assert [r.params["page"] for _, r in server.requests] == ["1", "2"] and ctx.pages == {"GPU availability": 2}


def test_a_changed_or_empty_answer_fails(replay: Any) -> None:
    def answer(doc: Any) -> Any:
        return lambda host, req, ex: (200, {"Content-Type": "application/json"}, json.dumps(doc).encode())

    with pytest.raises(SchemaDriftError, match="primeintellect: .*'items' list or 'totalCount'"):
        pi.fetch(replay_context(replay("primeintellect", hook=answer({"offers": []})), "primeintellect"))
    with pytest.raises(SourceError, match="primeintellect: the availability API returned no GPU offers"):
        pi.fetch(replay_context(replay("primeintellect", hook=answer({"items": [], "totalCount": 0})),
                                "primeintellect"))


def test_missing_key_in_live_mode_raises_before_any_request() -> None:
    ctx = SourceContext(provider="primeintellect", mode="live")
    with pytest.raises(MissingCredentialsError, match="primeintellect: PRIME_API_KEY is not set"):
        pi.fetch(ctx)
    assert ctx.requests_made == 0


def test_the_key_is_sent_as_a_bearer_token(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(pi.API_KEY_ENV, "pi_secret_789xyz")
    server = replay("primeintellect")
    assert len(pi.fetch(replay_context(server, "primeintellect")).offers) == 8
    assert server.requests[0][1].headers["authorization"] == "Bearer pi_secret_789xyz"


def test_provider_declaration() -> None:
    spec = pi.PROVIDER
    assert (spec.name, spec.source_kind, spec.facts.kind, spec.credentials_required) == (
        "primeintellect", "api", "aggregator", True)
    assert spec.secret_env_vars == ("PRIME_API_KEY",)
