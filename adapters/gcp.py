"""Google Cloud: GPU VMs and Cloud TPUs priced from Billing Catalog SKUs as Google bills them (a VM as the sum of
its vCPU, RAM, GPU and bundled Local SSD SKUs, a TPU slice as chips x its chip-hour SKU), persistent disks, egress.
zones.list (an enrichment) fills only `available`; a replay adds the recording's earlier answers as past ones."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from gpuledger.adapters.base import (
    USER_AGENT, MissingCredentialsError, SchemaDriftError, SourceContext, SourceError, drift_guard, register_secret,
    scrubbed,
)
from gpuledger.adapters.contract import Enrichment, ProviderSpec
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.adapters.retry import AttemptsSpent
from gpuledger.http_headers import retry_after_s
from gpuledger.warehouse.availability import add_observation
from gpuledger.warehouse.gpus import GPUModel, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, commitment_option
from gpuledger.warehouse.settings import env_name

NAME = "gcp"
COMPUTE_HOST = "compute.googleapis.com"
BILLING_HOST = "cloudbilling.googleapis.com"
TPU_HOST = "tpu.googleapis.com"
COMPUTE_ENGINE_SERVICE = "services/6F81-5844-456A"  # the Billing Catalog id of Compute Engine
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
REPLAY_PROJECT = "gpuledger-replay"  # the project id the bundled recording was made with
ZONE_STATUS = "zone status"
TPUS = "TPU types"  # Cloud TPU API: a project may not have it enabled (403 SERVICE_DISABLED)
ZONE_HISTORY = BUNDLED_RECORDINGS / NAME / "history"

# Regions with GPU capacity a live refresh covers unless the `gcp_regions` setting says otherwise.
DEFAULT_REGIONS = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3",
    "us-west4", "northamerica-northeast1", "northamerica-northeast2", "southamerica-east1", "europe-west1",
    "europe-west2", "europe-west3", "europe-west4", "europe-west6", "europe-west8", "europe-west9",
    "europe-north1", "asia-east1", "asia-northeast1", "asia-northeast3", "asia-south1", "asia-south2",
    "asia-southeast1", "asia-southeast2", "australia-southeast1", "me-west1",
)

# machineTypes.aggregatedList's filter (RE2, whole name): the GPU families and the N1 hosts of attachable GPUs.
MACHINE_TYPE_FILTER = 'name eq "(a2|a3|a4|a4x|g2|g4)-.*|n1-standard-(8|16|32|64)"'
PAGE_SIZE_COMPUTE = 200  # maxResults per Compute page (the API allows up to 500)
PAGE_SIZE_BILLING = 5000  # the Catalog's maximum pageSize

HOURS_PER_MONTH = 730  # Google's conversion of monthly (GiB-month) prices to hours
LOCAL_SSD_PARTITION_GIB = 375  # one bundled Local SSD partition

# Machine series -> the family token of its vCPU/RAM SKUs ("A3Plus Instance Core running in ..." ->
# "a3plus"). A4/A4X have none: one "A4 Nvidia B200 (1 gpu slice)" SKU per GPU bills its share of all.
SERIES_SKU_FAMILY: dict[str, str] = {
    "a2-highgpu": "a2", "a2-megagpu": "a2", "a2-ultragpu": "a2",
    "a3-highgpu": "a3", "a3-edgegpu": "a3", "a3-megagpu": "a3plus", "a3-ultragpu": "a3ultra",
    "g2-standard": "g2", "g4-standard": "g4",
}
SLICE_SERIES = ("a4-highgpu", "a4x-highgpu")
N1_SKU_FAMILY = "n1predefined"  # "N1 Predefined Instance Core running in ..."
# TPU type prefix (v5litepod-4) -> (its chip-hour SKU's token, "TpuV5e running in Americas"; the chips
# one host VM holds). v2-v4 are priced per device or pod in the older Cloud TPU service, not read.
TPU_GENERATIONS = {"v5litepod": ("tpuv5e", 8), "v5p": ("tpuv5p", 4), "v6e": ("tpuv6e", 8)}
TPU_SKU = re.compile(r"^(tpu[\w-]*?)(?: running in .+)?$")

# GPUs an N1 VM can attach, priced per GPU count on n1-standard with 8 vCPUs per GPU (within every such
# GPU's vCPU limit) up to the zone's `maximumCardsPerInstance`; -vws variants (a GRID license) left out.
N1_ATTACHABLE_GPUS = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4",
                      "nvidia-tesla-k80")
N1_GPU_COUNTS = (1, 2, 4, 8)
N1_VCPUS_PER_GPU = 8

# Multi-node GPU networking of the 8-GPU A3/A4 shapes (Google's GPU network bandwidth page).
MULTINODE: dict[str, tuple[float, str]] = {
    "a3-highgpu-8g": (1000.0, "GPUDirect-TCPX"), "a3-megagpu-8g": (1800.0, "GPUDirect-TCPXO"),
    "a3-ultragpu-8g": (3200.0, "GPUDirect RDMA (RoCE)"), "a4-highgpu-8g": (3200.0, "GPUDirect RDMA (RoCE)"),
}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    secret_env_vars=("GOOGLE_API_KEY", env_name("gcp_api_key")),
    nightly_secrets=("GCP_SA_KEY", "GOOGLE_CLOUD_PROJECT"),
    credentials_required=True,
    enrichments=(Enrichment(name=ZONE_STATUS, columns=("available", "availability_level")),
                 Enrichment(name=TPUS, gpu_models_like="TPU-%")),
    facts=ProviderFacts(
        display_name="Google Cloud (Compute Engine)", kind="hyperscaler",
        billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="VMs are billed per second after a 1-minute minimum; a GPU VM is billed as the sum "
                      "of its vCPU, memory, GPU and bundled Local SSD SKUs.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped VM stops vCPU/GPU/memory billing; persistent disks and static "
                              "external IP addresses keep billing.",
        access_ssh=True, access_docker=True,
        access_jupyter=False,  # plain VMs; Jupyter is a separate product (Vertex AI Workbench)
        multinode_interconnect="A3 High 1000 Gbps GPUDirect-TCPX; A3 Mega 1800 Gbps GPUDirect-TCPXO; "
                               "A3 Ultra / A4 3200 Gbps GPUDirect RDMA; TPU chips ICI",
        interruptible_offer="Spot VMs (30-second preemption notice)",
        price_source="Cloud Billing Catalog API (services/6F81-5844-456A SKUs), Compute Engine and Cloud TPU APIs",
        source_urls=[
            "https://cloud.google.com/compute/vm-instance-pricing",
            "https://cloud.google.com/compute/docs/instances/stop-start-instance",
            "https://cloud.google.com/compute/docs/accelerator-optimized-machines",
            "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth",
            "https://cloud.google.com/compute/docs/instances/spot",
            "https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list",
            "https://cloud.google.com/tpu/pricing",
            "https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.acceleratorTypes/list",
        ],
    ),
)


@dataclass(frozen=True)
class SkuPrice:
    """One SKU's first pricing expression, with amounts still in the SKU's currency."""

    sku_id: str
    description: str
    unit: str
    currency: str
    conversion_rate: float | None
    tiers: tuple[tuple[float, float], ...]  # (startUsageAmount, amount per unit)
    effective_time: str | None
    n_regions: int = 0  # how many regions the SKU prices: the fewer, the more specific

    def to_usd(self, amount: float) -> float:
        """The amount in USD ("USD * currencyConversionRate = JPY"); ValueError without a usable rate."""
        if self.currency == "USD":
            return amount
        if not self.currency:
            raise ValueError("price has no currency code")
        if (rate := self.conversion_rate) and rate > 0 and not math.isclose(rate, 1.0):  # 1.0: the default
            return amount / rate
        raise ValueError(f"price in {self.currency} without a currency conversion rate; not read as USD")

    @property
    def source_amount(self) -> float:
        """The list rate: the first non-zero tier (a first free tier is a free allowance)."""
        return next((amount for _, amount in self.tiers if amount > 0), self.tiers[0][1] if self.tiers else 0.0)

    @property
    def usd(self) -> float:
        return self.to_usd(self.source_amount)


def money(unit_price: dict[str, Any]) -> float:
    """google.type.Money {units: "2", nanos: 933908000} -> 2.933908."""
    units = int(unit_price.get("units") or 0)
    nanos = int(unit_price.get("nanos") or 0)
    if units and nanos and (units < 0) != (nanos < 0):
        raise ValueError(f"units {units} and nanos {nanos} have different signs")
    return units + nanos / 1e9


def sku_price(sku: dict[str, Any], unit: str) -> SkuPrice:
    """The SKU's first pricing expression (ValueError if unreadable or not in `unit`)."""
    if not (infos := sku.get("pricingInfo") or []):
        raise ValueError("SKU has no pricingInfo")
    info = infos[0]
    expr = info.get("pricingExpression") or {}
    usage_unit = expr.get("usageUnit", "")
    if not (rates := expr.get("tieredRates") or []):
        raise ValueError("SKU has no tieredRates")
    currencies = {(r.get("unitPrice") or {}).get("currencyCode", "") for r in rates}
    if len(currencies) != 1:
        raise ValueError(f"tiers in several currencies {sorted(currencies)}")
    tiers = tuple(sorted((float(r.get("startUsageAmount") or 0), money(r.get("unitPrice") or {})) for r in rates))
    if any(amount < 0 for _, amount in tiers):
        raise ValueError("negative price")
    if usage_unit != unit:
        raise ValueError(f"unit {usage_unit!r}, expected {unit!r}")
    rate = info.get("currencyConversionRate")
    return SkuPrice(
        sku_id=sku.get("skuId", ""), description=sku.get("description", ""), unit=usage_unit,
        currency=currencies.pop(), conversion_rate=float(rate) if rate not in (None, "") else None, tiers=tiers,
        effective_time=info.get("effectiveTime") or None, n_regions=len(sku_regions(sku)),
    )


def sku_regions(sku: dict[str, Any], wanted: set[str] | None = None) -> list[str]:
    """The regions the SKU prices (those in `wanted`, if given)."""
    regions = sku.get("serviceRegions") or (sku.get("geoTaxonomy") or {}).get("regions") or []
    return [r for r in regions if r and (wanted is None or r in wanted)]


# SKUs that are not a plain on-demand/spot rate: a vWS license bundle, sole-tenant nodes,
# reservations, DWS/flex-start capacity. Out of scope.
GPU_OUT_OF_SCOPE_MARKERS = ("virtual workstation", "sole tenancy", "sole-tenancy", "reserved", "reservation",
                            "dws", "flex", "calendar")

# SKU description -> accelerator type name, most specific first (the "A100 80GB" SKU also contains
# "A100"; "GB200" contains "B200"; the A3 Mega GPU is sold as "H100 80GB Mega" and "H100 80GB Plus").
GPU_SKU_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), t) for p, t in (
    (r"\bgb200\b", "nvidia-gb200"), (r"\bb200\b", "nvidia-b200"), (r"\bh200\b", "nvidia-h200-141gb"),
    (r"\bh100\b.*\b(mega|plus)\b|\bh100 mega\b", "nvidia-h100-mega-80gb"), (r"\bh100\b", "nvidia-h100-80gb"),
    (r"\ba100\b.*\b80 ?gb\b", "nvidia-a100-80gb"), (r"\ba100\b", "nvidia-tesla-a100"), (r"\bl4\b", "nvidia-l4"),
    (r"\bt4\b", "nvidia-tesla-t4"), (r"\bv100\b", "nvidia-tesla-v100"), (r"\bp100\b", "nvidia-tesla-p100"),
    (r"\bp4\b", "nvidia-tesla-p4"), (r"\bk80\b", "nvidia-tesla-k80"), (r"\brtx (pro )?6000\b", "nvidia-rtx-pro-6000"),
))
GPU_SLICE = re.compile(r"\(\s*1 gpu slice\s*\)")
CORE_RAM = re.compile(r"^(?P<family>.+?) (?:instance )?(?P<part>core|ram) running in (?P<where>.+)$")
LOCAL_SSD = re.compile(r"^ssd backed local storage(?: attached to spot preemptible vms)?(?: in .+)?$")
# Resource-based committed use: "Commitment v1: A3 Cpu in Americas for 1 Year", "... A3 Ram ...",
# "Commitment v1: Nvidia H100 80GB GPU running in Americas for 3 Year", "Commitment v1: Local SSD In ...".
COMMITMENT_PREFIX = re.compile(r"^commitment v1: ")
COMMIT_CORE_RAM = re.compile(r"^(?P<family>.+?) (?P<part>cpu|ram) in (?P<where>.+) for \d+ years?$")
COMMIT_LOCAL_SSD = re.compile(r"^local ssd (?:in .+ )?for \d+ years?$")
# Committed-use SKUs are billed monthly over the term with nothing upfront; their prices are hourly rates.
COMMITMENT_TERMS = {commitment_option("committed_use", months, "no_upfront"): months for months in (12, 36)}
COMMITMENTS = dict(zip(("Commit1Yr", "Commit3Yr"), COMMITMENT_TERMS))  # usageType -> option


def purchase_option(usage_type: str, description: str) -> str | None:
    """on_demand | spot | a committed-use option, or None (out of scope). "Spot Preemptible" in the
    description wins over the usage type: Google tags some Spot GPU SKUs OnDemand."""
    desc = description.lower()
    if usage_type in COMMITMENTS and desc.startswith("commitment"):
        return COMMITMENTS[usage_type]
    if usage_type.startswith("Commit") or desc.startswith("commitment"):
        return None  # a commitment of a term or kind we do not price
    if "preemptible" in desc or usage_type == "Preemptible":  # also "Spot Preemptible"
        return "spot"
    return "on_demand" if usage_type == "OnDemand" else None


def strip_spot(description: str) -> str:
    d = COMMITMENT_PREFIX.sub("", description.lower().strip())
    d = re.sub(r"^(spot preemptible|preemptible) ", "", d)
    return d.replace(" attached to spot preemptible vms", "")


def gpu_type_of(description: str) -> str | None:
    """GPU SKU description -> accelerator type name ("Nvidia Tesla A100 80GB GPU ..." -> nvidia-a100-80gb)."""
    d = strip_spot(description)
    return next((accel for pattern, accel in GPU_SKU_PATTERNS if pattern.search(d)), None)


@dataclass(frozen=True)
class ComponentKey:
    """What a compute SKU prices: (region, part, family or GPU type, purchase option)."""

    region: str
    part: str  # core | ram | gpu | gpu_slice | tpu | local_ssd
    what: str  # SKU family token ("a2", "n1predefined") or accelerator type; "" for local_ssd
    purchase: str

    def label(self) -> str:
        return f"{self.purchase} {self.part} {self.what}".replace("  ", " ").strip()


EXPECTED_UNIT = {"core": "h", "ram": "GiBy.h", "gpu": "h", "gpu_slice": "h", "tpu": "h", "local_ssd": "GiBy.mo"}


@dataclass
class SkuCatalog:
    """Compute prices by component, why a component could not be used, and which were asked for."""

    prices: dict[ComponentKey, SkuPrice] = field(default_factory=dict)
    invalid: dict[ComponentKey, str] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)  # out-of-scope SKUs by reason
    sku_keys: dict[str, list[ComponentKey]] = field(default_factory=dict)
    asked: set[ComponentKey] = field(default_factory=set)

    def lookup(self, key: ComponentKey) -> SkuPrice | str:
        """The price, or the reason there is none."""
        self.asked.add(key)
        return self.invalid.get(key) or self.prices.get(key) or f"no {key.label()} SKU in {key.region}"


def classify_compute_sku(batch: Batch, sku: dict[str, Any]) -> tuple[str, str] | str | None:
    """(part, family or GPU type) of a SKU we price, else why a Compute SKU is left out; None for a Storage
    SKU other than Local SSD. A GPU/TPU SKU of an unknown model is quarantined, never silently dropped."""
    cat = sku.get("category") or {}
    family, group, desc = cat.get("resourceFamily", ""), cat.get("resourceGroup", ""), sku.get("description", "")
    plain = strip_spot(desc)
    if family != "Compute":
        local_ssd = family == "Storage" and (LOCAL_SSD.match(plain) or COMMIT_LOCAL_SSD.match(plain))
        return ("local_ssd", "") if local_ssd else None
    excluded = any(m in plain for m in GPU_OUT_OF_SCOPE_MARKERS)
    if group == "TPU":
        if excluded:
            return "TPU SKU not a plain on-demand/Spot chip-hour (reserved, DWS...)"
        token = m.group(1).replace("-", "") if (m := TPU_SKU.match(plain)) else None
        if (gen := next((g for g, (t, _) in TPU_GENERATIONS.items() if t == token), None)) is None:
            batch.quarantine("gpu", sku.get("skuId", desc), f"unknown TPU in SKU description {desc!r}", sku)
            return "TPU SKU of an unknown generation (quarantined)"
        return ("tpu", gen)
    if group == "GPU":
        if excluded:
            return "GPU SKU not a plain on-demand/Spot GPU-hour (virtual workstation, sole tenancy, DWS...)"
        if (accel := gpu_type_of(desc)) is None:
            batch.quarantine("gpu", sku.get("skuId", desc), f"unknown GPU in SKU description {desc!r}", sku)
            return "GPU SKU of an unknown GPU (quarantined)"
        return ("gpu_slice" if GPU_SLICE.search(plain) else "gpu", accel)
    if excluded:
        return "vCPU/RAM SKU not a plain on-demand/Spot rate (sole tenancy, DWS...)"
    if m := CORE_RAM.match(plain) or (COMMIT_CORE_RAM.match(plain) if COMMITMENT_PREFIX.match(desc.lower()) else None):
        return ("ram" if m.group("part") == "ram" else "core", re.sub(r"[\s-]+", "", m.group("family")))
    return "compute SKU that is no vCPU/RAM/GPU/TPU part (license, ...)"


def parse_compute_skus(batch: Batch, skus: Iterable[dict[str, Any]], regions: Iterable[str]) -> SkuCatalog:
    """Index the vCPU/RAM/GPU/Local SSD SKUs of the selected regions by component."""
    wanted = set(regions)
    catalog = SkuCatalog()
    for sku in skus:
        cat = sku.get("category") or {}
        if cat.get("resourceFamily") not in ("Compute", "Storage"):
            continue
        purchase = purchase_option(cat.get("usageType", ""), sku.get("description", ""))
        if purchase is None:
            if cat.get("usageType", "").startswith("Commit"):
                catalog.skipped["committed-use SKU of a term or kind not priced"] += 1
            continue
        kind = classify_compute_sku(batch, sku)
        if not isinstance(kind, tuple):
            if kind is not None:
                catalog.skipped[kind] += 1
            continue
        part, what = kind
        if not (in_scope := sku_regions(sku, wanted)):
            catalog.skipped["compute SKU for no selected region"] += 1
            continue
        keys = [ComponentKey(region, part, what, purchase) for region in in_scope]
        catalog.sku_keys[str(sku.get("skuId") or sku.get("name") or id(sku))] = keys
        try:
            price = sku_price(sku, EXPECTED_UNIT[part])
            if price.source_amount <= 0:
                raise ValueError(f"price {price.source_amount:g} {price.currency} is not positive")
            price.usd  # a non-USD price without a usable rate fails here
        except (ValueError, TypeError) as err:
            for key in keys:
                catalog.invalid.setdefault(key, f"SKU {sku.get('skuId')} ({sku.get('description')}): {err}")
            continue
        for key in keys:
            old = catalog.prices.get(key)
            # Two SKUs for one component: the one for fewer regions is the more specific price.
            if old is None or price.n_regions < old.n_regions:
                catalog.prices[key] = price
            elif price.n_regions == old.n_regions and not math.isclose(price.usd, old.usd, rel_tol=1e-9):
                catalog.invalid[key] = (f"conflicting SKUs {old.sku_id} ({old.usd:g} USD) and {price.sku_id} "
                                        f"({price.usd:g} USD) for {key.label()} in {key.region}")
    return catalog


def unused_counts(catalog: SkuCatalog) -> Counter[str]:
    """The in-scope SKUs that price no offer, by why (after build_offers asked for its parts)."""
    asked_what = {(k.part, k.what) for k in catalog.asked}
    counts: Counter[str] = Counter()
    for sku_id, keys in catalog.sku_keys.items():
        priced = [k for k in keys if k in catalog.asked]
        if any(k in catalog.invalid or catalog.prices[k].sku_id == sku_id for k in priced):
            continue  # prices an offer, or its problem is reported on the offers that asked
        part, what = keys[0].part, keys[0].what
        if priced:
            reason = "SKU whose component a more specific SKU (for fewer regions) prices"
        elif part in ("core", "ram") and (part, what) not in asked_what:
            reason = "vCPU/RAM SKU of a machine family without GPU machine types"
        elif part in ("core", "ram"):
            reason = "vCPU/RAM SKU of a GPU machine family for a region or purchase option no GPU machine type has"
        elif part == "local_ssd":
            reason = "Local SSD SKU for a region or purchase option no GPU machine type has"
        elif part == "tpu":
            reason = "TPU SKU for a generation, region or purchase option no listed TPU type has"
        else:
            reason = "GPU SKU for a GPU type, region or purchase option no machine type has"
        counts[reason] += 1
    return counts


@dataclass(frozen=True)
class ZoneInfo:
    name: str
    region: str
    status: str  # UP | DOWN


@dataclass(frozen=True)
class MachineShape:
    zone: str
    name: str
    vcpus: int
    memory_gib: float
    accelerators: tuple[tuple[str, int], ...]
    local_ssd_partitions: int
    deprecated: str
    description: str


@dataclass(frozen=True)
class AcceleratorInfo:
    name: str
    description: str
    max_cards: int


def _last_segment(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


@drift_guard("gcp: zones.list")
def parse_zones(pages: Iterable[dict[str, Any]]) -> dict[str, ZoneInfo]:
    out = {}
    for page in pages:
        for z in page.get("items") or []:
            if not z.get("name") or not z.get("region"):
                raise SchemaDriftError(f"gcp: zones.list item lacks name/region: {str(z)[:200]}")
            out[z["name"]] = ZoneInfo(z["name"], _last_segment(z["region"]), z.get("status", ""))
    return out


def listed_zones(pages: Iterable[dict[str, Any]]) -> dict[str, ZoneInfo]:
    """zones.list's zones; none at all is a failed answer (a project always sees zones), not "no zone is UP"."""
    if not (zones := parse_zones(pages)):
        raise SchemaDriftError("gcp: zones.list answered no zones")
    return zones


@drift_guard("gcp: machineTypes.aggregatedList")
def parse_machine_types(pages: Iterable[dict[str, Any]]) -> dict[str, dict[str, MachineShape]]:
    """zone -> machine type name -> shape."""
    out: dict[str, dict[str, MachineShape]] = {}
    for page in pages:
        for scope, scoped in (page.get("items") or {}).items():
            for mt in scoped.get("machineTypes") or []:
                try:
                    shape = machine_shape(mt, scope.removeprefix("zones/"))
                except (KeyError, TypeError, ValueError) as err:
                    raise SchemaDriftError(f"gcp: machine type lacks {err}: {str(mt)[:200]}") from None
                out.setdefault(shape.zone, {})[shape.name] = shape
    return out


def machine_shape(mt: dict[str, Any], zone: str = "") -> MachineShape:
    accels = tuple((a["guestAcceleratorType"], int(a["guestAcceleratorCount"]))
                   for a in mt.get("accelerators") or [] if int(a.get("guestAcceleratorCount") or 0) > 0)
    return MachineShape(
        zone=_last_segment(mt.get("zone") or zone) or zone, name=mt["name"], vcpus=int(mt["guestCpus"]),
        memory_gib=int(mt["memoryMb"]) / 1024, accelerators=accels,
        local_ssd_partitions=int((mt.get("bundledLocalSsds") or {}).get("partitionCount") or 0),
        deprecated=(mt.get("deprecated") or {}).get("state", "") or "", description=mt.get("description", ""),
    )


@drift_guard("gcp: acceleratorTypes.aggregatedList")
def parse_accelerator_types(pages: Iterable[dict[str, Any]]) -> dict[str, dict[str, AcceleratorInfo]]:
    """zone -> accelerator type name -> facts."""
    out: dict[str, dict[str, AcceleratorInfo]] = {}
    for page in pages:
        for scope, scoped in (page.get("items") or {}).items():
            for a in scoped.get("acceleratorTypes") or []:
                zone = _last_segment(a.get("zone") or "") or scope.removeprefix("zones/")
                out.setdefault(zone, {})[a["name"]] = AcceleratorInfo(
                    a["name"], a.get("description", ""), int(a.get("maximumCardsPerInstance") or 0))
    return out


def plan_tpus(pages: Iterable[dict[str, Any]], zones: dict[str, ZoneInfo], regions: Iterable[str],
              skips: Counter[str]) -> list[OfferPlan]:
    """One plan per single-host TPU type of a selected region (chips from the topology "2x2x1"), others in `skips`."""
    wanted, plans = set(regions), []
    for t in (t for page in pages for t in page.get("acceleratorTypes") or []):
        zone, topology = t["name"].split("/locations/")[1].split("/")[0], t["acceleratorConfigs"][0]["topology"]
        chips, generation = math.prod(int(n) for n in topology.split("x")), t["type"].rsplit("-", 1)[0]
        if generation not in TPU_GENERATIONS:
            skips["TPU types of generations not priced per chip in the Compute Engine Catalog (v2-v4)"] += 1
        elif region_of(zone, zones) not in wanted:
            skips["TPU types in zones outside the selected regions"] += 1
        elif chips > TPU_GENERATIONS[generation][1]:
            skips["TPU slices of several host VMs (multi-host) not priced as one offer"] += 1
        else:
            plans.append(OfferPlan(region_of(zone, zones), zone, t["type"], generation, chips, 0, 0, 0, "tpu",
                                   (("topology", topology),)))
    return plans


def series_of(machine_type: str) -> str:
    """a2-highgpu-1g -> a2-highgpu; a3-edgegpu-8g-nolssd -> a3-edgegpu."""
    return "-".join(machine_type.split("-")[:2])


def region_of(zone: str, zones: dict[str, ZoneInfo]) -> str:
    """The zone's region as zones.list says, else by Google's naming (us-central1-a -> us-central1)."""
    return zones[zone].region if zone in zones else zone.rsplit("-", 1)[0]


@dataclass(frozen=True)
class OfferPlan:
    """One priced configuration: a zone's machine type (or N1 host + GPUs)."""

    region: str
    zone: str
    instance_type: str
    gpu_type: str
    gpu_count: int
    vcpus: int
    ram_gib: float
    local_ssd_gib: float
    sku_family: str | None  # None: billed per GPU slice; "tpu": per TPU chip
    extra: tuple[tuple[str, Any], ...] = ()

    def parts(self, purchase: str) -> list[tuple[str, ComponentKey, float]]:
        """(part name, component, quantity) of each SKU the configuration is billed by."""
        if self.sku_family in (None, "tpu"):  # the GPU slice or TPU chip SKU bills everything
            part = "tpu" if self.sku_family else "gpu_slice"
            parts: list[tuple[str, str, str, float]] = [(part, part, self.gpu_type, self.gpu_count)]
        else:
            parts = [("vcpu", "core", self.sku_family, self.vcpus), ("ram", "ram", self.sku_family, self.ram_gib),
                     ("gpu", "gpu", self.gpu_type, self.gpu_count)]
        if self.local_ssd_gib:  # a GiB-month SKU, per hour: GiB / 730 h
            parts.append(("local_ssd", "local_ssd", "", self.local_ssd_gib / HOURS_PER_MONTH))
        return [(name, ComponentKey(self.region, part, what, purchase), qty) for name, part, what, qty in parts]

    def raw(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "extra"}, **dict(self.extra)}


@dataclass(frozen=True)
class Composed:
    usd_per_hour: float
    currency: str
    source_per_hour: float
    components: list[dict[str, Any]]
    effective_time: str | None


def compose(plan: OfferPlan, purchase: str, catalog: SkuCatalog) -> Composed | str:
    """Sum the plan's parts at one purchase option, or say which part is missing or unusable."""
    rows = [(name, qty, catalog.lookup(key)) for name, key, qty in plan.parts(purchase)]
    if problems := [f"{name}: {c}" for name, _, c in rows if isinstance(c, str)]:
        return "; ".join(problems)
    currencies = {c.currency for _, _, c in rows}
    if len(currencies) > 1:
        return f"components priced in several currencies {sorted(currencies)}"
    components = []
    for name, qty, c in rows:
        item = {"part": name, "sku": c.sku_id, "description": c.description, "unit": c.unit,
                "unit_price_usd": round(c.usd, 12), "quantity": round(qty, 9), "usd_per_hour": round(c.usd * qty, 12)}
        if c.currency != "USD":
            item.update(source_currency=c.currency, source_unit_price=c.source_amount,
                        currency_conversion_rate=c.conversion_rate)
        components.append(item)
    usd = round(sum(c.usd * qty for _, qty, c in rows), 10)
    currency = currencies.pop()
    source = usd if currency == "USD" else round(sum(c.source_amount * qty for _, qty, c in rows), 10)
    stamp = max((c.effective_time for _, _, c in rows if c.effective_time), default=None)
    return Composed(usd, currency, source, components, stamp)


def plan_offers(zones: dict[str, ZoneInfo], shapes: dict[str, dict[str, MachineShape]],
                accelerators: dict[str, dict[str, AcceleratorInfo]], regions: Iterable[str],
                batch: Batch, skips: Counter[str]) -> list[OfferPlan]:
    """Every (zone, machine type) of a GPU family and N1 host + attachable GPU count; the rest counted in `skips`."""
    wanted = set(regions)
    plans: list[OfferPlan] = []
    for zone in sorted(set(shapes) | set(accelerators)):
        region = region_of(zone, zones)
        zone_shapes, zone_accels = shapes.get(zone, {}), accelerators.get(zone, {})
        if region not in wanted:
            skips["zone machine types outside the selected regions"] += len(zone_shapes)
            continue
        for name, shape in sorted(zone_shapes.items()):
            series = series_of(name)
            if series not in SERIES_SKU_FAMILY and series not in SLICE_SERIES:
                if shape.accelerators:  # a GPU series we do not know how Google bills
                    batch.quarantine("offer", f"{zone}/{name}", f"unknown GPU machine series {series!r}: "
                                     "no rule for which SKUs bill it", shape.__dict__)
                elif name.startswith("n1-"):
                    skips["CPU-only N1 host machine types (priced only with attached GPUs)"] += 1
                else:
                    skips["CPU-only machine types outside the GPU families"] += 1
            elif shape.deprecated in ("OBSOLETE", "DELETED"):
                skips[f"{shape.deprecated.lower()} GPU machine types (described, not sold)"] += 1
            elif len(shape.accelerators) != 1:
                batch.quarantine("offer", f"{zone}/{name}",
                                 f"GPU machine type with {len(shape.accelerators)} accelerator entries", shape.__dict__)
            else:
                accel, count = shape.accelerators[0]
                info = zone_accels.get(accel)
                plans.append(OfferPlan(
                    region, zone, name, accel, count, shape.vcpus, shape.memory_gib,
                    shape.local_ssd_partitions * LOCAL_SSD_PARTITION_GIB, SERIES_SKU_FAMILY.get(series),
                    (("machine_description", shape.description),
                     ("accelerator_description", info.description if info else None),
                     ("deprecated", shape.deprecated or None))))
        for accel, info in sorted(zone_accels.items()):
            if accel not in N1_ATTACHABLE_GPUS:
                if accel.endswith("-vws"):
                    skips["N1 pairings not priced: virtual-workstation GPU types (a GRID license on top)"] += 1
                elif not any(a == accel for s in zone_shapes.values() for a, _ in s.accelerators):
                    skips["N1 pairings not priced: accelerator types no N1 host takes"] += 1
                continue
            for count in N1_GPU_COUNTS:
                host_name = f"n1-standard-{N1_VCPUS_PER_GPU * count}"
                if count > info.max_cards:
                    skips["N1 pairings not priced: GPU count above the zone's maximumCardsPerInstance"] += 1
                elif (host := zone_shapes.get(host_name)) is None:
                    skips[f"N1 pairings not priced: host {host_name} not listed in the zone"] += 1
                else:
                    plans.append(OfferPlan(
                        region, zone, f"{host_name}+{count}x{accel}", accel, count, host.vcpus, host.memory_gib, 0,
                        N1_SKU_FAMILY,
                        (("host_machine_type", host_name),
                         ("host_rule", f"n1-standard with {N1_VCPUS_PER_GPU} vCPUs per attached GPU"),
                         ("accelerator_description", info.description),
                         ("maximum_cards_per_instance", info.max_cards))))
    return plans


def _interconnect(plan: OfferPlan) -> str | None:
    if plan.gpu_count <= 1:
        return None
    if plan.sku_family == "tpu":
        return "ICI"
    if plan.gpu_type == "nvidia-gb200":
        return "NVLink (NVL72 domain)"
    if plan.sku_family in ("a2", "a3", "a3plus", "a3ultra") or plan.sku_family is None:
        return "NVSwitch"
    return "NVLink" if plan.gpu_type == "nvidia-tesla-v100" else "PCIe"


def build_offers(batch: Batch, plans: Iterable[OfferPlan], catalog: SkuCatalog,
                 zones: dict[str, ZoneInfo]) -> None:
    """Turn plans into on-demand, Spot and committed-use offers; quarantine what cannot be priced."""
    missing: Counter[str] = Counter()  # Spot or committed-use GPU SKUs a plan's region has none of
    unpriced: Counter[str] = Counter()  # described by Compute Engine, not priceable from the Catalog
    for plan in plans:
        ref = f"{plan.zone}/{plan.instance_type}"
        try:
            known = canonicalize(NAME, plan.gpu_type)
        except UnknownGPUError as err:
            batch.quarantine("offer", ref, f"gpu: {err}", plan.raw())
            continue
        on_demand_usd: float | None = None
        for purchase in ("on_demand", "spot", *(COMMITMENT_TERMS if plan.sku_family != "tpu" else ())):
            gpu_key = next(key for name, key, _ in plan.parts(purchase) if name in ("gpu", "gpu_slice", "tpu"))
            if purchase != "on_demand" and gpu_key not in catalog.prices and gpu_key not in catalog.invalid:
                missing[purchase if purchase == "spot" else "committed use"] += 1  # not sold that way: no error
                continue
            composed = compose(plan, purchase, catalog)
            if isinstance(composed, str):
                batch.quarantine("offer", f"{ref}/{purchase}", f"price: {composed}", plan.raw())
                unpriced[purchase] += 1
            elif _add_offer(batch, plan, purchase, composed, known, zones.get(plan.zone), on_demand_usd) \
                    and purchase == "on_demand":
                on_demand_usd = composed.usd_per_hour
    if missing["spot"]:
        batch.notes.append(f"{missing['spot']} zone/machine-type pairs have no Spot GPU/TPU SKU in their region")
    if missing["committed use"]:
        batch.notes.append(f"{missing['committed use']} zone/machine-type/term triples have no committed-use GPU "
                           "SKU in their region")
    for purchase, n in sorted(unpriced.items()):
        batch.notes.append(f"{n} {purchase} zone/machine types described by Compute Engine or Cloud TPU but not "
                           "priced by the Catalog (quarantined with the missing part)")


def _add_offer(batch: Batch, plan: OfferPlan, purchase: str, c: Composed, gpu: tuple[GPUModel, bool],
               zone: ZoneInfo | None, on_demand_usd: float | None) -> bool:
    network, fabric = MULTINODE.get(plan.instance_type, (None, None))
    data: dict[str, Any] = {"accelerator_type": plan.gpu_type, "components": c.components,
                            "billing": "sum of the components' Catalog SKU prices",
                            **{k: v for k, v in plan.extra if v is not None}}
    if c.currency != "USD":
        data["source_currency"] = c.currency
    saving = round(100 * (1 - c.usd_per_hour / on_demand_usd), 1) if on_demand_usd else None
    months = COMMITMENT_TERMS.get(purchase)
    if months is not None:
        data["billing"] += "; committed-use SKUs are billed every month of the term, used or not"
        if saving is not None:
            data["saving_vs_on_demand_pct"] = saving
    return batch.offer(
        f"{plan.zone}/{plan.instance_type}/{purchase}", plan.raw(), gpu_model=gpu[0].gpu_model,
        gpu_variant_exact=gpu[1], gpu_name_reported=plan.gpu_type, gpu_count=plan.gpu_count,
        gpu_memory_gb=gpu[0].memory_gb, region=plan.region, zone=plan.zone, instance_type=plan.instance_type,
        purchase_option=purchase, vcpus=plan.vcpus or None, ram_gb=plan.ram_gib or None,
        local_disk_gb=plan.local_ssd_gib or None, interconnect=_interconnect(plan), network_gbps=network,
        multinode_fabric=fabric, price_per_hour=c.usd_per_hour, source_currency=c.currency,
        source_price_per_hour=c.source_per_hour, price_observed_at=c.effective_time,
        available=(zone.status == "UP") if zone else None,
        availability_level=f"listed in zone (zone {zone.status})" if zone else "listed in zone",
        spot_savings_pct=saving if purchase == "spot" else None, term_months=months,
        payment_option="no_upfront" if months else None, provider_data=data)


# Capacity SKUs of the disk types a fine-tuning job keeps data on. IOPS and throughput SKUs,
# snapshots, images, storage pools and Confidential-mode surcharges are other dimensions.
STORAGE_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), c) for p, c in (
    (r"^storage pd capacity\b", "pd-standard"), (r"^regional storage pd capacity\b", "pd-standard-regional"),
    (r"^balanced pd capacity\b", "pd-balanced"), (r"^regional balanced pd capacity\b", "pd-balanced-regional"),
    (r"^ssd backed pd capacity\b", "pd-ssd"), (r"^regional ssd backed pd capacity\b", "pd-ssd-regional"),
    (r"^extreme pd capacity\b", "pd-extreme"), (r"^hyperdisk balanced capacity\b", "hyperdisk-balanced"),
    (r"^hyperdisk balanced high availability capacity\b", "hyperdisk-balanced-ha"),
    (r"^hyperdisk extreme capacity\b", "hyperdisk-extreme"), (r"^hyperdisk ml capacity\b", "hyperdisk-ml"),
    (r"^hyperdisk throughput capacity\b", "hyperdisk-throughput"),
    (r"^ssd backed local storage(?: in .+)?$", "local-ssd"),
))


def storage_class_of(description: str) -> str | None:
    d = description.lower().strip()
    return None if "confidential" in d else next((cls for pattern, cls in STORAGE_CLASSES if pattern.search(d)), None)


def _on_demand_skus(skus: Iterable[dict[str, Any]], family: str) -> Iterable[dict[str, Any]]:
    for sku in skus:
        cat = sku.get("category") or {}
        if cat.get("resourceFamily") == family and cat.get("usageType") == "OnDemand":
            yield sku


def build_storage(batch: Batch, skus: Iterable[dict[str, Any]], regions: Iterable[str]) -> None:
    """One USD per GiB-month row per (region, disk type): the most specific SKU's list rate."""
    wanted = set(regions)
    best: dict[tuple[str, str], tuple[dict[str, Any], SkuPrice]] = {}
    for sku in _on_demand_skus(skus, "Storage"):
        cls = storage_class_of(sku.get("description", ""))
        if cls is None or not (in_scope := sku_regions(sku, wanted)):
            continue
        try:
            price = sku_price(sku, "GiBy.mo")
        except (ValueError, TypeError) as err:
            batch.quarantine("storage", sku.get("skuId", ""), f"price: {err}", sku)
            continue
        for region in in_scope:
            old = best.get((region, cls))
            if old is None or price.n_regions < old[1].n_regions:
                best[(region, cls)] = (sku, price)
    for (region, cls), (sku, price) in sorted(best.items()):
        ref = f"{region}/{cls}/{price.sku_id}"
        try:
            usd = price.usd
        except ValueError as err:
            batch.quarantine("storage", ref, f"price: {err}", sku)
            continue
        free = len(price.tiers) > 1 and price.tiers[0] == (0, 0)
        note = f"; first {price.tiers[1][0]:g} GiB-month free" if free else ""
        batch.add("storage", ref, sku, region=region, storage_class=cls, usd_per_gb_month=usd,
                  source_currency=price.currency, source_usd_per_gb_month=price.source_amount,
                  description=f"{price.description} (SKU {price.sku_id}; USD per GiB-month{note})")


SPECIAL_INTERNET_DESTINATIONS = re.compile(r"\bto (china|australia)\b")
EGRESS_GROUPS = {
    "PremiumInternetEgress": "internet",  # Premium Tier, the default network tier
    "InterregionEgress": "inter_region",
    "InterzoneEgress": "same_region",
}


def _rate_at(price: SkuPrice, usage: float) -> float:
    """The tier rate that applies at `usage` GiB."""
    return next((amount for start, amount in reversed(price.tiers) if start <= usage), price.tiers[0][1])


def build_egress(batch: Batch, skus: Iterable[dict[str, Any]], regions: Iterable[str]) -> None:
    """Egress tiers per region and destination kind, at each tier the highest destination's rate (never too low);
    internet egress to China/Australia is left out of it, as Google's Premium Tier table does, and described."""
    wanted = set(regions)
    groups: dict[tuple[str, str], list[SkuPrice]] = {}
    special: dict[str, float] = {}  # region -> highest internet rate to China/Australia
    for sku in _on_demand_skus(skus, "Network"):
        dest = EGRESS_GROUPS.get((sku.get("category") or {}).get("resourceGroup", ""))
        if dest is None or not (in_scope := sku_regions(sku, wanted)):
            continue
        try:
            price = sku_price(sku, "GiBy")
            price = replace(price, currency="USD", conversion_rate=None,
                            tiers=tuple((s, price.to_usd(a)) for s, a in price.tiers))
        except (ValueError, TypeError) as err:
            batch.quarantine("egress", sku.get("skuId", ""), f"price: {err}", sku)
            continue
        for region in in_scope:
            if dest == "internet" and SPECIAL_INTERNET_DESTINATIONS.search(price.description.lower()):
                special[region] = max(special.get(region, 0.0), max(a for _, a in price.tiers))
            else:
                groups.setdefault((region, dest), []).append(price)
    for (region, dest), prices in sorted(groups.items()):
        starts = sorted({s for p in prices for s, _ in p.tiers})
        low = min((a for p in prices for _, a in p.tiers if a > 0), default=0.0)
        extra = (f"; to China/Australia up to {special[region]:g} USD/GiB, not included"
                 if dest == "internet" and region in special else "")
        for start, end in zip(starts, [*starts[1:], None]):
            top = max(prices, key=lambda p: _rate_at(p, start))
            rate = _rate_at(top, start)
            batch.add("egress", f"{region}/{dest}/{start:g}", top.description, region=region, destination=dest,
                      tier_start_gb=start, tier_end_gb=end, usd_per_gb=rate, source_currency="USD",
                      source_usd_per_gb=rate,
                      description=(f"highest of {len(prices)} destination SKUs at this tier ({top.description}, "
                                   f"SKU {top.sku_id}); lowest paid rate {low:g}; USD per GiB{extra}"))


_COUNT_LOCK = threading.Lock()  # the listings run in threads and share ctx.requests_made and ctx.pages


def make_clients(ctx: SourceContext) -> tuple[dict[str, Any], Any, str]:
    """(a Compute client's keyword arguments, the Catalog client, the project id). Replay: anonymous
    credentials. Live: Application Default Credentials, and for the Catalog an API key if one is set."""
    import google.auth
    from google.api_core.gapic_v1.client_info import ClientInfo
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import billing_v1

    api_key: str | None = None
    if not ctx.reaches_provider:
        credentials: Any = AnonymousCredentials()
        # The recording's own project id, never the environment's: the request paths carry it.
        project = str(ctx.settings.get("gcp_project") or REPLAY_PROJECT)
    else:
        config = ctx.config
        api_key = (config.gcp_api_key.get_secret_value() if config.gcp_api_key else None) or \
            os.environ.get("GOOGLE_API_KEY") or None
        try:
            credentials, adc_project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        except DefaultCredentialsError:
            what = ("an API key reaches only the Billing Catalog; the Compute Engine API needs "
                    "Application Default Credentials") if api_key else (
                    f"neither Application Default Credentials nor an API key (GOOGLE_API_KEY / "
                    f"{env_name('gcp_api_key')}) were found")
            raise MissingCredentialsError(
                f"gcp: no credentials: {what}; run `gcloud auth application-default login` or set "
                "GOOGLE_APPLICATION_CREDENTIALS") from None
        # What the credentials file holds is as secret as the env's keys: never in a message.
        for secret in (api_key, getattr(credentials, "refresh_token", None),
                       getattr(credentials, "client_secret", None)):
            register_secret(secret if isinstance(secret, str) else None)
        project = config.gcp_project or os.environ.get("GOOGLE_CLOUD_PROJECT") or adc_project
        if not project:
            raise MissingCredentialsError("gcp: no credentials: no project id; set GOOGLE_CLOUD_PROJECT or "
                                          f"{env_name('gcp_project')}")
    common = {"transport": "rest", "client_info": ClientInfo(user_agent=USER_AGENT)}
    billing = {"api_endpoint": ctx.guarded_url(BILLING_HOST)}
    catalog = billing_v1.CloudCatalogClient(**common, client_options={**billing, "api_key": api_key}) if api_key \
        else billing_v1.CloudCatalogClient(**common, credentials=credentials, client_options=billing)
    compute = {**common, "credentials": credentials, "client_options": {"api_endpoint": ctx.guarded_url(COMPUTE_HOST)}}
    return compute, catalog, str(project)


def _count(ctx: SourceContext, what: str | None = None) -> None:
    with _COUNT_LOCK:
        ctx.requests_made += 1
        if what:
            ctx.pages[what] = ctx.pages.get(what, 0) + 1


def _pages(method: Any, request: Any, **call: Any) -> Iterable[Any]:
    """A list method's pages: its pager's, or (a mixin answering one List...Response) by next_page_token."""
    answer = method(request=request, **call)
    if hasattr(answer, "pages"):
        yield from answer.pages
        return
    yield answer
    while answer.next_page_token:
        request.page_token = answer.next_page_token
        answer = method(request=request, **call)
        yield answer


def fetch_listing(ctx: SourceContext, what: str, method: Any, request: Any, where: str = "") -> list[dict[str, Any]]:
    """Every page of a list method as wire-format dicts, each page under the retry policy; a repeated page
    token or more than `max_pages` pages is a paging loop; a failure is a SourceError naming the page."""
    import requests
    from google.api_core import exceptions as api
    from google.api_core.timeout import ConstantTimeout
    from google.auth import exceptions as auth
    from google.protobuf.json_format import MessageToDict, ParseError

    policy = ctx.retry_policy
    # ChunkedEncodingError: the connection broke mid-body; a page is fetched whole, so retrying it is safe.
    retryable = (api.TooManyRequests, api.ServerError, requests.exceptions.ConnectionError,
                 requests.exceptions.Timeout, requests.exceptions.ChunkedEncodingError)
    attempts = policy.google_retry(retryable, lambda: _count(ctx), lambda err: retry_after_s(  # 429/503's wait
        (getattr(getattr(err, "response", None), "headers", None) or {}).get("Retry-After")))
    pages: list[dict[str, Any]] = []
    tokens: set[str] = set()
    page_what = f"{what}{where} (page 1)"
    try:
        # Each try gets the whole read timeout, as an httpx or boto3 request does (a float would be
        # one deadline shared by all the tries of a page).
        for page in _pages(method, request, retry=attempts.retry, timeout=ConstantTimeout(ctx.http_timeout_s)):
            _count(ctx, what)
            attempts.page_done()
            # The page as the wire's JSON (camelCase), from a proto-plus message or a plain protobuf one.
            pages.append(type(page).to_dict(page, preserving_proto_field_name=False, use_integers_for_enums=False)
                         if hasattr(type(page), "to_dict") else MessageToDict(page, preserving_proto_field_name=False))
            ctx.count_bytes(len(json.dumps(pages[-1])))  # the client keeps its HTTP session: the page's JSON
            token = page.next_page_token
            if token in tokens:
                raise SourceError(f"gcp: {what}: page token {token[:40]!r} came again (a paging loop)")
            if token and len(pages) >= ctx.config.max_pages:
                raise SourceError(f"gcp: {what}: paging did not end within {len(pages)} pages "
                                  f"({env_name('max_pages')})")
            tokens.add(token)
            page_what = f"{what}{where} (page {len(pages) + 1})"
    except AttemptsSpent as err:
        raise SourceError(f"gcp: {page_what} failed after {err.attempts} attempts: {err.last}") from scrubbed(err.last)
    except api.RetryError as err:  # google's deadline (the policy's budget) passed first
        last = err.cause or err
        raise SourceError(f"gcp: {page_what} failed after {attempts.failures} attempts within "
                          f"{policy.budget_s:g} s: {last}") from scrubbed(last)
    except api.GoogleAPICallError as err:
        raise SourceError(f"gcp: {page_what} failed: HTTP {err.code} {str(err.message)[:200]}") from scrubbed(err)
    except auth.GoogleAuthError as err:
        raise SourceError(f"gcp: {page_what} failed: authentication error {type(err).__name__}") from scrubbed(err)
    except (ParseError, ValueError) as err:  # the client could not read the answer into its message type
        raise SchemaDriftError(f"gcp: {page_what}: the answer does not parse as the API's message: "
                               f"{str(err)[:300]}") from err
    except requests.exceptions.RequestException as err:
        raise SourceError(f"gcp: {page_what} failed: {type(err).__name__}: {str(err)[:200]}") from scrubbed(err)
    return pages


def tpu_locations(ctx: SourceContext, method: Any, request: Any) -> list[dict[str, Any]]:
    """The Cloud TPU locations; none is no answer (every TPU offer would close), not "no TPU anywhere"."""
    pages = fetch_listing(ctx, "tpu locations.list", method, request)
    if not any(p.get("locations") for p in pages):
        raise SchemaDriftError("gcp: tpu locations.list returned no locations")
    return pages


def fetch(ctx: SourceContext) -> Batch:
    """Machine and accelerator types, Catalog SKUs, TPU zones, zones.list at once, then each TPU zone's types."""
    from google.cloud import billing_v1, compute_v1, tpu_v2
    from google.cloud.location import locations_pb2

    compute, catalog, project = make_clients(ctx)
    tpu = tpu_v2.TpuClient(**{**compute, "client_options": {"api_endpoint": ctx.guarded_url(TPU_HOST)}})
    page = {"project": project, "max_results": PAGE_SIZE_COMPUTE}
    listings = (
        ("machineTypes.aggregatedList", compute_v1.MachineTypesClient(**compute).aggregated_list,
         compute_v1.AggregatedListMachineTypesRequest(**page, filter=MACHINE_TYPE_FILTER)),
        ("acceleratorTypes.aggregatedList", compute_v1.AcceleratorTypesClient(**compute).aggregated_list,
         compute_v1.AggregatedListAcceleratorTypesRequest(**page)),
        ("services.skus.list", catalog.list_skus, billing_v1.ListSkusRequest(
            parent=COMPUTE_ENGINE_SERVICE, currency_code="USD", page_size=PAGE_SIZE_BILLING)),
    )
    zones_list = compute_v1.ZonesClient(**compute).list
    with ThreadPoolExecutor(max_workers=5, thread_name_prefix="gcp") as pool:
        zones_f = pool.submit(PROVIDER.enrich, ctx, ZONE_STATUS, lambda: listed_zones(fetch_listing(
            ctx, "zones.list", zones_list, compute_v1.ListZonesRequest(**page))), default={})
        locations_f = pool.submit(PROVIDER.enrich, ctx, TPUS, tpu_locations, ctx, tpu.list_locations,
                                  locations_pb2.ListLocationsRequest(name=f"projects/{project}"))
        type_pages, accel_pages, sku_pages = [
            f.result() for f in [pool.submit(fetch_listing, ctx, *job) for job in listings]]
        zones, location_pages = zones_f.result(), locations_f.result()
    skus = [sku for page in sku_pages for sku in page.get("skus") or []]
    if not skus:
        raise SchemaDriftError("gcp: the Cloud Billing Catalog returned no Compute Engine SKUs")
    shapes = parse_machine_types(type_pages)
    if not any(series_of(n) in (*SERIES_SKU_FAMILY, *SLICE_SERIES) for z in shapes.values() for n in z):
        raise SchemaDriftError("gcp: machineTypes.aggregatedList returned no GPU machine types")
    accelerators = parse_accelerator_types(accel_pages)
    # Without zones.list, the regions are those of every zone the aggregated lists name.
    scopes = {scope.removeprefix("zones/") for page in type_pages + accel_pages for scope in page.get("items") or {}}
    available = {z.region for z in zones.values()} or {region_of(zone, zones) for zone in scopes}
    regions = ctx.select_regions(available, DEFAULT_REGIONS, "the zones list")
    tpu_zones = sorted({loc["locationId"] for p in location_pages or () for loc in p.get("locations") or []
                        if region_of(loc["locationId"], zones) in regions})

    def tpu_types() -> list[dict[str, Any]]:
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="gcp-tpu") as pool:
            return [p for pages in pool.map(lambda zone: fetch_listing(
                ctx, "tpu acceleratorTypes.list", tpu.list_accelerator_types, tpu_v2.ListAcceleratorTypesRequest(
                    parent=f"projects/{project}/locations/{zone}"), f" in {zone}"), tpu_zones) for p in pages]
    tpu_pages = PROVIDER.enrich(ctx, TPUS, tpu_types, default=[]) if location_pages is not None else []
    batch = build_batch(zones, shapes, accelerators, skus, regions, tpu_pages)
    if ctx.mode == "replay" and project == REPLAY_PROJECT:
        add_zone_history(batch, ZONE_HISTORY)
    return batch


def add_zone_history(batch: Batch, folder: Path) -> None:
    """The bundled recording's earlier zones.list answers (`zones.<UTC time>.json.gz`) as past availability."""
    places = sorted({(o.region, o.zone, o.instance_type, o.gpu_model) for o in batch.offers})
    for path in sorted(folder.glob("zones.*.json.gz")):
        at = datetime.strptime(path.name.split(".")[1], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        zones = parse_zones([json.loads(gzip.decompress(path.read_bytes()))])
        for region, zone, itype, model in places:
            if (z := zones.get(zone)) is not None:
                add_observation(batch, f"{path.name}/{zone}/{itype}", z.__dict__, region=region, zone=zone,
                                instance_type=itype, gpu_model=model, observed_at=at, available=z.status == "UP",
                                availability_level=f"listed in zone (zone {z.status})")


@drift_guard("gcp: Compute, Cloud TPU and Billing Catalog answers")
def build_batch(zones: dict[str, ZoneInfo], shapes: dict[str, dict[str, MachineShape]],
                accelerators: dict[str, dict[str, AcceleratorInfo]], skus: list[dict[str, Any]],
                regions: Iterable[str], tpu_pages: Iterable[dict[str, Any]] = ()) -> Batch:
    """Everything fetched -> offers, storage and egress records (pure)."""
    regions = list(regions)
    batch = PROVIDER.batch()
    catalog = parse_compute_skus(batch, skus, regions)
    batch.notes.extend(f"{n} SKUs left out: {reason}" for reason, n in sorted(catalog.skipped.items()))
    skips: Counter[str] = Counter()
    plans = plan_offers(zones, shapes, accelerators, regions, batch, skips)
    plans += plan_tpus(tpu_pages, zones, regions, skips)
    batch.notes.extend(f"{n} {why}" for why, n in sorted(skips.items()))
    build_offers(batch, plans, catalog, zones)
    batch.notes.extend(f"{n} SKUs not used: {reason}" for reason, n in sorted(unused_counts(catalog).items()))
    build_storage(batch, skus, regions)
    build_egress(batch, skus, regions)
    return batch
