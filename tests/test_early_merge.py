"""The providers fetched while a refresh's last, large fetch still runs are merged meanwhile
(flows.pipeline.merge_early); the write window then merges that one only. The warehouse ends the
same as with every provider merged in the window, nothing is published before the window, and a
signal or a failure leaves things as they were without the early merge."""

from __future__ import annotations

import resource
import signal
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.pipeline import (
    EarlyMerge, fetch_source, load_keeping_fetched, merge_early, outcome_from, plans_for, waits_for_last_large_fetch,
)
from gpuledger.flows.stopping import RefreshInterrupted, Stopper
from gpuledger.warehouse import pending
from gpuledger.warehouse.snapshot import work_path
from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, prepare_loads, utcnow
from tests.builders import lambda_price_hook, replayed_warehouse
from tests.test_pending import a10_prices


def fetched(providers: list[str]) -> list[ScrapeOutcome]:
    """`providers` fetched by their real clients from the bundled recordings, Lambda's
    gpu_1x_a10 at $1.50 instead of the recorded $1.29."""
    server = ReplayServer(BUNDLED_RECORDINGS, providers=providers, hook=lambda_price_hook("gpu_1x_a10", 150))
    server.start()
    try:
        outcomes = []
        for plan in plans_for(providers, "replay", server.endpoints(), server.settings, http_attempts=1):
            started = utcnow()
            outcomes.append(outcome_from(fetch_source(plan), plan, None, started))
        return outcomes
    finally:
        server.close()


def warehouse_rows(db: Path) -> dict[str, list[tuple]]:
    """What a refresh wrote, without the run ids and times that differ from one refresh to another."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "offers": con.execute("select provider, region, zone, instance_type, purchase_option, price_per_hour "
                                  "from offers order by all").fetchall(),
            "history": con.execute("select provider, region, instance_type, purchase_option, price_per_hour, "
                                   "valid_to is null from offer_history order by all").fetchall(),
            "runs": con.execute("select refresh_id, provider, state, rows_loaded, offers_new, offers_changed, "
                                "offers_closed from scrape_runs order by all").fetchall(),
            "egress": con.execute("select * exclude (first_seen, last_seen, run_id) from egress_prices "
                                  "order by all").fetchall(),
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def outcomes() -> list[ScrapeOutcome]:
    return fetched(["lambda", "runpod"])


@pytest.fixture
def two_warehouses(tmp_path: Path) -> tuple[Path, Path]:
    """Two warehouses holding the bundled Lambda and RunPod, Lambda's gpu_1x_a10 at $1.29."""
    first, second = tmp_path / "early.duckdb", tmp_path / "window.duckdb"
    replayed_warehouse(first, ["lambda", "runpod"])
    second.write_bytes(first.read_bytes())
    return first, second


def test_only_a_large_fetch_left_is_waited_for_with_the_others_merged() -> None:
    assert waits_for_last_large_fetch(["aws", "lambda", "gcp"], {"lambda", "gcp"})
    assert waits_for_last_large_fetch(["aws", "lambda", "gcp"], {"aws", "lambda"})
    assert not waits_for_last_large_fetch(["aws", "lambda", "gcp"], {"lambda"})  # two left
    assert not waits_for_last_large_fetch(["aws", "lambda"], {"aws"})  # a small one left
    assert not waits_for_last_large_fetch(["aws", "lambda"], {"aws", "lambda"})  # none left


def test_merged_early_the_warehouse_ends_as_if_merged_in_the_window(two_warehouses: tuple[Path, Path],
                                                                    outcomes: list[ScrapeOutcome]) -> None:
    early_db, window_db = two_warehouses
    lambda_outcome = outcomes[:1]
    early = merge_early(early_db, lambda_outcome, prepare_loads(lambda_outcome), "refresh-e", AnomalyPolicy())
    assert isinstance(early, EarlyMerge) and [r.state for r in early.reports] == ["ok"]
    assert a10_prices(early_db) == [(1.29,)]  # nothing published before the window
    assert early.work == work_path(early_db) and early.work.exists()
    assert [s.providers for s in pending.waiting(early_db)] == [["lambda"]]  # kept on disk meanwhile

    reports = load_keeping_fetched(early_db, outcomes, "refresh-e", AnomalyPolicy(),
                                   prepared=prepare_loads(outcomes), early=early)
    plain = load_keeping_fetched(window_db, outcomes, "refresh-e", AnomalyPolicy(), prepared=prepare_loads(outcomes))
    # gpu_1x_a10 is listed in two regions, so the new price changes two offers.
    assert [(r.provider, r.state, r.changed) for r in reports] == [("lambda", "ok", 2), ("runpod", "ok", 0)]
    assert [(r.provider, r.state, r.changed) for r in plain] == [("lambda", "ok", 2), ("runpod", "ok", 0)]
    assert reports[0] is early.reports[0]  # Lambda's report is the early merge's, not a second merge
    assert a10_prices(early_db) == [(1.50,)]
    assert warehouse_rows(early_db) == warehouse_rows(window_db)
    assert not early.work.exists() and pending.waiting(early_db) == []


def test_a_signal_after_the_early_merge_still_merges_nothing(two_warehouses: tuple[Path, Path],
                                                             outcomes: list[ScrapeOutcome]) -> None:
    db, _ = two_warehouses
    early = merge_early(db, outcomes[:1], prepare_loads(outcomes[:1]), "refresh-s", AnomalyPolicy())
    assert early is not None
    stopper = Stopper()
    stopper.signum = signal.SIGTERM  # the fetch of the last provider was cut short
    with pytest.raises(RefreshInterrupted) as stop:
        load_keeping_fetched(db, outcomes, "refresh-s", AnomalyPolicy(), prepared=prepare_loads(outcomes),
                             stopper=stopper, early=early)
    assert str(stop.value).startswith("refresh interrupted by SIGTERM while fetching: 0 providers merged, "
                                      "2 recorded as interrupted")
    assert a10_prices(db) == [(1.29,)]
    saved = pending.waiting(db)
    assert [s.providers for s in saved] == [["lambda", "runpod"]] and saved[0].write_error == "interrupted by SIGTERM"
    assert not early.work.exists()


def test_an_early_merge_that_cannot_write_leaves_nothing_behind(two_warehouses: tuple[Path, Path],
                                                                outcomes: list[ScrapeOutcome]) -> None:
    db, _ = two_warehouses
    # Writes past 512 KB fail with EFBIG, as on a full disk: the saved outcomes fit, the working
    # copy of the warehouse does not.
    assert db.stat().st_size > 512 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    try:
        early = merge_early(db, outcomes[:1], prepare_loads(outcomes[:1]), "refresh-f", AnomalyPolicy())
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert early is None
    assert not work_path(db).exists() and pending.waiting(db) == []  # the window saves and merges it all
    reports = load_keeping_fetched(db, outcomes, "refresh-f", AnomalyPolicy(), prepared=prepare_loads(outcomes))
    assert [(r.provider, r.state) for r in reports] == [("lambda", "ok"), ("runpod", "ok")]
    assert a10_prices(db) == [(1.50,)]


def test_a_refresh_killed_after_the_early_merge_leaves_its_results_to_the_next(
        two_warehouses: tuple[Path, Path]) -> None:
    db, _ = two_warehouses
    # Fetched after the warehouse's scrapes: a saved result older than those is not merged over them.
    lambda_outcome = fetched(["lambda"])
    early = merge_early(db, lambda_outcome, prepare_loads(lambda_outcome), "refresh-killed", AnomalyPolicy())
    assert early is not None and early.work.exists()  # then the process dies: the copy and the saved file stay
    reports = load_keeping_fetched(db, [], "refresh-next", AnomalyPolicy())  # as `refresh --resume` does
    assert [(r.provider, r.state, r.changed) for r in reports] == [("lambda", "ok", 2)]
    assert a10_prices(db) == [(1.50,)]
    assert not early.work.exists() and pending.waiting(db) == []
