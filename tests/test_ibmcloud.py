"""IBM Cloud adapter: the public Global Catalog through httpx against the replay server.

Hand-checked prices: IBM's catalog answer for plan 99548819-fcbc-486c-8eeb-0355a56b035e as a public
collector recorded it on 2026-10-05 (adapters/recordings/ibmcloud/README.md): gx3d-160x1792x8h100 in
eu-de, 99.60 USD per instance-hour on demand (12.45 per GPU-hour), 24.8965 spot. The other prices of
the recording are made up and only checked for being carried through unchanged.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import ibmcloud
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

FOLDER = BUNDLED_RECORDINGS / "ibmcloud"
H100_PLAN, L4_PLAN = "99548819-fcbc-486c-8eeb-0355a56b035e", "6bed29d7-67ba-43ca-83d0-9576a379a1ce"
GEN2_PLAN = "a736a57f-0584-474f-8411-55dc7d9dc811"


def profiles() -> list[dict[str, Any]]:
    return [p for n in (1, 2) for p in json.loads((FOLDER / f"profiles-{n}.json").read_text())["resources"]]


def pricing() -> dict[str, list[dict[str, Any]]]:
    return {plan: json.loads((FOLDER / f"pricing-{plan}.json").read_text())["resources"]
            for plan in (H100_PLAN, L4_PLAN, GEN2_PLAN)}


def test_fetch_through_httpx_reads_every_page_and_each_gpu_profiles_plan(replay: Any) -> None:
    server = replay("ibmcloud")
    ctx = replay_context(server, "ibmcloud")
    batch = ibmcloud.fetch(ctx)
    assert batch.counts() == {"offers": 12, "egress": 0, "storage": 0, "quarantined": 1}
    rows = {(o.instance_type, o.region, o.purchase_option): o for o in batch.offers}
    h100 = rows["gx3d-160x1792x8h100", "eu-de", "on_demand"]
    assert (h100.price_per_hour, h100.price_per_gpu_hour, h100.gpu_count) == (99.6, 12.45, 8)
    assert (h100.gpu_model, h100.gpu_variant_exact, h100.total_gpu_memory_gb) == ("H100-SXM", True, 640)
    assert (h100.vcpus, h100.ram_gb, h100.network_gbps) == (160, 1792, 200)
    assert rows["gx3d-160x1792x8h100", "eu-de", "spot"].price_per_hour == 24.8965
    assert json.loads(h100.provider_data)["metric_id"] == "part-is.instance-hours-gx3d-160x1792x8h100"
    l4 = [o for o in batch.offers if o.instance_type == "gx3-16x80x1l4"]
    assert len(l4) == 8 and {o.purchase_option for o in l4} == {"on_demand"} and {o.gpu_model for o in l4} == {"L4"}
    assert rows["gx3-16x80x1l4", "au-syd", "on_demand"].price_per_hour == 1.22  # made up, carried unchanged
    [v100] = batch.quarantined
    assert v100.source_ref == "gx2-8x64x1v100" and "priced by vCPU, memory and GPU components" in v100.reason
    assert [(r.path, r.params.get("_offset")) for _, r in server.requests] == [
        ("/api/v1", None), ("/api/v1", "2"), *[(f"/api/v1/{p}/pricing/deployment", None)
                                              for p in sorted((H100_PLAN, L4_PLAN, GEN2_PLAN))]]
    assert server.requests[0][1].params["q"] == "kind:instance.profile"
    assert ctx.pages["instance profiles"] == 2


def test_no_key_is_needed() -> None:
    assert ibmcloud.PROVIDER.secret_env_vars == () and ibmcloud.PROVIDER.facts.kind == "hyperscaler"


def test_bad_prices_are_quarantined_and_the_rest_still_load() -> None:
    prices = pricing()
    l4 = prices[L4_PLAN]
    l4[0]["metrics"][0]["amounts"][0]["prices"][0]["price"] = -1.02  # us-south
    l4[1]["metrics"][0]["amounts"][0]["prices"][0]["price"] = math.nan  # us-east
    l4[2]["metrics"][0]["amounts"][0]["currency"] = "EUR"  # ca-tor
    l4.append(copy.deepcopy(l4[3]))  # eu-de listed twice
    batch = ibmcloud.parse_pricing(profiles(), prices)
    why = {q.source_ref: q.reason for q in batch.quarantined if q.source_ref.startswith("gx3-16x80x1l4")}
    assert set(why) == {f"gx3-16x80x1l4/{r}/on_demand" for r in ("us-south", "us-east", "ca-tor", "eu-de")}
    assert "positive" in why["gx3-16x80x1l4/us-south/on_demand"] and "finite" in why["gx3-16x80x1l4/us-east/on_demand"]
    assert why["gx3-16x80x1l4/ca-tor/on_demand"] == "price in EUR, not USD; no conversion is configured"
    assert why["gx3-16x80x1l4/eu-de/on_demand"].startswith("duplicate price gx3-16x80x1l4/eu-de/on_demand")
    assert len(batch.offers) == 4 + 5  # the H100's four, and five L4 regions of eight


def test_a_gpu_profiles_plan_without_prices_fails_the_scrape() -> None:
    prices = pricing()
    prices[L4_PLAN] = []
    with pytest.raises(SourceError, match=f"plan {L4_PLAN} of gx3-16x80x1l4 returned no priced deployments"):
        ibmcloud.parse_pricing(profiles(), prices)
    prices = pricing()
    for d in prices[L4_PLAN]:
        d["metrics"][0]["amounts"][0]["prices"][0]["amount"] = d["metrics"][0]["amounts"][0]["prices"][0].pop("price")
    with pytest.raises(SchemaDriftError, match="gx3-16x80x1l4: no USA amount carries a 'price'"):
        ibmcloud.parse_pricing(profiles(), prices)
    with pytest.raises(SourceError, match="returned no GPU instance profiles"):
        ibmcloud.parse_pricing(profiles()[1:2], {})  # bx2-2x8 alone


def test_a_profiles_plan_is_its_multi_tenant_deployments_else_its_starting_price() -> None:
    l4 = profiles()[2]
    assert ibmcloud.profile_plan(l4) == L4_PLAN
    l4["metadata"]["other"]["profile"]["measures"] = []
    l4["metadata"]["pricing"]["starting_price"]["plan_id"] = "another-plan"
    assert ibmcloud.profile_plan(l4) == "another-plan"


def test_paging_stops_at_the_count_or_a_short_page() -> None:
    request = {"path": "/api/v1", "params": {"_limit": 100}, "json": None}
    page = {"offset": 0, "limit": 2, "count": 4}
    assert ibmcloud._next_offset(page, [1, 2], request)["params"] == {"_limit": 100, "_offset": 2}
    assert ibmcloud._next_offset({**page, "offset": 2}, [3, 4], request) is None  # all four read
    assert ibmcloud._next_offset({"offset": 0, "limit": 100, "count": 8}, [1] * 7, request) is None  # short page
