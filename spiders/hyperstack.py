"""Hyperstack (NexGen Cloud): per-GPU on-demand and spot prices, storage and egress from its pricing page.

https://www.hyperstack.cloud/gpu-pricing is crawled with a real browser
(scrapy-playwright driving headless Chromium, spiders/sites/hyperstack.py): the
price rows are rendered by the page's script, so the HTML as served holds empty
tables. Hyperstack's price API (Infrahub pricebook) needs an API key; the page
does not.

The page prices *per GPU per hour* ("NVIDIA H100 SXM ... $3.20/hr"), and lists
the maximum pCPUs and RAM a VM gets per GPU: each row becomes a one-GPU offer
("1x NVIDIA H100 SXM", gpu_count 1), with those maxima as vcpus/ram_gb (marked
as maxima in provider_data). Multi-GPU VMs cost the same per GPU. Reserved
prices are committed terms, out of scope. The page names no region (Hyperstack
runs CANADA-1, NORWAY-1 and US-1): region "global".

`fetch` does the I/O; `build_batch` (rows -> Batch) is pure.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.browser import find_chromium
from gpuledger.spiders.items import (
    GPU,
    NETWORK,
    STORAGE,
    PriceRow,
    PriceTextError,
    is_free,
    parse_number,
    price_unit,
    slug,
    usd_per_gb_month,
    usd_price,
)
from gpuledger.spiders.runner import CrawlResult, crawl
from gpuledger.spiders.runner import prestart as prestart_child
from gpuledger.spiders.settings import browser_settings
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "hyperstack"
HOST = "www.hyperstack.cloud"
PRICING_PATH = "/gpu-pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
SPIDER = "gpuledger.spiders.sites.hyperstack:HyperstackPricingSpider"
REGION = "global"
BILLING_DOC = "https://docs.hyperstack.cloud/docs/billing/states-and-billing"
SPOT_DOC = "https://docs.hyperstack.cloud/docs/virtual-machines/spot"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    needs_browser=True,  # the price table is rendered by the page's JavaScript
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="Hyperstack (NexGen Cloud)",
        kind="gpu_cloud",
        billing_granularity_s=60,
        minimum_charge_s=None,
        billing_notes="Billed per minute; the pricing page quotes rates per GPU per hour.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A SHUTOFF VM keeps billing at the full rate; a HIBERNATED VM bills only its "
                              "root disk and public IP.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=None,
        multinode_interconnect=None,
        interruptible_offer="Spot VMs (can be reclaimed at any time)",
        price_source="pricing page https://www.hyperstack.cloud/gpu-pricing (JavaScript-rendered; "
                     "headless Chromium via scrapy-playwright)",
        source_urls=[PAGE_URL, BILLING_DOC, SPOT_DOC],
    ),
)


def _cell(cells: dict[str, str], prefix: str) -> float | None:
    for label, text in cells.items():
        if label.lower().startswith(prefix):
            return parse_number(text)
    return None


def _interconnect(name: str) -> str | None:
    """The intra-node link the product name states (the VMs' multi-GPU shapes use it)."""
    if re.search(r"\bSXM\b", name, re.I):
        return "NVSwitch"
    if re.search(r"\bNVLink\b", name, re.I):
        return "NVLink"
    return None


def gpu_fields(name: str, specs: dict[str, str]) -> dict[str, Any]:
    """Offer fields for one GPU of `name`; `specs` are the on-demand row's cells (VRAM, maxima)."""
    vram_gb = _cell(specs, "vram")
    model, exact = canonicalize(NAME, name, vram_gb * 1024 if vram_gb else None)
    return dict(
        instance_type=f"1x {name}", gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=name,
        gpu_vendor=model.vendor, gpu_count=1.0, gpu_memory_gb=vram_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=vram_gb, vcpus=_cell(specs, "max pcpus"), ram_gb=_cell(specs, "max ram"),
        interconnect=_interconnect(name),
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _hourly(text: str) -> float | None:
    price = usd_price(text)
    if price is not None and price_unit(text) != "hour":
        raise PriceTextError(f"price {text!r} is not per hour")
    return price


def _raw(row: PriceRow) -> dict[str, Any]:
    raw = row.to_dict()
    raw.pop("source_url", None)
    return raw


def _provider_data(row: PriceRow, shown: str) -> str:
    return json.dumps({"page_section": row.section, "price_text": shown, "price_basis": "per GPU per hour",
                       "vcpus_ram_are_maxima_per_gpu": True}, sort_keys=True)


def add_gpu_row(batch: Batch, row: PriceRow, specs_by_name: dict[str, dict[str, str]],
                on_demand: dict[str, float]) -> None:
    spot = bool(row.spot_text)
    option = "spot" if spot else "on_demand"
    shown = row.spot_text if spot else row.price_text
    ref = f"{REGION}/{row.name}/{option}"
    try:
        price = _hourly(shown)
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", _raw(row))
        return
    if price is None:
        batch.notes.append(f"skipped {row.name!r} {option}: no public price ({shown})")
        return
    try:
        fields = gpu_fields(row.name, specs_by_name.get(row.name, row.cells))
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", ref, f"gpu: {err}", _raw(row))
        return
    base = on_demand.get(row.name) if spot else None
    ok = batch.offer(ref, _raw(row), region=REGION, zone="", purchase_option=option, price_per_hour=price,
                     source_currency="USD", source_price_per_hour=price,
                     spot_savings_pct=round(100 * (1 - price / base), 1) if base else None,
                     provider_data=_provider_data(row, shown), **fields)
    if ok and not spot:
        on_demand.setdefault(row.name, price)  # a repeated row is quarantined by the loader, which keeps the first


def add_storage_row(batch: Batch, row: PriceRow) -> None:
    try:
        price = usd_per_gb_month(row.price_text)
    except PriceTextError as err:
        batch.quarantine("storage", row.name, f"price: {err}", _raw(row))
        return
    if price is None:
        batch.notes.append(f"skipped storage {row.name!r}: no public price ({row.price_text})")
        return
    hourly = " (per GB-hour x 730 h)" if price_unit(row.price_text) == "gb_hour" else ""
    batch.add("storage", f"{REGION}/{row.name}", _raw(row), region=REGION, storage_class=slug(row.name),
              usd_per_gb_month=price[0], source_currency=price[1], source_usd_per_gb_month=price[0],
              description=f"{row.name}: {row.price_text}{hourly} ({PAGE_URL})")


def add_network_row(batch: Batch, row: PriceRow) -> None:
    """Only data transfer out becomes an egress record; public IPs are out of scope."""
    if not re.search(r"\begress\b", row.name, re.I):
        return
    if not is_free(row.price_text):
        batch.quarantine("egress", row.name, f"egress price {row.price_text!r} is not a free/flat rate we parse",
                         _raw(row))
        return
    batch.add("egress", f"{REGION}/internet", _raw(row), region=REGION, destination="internet", tier_start_gb=0.0,
              tier_end_gb=None, usd_per_gb=0.0, source_currency="USD", source_usd_per_gb=0.0,
              description=f"{row.name}: {row.price_text} ({PAGE_URL})")


def build_batch(rows: list[PriceRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure). On-demand rows come first on the page."""
    batch = Batch(NAME)
    gpu_rows = [r for r in rows if r.kind == GPU]
    specs_by_name: dict[str, dict[str, str]] = {}
    for r in gpu_rows:
        if not r.spot_text:
            specs_by_name.setdefault(r.name, r.cells)  # the first row of a name, as the loader keeps
    on_demand: dict[str, float] = {}
    for row in sorted(gpu_rows, key=lambda r: bool(r.spot_text)):
        add_gpu_row(batch, row, specs_by_name, on_demand)
    for row in rows:
        if row.kind == STORAGE:
            add_storage_row(batch, row)
        elif row.kind == NETWORK:
            add_network_row(batch, row)
    return batch


def render_timeout_s(ctx: SourceContext) -> float:
    """How long to wait for the script to render rows (a missing table fails after this)."""
    return ctx.config.hyperstack_render_timeout_s or (10.0 if ctx.mode == "replay" else 30.0)


def prestart() -> None:
    """Start the crawl child ahead of the crawl, Playwright's handler imported (spiders.runner.prestart)."""
    prestart_child(SPIDER, preload=("scrapy_playwright.handler",))


def scrape(ctx: SourceContext) -> CrawlResult:
    settings = browser_settings(ctx, find_chromium(ctx))
    return crawl(ctx, SPIDER, HOST, PRICING_PATH, settings,
                 spider_args={"render_timeout_s": str(render_timeout_s(ctx))})


def fetch(ctx: SourceContext) -> Batch:
    """Render the pricing page in Chromium (child process) and normalize its rows."""
    result = scrape(ctx)
    rows = [PriceRow.from_dict(item) for item in result.items]
    batch = build_batch(rows)
    if not batch.offers:
        reasons = sorted({q.reason for q in batch.quarantined})[:3]
        raise SourceError(f"{NAME}: {PAGE_URL} gave {sum(r.kind == GPU for r in rows)} GPU rows but no valid "
                          f"priced offer (quarantined: {reasons or 'none'})")
    return batch
