"""Prime Intellect: an aggregator reselling many clouds' GPU offers through one availability API.

`GET https://api.primeintellect.ai/api/v1/availability/gpus?page=N&page_size=100`, Bearer key (env
PRIME_API_KEY, required), paged until `totalCount` items are read; `prices` are USD per hour for the
whole offer. `provider` runs the machine at its own rate and is named in `operated_by`; a cloud loaded
from its own source is skipped and counted in the notes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from gpuledger.adapters import registry
from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, failure_reason, require_usd

NAME = "primeintellect"
API_HOST = "api.primeintellect.ai"
GPUS_PATH = "/api/v1/availability/gpus"
API_KEY_ENV = "PRIME_API_KEY"
PAGE_SIZE = 100  # as the official prime CLI asks
# Aggregators' names of clouds (letters and digits, lower case) -> the registry's, where they differ.
SAME_CLOUD = {"lambdalabs": "lambda", "datacrunch": "verda", "crusoecloud": "crusoe", "latitude": "latitudesh"}
_MEMORY = re.compile(r"_(\d+)GB$", re.IGNORECASE)

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Prime Intellect", kind="aggregator", billing_granularity_s=3600,
        billing_notes="Each offer is the underlying cloud's machine at a price Prime Intellect states per hour, paid "
                      "from a prepaid wallet; the billing increment is not documented, so whole hours are assumed.",
        access_ssh=True,
        price_source="Prime Intellect API GET /api/v1/availability/gpus (API key, paged): USD per hour per offer",
        source_urls=("https://docs.primeintellect.ai/api-reference/check-gpu-availability",
                     "https://docs.primeintellect.ai/api-reference/availability/get-gpu-availability")),
)


def own_source(cloud: str, sources: Any = None) -> str | None:
    """The registered source that loads `cloud` directly, or None."""
    def plain(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", name.lower())
    wanted = SAME_CLOUD.get(plain(cloud), plain(cloud))
    return next((s for s in (registry.SOURCES if sources is None else sources) if plain(s) == wanted), None)


def resold(batch: Batch, offers: list[Any], sources: Any = None) -> list[Any]:
    """The offers of clouds gpuledger does not load directly; the others are counted in the notes."""
    kept, skipped = [], Counter()
    for offer in offers:
        cloud = dig(offer, "provider")
        if isinstance(cloud, str) and (direct := own_source(cloud, sources)) is not None:
            skipped[(cloud, direct)] += 1
        else:
            kept.append(offer)
    batch.notes.extend(f"{n} offer{'s' * (n != 1)} run by {cloud}: skipped, {direct} is loaded from its own source"
                       for (cloud, direct), n in sorted(skipped.items()))
    return kept


@drift_guard("primeintellect: availability")
def parse_offers(items: list[Any], sources: Any = None) -> Batch:
    if not items:
        raise SourceError("primeintellect: the availability API returned no GPU offers")
    batch, seen = PROVIDER.batch(), set()
    for item in resold(batch, items, sources):
        ref = f"{item.get('provider')}/{item.get('cloudId')}" if isinstance(item, dict) else "?"
        try:
            gpu_type, count, prices = str(item["gpuType"]), int(item["gpuCount"]), item["prices"]
            region = str(item.get("dataCenter") or item["country"])
            vcpus, ram = (item.get("vcpu") or {}).get("defaultCount"), (item.get("memory") or {}).get("defaultCount")
            price = as_number(prices.get("onDemand") or prices.get("communityPrice"), "prices.onDemand", ValueError)
            require_usd(stated_currency(prices))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            batch.quarantine("offer", ref, failure_reason(err), item)
            continue
        spot, memory, stock = item.get("isSpot") is True, _MEMORY.search(gpu_type), str(item.get("stockStatus") or "")
        if batch.listed_again(seen, (ref, region, count, spot), f"offer {ref} in {region}", item, f"{ref}/{region}"):
            continue
        batch.offer(f"{ref}/{region}", item, gpu=f"{gpu_type} {item.get('socket') or ''}".strip(), gpu_count=count,
                    gpu_memory_gb=float(memory.group(1)) if memory else None, region=region,
                    operated_by=str(item.get("provider")), instance_type=f"{ref}/{count}x", price_per_hour=price,
                    purchase_option="spot" if spot else "on_demand", vcpus=vcpus, ram_gb=ram,
                    availability_level=stock or None,
                    available=stock.lower() not in ("", "unavailable"), provider_data=json.dumps(
                        {"security": item.get("security"), "is_variable": prices.get("isVariable")}),
                    billing_granularity_s=None, minimum_charge_s=None)  # not documented: the offer claims none
    return batch


def _items(doc: Any) -> list[Any]:
    if isinstance(doc, dict) and isinstance(doc.get("items"), list) and isinstance(doc.get("totalCount"), int):
        return doc["items"]
    raise SchemaDriftError("primeintellect: the availability answer lacks the 'items' list or 'totalCount'")


def fetch(ctx: SourceContext) -> Batch:
    def next_page(doc: Any, items: list[Any], req: dict[str, Any]) -> dict[str, Any] | None:
        page = int(req["params"]["page"])
        return None if page * PAGE_SIZE >= doc["totalCount"] else {**req, "params": {**req["params"], "page": page + 1}}

    with ctx.keyed_client(API_KEY_ENV, needs="the availability API needs a key") as client:
        return parse_offers(list(ctx.paginate(client, API_HOST, GPUS_PATH, items=_items, next_page=next_page,
                                              params={"page": 1, "page_size": PAGE_SIZE}, what="GPU availability")))
