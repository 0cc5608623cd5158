"""Vast.ai: the GPU marketplace search (no key needed), keyset-paged, landed as one offer per (GPU model,
GPU count, country, purchase option) at the group's cheapest price; storage and egress at the hosts' median.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from typing import Any, Iterable, NamedTuple

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, dig, drift_guard, finite_number, spread, stated_currency,
)
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse import interruption
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import MAX_PLAUSIBLE_PRICE_PER_HOUR_USD, Batch, ProviderFacts

NAME = "vastai"
API_HOST = "console.vast.ai"
BUNDLES_PATH = "/api/v0/bundles/"
API_KEY_ENV = "VAST_API_KEY"
ALLOCATED_STORAGE_GIB = 5.0  # the CLI's default; dph_total prices this much disk in
UNKNOWN_REGION = "unknown"
# The vast CLI's default search.
BASE_SEARCH: dict[str, Any] = {
    "verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True}, "rented": {"eq": False},
}
PRICE_FIELDS = (("on_demand", "dph_total"), ("interruptible", "min_bid"))
# A field missing from *every* offer is a changed API (schema drift), not thousands of quarantined offers.
REQUIRED_OFFER_FIELDS = ("id", "num_gpus", "gpu_name", "dph_total", "min_bid")

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,),
    # Groups of live listings vanish as hosts rent out: only a loss of 80% or more is refused.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    # The search walk, held whole: up to vastai_max_pages (200) pages of 1,000 offers of about 1.5 kB each.
    max_answer_mb=320,
    facts=ProviderFacts(
        display_name="Vast.ai", kind="marketplace", billing_granularity_s=1, minimum_charge_s=None,
        billing_notes="Per-second billing of GPU time; disk storage is billed while the instance exists; "
                      "bandwidth per TB at host-set rates.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped instance stops GPU billing; its disk keeps billing at the host's storage "
                              "rate.",
        access_ssh=True, access_docker=True, access_jupyter=True, multinode_interconnect=None,
        interruptible_offer="Interruptible (bid) instances: the highest bid runs, lower bids are paused",
        price_source="Vast.ai marketplace search POST /api/v0/bundles/ (no key needed), aggregated per "
                     "GPU model x GPU count x country",
        source_urls=[
            "https://vast.ai/developers/api", "https://docs.vast.ai/sdk/python/reference/search-offers",
            "https://github.com/vast-ai/vast-cli/blob/master/docs/cli/client/search.md",
            "https://docs.vast.ai/billing-help", "https://vast.ai/docs/gpu-instances/rental-types"]),
)


def build_search(cursor: int | None, page_size: int) -> dict[str, Any]:
    """One page's search document: ordered by id, past the cursor."""
    return {**BASE_SEARCH, "order": [["id", "asc"]], "type": "on-demand", "limit": page_size,
            "allocated_storage": ALLOCATED_STORAGE_GIB, **({"id": {"gt": cursor}} if cursor is not None else {})}


@drift_guard("vastai: search answer")
def parse_page(doc: Any) -> list[dict[str, Any]]:
    offers = dig(doc, "offers")
    if not isinstance(offers, list):
        raise SchemaDriftError("vastai: search answer lacks the 'offers' list")
    for offer in offers:
        oid = dig(offer, "id")
        if not isinstance(oid, int) or isinstance(oid, bool):
            raise SchemaDriftError(f"vastai: an offer has no integer id ({str(offer)[:120]})")
    return offers


def keyset(page_size: int) -> Any:
    """The same search past the highest id seen; an empty page (not a short one) ends the walk."""
    def following(doc: Any, offers: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any] | None:
        if not offers:
            return None
        cursor, low = (request["json"].get("id") or {}).get("gt"), min(o["id"] for o in offers)
        if cursor is not None and low <= cursor:
            raise SchemaDriftError(f"vastai: offer id {low} is not above the page cursor {cursor}: "
                                   "the search ignored the id filter, so keyset paging cannot work")
        return {**request, "json": build_search(max(o["id"] for o in offers), page_size)}
    return following


_COUNTRY = re.compile(r"^[A-Z]{2}$")


def country_code(geolocation: Any) -> str:
    """'Texas, US' -> 'US'; 'SE' -> 'SE'; None or free text -> 'unknown'."""
    last = geolocation.rsplit(",", 1)[-1].strip() if isinstance(geolocation, str) else ""
    return last if _COUNTRY.match(last) else UNKNOWN_REGION


def price_problem(value: Any) -> str | None:
    """Why a listed hourly price cannot stand as an offer, or None."""
    if value is None:
        return "is missing"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"is not a number ({value!r})"
    if not math.isfinite(value) or value <= 0:
        return f"is not a positive price ({value!r})"
    if value > MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:
        return f"{value} USD/h exceeds the plausibility cap {MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:g}"
    return None


def _ram_gb(offer: dict[str, Any]) -> float | None:
    """The offer's share of host RAM (cpu_ram, MB) by its share of cores."""
    ram, cores, eff = (finite_number(offer.get(k)) for k in ("cpu_ram", "cpu_cores", "cpu_cores_effective"))
    share = eff / cores if cores and eff and 0 < eff <= cores else 1.0
    return round(ram * share / 1024, 1) if ram and ram > 0 else None


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 6) if vals else None


class Listing(NamedTuple):
    offer: dict[str, Any]
    price: float
    exact: bool


GroupKey = tuple[str, int, str, str]  # (canonical model, num_gpus, country, purchase option)


def unique_offers(batch: Batch, offers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One listing per offer id, the first: an identical repeat is counted in a note, another quarantined."""
    seen: dict[Any, dict[str, Any]] = {}
    repeats = 0
    for offer in offers:
        if (first := seen.setdefault(offer.get("id"), offer)) is offer:
            continue
        if first == offer:
            repeats += 1
        else:
            batch.quarantine("offer", f"{offer['id']}/duplicate", f"duplicate offer id {offer['id']} listed again "
                             "with different values; kept the first listing", offer)
    if repeats:
        batch.notes.append(f"vastai: {repeats} repeated identical offer listings dropped")
    return list(seen.values())


@drift_guard("vastai: offers")
def build_batch(offers: list[dict[str, Any]]) -> Batch:
    missing = [f for f in REQUIRED_OFFER_FIELDS if offers and not any(isinstance(o, dict) and f in o for o in offers)]
    if missing:
        raise SchemaDriftError(f"vastai: no offer of the search answer has {missing}: the API changed shape")
    batch = PROVIDER.batch()
    unknown: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # GPU name -> (why, its offers)
    groups: dict[GroupKey, list[Listing]] = defaultdict(list)
    gpu_offers: list[dict[str, Any]] = []
    for offer in unique_offers(batch, offers):
        num_gpus = offer.get("num_gpus")
        if not isinstance(num_gpus, int) or num_gpus <= 0:
            continue  # CPU-only listings are out of scope
        if (currency := stated_currency(offer)) not in (None, "USD"):
            batch.quarantine("offer", f"{offer['id']}", f"prices in {currency}, not USD; no conversion is "
                             "configured", offer)
            continue
        gpu_offers.append(offer)
        name = str(offer.get("gpu_name") or "")
        try:  # an unknown name is quarantined once with all its offers
            model, exact = canonicalize(NAME, name, finite_number(offer.get("gpu_ram")))
        except UnknownGPUError as err:
            unknown.setdefault(name, (str(err), []))[1].append(offer)
            continue
        for option, field in PRICE_FIELDS:
            price = offer.get(field)
            if problem := price_problem(price):
                batch.quarantine("offer", f"{offer['id']}/{option}", f"price: {field} {problem}", offer)
                continue
            key = (model.gpu_model, num_gpus, country_code(offer.get("geolocation")), option)
            groups[key].append(Listing(offer, float(price), exact))
    for name, (why, group) in sorted(unknown.items()):
        batch.quarantine("offer", f"gpu/{name}", f"gpu: {why} ({len(group)} offers)",
                         {"gpu_name": name, "offer_count": len(group),
                          "offer_ids": sorted(o["id"] for o in group)[:50], "example": group[0]})
    for key in sorted(groups):
        _add_group(batch, key, groups[key])
    _add_host_terms(batch, gpu_offers)
    return batch


def _add_group(batch: Batch, key: GroupKey, listings: list[Listing]) -> None:
    model_name, num_gpus, country, option = key
    cheapest = min(listings, key=lambda x: (x.price, x.offer["id"]))
    offer, per_gpu = cheapest.offer, [x.price / num_gpus for x in listings]
    gpu_ram, reliability = finite_number(offer.get("gpu_ram")), finite_number(offer.get("reliability2"))
    host_reliability = reliability if reliability is not None and 0 <= reliability <= 1 else None
    data = {
        "offer_count": len(listings),
        "price_per_gpu_hour": spread(per_gpu),
        "cheapest_offer": {
            "id": offer["id"], "machine_id": offer.get("machine_id"), "reliability": reliability,
            "verification": offer.get("verification"), "geolocation": offer.get("geolocation"),
            "inet_down_mbps": finite_number(offer.get("inet_down")),
            "inet_up_mbps": finite_number(offer.get("inet_up")),
            "dph_base": finite_number(offer.get("dph_base")),
        },
        "gpu_names": sorted({str(x.offer.get("gpu_name")) for x in listings}),
        **{f"median_{field}_usd_per_gb{unit}": _median(finite_number(x.offer.get(field)) for x in listings)
           for field, unit in (("storage_cost", "_month"), ("inet_down_cost", ""), ("inet_up_cost", ""))},
    }
    batch.offer(
        f"{country}/{num_gpus}x {model_name}/{option}", {"group": list(key), "cheapest_offer": offer},
        region=country, instance_type=f"{num_gpus}x {model_name}", purchase_option=option,
        gpu_model=model_name, gpu_variant_exact=cheapest.exact, gpu_name_reported=str(offer.get("gpu_name")),
        gpu_count=num_gpus, gpu_memory_gb=round(gpu_ram / 1024, 3) if gpu_ram else None,
        total_gpu_memory_gb=round(gpu_ram * num_gpus / 1024, 3) if gpu_ram else None,
        vcpus=finite_number(offer.get("cpu_cores_effective")) or None, ram_gb=_ram_gb(offer),
        local_disk_gb=finite_number(offer.get("disk_space")),
        interconnect=("NVLink" if (finite_number(offer.get("bw_nvlink")) or 0) > 0 else "PCIe")
        if num_gpus > 1 else None,
        price_per_hour=cheapest.price, available=True, available_count=len(listings), availability_level="offered",
        reliability=host_reliability,
        **interruption.from_host_reliability(host_reliability, outbid=option == "interruptible"),
        provider_data=data,
    )


def _add_host_terms(batch: Batch, offers: list[dict[str, Any]]) -> None:
    for field, positive in (("storage_cost", True), ("inet_up_cost", False)):
        by_country: dict[str, list[float]] = defaultdict(list)
        for offer in offers:
            if (value := finite_number(offer.get(field))) is not None and (value > 0 if positive else value >= 0):
                by_country[country_code(offer.get("geolocation"))].append(value)
        for country, values in sorted(by_country.items()):
            median, raw = _median(values), {"country": country, field: sorted(values)}
            ranged = f"{len(values)} offers, {min(values):g} to {max(values):g}"
            if positive:
                batch.add("storage", f"{country}/host-disk", raw, region=country, storage_class="host-disk",
                          usd_per_gb_month=median,
                          description=f"median of host-set storage_cost ({ranged} USD/GB-month)")
            else:
                batch.add("egress", f"{country}/internet", raw, region=country, destination="internet",
                          tier_start_gb=0.0, usd_per_gb=median,
                          description=f"median of host-set inet_up_cost ({ranged} USD/GB)")


def fetch(ctx: SourceContext) -> Batch:
    size = ctx.config.vastai_page_size
    with ctx.keyed_client(API_KEY_ENV) as client:
        offers = list(ctx.paginate(client, API_HOST, BUNDLES_PATH, parse_page, keyset(size), method="POST",
                                   json=build_search(None, size), what="the marketplace search",
                                   cap="vastai_max_pages"))
    return build_batch(offers)
