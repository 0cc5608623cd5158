"""Vultr: Cloud GPU plans and GPU bare-metal plans from Vultr's public plan list.

Source: `GET https://api.vultr.com/v2/plans` (instance plans, Cloud GPU among them as type
`vcg`) and `GET https://api.vultr.com/v2/plans-metal` (bare metal). Vultr's API reference
marks both "No authorization required", so no key is read or sent. Both answer one JSON
page at a time and page with a cursor:

    {"plans": [{"id": "vcg-a16-2c-8g-2vram", "type": "vcg", "vcpu_count": 2, "ram": 8192,
                "disk": 50, "bandwidth": 1024, "monthly_cost": 43, "hourly_cost": 0.059,
                "gpu_type": "NVIDIA_A16", "gpu_vram_gb": 2, "gpu_count": "1/8",
                "locations": ["ewr", "ord"], "location_cost": {}, "deploy_ondemand": true}],
     "meta": {"total": 1, "links": {"next": "", "prev": ""}}}

`/v2/plans-metal` holds its list under `plans_metal`. A non-empty `meta.links.next` is the
`cursor` of the next page; an empty one ends the list (`per_page` at most 500).

Row shape. A plan is one offer per location in its `locations` (the region signal: where
the plan can be deployed) and per purchase option: on demand at `hourly_cost`, and
preemptible (loaded as "spot": Vultr may reclaim it) at `hourly_cost_preemptible` where
`deploy_preemptible` is true. `location_cost` overrides the price of one location. A plan
listed in no location is one "global" row, available=False: its price is real, it just
cannot be deployed anywhere now.

GPUs. A Cloud GPU plan names its card (`gpu_type`, e.g. "NVIDIA_A100"), the VRAM it gives
(`gpu_vram_gb`) and, in current answers, `gpu_count` as text: "1", "8", or a fraction such
as "1/8" for a plan that rents a slice of one card's VRAM. A slice is loaded as a fraction
of a GPU (gpu_count 0.125, the slice's own memory), never as a whole card; when
`gpu_count` is absent the count is derived from the VRAM and the card's memory, and
provider_data says so. Dedicated Metal GPU plans (type `vdm`) and bare-metal plans state no
GPU at all: bare-metal GPU machines are placed from a documented table (BARE_METAL_GPUS),
anything else that is evidently a GPU machine is quarantined, never guessed.

Dropped plans are never silent: CPU-only plans are counted in the notes by type; a GPU plan
that cannot be priced or placed is quarantined with the reason. Egress is Vultr's
documented overage rate (each plan's own transfer allowance is in provider_data).

`fetch_*` does the I/O; `parse_*` functions are pure.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, as_number, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import GPUModel, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "vultr"
API_HOST = "api.vultr.com"
PLANS_PATH = "/v2/plans"
METAL_PATH = "/v2/plans-metal"
PER_PAGE = 500  # the most the API gives per page
MAX_PAGES = 20  # a few hundred plans in all; a runaway cursor chain must still end
GLOBAL_REGION = "global"  # a plan that no location lists

CLOUD_GPU_TYPE = "vcg"
DEDICATED_METAL_GPU_TYPE = "vdm"

# Vultr bills bandwidth beyond each plan's included transfer at this rate (the overage rate
# in Vultr's billing docs; the same figure is quoted by every third-party summary read).
EGRESS_OVERAGE_USD_PER_GB = 0.01

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    facts=ProviderFacts(
        display_name="Vultr",
        kind="gpu_cloud",
        billing_granularity_s=3600,
        minimum_charge_s=3600,
        billing_notes="Servers bill by the hour with a one-hour minimum; GPU instances up to 730 hours a month, "
                      "other servers up to 672 (Vultr billing docs).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped server keeps billing for its reserved compute, storage and IP until it is "
                              "destroyed.",
        access_ssh=True,
        multinode_interconnect=None,
        interruptible_offer="Preemptible plans where the plan list allows them (hourly_cost_preemptible), loaded "
                            "as spot",
        price_source="Vultr API GET api.vultr.com/v2/plans and /v2/plans-metal (public, no key)",
        source_urls=[
            "https://www.vultr.com/api/#tag/plans",
            "https://www.vultr.com/pricing/",
            "https://docs.vultr.com/support/platform/billing/how-am-i-billed-for-my-servers",
            "https://docs.vultr.com/support/platform/billing/what-is-the-bandwidth-overage-rate",
        ],
    ),
)


@dataclass(frozen=True)
class MetalGpus:
    count: int
    alias: str  # looked up in gpu_aliases
    memory_gb: float  # per GPU


# Bare-metal plan id -> its GPUs. The plans-metal answer names no GPU; these machines and their
# cards are as gpuhunt lists them (dstackai/gpuhunt, providers/vultr.py), not verified against
# Vultr's bare-metal page. An evident GPU machine missing here is quarantined.
BARE_METAL_GPUS: dict[str, MetalGpus] = {
    "vbm-48c-1024gb-4-a100-gpu": MetalGpus(4, "a100", 80),
    "vbm-112c-2048gb-8-a100-gpu": MetalGpus(8, "a100", 80),
    "vbm-112c-2048gb-8-h100-gpu": MetalGpus(8, "h100", 80),
    "vbm-64c-2048gb-8-l40-gpu": MetalGpus(8, "l40s", 48),
    "vbm-72c-480gb-gh200-gpu": MetalGpus(1, "gh200", 96),
    "vbm-256c-2048gb-8-mi300x-gpu": MetalGpus(8, "mi300x", 192),
}

# Vultr's card names ("NVIDIA_A100", "AMD_MI300X") are a vendor prefix and the model.
_VENDOR_PREFIXES = ("NVIDIA_", "AMD_", "INTEL_")


class _BadRecord(Exception):
    """One plan that cannot become rows: its reason goes to quarantine."""


@dataclass(frozen=True)
class PlanGpus:
    model: GPUModel
    exact: bool
    reported: str  # as Vultr names the card
    count: float  # below 1 for a slice of one card
    memory_gb: float  # per GPU, or the slice's own memory
    total_memory_gb: float
    data: dict[str, Any]  # how the count and memory were read, for provider_data


# -- parsing ----------------------------------------------------------------------

def _number(value: Any, what: str) -> float:
    return as_number(value, what, _BadRecord)


def parse_gpu_count(text: Any) -> Fraction:
    """Vultr's `gpu_count`: "1", "8" or a slice of one card, "1/8" (sometimes a bare number)."""
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise _BadRecord(f"gpu_count {text!r} is neither a whole number nor a fraction")
    try:
        count = Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise _BadRecord(f"gpu_count {text!r} is neither a whole number nor a fraction") from None
    if count <= 0:
        raise _BadRecord(f"gpu_count {text!r} is not positive")
    return count


def card_alias(gpu_type: str) -> str:
    """"NVIDIA_A100_PCIE" -> "a100 pcie", the spelling gpu_aliases is searched with."""
    name = gpu_type.strip()
    for prefix in _VENDOR_PREFIXES:
        if name.upper().startswith(prefix):
            name = name[len(prefix):]
            break
    return name.replace("_", " ").lower()


def cloud_gpus(plan: dict[str, Any]) -> PlanGpus:
    """The GPUs of a Cloud GPU plan, from gpu_type, gpu_vram_gb and gpu_count."""
    gpu_type = plan.get("gpu_type")
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        raise _BadRecord("Cloud GPU plan without 'gpu_type': its card is not stated")
    if "gpu_vram_gb" not in plan:
        raise _BadRecord("Cloud GPU plan without 'gpu_vram_gb': its GPU memory is not stated")
    vram = _number(plan["gpu_vram_gb"], "gpu_vram_gb")
    if not math.isfinite(vram) or vram <= 0:
        raise _BadRecord(f"gpu_vram_gb {plan['gpu_vram_gb']!r} is not a positive number")
    alias = card_alias(gpu_type)
    data: dict[str, Any] = {"gpu_type": gpu_type, "gpu_vram_gb": plan["gpu_vram_gb"]}
    try:
        if plan.get("gpu_count") not in (None, ""):
            count = parse_gpu_count(plan["gpu_count"])
            data["gpu_count_reported"] = str(plan["gpu_count"])
            # VRAM is the plan's total: a slice's card holds vram / count, a multi-GPU plan vram / count each.
            card_gb = vram / float(count)
            model, exact = canonicalize(NAME, alias, card_gb * 1024)
        else:
            # Older answers carry no gpu_count: the plan's VRAM against the card's own memory.
            model, exact = canonicalize(NAME, alias, vram * 1024)
            count = Fraction(vram / model.memory_gb).limit_denominator(64)
            data["gpu_count_derived"] = f"gpu_vram_gb {vram:g} / {model.gpu_model} memory {model.memory_gb:g} GB"
    except UnknownGPUError as err:
        raise _BadRecord(f"gpu: {err}") from None
    fraction = count < 1
    data["fractional_gpu"] = fraction
    if fraction:
        data["gpu_fraction"] = f"{count.numerator}/{count.denominator}"
    per_gpu = vram if fraction else vram / float(count)
    return PlanGpus(model, exact, gpu_type, float(count), per_gpu, vram, data)


def metal_gpus(plan_id: str) -> PlanGpus:
    spec = BARE_METAL_GPUS[plan_id]
    try:
        model, exact = canonicalize(NAME, spec.alias, spec.memory_gb * 1024)
    except UnknownGPUError as err:
        raise _BadRecord(f"gpu: {err}") from None
    data = {"gpus_from": "documented bare-metal table (the API names no GPU)", "fractional_gpu": False}
    return PlanGpus(model, exact, spec.alias.upper(), float(spec.count), spec.memory_gb,
                    spec.memory_gb * spec.count, data)


def _looks_like_gpu_machine(plan: dict[str, Any]) -> bool:
    """A bare-metal plan that says it has GPUs: a GPU brand, or "gpu" in its id."""
    brand = str(plan.get("gpu_brand") or "").strip().lower()
    return brand not in ("", "none") or "gpu" in str(plan.get("id", "")).lower()


def _prices(plan: dict[str, Any], location: str) -> dict[str, Any]:
    """The price fields that apply in one location: its `location_cost` entry, else the plan's own."""
    overrides = plan.get("location_cost")
    if isinstance(overrides, dict) and isinstance(overrides.get(location), dict):
        return {**plan, **overrides[location], "_location_priced": True}
    return plan


def _options(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """(purchase_option, price field) the plan can be bought under."""
    options = []
    if plan.get("deploy_ondemand", True) is not False:
        options.append(("on_demand", "hourly_cost"))
    if plan.get("deploy_preemptible") is True:
        options.append(("spot", "hourly_cost_preemptible"))
    return options


def _locations(plan: dict[str, Any]) -> list[str]:
    locations = plan.get("locations")
    if not isinstance(locations, list):
        raise _BadRecord("schema: 'locations' is not a list")
    return sorted({str(loc) for loc in locations if isinstance(loc, str) and loc.strip()})


def _plan_list(doc: Any, key: str, path: str) -> list[Any]:
    if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
        raise SchemaDriftError(f"vultr: {path} answer lacks the '{key}' list")
    return doc[key]


@drift_guard("vultr: plans")
def parse_plans(plan_pages: list[Any], metal_pages: list[Any]) -> Batch:
    """The plan lists' pages -> one offer per GPU plan x location x purchase option, and egress."""
    plans = [p for doc in plan_pages for p in _plan_list(doc, "plans", PLANS_PATH)]
    metal = [p for doc in metal_pages for p in _plan_list(doc, "plans_metal", METAL_PATH)]
    if not plans:
        raise SourceError(f"vultr: {PLANS_PATH} returned no plans")
    for listing, path in ((plans, PLANS_PATH), (metal, METAL_PATH)):
        if listing and not any(isinstance(p, dict) and "hourly_cost" in p for p in listing):
            raise SchemaDriftError(f"vultr: every plan in {path} lacks 'hourly_cost'; the plan format changed")
    batch = Batch(NAME)
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    gpu_plans = 0
    for plan, kind in [(p, "instance") for p in plans] + [(p, "metal") for p in metal]:
        if not isinstance(plan, dict) or not isinstance(plan.get("id"), str) or not plan["id"].strip():
            batch.quarantine("offer", "?", "schema: a plan lacks 'id'", plan)
            continue
        plan_id = plan["id"]
        plan_type = str(plan.get("type", "")).strip()
        try:
            if kind == "instance" and plan_type == CLOUD_GPU_TYPE:
                gpus = cloud_gpus(plan)
            elif kind == "instance" and plan_type == DEDICATED_METAL_GPU_TYPE:
                raise _BadRecord("Dedicated Metal GPU plan: the plan list names no GPU model or count for it")
            elif kind == "metal" and plan_id in BARE_METAL_GPUS:
                gpus = metal_gpus(plan_id)
            elif kind == "metal" and _looks_like_gpu_machine(plan):
                raise _BadRecord("bare-metal GPU plan: the API names no GPU and the documented table does not "
                                 "list this plan")
            else:
                skipped[f"CPU-only {'bare-metal' if kind == 'metal' else plan_type or 'untyped'}"] += 1
                continue
        except _BadRecord as err:
            batch.quarantine("offer", plan_id, f"{plan_id}: {err}", plan)
            continue
        if batch.listed_again(seen, plan_id, f"plan id {plan_id}", plan):
            continue
        gpu_plans += 1
        _add_plan(batch, plan, kind, gpus, skipped)
    _add_egress(batch)
    batch.notes.append(f"vultr: {len(plans)} instance plans and {len(metal)} bare-metal plans listed, {gpu_plans} "
                       "GPU plans loaded; skipped: "
                       + (", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "none"))
    batch.notes.append("vultr: no block-storage price loaded (the plan list has none, and Vultr's block-storage "
                       "page was not read)")
    return batch


def _add_plan(batch: Batch, plan: dict[str, Any], kind: str, gpus: PlanGpus, skipped: Counter[str]) -> None:
    plan_id = plan["id"]
    try:
        locations = _locations(plan)
    except _BadRecord as err:
        batch.quarantine("offer", plan_id, f"{plan_id}: {err}", plan)
        return
    currency = stated_currency(plan)
    if currency not in (None, "USD"):
        batch.quarantine("offer", plan_id, f"{plan_id}: price in {currency}, not USD; no conversion is configured",
                         plan)
        return
    options = _options(plan)
    if not options:
        skipped["GPU plans deployable neither on demand nor preemptible"] += 1
        return
    places = [(loc, True) for loc in locations] or [(GLOBAL_REGION, False)]
    vcpus = plan.get("vcpu_count") if kind == "instance" else plan.get("cpu_threads")
    ram_mb = plan.get("ram")
    disk = plan.get("disk")
    disks = plan.get("disk_count") or 1
    for region, listed in places:
        priced = _prices(plan, region)
        for option, field in options:
            ref = f"{plan_id}/{region}" + ("" if option == "on_demand" else f"/{option}")
            if field not in priced:
                batch.quarantine("offer", ref, f"{plan_id}: no '{field}' for a plan deployable as {option}", plan)
                continue
            try:
                price = _number(priced[field], field)
            except _BadRecord as err:
                batch.quarantine("offer", ref, f"{plan_id}: {err}", plan)
                continue
            data = dict(gpus.data, plan_type=plan.get("type"), monthly_cost=priced.get(
                "monthly_cost" if option == "on_demand" else "monthly_cost_preemptible"),
                bandwidth_gb_per_month=plan.get("bandwidth"), locations=locations,
                location_price=bool(priced.get("_location_priced")))
            batch.offer(ref, plan, region=region, zone="", instance_type=plan_id, purchase_option=option,
                        gpu_model=gpus.model.gpu_model, gpu_variant_exact=gpus.exact,
                        gpu_name_reported=gpus.reported, gpu_vendor=gpus.model.vendor, gpu_count=gpus.count,
                        gpu_memory_gb=gpus.memory_gb, gpu_memory_gb_nominal=gpus.model.memory_gb,
                        total_gpu_memory_gb=gpus.total_memory_gb,
                        vcpus=vcpus if isinstance(vcpus, (int, float)) and vcpus > 0 else None,
                        ram_gb=ram_mb / 1024 if isinstance(ram_mb, (int, float)) and ram_mb > 0 else None,
                        local_disk_gb=disk * disks if isinstance(disk, (int, float)) and disk > 0 else None,
                        price_per_hour=price, source_currency="USD", source_price_per_hour=price,
                        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
                        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
                        available=listed, available_count=None if listed else 0,
                        availability_level="listed in the plan's locations" if listed
                        else "the plan lists no location",
                        provider_data=json.dumps(data, sort_keys=True))


def _add_egress(batch: Batch) -> None:
    """Vultr's overage rate: the API has no egress price; each plan includes its own allowance."""
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[3]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, tier_end_gb=None,
              usd_per_gb=EGRESS_OVERAGE_USD_PER_GB, source_currency="USD",
              source_usd_per_gb=EGRESS_OVERAGE_USD_PER_GB,
              description="outbound transfer beyond a plan's included bandwidth (its bandwidth_gb_per_month "
                          "in provider_data): 0.01 USD per GB (Vultr billing docs); same in every location")


# -- fetching ---------------------------------------------------------------------

def _next_cursor(doc: Any) -> str | None:
    meta = doc.get("meta") if isinstance(doc, dict) else None
    links = meta.get("links") if isinstance(meta, dict) else None
    nxt = links.get("next") if isinstance(links, dict) else None
    return nxt if isinstance(nxt, str) and nxt.strip() else None


def fetch_pages(ctx: SourceContext, client: Any, path: str) -> list[Any]:
    """Every page of one plan list, following `meta.links.next` as the cursor."""
    pages: list[Any] = []
    params = {"per_page": str(PER_PAGE)}
    for _ in range(MAX_PAGES):
        doc = ctx.get_json(client, API_HOST, path, params=params)
        pages.append(doc)
        cursor = _next_cursor(doc)
        if cursor is None:
            return pages
        if cursor == params.get("cursor"):
            raise SourceError(f"vultr: {path} answered the same next cursor twice")
        params = {"per_page": str(PER_PAGE), "cursor": cursor}
    raise SourceError(f"vultr: {path} still had a next page after {MAX_PAGES} pages")


def fetch(ctx: SourceContext) -> Batch:
    """Two plan lists (more requests if they page): instance plans and bare-metal plans."""
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        plans = fetch_pages(ctx, client, PLANS_PATH)
        metal = fetch_pages(ctx, client, METAL_PATH)
    return parse_plans(plans, metal)
