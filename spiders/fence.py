"""The fence around a rendered page: its browser contexts reach only the page's own origin.

PLAYWRIGHT_ABORT_REQUEST misses WebSockets, popups and service workers: every context gets a route aborting
other origins (popups included), WebSockets are refused, service workers blocked. Crawl child only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from scrapy_playwright.provider import PlaywrightBrowserProvider

ALLOWED_ORIGINS: set[tuple[str, str]] = set()  # (scheme, netloc) of the crawl's start URL, set by the runner


def origin_of(url: str) -> tuple[str, str]:
    return urlsplit(url)[:2]


class FencedBrowser:
    """The launched browser, each of its new contexts fenced; everything else as the browser's."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser

    def __getattr__(self, name: str) -> Any:
        return getattr(self.browser, name)

    async def new_context(self, **kwargs: Any) -> Any:
        context = await self.browser.new_context(**{**kwargs, "service_workers": "block"})

        async def route(route: Any) -> None:
            if origin_of(route.request.url) in ALLOWED_ORIGINS:
                await route.fallback()
            else:
                await route.abort("blockedbyclient")

        await context.route("**/*", route)
        await context.route_web_socket(lambda url: True, lambda ws: ws.close())  # its close() is awaited
        return context


class FencedBrowsers(PlaywrightBrowserProvider):
    async def launch_browser(self) -> Any:
        return FencedBrowser(await super().launch_browser())
