"""Microsoft Azure: GPU VM prices (pay-as-you-go, Spot, Low Priority, reservations, savings plans), managed disks
and egress from the Retail Prices API, Spot eviction rates (adapters/azure_eviction.py). One VM query covers every
region and GPU family (a new size is quarantined); `GPU_SIZES` holds each size's GPU facts from learn.microsoft.com."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Iterable

import httpx

from gpuledger.adapters import azure_eviction
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard, next_link
from gpuledger.adapters.contract import Enrichment, ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, amortized_usd_per_hour, commitment_option

NAME = "azure"
PRICES_HOST = "prices.azure.com"
PRICES_PATH = "/api/retail/prices"
# A next-page link as an error names it: the whole OData filter again, hundreds of characters before the cause.
PAGE_URL = re.compile(re.escape(PRICES_HOST + PRICES_PATH) + r"(?:\?\S*?)?(?=:?\s|$)")
API_VERSION = "2023-01-01-preview"
HOURS_PER_MONTH = 730  # Azure's own month for per-hour storage meters
DISK_PRICES, BANDWIDTH_PRICES = "managed disk prices", "bandwidth prices"

# Families whose sizes carry GPUs (not NP, the Xilinx FPGA family).
GPU_SKU_PREFIXES = ("Standard_NC", "Standard_ND", "Standard_NG", "Standard_NV")

# Consumption (pay-as-you-go, Spot, Low Priority, savings plans) and Reservation items; not DevTestConsumption.
VM_FILTER = ("serviceName eq 'Virtual Machines' and (priceType eq 'Consumption' or priceType eq 'Reservation') and ("
             + " or ".join(f"contains(armSkuName, '{p}')" for p in GPU_SKU_PREFIXES) + ")")
STORAGE_FILTER = (
    "serviceName eq 'Storage' and priceType eq 'Consumption' and ("
    "(productName eq 'Premium SSD Managed Disks' and contains(meterName, 'LRS Disk')) or "
    "(productName eq 'Standard SSD Managed Disks' and contains(meterName, 'LRS Disk')) or "
    "(productName eq 'Standard HDD Managed Disks' and contains(meterName, 'LRS Disk')) or "
    "(productName eq 'Azure Premium SSD v2' and meterName eq 'Premium LRS Provisioned Capacity'))"
)
BANDWIDTH_FILTER = (
    "serviceName eq 'Bandwidth' and priceType eq 'Consumption' and ("
    "(productName eq 'Rtn Preference: MGN' and meterName eq 'Standard Data Transfer Out') or "
    "productName eq 'Bandwidth Inter-Region')"
)

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    enrichments=(
        Enrichment(name=azure_eviction.EVICTION_RATES, columns=(
            "interruption_risk", "interruption_risk_level", "interruption_rate_max_pct", "interruption_risk_source")),
        Enrichment(name=DISK_PRICES),  # storage rows only
        Enrichment(name=BANDWIDTH_PRICES),  # egress rows only
    ),
    facts=ProviderFacts(
        display_name="Microsoft Azure (Virtual Machines)", kind="hyperscaler",
        billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="Linux VMs are billed per second with a 1-minute minimum (third-party pages disagree: "
                      "some say per minute). Spot and Low Priority are billed the same way at their own rates.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A VM stopped and deallocated stops compute billing; its managed disks keep billing. "
                              "A VM shut down from inside the OS ('Stopped', still allocated) is billed in full.",
        access_ssh=True, access_docker=True, access_jupyter=False,
        multinode_interconnect="InfiniBand NDR 8×400 Gb/s (ND H100 v5, ND H200 v5, ND MI300X v5); "
                               "HDR 200 Gb/s per GPU (ND A100 v4)",
        interruptible_offer="Spot VMs (30-second eviction notice); Low Priority (Batch)",
        price_source="Azure Retail Prices API (prices.azure.com, no auth); GPU facts from learn.microsoft.com "
                     "size pages",
        source_urls=[
            "https://learn.microsoft.com/en-us/rest/api/cost-management/retail-prices/azure-retail-prices",
            "https://azure.microsoft.com/en-us/pricing/details/virtual-machines/linux/",
            "https://learn.microsoft.com/en-us/azure/virtual-machines/states-billing",
            "https://learn.microsoft.com/en-us/azure/virtual-machines/spot-vms",
            "https://learn.microsoft.com/en-us/azure/batch/batch-spot-vms",
            "https://learn.microsoft.com/en-us/azure/virtual-machines/sizes/gpu-accelerated/nd-family",
            "https://azure.microsoft.com/en-us/pricing/details/bandwidth/",
            "https://azure.microsoft.com/en-us/pricing/details/managed-disks/",
        ],
    ),
)


_SIZES_DOC = "https://learn.microsoft.com/en-us/azure/virtual-machines/sizes/gpu-accelerated/"


@dataclass(frozen=True)
class Series:
    """What every size of one series shares. `gpu_name` is what canonicalize() is asked."""

    name: str
    doc: str
    gpu_name: str
    gpu_memory_gb: float  # one whole GPU, GiB as the size page gives it
    interconnect: str | None = None  # intra-node GPU link, for sizes with more than one GPU
    multinode_fabric: str | None = None
    note: str = ""


@dataclass(frozen=True)
class GpuSize:
    series: Series
    gpu_count: Fraction  # a fraction for GPU partitions (NVadsA10 v5 1/6 .. 2)
    vcpus: int
    ram_gb: float
    local_disk_gb: float | None = None  # temp (local SSD) disk, GiB as the size page gives it
    network_gbps: float | None = None
    multinode_fabric: str | None = None  # overrides the series (NC24rs_v3 has InfiniBand, NC24s_v3 not)


_T4 = Series("NCasT4_v3", _SIZES_DOC + "ncast4v3-series", "Tesla T4", 16, "PCIe")
# Resource SKUs counts as the Aspire AKS size table (generated from that API) shows them; NC8 / NC16 /
# NC32 have 8 / 16 / 32 vCPU, 100 / 200 / 400 GiB and list at 1.1 / 2.2 / 4.4 USD/h.
A10_V4_GPU_SHARE_BASIS = (
    "no Microsoft size page for NCads A10 v4; the Resource SKUs API rounds GPU partitions up to 1 (it "
    "reports the documented 1/6-GPU NV6ads_A10_v5 as 1 GPU) and reports NC32ads_A10_v4 as 2 GPUs; vCPUs, "
    "RAM and price double at each size, so NC16ads = 1 A10 and NC8ads = 1/2 A10 (12 GiB frame buffer), "
    "as the NVadsA10 v5 page documents for its 1/2-GPU size")
_A10_NC = Series("NC A10 v4", _SIZES_DOC + "nc-family", "NVIDIA A10", 24, "PCIe", note=A10_V4_GPU_SHARE_BASIS)
_A10_NV = Series("NVadsA10_v5", _SIZES_DOC + "nvadsa10v5-series", "NVIDIA A10", 24, "PCIe")
_V100_NC = Series("NCv3", _SIZES_DOC + "ncv3-series", "Tesla V100-PCIE-16GB", 16, "PCIe")
_V100_ND = Series("NDv2", _SIZES_DOC + "ndv2-series", "Tesla V100-SXM2-32GB", 32, "NVLink",
                  "InfiniBand EDR 100 Gb/s")
_A100_NC = Series("NC A100 v4", _SIZES_DOC + "nca100v4-series", "NVIDIA A100 80GB PCIe", 80, "PCIe")
_HGX_A100 = "the size page's spec table says 'PCIe A100'; the series is the HGX (SXM4, NVSwitch) A100 "
_A100_ND = Series("ND A100 v4", _SIZES_DOC + "ndasra100v4-series", "NVIDIA A100-SXM4-40GB", 40, "NVSwitch",
                  "InfiniBand HDR 8x200 Gb/s", note=_HGX_A100 + "40GB")
_A100_NDM = Series("NDm A100 v4", _SIZES_DOC + "ndma100v4-series", "NVIDIA A100-SXM4-80GB", 80, "NVSwitch",
                   "InfiniBand HDR 8x200 Gb/s", note=_HGX_A100 + "80GB")
_H100_NC = Series("NCads H100 v5", _SIZES_DOC + "ncadsh100v5-series", "NVIDIA H100 NVL", 94, "NVLink bridge")
_H100_NCC = Series("NCCads H100 v5", _SIZES_DOC + "nccadsh100v5-series", "NVIDIA H100 NVL", 94,
                   note="confidential-computing size")
_H100_ND = Series("ND H100 v5", _SIZES_DOC + "ndh100v5-series", "NVIDIA H100 80GB HBM3", 80, "NVSwitch",
                  "InfiniBand NDR 8x400 Gb/s")
_H200_ND = Series("ND H200 v5", _SIZES_DOC + "nd-family", "NVIDIA H200", 141, "NVSwitch",
                  "InfiniBand NDR 8x400 Gb/s")
_MI300X = Series("ND MI300X v5", _SIZES_DOC + "ndmi300xv5-series", "AMD Instinct MI300X OAM", 192,
                 "Infinity Fabric", "InfiniBand NDR 8x400 Gb/s")
_GB200 = Series("ND GB200 v6", _SIZES_DOC + "nd-family", "NVIDIA GB200", 186, "NVLink (NVL72)", "InfiniBand NDR")
_RTXPRO = Series(
    "NC RTXPRO6000BSE v6", _SIZES_DOC + "nc-rtxpro6000-bse-v6-series",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition", 96, "PCIe",
    note="GPU counts of the 128/256/320-vCPU sizes from the size page's Accelerators tab; the page's host "
         "specs give 0.25 - 2 GPUs for 32 - 320 vCPUs, so the 32- and 64-vCPU sizes are 1/4 and 1/2 GPU "
         "(the retail prices halve with them: NC64lds 2.44, NC32lds 1.243 USD/h)",
)
_MI25 = Series("NVv4", _SIZES_DOC + "nvv4-series", "AMD Radeon Instinct MI25", 16)
_V620 = Series("NGads V620", _SIZES_DOC + "ngadsv620-series", "AMD Radeon Pro V620", 32)

F = Fraction
GPU_SIZES: dict[str, GpuSize] = {
    # NCasT4_v3: vCPU, RAM GiB, temp disk GiB, network Gbps from the size page tabs.
    "Standard_NC4as_T4_v3": GpuSize(_T4, F(1), 4, 28, 176, 8),
    "Standard_NC8as_T4_v3": GpuSize(_T4, F(1), 8, 56, 352, 8),
    "Standard_NC16as_T4_v3": GpuSize(_T4, F(1), 16, 110, 352, 8),
    "Standard_NC64as_T4_v3": GpuSize(_T4, F(4), 64, 440, 2816, 32),
    "Standard_NC8ads_A10_v4": GpuSize(_A10_NC, F(1, 2), 8, 100),
    "Standard_NC16ads_A10_v4": GpuSize(_A10_NC, F(1), 16, 200),
    "Standard_NC32ads_A10_v4": GpuSize(_A10_NC, F(2), 32, 400),
    # NVadsA10_v5: partitions of one A10 (1/6 = 4 GiB frame buffer .. 2 whole GPUs).
    "Standard_NV6ads_A10_v5": GpuSize(_A10_NV, F(1, 6), 6, 55, 180, 5),
    "Standard_NV12ads_A10_v5": GpuSize(_A10_NV, F(1, 3), 12, 110, 360, 10),
    "Standard_NV18ads_A10_v5": GpuSize(_A10_NV, F(1, 2), 18, 220, 720, 20),
    "Standard_NV36ads_A10_v5": GpuSize(_A10_NV, F(1), 36, 440, 1440, 40),
    "Standard_NV36adms_A10_v5": GpuSize(_A10_NV, F(1), 36, 880, 2880, 80),
    "Standard_NV72ads_A10_v5": GpuSize(_A10_NV, F(2), 72, 880, 2880, 80),
    "Standard_NC6s_v3": GpuSize(_V100_NC, F(1), 6, 112, 736),
    "Standard_NC12s_v3": GpuSize(_V100_NC, F(2), 12, 224, 1474),
    "Standard_NC24s_v3": GpuSize(_V100_NC, F(4), 24, 448, 2948),
    "Standard_NC24rs_v3": GpuSize(_V100_NC, F(4), 24, 448, 2948, multinode_fabric="InfiniBand (RDMA)"),
    "Standard_ND40rs_v2": GpuSize(_V100_ND, F(8), 40, 672),
    "Standard_NC24ads_A100_v4": GpuSize(_A100_NC, F(1), 24, 220),
    "Standard_NC48ads_A100_v4": GpuSize(_A100_NC, F(2), 48, 440),
    "Standard_NC96ads_A100_v4": GpuSize(_A100_NC, F(4), 96, 880),
    "Standard_ND96asr_v4": GpuSize(_A100_ND, F(8), 96, 900, 6000, 24),
    "Standard_ND96amsr_A100_v4": GpuSize(_A100_NDM, F(8), 96, 1900, 6400, 24),
    "Standard_NC40ads_H100_v5": GpuSize(_H100_NC, F(1), 40, 320, 3576, 40),
    "Standard_NC80adis_H100_v5": GpuSize(_H100_NC, F(2), 80, 640, 7152, 80),
    "Standard_NCC40ads_H100_v5": GpuSize(_H100_NCC, F(1), 40, 320),
    "Standard_ND96isr_H100_v5": GpuSize(_H100_ND, F(8), 96, 1900, 28000),
    "Standard_ND96isr_H200_v5": GpuSize(_H200_ND, F(8), 96, 1850),
    "Standard_ND96isr_MI300X_v5": GpuSize(_MI300X, F(8), 96, 1850, 1000, 80),
    "Standard_ND128isr_NDR_GB200_v6": GpuSize(_GB200, F(4), 128, 864),
    # NC RTX PRO 6000 BSE v6: vCPU, RAM GiB, temp disk GiB, network Gbps from the size page tabs
    # (ds = general purpose, lds = compute optimized). Fractions: see _RTXPRO's note.
    "Standard_NC32ds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1, 4), 32, 128, 256, 25),
    "Standard_NC64ds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1, 2), 64, 256, 512, 50),
    "Standard_NC128ds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1), 128, 512, 1024, 75),
    "Standard_NC256ds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(2), 256, 1024, 2048, 100),
    "Standard_NC320ds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(2), 320, 1280, 2048, 200),
    "Standard_NC32lds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1, 4), 32, 64, 256, 25),
    "Standard_NC64lds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1, 2), 64, 128, 512, 50),
    "Standard_NC128lds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(1), 128, 256, 1024, 75),
    "Standard_NC256lds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(2), 256, 512, 2048, 100),
    "Standard_NC320lds_xl_RTXPRO6000BSE_v6": GpuSize(_RTXPRO, F(2), 320, 640, 2048, 200),
    # NVv4: partitions of one Radeon Instinct MI25 (1/8 = 2 GiB .. 1 = 16 GiB).
    "Standard_NV4as_v4": GpuSize(_MI25, F(1, 8), 4, 14, 88, 1),
    "Standard_NV8as_v4": GpuSize(_MI25, F(1, 4), 8, 28, 176, 2),
    "Standard_NV16as_v4": GpuSize(_MI25, F(1, 2), 16, 56, 352, 4),
    "Standard_NV32as_v4": GpuSize(_MI25, F(1), 32, 112, 704, 8),
    "Standard_NG8ads_V620_v1": GpuSize(_V620, F(1, 4), 8, 16, network_gbps=10),
    "Standard_NG16ads_V620_v1": GpuSize(_V620, F(1, 2), 16, 32, network_gbps=20),
    "Standard_NG32ads_V620_v1": GpuSize(_V620, F(1), 32, 64, network_gbps=40),
    "Standard_NG32adms_V620_v1": GpuSize(_V620, F(1), 32, 176, network_gbps=40),
}


def first_page_params(odata_filter: str) -> dict[str, str]:
    """A first page's query: USD, primary meters only (else the preview API lists non-primary duplicates)."""
    return {"api-version": API_VERSION, "currencyCode": "'USD'", "meterRegion": "'primary'", "$filter": odata_filter}


def next_page_link(doc: dict[str, Any]) -> str | None:
    return doc.get("NextPageLink")  # next_link keeps to the host (its `:443` too) and sends path and query


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    count: int | None


@drift_guard("azure: Retail Prices page")
def parse_page(doc: Any, what: str) -> Page:
    """One Retail Prices page: {"BillingCurrency", "Items", "NextPageLink", "Count", ...}."""
    if not isinstance(doc, dict) or not isinstance(doc.get("Items"), list) or "NextPageLink" not in doc:
        keys = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise SchemaDriftError(f"azure: {what} page lacks Items/NextPageLink (got {keys})")
    count = doc.get("Count")
    return Page(items=doc["Items"], count=count if isinstance(count, int) else None)


REQUIRED_ITEM_FIELDS = ("currencyCode", "retailPrice", "armRegionName", "meterName", "productName",
                        "unitOfMeasure", "type")


def check_item(item: Any, what: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise SchemaDriftError(f"azure: a {what} item is not an object: {str(item)[:100]}")
    if missing := [f for f in REQUIRED_ITEM_FIELDS if f not in item]:
        raise SchemaDriftError(f"azure: {what} item {item.get('meterId', '?')} lacks {missing}")
    return item


# reservationTerm / savingsPlan term -> months; upfront or monthly costs the same total.
COMMITMENT_TERMS = {"1 Year": 12, "3 Years": 36}
COMMITMENT_PAYMENT = "upfront_or_monthly"


def purchase_option(item: dict[str, Any]) -> str:
    """'… Spot' meters are Spot VMs, '… Low Priority' Batch nodes, a Reservation item a reserved instance."""
    if item.get("type") == "Reservation":
        months = COMMITMENT_TERMS.get(str(item.get("reservationTerm")))
        return commitment_option("reserved", months, COMMITMENT_PAYMENT) if months else "reservation of an unknown term"
    names = (str(item.get("meterName", "")), str(item.get("skuName", "")))
    if any(n.endswith(" Spot") for n in names):
        return "spot"
    if any(n.endswith(" Low Priority") for n in names):
        return "low_priority"
    return "on_demand"


def is_windows(item: dict[str, Any]) -> bool:
    """Windows meters share meterName with Linux ones; only productName differs."""
    return "Windows" in str(item.get("productName", ""))


def _price(item: dict[str, Any]) -> float:
    try:
        return float(item["retailPrice"])
    except (TypeError, ValueError):
        raise SchemaDriftError(f"azure: item {item.get('meterId', '?')} has a non-numeric retailPrice "
                               f"{item.get('retailPrice')!r}") from None


def _ref(item: dict[str, Any]) -> str:
    return "/".join(str(item.get(k, "")) for k in ("armRegionName", "armSkuName", "meterName", "meterId"))


class Skipped(Counter[str]):
    """Items left out on purpose, by reason."""

    @property
    def counts(self) -> dict[str, int]:
        return {why: n for why, n in self.items() if n}

    def describe(self, what: str) -> str:
        parts = ", ".join(f"{n} {why}" for why, n in sorted(self.counts.items()))
        return f"azure: {what}: skipped {parts}" if parts else f"azure: {what}: nothing skipped"


def _out_of_scope(item: dict[str, Any], regions: set[str] | None) -> str | None:
    """Why an item is only counted, never loaded."""
    if (kind := item.get("type")) not in ("Consumption", "Reservation"):  # DevTestConsumption
        return f"type {kind}"
    if item.get("isPrimaryMeterRegion") is False:
        return "non-primary meters"
    if regions is not None and item["armRegionName"] not in regions:
        return "regions not selected"
    return None


def _vm_out_of_scope(item: dict[str, Any], regions: set[str] | None) -> str | None:
    if (service := item.get("serviceName", "Virtual Machines")) != "Virtual Machines":
        return f"service {service}"
    if is_windows(item):
        return "Windows meters"
    if why := _out_of_scope(item, None):
        return why
    if not str(item.get("armSkuName") or "").startswith(GPU_SKU_PREFIXES):
        return "sizes outside the GPU families"
    return _out_of_scope(item, regions)


def _pick(batch: Batch, kind: str, key_name: str, items: list[dict[str, Any]],
          skipped: Skipped) -> dict[str, Any] | None:
    """One item per record key: the newest effectiveStartDate wins, identical duplicates collapse, current
    items that disagree are quarantined rather than guessed between; the others counted in `skipped`."""
    if len(items) == 1:
        return items[0]
    newest = max(str(i.get("effectiveStartDate", "")) for i in items)
    current = [i for i in items if str(i.get("effectiveStartDate", "")) == newest]
    prices = {_price(i) for i in current}
    if len(prices) == 1:
        skipped["meters superseded by a newer effectiveStartDate"] += len(items) - len(current)
        skipped["duplicate meters at the same price"] += len(current) - 1
        return sorted(current, key=lambda i: str(i.get("meterId", "")))[0]
    for i in current:
        batch.quarantine(kind, _ref(i), f"{len(current)} current meters for {key_name} disagree on price "
                         f"({', '.join(f'{p:g}' for p in sorted(prices))})", i)
    return None


@drift_guard("azure: Virtual Machines items")
def build_vm_offers(batch: Batch, items: Iterable[dict[str, Any]], regions: set[str] | None = None) -> Skipped:
    """Linux GPU VM items -> one offer per region/size/purchase option."""
    skipped = Skipped()
    candidates: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for raw in items:
        item = check_item(raw, "Virtual Machines")
        if why := _vm_out_of_scope(item, regions):
            skipped[why] += 1
            continue
        sku = str(item["armSkuName"])
        if not batch.usd_only("offer", _ref(item), item.get("currencyCode"), item):
            continue
        problem = None
        if item.get("type") == "Reservation" and str(item.get("reservationTerm")) not in COMMITMENT_TERMS:
            problem = (f"reservation with unknown reservationTerm {item.get('reservationTerm')!r} "
                       f"(expected one of {sorted(COMMITMENT_TERMS)})")
        elif item["unitOfMeasure"] != "1 Hour":
            problem = f"unexpected unit {item['unitOfMeasure']!r} for a VM rate (expected '1 Hour')"
        elif sku not in GPU_SIZES:
            problem = (f"unknown GPU size {sku}: a GPU family, but not in adapters/azure.py GPU_SIZES; add it "
                       "from its learn.microsoft.com size page")
        if problem:
            batch.quarantine("offer", _ref(item), problem, item)
            continue
        candidates.setdefault((str(item["armRegionName"]), sku, purchase_option(item)), []).append(item)

    chosen = {key: picked for key, group in sorted(candidates.items())
              if (picked := _pick(batch, "offer", "/".join(key), group, skipped)) is not None}
    # On-demand first: Spot/Low Priority savings are computed only against an on-demand rate
    # that passed the record contract (a negative or NaN rate is quarantined, never a baseline).
    on_demand = {(region, sku): _price(item) for (region, sku, option), item in chosen.items()
                 if option == "on_demand" and _add_vm_offer(batch, region, sku, option, item, None)}
    for (region, sku, option), item in chosen.items():
        if option != "on_demand":
            _add_vm_offer(batch, region, sku, option, item, on_demand.get((region, sku)))
        elif (region, sku) in on_demand:  # a rejected item's plans go with it
            _add_savings_plan_offers(batch, region, sku, item, on_demand[(region, sku)])
    return skipped


def _add_savings_plan_offers(batch: Batch, region: str, sku: str, item: dict[str, Any],
                             on_demand_price: float | None) -> None:
    """One offer per term of the `savingsPlan` rates a pay-as-you-go item carries."""
    if (plans := item.get("savingsPlan")) is None:
        return
    if not isinstance(plans, list):
        batch.quarantine("offer", _ref(item), f"savingsPlan is not a list: {str(plans)[:100]}", item)
        return
    seen: set[str] = set()
    for plan in plans:
        term = str(plan.get("term")) if isinstance(plan, dict) else None
        months = COMMITMENT_TERMS.get(term or "")
        ref = f"{_ref(item)}/savingsPlan/{term}"
        if months is None:
            batch.quarantine("offer", ref, f"savings plan with unknown term {term!r} (expected one of "
                             f"{sorted(COMMITMENT_TERMS)})", item)
            continue
        if batch.listed_again(seen, term, f"savings plan term {term} of {sku} in {region}", item, ref):
            continue
        try:
            rate = float(plan["retailPrice"])
        except (KeyError, TypeError, ValueError):
            batch.quarantine("offer", ref, f"savings plan rate {plan.get('retailPrice')!r} is not a number", item)
            continue
        _add_vm_offer(batch, region, sku, commitment_option("savings_plan", months, COMMITMENT_PAYMENT),
                      {**item, "retailPrice": rate, "savingsPlanTerm": term}, on_demand_price)


def _add_vm_offer(batch: Batch, region: str, sku: str, option: str, item: dict[str, Any],
                  on_demand_price: float | None) -> bool:
    size = GPU_SIZES[sku]
    series, count = size.series, size.gpu_count
    price = _price(item)
    months = COMMITMENT_TERMS.get(str(item.get("reservationTerm") or item.get("savingsPlanTerm")))
    if item.get("type") == "Reservation" and months:
        # A reservation's unitPrice is the whole term's price, not an hourly rate.
        price = round(amortized_usd_per_hour(price, 0.0, months), 10)
    elif "savingsPlanTerm" not in item:
        months = None
    saving = round(100 * (1 - price / on_demand_price), 1) if option != "on_demand" and on_demand_price else None
    data = {k: item.get(k) for k in ("meterId", "skuId", "productName", "meterName", "skuName", "location")}
    data.update(series=series.name, gpu_facts_source=series.doc)
    if series.note:
        data["gpu_facts_note"] = series.note
    if months is not None:
        data["commitment"] = ({"reservationTerm": item.get("reservationTerm"), "term_price_usd": _price(item)}
                              if item.get("type") == "Reservation" else {"savingsPlan_term": item["savingsPlanTerm"]})
        data["saving_vs_on_demand_pct"], saving = saving, None
    if count.denominator != 1:  # a partition: the share of one GPU, as the size page sells it
        data["gpu_share"] = f"{count.numerator}/{count.denominator}"
    return batch.offer(
        _ref(item), item, gpu=series.gpu_name, gpu_lookup_mib=series.gpu_memory_gb * 1024,
        # a partition's memory is its own frame buffer: the share of one GPU's
        gpu_memory_gb=round(float(series.gpu_memory_gb * min(count, 1)), 3), gpu_count=round(float(count), 4),
        region=region, instance_type=sku, purchase_option=option, vcpus=float(size.vcpus), ram_gb=float(size.ram_gb),
        local_disk_gb=size.local_disk_gb, interconnect=series.interconnect if count > 1 else None,
        network_gbps=size.network_gbps, multinode_fabric=size.multinode_fabric or series.multinode_fabric,
        price_per_hour=price, price_observed_at=item.get("effectiveStartDate"), spot_savings_pct=saving,
        term_months=months, payment_option=COMMITMENT_PAYMENT if months is not None else None,
        provider_data=data)


# Managed disk tiers are sold per disk per month; each tier (its size in GiB) is a class of its own.
# https://learn.microsoft.com/en-us/azure/virtual-machines/disks-types
DISK_TIER_GIB: dict[str, int] = {
    "1": 4, "2": 8, "3": 16, "4": 32, "6": 64, "10": 128, "15": 256, "20": 512, "30": 1024,
    "40": 2048, "50": 4096, "60": 8192, "70": 16384, "80": 32767,
}
_DISK_METER = re.compile(r"^(?P<kind>[PES])(?P<tier>\d+) LRS Disk$")
_DISK_CLASS = {"P": ("premium-ssd-lrs", "Premium SSD"), "E": ("standard-ssd-lrs", "Standard SSD"),
               "S": ("standard-hdd-lrs", "Standard HDD")}


def _disk_rate(item: dict[str, Any]) -> tuple[str, float, str] | None:
    """(storage class, USD per GiB-month, description) of a managed disk meter we model: a tier's disk price
    / its GiB (`premium-ssd-lrs-p10`: / 128 GiB), Premium SSD v2's GiB-hour price x Azure's 730-hour month."""
    meter, unit, price = str(item["meterName"]), str(item["unitOfMeasure"]), _price(item)
    m = _DISK_METER.match(meter)
    if m and unit == "1/Month" and m["tier"] in DISK_TIER_GIB:
        gib = DISK_TIER_GIB[m["tier"]]
        family, label = _DISK_CLASS[m["kind"]]
        return (f"{family}-{m['kind'].lower()}{m['tier']}", price / gib,
                f"{label} {m['kind']}{m['tier']} LRS: {price:g} USD per disk per month / {gib} GiB; "
                "priced per disk, not per GiB")
    if meter == "Premium LRS Provisioned Capacity" and unit == "1 GiB/Hour":
        return ("premium-ssd-v2-lrs", price * HOURS_PER_MONTH,
                f"Premium SSD v2 LRS capacity: {price:g} USD per GiB-hour x {HOURS_PER_MONTH} h; "
                "IOPS above 3,000 and throughput above 125 MB/s are billed separately")
    return None


@drift_guard("azure: Storage items")
def build_storage(batch: Batch, items: Iterable[dict[str, Any]], regions: set[str] | None = None) -> Skipped:
    """Managed disk meters -> USD per GiB-month per disk class and region."""
    skipped = Skipped()
    candidates: dict[tuple[str, str], list[tuple[dict[str, Any], float, str]]] = {}
    for raw in items:
        if why := _out_of_scope(item := check_item(raw, "Storage"), regions):
            skipped[why] += 1
        elif (rate := _disk_rate(item)) is None:
            skipped["storage meters not modelled"] += 1
        elif batch.usd_only("storage", _ref(item), item.get("currencyCode"), item):
            candidates.setdefault((str(item["armRegionName"]), rate[0]), []).append((item, *rate[1:]))
    for (region, cls), group in sorted(candidates.items()):
        if (picked := _pick(batch, "storage", f"{region}/{cls}", [g[0] for g in group], skipped)) is not None:
            _, per_gib, desc = next(g for g in group if g[0] is picked)
            batch.add("storage", _ref(picked), picked, region=region, storage_class=cls,
                      usd_per_gb_month=round(per_gib, 8), source_currency="USD",
                      source_usd_per_gb_month=round(per_gib, 8), description=desc)
    return skipped


@drift_guard("azure: Bandwidth items")
def build_egress(batch: Batch, items: Iterable[dict[str, Any]], regions: set[str] | None = None) -> Skipped:
    """Bandwidth meters -> egress tiers per region. Internet egress tiers start at `tierMinimumUnits` (GB per
    month); of the inter-region rates (by destination continent) the highest is kept, the range described."""
    skipped = Skipped()
    internet: dict[tuple[str, float], list[dict[str, Any]]] = {}
    inter: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for raw in items:
        if why := _out_of_scope(item := check_item(raw, "Bandwidth"), regions):
            skipped[why] += 1
            continue
        if item["unitOfMeasure"] != "1 GB":
            skipped[f"bandwidth unit {item['unitOfMeasure']}"] += 1
            continue
        product, meter = item["productName"], str(item["meterName"])
        if product == "Rtn Preference: MGN" and meter == "Standard Data Transfer Out":
            target = internet
        elif product == "Bandwidth Inter-Region" and "Data Transfer Out" in meter:
            target = inter
        else:
            skipped["bandwidth meters not modelled"] += 1
            continue
        if not batch.usd_only("egress", _ref(item), item.get("currencyCode"), item):
            continue
        try:
            start = float(item.get("tierMinimumUnits") or 0.0)
        except (TypeError, ValueError):
            batch.quarantine("egress", _ref(item), f"tierMinimumUnits {item.get('tierMinimumUnits')!r} is not a "
                             "number", item)
            continue
        target.setdefault((str(item["armRegionName"]), start), []).append(item)

    for (region, start), group in sorted(internet.items()):
        if (picked := _pick(batch, "egress", f"{region}/internet/{start:g}", group, skipped)) is None:
            continue
        end = min((s for r, s in internet if r == region and s > start), default=None)
        span = f"{start:g}-{end:g} GB" if end is not None else f"from {start:g} GB"
        batch.add("egress", _ref(picked), picked, region=region, destination="internet",
                  tier_start_gb=start, tier_end_gb=end, usd_per_gb=_price(picked), source_currency="USD",
                  source_usd_per_gb=_price(picked),
                  description=f"internet egress over the Microsoft network, {span} per month")
    for (region, start), group in sorted(inter.items()):
        top = max(group, key=lambda i: (_price(i), str(i.get("meterName"))))
        low = min(_price(i) for i in group)
        meters = "; ".join(sorted(f"{i['meterName']} {_price(i):g}" for i in group))
        batch.add("egress", _ref(top), top, region=region, destination="inter_region", tier_start_gb=start,
                  tier_end_gb=None, usd_per_gb=_price(top), source_currency="USD", source_usd_per_gb=_price(top),
                  description=f"highest of {len(group)} inter-region rates ({low:g} to {_price(top):g} USD/GB): "
                              f"{meters}")
    return skipped


def add_query(ctx: SourceContext, client: httpx.Client, batch: Batch, what: str, odata_filter: str,
              build: Callable[..., Skipped], regions: set[str] | None) -> None:
    """Every page of one query, built into `batch` only when all of it was read and parsed."""
    counted = 0

    def items(doc: Any) -> list[dict[str, Any]]:
        nonlocal counted
        page = parse_page(doc, what)
        counted += page.count if page.count is not None else len(page.items)
        return page.items

    listing = f"azure {what}"  # its key in ctx.pages
    try:
        found = list(ctx.paginate(client, PRICES_HOST, PRICES_PATH, items, next_link(next_page_link, PRICES_HOST),
                                  params=first_page_params(odata_filter), what=listing, cap="azure_max_pages"))
    except SourceError as err:  # named by query and page; the cause stays within the first line's reach
        page = f"{PRICES_HOST}{PRICES_PATH} ({what} page {ctx.pages.get(listing, 0) + 1})"
        raise type(err)(PAGE_URL.sub(PRICES_HOST + PRICES_PATH, PAGE_URL.sub(page, str(err), count=1))) from err
    part = PROVIDER.batch()
    skipped = build(part, found, regions)
    for name in ("offers", "storage", "egress", "quarantined"):
        getattr(batch, name).extend(getattr(part, name))
    batch.notes.append(f"azure: {what}: {ctx.pages[listing]} pages, {len(found)} items "
                       f"(pages' Count total {counted})")
    batch.notes.append(skipped.describe(what))


def fetch(ctx: SourceContext) -> Batch:
    """GPU VM rates, then the enrichments (disk and bandwidth prices, Spot eviction rates), into one Batch."""
    batch = PROVIDER.batch()
    # The `azure_regions` setting (eastus,westeurope) narrows the result; the queries stay the same.
    wanted = ctx.config.azure_regions
    regions = None if not wanted or wanted == "all" else {n.strip() for n in wanted.split(",") if n.strip()}
    with ctx.http_client() as client:
        add_query(ctx, client, batch, "Virtual Machines", VM_FILTER, build_vm_offers, regions)
        for name, what, odata_filter, build in ((DISK_PRICES, "Storage", STORAGE_FILTER, build_storage),
                                                (BANDWIDTH_PRICES, "Bandwidth", BANDWIDTH_FILTER, build_egress)):
            PROVIDER.enrich(ctx, name, add_query, ctx, client, batch, what, odata_filter, build, regions)
    with ctx.http_client() as client:
        azure_eviction.add_eviction_rates(ctx, client, batch,
                                          PROVIDER.enrichment(azure_eviction.EVICTION_RATES).timeout_s)
    return batch

