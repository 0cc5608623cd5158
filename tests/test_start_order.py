"""The order nightly_refresh submits its provider tasks in (flows.pipeline.start_order), and the
turns the fetches with a large process take (flows.pipeline.large_fetch_turn)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.flows.pipeline import large_fetch_turn, last_scrape_seconds, plans_for, start_order
from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, close_writer, load_outcome, open_writer
from tests.builders import T0, batch, offer


def names(plans: list) -> list[str]:
    return [p.provider for p in plans]


def test_page_sources_start_first_the_browser_one_before_them_then_the_longest() -> None:
    plans = plans_for(["aws", "coreweave", "gcp", "hyperstack", "lambda", "nebius"], "replay")
    assert names(start_order(plans)) == ["hyperstack", "coreweave", "nebius", "aws", "gcp", "lambda"]
    last = {"lambda": 30.0, "aws": 80.0, "gcp": 5.0, "nebius": 9.0, "coreweave": 2.0}
    assert names(start_order(plans, last)) == ["hyperstack", "nebius", "coreweave", "aws", "lambda", "gcp"]


def test_last_scrape_seconds_reads_each_providers_latest_successful_scrape(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    assert last_scrape_seconds(db) == {}  # no warehouse yet: registry order
    con = open_writer(db)
    try:
        def scrape(provider: str, day: int, seconds: float, error: str | None = None) -> None:
            start = T0 + timedelta(days=day)
            rows = None if error else batch(provider, [offer(f"{provider}-gpu", 2.0)])
            load_outcome(con, ScrapeOutcome(provider, "replay", start, start + timedelta(seconds=seconds), batch=rows,
                                            error=error), f"refresh-{day}", AnomalyPolicy(), now=start)

        scrape("lambda", 0, 3.0)
        scrape("lambda", 1, 12.5)  # the latest successful one counts
        scrape("runpod", 0, 4.0)
        scrape("runpod", 1, 60.0, error="runpod: HTTP 503")  # a failure says nothing of a scrape's length
        scrape("vastai", 0, 60.0, error="vastai: HTTP 503")
    finally:
        close_writer(con)
    assert last_scrape_seconds(db) == {"lambda": 12.5, "runpod": 4.0}


class Holder:
    """A fetch that takes its turn in a thread and holds it until released."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.inside = threading.Event()
        self.release = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with large_fetch_turn(self.provider):
            self.inside.set()
            self.release.wait(30)


def test_two_large_fetches_at_once_the_third_waits_for_one_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULEDGER_LARGE_FETCHES", raising=False)
    browser, aws = Holder("hyperstack"), Holder("aws")
    assert browser.inside.wait(10) and aws.inside.wait(10)
    gcp = Holder("gcp")
    assert not gcp.inside.wait(1.0)  # both turns are taken
    started = time.monotonic()
    with large_fetch_turn("lambda"):  # an API source with a small process never waits
        assert time.monotonic() - started < 0.5
    browser.release.set()
    assert gcp.inside.wait(10)
    for holder in (aws, gcp):
        holder.release.set()
        holder.thread.join(10)


def test_no_turns_with_the_limit_at_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_LARGE_FETCHES", "0")
    holders = [Holder(p) for p in ("hyperstack", "aws", "gcp")]
    assert all(h.inside.wait(10) for h in holders)
    for holder in holders:
        holder.release.set()
        holder.thread.join(10)
