"""CoreWeave: GPU instance prices (on-demand and spot), storage and egress from its pricing page.

CoreWeave publishes no price API; https://www.coreweave.com/pricing is a
server-rendered page, crawled by a scrapy spider (`CoreWeavePricingSpider`)
in a child process. The page prices whole instances ("Instance Price Per Hour":
an HGX H100 instance is 8 GPUs at $49.24/h, i.e. $6.155 per GPU), so
`price_per_hour` is the instance price and `gpu_count` its GPU count. Rows that
say "Contact sales" publish no price and are skipped (noted, never priced); a
row with a spot price but no on-demand price (HGX B300) yields only its spot
offer. Region: the page's own "REGION: ..." tab, as a slug ("north-america").

The page (a Webflow CMS list; the same classes public scrapers of this page
select on): each region tab has a "REGION: ..." tag and a
`.table-v2.kubernetes-gpu-pricing` table; its header row names the columns
(GPU Model, GPU Count, VRAM (GB), vCPUs, System RAM (GB), Local Storage (TB),
Instance Price Per Hour); each `.table-row-v2.kubernetes-gpu-pricing` row has
`.table-grid > .table-v2-cell` cells, the model in `h3.table-model-name`
(`data-product` slug), and a price cell holding `.instance-price .item-value`
(the whole instance, e.g. 8 GPUs, per hour) and, for some rows,
`.spot-price .item-value`. The GPU count may carry a footnote `<sup>`. CPU rows
live in a separate `.kubernetes-cpu-pricing` table (out of scope). Storage and
networking are `.storage-pricing` / `.networking-pricing` tables of name + price.

`fetch` does the I/O; `parse_pricing_page` (page -> rows) and `build_batch`
(rows -> Batch) are pure.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Iterable

from parsel import Selector, SelectorList
from scrapy.http import Response

from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.items import (
    GPU,
    NETWORK,
    STORAGE,
    PageRow,
    PriceTextError,
    cell_number,
    clean_text,
    is_no_price,
    price_unit,
    slug,
    usd_price,
)
from gpuledger.spiders.page_source import LayoutChanged, PricingSpider, add_egress, add_storage, fetch_page, raw_row
from gpuledger.spiders.page_source import scrape as scrape_page
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult

NAME = "coreweave"
HOST = "www.coreweave.com"
PRICING_PATH = "/pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
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


# -- the page: rows as printed ----------------------------------------------------------------------

GPU_TABLE = ".table-v2.kubernetes-gpu-pricing"
GPU_ROW = ".table-row-v2.kubernetes-gpu-pricing"
# Column labels the normalizer needs, matched case-insensitively as prefixes.
REQUIRED_COLUMNS = ("gpu model", "gpu count", "vram", "instance price")


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def text_without_footnotes(sel: Selector) -> str:
    """Visible text of a cell, leaving out footnote markers ('4<sup>1</sup>' -> '4')."""
    return clean_text(" ".join(sel.xpath(".//text()[not(ancestor::sup)]").getall()))


def footnote_refs(sel: Selector) -> list[str]:
    return [clean_text(t) for t in sel.xpath(".//sup//text()").getall() if clean_text(t)]


def footnote_texts(page: Selector) -> dict[str, str]:
    """'1' -> the text of footnote 1 (its <sup> marker removed)."""
    out = {}
    for p in page.xpath("//*[starts-with(@id, 'footnote-')]"):
        ref = p.attrib["id"].removeprefix("footnote-")
        out[ref] = text_without_footnotes(p)
    return out


def region_label(table: Selector) -> str:
    """The 'REGION: ...' tag that precedes a GPU table ('' when the page gives none)."""
    tag = table.xpath(f"preceding::div[{_has_class('table-region-tag')}][1]")
    return clean_text(" ".join(tag.xpath(".//text()").getall())) if tag else ""


def _cells(grid_row: Selector) -> SelectorList:
    return grid_row.xpath(f"./div[{_has_class('table-grid')}]/div[{_has_class('table-v2-cell')}]")


def header_labels(table: Selector) -> list[str]:
    header = table.xpath(f".//div[{_has_class('table-v2-header')}]")
    if not header:
        return []
    return [text_without_footnotes(c) for c in _cells(header[0])]


def _check_header(labels: list[str]) -> None:
    lowered = [label.lower() for label in labels]
    missing = [want for want in REQUIRED_COLUMNS if not any(have.startswith(want) for have in lowered)]
    if missing:
        raise LayoutChanged(f"GPU price table header {labels!r} lacks the columns {missing}")


def _price_texts(cell: Selector) -> tuple[str, str]:
    """(on-demand text, spot text) of a price cell; the unlabeled mobile duplicate is ignored."""
    on_demand = cell.css(".instance-price .item-value")
    spot = cell.css(".spot-price .item-value")
    od_text = clean_text(" ".join(on_demand[0].xpath(".//text()").getall())) if on_demand else ""
    spot_text = clean_text(" ".join(spot[0].xpath(".//text()").getall())) if spot else ""
    if not on_demand:  # an older layout: the price is the cell's own text
        od_text = clean_text(" ".join(cell.xpath(f".//text()[not(ancestor::*[{_has_class('table-price-mobile')}])]")
                                      .getall()))
    return od_text, spot_text


def parse_gpu_rows(page: Selector) -> list[PageRow]:
    tables = page.css(GPU_TABLE)
    if not tables:
        raise LayoutChanged(f"no GPU price table ({GPU_TABLE}) on the page")
    notes = footnote_texts(page)
    rows: list[PageRow] = []
    for table in tables:
        labels = header_labels(table)
        _check_header(labels)
        section = region_label(table)
        for index, row in enumerate(table.css(GPU_ROW)):
            cells = _cells(row)
            name_el = row.css("h3.table-model-name")
            name = clean_text(" ".join(name_el.xpath(".//text()").getall())) if name_el else ""
            texts = {label: text_without_footnotes(cell) for label, cell in zip(labels[1:-1], cells[1:-1])}
            od_text, spot_text = _price_texts(cells[-1]) if len(cells) >= 2 else ("", "")
            if len(cells) >= 2 and len(labels) >= 2:  # keep the price cell's own words (its unit)
                texts[labels[-1]] = clean_text(" ".join(cells[-1].xpath(
                    f".//text()[not(ancestor::*[{_has_class('table-price-mobile')}])]").getall()))
            refs = [ref for cell in cells[1:-1] for ref in footnote_refs(cell)]
            if len(cells) != len(labels):
                texts["_layout"] = f"{len(cells)} cells under {len(labels)} column labels"
            rows.append(PageRow(
                kind=GPU, section=section, name=name, cells=texts, price_text=od_text, spot_text=spot_text,
                product_id=name_el.attrib.get("data-product", "") if name_el else "",
                footnotes=[notes.get(ref, f"footnote {ref} (text not found)") for ref in refs], row_index=index,
            ))
    if not rows:
        raise LayoutChanged(f"the GPU price table ({GPU_TABLE}) has no rows ({GPU_ROW})")
    return rows


def parse_service_rows(page: Selector) -> list[PageRow]:
    """Storage and networking rows: a name and a price text each."""
    rows: list[PageRow] = []
    for css, section in ((".table-v2.storage-pricing", "Storage"), (".table-v2.networking-pricing", "Networking")):
        for table in page.css(css):
            for index, row in enumerate(table.css(".table-row-v2")):
                cells = _cells(row)
                if len(cells) < 2:
                    continue
                name = clean_text(" ".join(cells[0].css("h3.table-model-name").xpath(".//text()").getall()))
                note = clean_text(" ".join(cells[0].css(".table-meta-text").xpath(".//text()").getall()))
                kind = NETWORK if section == "Networking" or re.search(r"egress", name, re.I) else STORAGE
                rows.append(PageRow(kind=kind, section=section, name=name, cells={"note": note} if note else {},
                                     price_text=text_without_footnotes(cells[-1]), row_index=index))
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """Every GPU, storage and networking row of the page; LayoutChanged when the GPU table is gone."""
    page = response.selector if isinstance(response, Response) else response
    return parse_gpu_rows(page) + parse_service_rows(page)


class CoreWeavePricingSpider(PricingSpider):
    name = "coreweave_pricing"
    host = HOST
    path = PRICING_PATH
    complete_marker = b"</html>"  # the Webflow page always closes its document

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        return parse_pricing_page(response)


# -- rows -> records ------------------------------------------------------------------------------

# Multi-GPU systems whose GPUs talk over NVSwitch/NVLink switch trays, by the page's naming.
_SWITCHED = re.compile(r"\bHGX\b|\bNVL\d+\b", re.I)


def region_code(section: str) -> str:
    """'REGION: NORTH AMERICA' -> 'north-america'; no region tag -> 'global'."""
    label = re.sub(r"^\s*region\s*:\s*", "", clean_text(section), flags=re.I)
    return slug(label) or "global"


def _is_hourly(row: PageRow) -> bool:
    price_labels = [label for label in row.cells if "price" in label.lower()]
    words = " ".join(price_labels + [row.cells[label] for label in price_labels])
    return price_unit(words) == "hour" or bool(re.search(r"per\s+hour", words, re.I))


def gpu_fields(row: PageRow) -> dict[str, Any]:
    """Offer fields shared by a row's on-demand and spot offers; ValueError/UnknownGPUError -> quarantine."""
    count = cell_number(row.cells, "gpu count")
    if not count or count <= 0:
        raise ValueError(f"no GPU count in {row.cells!r}")
    vram_gb = cell_number(row.cells, "vram")
    model, exact = canonicalize(NAME, row.name, vram_gb * 1024 if vram_gb else None)
    disk_tb = cell_number(row.cells, "local storage")
    interconnect = None
    if count > 1:
        interconnect = "NVSwitch" if _SWITCHED.search(row.name) else ("PCIe" if model.form_factor == "PCIe" else None)
    return dict(
        instance_type=f"{count:g}x {row.name}",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=row.name, gpu_vendor=model.vendor,
        gpu_count=count, gpu_memory_gb=vram_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=vram_gb * count if vram_gb else None,
        vcpus=cell_number(row.cells, "vcpu"), ram_gb=cell_number(row.cells, "system ram"),
        local_disk_gb=disk_tb * 1000 if disk_tb else None, interconnect=interconnect,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _provider_data(row: PageRow, shown: str) -> str:
    data = {"product_id": row.product_id, "page_section": row.section, "price_text": shown,
            "footnotes": row.footnotes, "price_basis": "per instance per hour"}
    return json.dumps(data, sort_keys=True)


def add_gpu_row(batch: Batch, row: PageRow) -> None:
    region = region_code(row.section)
    ref = f"{region}/{row.product_id or row.name}"
    raw = raw_row(row)
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


def storage_description(row: PageRow) -> str:
    return "; ".join(filter(None, [row.name, row.cells.get("note"), f"{row.price_text} ({STORAGE_DOC})"]))


def egress_description(row: PageRow) -> str:
    return f"{row.name}: {row.price_text} ({PAGE_URL}; {BILLING_DOC})"


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure)."""
    batch = Batch(NAME)
    gpu_rows = [r for r in rows if r.kind == GPU]
    regions = sorted({region_code(r.section) for r in gpu_rows}) or ["global"]
    for row in gpu_rows:
        add_gpu_row(batch, row)
    for row in rows:
        if row.kind == STORAGE:
            add_storage(batch, row, regions, storage_description(row))
        elif row.kind == NETWORK:
            add_egress(batch, row, regions, egress_description(row))
    return batch


def scrape(ctx: SourceContext) -> CrawlResult:
    return scrape_page(ctx, CoreWeavePricingSpider)


def fetch(ctx: SourceContext) -> Batch:
    """Crawl the pricing page (child process) and normalize its rows."""
    return fetch_page(ctx, CoreWeavePricingSpider, build_batch)
