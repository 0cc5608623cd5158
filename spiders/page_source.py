"""What every page source shares: its spec, its spider's base class (a spider records why it failed in
`failure`; a page without a price table fails, never an empty success), the crawl, reading a page's elements,
and the GPU, storage and egress rows made into records."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable
from urllib.parse import urlsplit

import scrapy
from parsel import Selector, SelectorList
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from gpuledger.adapters.contract import ProviderSpec
from gpuledger.spiders.items import GPU, NETWORK, STORAGE, PageRow, PriceTextError, clean_text, is_free, parse_money
from gpuledger.spiders.items import price_unit, slug, usd_per_gb_month
from gpuledger.warehouse.records import Batch, ProviderFacts

# adapters.base and the crawl machinery are imported where the parent uses them: the crawl child imports this.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext
    from gpuledger.spiders.runner import CrawlResult


def page_spec(name: str, needs_browser: bool = False, **facts: Any) -> ProviderSpec:
    """A page source's spec. Scrapy's retry middleware does not wait as a 429's Retry-After asks."""
    return ProviderSpec(name=name, source_kind="page", needs_browser=needs_browser, honours_retry_after=False,
                        facts=ProviderFacts(**facts))


class LayoutChanged(Exception):
    """The page answered, but the price table we parse is not where it was (or is empty)."""

    what = "layout changed"


class PageFailed(LayoutChanged):
    what = "the page failed to load its prices"  # the page says itself that its prices could not be loaded


# Errors whose text is empty, said in words.
_ERROR_WORDS = {
    "ResponseDataLossError": "the connection closed before the whole body arrived (connection reset or cut)",
    "ResponseFailed": "the response could not be read (connection lost)",
}


def _browser_exit(text: str) -> str:
    """For a Chromium that exited under Playwright: how it exited and the last line it printed ('' otherwise)."""
    exited = re.search(r"<process did exit: ([^>]*)>", text)
    if not exited:
        return ""
    said = re.findall(r"\]\[err\] (.+)", text)
    return f"; Chromium exited ({exited.group(1)})" + (f": {said[-1].strip()}" if said else "")


class PricingSpider(scrapy.Spider):
    """One pricing page: where it is (`host` + `path`), how to read it (`parse_rows`)."""

    name = "pricing"
    host = ""  # the site's real host; the context maps it to a loopback port under replay
    path = ""
    needs_browser = False  # True: the page is rendered in headless Chromium (scrapy-playwright)
    # The page's last bytes always hold this: without it the answer was cut short. None: not checked.
    complete_marker: bytes | None = b"</html>"
    start_url = ""  # a spider argument, set by scrapy's Spider.__init__ (the crawl child passes it)
    failure: str | None = None  # why the crawl failed, for the child's status

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
        meta = self.request_meta()
        if meta.get("playwright"):
            from gpuledger.spiders.browser import PageBytes

            meta = PageBytes(self.settings.getint("DOWNLOAD_MAXSIZE")).meta(meta)
        yield scrapy.Request(self.start_url, callback=self.parse_page, errback=self.on_error, meta=meta,
                             dont_filter=True)

    def parse_rows(self, response: Response) -> Iterable[PageRow]:
        raise NotImplementedError

    def parse_page(self, response: Response) -> Iterable[PageRow]:
        if urlsplit(response.url)[:2] != urlsplit(self.start_url)[:2]:  # another site's prices are not this one's
            self.failure = f"the page redirected to another site, {response.url}: not read"
            raise CloseSpider("offsite_redirect")
        marker = self.complete_marker
        if marker is not None and marker not in response.body[-2048:].lower():
            self.failure = (f"incomplete page at {response.url}: the page ends without {marker.decode()} after "
                            f"{len(response.body)} bytes (a truncated answer)")
            raise CloseSpider("truncated")
        try:
            rows = list(self.parse_rows(response))
        except LayoutChanged as err:
            self.failure = f"{err.what} at {response.url}: {err}"
            raise CloseSpider("layout_changed") from None
        except Exception as err:  # noqa: BLE001 - any other parse failure (not HTML at all): said in one line
            kind = response.headers.get(b"Content-Type", b"none").decode("latin-1")
            self.failure = (f"the page at {response.url} could not be read (Content-Type {kind}): "
                            f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}")
            raise CloseSpider("unreadable") from None
        for row in rows:
            row.source_url = response.url
            yield row

    def on_error(self, failure: Failure) -> None:
        request = getattr(failure, "request", None)
        url = request.url if request is not None else self.start_url
        if failure.check(HttpError):
            self.failure = f"HTTP {failure.value.response.status} from {url}"
        elif failure.check(IgnoreRequest) and (not str(failure.value) or "robots.txt" in str(failure.value)):
            self.failure = f"request to {url} not made: {failure.value or 'forbidden by robots.txt'}"
        elif failure.check(IgnoreRequest):  # made, then given up: over the answer limit, a redirect loop
            self.failure = f"{url}: {failure.value}"
        else:
            name, text = failure.type.__name__, str(failure.value).strip()
            # the first line: Playwright's errors go on with the browser's call log
            detail = text.split("\n", 1)[0] or _ERROR_WORDS.get(name, "no detail given")
            self.failure = f"{url}: {name}: {detail}{_browser_exit(text)}"
        raise CloseSpider("download_failed")


def spider_path(spider: type[PricingSpider]) -> str:
    """`module:Class`, how the crawl child finds the spider."""
    return f"{spider.__module__}:{spider.__qualname__}"


def scrape(ctx: SourceContext, spider: type[PricingSpider]) -> CrawlResult:
    """Crawl the spider's page in a child process: plain HTTP, or rendered in Chromium."""
    from gpuledger.spiders.runner import crawl
    from gpuledger.spiders.settings import browser_settings, crawl_settings

    if spider.needs_browser:
        from gpuledger.spiders.browser import find_chromium

        settings = browser_settings(ctx, find_chromium(ctx), scheme=urlsplit(ctx.url(spider.host)).scheme)
    else:
        settings = crawl_settings(ctx)
    return crawl(ctx, spider_path(spider), spider.host, spider.path, settings, spider_args=spider.crawl_args(ctx))


def fetch_page(ctx: SourceContext, spider: type[PricingSpider], build_batch: Callable[[list[PageRow]], Batch]) -> Batch:
    """Crawl the page and normalize its rows; SourceError when no row makes a valid offer."""
    from gpuledger.adapters.base import SourceError

    rows = [PageRow.from_dict(item) for item in scrape(ctx, spider).items]
    batch = build_batch(rows)
    if not batch.offers:  # the failure keeps no notes: it says why the rows gave nothing
        reasons = sorted({q.reason for q in batch.quarantined})[:3]
        skipped = [note for note in batch.notes
                   if note.startswith("skipped") and not note.startswith("skipped storage")]
        why = f"; {len(skipped)} skipped, e.g. {skipped[0]!r}" if skipped else ""
        raise SourceError(f"{batch.provider}: {spider.page_url()} gave {sum(r.kind == GPU for r in rows)} GPU rows "
                          f"but no valid priced offer (quarantined: {reasons or 'none'}{why})")
    return batch


ALL_TEXT = ".//text()"
NO_FOOTNOTES = ".//text()[not(ancestor::sup)]"  # footnote markers ('4<sup>1</sup>') left out


def has_class(name: str) -> str:
    """An XPath test for an element carrying the CSS class `name`."""
    return f"contains(concat(' ', normalize-space(@class), ' '), ' {name} ')"


def text_of(sel: Selector | SelectorList, texts: str = ALL_TEXT) -> str:
    """The text of an element (or of a selector list) as a reader sees it; `texts` picks its text nodes."""
    return clean_text(" ".join(sel.xpath(texts).getall()))


def require_columns(labels: list[str], wanted: Iterable[str], what: str) -> None:
    """LayoutChanged unless every `wanted` prefix (lower case) starts one of the column labels."""
    lowered = [label.lower() for label in labels]
    missing = [want for want in wanted if not any(have.startswith(want) for have in lowered)]
    if missing:
        raise LayoutChanged(f"{what} {labels!r} lacks the columns {missing}")


def spot_saving(spot: float, on_demand: float | None) -> float | None:
    """How much cheaper the spot price is, in percent of the on-demand one."""
    return round(100 * (1 - spot / on_demand), 1) if on_demand else None


def add_gpu_offers(batch: Batch, ref: str, raw: Any, priced: dict[str, tuple[float | None, dict[str, Any]]],
                   **fields: Any) -> bool:
    """A row's offers, `priced`: purchase option -> (price or None, provider_data); spot at `ref/spot` with its
    saving. A GPU the canon lacks quarantines the row once (and gives False)."""
    on_demand = priced["on_demand"][0] if "on_demand" in priced else None
    for option, (price, data) in priced.items():
        if price is None:
            continue
        extra = {"spot_savings_pct": spot_saving(price, on_demand)} if option == "spot" else {}
        if not batch.offer(f"{ref}/spot" if option == "spot" else ref, raw, purchase_option=option,
                           price_per_hour=price, provider_data=data, **extra, **fields) \
                and batch.quarantined[-1].reason.startswith("gpu: "):
            return False
    return True


def add_shown_prices(batch: Batch, ref: str, row: PageRow, on_demand: float | None, spot: float | None,
                     data: dict[str, Any], skipped: str, **fields: Any) -> None:
    """The offers of a row showing an on-demand and a spot price (add_gpu_offers), provider_data `data` and the
    price text; a shown price that is no public one is noted as `skipped`, unless the row's GPU is quarantined."""
    shown = (("on_demand", on_demand, row.price_text), ("spot", spot, row.spot_text))
    priced = {option: (price, {**data, "price_text": text}) for option, price, text in shown}
    if add_gpu_offers(batch, ref, row.raw(), priced, **fields):
        for option, price, text in shown:
            if text and price is None:
                batch.notes.append(f"skipped {skipped} {option.replace('_', '-')}: no public price ({text})")


def add_services(batch: Batch, rows: list[PageRow], regions: list[str], describe: Callable[[PageRow], str]) -> None:
    """The storage and egress rows' records, once per region; `describe(row)` their description."""
    for row in rows:
        if row.kind == STORAGE:
            add_storage(batch, row, regions, describe(row))
        elif row.kind == NETWORK:
            add_egress(batch, row, regions, describe(row))


def describe_service(row: PageRow, url: str) -> str:
    """'name: price (url)', saying how a storage price per GiB or per GB-hour was made one per GB-month."""
    how = {"gib_month": " (per GiB converted to per GB: / 1.073741824)", "gb_hour": " (per GB-hour x 730 h)"}
    how_made = how.get(price_unit(row.price_text) or "", "") if row.kind == STORAGE else ""
    return f"{row.name}: {row.price_text}{how_made} ({url})"


def quarantined_layout(batch: Batch, kind: str, ref: str, row: PageRow) -> bool:
    """Whether the parser marked `row` `_layout` (its cells are not under the columns they would be read as):
    then it is quarantined as a `kind` record."""
    if "_layout" not in row.cells:
        return False
    batch.quarantine(kind, ref, f"layout: {row.cells['_layout']}", row.raw())
    return True


def read_price(batch: Batch, kind: str, ref: str, row: PageRow, text: str, parse: Callable[[str], Any],
               skipped: str) -> Any:
    """`parse(text)`; None when it gives no price: a PriceTextError quarantines `row` as a `kind` record, a
    'no public price' is noted as `skipped`."""
    try:
        price = parse(text)
    except PriceTextError as err:
        batch.quarantine(kind, ref, f"price: {err}", row.raw())
        return None
    if price is None:
        batch.notes.append(f"skipped {skipped}: no public price ({text})")
    return price


def add_storage(batch: Batch, row: PageRow, regions: list[str], description: str) -> None:
    """A storage row, priced per GB-month (hourly rates at 730 h), once per region."""
    if quarantined_layout(batch, "storage", row.name, row):
        return
    price = read_price(batch, "storage", row.name, row, row.price_text, usd_per_gb_month, f"storage {row.name!r}")
    if price is None:
        return
    for region in regions:
        batch.add("storage", f"{region}/{row.name}", row.raw(), region=region, storage_class=slug(row.name),
                  usd_per_gb_month=price[0], source_currency=price[1], source_usd_per_gb_month=price[0],
                  description=description)


def add_egress(batch: Batch, row: PageRow, regions: list[str], description: str) -> None:
    """Internet egress (free, or USD per GB), once per region; only rows named egress (not IPs, links)."""
    if not re.search(r"\begress\b", row.name, re.I):
        return
    if quarantined_layout(batch, "egress", row.name, row):
        return
    free = is_free(row.price_text)
    try:
        money = (0.0, "USD") if free else parse_money(row.price_text)
    except PriceTextError as err:
        batch.quarantine("egress", row.name, f"price: {err}", row.raw())
        return
    if money is None or not free and (price_unit(row.price_text) != "gb" or money[1] != "USD"):
        batch.quarantine("egress", row.name, f"egress price {row.price_text!r} is not USD per GB", row.raw())
        return
    for region in regions:
        batch.add("egress", f"{region}/internet", row.raw(), region=region, destination="internet", tier_start_gb=0.0,
                  tier_end_gb=None, usd_per_gb=money[0], source_currency="USD", source_usd_per_gb=money[0],
                  description=description)
