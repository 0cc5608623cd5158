"""Crusoe Cloud: per-GPU on-demand and spot prices, and storage, from its pricing page (its API lists no prices).

https://www.crusoe.ai/cloud/pricing is server-rendered Webflow, read where shown (not `w-condition-invisible`).
One per-GPU-hour list for all regions: an offer is one GPU in region "global".
"""

from __future__ import annotations

import re
from functools import partial
from typing import Iterator

from parsel import Selector, SelectorList
from scrapy.http import Response

from gpuledger.spiders.items import GPU, STORAGE, PageRow, PriceTextError, clean_text, slug, usd_per_hour
from gpuledger.spiders.page_source import LayoutChanged, PricingSpider, add_services, add_shown_prices, describe_service
from gpuledger.spiders.page_source import fetch_page, has_class, page_spec, quarantined_layout, text_of
from gpuledger.warehouse.records import Batch

NAME = "crusoe"
HOST = "www.crusoe.ai"
PRICING_PATH = "/cloud/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
USAGE_DOC = "https://docs.crusoecloud.com/usage-billing/viewing-usage"
STOPPED_DOC = "https://support.crusoecloud.com/hc/en-us/articles/48176498638235-FAQ-Billing-for-VMs-in-ERROR-States"
INFINIBAND_DOC = "https://docs.crusoecloud.com/networking/infiniband/managing-infiniband-networks/index.html"

PROVIDER = page_spec(
    NAME, display_name="Crusoe Cloud", kind="gpu_cloud", billing_granularity_s=3600,
    billing_notes="The pricing page quotes per GPU-hour ('Pay by the hour') and the usage docs track VM "
                  "usage in instance-hours and disks in GiB-hours; a finer billing increment or a minimum "
                  "charge is not documented, so 3600 s is the documented unit, not a verified increment.",
    storage_persists_when_stopped=True, access_ssh=True,
    stopped_billing_notes="A stopped VM is not billed (only RUNNING is billable); disks are accounted in "
                          "GiB-hours while they exist. A VM under an instance commitment bills while stopped.",
    multinode_interconnect="InfiniBand (NVIDIA Quantum-2 NDR) on the *-sxm-ib.8x instance types "
                           "(A100/H100/H200 SXM, 8 HCAs per instance), in IB partitions",
    interruptible_offer="Spot ('Current spot' column of the pricing page; 'Contact sales' where unpriced)",
    price_source="pricing page https://www.crusoe.ai/cloud/pricing (scrapy spider, server-rendered Webflow HTML)",
    source_urls=[PAGE_URL, USAGE_DOC, STOPPED_DOC, INFINIBAND_DOC],
)

# An element is shown unless it or an ancestor is hidden by a Webflow visibility condition.
_SHOWN = f"not(ancestor-or-self::*[{has_class('w-condition-invisible')}])"


def _shown(sel: Selector | SelectorList, cls: str) -> SelectorList:
    return sel.xpath(f".//*[{has_class(cls)} and {_SHOWN}]")


def _tables(page: Response | Selector, first_column: str) -> Iterator[tuple[list[str], str, Selector]]:
    """(column labels, section heading, table) of every shown table whose first column is `first_column`."""
    for table in page.xpath(f"//*[{has_class('pricing-gap')} and {_SHOWN}]"):
        heading = _shown(table, "pricing-table-heading")
        labels = [text_of(cell) for cell in _shown(heading[0], "pricing-heading")] if heading else []
        if labels and labels[0].lower() == first_column:
            yield labels, text_of(table.xpath("preceding::h3[1]")), table


def _rows(table: Selector, labels: list[str], section: str, kind: str, price: str, spot: str | None = None
          ) -> list[PageRow]:
    """The table's shown rows, `price` and `spot` the labels of their price columns."""
    rows = []
    for index, item in enumerate(_shown(table, "pricing_gpu-item")):
        name = clean_text(" ".join(text_of(h) for h in item.xpath(f".//h4[{_SHOWN}]")))
        tags = [t for t in (text_of(tag) for tag in _shown(item, "pricing-tag")) if t]
        # a row's own price cells: a `<br/>` or second `<p>` joins with a space
        prices = [text_of(cell) for cell in item.xpath(f"./*[{has_class('pricing-rich')} and {_SHOWN}]")]
        cells = {"tags": " ".join(tags)} if tags else {}
        cells.update(zip(labels[1:], prices))
        if len(prices) != len(labels) - 1:
            cells["_layout"] = f"{len(prices)} price cells under the columns {labels[1:]!r}"
        rows.append(PageRow(kind=kind, section=section, name=name, cells=cells, price_text=cells.get(price, ""),
                            spot_text=cells.get(spot, "") if spot else "", product_id=slug(" ".join([name, *tags])),
                            row_index=index))
    return rows


def parse_pricing_page(page: Response | Selector) -> list[PageRow]:
    """The GPU and storage rows of the page; LayoutChanged when the GPU table is gone or empty."""
    gpu_tables = list(_tables(page, "gpu model"))
    if not gpu_tables:
        raise LayoutChanged("no GPU price table (a .pricing-gap whose first column is 'GPU model') on the page")
    rows: list[PageRow] = []
    for labels, section, table in gpu_tables:
        on_demand = next((label for label in labels[1:] if "on-demand" in label.lower()), None)
        spot = next((label for label in labels[1:] if "spot" in label.lower()), None)
        if on_demand is None:
            raise LayoutChanged(f"the GPU price table's columns {labels!r} have no 'On-demand' column")
        rows += _rows(table, labels, section, GPU, on_demand, spot)
    if not rows:
        raise LayoutChanged("the GPU price table has no rows (.pricing_gpu-item)")
    for labels, section, table in _tables(page, "storage"):
        rows += _rows(table, labels + ["Price"], section, STORAGE, "Price")
    return rows


class CrusoePricingSpider(PricingSpider):
    name, host, path = "crusoe_pricing", HOST, PRICING_PATH
    parse_rows = staticmethod(parse_pricing_page)


# Form-factor chips, as the page prints them, and what they say about the GPUs' link.
_SWITCHED_FORMS = {"HGX", "SXM", "NVL72"}
_MEMORY = re.compile(r"\b([0-9]+(?:\.[0-9]+)?)\s*GB\b", re.I)  # the memory chip, '80GB' or '80 GB'
_hourly = partial(usd_per_hour, basis="per GPU-hour", also=r"/\s*GPU[- ]h(ou)?r\b")


def add_gpu_row(batch: Batch, row: PageRow) -> None:
    ref, raw, tags = f"{REGION}/{row.product_id or slug(row.name)}", row.raw(), row.cells.get("tags", "")
    if quarantined_layout(batch, "offer", ref, row):
        return
    try:
        on_demand = _hourly(row.price_text)
        spot = _hourly(row.spot_text) if row.spot_text else None
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw)
        return
    if on_demand is None and spot is None:
        batch.notes.append(f"skipped {row.name} {tags}: no public price "
                           f"(on-demand {row.price_text!r}, spot {row.spot_text or 'not shown'!r})")
        return
    memory = _MEMORY.search(tags)
    form = clean_text(_MEMORY.sub(" ", tags))  # the form-factor chips: '80GB HGX' and '80 GB HGX' are 'HGX'
    chips = _MEMORY.sub(r"\1GB", tags)  # '80 GB HGX' keeps the key '80GB HGX' of its offers
    data = {"page_section": row.section, "tags": tags, "price_basis": "per GPU per hour"}
    add_shown_prices(batch, ref, row, on_demand, spot, data, f"{row.name} {tags}",
                     gpu=" ".join(filter(None, [row.name, form])), gpu_count=1.0,
                     gpu_memory_gb=float(memory.group(1)) if memory else None, region=REGION, zone="",
                     instance_type=f"1x {' '.join(filter(None, [row.name, chips]))}",
                     interconnect="NVSwitch" if form.upper() in _SWITCHED_FORMS else None)


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> per-GPU offers and storage records (pure)."""
    batch = PROVIDER.batch()
    for row in rows:
        if row.kind == GPU:
            add_gpu_row(batch, row)
    add_services(batch, rows, [REGION], partial(describe_service, url=PAGE_URL))
    return batch


fetch = partial(fetch_page, spider=CrusoePricingSpider, build_batch=build_batch)
