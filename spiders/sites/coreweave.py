"""CoreWeave's pricing page (https://www.coreweave.com/pricing): a server-rendered Webflow page.

Page structure (Webflow CMS list; the same classes public scrapers of this page
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
"""

from __future__ import annotations

import re
from typing import Iterable

from parsel import Selector, SelectorList
from scrapy.http import Response

from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PriceRow, clean_text
from gpuledger.spiders.sites.base import LayoutChanged, PricingSpider

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


def parse_gpu_rows(page: Selector) -> list[PriceRow]:
    tables = page.css(GPU_TABLE)
    if not tables:
        raise LayoutChanged(f"no GPU price table ({GPU_TABLE}) on the page")
    notes = footnote_texts(page)
    rows: list[PriceRow] = []
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
            rows.append(PriceRow(
                kind=GPU, section=section, name=name, cells=texts, price_text=od_text, spot_text=spot_text,
                product_id=name_el.attrib.get("data-product", "") if name_el else "",
                footnotes=[notes.get(ref, f"footnote {ref} (text not found)") for ref in refs], row_index=index,
            ))
    if not rows:
        raise LayoutChanged(f"the GPU price table ({GPU_TABLE}) has no rows ({GPU_ROW})")
    return rows


def parse_service_rows(page: Selector) -> list[PriceRow]:
    """Storage and networking rows: a name and a price text each."""
    rows: list[PriceRow] = []
    for css, section in ((".table-v2.storage-pricing", "Storage"), (".table-v2.networking-pricing", "Networking")):
        for table in page.css(css):
            for index, row in enumerate(table.css(".table-row-v2")):
                cells = _cells(row)
                if len(cells) < 2:
                    continue
                name = clean_text(" ".join(cells[0].css("h3.table-model-name").xpath(".//text()").getall()))
                note = clean_text(" ".join(cells[0].css(".table-meta-text").xpath(".//text()").getall()))
                kind = NETWORK if section == "Networking" or re.search(r"egress", name, re.I) else STORAGE
                rows.append(PriceRow(kind=kind, section=section, name=name, cells={"note": note} if note else {},
                                     price_text=text_without_footnotes(cells[-1]), row_index=index))
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PriceRow]:
    """Every GPU, storage and networking row of the page; LayoutChanged when the GPU table is gone."""
    page = response.selector if isinstance(response, Response) else response
    return parse_gpu_rows(page) + parse_service_rows(page)


class CoreWeavePricingSpider(PricingSpider):
    name = "coreweave_pricing"
    complete_marker = b"</html>"  # the Webflow page always closes its document

    def parse_rows(self, response: Response) -> Iterable[PriceRow]:
        return parse_pricing_page(response)
