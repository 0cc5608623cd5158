"""CoreWeave: GPU instance prices (on-demand and spot), storage and egress from its pricing page.

https://www.coreweave.com/pricing is server-rendered Webflow pricing whole instances (HGX H100: 8 GPUs at $49.24/h),
a GPU table per "REGION: ..." tab (the region, as a slug), then the storage and networking tables.
"""

from __future__ import annotations

import re
from functools import partial

from parsel import Selector, SelectorList
from scrapy.http import Response

from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PageRow, PriceTextError, cell_number, clean_text
from gpuledger.spiders.items import price_unit, slug, usd_price
from gpuledger.spiders.page_source import ALL_TEXT, NO_FOOTNOTES, LayoutChanged, PricingSpider, add_shown_prices
from gpuledger.spiders.page_source import add_services, fetch_page, has_class, page_spec, quarantined_layout
from gpuledger.spiders.page_source import require_columns, scrape as scrape_page, text_of
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch

NAME = "coreweave"
HOST = "www.coreweave.com"
PRICING_PATH = "/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
BILLING_DOC = "https://docs.coreweave.com/resources/billing-and-charges"
STORAGE_DOC = "https://docs.coreweave.com/docs/pricing/pricing-storage"

PROVIDER = page_spec(
    NAME, display_name="CoreWeave", kind="gpu_cloud", billing_granularity_s=60, minimum_charge_s=0,
    billing_notes="Billing and resource consumption are calculated per minute, with no minimum charge; "
                  "a GPU instance's hourly price includes its vCPUs, RAM and ephemeral local storage.",
    stopped_billing_notes="Workloads run on Kubernetes (CKS): there is no stopped-instance state; compute "
                          "billing ends when the instance is released. Storage billing while idle not verified.",
    access_docker=True, interruptible_offer="Spot instances (preemptible), priced on the pricing page",
    price_source="pricing page https://www.coreweave.com/pricing (scrapy spider, server-rendered HTML)",
    source_urls=[PAGE_URL, BILLING_DOC, STORAGE_DOC],
)

GPU_TABLE = ".table-v2.kubernetes-gpu-pricing"
GPU_ROW = ".table-row-v2.kubernetes-gpu-pricing"
PRICE_COLUMN = "instance price"
REQUIRED_COLUMNS = ("gpu model", "gpu count", "vram", PRICE_COLUMN)
# A price cell's words, without the unlabeled duplicate the page shows on phones.
NOT_MOBILE = f".//text()[not(ancestor::*[{has_class('table-price-mobile')}])]"


def _cells(grid_row: Selector) -> SelectorList:
    return grid_row.xpath(f"./div[{has_class('table-grid')}]/div[{has_class('table-v2-cell')}]")


def parse_service_rows(page: Response | Selector) -> list[PageRow]:
    """Storage and networking rows: a name and a price text each."""
    rows: list[PageRow] = []
    for css, section in ((".table-v2.storage-pricing", "Storage"), (".table-v2.networking-pricing", "Networking")):
        for index, row in enumerate(page.css(f"{css} .table-row-v2")):
            cells = _cells(row)
            name = text_of(cells[0].css("h3.table-model-name")) if cells else ""
            kind = NETWORK if section == "Networking" or re.search(r"egress", name, re.I) else STORAGE
            if len(cells) < 2:  # no price cell beside the name: kept in quarantine, not read from the name
                rows.append(PageRow(kind=kind, section=section, name=name or f"row {index + 1}", row_index=index,
                                    cells={"_layout": f"{len(cells)} cell(s) in a {section.lower()} row, not a name "
                                                      "and a price"}))
                continue
            note = text_of(cells[0].css(".table-meta-text"))
            rows.append(PageRow(kind=kind, section=section, name=name, cells={"note": note} if note else {},
                                price_text=text_of(cells[-1], NO_FOOTNOTES), row_index=index))
    return rows


def parse_pricing_page(page: Response | Selector) -> list[PageRow]:
    """Every GPU, storage and networking row of the page; LayoutChanged when the GPU table is gone."""
    tables = page.css(GPU_TABLE)
    if not tables:
        raise LayoutChanged(f"no GPU price table ({GPU_TABLE}) on the page")
    footnotes = {p.attrib["id"].removeprefix("footnote-"): text_of(p, NO_FOOTNOTES)
                 for p in page.xpath("//*[starts-with(@id, 'footnote-')]")}
    rows: list[PageRow] = []
    for table in tables:
        header = table.xpath(f".//div[{has_class('table-v2-header')}]")
        labels = [text_of(c, NO_FOOTNOTES) for c in _cells(header[0])] if header else []
        require_columns(labels, REQUIRED_COLUMNS, "GPU price table header")
        section = text_of(table.xpath(f"preceding::div[{has_class('table-region-tag')}][1]"))
        # the price column by its label, the hourly one first: a column beside it (a reserved or monthly rate)
        # is not the instance price per hour
        priced = [i for i, label in enumerate(labels) if label.lower().startswith(PRICE_COLUMN)]
        at = next((i for i in priced if re.search(r"\bhour\b|\bhr\b", labels[i], re.I)), priced[0])
        for index, row in enumerate(table.css(GPU_ROW)):
            cells, name = _cells(row), row.css("h3.table-model-name")
            specs = [(label, cell) for i, (label, cell) in enumerate(zip(labels, cells)) if i not in (0, at)]
            texts = {label: text_of(cell, NO_FOOTNOTES) for label, cell in specs}
            od_text = spot_text = ""
            if at < len(cells):  # the labelled prices; an older layout prints the price as the cell's own text
                price = cells[at]
                on_demand, spot = price.css(".instance-price .item-value"), price.css(".spot-price .item-value")
                od_text = text_of(on_demand[:1] or cells[at:at + 1], ALL_TEXT if on_demand else NOT_MOBILE)
                spot_text = text_of(spot[:1])
                texts[labels[at]] = text_of(price, NOT_MOBILE)  # keep the price cell's own words (its unit)
            if len(cells) != len(labels):
                texts["_layout"] = f"{len(cells)} cells under {len(labels)} column labels"
            refs = [clean_text(t) for _, cell in specs for t in cell.xpath(".//sup//text()").getall()]
            rows.append(PageRow(
                kind=GPU, section=section, name=text_of(name), cells=texts, price_text=od_text, spot_text=spot_text,
                product_id=name.attrib.get("data-product", ""), row_index=index,
                footnotes=[footnotes.get(ref, f"footnote {ref} (text not found)") for ref in refs if ref]))
    if not rows:
        raise LayoutChanged(f"the GPU price table ({GPU_TABLE}) has no rows ({GPU_ROW})")
    return rows + parse_service_rows(page)


class CoreWeavePricingSpider(PricingSpider):
    name, host, path = "coreweave_pricing", HOST, PRICING_PATH
    parse_rows = staticmethod(parse_pricing_page)


# Multi-GPU systems whose GPUs talk over NVSwitch/NVLink switch trays, by the page's naming.
_SWITCHED = re.compile(r"\bHGX\b|\bNVL\d+\b", re.I)


def region_code(section: str) -> str:
    """'REGION: NORTH AMERICA' -> 'north-america'; no region tag -> 'global'."""
    return slug(re.sub(r"^\s*region\s*:\s*", "", clean_text(section), flags=re.I)) or "global"


def _is_hourly(row: PageRow) -> bool:
    price_labels = [label for label in row.cells if "price" in label.lower()]
    words = " ".join(price_labels + [row.cells[label] for label in price_labels])
    return price_unit(words) == "hour" or bool(re.search(r"per\s+hour", words, re.I))


def _interconnect(name: str, vram_gb: float | None) -> str | None:
    """NVSwitch by the page's naming, else PCIe for a PCIe card (None for a name the canon lacks)."""
    if _SWITCHED.search(name):
        return "NVSwitch"
    try:
        model, _ = canonicalize(NAME, name, vram_gb * 1024 if vram_gb else None)
    except UnknownGPUError:
        return None
    return "PCIe" if model.form_factor == "PCIe" else None


def add_gpu_row(batch: Batch, row: PageRow) -> None:
    region = region_code(row.section)
    ref, raw = f"{region}/{row.product_id or row.name}", row.raw()
    if quarantined_layout(batch, "offer", ref, row):
        return
    try:
        on_demand = usd_price(row.price_text)
        spot = usd_price(row.spot_text) if row.spot_text else None
        if not _is_hourly(row):
            raise PriceTextError(f"price column {list(row.cells)!r} does not say the price is per hour")
        if on_demand is None and spot is None:
            batch.notes.append(f"skipped {row.name!r}: no public price ({row.price_text})")
            return
        count = cell_number(row.cells, "gpu count")
        if not count:  # parse_number reads no minus sign: a count is never negative
            raise ValueError(f"no GPU count in {row.cells!r}")
        vram_gb, disk_tb = cell_number(row.cells, "vram"), cell_number(row.cells, "local storage")
        vcpus, ram_gb = cell_number(row.cells, "vcpu"), cell_number(row.cells, "system ram")
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw)
        return
    except ValueError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    data = {"product_id": row.product_id, "page_section": row.section, "footnotes": row.footnotes,
            "price_basis": "per instance per hour"}
    add_shown_prices(batch, ref, row, on_demand, spot, data, repr(row.name), gpu=row.name, gpu_memory_gb=vram_gb,
                     gpu_count=count, region=region, zone="", instance_type=f"{count:g}x {row.name}", vcpus=vcpus,
                     ram_gb=ram_gb, local_disk_gb=disk_tb * 1000 if disk_tb else None,
                     interconnect=_interconnect(row.name, vram_gb) if count > 1 else None)


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure)."""
    batch = PROVIDER.batch()
    gpu_rows = [r for r in rows if r.kind == GPU]
    regions = sorted({region_code(r.section) for r in gpu_rows}) or ["global"]
    for row in gpu_rows:
        add_gpu_row(batch, row)

    def describe(row: PageRow) -> str:
        if row.kind == NETWORK:
            return f"{row.name}: {row.price_text} ({PAGE_URL}; {BILLING_DOC})"
        return "; ".join(filter(None, [row.name, row.cells.get("note"), f"{row.price_text} ({STORAGE_DOC})"]))

    add_services(batch, rows, regions, describe)
    return batch


scrape = partial(scrape_page, spider=CoreWeavePricingSpider)
fetch = partial(fetch_page, spider=CoreWeavePricingSpider, build_batch=build_batch)
