"""Nebius AI Cloud: per-GPU-hour on-demand and preemptible prices, storage and egress from its price page.

https://nebius.com/prices is a Next.js page built with Gravity UI's page-constructor and
rendered on the server: the served HTML holds every table (the same content also travels as
the page's flight data, which the spider does not read). A plain scrapy spider crawls it in a
child process; no browser is needed.

The page (page-constructor's HighlightTable block; the classes public scrapers of this page
select on): each table is a `.pc-highlight-table-block` with its title in
`.pc-highlight-table-block__title .pc-title-item__text` ("NVIDIA GPU Instances", "Storage",
...), the column labels as the `.pc-highlight-table-block__cell`s of the row in
`.pc-highlight-table-block__head`, and one `.pc-highlight-table-block__row` per line in
`.pc-highlight-table-block__body`. The GPU table's columns are "Item", "vCPUs", "RAM, GB",
"Preemptible, GPU-hour" and "On-demand, GPU-hour"; a price is "$3.85", "from $1.82" (the
lowest price of a configurable instance, whose vCPUs and RAM are given as ranges),
"Contact us" or "––" (not offered). Nebius announces a price change ahead of time as an
extra column labelled "... (Effective October 1, 2026)": the latest column in force on the
day of the crawl is read, and a column not yet in force is noted.

Prices are per GPU per hour for a VM with the row's vCPUs and RAM per GPU, one price list for
every region (the page names none), so an offer is one GPU in region "global". Preemptible VMs
can be stopped by Nebius at any time: they are the "spot" purchase option. A "from $X" price is
loaded as the price of the instance's smallest configuration and flagged in provider_data
(`price_is_floor`); vCPUs and RAM given as a range are left unset, never guessed.

`fetch` does the I/O; `parse_pricing_page` (page -> rows) and `build_batch` (rows -> Batch)
are pure (`build_batch` takes the day whose price columns apply).
"""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable

from parsel import Selector
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

NAME = "nebius"
HOST = "nebius.com"
PRICING_PATH = "/prices"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
BILLING_DOC = "https://docs.nebius.com/object-storage/resources/pricing"
TERMS_DOC = "https://docs.nebius.com/legal/specific-terms/compute"
CLUSTERS_DOC = "https://docs.nebius.com/compute/clusters/gpu"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="Nebius AI Cloud",
        kind="gpu_cloud",
        billing_granularity_s=1,
        minimum_charge_s=None,
        billing_notes="GPUs on running VMs are billed per second and priced per hour (Nebius's pricing docs); "
                      "since October 2025 an H100/H200/B200 VM's GPU, vCPUs and RAM are one billing item, the "
                      "per-GPU-hour price of the price page. A minimum charge is not documented.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped VM is not charged; its disks are charged from creation to deletion "
                              "whether or not the VM runs (compute specific terms 2.3, 2.4).",
        access_ssh=True,
        access_docker=None,
        access_jupyter=None,
        multinode_interconnect="InfiniBand GPU clusters (named fabrics per region) for the HGX and NVL72 shapes",
        interruptible_offer="Preemptible VMs (can be stopped by Nebius at any time), priced per GPU-hour on the "
                            "price page",
        price_source="price page https://nebius.com/prices (scrapy spider, server-rendered page-constructor HTML)",
        source_urls=[PAGE_URL, BILLING_DOC, TERMS_DOC, CLUSTERS_DOC],
    ),
)


# -- the page: rows as printed ----------------------------------------------------------------------

BLOCK = "pc-highlight-table-block"
ON_DEMAND = "on-demand"
PREEMPTIBLE = "preemptible"
_EFFECTIVE = re.compile(r"\(?\s*effective\s+([A-Z][a-z]+\s+\d{1,2},\s*\d{4})\s*\)?", re.I)


def _has_class(name: str) -> str:
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def _text(sel: Selector) -> str:
    """A cell's text as a reader sees it, footnote markers (`<sup>`) left out."""
    return clean_text(" ".join(sel.xpath(".//text()[not(ancestor::sup)]").getall()))


def _cells(row: Selector) -> list[str]:
    return [_text(c) for c in row.xpath(f"./div[{_has_class(BLOCK + '__cell')}]")]


def _tables(page: Selector) -> Iterable[tuple[str, list[str], list[list[str]]]]:
    """(title, column labels, body rows) of every highlight table on the page."""
    for block in page.xpath(f"//div[{_has_class(BLOCK)}]"):
        title_el = block.xpath(f".//*[{_has_class(BLOCK + '__title')}]")
        title = _text(title_el[0]) if title_el else ""
        head = block.xpath(f".//*[{_has_class(BLOCK + '__head')}]/div[{_has_class(BLOCK + '__row')}]")
        body = block.xpath(f".//*[{_has_class(BLOCK + '__body')}]/div[{_has_class(BLOCK + '__row')}]")
        yield title, _cells(head[0]) if head else [], [_cells(r) for r in body]


def is_gpu_table(labels: list[str]) -> bool:
    return any("gpu-hour" in label.lower() for label in labels)


def is_storage_table(labels: list[str]) -> bool:
    return [label.lower() for label in labels[:3]] == ["item", "price", "unit"]


def parse_gpu_rows(page: Selector) -> list[PageRow]:
    rows: list[PageRow] = []
    tables = 0
    for title, labels, body in _tables(page):
        if not is_gpu_table(labels):
            continue
        tables += 1
        if not any(ON_DEMAND in label.lower() for label in labels):
            raise LayoutChanged(f"the GPU price table {title!r} has no on-demand GPU-hour column: {labels!r}")
        for index, texts in enumerate(body):
            cells = dict(zip(labels, texts))
            if len(texts) != len(labels):
                cells["_layout"] = f"{len(texts)} cells under {len(labels)} column labels"
            rows.append(PageRow(kind=GPU, section=title, name=texts[0] if texts else "", cells=cells,
                                product_id=slug(texts[0]) if texts else "", row_index=index))
    if not tables:
        raise LayoutChanged(f"no GPU price table (a .{BLOCK} with a 'GPU-hour' column) on the page")
    if not rows:
        raise LayoutChanged(f"the GPU price table (.{BLOCK}) has no rows")
    return rows


def parse_service_rows(page: Selector) -> list[PageRow]:
    """Storage rows (name, price and unit) and the data-transfer rows of the other tables."""
    rows: list[PageRow] = []
    for title, labels, body in _tables(page):
        if is_gpu_table(labels):
            continue
        for index, texts in enumerate(body):
            if len(texts) < 2:
                continue
            name = texts[0]
            if is_storage_table(labels):
                unit = texts[2] if len(texts) > 2 else ""
                # The unit is its own column: joined to an amount ("$0.0800 per GiB/month"), never to "Free".
                price = f"{texts[1]} per {unit}" if unit and re.search(r"[0-9]", texts[1]) else texts[1]
                kind = NETWORK if re.search(r"\begress\b", name, re.I) else STORAGE
                rows.append(PageRow(kind=kind, section=title, name=name, cells=dict(zip(labels, texts)),
                                    price_text=price, row_index=index))
            elif re.search(r"\begress\b", name, re.I):
                rows.append(PageRow(kind=NETWORK, section=title, name=name, cells=dict(zip(labels, texts)),
                                    price_text=texts[1], row_index=index))
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """GPU, storage and egress rows of the page; LayoutChanged without a GPU price table."""
    page = response.selector if isinstance(response, Response) else response
    return parse_gpu_rows(page) + parse_service_rows(page)


class NebiusPricingSpider(PricingSpider):
    name = "nebius_pricing"
    host = HOST
    path = PRICING_PATH
    complete_marker = b"</html>"  # the Next.js document always closes

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        return parse_pricing_page(response)


# -- rows -> records ------------------------------------------------------------------------------

def effective_date(label: str) -> date | None:
    m = _EFFECTIVE.search(label)
    if not m:
        return None
    try:
        return datetime.strptime(re.sub(r"\s+", " ", m.group(1)), "%B %d, %Y").date()
    except ValueError:
        raise LayoutChanged(f"column {label!r}: unreadable effective date") from None


def price_columns(labels: Iterable[str], word: str, today: date) -> tuple[str | None, list[str]]:
    """The column of `word` ('on-demand'/'preemptible') in force on `today`, and those announced for later."""
    current: tuple[date, str] | None = None
    later: list[str] = []
    for label in labels:
        if word not in label.lower() or "gpu-hour" not in label.lower():
            continue
        since = effective_date(label) or date.min
        if since > today:
            later.append(label)
        elif current is None or since >= current[0]:
            current = (since, label)
    return (current[1] if current else None), later


def _range_or_number(cells: dict[str, str], prefix: str) -> float | None:
    """A per-GPU figure; None for a range ('16-192') of a configurable instance."""
    text = next((v for k, v in cells.items() if k.lower().startswith(prefix)), "")
    if re.fullmatch(r"\s*[0-9]+\s*[-–]\s*[0-9]+\s*", text):
        return None
    return cell_number(cells, prefix)


def _hourly(text: str) -> tuple[float | None, bool]:
    """(USD per GPU-hour, is a 'from' floor price); None for no public price."""
    floor = bool(re.match(r"\s*from\b", text, re.I))
    price = usd_price(text)
    if price is not None and price_unit(text) not in (None, "hour"):
        raise PriceTextError(f"price {text!r} is not per GPU-hour")
    return price, floor


def gpu_fields(row: PageRow) -> dict[str, Any]:
    model, exact = canonicalize(NAME, row.name)
    return dict(
        instance_type=f"1x {row.name}", gpu_model=model.gpu_model, gpu_variant_exact=exact,
        gpu_name_reported=row.name, gpu_vendor=model.vendor, gpu_count=1.0, gpu_memory_gb=None,
        gpu_memory_gb_nominal=model.memory_gb, total_gpu_memory_gb=None,
        vcpus=_range_or_number(row.cells, "vcpu"), ram_gb=_range_or_number(row.cells, "ram"),
        interconnect="NVSwitch" if re.search(r"\bHGX\b|\bNVL\d+\b", row.name) else None,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _provider_data(row: PageRow, column: str, shown: str, floor: bool) -> str:
    return json.dumps({"page_section": row.section, "price_column": column, "price_text": shown,
                       "price_basis": "per GPU per hour", "price_is_floor": floor,
                       "vcpus_per_gpu": row.cells.get("vCPUs"), "ram_gb_per_gpu": row.cells.get("RAM, GB")},
                      sort_keys=True)


def add_gpu_row(batch: Batch, row: PageRow, today: date) -> None:
    ref = f"{REGION}/{row.product_id or slug(row.name)}"
    raw = raw_row(row)
    if "_layout" in row.cells:
        batch.quarantine("offer", ref, f"layout: {row.cells['_layout']}", raw)
        return
    on_demand_col, _ = price_columns(row.cells, ON_DEMAND, today)
    spot_col, _ = price_columns(row.cells, PREEMPTIBLE, today)
    priced: list[tuple[str, str, str, float, bool]] = []  # option, column, text, price, floor
    for option, column in (("on_demand", on_demand_col), ("spot", spot_col)):
        if column is None:
            continue
        text = row.cells[column]
        try:
            price, floor = _hourly(text)
        except PriceTextError as err:
            batch.quarantine("offer", f"{ref}/{option}", f"price: {err}", raw)
            continue
        if price is None:
            batch.notes.append(f"skipped {row.name!r} {option}: no public price ({text})")
            continue
        priced.append((option, column, text, price, floor))
    if not priced:
        return
    try:
        fields = gpu_fields(row)
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    base = next((p for option, _, _, p, _ in priced if option == "on_demand"), None)
    for option, column, text, price, floor in priced:
        saving = round(100 * (1 - price / base), 1) if option == "spot" and base else None
        batch.offer(ref if option == "on_demand" else f"{ref}/spot", raw, region=REGION, zone="",
                    purchase_option=option, price_per_hour=price, source_currency="USD", source_price_per_hour=price,
                    spot_savings_pct=saving, provider_data=_provider_data(row, column, text, floor), **fields)


def _note_announced(batch: Batch, rows: list[PageRow], today: date) -> None:
    labels = {label for r in rows for label in r.cells}
    for word in (ON_DEMAND, PREEMPTIBLE):
        for label in price_columns(labels, word, today)[1]:
            batch.notes.append(f"price column {label!r} is not in force yet on {today.isoformat()}: not loaded")


def storage_description(row: PageRow) -> str:
    unit = " (per GiB converted to per GB: / 1.073741824)" if price_unit(row.price_text) == "gib_month" else ""
    return f"{row.name}: {row.price_text}{unit} ({PAGE_URL})"


def add_network_row(batch: Batch, row: PageRow) -> None:
    """VM traffic ('Networking: Egress/Ingress traffic') is internet egress; the object-storage
    service's own egress rows are a storage service's download price, noted and not loaded."""
    if re.search(r"object storage", row.name, re.I):
        batch.notes.append(f"skipped {row.name!r}: object-storage download traffic, not VM egress ({row.price_text})")
        return
    add_egress(batch, row, [REGION], f"{row.name}: {row.price_text} ({PAGE_URL})")


def build_batch(rows: list[PageRow], today: date | None = None) -> Batch:
    """Scraped rows -> per-GPU offers, storage and egress records (pure, given the day)."""
    today = today or datetime.now(timezone.utc).date()
    batch = Batch(NAME)
    gpu_rows = [r for r in rows if r.kind == GPU]
    for row in gpu_rows:
        add_gpu_row(batch, row, today)
    _note_announced(batch, gpu_rows, today)
    for row in rows:
        if row.kind == STORAGE:
            add_storage(batch, row, [REGION], storage_description(row))
        elif row.kind == NETWORK:
            add_network_row(batch, row)
    return batch


def scrape(ctx: SourceContext) -> CrawlResult:
    return scrape_page(ctx, NebiusPricingSpider)


def fetch(ctx: SourceContext) -> Batch:
    """Crawl the price page (child process) and normalize its rows."""
    return fetch_page(ctx, NebiusPricingSpider, build_batch)
