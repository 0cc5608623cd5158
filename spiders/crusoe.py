"""Crusoe Cloud: per-GPU on-demand and spot prices, and storage, from its pricing page.

Crusoe's API (api.crusoecloud.com, HMAC-signed) lists instance types and capacity but no
prices; https://www.crusoe.ai/cloud/pricing is the price source. It is a server-rendered
Webflow page (the prices are in the served HTML; no script renders them), crawled by a plain
scrapy spider in a child process.

The page (Webflow CMS lists; the classes public scrapers of this page select on): each
section is a `.pricing-dd` with an `h3.pricing-col-heading` ("GPU instances pricing",
"Storage pricing", ...) and a `.pricing-gap` table. Its `.pricing-table-heading` holds the
column labels as `.pricing-heading` cells ("GPU model", "On-demand", "Current spot"); each
row is a `.pricing_gpu-item` with the model in `h4.pricing-item-heading`, its memory and
form factor as `.pricing-tag` chips ("80GB", "SXM"; an empty chip carries
`w-dyn-bind-empty`), and one `.pricing-rich` rich-text cell per price column:
"$3.90/GPU-hr" or a "Contact sales" link. Two rows can share a heading ("NVIDIA A100"
80GB SXM and 80GB PCIe): the chips tell them apart, so the row's identity is heading + chips.
Elements Webflow hides by a condition (`w-condition-invisible`) are not shown to a reader and
are not read.

Prices are per GPU per hour, one price list for every region (the page names none), so an
offer is one GPU in region "global". "Contact sales" publishes no price: that row/column is
skipped and noted, never priced. The CPU, Kubernetes, inference and fine-tuning tables share
the row markup but are out of scope: only the table whose first column is "GPU model" and the
one whose first column is "Storage" are read.

`fetch` does the I/O; `parse_pricing_page` (page -> rows) and `build_batch` (rows -> Batch)
are pure.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable

from parsel import Selector, SelectorList
from scrapy.http import Response

from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.items import GPU, STORAGE, PageRow, PriceTextError, clean_text, price_unit, slug, usd_price
from gpuledger.spiders.page_source import LayoutChanged, PricingSpider, add_storage, fetch_page, raw_row
from gpuledger.spiders.page_source import scrape as scrape_page
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult

NAME = "crusoe"
HOST = "www.crusoe.ai"
PRICING_PATH = "/cloud/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
USAGE_DOC = "https://docs.crusoecloud.com/usage-billing/viewing-usage"
STOPPED_DOC = "https://support.crusoecloud.com/hc/en-us/articles/48176498638235-FAQ-Billing-for-VMs-in-ERROR-States"
INFINIBAND_DOC = "https://docs.crusoecloud.com/networking/infiniband/managing-infiniband-networks/index.html"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="Crusoe Cloud",
        kind="gpu_cloud",
        billing_granularity_s=3600,
        minimum_charge_s=None,
        billing_notes="The pricing page quotes per GPU-hour ('Pay by the hour') and the usage docs track VM "
                      "usage in instance-hours and disks in GiB-hours; a finer billing increment or a minimum "
                      "charge is not documented, so 3600 s is the documented unit, not a verified increment.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped VM is not billed (only RUNNING is billable); disks are accounted in "
                              "GiB-hours while they exist. A VM under an instance commitment bills while stopped.",
        access_ssh=True,
        access_docker=None,
        access_jupyter=None,
        multinode_interconnect="InfiniBand (NVIDIA Quantum-2 NDR) on the *-sxm-ib.8x instance types "
                               "(A100/H100/H200 SXM, 8 HCAs per instance), in IB partitions",
        interruptible_offer="Spot ('Current spot' column of the pricing page; 'Contact sales' where unpriced)",
        price_source="pricing page https://www.crusoe.ai/cloud/pricing (scrapy spider, server-rendered Webflow HTML)",
        source_urls=[PAGE_URL, USAGE_DOC, STOPPED_DOC, INFINIBAND_DOC],
    ),
)


# -- the page: rows as printed ----------------------------------------------------------------------

TABLE = ".pricing-gap"
GPU_FIRST_COLUMN = "gpu model"
STORAGE_FIRST_COLUMN = "storage"


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


# An element is shown unless it or an ancestor is hidden by a Webflow visibility condition.
_SHOWN = f"not(ancestor-or-self::*[{_has_class('w-condition-invisible')}])"


def _shown(sel: Selector | SelectorList, cls: str) -> SelectorList:
    return sel.xpath(f".//*[{_has_class(cls)} and {_SHOWN}]")


def _text(sel: Selector) -> str:
    return clean_text(" ".join(sel.xpath(".//text()").getall()))


def _section(table: Selector) -> str:
    heading = table.xpath("preceding::h3[1]")
    return _text(heading[0]) if heading else ""


def _labels(table: Selector) -> list[str]:
    heading = _shown(table, "pricing-table-heading")
    return [_text(cell) for cell in _shown(heading[0], "pricing-heading")] if heading else []


def _price_cells(item: Selector) -> list[str]:
    """The texts of a row's own price cells (a `<br/>` or second `<p>` joins with a space)."""
    return [_text(cell) for cell in item.xpath(f"./*[{_has_class('pricing-rich')} and {_SHOWN}]")]


def _row(item: Selector, labels: list[str], section: str, kind: str, index: int) -> PageRow:
    name = clean_text(" ".join(_text(h) for h in item.xpath(f".//h4[{_SHOWN}]")))
    tags = [t for t in (_text(tag) for tag in _shown(item, "pricing-tag")) if t]
    prices = _price_cells(item)
    cells = {"tags": " ".join(tags)} if tags else {}
    cells.update(zip(labels[1:], prices))
    if len(prices) != len(labels) - 1:
        cells["_layout"] = f"{len(prices)} price cells under the columns {labels[1:]!r}"
    return PageRow(kind=kind, section=section, name=name, cells=cells, product_id=slug(" ".join([name, *tags])),
                   row_index=index)


def _column(labels: list[str], word: str) -> str | None:
    return next((label for label in labels[1:] if word in label.lower()), None)


def parse_gpu_rows(page: Selector) -> list[PageRow]:
    """GPU rows, their on-demand and spot texts as printed."""
    rows: list[PageRow] = []
    gpu_tables = 0
    for table in page.xpath(f"//*[{_has_class('pricing-gap')} and {_SHOWN}]"):
        labels = _labels(table)
        if not labels or labels[0].lower() != GPU_FIRST_COLUMN:
            continue
        gpu_tables += 1
        on_demand, spot = _column(labels, "on-demand"), _column(labels, "spot")
        if on_demand is None:
            raise LayoutChanged(f"the GPU price table's columns {labels!r} have no 'On-demand' column")
        section = _section(table)
        for index, item in enumerate(_shown(table, "pricing_gpu-item")):
            row = _row(item, labels, section, GPU, index)
            row.price_text = row.cells.get(on_demand, "")
            row.spot_text = row.cells.get(spot, "") if spot else ""
            rows.append(row)
    if not gpu_tables:
        raise LayoutChanged("no GPU price table (a .pricing-gap whose first column is 'GPU model') on the page")
    if not rows:
        raise LayoutChanged("the GPU price table has no rows (.pricing_gpu-item)")
    return rows


def parse_storage_rows(page: Selector) -> list[PageRow]:
    rows: list[PageRow] = []
    for table in page.xpath(f"//*[{_has_class('pricing-gap')} and {_SHOWN}]"):
        labels = _labels(table)
        if not labels or labels[0].lower() != STORAGE_FIRST_COLUMN:
            continue
        section = _section(table)
        for index, item in enumerate(_shown(table, "pricing_gpu-item")):
            row = _row(item, labels + ["Price"], section, STORAGE, index)
            row.price_text = row.cells.get("Price", "")
            rows.append(row)
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """The GPU and storage rows of the page; LayoutChanged when the GPU table is gone or empty."""
    page = response.selector if isinstance(response, Response) else response
    return parse_gpu_rows(page) + parse_storage_rows(page)


class CrusoePricingSpider(PricingSpider):
    name = "crusoe_pricing"
    host = HOST
    path = PRICING_PATH
    complete_marker = b"</html>"  # the Webflow page always closes its document

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        return parse_pricing_page(response)


# -- rows -> records ------------------------------------------------------------------------------

# Form-factor chips, as the page prints them, and what they say about the GPUs' link.
_SWITCHED_FORMS = {"HGX", "SXM", "NVL72"}


def _memory_gb(tags: str) -> float | None:
    m = re.search(r"\b([0-9]+(?:\.[0-9]+)?)\s*GB\b", tags, re.I)
    return float(m.group(1)) if m else None


def _form(tags: str) -> str:
    return " ".join(t for t in tags.split() if not re.fullmatch(r"[0-9.]+\s*GB", t, re.I))


def gpu_fields(row: PageRow) -> dict[str, Any]:
    """Offer fields for one GPU of the row; UnknownGPUError for a name the canon lacks."""
    tags = row.cells.get("tags", "")
    memory_gb = _memory_gb(tags)
    form = _form(tags)
    reported = " ".join(filter(None, [row.name, form]))
    model, exact = canonicalize(NAME, reported, memory_gb * 1024 if memory_gb else None)
    return dict(
        instance_type=f"1x {' '.join(filter(None, [row.name, tags]))}", gpu_model=model.gpu_model,
        gpu_variant_exact=exact, gpu_name_reported=reported, gpu_vendor=model.vendor, gpu_count=1.0,
        gpu_memory_gb=memory_gb, gpu_memory_gb_nominal=model.memory_gb, total_gpu_memory_gb=memory_gb,
        interconnect="NVSwitch" if form.upper() in _SWITCHED_FORMS else None,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _hourly(text: str) -> float | None:
    price = usd_price(text)
    if price is not None and price_unit(text) != "hour" and not re.search(r"/\s*GPU[- ]h(ou)?r\b", text, re.I):
        raise PriceTextError(f"price {text!r} is not per GPU-hour")
    return price


def _provider_data(row: PageRow, shown: str) -> str:
    return json.dumps({"page_section": row.section, "tags": row.cells.get("tags", ""), "price_text": shown,
                       "price_basis": "per GPU per hour"}, sort_keys=True)


def add_gpu_row(batch: Batch, row: PageRow) -> None:
    ref = f"{REGION}/{row.product_id or slug(row.name)}"
    raw = raw_row(row)
    if "_layout" in row.cells:
        batch.quarantine("offer", ref, f"layout: {row.cells['_layout']}", raw)
        return
    try:
        on_demand = _hourly(row.price_text)
        spot = _hourly(row.spot_text) if row.spot_text else None
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw)
        return
    if on_demand is None and spot is None:
        batch.notes.append(f"skipped {row.name} {row.cells.get('tags', '')}: no public price "
                           f"(on-demand {row.price_text!r}, spot {row.spot_text or 'not shown'!r})")
        return
    try:
        fields = gpu_fields(row)
    except UnknownGPUError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    if on_demand is None:
        batch.notes.append(f"skipped {row.name} {row.cells.get('tags', '')} on-demand: no public price "
                           f"({row.price_text})")
    else:
        batch.offer(ref, raw, region=REGION, zone="", purchase_option="on_demand", price_per_hour=on_demand,
                    source_currency="USD", source_price_per_hour=on_demand,
                    provider_data=_provider_data(row, row.price_text), **fields)
    if spot is not None:
        saving = round(100 * (1 - spot / on_demand), 1) if on_demand else None
        batch.offer(f"{ref}/spot", raw, region=REGION, zone="", purchase_option="spot", price_per_hour=spot,
                    source_currency="USD", source_price_per_hour=spot, spot_savings_pct=saving,
                    provider_data=_provider_data(row, row.spot_text), **fields)
    elif row.spot_text:
        batch.notes.append(f"skipped {row.name} {row.cells.get('tags', '')} spot: no public price ({row.spot_text})")


def storage_description(row: PageRow) -> str:
    unit = " (per GiB converted to per GB: / 1.073741824)" if price_unit(row.price_text) == "gib_month" else ""
    return f"{row.name}: {row.price_text}{unit} ({PAGE_URL})"


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> per-GPU offers and storage records (pure)."""
    batch = Batch(NAME)
    for row in rows:
        if row.kind == GPU:
            add_gpu_row(batch, row)
        elif row.kind == STORAGE:
            add_storage(batch, row, [REGION], storage_description(row))
    return batch


def scrape(ctx: SourceContext) -> CrawlResult:
    return scrape_page(ctx, CrusoePricingSpider)


def fetch(ctx: SourceContext) -> Batch:
    """Crawl the pricing page (child process) and normalize its rows."""
    return fetch_page(ctx, CrusoePricingSpider, build_batch)
