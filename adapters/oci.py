"""Oracle Cloud Infrastructure: GPU shapes, block volumes and egress from Oracle's public price list API (no key).
A GPU part's price per GPU-hour is one offer per shape with that GPU (GPU_SHAPES) in region "global".
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, NamedTuple

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard, next_link,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, not_usd

NAME = "oci"
API_HOST = "apexapps.oracle.com"
PRODUCTS_PATH = "/pls/apex/cetools/api/v1/products/"
CURRENCY = "USD"
PRICE_MODEL = "PAY_AS_YOU_GO"
GLOBAL_REGION = "global"  # Oracle publishes one list price for all commercial regions

GPU_CATEGORY = "Compute - GPU"  # also "Compute - GPU - Other"
GPU_METRIC = "GPU Per Hour"
# Per-GPU-hour parts in the GPU category that rent no GPU: NVIDIA's software licence.
LICENCE_MARKER = "NVIDIA AI Enterprise"

# Block volumes: storage per GB-month plus performance units (VPUs) per GB-month; Oracle's
# default "Balanced" level is 10 VPUs per GB.
BLOCK_STORAGE_PART = "B91961"
BLOCK_VPU_PART = "B91962"
BALANCED_VPUS_PER_GB = 10
# Outbound data transfer from North America, Europe and UK regions (first 10 TB a month free).
EGRESS_PART = "B88327"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    facts=ProviderFacts(
        display_name="Oracle Cloud Infrastructure", kind="hyperscaler", billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="Usage is tracked per second after a one-minute minimum (Oracle's pricing pages state it for "
                      "block volumes; the same per-second terms for GPU instances were not verified).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="GPU shapes (except VM.GPU.A10) keep billing while stopped; boot and block volumes "
                              "bill until deleted.",
        access_ssh=True,
        multinode_interconnect="RDMA cluster networks (bandwidth not verified)",
        interruptible_offer="Preemptible capacity at 50% of the on-demand price (not in the price list; not loaded)",
        price_source="Oracle price list API GET apexapps.oracle.com/pls/apex/cetools/api/v1/products/ "
                     "(no key); shapes from Oracle's Compute Shapes reference",
        source_urls=["https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?currencyCode=USD",
                     "https://www.oracle.com/cloud/price-list/",
                     "https://docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm",
                     "https://docs.oracle.com/en-us/iaas/Content/Compute/Tasks/"
                     "resource-billing-stopped-instances.htm"]),
)


class GpuShape(NamedTuple):
    name: str  # "BM.GPU.H100.8": the trailing number of a GPU shape is its GPU count
    gpus: int
    alias: str  # looked up in gpu_aliases
    memory_gb: float  # per GPU, as Oracle's shape reference states it
    vcpus: float | None = None  # 2 per OCPU on x86 hosts, 1 per core on Grace
    ram_gb: float | None = None
    local_disk_gb: float | None = None  # local NVMe
    interconnect: str | None = None


# HGX boards (8 SXM GPUs) join their GPUs through NVSwitch; other boards are not stated.
_HGX = "NVSwitch"

# part number -> the shapes it prices. The API names no shape: this is the one place the
# mapping lives, from the Compute Shapes reference (GPU shapes). A GPU part missing here is
# quarantined, never guessed.
GPU_SHAPES: dict[str, tuple[GpuShape, ...]] = {
    "B88517": (GpuShape("BM.GPU2.2", 2, "p100", 16),),  # "Bare Metal GPU Standard - X7"
    "B88518": (GpuShape("VM.GPU2.1", 1, "p100", 16, 24, 72),),  # "Virtual Machine GPU Standard - X7"
    "B89734": (  # "GPU Standard - V2": Tesla V100 16 GB; SXM2 or PCIe is not stated
        GpuShape("VM.GPU3.1", 1, "v100", 16, 12, 90),
        GpuShape("VM.GPU3.2", 2, "v100", 16, 24, 180),
        GpuShape("VM.GPU3.4", 4, "v100", 16, 48, 360),
        GpuShape("BM.GPU3.8", 8, "v100", 16),
    ),
    "B92740": (GpuShape("BM.GPU4.8", 8, "a100 sxm4", 40, 128, 2048, 27200, _HGX),),  # "GPU - E3"
    "B95907": (GpuShape("BM.GPU.A100-v2.8", 8, "a100 sxm4", 80, 256, 2048, 27200, _HGX),),
    "B95909": (
        GpuShape("VM.GPU.A10.1", 1, "a10", 24, 30, 240),
        GpuShape("VM.GPU.A10.2", 2, "a10", 24, 60, 480),
        GpuShape("BM.GPU.A10.4", 4, "a10", 24, 128, 1024, 7680),
    ),
    "B98415": (GpuShape("BM.GPU.H100.8", 8, "h100 sxm", 80, 224, 2048, 61440, _HGX),),
    "B109479": (GpuShape("BM.GPU.L40S.4", 4, "l40s", 48, 224, 1024, 7680),),
    "B109485": (GpuShape("BM.GPU.MI300X.8", 8, "mi300x", 192, 224, 2048, 30720),),
    "B110519": (GpuShape("BM.GPU.H200.8", 8, "h200 sxm", 141, 224, 3072, 30720, _HGX),),
    "B110978": (GpuShape("BM.GPU.B200.8", 8, "b200", 180, 256, 4096, 30720, _HGX),),
    "B110979": (GpuShape("BM.GPU.GB200.4", 4, "gb200", 192, 144, 960, 30720),),
    "B112140": (GpuShape("BM.GPU.GB300.4", 4, "gb300", 288),),
}


def _text(item: Any, key: str) -> str:
    value = dig(item, key)
    return value.strip() if isinstance(value, str) else ""


def _number(value: Any, what: str) -> float | None:
    return None if value is None else as_number(value, what, ValueError)


def usd_payg_prices(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The part's USD pay-as-you-go price tiers, lowest tier first."""
    locs = item.get("currencyCodeLocalizations")
    if not isinstance(locs, list):
        raise ValueError("schema: lacks the 'currencyCodeLocalizations' list")
    usd = [loc for loc in locs if isinstance(loc, dict) and str(loc.get("currencyCode", "")).upper() == CURRENCY]
    if not usd:
        codes = sorted({str(loc.get("currencyCode")) for loc in locs if isinstance(loc, dict)})
        raise ValueError(not_usd(", ".join(codes)))
    tiers = [p for loc in usd for p in (loc.get("prices") or [])
             if isinstance(p, dict) and p.get("model") == PRICE_MODEL]
    if not tiers:
        raise ValueError(f"no USD {PRICE_MODEL} price")
    if any("value" not in tier for tier in tiers):
        raise ValueError(f"schema: a {PRICE_MODEL} price lacks 'value'")
    return sorted(tiers, key=lambda t: _number(t.get("rangeMin"), "rangeMin") or 0.0)


def _kind(item: dict[str, Any]) -> str:
    """What a part is: "gpu" (a GPU rented by the hour) or why it is out of scope."""
    category, metric, name = _text(item, "serviceCategory"), _text(item, "metricName"), _text(item, "displayName")
    if not category.startswith(GPU_CATEGORY):
        return "not GPU compute"
    if LICENCE_MARKER in name:
        return "NVIDIA AI Enterprise licence (software, not a GPU)"
    return "gpu" if metric == GPU_METRIC else f"GPU category, metric {metric!r}"


@drift_guard("oci: price list")
def parse_products(pages: list[Any]) -> Batch:
    """The price list's pages -> one offer per GPU shape, plus block storage and egress."""
    items: list[Any] = []
    updated: str | None = None
    for doc in pages:
        if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
            raise SchemaDriftError("oci: price list answer lacks the 'items' list")
        items += doc["items"]
        updated = doc["lastUpdated"] if isinstance(doc.get("lastUpdated"), str) else updated
    if not items:
        raise SourceError("oci: the price list returned no items")
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for item in items:
        if not (part := _text(item, "partNumber")):
            batch.quarantine("offer", "?", "schema: an item lacks 'partNumber'", item)
        elif (kind := _kind(item)) != "gpu":
            skipped[kind] += 1
        elif not batch.listed_again(seen, part, f"partNumber {part}", item):
            _add_gpu_part(batch, part, item, updated)
    _add_storage_and_egress(batch, {_text(i, "partNumber"): i for i in reversed(items) if isinstance(i, dict)})
    batch.note_skipped(f"oci: {len(items)} parts listed, {len(seen)} GPU compute parts", skipped)
    return batch


def _add_gpu_part(batch: Batch, part: str, item: dict[str, Any], updated: str | None) -> None:
    name = _text(item, "displayName")
    try:
        tiers = usd_payg_prices(item)
        if len(tiers) != 1:
            raise ValueError(f"{len(tiers)} {PRICE_MODEL} tiers for a per-GPU-hour part; which one applies is "
                             "not known")
        if (price := _number(tiers[0]["value"], "value")) is None:
            raise ValueError(f"the {PRICE_MODEL} value is null")
        if not GPU_SHAPES.get(part):
            raise ValueError("priced per GPU-hour, but no OCI shape is documented for this part")
    except ValueError as err:
        return batch.quarantine("offer", part, f"{part} ({name}): {err}", item)
    data = {"part_number": part, "usd_per_gpu_hour": price, "metric": _text(item, "metricName"),
            "service_category": _text(item, "serviceCategory")}
    for shape in GPU_SHAPES[part]:
        batch.offer(f"{shape.name}/{GLOBAL_REGION}", item, gpu=shape.alias, gpu_name_reported=name or shape.alias,
                    region=GLOBAL_REGION, instance_type=shape.name, purchase_option="on_demand",
                    gpu_count=shape.gpus, gpu_memory_gb=shape.memory_gb, vcpus=shape.vcpus, ram_gb=shape.ram_gb,
                    local_disk_gb=shape.local_disk_gb, interconnect=shape.interconnect,
                    price_per_hour=price * shape.gpus, price_observed_at=updated, provider_data=data)


def _flat_price(item: dict[str, Any]) -> float:
    tiers = usd_payg_prices(item)
    price = _number(tiers[-1]["value"], "value")  # the marginal rate, past any free allowance
    if price is None or not math.isfinite(price):
        raise ValueError(f"value {tiers[-1]['value']!r} is not a finite number")
    return price


def _add_storage_and_egress(batch: Batch, parts: dict[str, dict[str, Any]]) -> None:
    storage, vpu, egress = parts.get(BLOCK_STORAGE_PART), parts.get(BLOCK_VPU_PART), parts.get(EGRESS_PART)
    if storage is None or vpu is None:
        batch.notes.append(f"oci: block-volume parts {BLOCK_STORAGE_PART}/{BLOCK_VPU_PART} not in the list; "
                           "no storage price loaded")
    else:
        try:
            per_gb, per_vpu = _flat_price(storage), _flat_price(vpu)
        except ValueError as err:
            batch.quarantine("storage", f"{GLOBAL_REGION}/block", f"block volume: {err}", [storage, vpu])
        else:
            balanced = round(per_gb + BALANCED_VPUS_PER_GB * per_vpu, 6)
            for cls, usd, text in (
                    ("block-lower-cost", per_gb, f"block volume, Lower Cost (0 VPU/GB): {per_gb} USD per GB-month"),
                    ("block-balanced", balanced, f"block volume, Balanced ({BALANCED_VPUS_PER_GB} VPU/GB): "
                                                 f"{per_gb} + {BALANCED_VPUS_PER_GB} x {per_vpu} USD per GB-month")):
                batch.add("storage", f"{GLOBAL_REGION}/{cls}", [storage, vpu], region=GLOBAL_REGION,
                          storage_class=cls, usd_per_gb_month=usd, description=text + "; same in every region")
    if egress is None:
        batch.notes.append(f"oci: egress part {EGRESS_PART} not in the list; no egress price loaded")
        return
    try:
        bounds = [(_number(t.get("rangeMin"), "rangeMin") or 0.0, _number(t["value"], "value"))
                  for t in usd_payg_prices(egress)]
    except ValueError as err:
        return batch.quarantine("egress", f"{GLOBAL_REGION}/internet", f"egress: {err}", egress)
    for n, (start, usd) in enumerate(bounds):
        # The next tier's start ends this one; the last tier is open (Oracle's "infinity" sentinels vary).
        batch.add("egress", f"{GLOBAL_REGION}/internet/{start:g}", egress, region=GLOBAL_REGION,
                  destination="internet", tier_start_gb=start, tier_end_gb=bounds[n + 1][0] if n + 1 < len(bounds)
                  else None, usd_per_gb=usd, description=f"{_text(egress, 'displayName')} ({EGRESS_PART})")


def _next_link(doc: Any) -> str | None:
    links = dig(doc, "links")
    return next((link["href"] for link in links if isinstance(link, dict) and link.get("rel") == "next"
                 and isinstance(link.get("href"), str)), None) if isinstance(links, list) else None


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        return parse_products(list(ctx.paginate(
            client, API_HOST, PRODUCTS_PATH, lambda doc: [doc], next_link(_next_link, API_HOST),
            params={"currencyCode": CURRENCY}, what="the price list")))
