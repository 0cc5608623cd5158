"""Run one spider crawl in a fresh Python process and read its items back.

Scrapy's Twisted reactor can be started once per process, so a process that scrapes twice would
fail on the second crawl. Each crawl therefore runs in a child process of its own
(`python -m gpuledger.spiders.runner ...`, gpuledger.children), in its own work folder: the child
starts one CrawlerProcess, writes the items through scrapy's feed export (JSON lines) and a small
status file, and exits non-zero when the crawl did not produce a price table. The parent enforces
a timeout (killing the child's whole process group, browser included) and turns any failure into
a SourceError that names the provider, the URL and the child's last log lines.
"""

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

# adapters.base (httpx, tenacity, ...) is imported where used: the crawl child runs this module
# and never needs it.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

STDERR_TAIL_CHARS = 1500
EXIT_OK = 0
EXIT_FAILED = 3
FAILURE_PREFIX = "gpuledger spider failed: "  # the child's last stderr line on failure
ITEMS_FILE = "items.jsonl"  # the crawl's item feed (scrapy's FEEDS), in its work folder


@dataclass
class CrawlResult:
    items: list[dict[str, Any]]  # the item feed, one dict per PageRow
    status: dict[str, Any]  # the child's status.json: counts, the settings it ran with


def default_timeout_s(ctx: SourceContext) -> float:
    """Whole-crawl limit (setting `spider_timeout_s`): a browser render can hang where HTTP would not."""
    fallback = 60.0 if ctx.mode == "replay" else 300.0
    return ctx.config.spider_timeout_s or fallback


def _tail(stderr: str) -> str:
    """The child's last log lines (its own failure line left out: the message already says it)."""
    text = "\n".join(line for line in stderr.splitlines() if not line.startswith(FAILURE_PREFIX))
    return text[-STDERR_TAIL_CHARS:].strip()


def node_compile_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuledger" / "node-compile-cache"


NODE_SEMI_SPACE = "--max-semi-space-size=1"


def child_env() -> dict[str, str]:
    """The crawl child's environment: ours, less a stray Scrapy project, plus a Node compile cache
    and a smaller young generation for the Playwright driver.

    Playwright's driver is a Node.js process that compiles its JavaScript at every start; Node
    (>= 22.1) keeps the compiled code in NODE_COMPILE_CACHE, so later browser crawls reuse it.
    A NODE_COMPILE_CACHE already set is kept; an unwritable directory only disables the cache.
    """
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("SCRAPY_SETTINGS_MODULE", None)  # our settings only, never a stray project's
    env.setdefault("NODE_COMPILE_CACHE", str(node_compile_cache_dir()))
    # The driver's young generation at 1 MB: it relays a few messages per page, and V8's default
    # semi-spaces took its PSS from 105 to 117 MB. Added to the user's own NODE_OPTIONS.
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} {NODE_SEMI_SPACE}".strip()
    return env


def crawl(ctx: SourceContext, spider: str, host: str, path: str, settings: dict[str, Any],
          timeout_s: float | None = None, spider_args: dict[str, str] | None = None) -> CrawlResult:
    """Crawl `ctx.url(host) + path` with spider `module:Class` in a child process.

    Raises SourceError (provider, real host+path, crawled URL, reason, log tail) on
    a failed crawl, a non-zero exit, or the timeout.
    """
    from gpuledger.adapters.base import SourceError

    start_url = ctx.url(host) + path
    where = f"{host}{path}" + (f" (crawled at {start_url})" if not start_url.startswith(f"https://{host}") else "")
    timeout = timeout_s if timeout_s is not None else default_timeout_s(ctx)
    with tempfile.TemporaryDirectory(prefix="gpuledger-crawl-") as folder:
        work = Path(folder)
        (work / "settings.json").write_text(json.dumps(settings))
        args = ["--spider", spider, "--url", start_url, "--settings", str(work / "settings.json"),
                "--out", str(work / ITEMS_FILE), "--status", str(work / "status.json")]
        for key, value in (spider_args or {}).items():
            args += ["--arg", f"{key}={value}"]
        rc, stderr = children.run("gpuledger.spiders.runner", args, timeout, cwd=work, env=child_env())
        tail = _tail(stderr)
        if rc is None:
            raise SourceError(f"{ctx.provider}: crawl of {where} timed out after {timeout:g} s; "
                              f"log tail: {tail or '(no log output)'}")
        try:
            status = json.loads((work / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        ctx.requests_made += int(status.get("requests", 0))
        ctx.count_bytes(int(status.get("bytes", 0)))
        if rc != EXIT_OK:
            reason = status.get("failure") or f"the crawler exited with code {rc}"
            raise SourceError(f"{ctx.provider}: scrape of {where} failed: {reason}; "
                              f"log tail: {tail or '(no log output)'}")
        items = _read_feed(work / ITEMS_FILE)
        if items is None or len(items) != status.get("items"):
            held = "was not written" if items is None else f"holds {len(items)} items"
            raise SourceError(f"{ctx.provider}: scrape of {where} failed: its item feed {held}, "
                              f"the crawl scraped {status.get('items')}")
    return CrawlResult(items=items, status=status)


def _read_feed(path: Path) -> list[dict[str, Any]] | None:
    """The items of a crawl's JSON-lines feed; None when the feed file is missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


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
    errors = {k: v for k, v in stats.items() if k.startswith("spider_exceptions/") and v}
    if errors:
        return f"the spider raised {errors}"
    unwritten = {k: v for k, v in stats.items() if k.startswith("feedexport/failed_count/") and v}
    if unwritten:
        return f"the item feed could not be written {unwritten}"
    if items == 0:
        return f"no price rows scraped from {url}"
    return None


def run_child(spider_path: str, url: str, settings: dict[str, Any], out: Path, status_path: Path,
              spider_args: dict[str, str]) -> int:
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.misc import load_object

    from gpuledger.spiders.settings import BROWSER_SAME_HOST_ONLY, item_feed

    if settings.pop(BROWSER_SAME_HOST_ONLY, False):
        from gpuledger.spiders import fence
        from gpuledger.spiders.browser import same_host_only

        settings["PLAYWRIGHT_ABORT_REQUEST"] = same_host_only(url)
        fence.ALLOWED_ORIGINS.add(fence.origin_of(url))
    settings["FEEDS"] = item_feed(out)
    spider_cls = load_object(spider_path)
    effective: dict[str, Any] = {}

    def opened(spider: Any) -> None:
        effective.update(effective_settings(crawler))

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider_cls)
    crawler.signals.connect(opened, signal=signals.spider_opened)
    process.crawl(crawler, start_url=url, **spider_args)
    process.start()

    stats = crawler.stats.get_stats() if crawler.stats else {}
    spider_failure = getattr(crawler.spider, "failure", None)
    items = int(stats.get("item_scraped_count", 0))
    failure = _judge(stats, spider_failure, items, url)
    status = {
        "failure": failure,
        "finish_reason": stats.get("finish_reason"),
        "items": items,
        "requests": stats.get("downloader/request_count", 0),
        "responses": stats.get("downloader/response_count", 0),
        "bytes": stats.get("downloader/response_bytes", 0),
        "robots_forbidden": stats.get("robotstxt/forbidden", 0),
        "elapsed_s": stats.get("elapsed_time_seconds"),
        "effective": effective,
    }
    status_path.write_text(json.dumps(status, default=str))
    if failure:
        print(f"{FAILURE_PREFIX}{failure}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _names(objects: Any) -> list[str]:
    return sorted(f"{type(o).__module__}.{type(o).__name__}" for o in objects)


def effective_settings(crawler: Any) -> dict[str, Any]:
    """What the running crawl really uses (read back from the crawler, not from our settings file):
    reported in status.json so tests can check the child, not only the dict we hand it."""
    s = crawler.settings
    launch = s.getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    downloader = getattr(getattr(crawler, "engine", None), "downloader", None)
    return {
        "USER_AGENT": s.get("USER_AGENT"),
        "ROBOTSTXT_OBEY": s.getbool("ROBOTSTXT_OBEY"),
        "TELNETCONSOLE_ENABLED": s.getbool("TELNETCONSOLE_ENABLED"),
        "COOKIES_ENABLED": s.getbool("COOKIES_ENABLED"),
        "AUTOTHROTTLE_ENABLED": s.getbool("AUTOTHROTTLE_ENABLED"),
        "DOWNLOAD_HANDLERS": s.getdict("DOWNLOAD_HANDLERS"),
        "browser_args": list(launch.get("args") or []),
        "browser_headless": launch.get("headless"),
        "abort_request_filter": callable(s.get("PLAYWRIGHT_ABORT_REQUEST")),
        "browser_provider": s.get("PLAYWRIGHT_BROWSER_PROVIDER"),
        "extensions": _names(crawler.extensions.middlewares) if crawler.extensions else [],
        "downloader_middlewares": _names(downloader.middleware.middlewares) if downloader else [],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one gpuledger spider crawl (used by spiders.runner.crawl).")
    parser.add_argument("--spider", required=True, help="module:Class or module.Class of the spider")
    parser.add_argument("--url", help="start URL")
    parser.add_argument("--settings", help="JSON file of scrapy settings")
    parser.add_argument("--out", help="file the item feed (JSON lines) is written to")
    parser.add_argument("--status", help="JSON file the crawl status is written to")
    parser.add_argument("--arg", action="append", default=[], help="spider argument key=value")
    args = parser.parse_args(argv)
    missing = [f"--{name}" for name in ("url", "settings", "out", "status") if not getattr(args, name)]
    if missing:
        parser.error(f"{', '.join(missing)} required")
    children.end_with_parent()
    settings = json.loads(Path(args.settings).read_text())
    spider_args = dict(a.split("=", 1) for a in args.arg)
    return run_child(args.spider.replace(":", "."), args.url, settings, Path(args.out), Path(args.status), spider_args)

if __name__ == "__main__":
    sys.exit(main())
