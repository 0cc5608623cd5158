"""What every page source shares: its spider's base class, the crawl, and the rows every
pricing page has (storage, egress) made into records.

A page source is one module (`spiders/<provider>.py`): its facts, its page parsing, its
spider (a `PricingSpider` subclass naming the page) and its pure `build_batch(rows)`; its
`fetch(ctx)` is `fetch_page(ctx, TheSpider, build_batch)`. The crawl runs in a child
process (`spiders.runner`), whose items come back through scrapy's feed export.

A spider records *why* it failed in `failure` (HTTP status, robots.txt, layout change)
and closes; the runner turns that into a non-zero exit and the parent into a
SourceError. A page that parses to no price table is a failure, never an empty success.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from gpuledger.spiders.items import GPU, PageRow, PriceTextError, is_free, parse_money, price_unit, slug, usd_per_gb_month
from gpuledger.warehouse.records import Batch

# The crawl child imports this module (through its spider's): adapters.base and the crawl
# machinery are imported where the parent uses them, so the child never loads them.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult


class LayoutChanged(Exception):
    """The page answered, but the price table we parse is not where it was (or is empty)."""

    what = "layout changed"


class PageFailed(LayoutChanged):
    """The page answered, but says itself that its prices could not be loaded."""

    what = "the page failed to load its prices"


# Errors whose text is empty, said in words.
_ERROR_WORDS = {
    "ResponseDataLossError": "the connection closed before the whole body arrived (connection reset or cut)",
    "ResponseFailed": "the response could not be read (connection lost)",
}


class PricingSpider(scrapy.Spider):
    """One pricing page: where it is (`host` + `path`), how to read it (`parse_rows`)."""

    name = "pricing"
    host = ""  # the site's real host; the context maps it to a loopback port under replay
    path = ""
    needs_browser = False  # True: the page is rendered in headless Chromium (scrapy-playwright)
    # The page's last bytes always hold this (e.g. b"</html>" for a page that always closes its
    # document): without it the answer was cut short, even when its Content-Length matched.
    complete_marker: bytes | None = None

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not start_url:
            raise ValueError(f"{self.name}: start_url is required")
        self.start_url = start_url
        self.failure: str | None = None

    @classmethod
    def page_url(cls) -> str:
        return f"https://{cls.host}{cls.path}"

    @classmethod
    def crawl_args(cls, ctx: SourceContext) -> dict[str, str]:
        """Spider arguments the crawl child passes to `__init__` (strings: they cross as JSON)."""
        return {}

    def request_meta(self) -> dict[str, Any]:
        return {}

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.start_url, callback=self.parse_page, errback=self.on_error,
                             meta=self.request_meta(), dont_filter=True)

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        raise NotImplementedError

    def truncated(self, response: Response) -> str | None:
        """Why the page as served is incomplete, or None."""
        if self.complete_marker is None or self.complete_marker in response.body[-2048:].lower():
            return None
        return (f"the page ends without {self.complete_marker.decode()} after {len(response.body)} bytes "
                "(a truncated answer)")

    def parse_page(self, response: Response) -> Iterable[PageRow]:
        cut = self.truncated(response)
        if cut:
            self.failure = f"incomplete page at {response.url}: {cut}"
            raise CloseSpider("truncated")
        try:
            rows = list(self.parse_rows(response))
        except LayoutChanged as err:
            self.failure = f"{err.what} at {response.url}: {err}"
            raise CloseSpider("layout_changed") from None
        for row in rows:
            row.source_url = response.url
            yield row

    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        url = request.url if request is not None else self.start_url
        if failure.check(HttpError):
            self.failure = f"HTTP {failure.value.response.status} from {url}"
        elif failure.check(IgnoreRequest):
            self.failure = f"request to {url} not made: {failure.value or 'forbidden by robots.txt'}"
        else:
            name = failure.type.__name__
            detail = str(failure.value).strip() or _ERROR_WORDS.get(name, "no detail given")
            self.failure = f"{url} failed: {name}: {detail}"
        raise CloseSpider("download_failed")


# -- the crawl (in the parent process) -----------------------------------------------------------

def spider_path(spider: type[PricingSpider]) -> str:
    """`module:Class`, how the crawl child finds the spider."""
    return f"{spider.__module__}:{spider.__qualname__}"


def scrape(ctx: SourceContext, spider: type[PricingSpider], timeout_s: float | None = None) -> CrawlResult:
    """Crawl the spider's page in a child process: plain HTTP, or rendered in Chromium."""
    from gpuledger.spiders.runner import crawl
    from gpuledger.spiders.settings import browser_settings, crawl_settings

    if spider.needs_browser:
        from gpuledger.spiders.browser import find_chromium

        settings = browser_settings(ctx, find_chromium(ctx), scheme=urlsplit(ctx.url(spider.host)).scheme)
    else:
        settings = crawl_settings(ctx)
    return crawl(ctx, spider_path(spider), spider.host, spider.path, settings, timeout_s=timeout_s,
                 spider_args=spider.crawl_args(ctx))


def fetch_page(ctx: SourceContext, spider: type[PricingSpider], build_batch: Callable[[list[PageRow]], Batch]) -> Batch:
    """Crawl the page and normalize its rows; SourceError when no row makes a valid priced offer."""
    from gpuledger.adapters.base import SourceError

    rows = [PageRow.from_dict(item) for item in scrape(ctx, spider).items]
    batch = build_batch(rows)
    if not batch.offers:
        reasons = sorted({q.reason for q in batch.quarantined})[:3]
        raise SourceError(f"{batch.provider}: {spider.page_url()} gave {sum(r.kind == GPU for r in rows)} GPU rows "
                          f"but no valid priced offer (quarantined: {reasons or 'none'})")
    return batch


# -- rows every pricing page has -------------------------------------------------------------------

def raw_row(row: PageRow) -> dict[str, Any]:
    """The row as kept with its records: the crawled URL left out (loopback under replay)."""
    raw = row.to_dict()
    raw.pop("source_url", None)
    return raw


def add_storage(batch: Batch, row: PageRow, regions: list[str], description: str) -> None:
    """A storage row, priced per GB-month (hourly rates at 730 h), once per region."""
    try:
        price = usd_per_gb_month(row.price_text)
    except PriceTextError as err:
        batch.quarantine("storage", row.name, f"price: {err}", raw_row(row))
        return
    if price is None:
        batch.notes.append(f"skipped storage {row.name!r}: no public price ({row.price_text})")
        return
    for region in regions:
        batch.add("storage", f"{region}/{row.name}", raw_row(row), region=region, storage_class=slug(row.name),
                  usd_per_gb_month=price[0], source_currency=price[1], source_usd_per_gb_month=price[0],
                  description=description)


def add_egress(batch: Batch, row: PageRow, regions: list[str], description: str) -> None:
    """Data transfer out to the internet (free, or USD per GB), once per region.

    Only rows named egress count: public IPs, cross-connects and the like are out of scope.
    """
    if not re.search(r"\begress\b", row.name, re.I):
        return
    if is_free(row.price_text):
        usd = 0.0
    else:
        try:
            money = parse_money(row.price_text)
        except PriceTextError as err:
            batch.quarantine("egress", row.name, f"price: {err}", raw_row(row))
            return
        if money is None or price_unit(row.price_text) != "gb" or money[1] != "USD":
            batch.quarantine("egress", row.name, f"egress price {row.price_text!r} is not USD per GB", raw_row(row))
            return
        usd = money[0]
    for region in regions:
        batch.add("egress", f"{region}/internet", raw_row(row), region=region, destination="internet",
                  tier_start_gb=0.0, tier_end_gb=None, usd_per_gb=usd, source_currency="USD", source_usd_per_gb=usd,
                  description=description)
