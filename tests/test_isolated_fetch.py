"""The CPU-heavy sources fetch in a child process; the result, errors and timeouts are the thread's."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from gpuledger.adapters.base import SourceError
from gpuledger.flows import pipeline
from gpuledger.flows.isolated import ChildCrashed, fetch_in_child
from gpuledger.flows.pipeline import ScrapeTimeout, SourcePlan, fetch_source, fetch_within


# Module-level, so a spawned child imports them by name.
def process_of(plan: SourcePlan) -> int:
    return os.getpid()


def fails(plan: SourcePlan) -> None:
    raise SourceError(f"{plan.provider}: HTTP 503 from the price list")


class TwoArgumentError(Exception):
    def __init__(self, code: int, operation: str) -> None:
        super().__init__(f"{operation} answered {code}")


def fails_oddly(plan: SourcePlan) -> None:
    raise TwoArgumentError(503, "GetProducts")


def hangs(plan: SourcePlan) -> None:
    time.sleep(120)


def dies(plan: SourcePlan) -> None:
    os._exit(9)


def what_the_child_holds(plan: SourcePlan) -> dict[str, object]:
    """Redaction, the modules imported and pyarrow's first conversion, as a fetch child sees them."""
    import sys

    import pyarrow as pa

    from gpuledger.adapters.base import redact
    from gpuledger.adapters.registry import SOURCES

    redacted = redact(f"answered 401 for key {os.environ['LAMBDA_API_KEY']}")
    try:
        import pandas  # noqa: F401
        pandas_import = "imported"
    except ModuleNotFoundError:
        pandas_import = "refused"
    return {"redacted": redacted, "source modules": sorted(set(SOURCES.values()) & set(sys.modules)),
            "converted": pa.array([1.5, 2.0]).to_pylist(), "pandas": pandas_import}


def no_timeout() -> BaseException:
    return AssertionError("the child was given up on before its timeout")


def test_the_heavy_sources_fetch_in_a_child_and_the_others_on_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "fetch_source", process_of)
    assert fetch_within(SourcePlan("gcp", mode="replay"), 60) != os.getpid()
    assert fetch_within(SourcePlan("lambda", mode="replay"), 60) == os.getpid()


def test_a_source_error_in_the_child_is_raised_as_it_is() -> None:
    with pytest.raises(SourceError, match=r"^gcp: HTTP 503 from the price list$"):
        fetch_in_child(fails, SourcePlan("gcp"), 60, no_timeout)


def test_an_error_that_cannot_be_rebuilt_here_keeps_its_type_and_text() -> None:
    with pytest.raises(SourceError, match=r"^TwoArgumentError: GetProducts answered 503$"):
        fetch_in_child(fails_oddly, SourcePlan("aws"), 60, no_timeout)


def test_a_child_past_its_timeout_is_killed() -> None:
    started = time.monotonic()
    with pytest.raises(ScrapeTimeout, match="gave up"):
        fetch_in_child(hangs, SourcePlan("aws"), 1.0, lambda: ScrapeTimeout("aws: gave up"))
    assert time.monotonic() - started < 30  # not the 120 s the child sleeps
    assert multiprocessing.active_children() == []


def test_a_child_that_dies_without_a_result_says_so() -> None:
    with pytest.raises(ChildCrashed, match=r"fetch process of vastai ended without a result \(exit code 9\)"):
        fetch_in_child(dies, SourcePlan("vastai"), 60, no_timeout)


def test_a_child_redacts_the_refresh_secrets_without_importing_every_source(monkeypatch: pytest.MonkeyPatch) -> None:
    # The refresh hands the child the secret variables' names: learning them itself would import
    # all 21 source modules (Scrapy and Twisted with the page sources) into every fetch process.
    # And pyarrow's first conversion works there with pandas refused (installed: the test extra).
    monkeypatch.setenv("LAMBDA_API_KEY", "canary-lambda-7f3e9a")
    held = fetch_in_child(what_the_child_holds, SourcePlan("vastai"), 60, no_timeout)
    assert held == {"redacted": "answered 401 for key [redacted]", "source modules": [],
                    "converted": [1.5, 2.0], "pandas": "refused"}


def test_a_replayed_source_fetched_in_a_child_gives_the_records_a_thread_gives(replay) -> None:
    server = replay("vastai")
    plan = SourcePlan("vastai", mode="replay", replay_urls=server.endpoints(), settings=server.settings.get("vastai", {}))
    on_thread = fetch_source(plan)
    in_child = fetch_within(plan, 120)
    assert in_child.requests == on_thread.requests
    assert in_child.batch.offers and in_child.batch.quarantined  # the recording has both
    assert in_child.batch.offers == on_thread.batch.offers
    assert in_child.batch.quarantined == on_thread.batch.quarantined
    assert list(in_child.batch.notes) == list(on_thread.batch.notes)


def test_the_fork_server_imports_scrapy_only_for_a_refresh_with_a_page_source(monkeypatch) -> None:
    from gpuledger import forkserver

    monkeypatch.setattr(forkserver, "_preload", list(forkserver.FETCH_MODULES))
    pipeline.prepare_children(["aws", "gcp", "lambda"])  # API sources only
    assert forkserver._preload == ["gpuledger.flows.pipeline"]
    pipeline.prepare_children(["aws", "coreweave"])
    assert forkserver._preload == ["gpuledger.flows.pipeline", "scrapy.crawler",
                                   "scrapy.core.downloader.handlers.http11", "scrapy.extensions.feedexport"]


def test_the_crawl_modules_start_no_reactor_in_the_fork_server() -> None:
    """A reactor installed in the fork server would be every crawl child's, already chosen (and not
    the asyncio one the browser crawls need): the preloaded modules must leave it to the crawl."""
    import subprocess
    import sys

    from gpuledger import forkserver

    code = ("import importlib, sys\n"
            f"for m in {list(forkserver.CRAWL_MODULES)!r}: importlib.import_module(m)\n"
            "print('twisted.internet.reactor' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
