"""Vast.ai adapter: aggregation checked by hand on a small fixture, the keyset walk through httpx.

Every aggregate asserted on `small_offers.json` was computed by hand from that file
(tests/fixtures/vastai/README.md); the recording's values were read off its page bodies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import vastai
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context
from gpuledger.warehouse.records import Batch

FIX = Path(__file__).parent / "fixtures" / "vastai"
PAGES = BUNDLED_RECORDINGS / "vastai" / "search"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(vastai.API_KEY_ENV, raising=False)


def small_batch() -> Batch:
    return vastai.build_batch(json.loads((FIX / "small_offers.json").read_text())["offers"])


def rows(batch: Batch) -> dict[tuple[str, str, str], Any]:
    return {(o.region, o.instance_type, o.purchase_option): o for o in batch.offers}


def last_id(page: int) -> int:
    return json.loads((PAGES / f"page-{page}.json").read_text())["offers"][-1]["id"]


@pytest.mark.parametrize(
    "geolocation, code",
    [("Texas, US", "US"), ("Quebec, CA", "CA"), ("Czechia, CZ", "CZ"), ("SE", "SE"),
     (None, "unknown"), ("", "unknown"), ("Somewhere", "unknown"), ("Texas, usa", "unknown")],
)
def test_country_code_from_geolocation(geolocation: Any, code: str) -> None:
    assert vastai.country_code(geolocation) == code


@pytest.mark.parametrize(
    "price, problem",
    [(0.35, None), (0, "is not a positive price (0)"), (-0.01, "is not a positive price (-0.01)"),
     (None, "is missing"), ("0.4", "is not a number ('0.4')"), (float("nan"), "is not a positive price (nan)"),
     (9999.0, "9999.0 USD/h exceeds the plausibility cap 2000")],
)
def test_price_problems(price: Any, problem: str | None) -> None:
    assert vastai.price_problem(price) == problem


def test_search_document_first_and_next_page() -> None:
    first = vastai.build_search(None, 100)
    assert first == {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True},
                     "rented": {"eq": False}, "order": [["id", "asc"]], "type": "on-demand", "limit": 100,
                     "allocated_storage": 5.0}
    assert vastai.build_search(12596887, 100)["id"] == {"gt": 12596887}


def test_page_shape_and_cursor_are_checked() -> None:
    with pytest.raises(SchemaDriftError, match="vastai: search answer lacks the 'offers' list"):
        vastai.parse_page({"bundles": []})
    doc = {"offers": [{"id": 8}, {"id": 5}]}
    with pytest.raises(SchemaDriftError, match="offer id 5 is not above the page cursor 7"):
        vastai.keyset(100)(doc, vastai.parse_page(doc), {"json": vastai.build_search(7, 100)})
    assert vastai.parse_page({"offers": []}) == []
    assert vastai.keyset(100)({"offers": []}, [], {"json": vastai.build_search(7, 100)}) is None


# -- aggregation, computed by hand on small_offers.json ---------------------------------

def test_group_is_cheapest_real_offer_with_count_min_median_max() -> None:
    r = rows(small_batch())
    us = r[("US", "1x RTX-4090", "on_demand")]
    # 101 (0.40), 102 (0.35), 103 (0.52); 109 is listed at 0 and is quarantined, not counted.
    assert (us.price_per_hour, us.available_count, us.available, us.availability_level) == (0.35, 3, True, "offered")
    assert (us.gpu_model, us.gpu_count, us.gpu_name_reported, us.zone) == ("RTX-4090", 1, "RTX 4090", "")
    data = json.loads(us.provider_data)
    assert data["offer_count"] == 3
    assert data["price_per_gpu_hour"] == {"min": 0.35, "median": 0.40, "max": 0.52}
    assert data["cheapest_offer"] == {"id": 102, "machine_id": 5002, "reliability": 0.98, "verification": "verified",
                                      "geolocation": "California, US", "inet_down_mbps": 1000.0,
                                      "inet_up_mbps": 800.0, "dph_base": 0.35}
    assert data["median_storage_cost_usd_per_gb_month"] == 0.15  # 0.10, 0.20, 0.15
    # The cheapest offer's own specs: 16 of 16 cores, 64000 MB host RAM -> 62.5 GB, 100 GB disk.
    assert (us.vcpus, us.ram_gb, us.local_disk_gb, us.reliability) == (16.0, 62.5, 100.0, 0.98)
    assert us.gpu_memory_gb == round(24564 / 1024, 3) and us.gpu_memory_gb_nominal == 24


def test_interruptible_group_uses_min_bid_and_keeps_the_zero_listed_offer() -> None:
    spot = rows(small_batch())[("US", "1x RTX-4090", "interruptible")]
    # min_bid: 101 0.20, 102 0.25, 103 0.18, 109 0.22 (its dph_total is 0, its bid is fine).
    assert (spot.price_per_hour, spot.available_count) == (0.18, 4)
    data = json.loads(spot.provider_data)
    assert data["price_per_gpu_hour"] == {"min": 0.18, "median": 0.21, "max": 0.25}
    assert data["cheapest_offer"]["id"] == 103


def test_multi_gpu_group_prices_per_gpu_hour() -> None:
    r = rows(small_batch())
    h100 = r[("US", "8x H100-SXM", "on_demand")]  # 19.60 and 19.20 for 8 GPUs
    assert (h100.price_per_hour, h100.price_per_gpu_hour, h100.gpu_count, h100.available_count) == (19.2, 2.4, 8, 2)
    assert json.loads(h100.provider_data)["price_per_gpu_hour"] == {"min": 2.4, "median": 2.425, "max": 2.45}
    assert h100.total_gpu_memory_gb == round(81559 * 8 / 1024, 3) and h100.interconnect == "PCIe"
    bid = r[("US", "8x H100-SXM", "interruptible")]  # bids 12.00 and 13.00
    assert (bid.price_per_hour, json.loads(bid.provider_data)["cheapest_offer"]["id"]) == (12.0, 105)
    assert r[("CA", "1x RTX-4090", "on_demand")].available_count == 1


def test_unknown_location_and_memory_told_a100() -> None:
    a100 = rows(small_batch())[("unknown", "1x A100-SXM4-40", "on_demand")]
    assert (a100.gpu_model, a100.gpu_variant_exact, a100.price_per_hour) == ("A100-SXM4-40", True, 0.70)


def test_every_group_key_is_unique_and_counts_add_up() -> None:
    batch = small_batch()
    assert len(rows(batch)) == len(batch.offers) == 8  # 4 groups x 2 purchase options
    # 11 listings: 1 CPU-only skipped, 2 unknown GPU; 8 priced offers -> 7 on-demand (109 is 0) + 8 bids.
    assert sum(o.available_count for o in batch.offers if o.purchase_option == "on_demand") == 7
    assert sum(o.available_count for o in batch.offers if o.purchase_option == "interruptible") == 8


def test_unknown_gpu_is_quarantined_once_per_name_with_its_offers() -> None:
    q = {x.source_ref: x for x in small_batch().quarantined}
    assert set(q) == {"gpu/RTX 9999 Mystery", "109/on_demand"}
    unknown = q["gpu/RTX 9999 Mystery"]
    assert unknown.reason.startswith("gpu: unknown GPU name 'RTX 9999 Mystery'") and unknown.reason.endswith("(2 offers)")
    raw = json.loads(unknown.raw)
    assert (raw["offer_count"], raw["offer_ids"]) == (2, [107, 108])
    assert q["109/on_demand"].reason == "price: dph_total is not a positive price (0.0)"


def test_host_set_storage_and_egress_medians_per_country() -> None:
    batch = small_batch()
    storage = {s.region: s for s in batch.storage}
    # US storage_cost: 0.10 0.20 0.15 0.25 0.20 0.30 0.10 (every GPU offer there) -> median 0.20.
    assert {k: s.usd_per_gb_month for k, s in storage.items()} == {"US": 0.2, "CA": 0.12, "PL": 0.08, "unknown": 0.18}
    assert storage["US"].description == "median of host-set storage_cost (7 offers, 0.1 to 0.3 USD/GB-month)"
    egress = {e.region: e.usd_per_gb for e in batch.egress}
    # US inet_up_cost: 0.005 0.010 0.0 0.02 0.01 0.004 0.003 -> median 0.005.
    assert egress == {"US": 0.005, "CA": 0.002, "PL": 0.0, "unknown": 0.006}


# -- the keyset walk through httpx against the replay server --------------------------

def test_fetch_walks_every_page_through_httpx(replay: Any) -> None:
    server = replay("vastai")
    batch = vastai.fetch(replay_context(server, "vastai"))
    assert batch.counts() == {"offers": 523, "egress": 28, "storage": 28, "quarantined": 4}
    assert sum(o.purchase_option == "on_demand" for o in batch.offers) == 261
    assert sum(o.purchase_option == "interruptible" for o in batch.offers) == 262
    assert len({o.gpu_model for o in batch.offers}) == 28 and len({o.region for o in batch.offers}) == 28
    assert len(rows(batch)) == 523
    assert not any("authorization" in req.headers for _, req in server.requests)  # no key, none is invented

    bodies = [req.json_body() for _, req in server.requests]
    assert len(bodies) == 5  # pages of 100, 100, 100, 60, then an empty page
    assert "id" not in bodies[0] and all(b["limit"] == 100 and b["order"] == [["id", "asc"]] for b in bodies)
    assert [b["id"]["gt"] for b in bodies[1:]] == [last_id(1), last_id(2), last_id(3), last_id(4)]

    # Read off the page bodies: US 8x H100 SXM offers 12454761 (18.818322), 12578682 (18.539322),
    # 12925899 (14.919192).
    h100 = rows(batch)[("US", "8x H100-SXM", "on_demand")]
    assert (h100.price_per_hour, h100.available_count, h100.reliability) == (14.919192, 3, 0.9865)
    data = json.loads(h100.provider_data)
    assert (data["cheapest_offer"]["id"], data["cheapest_offer"]["machine_id"]) == (12925899, 43325)
    assert data["price_per_gpu_hour"] == {"min": 1.864899, "median": 2.317415, "max": 2.35229}
    assert data["median_storage_cost_usd_per_gb_month"] == 0.1616
    bid = rows(batch)[("US", "8x H100-SXM", "interruptible")]  # min_bid 7.9618, 8.0987, 9.7496
    assert (bid.price_per_hour, json.loads(bid.provider_data)["cheapest_offer"]["id"]) == (7.9618, 12454761)
    b200 = rows(batch)[("US", "8x B200", "on_demand")]  # 32.280047 and 27.903586
    assert (b200.price_per_hour, b200.available_count) == (27.903586, 2)

    # The consumer cards of the page bodies, read off them: US 1x RTX 3060 offers 12539671 (0.067545,
    # bid 0.0417), 12544926, 12926680, 13028650; PL 2x "RTX 4070S Ti" 12403651 (0.329797).
    rtx3060 = rows(batch)[("US", "1x RTX-3060", "on_demand")]
    assert (rtx3060.price_per_hour, rtx3060.available_count, rtx3060.gpu_memory_gb_nominal) == (0.067545, 4, 12)
    assert rows(batch)[("US", "1x RTX-3060", "interruptible")].price_per_hour == 0.0417
    super_ti = rows(batch)[("PL", "2x RTX-4070-Ti-SUPER", "on_demand")]
    assert (super_ti.price_per_hour, super_ti.gpu_name_reported) == (0.329797, "RTX 4070S Ti")
    assert rows(batch)[("FI", "1x GTX-1080-Ti", "on_demand")].price_per_hour == 0.052503
    q = {x.source_ref: x.reason for x in batch.quarantined}
    assert not {k for k in q if k.startswith("gpu/")}
    a5000 = rows(batch)[("RO", "4x RTX-A5000", "on_demand")]
    assert (a5000.gpu_model, a5000.price_per_hour) == ("RTX-A5000", 0.753935)
    assert sum(1 for k in q if not k.startswith("gpu/")) == 4
    assert any("exceeds the plausibility cap" in r for r in q.values())


def test_a_failed_page_fails_the_walk(replay: Any) -> None:
    cursor = last_id(2)

    def break_page_3(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        body = req.json_body() or {}
        return (500, {}, b"upstream timeout") if body.get("id") == {"gt": cursor} else None

    server = replay("vastai", hook=break_page_3)
    with pytest.raises(SourceError, match="vastai: console.vast.ai/api/v0/bundles/ failed after 2 attempts"):
        vastai.fetch(replay_context(server, "vastai"))
    assert len(server.requests) == 4  # pages 1 and 2, then page 3 twice


def test_a_server_ignoring_the_cursor_is_schema_drift_not_a_loop(replay: Any) -> None:
    page1 = (PAGES / "page-1.json").read_bytes()
    server = replay("vastai", hook=lambda host, req, ex: (200, {"Content-Type": "application/json"}, page1))
    with pytest.raises(SchemaDriftError, match="the search ignored the id filter"):
        vastai.fetch(replay_context(server, "vastai"))
    assert len(server.requests) == 2


def test_walk_is_bounded_by_max_pages(replay: Any) -> None:
    server = replay("vastai")
    ctx = replay_context(server, "vastai", settings={"vastai_max_pages": 2})
    with pytest.raises(SourceError, match="vastai: the marketplace search: paging did not end within 2 pages"):
        vastai.fetch(ctx)
    assert len(server.requests) == 2


def test_api_key_goes_in_a_bearer_header_and_not_in_errors(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(vastai.API_KEY_ENV, "vast_secret_777")
    server = replay("vastai", hook=lambda host, req, ex: (403, {}, b'{"success": false, "error": "forbidden"}'))
    with pytest.raises(SourceError) as err:
        vastai.fetch(replay_context(server, "vastai"))
    assert "vastai: HTTP 403" in str(err.value) and "vast_secret_777" not in str(err.value)
    # a 403 is not retried
    assert [req.headers["authorization"] for _, req in server.requests] == ["Bearer vast_secret_777"]


def test_provider_declaration() -> None:
    assert vastai.PROVIDER.name == vastai.NAME == "vastai"
    assert vastai.PROVIDER.secret_env_vars == ("VAST_API_KEY",) and not vastai.PROVIDER.credentials_required
    assert vastai.PROVIDER.anomaly.min_row_ratio == 0.2  # marketplace groups come and go
    assert vastai.PROVIDER.facts.kind == "marketplace" and vastai.PROVIDER.facts.multinode_interconnect is None
