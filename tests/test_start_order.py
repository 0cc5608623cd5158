"""The order nightly_refresh submits its provider tasks in (flows.pipeline.start_order), and which
fetch with a large process waits for which (flows.pipeline.turn_waits)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from gpuledger.flows.pipeline import last_scrape_seconds, plans_for, start_order, turn_waits
from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, close_writer, load_outcome, open_writer
from tests.builders import T0, batch, offer


def names(plans: list) -> list[str]:
    return [p.provider for p in plans]


def test_the_browser_page_first_then_the_large_api_sources_the_pages_and_the_rest_longest_first() -> None:
    plans = plans_for(["aws", "coreweave", "gcp", "hyperstack", "lambda", "nebius", "vastai"], "replay")
    assert names(start_order(plans)) == ["hyperstack", "aws", "gcp", "coreweave", "nebius", "lambda", "vastai"]
    last = {"lambda": 30.0, "aws": 80.0, "gcp": 95.0, "nebius": 9.0, "coreweave": 2.0, "vastai": 40.0}
    assert names(start_order(plans, last)) == ["hyperstack", "gcp", "aws", "nebius", "coreweave", "vastai", "lambda"]


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


def test_the_third_large_fetch_waits_for_the_first_and_the_small_ones_for_none() -> None:
    plans = start_order(plans_for(["aws", "coreweave", "gcp", "hyperstack", "lambda", "vastai"], "replay"))
    assert turn_waits(plans, 2) == {"gcp": "hyperstack"}
    assert turn_waits(plans, 1) == {"aws": "hyperstack", "gcp": "aws"}
    assert turn_waits(plans, 0) == {}
    assert turn_waits(plans_for(["aws", "gcp", "lambda"], "replay"), 2) == {}  # two large ones: no wait
