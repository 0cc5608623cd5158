"""Hyperstack (NexGen Cloud): per-GPU on-demand and spot prices, storage and egress from its pricing page.

https://www.hyperstack.cloud/gpu-pricing is rendered in headless Chromium (its script fills the tables from a rate
card). Prices are per GPU-hour: a row is a one-GPU offer, the per-GPU maxima as vcpus/ram_gb, region "global".
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import TYPE_CHECKING, Any, Iterable

from parsel import Selector
from scrapy.http import Response

from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PageRow, cell_number, usd_per_hour
from gpuledger.spiders.page_source import LayoutChanged, PageFailed, PricingSpider, add_services, describe_service
from gpuledger.spiders.page_source import fetch_page, page_spec, quarantined_layout, read_price, require_columns
from gpuledger.spiders.page_source import spot_saving, text_of
from gpuledger.spiders.page_source import scrape as scrape_page
from gpuledger.warehouse.records import Batch

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

NAME = "hyperstack"
HOST = "www.hyperstack.cloud"
PRICING_PATH = "/gpu-pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
BILLING_DOC = "https://docs.hyperstack.cloud/docs/billing/states-and-billing"
SPOT_DOC = "https://docs.hyperstack.cloud/docs/virtual-machines/spot"

PROVIDER = page_spec(
    NAME, needs_browser=True,  # the price table is rendered by the page's JavaScript
    display_name="Hyperstack (NexGen Cloud)", kind="gpu_cloud", billing_granularity_s=60,
    billing_notes="Billed per minute; the pricing page quotes rates per GPU per hour.",
    storage_persists_when_stopped=True, access_ssh=True, access_docker=True,
    stopped_billing_notes="A SHUTOFF VM keeps billing at the full rate; a HIBERNATED VM bills only its "
                          "root disk and public IP.",
    interruptible_offer="Spot VMs (can be reclaimed at any time)",
    price_source="pricing page https://www.hyperstack.cloud/gpu-pricing (JavaScript-rendered; "
                 "headless Chromium via scrapy-playwright)",
    source_urls=[PAGE_URL, BILLING_DOC, SPOT_DOC],
)

ON_DEMAND_TABLE = "table#on-demand-gpu-pricing"
SPOT_TABLE = "table#spot-gpu-pricing"
STORAGE_TABLE = "table#storage-pricing"
# A rendered data row: the price is the fifth cell (the "Loading prices…" placeholder row has one cell).
ROW_SELECTOR = f"{ON_DEMAND_TABLE} tbody tr td:nth-child(5)"
PRICE_COLUMN = "pricing per hour"  # read by its label: a column added after it (a reserved rate) is not the price
REQUIRED_COLUMNS = ("gpu model", "vram", PRICE_COLUMN)
STORAGE_NAME = re.compile(r"storage|volume|\bSSD\b|disk|snapshot", re.I)
NETWORK_NAME = re.compile(r"egress|ingress|traffic|bandwidth|\bIP\b", re.I)
# The wait ends with 'http' (an error page: scrapy's HttpError reports it), 'rows' (rendered), 'done' (the
# served placeholder gone, no rows where the spider looks) or 'page: <text>' (the placeholder says the rate card
# failed); null keeps waiting. Whether the HTML was served with the placeholder is recorded at readyState
# 'interactive', before any deferred script runs.
PLACEHOLDER = ".page-price_loading td"
MARK_SERVED_PLACEHOLDER_JS = ("document.addEventListener('readystatechange', () => { if (document.readyState === "
                              f"'interactive' && document.querySelector('{PLACEHOLDER}')) "
                              "window.__gpuledgerPlaceholder = true; });")
ROWS_OR_PAGE_ERROR_JS = (
    "(sel) => { const nav = performance.getEntriesByType('navigation')[0];"
    " if (nav && nav.responseStatus >= 400) return 'http';"
    " if (document.querySelector(sel)) return 'rows';"
    f" const td = document.querySelector('{PLACEHOLDER}');"
    " if (!td) return window.__gpuledgerPlaceholder ? 'done' : null;"
    " const t = td.textContent.trim(); return t && !/^loading/i.test(t) ? 'page: ' + t : null; }"
)


async def wait_for_rows(page: Any, selector: str, timeout_ms: float) -> dict[str, Any]:
    """PageMethod: wait for the rendered price rows; never raises: without rows it says why, for the parse step."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        outcome = await (await page.wait_for_function(ROWS_OR_PAGE_ERROR_JS, arg=selector, timeout=timeout_ms)
                         ).json_value()
    except PlaywrightTimeout:
        return {"rendered": False, "why": f"the price rows ({selector}) did not appear within "
                                          f"{timeout_ms / 1000:g} s of rendering"}
    if outcome.startswith("page: "):
        return {"rendered": False, "page_error": outcome.removeprefix("page: ")}
    if outcome == "done":
        return {"rendered": False, "why": f"the page's script finished loading prices but the price rows "
                                          f"({selector}) did not appear"}
    return {"rendered": outcome == "rows"}


def _tables(page: Response | Selector, css: str) -> Iterable[tuple[str, list[str], list[list[str]]]]:
    """(card heading, column labels, the cell texts of each body row) per table."""
    for table in page.css(css):
        heading = text_of(table.xpath("ancestor::div[contains(@class, 'page-price_card')][1]//h3[1]"))
        labels = [text_of(th) for th in table.css("thead th")]
        yield heading, labels, [[text_of(td) for td in tr.xpath("./td")] for tr in table.css("tbody tr")]


def _gpu_rows(section: str, labels: list[str], body: list[list[str]], table: str) -> list[PageRow]:
    """A GPU table's rows (`table`: 'on-demand' or 'spot'); a row whose cells do not match the columns is kept,
    marked `_layout`, for build_batch to quarantine: never dropped unseen."""
    # the first column that starts with 'Pricing Per Hour' (require_columns has checked there is one)
    price = next(label for label in labels if label.lower().startswith(PRICE_COLUMN))
    rows = []
    for index, texts in enumerate(body):
        cells = dict(zip(labels, texts))
        if len(texts) != len(labels):
            cells["_layout"] = f"{len(texts)} cells under the {len(labels)} columns of the {table} table"
        text = "" if "_layout" in cells else cells[price]
        rows.append(PageRow(kind=GPU, section=section, name=texts[0] if texts else "", cells=cells,
                            price_text=text if table == "on-demand" else "", spot_text=text if table == "spot" else "",
                            row_index=index))
    return rows


def parse_pricing_page(page: Response | Selector) -> list[PageRow]:
    """On-demand, spot and storage/networking rows of the rendered page; LayoutChanged without them."""
    on_demand = list(_tables(page, ON_DEMAND_TABLE))[:1]
    if not on_demand:
        raise LayoutChanged(f"no on-demand GPU price table ({ON_DEMAND_TABLE}) on the page")
    section, labels, body = on_demand[0]
    require_columns(labels, REQUIRED_COLUMNS, "on-demand table header")
    if not any(len(texts) == len(labels) for texts in body):  # the served "Loading prices…" row is no price row
        raise LayoutChanged(f"the on-demand GPU price table ({ON_DEMAND_TABLE}) has no price rows")
    rows = _gpu_rows(section, labels, body, "on-demand")
    for section, labels, body in _tables(page, SPOT_TABLE):
        require_columns(labels, (PRICE_COLUMN,), "spot table header")
        rows += _gpu_rows(section, labels, body, "spot")
    for section, _, body in _tables(page, STORAGE_TABLE):
        for index, texts in enumerate(body):
            name = texts[0] if texts else ""
            # e.g. the Kubernetes control plane is neither storage nor data transfer
            kind = STORAGE if STORAGE_NAME.search(name) else NETWORK if NETWORK_NAME.search(name) else None
            if kind and len(texts) != 2:
                rows.append(PageRow(kind=kind, section=section, name=name, row_index=index, cells={
                    "_layout": f"{len(texts)} cells under the 2 columns (name, price) of the storage table"}))
            elif kind:
                rows.append(PageRow(kind=kind, section=section, name=name, price_text=texts[1], row_index=index))
    return rows


class HyperstackPricingSpider(PricingSpider):
    name, host, path = "hyperstack_pricing", HOST, PRICING_PATH
    needs_browser = PROVIDER.needs_browser
    complete_marker = None  # the DOM Chromium rendered is read, not the bytes served
    render_timeout_s: str | float = 20  # a spider argument (crawl_args), set by scrapy's Spider.__init__

    @classmethod
    def crawl_args(cls, ctx: SourceContext) -> dict[str, str]:
        """How long to wait for the script to render rows (a missing table fails after this)."""
        timeout_s = ctx.config.hyperstack_render_timeout_s or (10.0 if ctx.mode == "replay" else 30.0)
        return {"render_timeout_s": str(timeout_s)}

    def request_meta(self) -> dict[str, Any]:
        from scrapy_playwright.page import PageMethod

        return {"playwright": True,  # the init callback runs before navigation; its coroutine is awaited
                "playwright_page_init_callback": lambda page, request: page.add_init_script(MARK_SERVED_PLACEHOLDER_JS),
                "playwright_page_methods": [PageMethod(wait_for_rows, ROW_SELECTOR,
                                                       float(self.render_timeout_s) * 1000)]}

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        try:
            return parse_pricing_page(response)
        except LayoutChanged as err:
            methods = response.meta.get("playwright_page_methods") or []
            waited = methods[0].result if methods and isinstance(methods[0].result, dict) else {}
            if "page_error" in waited:
                raise PageFailed(f"its script did not render the price rows; the page says "
                                 f"{waited['page_error']!r}") from None
            if "why" in waited:
                raise LayoutChanged(f"{err}; {waited['why']}") from None
            raise


# The intra-node link a product name states (the VMs' multi-GPU shapes use it).
_LINKS = ((re.compile(r"\bSXM\b", re.I), "NVSwitch"), (re.compile(r"\bNVLink\b", re.I), "NVLink"))


def _is_spot(row: PageRow) -> bool:
    return bool(row.spot_text) or row.cells.get("_layout", "").endswith("the spot table")


def add_gpu_row(batch: Batch, row: PageRow, specs_by_name: dict[str, dict[str, str]],
                on_demand: dict[str, float]) -> None:
    spot = _is_spot(row)
    option, shown = ("spot", row.spot_text) if spot else ("on_demand", row.price_text)
    ref = f"{REGION}/{row.name}/{option}"
    if quarantined_layout(batch, "offer", ref, row):
        return
    specs = specs_by_name.get(row.name, row.cells)  # a spot row's GPU is described by its on-demand row
    price = read_price(batch, "offer", ref, row, shown, usd_per_hour, f"{row.name!r} {option}")
    if price is None:
        return
    try:
        vram_gb, vcpus, ram_gb = (cell_number(specs, p) for p in ("vram", "max pcpus", "max ram"))
    except ValueError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", row.raw())
        return
    data = json.dumps({"page_section": row.section, "price_text": shown, "price_basis": "per GPU per hour",
                       "vcpus_ram_are_maxima_per_gpu": True}, sort_keys=True)
    link = next((link for words, link in _LINKS if words.search(row.name)), None)
    ok = batch.offer(ref, row.raw(), gpu=row.name, gpu_memory_gb=vram_gb, gpu_count=1.0, region=REGION, zone="",
                     instance_type=f"1x {row.name}", purchase_option=option, price_per_hour=price, vcpus=vcpus,
                     ram_gb=ram_gb, interconnect=link, provider_data=data,
                     spot_savings_pct=spot_saving(price, on_demand.get(row.name)) if spot else None)
    if ok and not spot:
        on_demand.setdefault(row.name, price)  # a repeated row is quarantined by the loader, which keeps the first


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure)."""
    batch = PROVIDER.batch()
    gpu_rows = [r for r in rows if r.kind == GPU]
    # a name's first on-demand row describes its GPU, as the loader keeps the first
    specs_by_name = {r.name: r.cells for r in reversed(gpu_rows) if not _is_spot(r) and "_layout" not in r.cells}
    on_demand: dict[str, float] = {}
    for row in sorted(gpu_rows, key=_is_spot):
        add_gpu_row(batch, row, specs_by_name, on_demand)
    add_services(batch, rows, [REGION], partial(describe_service, url=PAGE_URL))
    return batch


scrape = partial(scrape_page, spider=HyperstackPricingSpider)
fetch = partial(fetch_page, spider=HyperstackPricingSpider, build_batch=build_batch)
