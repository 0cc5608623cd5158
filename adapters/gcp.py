"""Google Cloud Compute Engine: GPU VM prices composed from Billing Catalog SKUs, PD, egress.

Google does not publish one price per GPU machine type: it bills each VM as
the sum of its parts (vCPU SKU x cores + RAM SKU x GiB + GPU SKU x cards +
bundled Local SSD), and so does this adapter. Sources, all through Google's
own client libraries (REST transport):

- `google-cloud-compute`: zones (zone -> region, status), machine types of the
  GPU families (aggregated over zones, with their `accelerators` and bundled
  Local SSD partitions), accelerator types (which GPUs a zone offers and how
  many an N1 VM may attach);
- `google-cloud-billing`: the Cloud Billing Catalog SKUs of the Compute Engine
  service (`services/6F81-5844-456A`): vCPU, RAM, GPU, Local SSD,
  persistent disk and network egress prices, per `serviceRegions`.

`fetch_*` functions do I/O and return plain JSON-shaped dicts (the wire
format, camelCase); `parse_*`/`build_*` are pure and take those dicts.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from gpuledger.adapters.base import (
    USER_AGENT, MissingCredentialsError, SchemaDriftError, SourceContext, SourceError, drift_guard, register_secret,
    scrubbed,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.adapters.retry import AttemptsSpent, retry_after_s
from gpuledger.warehouse.gpus import GPUModel, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, commitment_option
from gpuledger.warehouse.settings import env_name

log = logging.getLogger("gpuledger.adapters.gcp")

NAME = "gcp"
COMPUTE_HOST = "compute.googleapis.com"
BILLING_HOST = "cloudbilling.googleapis.com"
COMPUTE_ENGINE_SERVICE = "services/6F81-5844-456A"  # the Billing Catalog id of Compute Engine
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
REPLAY_PROJECT = "gpuledger-replay"  # the project id the bundled recording was made with

# Regions with GPU capacity a default live refresh covers; the `gcp_regions` setting
# (a comma list, or "all") changes it. Under replay every recorded region is used.
DEFAULT_REGIONS = (
    "us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2", "us-west3",
    "us-west4", "northamerica-northeast1", "northamerica-northeast2", "southamerica-east1", "europe-west1",
    "europe-west2", "europe-west3", "europe-west4", "europe-west6", "europe-west8", "europe-west9",
    "europe-north1", "asia-east1", "asia-northeast1", "asia-northeast3", "asia-south1", "asia-south2",
    "asia-southeast1", "asia-southeast2", "australia-southeast1", "me-west1",
)

# Server-side filter for machineTypes.aggregatedList (RE2, must match the whole
# name): the GPU families, plus the N1 shapes used as hosts for attachable GPUs.
MACHINE_TYPE_FILTER = 'name eq "(a2|a3|a4|a4x|g2|g4)-.*|n1-standard-(8|16|32|64)"'
PAGE_SIZE_COMPUTE = 200  # maxResults per Compute page (the API allows up to 500)
PAGE_SIZE_BILLING = 5000  # the Catalog's maximum pageSize
MAX_PAGES = 1000

HOURS_PER_MONTH = 730  # Google's conversion of monthly (GiB-month) prices to hours
LOCAL_SSD_PARTITION_GIB = 375  # one bundled Local SSD partition

# Machine series -> the family token of its vCPU/RAM SKUs ("A3Plus Instance Core
# running in ..." -> "a3plus"). A4/A4X have no vCPU/RAM SKUs: one "A4 Nvidia B200
# (1 gpu slice)" SKU per GPU carries the GPU with its share of vCPUs and memory.
SERIES_SKU_FAMILY: dict[str, str] = {
    "a2-highgpu": "a2", "a2-megagpu": "a2", "a2-ultragpu": "a2",
    "a3-highgpu": "a3", "a3-edgegpu": "a3", "a3-megagpu": "a3plus", "a3-ultragpu": "a3ultra",
    "g2-standard": "g2", "g4-standard": "g4",
}
SLICE_SERIES = ("a4-highgpu", "a4x-highgpu")
N1_SKU_FAMILY = "n1predefined"  # "N1 Predefined Instance Core running in ..."

# GPUs an N1 VM can attach, and the host shape we price them on. Google lets a
# user pick any N1 shape up to a per-GPU-count vCPU limit; we price one
# sensible shape per GPU count: n1-standard with 8 vCPUs per GPU (n1-standard-8
# for 1 GPU ... n1-standard-64 for 8), within every attachable GPU's vCPU limit
# (the lowest, K80 x1, is 8 vCPUs). Only counts up to the zone's
# `maximumCardsPerInstance` are offered. Virtual-workstation (-vws) variants add
# a GRID license and are left out.
N1_ATTACHABLE_GPUS = ("nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4",
                      "nvidia-tesla-k80")
N1_GPU_COUNTS = (1, 2, 4, 8)
N1_VCPUS_PER_GPU = 8

# Multi-node GPU networking of the 8-GPU A3/A4 shapes (Google's GPU network
# bandwidth page); other shapes have only the VM's ordinary NIC.
MULTINODE: dict[str, tuple[float, str]] = {
    "a3-highgpu-8g": (1000.0, "GPUDirect-TCPX"),
    "a3-megagpu-8g": (1800.0, "GPUDirect-TCPXO"),
    "a3-ultragpu-8g": (3200.0, "GPUDirect RDMA (RoCE)"),
    "a4-highgpu-8g": (3200.0, "GPUDirect RDMA (RoCE)"),
}

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=("GOOGLE_API_KEY", env_name("gcp_api_key")),
    nightly_secrets=("GCP_SA_KEY", "GOOGLE_CLOUD_PROJECT"),
    credentials_required=True,
    facts=ProviderFacts(
        display_name="Google Cloud (Compute Engine)",
        kind="hyperscaler",
        billing_granularity_s=1,
        minimum_charge_s=60,
        billing_notes="VMs are billed per second after a 1-minute minimum; a GPU VM is billed as the sum "
                      "of its vCPU, memory, GPU and bundled Local SSD SKUs.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped VM stops vCPU/GPU/memory billing; persistent disks and static "
                              "external IP addresses keep billing.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=False,  # plain VMs; Jupyter is a separate product (Vertex AI Workbench)
        multinode_interconnect="A3 High 1000 Gbps GPUDirect-TCPX; A3 Mega 1800 Gbps GPUDirect-TCPXO; "
                               "A3 Ultra / A4 3200 Gbps GPUDirect RDMA",
        interruptible_offer="Spot VMs (30-second preemption notice)",
        price_source="Cloud Billing Catalog API (services/6F81-5844-456A SKUs) and Compute Engine API",
        source_urls=[
            "https://cloud.google.com/compute/vm-instance-pricing",
            "https://cloud.google.com/compute/docs/instances/stop-start-instance",
            "https://cloud.google.com/compute/docs/accelerator-optimized-machines",
            "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth",
            "https://cloud.google.com/compute/docs/instances/spot",
            "https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list",
        ],
    ),
)


_COUNT_LOCK = threading.Lock()  # the four listings run in threads and share ctx.requests_made


class PriceError(ValueError):
    """A SKU price that cannot be read as a positive USD amount."""


# -- SKU prices -------------------------------------------------------------------

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

    def to_usd(self, amount: float) -> float:
        return to_usd(amount, self.currency, self.conversion_rate)

    @property
    def list_amount(self) -> float:
        """The list rate: the first non-zero tier (a first free tier is a free allowance)."""
        for _, amount in self.tiers:
            if amount > 0:
                return amount
        return self.tiers[0][1] if self.tiers else 0.0


def money(unit_price: dict[str, Any]) -> float:
    """google.type.Money {units: "2", nanos: 933908000} -> 2.933908."""
    units = int(unit_price.get("units") or 0)
    nanos = int(unit_price.get("nanos") or 0)
    if units and nanos and (units < 0) != (nanos < 0):
        raise PriceError(f"units {units} and nanos {nanos} have different signs")
    return units + nanos / 1e9


def to_usd(amount: float, currency: str, rate: float | None) -> float:
    """Convert a Catalog amount to USD, or refuse.

    The Catalog documents `currencyConversionRate` as "from USD to the currency
    specified in the request ... USD * currencyConversionRate = JPY", so a
    non-USD amount divided by its rate is the USD list price. A non-USD amount
    without a usable rate (absent, zero, or the default 1.0) is never read as USD.
    """
    if currency == "USD":
        return amount
    if not currency:
        raise PriceError("price has no currency code")
    if rate is not None and rate > 0 and not math.isclose(rate, 1.0):
        return amount / rate
    raise PriceError(f"price in {currency} without a currency conversion rate; not read as USD")


def sku_price(sku: dict[str, Any]) -> SkuPrice:
    infos = sku.get("pricingInfo") or []
    if not infos:
        raise PriceError("SKU has no pricingInfo")
    info = infos[0]
    expr = info.get("pricingExpression") or {}
    rates = expr.get("tieredRates") or []
    if not rates:
        raise PriceError("SKU has no tieredRates")
    currencies = {(r.get("unitPrice") or {}).get("currencyCode", "") for r in rates}
    if len(currencies) != 1:
        raise PriceError(f"tiers in several currencies {sorted(currencies)}")
    tiers = tuple(sorted((float(r.get("startUsageAmount") or 0), money(r.get("unitPrice") or {})) for r in rates))
    if any(amount < 0 for _, amount in tiers):
        raise PriceError("negative price")
    rate = info.get("currencyConversionRate")
    return SkuPrice(
        sku_id=sku.get("skuId", ""), description=sku.get("description", ""), unit=expr.get("usageUnit", ""),
        currency=currencies.pop(), conversion_rate=float(rate) if rate not in (None, "") else None, tiers=tiers,
        effective_time=info.get("effectiveTime") or None,
    )


def sku_regions(sku: dict[str, Any]) -> list[str]:
    regions = sku.get("serviceRegions") or (sku.get("geoTaxonomy") or {}).get("regions") or []
    return [r for r in regions if r]


# -- what a SKU is --------------------------------------------------------------------

SPOT_MARKERS = ("spot preemptible", "preemptible")
# GPU SKUs that are not a plain on-demand/spot GPU-hour: a vWS license bundle,
# sole-tenant nodes, reservations and DWS/flex-start capacity. Out of scope.
GPU_OUT_OF_SCOPE_MARKERS = ("virtual workstation", "sole tenancy", "sole-tenancy", "reserved", "reservation",
                            "dws", "flex", "calendar")

# SKU description -> accelerator type name, most specific first (the "A100
# 80GB" SKU also contains "A100"; "GB200" contains "B200"; the A3 Mega GPU is
# sold as "H100 80GB Mega" and "H100 80GB Plus").
GPU_SKU_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), t) for p, t in (
        (r"\bgb200\b", "nvidia-gb200"),
        (r"\bb200\b", "nvidia-b200"),
        (r"\bh200\b", "nvidia-h200-141gb"),
        (r"\bh100\b.*\b(mega|plus)\b|\bh100 mega\b", "nvidia-h100-mega-80gb"),
        (r"\bh100\b", "nvidia-h100-80gb"),
        (r"\ba100\b.*\b80 ?gb\b", "nvidia-a100-80gb"),
        (r"\ba100\b", "nvidia-tesla-a100"),
        (r"\bl4\b", "nvidia-l4"),
        (r"\bt4\b", "nvidia-tesla-t4"),
        (r"\bv100\b", "nvidia-tesla-v100"),
        (r"\bp100\b", "nvidia-tesla-p100"),
        (r"\bp4\b", "nvidia-tesla-p4"),
        (r"\bk80\b", "nvidia-tesla-k80"),
        (r"\brtx (pro )?6000\b", "nvidia-rtx-pro-6000"),
    )
)
GPU_SLICE = re.compile(r"\(\s*1 gpu slice\s*\)")
CORE_RAM = re.compile(r"^(?P<family>.+?) (?:instance )?(?P<part>core|ram) running in (?P<where>.+)$")
LOCAL_SSD = re.compile(r"^ssd backed local storage(?: attached to spot preemptible vms)?(?: in .+)?$")
# Resource-based committed use: "Commitment v1: A3 Cpu in Americas for 1 Year", "... A3 Ram ...",
# "Commitment v1: Nvidia H100 80GB GPU running in Americas for 3 Year", "Commitment v1: Local SSD In ...".
COMMITMENT_PREFIX = re.compile(r"^commitment v1: ")
COMMIT_CORE_RAM = re.compile(r"^(?P<family>.+?) (?P<part>cpu|ram) in (?P<where>.+) for \d+ years?$")
COMMIT_LOCAL_SSD = re.compile(r"^local ssd (?:in .+ )?for \d+ years?$")
# Committed-use SKUs are billed monthly over the term with nothing upfront; their prices are hourly rates.
COMMITMENTS = {"Commit1Yr": commitment_option("committed_use", 12, "no_upfront"),
               "Commit3Yr": commitment_option("committed_use", 36, "no_upfront")}
COMMITMENT_TERMS = {COMMITMENTS["Commit1Yr"]: 12, COMMITMENTS["Commit3Yr"]: 36}


def purchase_option(usage_type: str, description: str) -> str | None:
    """on_demand | spot | a committed-use option, or None for what is out of scope.

    Commitment SKUs (usageType Commit1Yr/Commit3Yr, "Commitment v1: ...") are the
    1- and 3-year committed-use prices (`COMMITMENTS`); a commitment of another usage type
    is out of scope. The description's "Spot Preemptible" wins over the usage type:
    Google tags some Spot GPU SKUs OnDemand (e.g. "Spot Preemptible A4 Nvidia
    B200 (1 gpu slice) running in Americas").
    """
    desc = description.lower()
    if usage_type in COMMITMENTS and desc.startswith("commitment"):
        return COMMITMENTS[usage_type]
    if usage_type.startswith("Commit") or desc.startswith("commitment"):
        return None  # a commitment of a term or kind we do not price
    if any(m in desc for m in SPOT_MARKERS) or usage_type == "Preemptible":
        return "spot"
    if usage_type == "OnDemand":
        return "on_demand"
    return None


def strip_spot(description: str) -> str:
    d = description.lower().strip()
    d = COMMITMENT_PREFIX.sub("", d)
    d = re.sub(r"^(spot preemptible|preemptible) ", "", d)
    return d.replace(" attached to spot preemptible vms", "")


def gpu_type_of(description: str) -> str | None:
    """GPU SKU description -> accelerator type name ("Nvidia Tesla A100 80GB GPU ..." -> nvidia-a100-80gb)."""
    d = strip_spot(description)
    for pattern, accel in GPU_SKU_PATTERNS:
        if pattern.search(d):
            return accel
    return None


@dataclass(frozen=True)
class ComponentKey:
    """What a compute SKU prices: (region, part, family or GPU type, purchase option)."""

    region: str
    part: str  # core | ram | gpu | gpu_slice | local_ssd
    what: str  # SKU family token ("a2", "n1predefined") or accelerator type; "" for local_ssd
    purchase: str

    def label(self) -> str:
        return f"{self.purchase} {self.part} {self.what}".replace("  ", " ").strip()


EXPECTED_UNIT = {"core": "h", "ram": "GiBy.h", "gpu": "h", "gpu_slice": "h", "local_ssd": "GiBy.mo"}


@dataclass(frozen=True)
class Component:
    """A usable compute price: USD per unit, with the source amount kept for audit."""

    sku_id: str
    description: str
    unit: str
    usd: float
    currency: str
    source_amount: float
    conversion_rate: float | None
    n_regions: int
    effective_time: str | None


@dataclass
class SkuCatalog:
    """Compute prices by component, and why a component could not be used."""

    prices: dict[ComponentKey, Component] = field(default_factory=dict)
    invalid: dict[ComponentKey, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # out-of-scope SKUs by reason
    # Every in-scope SKU's components, and those an offer asked for: a SKU none of whose
    # components prices an offer is counted in the notes by why (unused_counts).
    sku_keys: dict[str, list[ComponentKey]] = field(default_factory=dict)
    asked: set[ComponentKey] = field(default_factory=set)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def lookup(self, key: ComponentKey) -> Component | str:
        """The price, or the reason there is none."""
        self.asked.add(key)
        if key in self.invalid:
            return self.invalid[key]
        if key in self.prices:
            return self.prices[key]
        return f"no {key.label()} SKU in {key.region}"


def classify_compute_sku(batch: Batch, sku: dict[str, Any]) -> tuple[str, str] | None:
    """(part, family-or-GPU-type) for a compute SKU we price, None if out of scope.

    A GPU SKU whose description names no GPU we know goes to quarantine: a new
    GPU must never silently fall out of the table.
    """
    cat = sku.get("category") or {}
    family, group = cat.get("resourceFamily", ""), cat.get("resourceGroup", "")
    desc = sku.get("description", "")
    plain = strip_spot(desc)
    if family == "Compute" and group == "GPU":
        if any(m in plain for m in GPU_OUT_OF_SCOPE_MARKERS):
            return None
        accel = gpu_type_of(desc)
        if accel is None:
            batch.quarantine("gpu", sku.get("skuId", desc), f"unknown GPU in SKU description {desc!r}", sku)
            return None
        return ("gpu_slice" if GPU_SLICE.search(plain) else "gpu", accel)
    if family == "Compute":
        if any(m in plain for m in GPU_OUT_OF_SCOPE_MARKERS):
            return None  # sole-tenant, reserved, DWS... vCPU/RAM: not the plain on-demand/spot rate
        m = CORE_RAM.match(plain) or (COMMIT_CORE_RAM.match(plain) if COMMITMENT_PREFIX.match(desc.lower()) else None)
        if m:
            return ("ram" if m.group("part") == "ram" else "core", re.sub(r"[\s-]+", "", m.group("family")))
        return None
    if family == "Storage" and (LOCAL_SSD.match(plain) or COMMIT_LOCAL_SSD.match(plain)):
        return ("local_ssd", "")
    return None


def _out_of_scope_reason(sku: dict[str, Any]) -> str:
    """Why classify_compute_sku() left a Compute/Storage SKU out, for the notes."""
    cat = sku.get("category") or {}
    plain = strip_spot(sku.get("description", ""))
    if cat.get("resourceGroup") == "GPU" and cat.get("resourceFamily") == "Compute":
        if any(m in plain for m in GPU_OUT_OF_SCOPE_MARKERS):
            return "GPU SKU not a plain on-demand/Spot GPU-hour (virtual workstation, sole tenancy, DWS...)"
        return "GPU SKU of an unknown GPU (quarantined)"
    if cat.get("resourceFamily") == "Compute":
        if any(m in plain for m in GPU_OUT_OF_SCOPE_MARKERS):
            return "vCPU/RAM SKU not a plain on-demand/Spot rate (sole tenancy, DWS...)"
    return "compute SKU that is no vCPU/RAM/GPU part (TPU, license, ...)"


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
                catalog.skip("committed-use SKU of a term or kind not priced")
            continue
        kind = classify_compute_sku(batch, sku)
        if kind is None:
            if cat.get("resourceFamily") == "Compute":  # other Storage SKUs are build_storage()'s
                catalog.skip(_out_of_scope_reason(sku))
            continue
        part, what = kind
        in_scope = [r for r in sku_regions(sku) if r in wanted]
        if not in_scope:
            catalog.skip("compute SKU for no selected region")
            continue
        component, problem = _component(sku, part)
        catalog.sku_keys[str(sku.get("skuId") or sku.get("name") or id(sku))] = \
            [ComponentKey(region, part, what, purchase) for region in in_scope]
        for region in in_scope:
            key = ComponentKey(region, part, what, purchase)
            if problem is not None:
                catalog.invalid.setdefault(key, f"SKU {sku.get('skuId')} ({sku.get('description')}): {problem}")
                continue
            assert component is not None
            _store(catalog, key, component)
    return catalog


def unused_counts(catalog: SkuCatalog) -> dict[str, int]:
    """The in-scope SKUs that price no offer, by why (after build_offers asked for its parts)."""
    asked_what = {(k.part, k.what) for k in catalog.asked}
    counts: dict[str, int] = {}
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
        else:
            reason = "GPU SKU for a GPU type, region or purchase option no machine type has"
        counts[reason] = counts.get(reason, 0) + 1
    return counts


def _component(sku: dict[str, Any], part: str) -> tuple[Component | None, str | None]:
    try:
        price = sku_price(sku)
        if price.unit != EXPECTED_UNIT[part]:
            raise PriceError(f"unit {price.unit!r}, expected {EXPECTED_UNIT[part]!r}")
        amount = price.list_amount
        if amount <= 0:
            raise PriceError(f"price {amount:g} {price.currency} is not positive")
        usd = price.to_usd(amount)
    except (PriceError, ValueError, TypeError) as err:
        return None, str(err)
    return Component(
        sku_id=price.sku_id, description=price.description, unit=price.unit, usd=usd, currency=price.currency,
        source_amount=amount, conversion_rate=price.conversion_rate, n_regions=len(sku_regions(sku)),
        effective_time=price.effective_time,
    ), None


def _store(catalog: SkuCatalog, key: ComponentKey, new: Component) -> None:
    """Two SKUs for one component: the one for fewer regions is the more specific price."""
    old = catalog.prices.get(key)
    if old is None or new.n_regions < old.n_regions:
        catalog.prices[key] = new
    elif new.n_regions == old.n_regions and not math.isclose(new.usd, old.usd, rel_tol=1e-9):
        catalog.invalid[key] = (f"conflicting SKUs {old.sku_id} ({old.usd:g} USD) and {new.sku_id} "
                                f"({new.usd:g} USD) for {key.label()} in {key.region}")


# -- compute facts --------------------------------------------------------------------

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


def _scope_zone(scope: str) -> str:
    return scope.split("/", 1)[1] if scope.startswith("zones/") else scope


@drift_guard("gcp: machineTypes.aggregatedList")
def parse_machine_types(pages: Iterable[dict[str, Any]]) -> dict[str, dict[str, MachineShape]]:
    """zone -> machine type name -> shape, from machineTypes.aggregatedList pages."""
    out: dict[str, dict[str, MachineShape]] = {}
    for page in pages:
        for scope, scoped in (page.get("items") or {}).items():
            for mt in scoped.get("machineTypes") or []:
                try:
                    shape = machine_shape(mt, _scope_zone(scope))
                except (KeyError, TypeError, ValueError) as err:
                    raise SchemaDriftError(f"gcp: machine type lacks {err}: {str(mt)[:200]}") from None
                out.setdefault(shape.zone, {})[shape.name] = shape
    return out


def machine_shape(mt: dict[str, Any], zone: str = "") -> MachineShape:
    accels = tuple(
        (a["guestAcceleratorType"], int(a["guestAcceleratorCount"]))
        for a in mt.get("accelerators") or [] if int(a.get("guestAcceleratorCount") or 0) > 0
    )
    bundled = mt.get("bundledLocalSsds") or {}
    return MachineShape(
        zone=_last_segment(mt.get("zone") or zone) or zone, name=mt["name"], vcpus=int(mt["guestCpus"]),
        memory_gib=int(mt["memoryMb"]) / 1024, accelerators=accels,
        local_ssd_partitions=int(bundled.get("partitionCount") or 0),
        deprecated=(mt.get("deprecated") or {}).get("state", "") or "", description=mt.get("description", ""),
    )


@drift_guard("gcp: acceleratorTypes.aggregatedList")
def parse_accelerator_types(pages: Iterable[dict[str, Any]]) -> dict[str, dict[str, AcceleratorInfo]]:
    """zone -> accelerator type name -> facts, from acceleratorTypes.aggregatedList pages."""
    out: dict[str, dict[str, AcceleratorInfo]] = {}
    for page in pages:
        for scope, scoped in (page.get("items") or {}).items():
            for a in scoped.get("acceleratorTypes") or []:
                info = accelerator_info(a)
                zone = _last_segment(a.get("zone") or "") or _scope_zone(scope)
                out.setdefault(zone, {})[info.name] = info
    return out


def accelerator_info(a: dict[str, Any]) -> AcceleratorInfo:
    return AcceleratorInfo(a["name"], a.get("description", ""), int(a.get("maximumCardsPerInstance") or 0))


def series_of(machine_type: str) -> str:
    """a2-highgpu-1g -> a2-highgpu; a3-edgegpu-8g-nolssd -> a3-edgegpu."""
    return "-".join(machine_type.split("-")[:2])


# -- composing offers -------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    name: str  # vcpu | ram | gpu | gpu_slice | local_ssd
    key: ComponentKey
    quantity: float


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
    sku_family: str | None  # None: billed per GPU slice
    extra: tuple[tuple[str, Any], ...] = ()

    def parts(self, purchase: str) -> list[Part]:
        r = self.region
        if self.sku_family is None:
            parts = [Part("gpu_slice", ComponentKey(r, "gpu_slice", self.gpu_type, purchase), self.gpu_count)]
        else:
            parts = [Part("vcpu", ComponentKey(r, "core", self.sku_family, purchase), self.vcpus),
                     Part("ram", ComponentKey(r, "ram", self.sku_family, purchase), self.ram_gib),
                     Part("gpu", ComponentKey(r, "gpu", self.gpu_type, purchase), self.gpu_count)]
        if self.local_ssd_gib:
            # GiB-month SKU -> per hour: GiB x price / 730.
            parts.append(Part("local_ssd", ComponentKey(r, "local_ssd", "", purchase),
                              self.local_ssd_gib / HOURS_PER_MONTH))
        return parts


@dataclass(frozen=True)
class Composed:
    usd_per_hour: float
    currency: str
    source_per_hour: float
    components: list[dict[str, Any]]
    effective_time: str | None


def compose(plan: OfferPlan, purchase: str, catalog: SkuCatalog) -> Composed | str:
    """Sum the plan's parts at one purchase option, or say which part is missing or unusable."""
    problems, rows = [], []
    for part in plan.parts(purchase):
        found = catalog.lookup(part.key)
        if isinstance(found, str):
            problems.append(f"{part.name}: {found}")
            continue
        rows.append((part, found))
    if problems:
        return "; ".join(problems)
    currencies = {c.currency for _, c in rows}
    if len(currencies) > 1:
        return f"components priced in several currencies {sorted(currencies)}"
    components = []
    for part, c in rows:
        item = {"part": part.name, "sku": c.sku_id, "description": c.description, "unit": c.unit,
                "unit_price_usd": round(c.usd, 12), "quantity": round(part.quantity, 9),
                "usd_per_hour": round(c.usd * part.quantity, 12)}
        if c.currency != "USD":
            item.update(source_currency=c.currency, source_unit_price=c.source_amount,
                        currency_conversion_rate=c.conversion_rate)
        components.append(item)
    usd = round(sum(c.usd * p.quantity for p, c in rows), 10)
    source = round(sum(c.source_amount * p.quantity for p, c in rows), 10)
    stamps = [c.effective_time for _, c in rows if c.effective_time]
    currency = currencies.pop()
    return Composed(usd, currency, usd if currency == "USD" else source, components,
                    max(stamps) if stamps else None)


@dataclass
class Skips:
    """Machine types and N1 pairings left out on purpose, counted by reason for the notes."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, why: str, n: int = 1) -> None:
        self.counts[why] = self.counts.get(why, 0) + n

    def notes(self) -> list[str]:
        return [f"{n} {why}" for why, n in sorted(self.counts.items())]


def plan_offers(zones: dict[str, ZoneInfo], shapes: dict[str, dict[str, MachineShape]],
                accelerators: dict[str, dict[str, AcceleratorInfo]], regions: Iterable[str],
                batch: Batch, skips: Skips | None = None) -> list[OfferPlan]:
    """Every (zone, machine type) of a GPU family, and every N1 host + attachable GPU count.
    What is left out is counted in `skips` (and so in the notes), never dropped silently."""
    wanted = set(regions)
    skips = skips if skips is not None else Skips()
    plans: list[OfferPlan] = []
    for zone in sorted(set(shapes) | set(accelerators)):
        region = zones[zone].region if zone in zones else zone.rsplit("-", 1)[0]
        if region not in wanted:
            skips.add("zone machine types outside the selected regions", len(shapes.get(zone, {})))
            continue
        zone_shapes = shapes.get(zone, {})
        zone_accels = accelerators.get(zone, {})
        for name in sorted(zone_shapes):
            shape = zone_shapes[name]
            series = series_of(name)
            if series not in SERIES_SKU_FAMILY and series not in SLICE_SERIES:
                if shape.accelerators:  # a GPU series we do not know how Google bills
                    batch.quarantine("offer", f"{zone}/{name}", f"unknown GPU machine series {series!r}: "
                                     "no rule for which SKUs bill it", shape.__dict__)
                elif name.startswith("n1-"):
                    skips.add("CPU-only N1 host machine types (priced only with attached GPUs)")
                else:
                    skips.add("CPU-only machine types outside the GPU families")
                continue
            if shape.deprecated in ("OBSOLETE", "DELETED"):
                skips.add(f"{shape.deprecated.lower()} GPU machine types (described, not sold)")
                continue
            if len(shape.accelerators) != 1:
                batch.quarantine("offer", f"{zone}/{name}",
                                 f"GPU machine type with {len(shape.accelerators)} accelerator entries", shape.__dict__)
                continue
            accel, count = shape.accelerators[0]
            info = zone_accels.get(accel)
            plans.append(OfferPlan(
                region=region, zone=zone, instance_type=name, gpu_type=accel, gpu_count=count, vcpus=shape.vcpus,
                ram_gib=shape.memory_gib, local_ssd_gib=shape.local_ssd_partitions * LOCAL_SSD_PARTITION_GIB,
                sku_family=SERIES_SKU_FAMILY.get(series),
                extra=(("machine_description", shape.description),
                       ("accelerator_description", info.description if info else None),
                       ("deprecated", shape.deprecated or None)),
            ))
        for accel in sorted(zone_accels):
            if accel not in N1_ATTACHABLE_GPUS:
                if accel.endswith("-vws"):
                    skips.add("N1 pairings not priced: virtual-workstation GPU types (a GRID license on top)")
                elif not any(a == accel for s in zone_shapes.values() for a, _ in s.accelerators):
                    skips.add("N1 pairings not priced: accelerator types no N1 host takes")
                continue
            info = zone_accels[accel]
            for count in N1_GPU_COUNTS:
                if count > info.max_cards:
                    skips.add("N1 pairings not priced: GPU count above the zone's maximumCardsPerInstance")
                    continue
                host_name = f"n1-standard-{N1_VCPUS_PER_GPU * count}"
                host = zone_shapes.get(host_name)
                if host is None:
                    skips.add(f"N1 pairings not priced: host n1-standard-{N1_VCPUS_PER_GPU * count} "
                              "not listed in the zone")
                    continue
                plans.append(OfferPlan(
                    region=region, zone=zone, instance_type=f"{host_name}+{count}x{accel}", gpu_type=accel,
                    gpu_count=count, vcpus=host.vcpus, ram_gib=host.memory_gib, local_ssd_gib=0,
                    sku_family=N1_SKU_FAMILY,
                    extra=(("host_machine_type", host_name),
                           ("host_rule", f"n1-standard with {N1_VCPUS_PER_GPU} vCPUs per attached GPU"),
                           ("accelerator_description", info.description),
                           ("maximum_cards_per_instance", info.max_cards)),
                ))
    return plans


def _interconnect(plan: OfferPlan) -> str | None:
    if plan.gpu_count <= 1:
        return None
    if plan.gpu_type == "nvidia-gb200":
        return "NVLink (NVL72 domain)"
    if plan.sku_family in ("a2", "a3", "a3plus", "a3ultra") or plan.sku_family is None:
        return "NVSwitch"
    if plan.gpu_type == "nvidia-tesla-v100":
        return "NVLink"
    return "PCIe"


def build_offers(batch: Batch, plans: Iterable[OfferPlan], catalog: SkuCatalog,
                 zones: dict[str, ZoneInfo]) -> None:
    """Turn plans into on-demand and spot offers; quarantine what cannot be priced."""
    gpu_cache: dict[str, tuple[GPUModel, bool] | str] = {}
    spot_missing = commit_missing = 0
    unpriced: dict[str, int] = {}  # described by Compute Engine, not priceable from the Catalog
    for plan in plans:
        ref = f"{plan.zone}/{plan.instance_type}"
        if plan.gpu_type not in gpu_cache:
            try:
                gpu_cache[plan.gpu_type] = canonicalize(NAME, plan.gpu_type)
            except UnknownGPUError as err:
                gpu_cache[plan.gpu_type] = str(err)
        known = gpu_cache[plan.gpu_type]
        if isinstance(known, str):
            batch.quarantine("offer", ref, f"gpu: {known}", _plan_raw(plan))
            continue
        model, exact = known
        on_demand_usd: float | None = None
        for purchase in ("on_demand", "spot", *COMMITMENT_TERMS):
            gpu_key = next(p.key for p in plan.parts(purchase) if p.name in ("gpu", "gpu_slice"))
            if purchase != "on_demand" and gpu_key not in catalog.prices and gpu_key not in catalog.invalid:
                # no Spot or committed-use SKU for this GPU here: not sold that way, not an error
                if purchase == "spot":
                    spot_missing += 1
                else:
                    commit_missing += 1
                continue
            composed = compose(plan, purchase, catalog)
            if isinstance(composed, str):
                batch.quarantine("offer", f"{ref}/{purchase}", f"price: {composed}", _plan_raw(plan))
                unpriced[purchase] = unpriced.get(purchase, 0) + 1
                continue
            added = _add_offer(batch, plan, purchase, composed, model, exact, zones, on_demand_usd)
            if purchase == "on_demand" and added:
                on_demand_usd = composed.usd_per_hour
    if spot_missing:
        batch.notes.append(f"{spot_missing} zone/machine-type pairs have no Spot GPU SKU in their region")
    if commit_missing:
        batch.notes.append(f"{commit_missing} zone/machine-type/term triples have no committed-use GPU SKU "
                           "in their region")
    for purchase, n in sorted(unpriced.items()):
        batch.notes.append(f"{n} {purchase} zone/machine types described by Compute Engine but not priced "
                           "by the Catalog (quarantined with the missing part)")


def _plan_raw(plan: OfferPlan) -> dict[str, Any]:
    raw = {k: v for k, v in plan.__dict__.items() if k != "extra"}
    raw.update(dict(plan.extra))
    return raw


def _add_offer(batch: Batch, plan: OfferPlan, purchase: str, c: Composed, model: GPUModel, exact: bool,
               zones: dict[str, ZoneInfo], on_demand_usd: float | None) -> bool:
    zone = zones.get(plan.zone)
    network, fabric = MULTINODE.get(plan.instance_type, (None, None))
    data: dict[str, Any] = {"accelerator_type": plan.gpu_type, "components": c.components,
                            "billing": "sum of the components' Catalog SKU prices"}
    data.update({k: v for k, v in plan.extra if v is not None})
    if c.currency != "USD":
        data["source_currency"] = c.currency
    saving = None
    if purchase == "spot" and on_demand_usd:
        saving = round(100 * (1 - c.usd_per_hour / on_demand_usd), 1)
    months = COMMITMENT_TERMS.get(purchase)
    if months is not None:
        data["billing"] += "; committed-use SKUs are billed every month of the term, used or not"
        if on_demand_usd:
            data["saving_vs_on_demand_pct"] = round(100 * (1 - c.usd_per_hour / on_demand_usd), 1)
    return batch.offer(
        f"{plan.zone}/{plan.instance_type}/{purchase}", _plan_raw(plan), region=plan.region, zone=plan.zone,
        instance_type=plan.instance_type, purchase_option=purchase, gpu_model=model.gpu_model,
        gpu_variant_exact=exact, gpu_name_reported=plan.gpu_type, gpu_vendor=model.vendor,
        gpu_count=plan.gpu_count, gpu_memory_gb=model.memory_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=model.memory_gb * plan.gpu_count, vcpus=plan.vcpus, ram_gb=plan.ram_gib,
        local_disk_gb=plan.local_ssd_gib or None, interconnect=_interconnect(plan), network_gbps=network,
        multinode_fabric=fabric, price_per_hour=c.usd_per_hour, source_currency=c.currency,
        source_price_per_hour=c.source_per_hour, price_observed_at=c.effective_time,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
        available=(zone.status == "UP") if zone else None, available_count=None,
        availability_level=f"listed in zone (zone {zone.status})" if zone else "listed in zone",
        interruption_risk=None, spot_savings_pct=saving,
        term_months=months, payment_option="no_upfront" if months else None,
        provider_data=json.dumps(data, sort_keys=True),
    )


# -- persistent disks -------------------------------------------------------------

# Capacity SKUs of the disk types a fine-tuning job keeps data on. IOPS and
# throughput SKUs, snapshots, images, storage pools and Confidential-mode
# surcharges are other dimensions and are out of scope.
STORAGE_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), c) for p, c in (
        (r"^storage pd capacity\b", "pd-standard"),
        (r"^regional storage pd capacity\b", "pd-standard-regional"),
        (r"^balanced pd capacity\b", "pd-balanced"),
        (r"^regional balanced pd capacity\b", "pd-balanced-regional"),
        (r"^ssd backed pd capacity\b", "pd-ssd"),
        (r"^regional ssd backed pd capacity\b", "pd-ssd-regional"),
        (r"^extreme pd capacity\b", "pd-extreme"),
        (r"^hyperdisk balanced capacity\b", "hyperdisk-balanced"),
        (r"^hyperdisk balanced high availability capacity\b", "hyperdisk-balanced-ha"),
        (r"^hyperdisk extreme capacity\b", "hyperdisk-extreme"),
        (r"^hyperdisk throughput capacity\b", "hyperdisk-throughput"),
        (r"^hyperdisk ml capacity\b", "hyperdisk-ml"),
        (r"^ssd backed local storage(?: in .+)?$", "local-ssd"),
    )
)


def storage_class_of(description: str) -> str | None:
    d = description.lower().strip()
    if "confidential" in d:
        return None
    for pattern, cls in STORAGE_CLASSES:
        if pattern.search(d):
            return cls
    return None


def build_storage(batch: Batch, skus: Iterable[dict[str, Any]], regions: Iterable[str]) -> None:
    """One USD per GiB-month row per (region, disk type): the most specific SKU's list rate."""
    wanted = set(regions)
    best: dict[tuple[str, str], tuple[int, dict[str, Any], SkuPrice]] = {}
    for sku in skus:
        cat = sku.get("category") or {}
        if cat.get("resourceFamily") != "Storage" or cat.get("usageType") != "OnDemand":
            continue
        cls = storage_class_of(sku.get("description", ""))
        if cls is None:
            continue
        in_scope = [r for r in sku_regions(sku) if r in wanted]
        if not in_scope:
            continue
        try:
            price = sku_price(sku)
            if price.unit != "GiBy.mo":
                raise PriceError(f"unit {price.unit!r}, expected 'GiBy.mo'")
        except (PriceError, ValueError, TypeError) as err:
            batch.quarantine("storage", sku.get("skuId", ""), f"price: {err}", sku)
            continue
        n = len(sku_regions(sku))
        for region in in_scope:
            old = best.get((region, cls))
            if old is None or n < old[0]:
                best[(region, cls)] = (n, sku, price)
    for (region, cls), (_, sku, price) in sorted(best.items()):
        amount = price.list_amount
        try:
            usd = price.to_usd(amount)
        except PriceError as err:
            batch.quarantine("storage", f"{region}/{cls}/{price.sku_id}", f"price: {err}", sku)
            continue
        free = [s for s, a in price.tiers if a == 0 and s == 0 and len(price.tiers) > 1]
        note = f"; first {price.tiers[1][0]:g} GiB-month free" if free else ""
        batch.add("storage", f"{region}/{cls}/{price.sku_id}", sku, region=region, storage_class=cls,
                  usd_per_gb_month=usd, source_currency=price.currency, source_usd_per_gb_month=amount,
                  description=f"{price.description} (SKU {price.sku_id}; USD per GiB-month{note})")


# -- network egress -----------------------------------------------------------------

SPECIAL_INTERNET_DESTINATIONS = re.compile(r"\bto (china|australia)\b")
EGRESS_GROUPS = {
    "PremiumInternetEgress": "internet",  # Premium Tier, the default network tier
    "InterregionEgress": "inter_region",
    "InterzoneEgress": "same_region",
}


def _rate_at(price: SkuPrice, usage: float) -> float:
    rate = price.tiers[0][1]
    for start, amount in price.tiers:
        if start <= usage:
            rate = amount
    return rate


def build_egress(batch: Batch, skus: Iterable[dict[str, Any]], regions: Iterable[str]) -> None:
    """Egress tiers per region and destination kind.

    Google prices egress per (source, destination continent); the table keeps
    one rate per tier: at each tier boundary found in any SKU, the highest
    destination rate, so a cost estimate never comes out too low. Internet
    egress to China and to Australia is left out of that maximum, as Google's
    own Premium Tier table does ("worldwide destinations excluding China &
    Australia"): both are separately priced, rarely relevant destinations; the
    highest of their rates is named in the description.
    """
    wanted = set(regions)
    groups: dict[tuple[str, str], list[SkuPrice]] = {}
    special: dict[str, float] = {}  # region -> highest internet rate to China/Australia
    for sku in skus:
        cat = sku.get("category") or {}
        dest = EGRESS_GROUPS.get(cat.get("resourceGroup", ""))
        if cat.get("resourceFamily") != "Network" or dest is None or cat.get("usageType") != "OnDemand":
            continue
        in_scope = [r for r in sku_regions(sku) if r in wanted]
        if not in_scope:
            continue
        try:
            price = sku_price(sku)
            if price.unit != "GiBy":
                raise PriceError(f"unit {price.unit!r}, expected 'GiBy'")
            usd_tiers = tuple((s, price.to_usd(a)) for s, a in price.tiers)
        except (PriceError, ValueError, TypeError) as err:
            batch.quarantine("egress", sku.get("skuId", ""), f"price: {err}", sku)
            continue
        usd_price = SkuPrice(price.sku_id, price.description, price.unit, "USD", None, usd_tiers,
                             price.effective_time)
        for region in in_scope:
            if dest == "internet" and SPECIAL_INTERNET_DESTINATIONS.search(price.description.lower()):
                special[region] = max(special.get(region, 0.0), max(a for _, a in usd_tiers))
                continue
            groups.setdefault((region, dest), []).append(usd_price)
    for (region, dest), prices in sorted(groups.items()):
        starts = sorted({s for p in prices for s, _ in p.tiers})
        paid = [a for p in prices for _, a in p.tiers if a > 0]
        low = min(paid) if paid else 0.0
        for i, start in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else None
            top = max(prices, key=lambda p: _rate_at(p, start))
            rate = _rate_at(top, start)
            extra = (f"; to China/Australia up to {special[region]:g} USD/GiB, not included"
                     if dest == "internet" and region in special else "")
            batch.add("egress", f"{region}/{dest}/{start:g}", top.description, region=region, destination=dest,
                      tier_start_gb=start, tier_end_gb=end, usd_per_gb=rate, source_currency="USD",
                      source_usd_per_gb=rate,
                      description=(f"highest of {len(prices)} destination SKUs at this tier ({top.description}, "
                                   f"SKU {top.sku_id}); lowest paid rate {low:g}; USD per GiB{extra}"))


# -- fetching -----------------------------------------------------------------------------

def _loopback(ctx: SourceContext) -> bool:
    return ctx.mode == "replay" or (ctx.mode == "record" and bool(ctx.replay_urls))


@dataclass
class Clients:
    zones: Any
    machine_types: Any
    accelerator_types: Any
    catalog: Any
    project: str


def make_clients(ctx: SourceContext) -> Clients:
    """Real google-cloud clients (REST), aimed at ctx.url(host); credentials per mode.

    Replay: anonymous credentials against the loopback server. Live: Application
    Default Credentials (and the project id from the `gcp_project` setting,
    GOOGLE_CLOUD_PROJECT or ADC) for Compute; an API key (the `gcp_api_key`
    setting or GOOGLE_API_KEY), else ADC, for the Billing Catalog.
    """
    import google.auth
    from google.api_core.gapic_v1.client_info import ClientInfo
    from google.auth.credentials import AnonymousCredentials
    from google.auth.exceptions import DefaultCredentialsError
    from google.cloud import billing_v1, compute_v1

    info = ClientInfo(user_agent=USER_AGENT)
    api_key: str | None = None
    if _loopback(ctx):
        credentials: Any = AnonymousCredentials()
        # The recording's own project id, never the environment's: the request paths carry it.
        project = str(ctx.settings.get("gcp_project") or REPLAY_PROJECT)
    else:
        config = ctx.config
        configured_key = config.gcp_api_key.get_secret_value() if config.gcp_api_key else None
        api_key = configured_key or os.environ.get("GOOGLE_API_KEY") or None
        try:
            credentials, adc_project = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
        except DefaultCredentialsError:
            credentials, adc_project = None, None
        if credentials is None:
            what = ("an API key reaches only the Billing Catalog; the Compute Engine API needs "
                    "Application Default Credentials") if api_key else (
                    f"neither Application Default Credentials nor an API key (GOOGLE_API_KEY / "
                    f"{env_name('gcp_api_key')}) were found")
            raise MissingCredentialsError(
                f"gcp: no credentials: {what}; run `gcloud auth application-default login` or set "
                "GOOGLE_APPLICATION_CREDENTIALS")
        # What the credentials file holds is as secret as the env's keys: never in a message.
        for secret in (api_key, getattr(credentials, "refresh_token", None), getattr(credentials, "client_secret", None)):
            register_secret(secret if isinstance(secret, str) else None)
        project = config.gcp_project or os.environ.get("GOOGLE_CLOUD_PROJECT") or adc_project
        if not project:
            raise MissingCredentialsError("gcp: no credentials: no project id; set GOOGLE_CLOUD_PROJECT or "
                                          f"{env_name('gcp_project')}")

    def options(host: str, key: str | None = None) -> dict[str, Any]:
        opts: dict[str, Any] = {"api_endpoint": ctx.url(host)}
        if key:
            opts["api_key"] = key
        return opts

    compute_kwargs = dict(credentials=credentials, transport="rest", client_info=info,
                          client_options=options(COMPUTE_HOST))
    if api_key:
        catalog = billing_v1.CloudCatalogClient(transport="rest", client_info=info,
                                                client_options=options(BILLING_HOST, api_key))
    else:
        catalog = billing_v1.CloudCatalogClient(credentials=credentials, transport="rest", client_info=info,
                                                client_options=options(BILLING_HOST))
    return Clients(
        zones=compute_v1.ZonesClient(**compute_kwargs),
        machine_types=compute_v1.MachineTypesClient(**compute_kwargs),
        accelerator_types=compute_v1.AcceleratorTypesClient(**compute_kwargs),
        catalog=catalog, project=str(project),
    )


def _retryable() -> tuple[type[BaseException], ...]:
    import requests
    from google.api_core import exceptions as api

    # ChunkedEncodingError: the connection broke mid-body; a page is fetched whole, so retrying it is safe.
    return (api.TooManyRequests, api.ServerError, requests.exceptions.ConnectionError,
            requests.exceptions.Timeout, requests.exceptions.ChunkedEncodingError)


def _retry_after(err: BaseException) -> float | None:
    """Seconds a 429/503 answer asked us to wait (Retry-After), if it said."""
    response = getattr(err, "response", None)
    headers = getattr(response, "headers", None) or {}
    return retry_after_s(headers.get("Retry-After"))


def _count(ctx: SourceContext) -> None:
    with _COUNT_LOCK:
        ctx.requests_made += 1


def _pages(ctx: SourceContext, what: str, method: Callable[..., Any], request_type: Any,
           fields: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every page of a list method through the client's own pager, each page under the retry
    policy (a google-api-core Retry the pager keeps for its later pages); wire-format dicts.
    Every failure becomes a SourceError."""
    import requests
    from google.api_core import exceptions as api
    from google.api_core.timeout import ConstantTimeout
    from google.auth import exceptions as auth
    from google.protobuf.json_format import ParseError

    policy = ctx.retry_policy
    attempts = policy.google_retry(_retryable(), lambda: _count(ctx), _retry_after)
    n, seen = 1, set()
    page_what = f"{what} (page {n})"
    try:
        # Each try gets the whole read timeout, as an httpx or boto3 request does (a float would be
        # one deadline shared by all the tries of a page).
        pager = method(request=request_type(**fields), retry=attempts.retry, timeout=ConstantTimeout(ctx.http_timeout_s))
        for page in pager.pages:
            _count(ctx)
            attempts.page_done()
            yield type(page).to_dict(page, preserving_proto_field_name=False, use_integers_for_enums=False)
            token = page.next_page_token
            if not token:
                return
            if token in seen:
                raise SchemaDriftError(f"gcp: {what} repeated page token {token[:40]!r}")
            if n >= MAX_PAGES:
                raise SourceError(f"gcp: {what} did not end after {MAX_PAGES} pages")
            seen.add(token)
            n += 1
            page_what = f"{what} (page {n})"
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


def fetch_zones(ctx: SourceContext, clients: Clients) -> list[dict[str, Any]]:
    from google.cloud import compute_v1

    return list(_pages(ctx, "zones.list", clients.zones.list, compute_v1.ListZonesRequest,
                       {"project": clients.project, "max_results": PAGE_SIZE_COMPUTE}))


def fetch_machine_types(ctx: SourceContext, clients: Clients) -> list[dict[str, Any]]:
    from google.cloud import compute_v1

    return list(_pages(ctx, "machineTypes.aggregatedList", clients.machine_types.aggregated_list,
                       compute_v1.AggregatedListMachineTypesRequest,
                       {"project": clients.project, "filter": MACHINE_TYPE_FILTER,
                        "max_results": PAGE_SIZE_COMPUTE}))


def fetch_accelerator_types(ctx: SourceContext, clients: Clients) -> list[dict[str, Any]]:
    from google.cloud import compute_v1

    return list(_pages(ctx, "acceleratorTypes.aggregatedList", clients.accelerator_types.aggregated_list,
                       compute_v1.AggregatedListAcceleratorTypesRequest,
                       {"project": clients.project, "max_results": PAGE_SIZE_COMPUTE}))


def fetch_skus(ctx: SourceContext, clients: Clients) -> list[dict[str, Any]]:
    """All Compute Engine SKUs, asking for USD (non-USD answers are still converted or refused)."""
    from google.cloud import billing_v1

    skus: list[dict[str, Any]] = []
    for page in _pages(ctx, "services.skus.list", clients.catalog.list_skus, billing_v1.ListSkusRequest,
                       {"parent": COMPUTE_ENGINE_SERVICE, "currency_code": "USD",
                        "page_size": PAGE_SIZE_BILLING}):
        skus.extend(page.get("skus") or [])
    if not skus:
        raise SchemaDriftError("gcp: the Cloud Billing Catalog returned no Compute Engine SKUs")
    return skus


def fetch(ctx: SourceContext) -> Batch:
    """Scrape GCP: zones, GPU machine types, accelerator types and Catalog SKUs, into one Batch."""
    clients = make_clients(ctx)
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="gcp") as pool:
        zones_f = pool.submit(fetch_zones, ctx, clients)
        types_f = pool.submit(fetch_machine_types, ctx, clients)
        accels_f = pool.submit(fetch_accelerator_types, ctx, clients)
        skus_f = pool.submit(fetch_skus, ctx, clients)
        zone_pages, type_pages, accel_pages, skus = (zones_f.result(), types_f.result(), accels_f.result(),
                                                     skus_f.result())
    zones = parse_zones(zone_pages)
    regions = ctx.select_regions({z.region for z in zones.values()}, DEFAULT_REGIONS, "the zones list")
    shapes = parse_machine_types(type_pages)
    if not any(series_of(n) in SERIES_SKU_FAMILY or series_of(n) in SLICE_SERIES
               for zone in shapes.values() for n in zone):
        raise SchemaDriftError("gcp: machineTypes.aggregatedList returned no GPU machine types")
    accelerators = parse_accelerator_types(accel_pages)
    return build_batch(zones, shapes, accelerators, skus, regions)


@drift_guard("gcp: Compute and Billing Catalog answers")
def build_batch(zones: dict[str, ZoneInfo], shapes: dict[str, dict[str, MachineShape]],
                accelerators: dict[str, dict[str, AcceleratorInfo]], skus: list[dict[str, Any]],
                regions: Iterable[str]) -> Batch:
    """Everything fetched -> offers, storage and egress records (pure)."""
    regions = list(regions)
    batch = Batch(NAME)
    catalog = parse_compute_skus(batch, skus, regions)
    for reason, n in sorted(catalog.skipped.items()):
        batch.notes.append(f"{n} SKUs left out: {reason}")
    skips = Skips()
    plans = plan_offers(zones, shapes, accelerators, regions, batch, skips)
    batch.notes.extend(skips.notes())
    build_offers(batch, plans, catalog, zones)
    for reason, n in sorted(unused_counts(catalog).items()):
        batch.notes.append(f"{n} SKUs not used: {reason}")
    build_storage(batch, skus, regions)
    build_egress(batch, skus, regions)
    return batch
