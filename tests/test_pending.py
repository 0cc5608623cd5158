"""Nothing fetched is thrown away (warehouse/pending.py): a write window that fails keeps the
fetched results on disk, `status` shows them, and the next load merges them."""

from __future__ import annotations

import hashlib
import json
import resource
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.cli import app
from gpuledger.flows.pipeline import fetch_source, load_keeping_fetched, outcome_from, plans_for
from gpuledger.warehouse import pending
from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, WarehouseError, utcnow
from tests.builders import lambda_price_hook, replayed_warehouse


def fetched_lambda(a10_cents: int) -> list[ScrapeOutcome]:
    """Lambda fetched by its real client from the bundled recording, gpu_1x_a10 at `a10_cents`."""
    server = ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"], hook=lambda_price_hook("gpu_1x_a10", a10_cents))
    server.start()
    try:
        plan = plans_for(["lambda"], "replay", server.endpoints(), server.settings, http_attempts=1)[0]
        started = utcnow()
        return [outcome_from(fetch_source(plan), plan, None, started)]
    finally:
        server.close()


def a10_prices(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select distinct price_per_hour from offers where instance_type = 'gpu_1x_a10'").fetchall()
    finally:
        con.close()


def test_a_failed_write_keeps_the_fetched_results_and_the_next_load_merges_them(db: Path) -> None:
    replayed_warehouse(db, ["lambda"])  # the recorded a10 price, $1.29
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    outcomes = fetched_lambda(150)
    # Writes past 512 KB fail with EFBIG, as on a full disk (Python ignores SIGXFSZ): the saved
    # results (a few KB) fit, the warehouse's working copy does not.
    assert db.stat().st_size > 512 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    try:
        with pytest.raises(WarehouseError) as failed:
            load_keeping_fetched(db, outcomes, "refresh-full-disk", AnomalyPolicy())
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    kept = pending.pending_dir(db) / "refresh-full-disk.json"
    message = str(failed.value)
    assert "File too large" in message and f"The fetched results are kept in {kept}" in message, message
    assert "`gpuledger refresh --resume`" in message
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # the published warehouse never written
    assert a10_prices(db) == [(1.29,)]
    doc = json.loads(kept.read_text())
    assert "File too large" in doc["write_error"]
    assert [o["provider"] for o in doc["outcomes"]] == ["lambda"]

    # `status` says what is waiting, as JSON per provider and as a line under the table.
    shown = CliRunner().invoke(app, ["status", "--db", str(db), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = {r["provider"]: r for r in json.loads(shown.stdout)}
    assert rows["lambda"]["waiting"] == ["refresh-full-disk"] and rows["runpod"]["waiting"] == []
    table = CliRunner().invoke(app, ["status", "--db", str(db)])
    assert "waiting to be merged: refresh-full-disk" in " ".join(table.output.split())

    # The next load (here one with nothing of its own, as `refresh --resume`) merges them.
    reports = load_keeping_fetched(db, [], "refresh-resume", AnomalyPolicy())
    assert [(r.provider, r.state, r.changed) for r in reports] == [("lambda", "ok", 2)]  # a10: 2 regions
    assert a10_prices(db) == [(1.50,)]
    con = duckdb.connect(str(db), read_only=True)
    try:
        notes = con.execute("select notes from scrape_runs where refresh_id = 'refresh-resume'").fetchall()[0][0]
        versions = con.execute("select count(*) from offer_history where instance_type = 'gpu_1x_a10'").fetchall()
    finally:
        con.close()
    assert "resumed: fetched by refresh-full-disk, whose write failed (" in notes and "File too large" in notes
    assert versions == [(4,)]  # two regions, the recorded version and the resumed one each: history whole
    assert not kept.exists()


def test_a_saved_scrape_older_than_the_warehouse_is_recorded_not_merged(tmp_path: Path) -> None:
    t = utcnow()
    saved = pending.PendingRefresh(tmp_path / "r.json", "refresh-old", t)
    old = ScrapeOutcome("lambda", "live", t, t + timedelta(seconds=5), batch=None, error=None)
    refused = pending.resumed_outcome(old, saved, last_ok=t + timedelta(hours=1))
    assert refused.batch is None and refused.error.startswith("not merged: fetched by refresh-old; the warehouse "
                                                              "already holds a later scrape")


def test_saved_outcomes_read_back_equal(tmp_path: Path) -> None:
    outcomes = fetched_lambda(129)
    path = pending.save(tmp_path / "w.duckdb", "refresh-x", utcnow(), outcomes)
    back = pending.load(path).outcomes[0]
    o = outcomes[0]
    assert (back.provider, back.started_at, back.finished_at, back.requests) == \
        (o.provider, o.started_at, o.finished_at, o.requests)
    assert back.batch.offers == o.batch.offers and back.batch.quarantined == o.batch.quarantined
    assert back.batch.notes == o.batch.notes and back.provider_facts == o.provider_facts


def test_text_utf8_cannot_hold_is_saved_and_read_back(tmp_path: Path) -> None:
    outcomes = fetched_lambda(129)
    # A provider's JSON may carry a lone surrogate escape ("\ud800"): json.loads keeps it in the str.
    outcomes[0].batch.notes.append("lambda: odd name 'A10\ud800'")
    path = pending.save(tmp_path / "w.duckdb", "refresh-s", utcnow(), outcomes)
    back = pending.load(path).outcomes[0]
    assert back.batch.notes[-1] == "lambda: odd name 'A10\ud800'"
    assert back.batch.offers == outcomes[0].batch.offers


def test_resume_fetches_nothing() -> None:
    result = CliRunner().invoke(app, ["refresh", "--resume", "-p", "lambda"])
    assert result.exit_code == 2
    assert "--resume fetches nothing" in " ".join(result.output.split())


def test_a_signal_while_fetching_merges_nothing_and_keeps_what_was_fetched(db: Path) -> None:
    import signal

    from gpuledger.flows.stopping import RefreshInterrupted, Stopper

    replayed_warehouse(db, ["lambda"])
    fetched = fetched_lambda(150)
    never_fetched = ScrapeOutcome("runpod", "replay", utcnow(), utcnow(), interrupted=True,
                                  error="interrupted by SIGTERM while fetching")
    stopper = Stopper()
    stopper.signum = signal.SIGTERM  # what the handler sets when it stops the fetch
    with pytest.raises(RefreshInterrupted) as stop:
        load_keeping_fetched(db, fetched + [never_fetched], "refresh-stopped", AnomalyPolicy(), stopper=stopper)
    assert str(stop.value).startswith("refresh interrupted by SIGTERM while fetching: 0 providers merged, "
                                      "2 recorded as interrupted, the fetched results of 1 kept in ")
    assert stop.value.exit_code == 143
    assert a10_prices(db) == [(1.29,)]  # nothing merged
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("select provider, state from scrape_runs where refresh_id = 'refresh-stopped' "
                           "order by provider").fetchall()
    finally:
        con.close()
    assert runs == [("lambda", "interrupted"), ("runpod", "interrupted")]
    saved = pending.waiting(db)
    assert [s.providers for s in saved] == [["lambda"]] and saved[0].write_error == "interrupted by SIGTERM"
