"""Spheron adapter: the real client against the replayed, paged GPU offers listing.

Hand-checked prices (adapters/recordings/spheron/README.md): SkyPilot's catalog generated from this
API (skypilot-catalog catalogs/v8/spheron/vms.csv): spheron-ai's 1x H100 PCIe in CANADA-1 2.0135,
its spot 1x A100 80 GB 1.1476, sesterce's 1x H100 PCIe in montreal-canada-2 2.508, its 1x A100 SXM4
in calgary-canada-1 1.65 and its RTX 5090 in oslo-norway-3 0.858 USD per hour for the whole offer.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuledger.adapters import spheron
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.registry import SOURCES
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "spheron" / "gpu-offers-page-1.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(spheron.API_KEY_ENV, raising=False)


def groups() -> list[dict[str, Any]]:
    return json.loads(BODY.read_text())["data"]


def offer(data: list[dict[str, Any]], offer_id: str) -> dict[str, Any]:
    return next(o for g in data for o in g["offers"] if o["offerId"] == offer_id)


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.purchase_option): o for o in batch.offers}


def test_replayed_offers_give_the_catalog_prices(replay: Any) -> None:
    server = replay("spheron")
    batch = spheron.fetch(replay_context(server, "spheron"))
    r = rows(batch)
    assert batch.counts() == {"offers": 12, "egress": 0, "storage": 0, "quarantined": 1}
    h100 = r[("n3-H100x1__CANADA-1", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_model, h100.region, h100.operated_by) == (2.0135, "H100-PCIe", "CANADA-1",
                                                                                     "spheron-ai")
    assert r[("n3-A100x1-spot__CANADA-1", "spot")].price_per_hour == 1.1476  # a SPOT offer: spot only
    assert ("n3-A100x1-spot__CANADA-1", "on_demand") not in r
    assert r[("H100_668d6762247d03149a4c9474_montreal-canada-2", "on_demand")].price_per_hour == 2.508
    a100 = r[("A100_sxm4_66b9a4e034c5c91a4d6a625d_calgary-canada-1", "on_demand")]
    assert (a100.price_per_hour, a100.gpu_model, a100.operated_by) == (1.65, "A100-SXM4-80", "sesterce")
    assert r[("RTX5090_6788f4c0280fba46a71eb46f_oslo-norway-3", "on_demand")].price_per_hour == 0.858
    eight = r[("n3-H100x8__CANADA-1", "on_demand")]  # the whole offer's price, 8 GPUs
    assert (eight.gpu_count, eight.price_per_gpu_hour, eight.available) == (8, 16.0583 / 8, False)
    [(host, req)] = server.requests
    assert (host, req.path, req.params) == ("app.spheron.ai", "/api/gpu-offers", {"page": "1", "limit": "100"})
    assert "authorization" not in req.headers  # the offers are public


def test_clouds_with_their_own_source_are_skipped_and_counted_and_a_guess_is_not_made() -> None:
    batch = spheron.parse_offers(groups(), sources=SOURCES)
    assert batch.notes == ["1 offer run by data-crunch: skipped, verda is loaded from its own source",
                           "1 offer run by tensordock: skipped, tensordock is loaded from its own source"]
    [q] = batch.quarantined  # "H100_NVL" at 80 GB is not the 94 GB H100 NVL
    assert q.reason.startswith("gpu: unknown GPU name 'H100_NVL' with 81920 MiB")
    alone = rows(spheron.parse_offers(groups(), sources=["aws"]))
    assert alone[("1H100.80S.32V_FIN-03_500", "spot")].price_per_hour == 0.8015  # a DEDICATED offer's spot price
    assert alone[("1H100.80S.32V_FIN-03_500", "on_demand")].operated_by == "data-crunch"


def test_bad_offers_are_quarantined_whole_and_the_rest_load() -> None:
    data = groups()
    offer(data, "n3-H100x2__CANADA-1")["price"] = -4.0199
    del offer(data, "n3-A100x1__CANADA-1")["gpuCount"]
    offer(data, "L40Sx2_668d6762247d03149a4c947b_kansascity-usa-1")["price"] = "cheap"
    twin = dict(copy.deepcopy(offer(data, "RTX5090_6788f4c0280fba46a71eb46f_oslo-norway-3")), price=1.0)
    data[-1]["offers"].append(twin)
    batch = spheron.parse_offers(data, sources=SOURCES)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["spheron-ai/n3-H100x2__CANADA-1"] == "price -4.0199 is not a positive number"
    assert reasons["spheron-ai/n3-A100x1__CANADA-1"] == "schema: lacks 'gpuCount'"
    assert reasons["sesterce/L40Sx2_668d6762247d03149a4c947b_kansascity-usa-1"] == "price 'cheap' is not a number"
    assert reasons["sesterce/RTX5090_6788f4c0280fba46a71eb46f_oslo-norway-3"].startswith("duplicate offer")
    assert rows(batch)[("RTX5090_6788f4c0280fba46a71eb46f_oslo-norway-3", "on_demand")].price_per_hour == 0.858
    assert len(batch.offers) == 12 - 3


def test_every_page_is_read_until_the_total_pages(replay: Any) -> None:
    data = groups()

    def pages(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        page = int(req.params["page"])
        doc = {"data": data[:4] if page == 1 else data[4:], "totalPages": 2}
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    server = replay("spheron", hook=pages)
    ctx = replay_context(server, "spheron")
    assert len(spheron.fetch(ctx).offers) == 12
    assert [r.params["page"] for _, r in server.requests] == ["1", "2"] and ctx.pages == {"GPU offers": 2}


def test_a_changed_or_empty_answer_fails(replay: Any) -> None:
    def answer(doc: Any) -> Any:
        return lambda host, req, ex: (200, {"Content-Type": "application/json"}, json.dumps(doc).encode())

    with pytest.raises(SchemaDriftError, match="spheron: .*'data' list or 'totalPages'"):
        spheron.fetch(replay_context(replay("spheron", hook=answer({"offers": []})), "spheron"))
    with pytest.raises(SourceError, match="spheron: the offers API returned no GPU offers"):
        spheron.fetch(replay_context(replay("spheron", hook=answer({"data": [], "totalPages": 1})), "spheron"))


def test_the_key_is_sent_as_a_bearer_token_when_set(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(spheron.API_KEY_ENV, "sph-test-key-321")
    server = replay("spheron")
    assert len(spheron.fetch(replay_context(server, "spheron")).offers) == 12
    assert server.requests[0][1].headers["authorization"] == "Bearer sph-test-key-321"


def test_provider_declaration() -> None:
    spec = spheron.PROVIDER
    assert (spec.name, spec.source_kind, spec.facts.kind, spec.credentials_required) == (
        "spheron", "api", "aggregator", False)
    assert spec.secret_env_vars == ("SPHERON_API_KEY",)
