"""Spheron: an aggregator reselling several clouds' GPU offers through one offers API.

`GET https://app.spheron.ai/api/gpu-offers?page=N&limit=100`, public (SPHERON_API_KEY, when set, goes
as a Bearer token and shows team discounts), paged until `totalPages`.
`price` is USD per hour for the whole offer (its gpuCount GPUs), `spot_price` the same offer's spot
price; an instanceType SPOT offer is spot only. One offer per cluster it lists. `provider` runs the
machine: offers name it in `operated_by`, and a cloud loaded from its own source is skipped and counted.
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.adapters.primeintellect import resold
from gpuledger.warehouse.records import Batch, ProviderFacts, failure_reason

NAME = "spheron"
API_HOST = "app.spheron.ai"
OFFERS_PATH = "/api/gpu-offers"
API_KEY_ENV = "SPHERON_API_KEY"
PAGE_SIZE = 100

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,),
    facts=ProviderFacts(
        display_name="Spheron", kind="aggregator", billing_granularity_s=60,
        billing_notes="On-demand GPUs billed per minute from a prepaid balance (as Spheron describes its marketplace); "
                      "each offer is the underlying cloud's machine at Spheron's price.",
        access_ssh=True,
        price_source="Spheron API GET /api/gpu-offers (public, paged): USD per hour per offer, spot where priced",
        source_urls=("https://docs.spheron.ai/api-reference",)),
)


@drift_guard("spheron: gpu-offers")
def parse_offers(groups: list[Any], sources: Any = None) -> Batch:
    """GPU groups -> one offer per offer, cluster and purchase option, of the clouds not loaded directly."""
    batch, seen = PROVIDER.batch(), set()
    offers = [(group, item) for group in groups if isinstance(group, dict) for item in group.get("offers") or []]
    if not offers:
        raise SourceError("spheron: the offers API returned no GPU offers")
    kept = {id(item) for item in resold(batch, [item for _, item in offers], sources)}  # each offer with its group
    for group, item in ((g, i) for g, i in offers if id(i) in kept):
        ref = f"{item.get('provider')}/{item.get('offerId')}" if isinstance(item, dict) else "?"
        try:
            count, price = int(item["gpuCount"]), as_number(item["price"], "price", ValueError)
            spot = item.get("spot_price")
            spot = None if spot is None else as_number(spot, "spot_price", ValueError)
            clusters = item.get("clusters") if isinstance(item.get("clusters"), list) else []
            if not (math.isfinite(price) and price > 0):  # the whole offer goes, its spot rows too
                raise ValueError(f"price {price} is not a positive number")
        except (KeyError, TypeError, ValueError) as err:
            batch.quarantine("offer", ref, failure_reason(err), item)
            continue
        if batch.listed_again(seen, ref, f"offer {ref}", item):
            continue
        options = [("spot", price)] if str(item.get("instanceType")).upper() == "SPOT" else \
            [("on_demand", price)] + ([("spot", spot)] if spot else [])
        for cluster in clusters or [item.get("region") or "global"]:
            for option, usd in options:
                batch.offer(f"{ref}/{cluster}/{option}", item, gpu=str(group.get("gpuType")), gpu_count=count,
                            gpu_memory_gb=item.get("gpu_memory") or None, region=str(cluster), price_per_hour=usd,
                            operated_by=item.get("provider"), instance_type=str(item.get("offerId")),
                            purchase_option=option, vcpus=item.get("vcpus") or None, ram_gb=item.get("memory") or None,
                            available=item.get("available") is True and not item.get("maintenance"))
    return batch


def _groups(doc: Any) -> list[Any]:
    if isinstance(doc, dict) and isinstance(doc.get("data"), list) and isinstance(doc.get("totalPages"), int):
        return doc["data"]
    raise SchemaDriftError("spheron: the gpu-offers answer lacks the 'data' list or 'totalPages'")


def _next_page(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
    page = int(request["params"]["page"])
    return {**request, "params": {**request["params"], "page": page + 1}} if page < doc["totalPages"] else None


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV) as client:
        return parse_offers(list(ctx.paginate(client, API_HOST, OFFERS_PATH, items=_groups, next_page=_next_page,
                                              params={"page": 1, "limit": PAGE_SIZE}, what="GPU offers")))
