"""Scrapy settings for one crawl: robots.txt obeyed, gpuledger's User-Agent, throttled live (no delay under
replay, whose site is loopback), the telnet console and remote-control extension always off."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# adapters.base (httpx, tenacity, ...) is imported where used: the crawl child imports this module.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

# Marker key the runner turns into playwright's same-host request filter (a callable cannot cross as JSON).
BROWSER_SAME_HOST_ONLY = "gpuledger.browser_same_host_only"

# Taken out of scrapy's base lists, not set to None: scrapy imports every component a list names before it
# asks whether it is enabled, and those imports (aiohttp, tldextract) are much of a crawl child's start-up CPU.
UNUSED_COMPONENTS = {
    "EXTENSIONS_BASE": ("scrapy.extensions.telnet.TelnetConsole", "scrapy.extensions.remote_control.RemoteControl"),
    "DOWNLOADER_MIDDLEWARES_BASE": ("scrapy.downloadermiddlewares.cookies.CookiesMiddleware",
                                    "scrapy.downloadermiddlewares.httpcache.HttpCacheMiddleware"),
}


def crawl_settings(ctx: SourceContext) -> dict[str, Any]:
    """Settings for a plain-HTTP crawl (server-rendered pages)."""
    from scrapy.settings import default_settings

    from gpuledger.adapters.base import USER_AGENT
    from gpuledger.adapters.bounds import answer_limit

    delay = ctx.config.spider_download_delay_s
    # Replay (or recording from a replay) answers from loopback: no real site to be polite to.
    local = not ctx.reaches_provider
    return {
        "USER_AGENT": USER_AGENT, "ROBOTSTXT_OBEY": True, "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False, "COOKIES_ENABLED": False, "HTTPCACHE_ENABLED": False,
        "CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "DOWNLOAD_TIMEOUT": ctx.http_timeout_s,
        # the byte limit of every answer (ProviderSpec.max_answer_mb, on the wire or inflated; a rendered page's,
        # which scrapy-playwright never reads, by browser.PageBytes); scrapy's own, 1 GiB, is more than a crawl
        # child can hold: a page is held several times over while it is parsed
        "DOWNLOAD_MAXSIZE": answer_limit(ctx.provider), "DOWNLOAD_WARNSIZE": 0,
        "RETRY_ENABLED": True, "RETRY_TIMES": max(0, ctx.http_attempts - 1), "REDIRECT_ENABLED": True,
        "LOG_LEVEL": ctx.config.spider_log_level,
        "TWISTED_REACTOR": "twisted.internet.asyncioreactor.AsyncioSelectorReactor",
        **{name: {path: order for path, order in getattr(default_settings, name).items() if path not in unused}
           for name, unused in UNUSED_COMPONENTS.items()},
        **({"AUTOTHROTTLE_ENABLED": False, "DOWNLOAD_DELAY": 0.0, "DOWNLOAD_DELAY_JITTER": 0} if local else {
            "AUTOTHROTTLE_ENABLED": True, "AUTOTHROTTLE_START_DELAY": delay, "AUTOTHROTTLE_MAX_DELAY": 30.0,
            "AUTOTHROTTLE_TARGET_CONCURRENCY": 1.0, "DOWNLOAD_DELAY": delay}),
    }


def browser_settings(ctx: SourceContext, chromium_path: str, scheme: str = "https") -> dict[str, Any]:
    """Settings for a page rendered by headless Chromium (scrapy-playwright). Only the page's own scheme gets
    the handler: each scheme's handler starts a Playwright driver, a Node.js process of its own."""
    from gpuledger.spiders.browser import launch_options
    from gpuledger.spiders.runner import crawl_timeout_s

    timeout_ms = ctx.http_timeout_s * 1000
    # A Chromium that never starts is named as such, before the whole crawl's timeout ends it without a word.
    launch_timeout_ms = min(timeout_ms, crawl_timeout_s(ctx) * 1000 / 2)
    return {**crawl_settings(ctx),
            "DOWNLOAD_HANDLERS": {scheme: "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"},
            "PLAYWRIGHT_BROWSER_TYPE": "chromium",
            "PLAYWRIGHT_LAUNCH_OPTIONS": launch_options(chromium_path, launch_timeout_ms),
            "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": timeout_ms, "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 1,
            "PLAYWRIGHT_BROWSER_PROVIDER": "gpuledger.spiders.fence.FencedBrowsers", BROWSER_SAME_HOST_ONLY: True}
