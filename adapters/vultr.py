"""Vultr: Cloud GPU plans and GPU bare-metal plans from Vultr's public plan list.

`GET https://api.vultr.com/v2/plans` (Cloud GPU: type `vcg`) and `/v2/plans-metal` (`plans_metal`), no key,
paged by `cursor` (`meta.links.next`); RAM in MB, `gpu_count` "1/8" for a slice (adapters/recordings/vultr).
One offer per plan, location (or "global", available=False) and option (preemptible as "spot").
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction
from typing import Any, NamedTuple

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, as_number, cursor, dig, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import GPUModel, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "vultr"
API_HOST = "api.vultr.com"
PLANS_PATH = "/v2/plans"
METAL_PATH = "/v2/plans-metal"
PER_PAGE = 500  # the most the API gives per page
GLOBAL_REGION = "global"  # a plan that no location lists

CLOUD_GPU_TYPE = "vcg"
DEDICATED_METAL_GPU_TYPE = "vdm"

# Bandwidth beyond a plan's included transfer (Vultr's billing docs).
EGRESS_OVERAGE_USD_PER_GB = 0.01

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    facts=ProviderFacts(
        display_name="Vultr", kind="gpu_cloud", billing_granularity_s=3600, minimum_charge_s=3600,
        billing_notes="Servers bill by the hour with a one-hour minimum; GPU instances up to 730 hours a month, "
                      "other servers up to 672 (Vultr billing docs).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped server keeps billing for its reserved compute, storage and IP until it is "
                              "destroyed.",
        access_ssh=True,
        interruptible_offer="Preemptible plans where the plan list allows them (hourly_cost_preemptible), loaded "
                            "as spot",
        price_source="Vultr API GET api.vultr.com/v2/plans and /v2/plans-metal (public, no key)",
        source_urls=["https://www.vultr.com/api/#tag/plans", "https://www.vultr.com/pricing/",
                     "https://docs.vultr.com/support/platform/billing/how-am-i-billed-for-my-servers",
                     "https://docs.vultr.com/support/platform/billing/what-is-the-bandwidth-overage-rate"]),
)

# Bare-metal plan id -> (GPU count, gpu_aliases alias, memory per GPU): plans-metal names no GPU; as
# gpuhunt lists them (providers/vultr.py), not verified against Vultr's page. Others are quarantined.
BARE_METAL_GPUS: dict[str, tuple[int, str, float]] = {
    "vbm-48c-1024gb-4-a100-gpu": (4, "a100", 80),
    "vbm-112c-2048gb-8-a100-gpu": (8, "a100", 80),
    "vbm-112c-2048gb-8-h100-gpu": (8, "h100", 80),
    "vbm-64c-2048gb-8-l40-gpu": (8, "l40s", 48),
    "vbm-72c-480gb-gh200-gpu": (1, "gh200", 96),
    "vbm-256c-2048gb-8-mi300x-gpu": (8, "mi300x", 192),
}


# The memory of one whole card of each Cloud GPU type (www.vultr.com/pricing/, Cloud GPU, as captured
# 2025-08-19): slices are fractions of these, multi-GPU plans multiples.
CARD_MEMORY_GB = {"NVIDIA_A100": 80, "NVIDIA_A40": 48, "NVIDIA_A16": 16, "NVIDIA_L40S": 48, "NVIDIA_GH200": 96,
                  "NVIDIA_H100": 80, "NVIDIA_B200": 192, "AMD_MI300X": 192, "AMD_MI325X": 256}


class _BadRecord(Exception):
    """One plan that cannot become rows: its reason goes to quarantine."""


class PlanGpus(NamedTuple):
    model: GPUModel
    exact: bool
    reported: str  # as Vultr names the card
    count: float  # below 1 for a slice of one card
    memory_gb: float  # per GPU, or the slice's own memory
    total_memory_gb: float
    data: dict[str, Any]  # how the count and memory were read, for provider_data


def parse_gpu_count(text: Any) -> Fraction:
    """Vultr's `gpu_count`: "1", "8" or a slice of one card, "1/8" (sometimes a bare number)."""
    try:
        if isinstance(text, bool) or not isinstance(text, (int, str)):
            raise ValueError
        count = Fraction(str(text).strip())
    except (ValueError, ZeroDivisionError):
        raise _BadRecord(f"gpu_count {text!r} is neither a whole number nor a fraction") from None
    if count <= 0:
        raise _BadRecord(f"gpu_count {text!r} is not positive")
    return count


def card_alias(gpu_type: str) -> str:
    """"NVIDIA_A100_PCIE" -> "a100 pcie", the spelling gpu_aliases is searched with."""
    name = gpu_type.strip()
    prefix = next((p for p in ("NVIDIA_", "AMD_", "INTEL_") if name.upper().startswith(p)), "")
    return name[len(prefix):].replace("_", " ").lower()


def cloud_gpus(plan: dict[str, Any]) -> PlanGpus:
    """The GPUs of a Cloud GPU plan, from gpu_type, gpu_vram_gb and gpu_count."""
    gpu_type = plan.get("gpu_type")
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        raise _BadRecord("Cloud GPU plan without 'gpu_type': its card is not stated")
    if "gpu_vram_gb" not in plan:
        raise _BadRecord("Cloud GPU plan without 'gpu_vram_gb': its GPU memory is not stated")
    vram = as_number(plan["gpu_vram_gb"], "gpu_vram_gb", _BadRecord)
    if not math.isfinite(vram) or vram <= 0:
        raise _BadRecord(f"gpu_vram_gb {plan['gpu_vram_gb']!r} is not a positive number")
    alias = card_alias(gpu_type)
    data: dict[str, Any] = {"gpu_type": gpu_type, "gpu_vram_gb": plan["gpu_vram_gb"]}
    if plan.get("gpu_count") not in (None, ""):
        count = parse_gpu_count(plan["gpu_count"])
        data["gpu_count_reported"] = str(plan["gpu_count"])
        # VRAM is the plan's total: vram / count per card.
        model, exact = canonicalize(NAME, alias, vram / float(count) * 1024)
    else:
        # No gpu_count: the VRAM against the whole card's (a slice's alone would find a smaller card).
        card_gb = CARD_MEMORY_GB.get(gpu_type.strip().upper())
        if card_gb is None:
            raise _BadRecord(f"gpu: no gpu_count, and the memory of a whole {gpu_type} card is not in "
                             "CARD_MEMORY_GB: a slice cannot be told from whole cards")
        model, exact = canonicalize(NAME, alias, card_gb * 1024)
        count = Fraction(vram / card_gb).limit_denominator(64)
        data["gpu_count_derived"] = f"gpu_vram_gb {vram:g} / {model.gpu_model} memory {card_gb:g} GB"
    data["fractional_gpu"] = count < 1
    if count < 1:
        data["gpu_fraction"] = f"{count.numerator}/{count.denominator}"
    return PlanGpus(model, exact, gpu_type, float(count), vram if count < 1 else vram / float(count), vram, data)


def metal_gpus(plan_id: str) -> PlanGpus:
    count, alias, memory_gb = BARE_METAL_GPUS[plan_id]
    model, exact = canonicalize(NAME, alias, memory_gb * 1024)
    data = {"gpus_from": "documented bare-metal table (the API names no GPU)", "fractional_gpu": False}
    return PlanGpus(model, exact, alias.upper(), float(count), memory_gb, memory_gb * count, data)


def _plan_gpus(plan: dict[str, Any], kind: str) -> PlanGpus | None:
    """The plan's GPUs; None for a CPU-only plan; _BadRecord or UnknownGPUError for a GPU plan not placed."""
    plan_type = str(plan.get("type", "")).strip()
    if kind == "instance" and plan_type == CLOUD_GPU_TYPE:
        return cloud_gpus(plan)
    if kind == "instance" and plan_type == DEDICATED_METAL_GPU_TYPE:
        raise _BadRecord("Dedicated Metal GPU plan: the plan list names no GPU model or count for it")
    if kind == "metal" and plan["id"] in BARE_METAL_GPUS:
        return metal_gpus(plan["id"])
    brand = str(plan.get("gpu_brand") or "").strip().lower()
    if kind == "metal" and (brand not in ("", "none") or "gpu" in plan["id"].lower()):
        raise _BadRecord("bare-metal GPU plan: the API names no GPU and the documented table does not list this plan")
    return None


@drift_guard("vultr: plans")
def parse_plans(plan_pages: list[Any], metal_pages: list[Any]) -> Batch:
    lists = []
    for pages, key, path in ((plan_pages, "plans", PLANS_PATH), (metal_pages, "plans_metal", METAL_PATH)):
        if any(not isinstance(doc, dict) or not isinstance(doc.get(key), list) for doc in pages):
            raise SchemaDriftError(f"vultr: {path} answer lacks the '{key}' list")
        lists.append([p for doc in pages for p in doc[key]])
        if lists[-1] and not any(isinstance(p, dict) and "hourly_cost" in p for p in lists[-1]):
            raise SchemaDriftError(f"vultr: every plan in {path} lacks 'hourly_cost'; the plan format changed")
    plans, metal = lists
    if not plans:
        raise SourceError(f"vultr: {PLANS_PATH} returned no plans")
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for plan, kind in [(p, "instance") for p in plans] + [(p, "metal") for p in metal]:
        if not isinstance(plan, dict) or not isinstance(plan.get("id"), str) or not plan["id"].strip():
            batch.quarantine("offer", "?", "schema: a plan lacks 'id'", plan)
            continue
        try:
            gpus = _plan_gpus(plan, kind)
        except (_BadRecord, UnknownGPUError) as err:
            gpu = "gpu: " if isinstance(err, UnknownGPUError) else ""
            batch.quarantine("offer", plan["id"], f"{plan['id']}: {gpu}{err}", plan)
            continue
        if gpus is None:
            plan_type = str(plan.get("type", "")).strip()
            skipped[f"CPU-only {'bare-metal' if kind == 'metal' else plan_type or 'untyped'}"] += 1
        elif not batch.listed_again(seen, plan["id"], f"plan id {plan['id']}", plan):
            _add_plan(batch, plan, kind, gpus, skipped)
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[3]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, usd_per_gb=EGRESS_OVERAGE_USD_PER_GB,
              description="outbound transfer beyond a plan's included bandwidth (its bandwidth_gb_per_month "
                          "in provider_data): 0.01 USD per GB (Vultr billing docs); same in every location")
    batch.note_skipped(f"vultr: {len(plans)} instance plans and {len(metal)} bare-metal plans listed, {len(seen)} "
                       "GPU plans loaded", skipped)
    batch.notes.append("vultr: no block-storage price loaded (the plan list has none, and Vultr's block-storage "
                       "page was not read)")
    return batch


def _add_plan(batch: Batch, plan: dict[str, Any], kind: str, gpus: PlanGpus, skipped: Counter[str]) -> None:
    plan_id = plan["id"]
    locations = plan.get("locations")
    if not isinstance(locations, list):
        return batch.quarantine("offer", plan_id, f"{plan_id}: schema: 'locations' is not a list", plan)
    locations = sorted({loc for loc in locations if isinstance(loc, str) and loc.strip()})
    currency = stated_currency(plan)
    if currency not in (None, "USD"):
        return batch.quarantine("offer", plan_id, f"{plan_id}: price in {currency}, not USD; no conversion is "
                                "configured", plan)
    # Without deploy_* flags a plan is deployable on demand, and preemptible where it has that price.
    preemptible = plan.get("deploy_preemptible", "hourly_cost_preemptible" in plan)
    if preemptible is not True and "hourly_cost_preemptible" in plan:
        skipped["preemptible prices of GPU plans not deployable preemptible"] += 1
    options = [(option, field) for option, field, allowed in (
        ("on_demand", "hourly_cost", plan.get("deploy_ondemand", True) is not False),
        ("spot", "hourly_cost_preemptible", preemptible is True)) if allowed]
    if not options:
        skipped["GPU plans deployable neither on demand nor preemptible"] += 1
        return
    vcpus = plan.get("vcpu_count") if kind == "instance" else plan.get("cpu_threads")
    ram_mb, disk = plan.get("ram"), plan.get("disk")
    for region, listed in [(loc, True) for loc in locations] or [(GLOBAL_REGION, False)]:
        # a location's `location_cost` entry overrides the plan's own price fields there
        override = dig(plan, "location_cost", region)
        priced = {**plan, **override} if isinstance(override, dict) else plan
        for option, field in options:
            ref = f"{plan_id}/{region}" + ("" if option == "on_demand" else f"/{option}")
            try:
                if field not in priced:
                    raise _BadRecord(f"no '{field}' for a plan deployable as {option}")
                price = as_number(priced[field], field, _BadRecord)
            except _BadRecord as err:
                batch.quarantine("offer", ref, f"{plan_id}: {err}", plan)
                continue
            data = dict(gpus.data, plan_type=plan.get("type"), monthly_cost=priced.get(
                "monthly_cost" if option == "on_demand" else "monthly_cost_preemptible"),
                bandwidth_gb_per_month=plan.get("bandwidth"), locations=locations,
                location_price=isinstance(override, dict))
            batch.offer(ref, plan, region=region, purchase_option=option, price_per_hour=price, available=listed,
                        available_count=None if listed else 0,
                        availability_level="listed in the plan's locations" if listed else "the plan lists no location",
                        provider_data=data, instance_type=plan_id,
                        gpu_model=gpus.model.gpu_model, gpu_variant_exact=gpus.exact, gpu_name_reported=gpus.reported,
                        gpu_count=gpus.count, gpu_memory_gb=gpus.memory_gb, total_gpu_memory_gb=gpus.total_memory_gb,
                        vcpus=vcpus if isinstance(vcpus, (int, float)) and vcpus > 0 else None,
                        ram_gb=ram_mb / 1024 if isinstance(ram_mb, (int, float)) and ram_mb > 0 else None,
                        local_disk_gb=disk * (plan.get("disk_count") or 1) if isinstance(disk, (int, float))
                        and disk > 0 else None)


def _next_cursor(doc: Any) -> str | None:
    nxt = dig(doc, "meta", "links", "next")
    return nxt if isinstance(nxt, str) and nxt.strip() else None


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        plans, metal = (list(ctx.paginate(client, API_HOST, path, lambda doc: [doc], cursor(_next_cursor, "cursor"),
                                          params={"per_page": str(PER_PAGE)}, what=path))
                        for path in (PLANS_PATH, METAL_PATH))
    return parse_plans(plans, metal)
