"""Hyperstack's GPU pricing page (https://www.hyperstack.cloud/gpu-pricing), rendered in Chromium.

Page structure: inside `#cloud-pricing`, one card per purchase mode, each an
`<h3>` heading and a table: "On-Demand GPU Pricing" (`table.sort-test-jquery`,
columns GPU Model, VRAM (GB), Max pCPUs per GPU, Max RAM (GB) per GPU, Pricing
Per Hour; per-GPU prices), "Reserved GPU Pricing" (committed terms: out of
scope, not scraped), "Spot VM Pricing" (GPU Model, Pricing Per Hour) and
"Storage & Networking Pricing" (Resource, Price). The rows are filled in by the
page's script from a rate card it fetches, so the served HTML holds empty
tables: a crawler without a browser finds no prices, and this spider waits
for the rendered rows before reading the DOM.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from parsel import Selector
from scrapy.http import Response

from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PriceRow, clean_text
from gpuledger.spiders.sites.base import LayoutChanged, PageFailed, PricingSpider

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


def parse_on_demand(page: Selector) -> list[PriceRow]:
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
        rows.append(PriceRow(kind=GPU, section=section, name=texts[0], cells=cells, price_text=texts[-1],
                             row_index=index))
    if not rows:
        raise LayoutChanged(f"the on-demand GPU price table ({ON_DEMAND_TABLE}) has no price rows")
    return rows


def parse_spot(page: Selector) -> list[PriceRow]:
    rows = []
    for table in page.css(SPOT_TABLE):
        labels = [clean_text(" ".join(th.xpath(".//text()").getall())) for th in table.css("thead th")]
        for index, texts in enumerate(_table_rows(table, len(labels))):
            rows.append(PriceRow(kind=GPU, section=_heading(table), name=texts[0], cells=dict(zip(labels, texts)),
                                 spot_text=texts[-1], row_index=index))
    return rows


def parse_services(page: Selector) -> list[PriceRow]:
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
            rows.append(PriceRow(kind=kind, section=_heading(table), name=name, price_text=price, row_index=index))
    return rows


def parse_pricing_page(response: Response | Selector) -> list[PriceRow]:
    """On-demand, spot and storage/networking rows of the rendered page; LayoutChanged without them."""
    page = response.selector if isinstance(response, Response) else response
    return parse_on_demand(page) + parse_spot(page) + parse_services(page)


class HyperstackPricingSpider(PricingSpider):
    name = "hyperstack_pricing"

    def __init__(self, start_url: str = "", render_timeout_s: str | float = 20, **kwargs: Any) -> None:
        super().__init__(start_url=start_url, **kwargs)
        self.render_timeout_ms = float(render_timeout_s) * 1000

    def request_meta(self) -> dict[str, Any]:
        from scrapy_playwright.page import PageMethod

        return {
            "playwright": True,
            "playwright_page_init_callback": mark_served_placeholder,
            "playwright_page_methods": [PageMethod(wait_for_rows, ROW_SELECTOR, self.render_timeout_ms)],
        }

    def parse_rows(self, response: Response) -> Iterable[PriceRow]:
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
