"""Hyperstack (NexGen Cloud): per-GPU on-demand and spot prices, storage and egress from its pricing page.

https://www.hyperstack.cloud/gpu-pricing is crawled with a real browser
(scrapy-playwright driving headless Chromium, `HyperstackPricingSpider`): the
price rows are rendered by the page's script, so the HTML as served holds empty
tables. Hyperstack's price API (Infrahub pricebook) needs an API key; the page
does not.

The page prices *per GPU per hour* ("NVIDIA H100 SXM ... $3.20/hr"), and lists
the maximum pCPUs and RAM a VM gets per GPU: each row becomes a one-GPU offer
("1x NVIDIA H100 SXM", gpu_count 1), with those maxima as vcpus/ram_gb (marked
as maxima in provider_data). Multi-GPU VMs cost the same per GPU. Reserved
prices are committed terms, out of scope. The page names no region (Hyperstack
runs CANADA-1, NORWAY-1 and US-1): region "global".

The page: inside `#cloud-pricing`, one card per purchase mode, each an
`<h3>` heading and a table: "On-Demand GPU Pricing" (`table.sort-test-jquery`,
columns GPU Model, VRAM (GB), Max pCPUs per GPU, Max RAM (GB) per GPU, Pricing
Per Hour; per-GPU prices), "Reserved GPU Pricing" (committed terms: out of
scope, not scraped), "Spot VM Pricing" (GPU Model, Pricing Per Hour) and
"Storage & Networking Pricing" (Resource, Price). The rows are filled in by the
page's script from a rate card it fetches, so the served HTML holds empty
tables: a crawler without a browser finds no prices, and this spider waits
for the rendered rows before reading the DOM.

`fetch` does the I/O; `parse_pricing_page` (rendered page -> rows) and
`build_batch` (rows -> Batch) are pure.
"""

from __future__ import annotations

import json
import re
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
    usd_price,
)
from gpuledger.spiders.page_source import (
    LayoutChanged,
    PageFailed,
    PricingSpider,
    add_egress,
    add_storage,
    fetch_page,
    raw_row,
)
from gpuledger.spiders.page_source import scrape as scrape_page
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult

NAME = "hyperstack"
HOST = "www.hyperstack.cloud"
PRICING_PATH = "/gpu-pricing"
PAGE_URL = f"https://{HOST}{PRICING_PATH}"
REGION = "global"
BILLING_DOC = "https://docs.hyperstack.cloud/docs/billing/states-and-billing"
SPOT_DOC = "https://docs.hyperstack.cloud/docs/virtual-machines/spot"

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="page",
    needs_browser=True,  # the price table is rendered by the page's JavaScript
    honours_retry_after=False,
    facts=ProviderFacts(
        display_name="Hyperstack (NexGen Cloud)",
        kind="gpu_cloud",
        billing_granularity_s=60,
        minimum_charge_s=None,
        billing_notes="Billed per minute; the pricing page quotes rates per GPU per hour.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A SHUTOFF VM keeps billing at the full rate; a HIBERNATED VM bills only its "
                              "root disk and public IP.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=None,
        multinode_interconnect=None,
        interruptible_offer="Spot VMs (can be reclaimed at any time)",
        price_source="pricing page https://www.hyperstack.cloud/gpu-pricing (JavaScript-rendered; "
                     "headless Chromium via scrapy-playwright)",
        source_urls=[PAGE_URL, BILLING_DOC, SPOT_DOC],
    ),
)


# -- the rendered page: rows as printed -------------------------------------------------------------

ON_DEMAND_TABLE = "table#on-demand-gpu-pricing"
SPOT_TABLE = "table#spot-gpu-pricing"
STORAGE_TABLE = "table#storage-pricing"
# A rendered data row: the price is the fifth cell (the "Loading prices…" placeholder row has one cell).
ROW_SELECTOR = f"{ON_DEMAND_TABLE} tbody tr td:nth-child(5)"
REQUIRED_COLUMNS = ("gpu model", "vram", "pricing per hour")
STORAGE_NAME = re.compile(r"storage|volume|\bSSD\b|disk|snapshot", re.I)
NETWORK_NAME = re.compile(r"egress|ingress|traffic|bandwidth|\bIP\b", re.I)
NAVIGATION_STATUS_JS = "() => { const n = performance.getEntriesByType('navigation')[0]; return n ? n.responseStatus : 0; }"
# The wait ends when the script has done its work: rows rendered ('rows'); the "Loading prices…"
# placeholder row, served in the HTML, replaced by nothing (the script ran but rendered no rows
# where the spider looks: 'done'); or the placeholder saying something else (the script failed to
# load the rate card: 'page: <text>'). null keeps waiting (the script has not run yet, or the page
# was served without a placeholder).
PLACEHOLDER = ".page-price_loading td"
# "Served with a placeholder" is recorded when the parser finishes the HTML (readyState turns
# 'interactive' before any deferred script runs), so it does not depend on whether the first poll
# comes before or after the script's fetch returns.
MARK_SERVED_PLACEHOLDER_JS = (
    "document.addEventListener('readystatechange', () => {"
    f" if (document.readyState === 'interactive' && document.querySelector('{PLACEHOLDER}'))"
    " window.__gpuledgerPlaceholder = true; });"
)
ROWS_OR_PAGE_ERROR_JS = (
    "(sel) => { if (document.querySelector(sel)) return 'rows';"
    f" const td = document.querySelector('{PLACEHOLDER}');"
    " if (!td) return window.__gpuledgerPlaceholder ? 'done' : null;"
    " const t = td.textContent.trim();"
    " return t && !/^loading/i.test(t) ? 'page: ' + t : null; }"
)


async def mark_served_placeholder(page: Any, request: Any) -> None:
    """Page init callback (before navigation): remember whether the served HTML had the placeholder."""
    await page.add_init_script(MARK_SERVED_PLACEHOLDER_JS)


async def wait_for_rows(page: Any, selector: str, timeout_ms: float) -> dict[str, Any]:
    """PageMethod: wait until the script has rendered price rows; never raises.

    An error page (HTTP >= 400) is not waited on: scrapy's HttpError reports it.
    A timeout is returned, not raised, so the parse step can say "layout
    changed: rows never appeared" instead of a bare Playwright TimeoutError.
    """
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        status = int(await page.evaluate(NAVIGATION_STATUS_JS) or 0)
    except Exception:  # noqa: BLE001 - an older browser without responseStatus: just wait
        status = 0
    if status >= 400:
        return {"rendered": False, "status": status}
    try:
        handle = await page.wait_for_function(ROWS_OR_PAGE_ERROR_JS, arg=selector, timeout=timeout_ms)
        outcome = await handle.json_value()
    except PlaywrightTimeout:
        return {"rendered": False, "timed_out_ms": timeout_ms}
    if isinstance(outcome, str) and outcome.startswith("page: "):
        return {"rendered": False, "page_error": outcome.removeprefix("page: ")}
    if outcome == "done":
        return {"rendered": False, "script_finished": True}
    return {"rendered": True}


def _cell_texts(row: Selector) -> list[str]:
    return [clean_text(" ".join(td.xpath(".//text()").getall())) for td in row.xpath("./td")]


def _heading(table: Selector) -> str:
    h3 = table.xpath("ancestor::div[contains(@class, 'page-price_card')][1]//h3[1]//text()").getall()
    return clean_text(" ".join(h3))


def _table_rows(table: Selector, width: int) -> list[list[str]]:
    return [texts for texts in (_cell_texts(tr) for tr in table.css("tbody tr")) if len(texts) == width]


def parse_on_demand(page: Selector) -> list[PageRow]:
    table = page.css(ON_DEMAND_TABLE)
    if not table:
        raise LayoutChanged(f"no on-demand GPU price table ({ON_DEMAND_TABLE}) on the page")
    labels = [clean_text(" ".join(th.xpath(".//text()").getall())) for th in table[0].css("thead th")]
    lowered = [label.lower() for label in labels]
    missing = [want for want in REQUIRED_COLUMNS if not any(have.startswith(want) for have in lowered)]
    if missing:
        raise LayoutChanged(f"on-demand table header {labels!r} lacks the columns {missing}")
    section = _heading(table[0])
    rows = []
    for index, texts in enumerate(_table_rows(table[0], len(labels))):
        cells = dict(zip(labels, texts))
        rows.append(PageRow(kind=GPU, section=section, name=texts[0], cells=cells, price_text=texts[-1],
                             row_index=index))
    if not rows:
        raise LayoutChanged(f"the on-demand GPU price table ({ON_DEMAND_TABLE}) has no price rows")
    return rows


def parse_spot(page: Selector) -> list[PageRow]:
    rows = []
    for table in page.css(SPOT_TABLE):
        labels = [clean_text(" ".join(th.xpath(".//text()").getall())) for th in table.css("thead th")]
        for index, texts in enumerate(_table_rows(table, len(labels))):
            rows.append(PageRow(kind=GPU, section=_heading(table), name=texts[0], cells=dict(zip(labels, texts)),
                                 spot_text=texts[-1], row_index=index))
    return rows


def parse_services(page: Selector) -> list[PageRow]:
    rows = []
    for table in page.css(STORAGE_TABLE):
        for index, texts in enumerate(_table_rows(table, 2)):
            name, price = texts
            if STORAGE_NAME.search(name):
                kind = STORAGE
            elif NETWORK_NAME.search(name):
                kind = NETWORK
            else:
                continue  # e.g. the Kubernetes control plane: neither storage nor data transfer
            rows.append(PageRow(kind=kind, section=_heading(table), name=name, price_text=price, row_index=index))
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PageRow]:
    """On-demand, spot and storage/networking rows of the rendered page; LayoutChanged without them."""
    page = response.selector if isinstance(response, Response) else response
    return parse_on_demand(page) + parse_spot(page) + parse_services(page)


def render_timeout_s(ctx: SourceContext) -> float:
    """How long to wait for the script to render rows (a missing table fails after this)."""
    return ctx.config.hyperstack_render_timeout_s or (10.0 if ctx.mode == "replay" else 30.0)


class HyperstackPricingSpider(PricingSpider):
    name = "hyperstack_pricing"
    host = HOST
    path = PRICING_PATH
    needs_browser = PROVIDER.needs_browser

    def __init__(self, start_url: str = "", render_timeout_s: str | float = 20, **kwargs: Any) -> None:
        super().__init__(start_url=start_url, **kwargs)
        self.render_timeout_ms = float(render_timeout_s) * 1000

    @classmethod
    def crawl_args(cls, ctx: SourceContext) -> dict[str, str]:
        return {"render_timeout_s": str(render_timeout_s(ctx))}

    def request_meta(self) -> dict[str, Any]:
        from scrapy_playwright.page import PageMethod

        return {
            "playwright": True,
            "playwright_page_init_callback": mark_served_placeholder,
            "playwright_page_methods": [PageMethod(wait_for_rows, ROW_SELECTOR, self.render_timeout_ms)],
        }

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        try:
            return parse_pricing_page(response)
        except LayoutChanged as err:
            methods = response.meta.get("playwright_page_methods") or []
            waited = methods[0].result if methods else None
            if isinstance(waited, dict) and "page_error" in waited:
                raise PageFailed(f"its script did not render the price rows; the page says "
                                 f"{waited['page_error']!r}") from None
            if isinstance(waited, dict) and "timed_out_ms" in waited:
                raise LayoutChanged(f"{err}; the price rows ({ROW_SELECTOR}) did not appear within "
                                    f"{waited['timed_out_ms'] / 1000:g} s of rendering") from None
            if isinstance(waited, dict) and waited.get("script_finished"):
                raise LayoutChanged(f"{err}; the page's script finished loading prices but the price rows "
                                    f"({ROW_SELECTOR}) did not appear") from None
            raise


# -- rows -> records ------------------------------------------------------------------------------

def _interconnect(name: str) -> str | None:
    """The intra-node link the product name states (the VMs' multi-GPU shapes use it)."""
    if re.search(r"\bSXM\b", name, re.I):
        return "NVSwitch"
    if re.search(r"\bNVLink\b", name, re.I):
        return "NVLink"
    return None


def gpu_fields(name: str, specs: dict[str, str]) -> dict[str, Any]:
    """Offer fields for one GPU of `name`; `specs` are the on-demand row's cells (VRAM, maxima)."""
    vram_gb = cell_number(specs, "vram")
    model, exact = canonicalize(NAME, name, vram_gb * 1024 if vram_gb else None)
    return dict(
        instance_type=f"1x {name}", gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=name,
        gpu_vendor=model.vendor, gpu_count=1.0, gpu_memory_gb=vram_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=vram_gb, vcpus=cell_number(specs, "max pcpus"), ram_gb=cell_number(specs, "max ram"),
        interconnect=_interconnect(name),
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _hourly(text: str) -> float | None:
    price = usd_price(text)
    if price is not None and price_unit(text) != "hour":
        raise PriceTextError(f"price {text!r} is not per hour")
    return price


def _provider_data(row: PageRow, shown: str) -> str:
    return json.dumps({"page_section": row.section, "price_text": shown, "price_basis": "per GPU per hour",
                       "vcpus_ram_are_maxima_per_gpu": True}, sort_keys=True)


def add_gpu_row(batch: Batch, row: PageRow, specs_by_name: dict[str, dict[str, str]],
                on_demand: dict[str, float]) -> None:
    spot = bool(row.spot_text)
    option = "spot" if spot else "on_demand"
    shown = row.spot_text if spot else row.price_text
    ref = f"{REGION}/{row.name}/{option}"
    try:
        price = _hourly(shown)
    except PriceTextError as err:
        batch.quarantine("offer", ref, f"price: {err}", raw_row(row))
        return
    if price is None:
        batch.notes.append(f"skipped {row.name!r} {option}: no public price ({shown})")
        return
    try:
        fields = gpu_fields(row.name, specs_by_name.get(row.name, row.cells))
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", ref, f"gpu: {err}", raw_row(row))
        return
    base = on_demand.get(row.name) if spot else None
    ok = batch.offer(ref, raw_row(row), region=REGION, zone="", purchase_option=option, price_per_hour=price,
                     source_currency="USD", source_price_per_hour=price,
                     spot_savings_pct=round(100 * (1 - price / base), 1) if base else None,
                     provider_data=_provider_data(row, shown), **fields)
    if ok and not spot:
        on_demand.setdefault(row.name, price)  # a repeated row is quarantined by the loader, which keeps the first


def storage_description(row: PageRow) -> str:
    hourly = " (per GB-hour x 730 h)" if price_unit(row.price_text) == "gb_hour" else ""
    return f"{row.name}: {row.price_text}{hourly} ({PAGE_URL})"


def build_batch(rows: list[PageRow]) -> Batch:
    """Scraped rows -> offers, storage and egress records (pure). On-demand rows come first on the page."""
    batch = Batch(NAME)
    gpu_rows = [r for r in rows if r.kind == GPU]
    specs_by_name: dict[str, dict[str, str]] = {}
    for r in gpu_rows:
        if not r.spot_text:
            specs_by_name.setdefault(r.name, r.cells)  # the first row of a name, as the loader keeps
    on_demand: dict[str, float] = {}
    for row in sorted(gpu_rows, key=lambda r: bool(r.spot_text)):
        add_gpu_row(batch, row, specs_by_name, on_demand)
    for row in rows:
        if row.kind == STORAGE:
            add_storage(batch, row, [REGION], storage_description(row))
        elif row.kind == NETWORK:
            add_egress(batch, row, [REGION], f"{row.name}: {row.price_text} ({PAGE_URL})")
    return batch


def scrape(ctx: SourceContext) -> CrawlResult:
    return scrape_page(ctx, HyperstackPricingSpider)


def fetch(ctx: SourceContext) -> Batch:
    """Render the pricing page in Chromium (child process) and normalize its rows."""
    return fetch_page(ctx, HyperstackPricingSpider, build_batch)
