"""Finding and configuring the headless Chromium that renders JavaScript pricing pages: the `chromium_path`
setting, else one on PATH or where distributions install it, else the one `playwright install` downloads."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

# adapters.base (httpx, tenacity, ...) is imported where used: the crawl child imports this module.
if TYPE_CHECKING:
    from gpuledger.adapters.base import SourceContext

# The headless shell first: every page here renders headless, and it took 195 MB of PSS against 329 MB
# for the full browser on the Hyperstack recording.
PATH_NAMES = ("chromium-headless-shell", "chrome-headless-shell", "chromium", "chromium-browser",
              "google-chrome-stable", "google-chrome")
# Where distributions install it, for a PATH that lacks /usr/bin (cron, some task runners).
KNOWN_LOCATIONS = ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium", "/usr/bin/chromium-browser",
                   "/snap/bin/chromium")
# Headless in a container: no GPU, /tmp instead of a small /dev/shm, no phoning home. The sandbox stays on
# except where Chromium cannot run with it (as root, or the `chromium_no_sandbox` setting); nothing else
# weakens the browser. GPU and network services in the browser process, and no zygote unsandboxed: one
# rendered page took 3 processes and 181 MB PSS instead of 7 and 199 MB.
UNSANDBOXED_ARGS = ("--no-sandbox", "--no-zygote")
BROWSER_ARGS = ("--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                "--in-process-gpu", "--enable-features=NetworkServiceInProcess2")
# Sub-resources a price table never needs; skipping them keeps renders fast.
SKIPPED_RESOURCE_TYPES = frozenset({"image", "media", "font"})


def _executable(path: str | None) -> str | None:
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def playwright_chromium() -> str | None:
    """Playwright's own downloaded Chromium, if `playwright install chromium` was run."""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            return _executable(p.chromium.executable_path)
    except Exception:  # noqa: BLE001 - not installed, or any failure: not available
        return None


def find_chromium(ctx: SourceContext) -> str:
    """Path of a runnable Chromium; SourceError naming the provider when there is none."""
    from gpuledger.adapters.base import SourceError
    from gpuledger.warehouse.settings import env_name

    explicit = ctx.config.chromium_path
    if explicit:
        found = _executable(str(explicit)) or _executable(shutil.which(str(explicit)))
        if found:
            return found
        raise SourceError(f"{ctx.provider}: the configured Chromium {explicit!r} is not an executable file")
    candidates = [shutil.which(name) for name in PATH_NAMES] + list(KNOWN_LOCATIONS)
    found = next(filter(None, map(_executable, candidates)), None) or playwright_chromium()
    if found:
        return found
    raise SourceError(f"{ctx.provider}: no Chromium found to render the pricing page: install Debian's "
                      f"chromium-headless-shell, run `playwright install chromium`, or set {env_name('chromium_path')} "
                      "to a Chromium executable")


def needs_no_sandbox() -> bool:
    """As root, or where the `chromium_no_sandbox` setting says the machine has no user namespaces."""
    from gpuledger.warehouse.settings import load_settings  # here: the crawl child imports this module

    return os.geteuid() == 0 or load_settings().chromium_no_sandbox


def launch_args() -> list[str]:
    return list(UNSANDBOXED_ARGS if needs_no_sandbox() else ()) + list(BROWSER_ARGS)


def launch_options(executable_path: str, timeout_ms: float) -> dict[str, Any]:
    return {"executable_path": executable_path, "args": launch_args(), "headless": True, "timeout": timeout_ms}


def same_host_only(start_url: str) -> Callable[[Any], bool]:
    """PLAYWRIGHT_ABORT_REQUEST predicate: the page reaches only its own origin (third-party scripts never
    render the price table; under replay this keeps it on its loopback port). fence.py closes the rest."""
    allowed = urlsplit(start_url)[:2]

    def abort(request: Any) -> bool:
        return request.resource_type in SKIPPED_RESOURCE_TYPES or urlsplit(request.url)[:2] != allowed

    return abort


class PageBytes:
    """The byte limit of a crawl's answers (DOWNLOAD_MAXSIZE, which scrapy-playwright never reads) for a rendered
    page: the response bodies it received, its own and those of the requests its JavaScript made, summed as
    Chromium received them (Playwright's request sizes: encoded, before they inflate). Each is counted once
    Chromium holds it whole, so this bounds what leaves Chromium (the rendered page copied into the crawl and
    parsed: several times the page), not what Chromium itself receives: that is bounded by the navigation and
    render timeouts only."""

    def __init__(self, limit: int) -> None:
        self.limit, self.received = limit, 0
        self.counting: set[asyncio.Task[None]] = set()

    def meta(self, meta: dict[str, Any]) -> dict[str, Any]:
        """`meta` of a scrapy-playwright request with the count attached and checked after its page methods."""
        from scrapy_playwright.page import PageMethod

        handlers = {**meta.get("playwright_page_event_handlers", {}), "requestfinished": self.finished}
        return {**meta, "playwright_page_event_handlers": handlers,
                "playwright_page_methods": [*meta.get("playwright_page_methods", []), PageMethod(self.check)]}

    def finished(self, request: Any) -> None:
        task = asyncio.ensure_future(self.count(request))
        self.counting.add(task)
        task.add_done_callback(self.counting.discard)

    async def count(self, request: Any) -> None:
        self.received += (await request.sizes())["responseBodySize"]

    async def check(self, page: Any) -> None:
        """IgnoreRequest (scrapy's "made, then given up") past the limit, before the page's HTML is read out."""
        from scrapy.exceptions import IgnoreRequest

        await asyncio.gather(*self.counting)
        if self.received > self.limit:
            raise IgnoreRequest(f"the page and the requests its script made received {self.received:,} bytes, "
                                f"over the limit of {self.limit:,} (DOWNLOAD_MAXSIZE)")


def ensure_browser(on_install: Callable[[], None] | None = None) -> str:
    """Find a Chromium, or install one and return its path: Debian's package as root (playwright cannot
    download browsers on every network), else `playwright install chromium`. `on_install` announces it."""
    from gpuledger.adapters.base import SourceContext, SourceError

    ctx = SourceContext(provider="browser")
    with contextlib.suppress(SourceError):
        return find_chromium(ctx)
    if on_install is not None:
        on_install()
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        _run_installer(["apt-get", "update", "-qq"], env)
        try:
            _run_installer(["apt-get", "install", "-y", "-qq", "chromium-headless-shell"], env)
        except RuntimeError:  # a release without that package ("Unable to locate package")
            _run_installer(["apt-get", "install", "-y", "-qq", "chromium"], env)
    else:
        _run_installer([sys.executable, "-m", "playwright", "install", "chromium"], dict(os.environ))
    return find_chromium(ctx)


def _run_installer(cmd: list[str], env: dict[str, str]) -> None:
    """One install step, its output captured (dpkg prints progress even under -qq); a failure raises with
    the step's last line of output, which names the cause."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        last = lines[-1] if lines else "no output"
        shown = " ".join([os.path.basename(cmd[0])] + [word for word in cmd[1:] if not word.startswith("-")])
        raise RuntimeError(f"`{shown}` exited {done.returncode}: {last[:300]}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--ensure"]:
        sys.exit("usage: python -m gpuledger.spiders.browser --ensure   (find or install a Chromium for JS pages)")
    print(f"chromium: {ensure_browser(on_install=lambda: print('no Chromium found: installing one ...', flush=True))}")
