"""The common shape of a pricing-page spider: one start URL, loud failure, plain items.

A spider records *why* it failed in `failure` (HTTP status, robots.txt, layout
change) and closes; the runner turns that into a non-zero exit and the parent
into a SourceError. A page that parses to no price table is a failure, never an
empty success.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterable

import scrapy
from scrapy.exceptions import CloseSpider, IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.python.failure import Failure

from gpuledger.spiders.items import PriceRow


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
    name = "pricing"
    # The page's last bytes always hold this (e.g. b"</html>" for a page that always closes its
    # document): without it the answer was cut short, even when its Content-Length matched.
    complete_marker: bytes | None = None

    def __init__(self, start_url: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not start_url:
            raise ValueError(f"{self.name}: start_url is required")
        self.start_url = start_url
        self.failure: str | None = None

    def request_meta(self) -> dict[str, Any]:
        return {}

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request(self.start_url, callback=self.parse_page, errback=self.on_error,
                             meta=self.request_meta(), dont_filter=True)

    def parse_rows(self, response: Response) -> Iterable[PriceRow]:
        raise NotImplementedError

    def truncated(self, response: Response) -> str | None:
        """Why the page as served is incomplete, or None."""
        if self.complete_marker is None or self.complete_marker in response.body[-2048:].lower():
            return None
        return (f"the page ends without {self.complete_marker.decode()} after {len(response.body)} bytes "
                "(a truncated answer)")

    def parse_page(self, response: Response) -> Iterable[dict[str, Any]]:
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
            yield row.to_dict()

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
