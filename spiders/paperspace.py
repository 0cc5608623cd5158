"""Paperspace (DigitalOcean): hourly GPU machine prices from its pricing page.

https://www.paperspace.com/pricing is server-rendered Webflow, one card per machine: its visible hourly price is
read; a hidden monthly price, a footnoted price ("*" 3-year term, "**" promo) and CPU machines ("C1") are noted.
A card is one GPU, no memory stated, region "global".
"""

from __future__ import annotations

import json
import re
from functools import partial

from parsel import Selector
from scrapy.http import Response

from gpuledger.spiders.items import GPU, PageRow, slug, usd_per_hour
from gpuledger.spiders.page_source import LayoutChanged, PricingSpider, fetch_page, has_class, page_spec, read_price
from gpuledger.spiders.page_source import text_of
from gpuledger.warehouse.records import Batch

NAME = "paperspace"
HOST = "www.paperspace.com"
PRICING_PATH = "/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
VM_BILLING_DOC = "https://support.paperspace.com/hc/en-us/articles/360057895553-Virtual-Machine-Billing-Overview"
HOURLY_DOC = "https://support.paperspace.com/hc/en-us/articles/360059200753-CORE-Hourly-Subscription"

PROVIDER = page_spec(
    NAME, display_name="Paperspace (DigitalOcean)", kind="gpu_cloud", billing_granularity_s=3600,
    billing_notes="Hourly machines are billed an hourly utilization rate plus a monthly access and storage "
                  "fee (from $5/month for 50 GB) until deactivated; 3600 s is the rate's documented unit, a "
                  "finer billing increment is not verified.",
    storage_persists_when_stopped=True, access_ssh=True, access_jupyter=True,
    stopped_billing_notes="A machine that is off stops utilization billing; its monthly access and storage "
                          "fee is billed until the machine is deactivated.",
    price_source="pricing page https://www.paperspace.com/pricing (scrapy spider, server-rendered Webflow HTML)",
    source_urls=[PAGE_URL, VM_BILLING_DOC, HOURLY_DOC],
)

CARD = "instance-type-holder-flex"
CPU_MACHINE = re.compile(r"^C[0-9]+$")


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """One row per machine card: the visible (hourly) price, and a hidden monthly price as a cell."""
    cards = response.xpath(f"//*[{has_class('instance-container-flex')}]//*[{has_class(CARD)}]")
    if not cards:
        raise LayoutChanged(f"the machine price list has no rows (no .instance-container-flex .{CARD} cards)")
    rows: list[PageRow] = []
    for index, card in enumerate(cards):
        name = text_of(card.xpath(f".//h1[{has_class('instance-names')}]"))
        cells: dict[str, str] = {}
        for wrap in card.xpath(f".//*[{has_class('instance-price-wrap')}]"):
            cells.setdefault("hidden price" if "hide" in (wrap.attrib.get("class") or "").split() else "price",
                             text_of(wrap))
        note = card.xpath(f".//*[{has_class('instance-note')}]")
        if note:
            cells["note"] = text_of(note[0])
        rows.append(PageRow(kind=GPU, section="machines", name=name, cells=cells, price_text=cells.get("price", ""),
                            product_id=slug(name), row_index=index))
    if not any(r.name for r in rows):
        raise LayoutChanged("the machine cards have no names (h1.instance-names)")
    return rows


class PaperspacePricingSpider(PricingSpider):
    name, host, path = "paperspace_pricing", HOST, PRICING_PATH
    parse_rows = staticmethod(parse_pricing_page)


def add_machine(batch: Batch, row: PageRow) -> None:
    ref, raw = f"{REGION}/{row.product_id or slug(row.name)}", row.raw()
    if "hidden price" in row.cells:
        batch.notes.append(f"skipped {row.name!r} monthly subscription price: a flat monthly fee, not an hourly "
                           f"rate ({row.cells['hidden price']})")
    if not row.price_text:
        batch.quarantine("offer", ref, "layout: the card shows no price (.instance-price-wrap)", raw)
        return
    marker = re.search(r"[0-9]\s*(\*+)", row.price_text)  # "1.15<sup>**</sup>" reads "1.15 **"
    if marker:
        batch.notes.append(f"skipped {row.name!r}: price {row.price_text!r} carries the footnote "
                           f"{marker.group(1)!r} ({row.cells.get('note') or 'a special term'}), not an on-demand "
                           "list price")
        return
    price = read_price(batch, "offer", ref, row, row.price_text, usd_per_hour, repr(row.name))
    if price is None:
        return
    batch.offer(ref, raw, gpu=row.name, gpu_memory_gb=None, gpu_count=1.0, instance_type=row.name, region=REGION,
                zone="", purchase_option="on_demand", price_per_hour=price, provider_data=json.dumps(
                    {"price_text": row.price_text, "price_basis": "per machine per hour"}, sort_keys=True))


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped machine cards -> on-demand offers (pure)."""
    batch = PROVIDER.batch()
    cpu = [r.name for r in rows if CPU_MACHINE.match(r.name)]
    if cpu:
        batch.notes.append(f"{len(cpu)} CPU-only machines skipped ({', '.join(cpu)})")
    for row in rows:
        if not CPU_MACHINE.match(row.name):
            add_machine(batch, row)
    return batch


fetch = partial(fetch_page, spider=PaperspacePricingSpider, build_batch=build_batch)
