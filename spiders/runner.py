"""Run one spider crawl in a child process of its own (scrapy's Twisted reactor starts once per process) and
read its items back; a failure or timeout becomes a one-line SourceError naming the provider, the URL and why."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger import children

# adapters.base (httpx, tenacity, ...) is imported where used: the crawl child runs this module.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

EXIT_OK = 0
EXIT_FAILED = 3
FAILURE_PREFIX = "gpuledger spider failed: "  # the child's last stderr line on failure
ITEMS_FILE = "items.jsonl"  # the crawl's item feed (scrapy's FEEDS), in its work folder


@dataclass
class CrawlResult:
    items: list[dict[str, Any]]  # the item feed, one dict per PageRow
    status: dict[str, Any]  # the child's status.json: counts, the settings it ran with


def child_env() -> dict[str, str]:
    """Our environment less a stray Scrapy project, plus a Node compile cache for the Playwright driver (one set
    is kept) and a 1 MB V8 young generation: it relays few messages (the default took it from 105 to 117 MB)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuledger" / "node-compile-cache"
    env.setdefault("NODE_COMPILE_CACHE", str(cache))
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --max-semi-space-size=1".strip()
    return env


def crawl_timeout_s(ctx: SourceContext) -> float:
    """Setting `spider_timeout_s`: a browser render can hang where HTTP would not."""
    return ctx.config.spider_timeout_s or (60.0 if ctx.mode == "replay" else 300.0)


def crawl(ctx: SourceContext, spider: str, host: str, path: str, settings: dict[str, Any],
          timeout_s: float | None = None, spider_args: dict[str, str] | None = None) -> CrawlResult:
    """Crawl `ctx.url(host) + path` with spider `module:Class` in a child process; SourceError (provider,
    host+path, crawled URL, reason) on a failed crawl, a non-zero exit or the timeout."""
    from gpuledger.adapters.base import SourceError

    start_url = ctx.url(host) + path
    where = f"{host}{path}" + (f" (crawled at {start_url})" if not start_url.startswith(f"https://{host}") else "")
    timeout_s = timeout_s or crawl_timeout_s(ctx)
    with tempfile.TemporaryDirectory(prefix="gpuledger-crawl-") as folder:
        work = Path(folder)
        (work / "settings.json").write_text(json.dumps(settings))
        args = ["--spider", spider, "--url", start_url, "--settings", str(work / "settings.json"),
                "--out", str(work / ITEMS_FILE), "--status", str(work / "status.json")]
        for key, value in (spider_args or {}).items():
            args += ["--arg", f"{key}={value}"]
        rc, stderr = children.run("gpuledger.spiders.runner", args, timeout_s, cwd=work, env=child_env())
        if rc is None:
            raise SourceError(f"{ctx.provider}: crawl of {where} timed out after {timeout_s:g} s; "
                              f"{last_log_line(stderr)}")
        try:
            status = json.loads((work / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        ctx.requests_made += int(status.get("requests", 0))
        ctx.count_bytes(int(status.get("bytes", 0)))
        if rc != EXIT_OK:
            reason = status.get("failure") or f"the crawler exited with code {rc}; {last_log_line(stderr)}"
            raise SourceError(f"{ctx.provider}: scrape of {where} failed: {reason}")
        items = _read_feed(work / ITEMS_FILE)
        if items is None or len(items) != status.get("items"):
            held = "was not written" if items is None else f"holds {len(items)} items"
            raise SourceError(f"{ctx.provider}: scrape of {where} failed: its item feed {held}, "
                              f"the crawl scraped {status.get('items')}")
    return CrawlResult(items=items, status=status)


def last_log_line(stderr: str) -> str:
    """For a crawl that could not say why it failed: its last log line (a crash's exception), secrets redacted."""
    from gpuledger.adapters.base import redact

    line = children.last_words(stderr)
    return f"its last log line: {redact(line)}" if line else "it logged nothing"


def _read_feed(path: Path) -> list[dict[str, Any]] | None:
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# -- the child process --------------------------------------------------------------

def _judge(stats: dict[str, Any], spider_failure: str | None, items: int, url: str) -> str | None:
    """Why this crawl must count as failed, or None when it produced a price table."""
    if spider_failure:
        return spider_failure
    if stats.get("robotstxt/forbidden"):
        return f"robots.txt forbids {url}"
    reason = stats.get("finish_reason")
    if reason != "finished":
        return f"the crawl ended early ({reason})"
    for prefix, what in (("spider_exceptions/", "the spider raised"),
                         ("feedexport/failed_count/", "the item feed could not be written")):
        counts = {k: v for k, v in stats.items() if k.startswith(prefix) and v}
        if counts:
            return f"{what} {counts}"
    if items == 0:
        return f"no price rows scraped from {url}"
    return None


def run_child(args: argparse.Namespace) -> int:
    """The crawl child: crawl `args.url`, write the item feed and the status file; EXIT_FAILED on a failure."""
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.misc import load_object

    from gpuledger.spiders.items import PAGE_ROW_FIELDS
    from gpuledger.spiders.settings import BROWSER_SAME_HOST_ONLY

    url = args.url
    settings = json.loads(Path(args.settings).read_text())
    if settings.pop(BROWSER_SAME_HOST_ONLY, False):
        from gpuledger.spiders import fence
        from gpuledger.spiders.browser import same_host_only

        settings["PLAYWRIGHT_ABORT_REQUEST"] = same_host_only(url)
        fence.ALLOWED_ORIGINS.add(fence.origin_of(url))
    # the items as JSON lines, the columns of PageRow in order
    settings["FEEDS"] = {args.out: {"format": "jsonlines", "encoding": "utf-8", "fields": list(PAGE_ROW_FIELDS),
                                    "overwrite": True}}
    effective: dict[str, Any] = {}

    def opened(spider: Any) -> None:  # a named function: scrapy holds signal receivers weakly
        effective.update(effective_settings(crawler))

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(load_object(args.spider.replace(":", ".")))
    crawler.signals.connect(opened, signal=signals.spider_opened)
    process.crawl(crawler, start_url=url, **dict(arg.split("=", 1) for arg in args.arg))
    process.start()

    stats = crawler.stats.get_stats() if crawler.stats else {}
    items = int(stats.get("item_scraped_count", 0))
    failure = _judge(stats, getattr(crawler.spider, "failure", None), items, url)
    status = {"failure": failure, "items": items, "requests": stats.get("downloader/request_count", 0),
              "bytes": stats.get("downloader/response_bytes", 0), "effective": effective}
    Path(args.status).write_text(json.dumps(status, default=str))
    if failure:
        print(f"{FAILURE_PREFIX}{failure}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _names(objects: Any) -> list[str]:
    return sorted(f"{type(o).__module__}.{type(o).__name__}" for o in objects)


def effective_settings(crawler: Any) -> dict[str, Any]:
    """What the running crawl really uses, read from the crawler at spider_opened: tests check the child by it."""
    s = crawler.settings
    launch = s.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    return {
        "USER_AGENT": s.get("USER_AGENT"), "ROBOTSTXT_OBEY": s.getbool("ROBOTSTXT_OBEY"),
        "TELNETCONSOLE_ENABLED": s.getbool("TELNETCONSOLE_ENABLED"), "COOKIES_ENABLED": s.getbool("COOKIES_ENABLED"),
        "browser_args": list(launch.get("args") or []), "browser_headless": launch.get("headless"),
        "abort_request_filter": callable(s.get("PLAYWRIGHT_ABORT_REQUEST")),
        "browser_provider": s.get("PLAYWRIGHT_BROWSER_PROVIDER"),
        "extensions": _names(crawler.extensions.middlewares),
        "downloader_middlewares": _names(crawler.engine.downloader.middleware.middlewares),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one gpuledger spider crawl (used by spiders.runner.crawl).")
    for name, what in (("spider", "module:Class of the spider"), ("url", "start URL"),
                       ("settings", "JSON file of scrapy settings"), ("out", "file the item feed is written to"),
                       ("status", "JSON file the crawl status is written to")):
        parser.add_argument(f"--{name}", required=True, help=what)
    parser.add_argument("--arg", action="append", default=[], help="spider argument key=value")
    args = parser.parse_args(argv)
    children.end_with_parent()
    return run_child(args)


if __name__ == "__main__":
    sys.exit(main())
