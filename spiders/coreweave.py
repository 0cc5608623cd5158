"""CoreWeave: GPU instance prices (on-demand and spot), storage and egress from its pricing page.

CoreWeave publishes no price API; https://www.coreweave.com/pricing is a
server-rendered page, crawled by a scrapy spider (spiders/sites/coreweave.py)
in a child process. The page prices whole instances ("Instance Price Per Hour":
an HGX H100 instance is 8 GPUs at $49.24/h, i.e. $6.155 per GPU), so
`price_per_hour` is the instance price and `gpu_count` its GPU count. Rows that
say "Contact sales" publish no price and are skipped (noted, never priced); a
row with a spot price but no on-demand price (HGX B300) yields only its spot
offer. Region: the page's own "REGION: ..." tab, as a slug ("north-america").

`fetch` does the I/O; `build_batch` (rows -> Batch) is pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.items import (
    GPU,
    NETWORK,
    STORAGE,
    PriceRow,
    PriceTextError,
    clean_text,
    is_free,
    is_no_price,
    parse_money,
    parse_number,
    price_unit,
    slug,
    usd_per_gb_month,
    usd_price,
)
from gpuledger.spiders.runner import CrawlResult, crawl
from gpuledger.spiders.runner import prestart as prestart_child
from gpuledger.spiders.settings import crawl_settings
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "coreweave"
HOST = "www.coreweave.com"
PRICING_PATH = "/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
SPIDER = "gpuledger.spiders.sites.coreweave:CoreWeavePricingSpider"
BILLING_DOC = "https://docs.coreweave.com/resources/billing-and-charges"
STORAGE_DOC = "https://docs.coreweave.com/docs/pricing/pricing-storage"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="CoreWeave",
        kind="gpu_cloud",
        billing_granularity_s=60,
        minimum_charge_s=0,
        billing_notes="Billing and resource consumption are calculated per minute, with no minimum charge; "
                      "a GPU instance's hourly price includes its vCPUs, RAM and ephemeral local storage.",
        storage_persists_when_stopped=None,
        stopped_billing_notes="Workloads run on Kubernetes (CKS): there is no stopped-instance state; compute "
                              "billing ends when the instance is released. Storage billing while idle not verified.",
        access_ssh=None,
        access_docker=True,
        access_jupyter=None,
        multinode_interconnect=None,
        interruptible_offer="Spot instances (preemptible), priced on the pricing page",
        price_source="pricing page https://www.coreweave.com/pricing (scrapy spider, server-rendered HTML)",
        source_urls=[PAGE_URL, BILLING_DOC, STORAGE_DOC],
    ),
)

# Multi-GPU systems whose GPUs talk over NVSwitch/NVLink switch trays, by the page's naming.
_SWITCHED = re.compile(r"\bHGX\b|\bNVL\d+\b", re.I)


def region_code(section: str) -> str:
    """'REGION: NORTH AMERICA' -> 'north-america'; no region tag -> 'global'."""
    label = re.sub(r"^\s*region\s*:\s*", "", clean_text(section), flags=re.I)
    return slug(label) or "global"


def _column(cells: dict[str, str], prefix: str) -> str | None:
    for label, text in cells.items():
        if label.lower().startswith(prefix):
            return text
    return None


def _number(cells: dict[str, str], prefix: str) -> float | None:
    text = _column(cells, prefix)
    return parse_number(text) if text is not None else None


def _is_hourly(row: PriceRow) -> bool:
    price_labels = [label for label in row.cells if "price" in label.lower()]
    words = " ".join(price_labels + [row.cells[label] for label in price_labels])
    return price_unit(words) == "hour" or bool(re.search(r"per\s+hour", words, re.I))


def gpu_fields(row: PriceRow) -> dict[str, Any]:
    """Offer fields shared by a row's on-demand and spot offers; ValueError/UnknownGPUError -> quarantine."""
    count = _number(row.cells, "gpu count")
    if not count or count <= 0:
        raise ValueError(f"no GPU count in {row.cells!r}")
    vram_gb = _number(row.cells, "vram")
    model, exact = canonicalize(NAME, row.name, vram_gb * 1024 if vram_gb else None)
    disk_tb = _number(row.cells, "local storage")
    interconnect = None
    if count > 1:
        interconnect = "NVSwitch" if _SWITCHED.search(row.name) else ("PCIe" if model.form_factor == "PCIe" else None)
    return dict(
        instance_type=f"{count:g}x {row.name}",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=row.name, gpu_vendor=model.vendor,
        gpu_count=count, gpu_memory_gb=vram_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=vram_gb * count if vram_gb else None,
        vcpus=_number(row.cells, "vcpu"), ram_gb=_number(row.cells, "system ram"),
        local_disk_gb=disk_tb * 1000 if disk_tb else None, interconnect=interconnect,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _provider_data(row: PriceRow, shown: str) -> str:
    data = {"product_id": row.product_id, "page_section": row.section, "price_text": shown,
            "footnotes": row.footnotes, "price_basis": "per instance per hour"}
    return json.dumps(data, sort_keys=True)


def add_gpu_row(batch: Batch, row: PriceRow) -> None:
    region = region_code(row.section)
    ref = f"{region}/{row.product_id or row.name}"
    raw = row.to_dict()
    raw.pop("source_url", None)
    try:
        on_demand = usd_price(row.price_text)
        spot = usd_price(row.spot_text) if row.spot_text else None
        if not _is_hourly(row):
            raise PriceTextError(f"price column {list(row.cells)!r} does not say the price is per hour")
        fields = gpu_fields(row)
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw)
        return
    except (UnknownGPUError, ValueError) as err:
        if on_demand is None and not row.spot_text:
            batch.notes.append(f"skipped {row.name!r}: no public price ({row.price_text})")
            return
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    if on_demand is None:
        batch.notes.append(f"skipped {row.name!r} on-demand: no public price ({row.price_text})")
    else:
        batch.offer(ref, raw, region=region, zone="", purchase_option="on_demand",
                    price_per_hour=on_demand, source_currency="USD", source_price_per_hour=on_demand,
                    provider_data=_provider_data(row, row.price_text), **fields)
    if spot is not None:
        saving = round(100 * (1 - spot / on_demand), 1) if on_demand else None
        batch.offer(f"{ref}/spot", raw, region=region, zone="", purchase_option="spot",
                    price_per_hour=spot, source_currency="USD", source_price_per_hour=spot,
                    spot_savings_pct=saving, provider_data=_provider_data(row, row.spot_text), **fields)
    elif row.spot_text and is_no_price(row.spot_text):
        batch.notes.append(f"skipped {row.name!r} spot: no public price ({row.spot_text})")


def add_storage_row(batch: Batch, row: PriceRow, regions: list[str]) -> None:
    raw = row.to_dict()
    raw.pop("source_url", None)
    try:
        price = usd_per_gb_month(row.price_text)
    except PriceTextError as err:
        batch.quarantine("storage", row.name, f"price: {err}", raw)
        return
    if price is None:
        batch.notes.append(f"skipped storage {row.name!r}: no public price ({row.price_text})")
        return
    description = "; ".join(filter(None, [row.name, row.cells.get("note"), f"{row.price_text} ({STORAGE_DOC})"]))
    for region in regions:
        batch.add("storage", f"{region}/{row.name}", raw, region=region, storage_class=slug(row.name),
                  usd_per_gb_month=price[0], source_currency=price[1], source_usd_per_gb_month=price[0],
                  description=description)


def add_network_row(batch: Batch, row: PriceRow, regions: list[str]) -> None:
    """Only data-transfer-out rows become egress records; IPs and cross-connects are out of scope."""
    if not re.search(r"\begress\b", row.name, re.I):
        return
    raw = row.to_dict()
    raw.pop("source_url", None)
    if is_free(row.price_text):
        usd = 0.0
    else:
        try:
            money = parse_money(row.price_text)
        except PriceTextError as err:
            batch.quarantine("egress", row.name, f"price: {err}", raw)
            return
        if money is None or price_unit(row.price_text) != "gb" or money[1] != "USD":
            batch.quarantine("egress", row.name, f"egress price {row.price_text!r} is not USD per GB", raw)
            return
        usd = money[0]
    for region in regions:
        batch.add("egress", f"{region}/internet", raw, region=region, destination="internet", tier_start_gb=0.0,
                  tier_end_gb=None, usd_per_gb=usd, source_currency="USD", source_usd_per_gb=usd,
                  description=f"{row.name}: {row.price_text} ({PAGE_URL}; {BILLING_DOC})")


def build_batch(rows: list[PriceRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure)."""
    batch = Batch(NAME)
    gpu_rows = [r for r in rows if r.kind == GPU]
    regions = sorted({region_code(r.section) for r in gpu_rows}) or ["global"]
    for row in gpu_rows:
        add_gpu_row(batch, row)
    for row in rows:
        if row.kind == STORAGE:
            add_storage_row(batch, row, regions)
        elif row.kind == NETWORK:
            add_network_row(batch, row, regions)
    return batch


def prestart() -> None:
    """Start the crawl child ahead of the crawl (spiders.runner.prestart)."""
    prestart_child(SPIDER)


def scrape(ctx: SourceContext) -> CrawlResult:
    return crawl(ctx, SPIDER, HOST, PRICING_PATH, crawl_settings(ctx))


def fetch(ctx: SourceContext) -> Batch:
    """Crawl the pricing page (child process) and normalize its rows."""
    result = scrape(ctx)
    rows = [PriceRow.from_dict(item) for item in result.items]
    batch = build_batch(rows)
    if not batch.offers:
        reasons = sorted({q.reason for q in batch.quarantined})[:3]
        raise SourceError(f"{NAME}: {PAGE_URL} gave {sum(r.kind == GPU for r in rows)} GPU rows but no valid "
                          f"priced offer (quarantined: {reasons or 'none'})")
    return batch
