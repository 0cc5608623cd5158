"""Paperspace (DigitalOcean): hourly GPU machine prices from its pricing page.

https://www.paperspace.com/pricing is a Webflow page: its machine cards and prices are in the
served HTML (an hourly/monthly toggle only shows or hides price blocks already there), so a
plain scrapy spider crawls it in a child process.

The page (the classes a public scraper of this page selects on): the machine cards are
`.instance-type-holder-flex` elements inside `.instance-container-flex`; each card names its
machine in `h1.instance-names` ("H100", "A100-80G", "A4000") and has one
`.instance-price-wrap` per billing period, the amount in `h1.instance-price-2` ("3.09", or
"2.24*" with a footnote marker); the wrap the toggle hides carries the class `hide`. The
visible, hourly wrap is read; a hidden monthly-subscription price is a different product (a
flat monthly fee) and is noted, not loaded.

A price with a footnote marker ("*" 3-year commitment, "**" special promo price) is not an
on-demand list price: it is noted and not loaded. CPU machines ("C1", "C10") share the card
markup and are counted in the notes. The machine names are GPU names (the older ones Quadro
cards: P6000, RTX5000, M4000, ...), mapped through gpu_aliases; a name the reference lacks is
quarantined, never guessed. The page prices one machine with one GPU and names no region:
region "global".

`fetch` does the I/O; `parse_pricing_page` (page -> rows) and `build_batch` (rows -> Batch)
are pure.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable

from parsel import Selector
from scrapy.http import Response

from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.items import GPU, PageRow, PriceTextError, clean_text, price_unit, slug, usd_price
from gpuledger.spiders.page_source import LayoutChanged, PricingSpider, fetch_page, raw_row
from gpuledger.spiders.page_source import scrape as scrape_page
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult

NAME = "paperspace"
HOST = "www.paperspace.com"
PRICING_PATH = "/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
VM_BILLING_DOC = "https://support.paperspace.com/hc/en-us/articles/360057895553-Virtual-Machine-Billing-Overview"
HOURLY_DOC = "https://support.paperspace.com/hc/en-us/articles/360059200753-CORE-Hourly-Subscription"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="Paperspace (DigitalOcean)",
        kind="gpu_cloud",
        billing_granularity_s=3600,
        minimum_charge_s=None,
        billing_notes="Hourly machines are billed an hourly utilization rate plus a monthly access and storage "
                      "fee (from $5/month for 50 GB) until deactivated; 3600 s is the rate's documented unit, a "
                      "finer billing increment is not verified.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A machine that is off stops utilization billing; its monthly access and storage "
                              "fee is billed until the machine is deactivated.",
        access_ssh=True,
        access_docker=None,
        access_jupyter=True,
        multinode_interconnect=None,
        interruptible_offer=None,
        price_source="pricing page https://www.paperspace.com/pricing (scrapy spider, server-rendered Webflow HTML)",
        source_urls=[PAGE_URL, VM_BILLING_DOC, HOURLY_DOC],
    ),
)


# -- the page: rows as printed ----------------------------------------------------------------------

CARD = "instance-type-holder-flex"
CPU_MACHINE = re.compile(r"^C[0-9]+$")


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def _text(sel: Selector) -> str:
    return clean_text(" ".join(sel.xpath(".//text()").getall()))


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """One row per machine card: the visible (hourly) price, and a hidden monthly price as a cell."""
    page = response.selector if isinstance(response, Response) else response
    cards = page.xpath(f"//*[{_has_class('instance-container-flex')}]//*[{_has_class(CARD)}]")
    if not cards:
        raise LayoutChanged(f"the machine price list has no rows (no .instance-container-flex .{CARD} cards)")
    rows: list[PageRow] = []
    for index, card in enumerate(cards):
        name = clean_text(" ".join(card.xpath(".//h1[" + _has_class("instance-names") + "]//text()").getall()))
        cells: dict[str, str] = {}
        for wrap in card.xpath(f".//*[{_has_class('instance-price-wrap')}]"):
            key = "hidden price" if "hide" in (wrap.attrib.get("class") or "").split() else "price"
            cells.setdefault(key, _text(wrap))
        note = card.xpath(f".//*[{_has_class('instance-note')}]")
        if note:
            cells["note"] = _text(note[0])
        rows.append(PageRow(kind=GPU, section="machines", name=name, cells=cells, price_text=cells.get("price", ""),
                            product_id=slug(name), row_index=index))
    if not any(r.name for r in rows):
        raise LayoutChanged("the machine cards have no names (h1.instance-names)")
    return rows


class PaperspacePricingSpider(PricingSpider):
    name = "paperspace_pricing"
    host = HOST
    path = PRICING_PATH
    complete_marker = b"</html>"  # the Webflow page always closes its document

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        return parse_pricing_page(response)


# -- rows -> records ------------------------------------------------------------------------------

def _hourly(text: str) -> float | None:
    price = usd_price(text)
    if price is not None and price_unit(text) != "hour":
        raise PriceTextError(f"price {text!r} is not per hour")
    return price


def gpu_fields(row: PageRow) -> dict[str, Any]:
    model, exact = canonicalize(NAME, row.name)
    return dict(
        instance_type=row.name, gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=row.name,
        gpu_vendor=model.vendor, gpu_count=1.0, gpu_memory_gb=None, gpu_memory_gb_nominal=model.memory_gb,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s, minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def add_machine(batch: Batch, row: PageRow) -> None:
    ref = f"{REGION}/{row.product_id or slug(row.name)}"
    raw = raw_row(row)
    if "hidden price" in row.cells:
        batch.notes.append(f"skipped {row.name!r} monthly subscription price: a flat monthly fee, not an hourly "
                           f"rate ({row.cells['hidden price']})")
    if not row.price_text:
        batch.quarantine("offer", ref, "layout: the card shows no price (.instance-price-wrap)", raw)
        return
    marker = re.search(r"[0-9](\*+)", row.price_text)
    if marker:
        batch.notes.append(f"skipped {row.name!r}: price {row.price_text!r} carries the footnote "
                           f"{marker.group(1)!r} ({row.cells.get('note') or 'a special term'}), not an on-demand "
                           "list price")
        return
    try:
        price = _hourly(row.price_text)
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw)
        return
    if price is None:
        batch.notes.append(f"skipped {row.name!r}: no public price ({row.price_text})")
        return
    try:
        fields = gpu_fields(row)
    except UnknownGPUError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    batch.offer(ref, raw, region=REGION, zone="", purchase_option="on_demand", price_per_hour=price,
                source_currency="USD", source_price_per_hour=price,
                provider_data=json.dumps({"price_text": row.price_text, "price_basis": "per machine per hour"},
                                         sort_keys=True), **fields)


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped machine cards -> on-demand offers (pure)."""
    batch = Batch(NAME)
    cpu = [r.name for r in rows if CPU_MACHINE.match(r.name)]
    if cpu:
        batch.notes.append(f"{len(cpu)} CPU-only machines skipped ({', '.join(cpu)})")
    for row in rows:
        if not CPU_MACHINE.match(row.name):
            add_machine(batch, row)
    return batch


def scrape(ctx: SourceContext) -> CrawlResult:
    return scrape_page(ctx, PaperspacePricingSpider)


def fetch(ctx: SourceContext) -> Batch:
    """Crawl the pricing page (child process) and normalize its machine cards."""
    return fetch_page(ctx, PaperspacePricingSpider, build_batch)
