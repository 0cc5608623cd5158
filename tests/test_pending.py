"""Nothing fetched is thrown away (warehouse/pending.py): every fetch hands its outcome over on
disk, a merge that fails keeps it there, `status` shows it, and the next merge takes it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import resource
from datetime import timedelta, timezone
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.cli import app
from gpuledger.flows.fetch import SourcePlan, fetch_source
from gpuledger.warehouse import pending
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, WarehouseError, merge_pending
from tests.builders import T0, batch, lambda_price_hook, load, offer, replayed_warehouse, scraped


def fetched_lambda(a10_cents: int) -> ScrapeOutcome:
    """Lambda fetched by its real client from the bundled recording, gpu_1x_a10 at `a10_cents`."""
    server = ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"], hook=lambda_price_hook("gpu_1x_a10", a10_cents))
    server.start()
    try:
        return fetch_source(SourcePlan("lambda", "replay", server.endpoints(), http_attempts=1))
    finally:
        server.close()


def a10_prices(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select distinct price_per_hour from offers where instance_type = 'gpu_1x_a10'").fetchall()
    finally:
        con.close()


def test_a_failed_write_keeps_the_fetched_results_and_the_next_merge_takes_them(db: Path) -> None:
    replayed_warehouse(db, ["lambda"])  # the recorded a10 price, $1.29
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    outcome = fetched_lambda(150)
    # Writes past 512 KB fail with EFBIG, as on a full disk (Python ignores SIGXFSZ): the saved
    # results (a few KB) fit, the warehouse's working copy does not.
    assert db.stat().st_size > 512 * 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, hard))
    try:
        with pytest.raises(WarehouseError) as failed:
            load(db, [outcome], "refresh-full-disk")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    kept = pending.pending_dir(db) / "refresh-full-disk"
    message = str(failed.value)
    assert "File too large" in message and f"The fetched results wait in {pending.pending_dir(db)}" in message
    assert "`gpuledger refresh --resume`" in message
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # the published warehouse never written
    assert a10_prices(db) == [(1.29,)]
    assert sorted(p.name for p in kept.iterdir()) == ["lambda.egress.json", "lambda.json", "lambda.offers.json",
                                                      "lambda.storage.json", "write-error.txt"]
    assert "File too large" in (kept / "write-error.txt").read_text()

    # `status` says what is waiting, as JSON per provider and as a line under the table.
    shown = CliRunner().invoke(app, ["status", "--db", str(db), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    rows = {r["provider"]: r for r in json.loads(shown.stdout)}
    assert rows["lambda"]["waiting"] == ["refresh-full-disk"] and rows["runpod"]["waiting"] == []
    table = CliRunner().invoke(app, ["status", "--db", str(db)])
    assert "waiting to be merged: refresh-full-disk" in " ".join(table.output.split())

    # The next merge (here one with nothing of its own, as `refresh --resume`) takes them.
    reports = merge_pending(db, "refresh-resume", AnomalyPolicy())
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
    assert not pending.pending_dir(db).exists()


def test_a_saved_scrape_older_than_the_warehouse_is_recorded_not_merged(db: Path) -> None:
    old = fetched_lambda(150)
    replayed_warehouse(db, ["lambda"])  # a later scrape, already merged
    pending.write(pending.pending_dir(db) / "refresh-old", old)
    (report,) = merge_pending(db, "refresh-now", AnomalyPolicy())
    assert report.state == "failed" and report.error.startswith(
        "not merged: fetched by refresh-old; the warehouse already holds a later scrape (started ")
    assert a10_prices(db) == [(1.29,)]


def test_a_saved_outcome_reads_back_equal(tmp_path: Path) -> None:
    outcome = dataclasses.replace(fetched_lambda(129), degraded=[
        {"name": "stock", "reason": "HTTP 500", "options": ["spot"], "columns": ["available"]}])
    back = pending.read(pending.write(tmp_path / "refresh-x", outcome))
    assert back.refresh_id == "refresh-x" and back.path == tmp_path / "refresh-x" / "lambda.json"
    for field in ("provider", "mode", "started_at", "finished_at", "state", "requests", "notes", "quarantined",
                  "degraded", "provider_facts", "min_row_ratio"):
        assert getattr(back, field) == getattr(outcome, field), field
    assert back.tables.keys() == outcome.tables.keys() == {"offers", "egress", "storage"}
    assert all(back.table(t).equals(outcome.table(t)) for t in back.tables)  # every value, in its column type
    assert back.count("offers") == 27  # the recording's 27 type x region rows


def test_text_utf8_cannot_hold_quarantines_its_record_only(tmp_path: Path) -> None:
    b = batch("lambda", [offer("gpu_8x_h100", 23.92)])
    # A provider's JSON may carry a lone surrogate escape ("\ud800"): json.loads keeps it in the str.
    assert not b.offer("odd", {"name": "A10\ud800"}, **offer("gpu_1x_a10\ud800", 1.29))
    b.notes.append("lambda: odd name 'A10\ud800'")
    (q,) = b.quarantined
    assert q.source_ref == "odd" and "instance_type holds text UTF-8 cannot encode" in q.reason
    assert q.raw == '{"name": "A10\\ud800"}'  # the evidence keeps the escape
    back = pending.read(pending.write(tmp_path / "r", scraped("lambda", "replay", T0, T0,
                                                                batch=b)))
    assert back.notes == ["lambda: odd name 'A10\\ud800'"] and back.count("offers") == 1


def test_an_unreadable_saved_result_is_recorded_and_set_aside(db: Path) -> None:
    replayed_warehouse(db, ["lambda"])
    folder = pending.pending_dir(db) / "refresh-torn"
    pending.write(folder, fetched_lambda(150))
    (folder / "lambda.offers.json").write_bytes(b"[{not json at all")
    (report,) = merge_pending(db, "refresh-next", AnomalyPolicy())
    assert report.state == "failed" and "cannot read the saved result" in report.error
    assert report.error.endswith("set aside as lambda.json.unreadable")
    assert (folder / "lambda.json.unreadable").exists() and pending.waiting(db) == []
    assert merge_pending(db, "refresh-after", AnomalyPolicy()) == []  # it blocks nothing after


def test_a_refresh_unit_hands_its_rows_over_under_its_own_name(tmp_path: Path) -> None:
    unit = Batch("aws")  # a unit's batch holds the provider's rows (capacity blocks: aws's)
    saved = pending.outcome_of(unit, "aws_capacity_blocks", mode="replay", started_at=T0,
                               finished_at=T0 + timedelta(seconds=1), side_tables_only=True)
    back = pending.read(pending.write(tmp_path / "r", saved))
    assert (back.provider, back.side_tables_only, back.path.name) == ("aws_capacity_blocks", True,
                                                                     "aws_capacity_blocks.json")


def test_resume_fetches_nothing() -> None:
    result = CliRunner().invoke(app, ["refresh", "--resume", "-p", "lambda"])
    assert result.exit_code == 2
    assert "--resume fetches nothing" in " ".join(result.output.split())


def test_a_save_stopped_part_way_leaves_nothing_and_its_leftovers_are_removed_by_the_next_merge(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM or Ctrl-C lands while the refresh saves a provider's result (the handler raises in the main
    thread): no part of it stays, and what a killed refresh left part-way the next merge removes."""
    from gpuledger.flows.stopping import RefreshInterrupted

    folder = pending.pending_dir(db) / "refresh-stopped"
    kept = pending.write(folder, scraped("runpod", "replay", T0, T0, batch=batch("runpod", [offer("h100", 2.0)])))
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    real_replace = pending.os.replace

    def stopped_before_the_run_file(src: str, dst: Path) -> None:
        if Path(dst).name == "lambda.json":
            raise RefreshInterrupted(15, "while fetching")
        real_replace(src, dst)

    monkeypatch.setattr(pending.os, "replace", stopped_before_the_run_file)
    with pytest.raises(RefreshInterrupted):
        pending.write(folder, scraped("lambda", "replay", T0, T0, batch=batch("lambda", [offer("gpu_8x", 20.0)])))
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files  # runpod's result, whole; no lambda file
    assert pending.waiting(db) == [kept]

    # What a refresh killed mid-save (kill -9: no handler ran) leaves: table files without their run file,
    # `.part` files; beside them a whole result, merged, and an unreadable one set aside, kept.
    (folder / "lambda.offers.json").write_text("[]")
    (folder / "lambda.offers.json.part").write_text("[{")
    (folder / "aws.json.part").write_text("{")
    (folder / "vultr.json.unreadable").write_text("{")
    (folder / "vultr.offers.json").write_text("[]")
    (report,) = merge_pending(db, "refresh-next", AnomalyPolicy())
    assert (report.provider, report.state, report.rows_loaded) == ("runpod", "ok", 1)
    assert sorted(p.name for p in folder.iterdir()) == ["vultr.json.unreadable", "vultr.offers.json"]

    (folder / "vultr.json.unreadable").unlink()  # its operator looked at it; the table file left is a leftover
    (pending.pending_dir(db) / "refresh-killed").mkdir()
    (pending.pending_dir(db) / "refresh-killed" / "lambda.offers.json.part").write_text("[")
    assert merge_pending(db, "refresh-resume", AnomalyPolicy()) == []
    assert not pending.pending_dir(db).exists()


def test_the_later_scrape_a_saved_result_is_refused_for_is_timed_in_utc(db: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The refusal (kept in scrape_runs.error) gave the start in the machine's time zone: +09:00 in Tokyo."""
    import time

    old = fetched_lambda(150)
    replayed_warehouse(db, ["lambda"])
    [(started,)] = duckdb.connect(str(db), read_only=True).execute(
        "select max(started_at) from scrape_runs").fetchall()
    pending.write(pending.pending_dir(db) / "refresh-old", old)
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # DuckDB takes it at each connect
    time.tzset()
    try:
        (report,) = merge_pending(db, "refresh-now", AnomalyPolicy())
    finally:
        monkeypatch.undo()
        time.tzset()
    utc = started.astimezone(timezone.utc).isoformat(timespec="seconds")
    assert utc.endswith("+00:00") and report.error.endswith(f"a later scrape (started {utc})"), report.error


def test_results_published_by_a_refresh_killed_before_it_removed_them_are_not_merged_again(
        db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 after the window's rename, before its files were removed: the next merge recorded every
    failed run (and every result older than the provider's last good one) a second time, resumed."""
    folder = pending.pending_dir(db) / "refresh-killed"
    older = scraped("lambda", "replay", T0, T0, batch=batch("lambda", [offer("gpu_8x_h100", 20.0)]))
    later = T0 + timedelta(hours=1)
    pending.write(pending.pending_dir(db) / "refresh-early", older)  # a write that failed, merged late
    pending.write(folder, scraped("lambda", "replay", later, later, batch=batch("lambda", [offer("gpu_8x_h100", 21.0)])))
    pending.write(folder, scraped("runpod", "replay", T0, T0, error="runpod: HTTP 503"))

    def killed(path: Path) -> None:
        raise SystemExit("kill -9")

    monkeypatch.setattr(pending, "done", killed)
    with pytest.raises(SystemExit):
        merge_pending(db, "refresh-killed", AnomalyPolicy())
    monkeypatch.undo()
    assert len(pending.waiting(db)) == 3  # all published, none removed

    assert merge_pending(db, "refresh-next", AnomalyPolicy()) == []
    assert pending.waiting(db) == [] and not pending.pending_dir(db).exists()
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("select provider, state, refresh_id, error from scrape_runs order by all").fetchall()
        prices = con.execute("select price_per_hour from offers").fetchall()
    finally:
        con.close()
    assert runs == [("lambda", "ok", "refresh-killed", None), ("lambda", "ok", "refresh-killed", None),
                    ("runpod", "failed", "refresh-killed", "runpod: HTTP 503")]
    assert prices == [(21.0,)]


def test_a_result_merged_a_night_late_is_dated_at_its_scrape(tmp_path: Path) -> None:
    """Monday's fetch saw a price cut but its write failed; Tuesday's refresh merges it before its own. The cut
    held from Monday: it had been dated at Tuesday's merge (in force for a fraction of a second), so a
    point-in-time query for Monday gave Sunday's price."""
    from datetime import datetime

    db = tmp_path / "w.duckdb"
    now = datetime.now(timezone.utc).replace(microsecond=0)
    sunday, monday, tuesday = now - timedelta(days=2), now - timedelta(days=1), now - timedelta(minutes=5)
    from gpuledger.warehouse.store import close_writer, load_outcome, open_writer

    con = open_writer(db)  # Sunday's refresh, merged on Sunday
    load_outcome(con, scraped("lambda", "live", sunday, sunday, batch=batch("lambda", [offer("gpu_8x_h100", 23.92)])),
                 "refresh-sunday", AnomalyPolicy(), now=sunday)
    close_writer(con)
    pending.write(pending.pending_dir(db) / "refresh-monday",
                  scraped("lambda", "live", monday, monday, batch=batch("lambda", [offer("gpu_8x_h100", 19.99)])))
    load(db, [scraped("lambda", "live", tuesday, tuesday, batch=batch("lambda", [offer("gpu_8x_h100", 21.0)]))],
         "refresh-tuesday")
    con = duckdb.connect(str(db), read_only=True)
    try:
        versions = con.execute("select price_per_hour, valid_from, valid_to from offer_history "
                               "order by valid_from").fetchall()
    finally:
        con.close()
    assert [(price, start, end) for price, start, end in versions] == [
        (23.92, sunday, monday), (19.99, monday, versions[2][1]), (21.0, versions[2][1], None)]
    assert versions[2][1] >= tuesday  # Tuesday's own price from its merge


def test_a_refresh_after_the_clock_was_set_back_never_dates_a_version_before_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's clock stepped back an hour between two refreshes (an NTP correction, a resumed VM): the
    second's price change closed the first's version an hour before it began, and `check` failed."""
    from datetime import datetime

    from gpuledger.warehouse import store
    from gpuledger.warehouse.check import run_checks

    db = tmp_path / "w.duckdb"
    first = datetime.now(timezone.utc).replace(microsecond=0)
    monkeypatch.setattr(store, "utcnow", lambda: first)
    load(db, [scraped("lambda", "live", first, first, batch=batch("lambda", [offer("gpu_8x_h100", 23.92)]))],
         "refresh-1")
    back = first - timedelta(hours=1)
    monkeypatch.setattr(store, "utcnow", lambda: back)
    [report] = load(db, [scraped("lambda", "live", back, back,
                                 batch=batch("lambda", [offer("gpu_8x_h100", 19.99)]))], "refresh-2")
    assert (report.state, report.changed) == ("ok", 1)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("select price_per_hour, valid_from, valid_to from offer_history "
                           "order by price_per_hour desc").fetchall() == [
            (23.92, first, first + timedelta(microseconds=1)), (19.99, first + timedelta(microseconds=1), None)]
        assert [c.name for c in run_checks(con) if not c.ok] == []
    finally:
        con.close()


def test_refreshes_after_the_clock_was_set_back_keep_their_versions_in_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every refresh after the clock stepped back an hour was dated at the last one's instant: three price changes
    gave four versions of one valid_from, so `order by valid_from` (the price history, the moves of the week,
    spot_price_intervals) put them in any order. Each is dated a microsecond after the one before now."""
    from datetime import datetime

    from gpuledger.warehouse import store

    db = tmp_path / "w.duckdb"
    first = datetime.now(timezone.utc).replace(microsecond=0)
    for i, (back_min, price) in enumerate([(0, 20.0), (60, 10.0), (50, 20.0), (40, 10.0)]):
        at = first - timedelta(minutes=back_min)
        monkeypatch.setattr(store, "utcnow", lambda at=at: at)
        load(db, [scraped("lambda", "live", at, at, batch=batch("lambda", [offer("gpu_8x_h100", price)]))],
             f"refresh-{i}")
    con = duckdb.connect(str(db), read_only=True)
    try:
        versions = con.execute("select price_per_hour, valid_from, valid_to, r.started_at from offer_history "
                               "join scrape_runs r using (run_id) order by valid_from").fetchall()
        last_seen = con.execute("select last_seen from offers").fetchall()
    finally:
        con.close()
    us = [first + timedelta(microseconds=n) for n in range(4)]
    assert [(p, f, t) for p, f, t, _ in versions] == [(20.0, us[0], us[1]), (10.0, us[1], us[2]),
                                                      (20.0, us[2], us[3]), (10.0, us[3], None)]
    assert [s for *_, s in versions] == [first - timedelta(minutes=m) for m in (0, 60, 50, 40)]  # the runs' order
    assert last_seen == [(us[3],)]


def test_a_refresh_dated_after_the_machines_clock_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh made with the clock three days ahead, then the clock corrected: the next refresh's versions and
    last_seen were dated three days ahead, in silence. Its report (and run) says so now."""
    from datetime import datetime

    from gpuledger.warehouse import store

    db = tmp_path / "w.duckdb"
    now = datetime.now(timezone.utc).replace(microsecond=0)
    ahead = now + timedelta(days=3)
    monkeypatch.setattr(store, "utcnow", lambda: ahead)
    [first] = load(db, [scraped("lambda", "live", ahead, ahead, batch=batch("lambda", [offer("gpu_8x_h100", 23.92)]))],
                   "refresh-1")
    monkeypatch.setattr(store, "utcnow", lambda: now)
    [second] = load(db, [scraped("lambda", "live", now, now, batch=batch("lambda", [offer("gpu_8x_h100", 19.99)]))],
                    "refresh-2")
    said = (f"dated {ahead + timedelta(microseconds=1):%Y-%m-%d %H:%M:%S} UTC, after this machine's clock: the "
            "warehouse holds lambda's data dated up to then (a clock that was ahead); its versions, last_seen and "
            "changes stay dated so until then")
    assert not any("after this machine's clock" in n for n in first.notes)
    assert said in second.notes
    con = duckdb.connect(str(db), read_only=True)
    try:
        notes = con.execute("select notes from scrape_runs order by refresh_id").fetchall()
        assert [said in (n or "") for (n,) in notes] == [False, True]
    finally:
        con.close()


def test_status_tells_the_running_refreshs_saved_results_from_a_stopped_ones(tmp_path: Path) -> None:
    """During a refresh, `status` said of the results it had already fetched 'not merged: its refresh stopped
    first; `gpuledger refresh --resume` merges it'."""
    from gpuledger.warehouse.store import close_writer, open_writer, refresh_lock

    db = tmp_path / "w.duckdb"
    close_writer(open_writer(db))
    for refresh_id in ("refresh-killed", "refresh-now"):
        pending.write(pending.pending_dir(db) / refresh_id,
                      scraped("lambda", "live", T0, T0, batch=batch("lambda", [offer("gpu_8x_h100", 23.92)])))
    with refresh_lock(db, "refresh refresh-now"):
        shown = " ".join(CliRunner().invoke(app, ["status", "--db", str(db), "-p", "lambda"]).output.split())
    assert "fetched by the running refresh-now (lambda), not merged yet" in shown, shown
    assert ("waiting to be merged: refresh-killed (lambda); not merged: its refresh stopped first; `gpuledger "
            "refresh --resume` merges it") in shown
    shown = " ".join(CliRunner().invoke(app, ["status", "--db", str(db), "-p", "lambda"]).output.split())
    assert "waiting to be merged: refresh-now (lambda); not merged: its refresh stopped first" in shown
