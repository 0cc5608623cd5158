"""Nebius AI Cloud: per-GPU-hour on-demand and preemptible (spot) prices, storage and egress from its price page.

https://nebius.com/prices is server-rendered: "from $1.82" is an instance's smallest configuration (`price_is_floor`);
of the columns "... (Effective October 1, 2026)" the one in force on the crawl's day is read, a later one noted.
One list for all regions: an offer is one GPU in region "global".
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from functools import partial
from typing import Any, Iterable

from parsel import Selector
from scrapy.http import Response

from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PageRow, cell_number, slug, usd_per_hour
from gpuledger.spiders.page_source import NO_FOOTNOTES, LayoutChanged, PricingSpider, add_gpu_offers, add_services
from gpuledger.spiders.page_source import describe_service, fetch_page, has_class, page_spec, quarantined_layout
from gpuledger.spiders.page_source import read_price, text_of
from gpuledger.warehouse.records import Batch

NAME = "nebius"
HOST = "nebius.com"
PRICING_PATH = "/prices"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
BILLING_DOC = "https://docs.nebius.com/object-storage/resources/pricing"
TERMS_DOC = "https://docs.nebius.com/legal/specific-terms/compute"
CLUSTERS_DOC = "https://docs.nebius.com/compute/clusters/gpu"

PROVIDER = page_spec(
    NAME, display_name="Nebius AI Cloud", kind="gpu_cloud", billing_granularity_s=1,
    billing_notes="GPUs on running VMs are billed per second and priced per hour (Nebius's pricing docs); "
                  "since October 2025 an H100/H200/B200 VM's GPU, vCPUs and RAM are one billing item, the "
                  "per-GPU-hour price of the price page. A minimum charge is not documented.",
    storage_persists_when_stopped=True, access_ssh=True,
    stopped_billing_notes="A stopped VM is not charged; its disks are charged from creation to deletion "
                          "whether or not the VM runs (compute specific terms 2.3, 2.4).",
    multinode_interconnect="InfiniBand GPU clusters (named fabrics per region) for the HGX and NVL72 shapes",
    interruptible_offer="Preemptible VMs (can be stopped by Nebius at any time), priced per GPU-hour on the "
                        "price page",
    price_source="price page https://nebius.com/prices (scrapy spider, server-rendered page-constructor HTML)",
    source_urls=[PAGE_URL, BILLING_DOC, TERMS_DOC, CLUSTERS_DOC],
)

BLOCK = "pc-highlight-table-block"
ON_DEMAND = "on-demand"
PREEMPTIBLE = "preemptible"
_EFFECTIVE = re.compile(r"\beffective\b(?:\s+(?:from|as\s+of|on)\b)?([^)]*)", re.I)
# 'October 1, 2026', '1 October 2026', 'Oct. 1, 2026', 'October 1st, 2026', '2026-10-01'
_DATE_FORMATS = ("%B %d, %Y", "%B %d %Y", "%d %B %Y", "%b %d, %Y", "%b %d %Y", "%d %b %Y", "%Y-%m-%d")
_EGRESS = re.compile(r"\begress\b", re.I)
_per_gpu_hour = partial(usd_per_hour, basis="per GPU-hour", units=("hour", None))


def _tables(page: Response | Selector) -> Iterable[tuple[str, list[str], list[list[str]]]]:
    """(title, column labels, body rows) of every highlight table on the page."""
    def cells(row: Selector) -> list[str]:
        return [text_of(c, NO_FOOTNOTES) for c in row.xpath(f"./div[{has_class(BLOCK + '__cell')}]")]

    for block in page.xpath(f"//div[{has_class(BLOCK)}]"):
        title = text_of(block.xpath(f".//*[{has_class(BLOCK + '__title')}]")[:1], NO_FOOTNOTES)
        head = block.xpath(f".//*[{has_class(BLOCK + '__head')}]/div[{has_class(BLOCK + '__row')}]")
        body = block.xpath(f".//*[{has_class(BLOCK + '__body')}]/div[{has_class(BLOCK + '__row')}]")
        yield title, cells(head[0]) if head else [], [cells(r) for r in body]


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """GPU, storage and egress rows of the page; LayoutChanged without a GPU price table."""
    tables = list(_tables(response))
    rows: list[PageRow] = []
    gpu_tables = [t for t in tables if any("gpu-hour" in label.lower() for label in t[1])]
    if not gpu_tables:
        raise LayoutChanged(f"no GPU price table (a .{BLOCK} with a 'GPU-hour' column) on the page")
    for title, labels, body in gpu_tables:
        if not any(ON_DEMAND in label.lower() for label in labels):
            raise LayoutChanged(f"the GPU price table {title!r} has no on-demand GPU-hour column: {labels!r}")
        for index, texts in enumerate(body):
            cells = dict(zip(labels, texts))
            if len(texts) != len(labels):
                cells["_layout"] = f"{len(texts)} cells under {len(labels)} column labels"
            rows.append(PageRow(kind=GPU, section=title, name=texts[0] if texts else "", cells=cells,
                                product_id=slug(texts[0]) if texts else "", row_index=index))
    if not rows:
        raise LayoutChanged(f"the GPU price table (.{BLOCK}) has no rows")
    # Storage rows (name, price and unit) and the data-transfer rows of the other tables.
    for title, labels, body in (t for t in tables if t not in gpu_tables):
        storage = [label.lower() for label in labels[:3]] == ["item", "price", "unit"]
        for index, texts in enumerate(body):
            if len(texts) < 2 or not (storage or _EGRESS.search(texts[0])):
                continue
            unit = texts[2] if storage and len(texts) > 2 else ""
            # The unit is its own column: joined to an amount ("$0.0800 per GiB/month"), never to "Free".
            price = f"{texts[1]} per {unit}" if unit and re.search(r"[0-9]", texts[1]) else texts[1]
            rows.append(PageRow(kind=NETWORK if _EGRESS.search(texts[0]) else STORAGE, section=title, name=texts[0],
                                cells=dict(zip(labels, texts)), price_text=price, row_index=index))
    return rows


class NebiusPricingSpider(PricingSpider):
    name, host, path = "nebius_pricing", HOST, PRICING_PATH
    parse_rows = staticmethod(parse_pricing_page)


def _effective_date(label: str, written: str) -> date:
    """The day a column says it takes effect; LayoutChanged for one not read (never taken as in force now)."""
    text = re.sub(r"\s+", " ", re.sub(r"([0-9])(st|nd|rd|th)\b", r"\1", written.replace(".", ""))).strip(" ,")
    for form in _DATE_FORMATS:
        try:
            return datetime.strptime(text, form).date()
        except ValueError:
            continue
    raise LayoutChanged(f"column {label!r}: unreadable effective date")


def price_columns(labels: Iterable[str], word: str, today: date) -> tuple[str | None, list[str]]:
    """The column of `word` ('on-demand'/'preemptible') in force on `today`, and those announced for later."""
    current: tuple[date, str] | None = None
    later: list[str] = []
    for label in labels:
        if word not in label.lower() or "gpu-hour" not in label.lower():
            continue
        effective = _EFFECTIVE.search(label)
        since = _effective_date(label, effective.group(1)) if effective else date.min
        if since > today:
            later.append(label)
        elif current is not None and since == current[0]:  # which is the price? (a commitment rate beside it)
            raise LayoutChanged(f"two {word!r} GPU-hour columns in force: {current[1]!r} and {label!r}")
        elif current is None or since > current[0]:
            current = (since, label)
    return (current[1] if current else None), later


def _range_or_number(cells: dict[str, str], prefix: str) -> float | None:
    """A per-GPU figure; None for a range ('16-192') of a configurable instance."""
    text = next((v for k, v in cells.items() if k.lower().startswith(prefix)), "")
    return None if re.fullmatch(r"\s*[0-9]+\s*[-–]\s*[0-9]+\s*", text) else cell_number(cells, prefix)


def add_gpu_row(batch: Batch, row: PageRow, today: date) -> None:
    ref, raw = f"{REGION}/{row.product_id or slug(row.name)}", row.raw()
    if quarantined_layout(batch, "offer", ref, row):
        return
    priced: dict[str, tuple[float, dict[str, Any]]] = {}
    for option, word in (("on_demand", ON_DEMAND), ("spot", PREEMPTIBLE)):
        column = price_columns(row.cells, word, today)[0]
        if column is None:
            continue
        text = row.cells[column]
        price = read_price(batch, "offer", f"{ref}/{option}", row, text, _per_gpu_hour, f"{row.name!r} {option}")
        if price is None:
            continue
        floor = bool(re.match(r"\s*from\b", text, re.I))
        priced[option] = price, {
            "page_section": row.section, "price_column": column, "price_text": text, "price_basis": "per GPU per hour",
            "price_is_floor": floor, "vcpus_per_gpu": row.cells.get("vCPUs"),
            "ram_gb_per_gpu": row.cells.get("RAM, GB")}
    if not priced:
        return
    try:
        vcpus, ram_gb = _range_or_number(row.cells, "vcpu"), _range_or_number(row.cells, "ram")
    except ValueError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw)
        return
    # The page states no GPU memory: none is given (the canon's nominal figure is the model's).
    add_gpu_offers(batch, ref, raw, priced, gpu=row.name, gpu_memory_gb=None, gpu_count=1.0, region=REGION, zone="",
                   instance_type=f"1x {row.name}", vcpus=vcpus, ram_gb=ram_gb,
                   interconnect="NVSwitch" if re.search(r"\bHGX\b|\bNVL\d+\b", row.name) else None)


def build_batch(rows: list[PageRow], today: date | None = None) -> Batch:
    """Scraped rows -> per-GPU offers, storage and egress records (pure, given the day)."""
    today = today or datetime.now(timezone.utc).date()
    batch = PROVIDER.batch()
    gpu_rows = [r for r in rows if r.kind == GPU]
    for row in gpu_rows:
        add_gpu_row(batch, row, today)
    tables = {tuple(r.cells) for r in gpu_rows}  # per table: two tables may label their columns each their own way
    for word in (ON_DEMAND, PREEMPTIBLE):
        later = {label for labels in tables for label in price_columns(labels, word, today)[1]}
        for label in sorted(later):
            batch.notes.append(f"price column {label!r} is not in force yet on {today.isoformat()}: not loaded")
    # The object-storage service's own egress is a storage service's download price, not VM egress; VM
    # traffic ('Networking: Egress/Ingress traffic') is internet egress.
    bucket_traffic = [r for r in rows if r.kind == NETWORK and re.search(r"object storage", r.name, re.I)]
    batch.notes += [f"skipped {r.name!r}: object-storage download traffic, not VM egress ({r.price_text})"
                    for r in bucket_traffic]
    add_services(batch, [r for r in rows if r not in bucket_traffic], [REGION], partial(describe_service, url=PAGE_URL))
    return batch


fetch = partial(fetch_page, spider=NebiusPricingSpider, build_batch=build_batch)
