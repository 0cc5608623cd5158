"""A command line that tells the truth: `status` exit codes, a bad `--db` refused before any
fetch, a refresh summary within 80 columns, and help for every option of every command."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from gpuledger.flows import cli
from gpuledger.flows.cli import app
from gpuledger.warehouse.store import AnomalyPolicy, load_outcome, open_writer, utcnow
from tests.builders import load as merge
from tests.builders import scraped, batch, offer

runner = CliRunner()


def load(db: Path, provider: str, hours_ago: float, error: str | None = None) -> None:
    now = utcnow() - timedelta(hours=hours_ago)
    con = open_writer(db)
    try:
        b = None if error else batch(provider, [offer(f"{provider}-8x", 20.0)])
        load_outcome(con, scraped(provider, "replay", now, now, batch=b, error=error), f"refresh-{provider}",
                     AnomalyPolicy(), now=now)
    finally:
        con.close()


def status(db: Path, *args: str) -> tuple[int, dict[str, str]]:
    result = runner.invoke(app, ["status", "--db", str(db), "--json", *args])
    return result.exit_code, {r["provider"]: r["state"] for r in json.loads(result.stdout)}


def test_status_shows_the_latest_runs_missing_enrichment_not_an_earlier_runs(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"

    def run_then_status(hours_ago: float, degraded: list[dict[str, Any]]) -> dict[str, Any]:
        at = utcnow() - timedelta(hours=hours_ago)
        con = open_writer(db)
        try:
            load_outcome(con, scraped("aws", "replay", at, at, batch=batch("aws", [offer("aws-8x", 20.0)]),
                                      degraded=degraded), f"refresh-{hours_ago}", AnomalyPolicy(), now=at)
        finally:
            con.close()
        [row] = json.loads(runner.invoke(app, ["status", "--db", str(db), "--json", "-p", "aws"]).stdout)
        return row

    first = run_then_status(2, [{"name": "spot prices", "reason": "HTTP 404", "options": []}])
    assert first["state"] == "ok" and "spot prices" in first["degraded"] and "HTTP 404" in first["degraded"]
    latest = run_then_status(1, [])  # the next night's run had every enrichment
    assert (latest["state"], latest["degraded"]) == ("ok", None)
    # a run dated three days ahead (a clock that was ahead) says nothing of now: it had named its enrichment
    ahead = run_then_status(-72, [{"name": "capacity blocks", "reason": "HTTP 500", "options": []}])
    assert (ahead["state"], ahead["degraded"]) == ("ok", None)


def test_status_exit_codes(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    code, states = status(db)
    assert code == 0 and states["lambda"] == "ok" and states["aws"] == "never"  # never loaded: listed, not judged
    load(db, "aws", 48)  # older than the 36 h default
    assert status(db) == (3, status(db)[1]) and status(db)[1]["aws"] == "stale"
    assert status(db, "--stale-after", "72")[0] == 0
    assert status(db, "-p", "lambda") == (0, {"lambda": "ok"})
    load(db, "runpod", 2)
    load(db, "runpod", 0.5, error="HTTP 503")  # its latest attempt failed: failed wins over stale
    code, states = status(db)
    assert code == 1 and states["runpod"] == "failed"
    table = runner.invoke(app, ["status", "--db", str(db)])
    assert table.exit_code == 1 and "failed" in table.stdout
    assert runner.invoke(app, ["status", "--db", str(tmp_path / "none.duckdb")]).exit_code == 2
    help_text = runner.invoke(app, ["status", "--help"]).output
    assert "1 a provider's latest attempt" in help_text and "3 a provider is stale" in help_text


@pytest.mark.parametrize("command", [["refresh", "--replay"], ["record", "out"]])
def test_a_db_that_is_not_duckdb_is_refused_before_any_fetch(command: list[str], tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows import refresh

    def no_fetch(*args: object, **kwargs: object) -> None:
        raise AssertionError("fetched although --db is no warehouse")

    monkeypatch.setattr(refresh, "nightly_refresh", no_fetch)
    monkeypatch.setattr(refresh, "ensure_browsers", no_fetch)
    notes = tmp_path / "notes.txt"
    notes.write_text("a text file, not a warehouse\n" * 20)
    for bad, says in ((notes, "is not a DuckDB database"), (tmp_path, "is a directory")):
        result = runner.invoke(app, [*command, "--db", str(bad), "-p", "lambda"])
        assert result.exit_code == 2, result.output
        assert says in result.output and str(bad) in result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
    assert notes.read_text() == "a text file, not a warehouse\n" * 20


@pytest.mark.parametrize("command", [["status"], ["sql", "select 1"], ["show-gpus"], ["export", "{tmp}/out"]])
def test_a_parquet_file_as_the_db_of_a_reading_command_is_said_to_be_no_duckdb_file(
        command: list[str], tmp_path: Path) -> None:
    """Before: "cannot open ...: Catalog Error: Cannot launch in-memory database in read-only mode!"."""
    snapshot = tmp_path / "offers.parquet"
    duckdb.sql(f"copy (select 1 as x) to '{snapshot}' (format parquet)")
    result = runner.invoke(app, [*(a.format(tmp=tmp_path) for a in command), "--db", str(snapshot)])
    assert (result.exit_code, " ".join(result.output.split())) == (
        2, f"error: {snapshot} is not a DuckDB database (pass --db a gpuledger warehouse, or a new file name)")


def test_the_refresh_summary_fits_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Console(width=80, record=True, force_terminal=False)
    monkeypatch.setattr(cli, "console", screen)
    rows = [{"provider": name, "state": state, "offers": 123456, "new": 123456, "changed": 99999, "closed": 99999,
             "quarantined": 12345, "egress": 21600, "storage": 10800, "error": None, "notes": [], "degraded": None}
            for name, state in (("digitalocean", "ok"), ("aws", "failed"))]
    cli._print_summary({"refresh_id": "refresh-20261201T204435Z-53d2c252", "providers": rows})
    text = screen.export_text()
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert "…" not in text
    assert re.search(r"provider +state +offers +new +changed +closed +quarantined +egress +storage", text)
    assert re.search(r"digitalocean +ok +123456 +123456 +99999 +99999 +12345 +21600 +10800", text)


def test_every_option_of_every_command_says_what_it_does() -> None:
    group = typer.main.get_command(app)
    missing = []
    for name, command in sorted(group.commands.items()):  # type: ignore[attr-defined]
        for param in command.params:
            text = (getattr(param, "help", None) or "").strip()
            # a sentence, not a bare list of choices ("table | csv | json")
            if len(text.split()) < 3 or re.fullmatch(r"[\w-]+( *\| *[\w-]+)+", text):
                missing.append(f"gpuledger {name} {param.opts[0] if param.opts else param.name}: {text!r}")
    assert not missing, "options without help that says what they do:\n" + "\n".join(missing)


def test_refresh_progress_names_the_providers_still_fetching_then_counts_the_merges(tmp_path: Path) -> None:
    from gpuledger.flows.progress import PROGRESS_LOGGER, RefreshProgress, report

    screen = Console(width=80, record=True, force_terminal=True)
    providers = ["aws", "azure", "gcp", "lambda", "runpod"]
    with RefreshProgress(screen, providers) as progress:
        assert progress.state() == ("starting Prefect and the providers' clients", 0, 5)
        report("fetched", "azure")
        assert progress.state() == ("fetching, waiting for aws, gcp, lambda and 1 more", 1, 5)
        report("failed", "aws")
        report("fetched", "lambda")
        assert progress.state() == ("fetching, waiting for gcp, runpod", 3, 5)
        report("fetched", "gcp")
        report("fetched", "runpod")
        assert progress.state() == ("fetched every provider", 5, 5)
        # the merge takes every saved result: two an earlier refresh could not write, beside these five
        report("merging", total=7)
        assert progress.state() == ("merging into the warehouse", 0, 7)
        # the write window's own events: one per provider merged
        now = utcnow()
        outcomes = [scraped(p, "replay", now, now, batch=batch(p, [offer(f"{p}-8x", 20.0)])) for p in providers]
        merge(tmp_path / "w.duckdb", outcomes, "refresh-progress", on_merged=lambda p: report("merged", p))
        assert progress.state() == ("merged runpod", 5, 7)
    assert PROGRESS_LOGGER.handlers == [] and PROGRESS_LOGGER.propagate


@pytest.mark.parametrize("command", [["pull", "{tmp}/no-catalog"],
                                     ["refresh", "--replay", "--recordings", "{tmp}/no-recordings", "-p", "lambda"]])
def test_a_refused_pull_or_refresh_leaves_nothing_beside_the_warehouse(command: list[str], tmp_path: Path) -> None:
    """The catalog or the recordings cannot be read: one error line, and no lock file (nor its folder) made
    for a warehouse that was never written."""
    args = [a.format(tmp=tmp_path) for a in command]
    for db in (tmp_path / "w.duckdb", tmp_path / "new" / "w.duckdb"):
        result = runner.invoke(app, [*args, "--db", str(db)])
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_warehouse_beside_which_nothing_can_be_written_is_refused_in_one_line(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("a file, not a folder\n")
    result = runner.invoke(app, ["pull", str(tmp_path / "no-catalog"), "--db", str(notes / "w.duckdb")])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (f"error: cannot write beside the warehouse {notes / 'w.duckdb'}: "
                                     f"{notes / 'w.duckdb.refresh.lock'}: Not a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_status_times_are_utc_and_say_so_whatever_the_machines_time_zone(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    from datetime import datetime, timezone

    db = tmp_path / "w.duckdb"
    at = datetime(2026, 11, 6, 22, 31, 50, tzinfo=timezone.utc)
    con = open_writer(db)
    try:
        lambda_rows = batch("lambda", [offer("gpu_8x_h100", 20.0)])
        load_outcome(con, scraped("lambda", "replay", at, at, batch=lambda_rows), "refresh-1", AnomalyPolicy(), now=at)
    finally:
        con.close()

    def status_in_tokyo(*args: str) -> str:
        command = ["status", "--db", str(db), "-p", "lambda", "--stale-after", "1e9", *args]
        done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", *command], capture_output=True, text=True,
                              env={**os.environ, "TZ": "Asia/Tokyo", "COLUMNS": "200"}, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    table = status_in_tokyo()
    assert table.count("2026-11-06 22:31 UTC") == 2, table  # last success, last attempt
    assert "07:31" not in table
    [row] = json.loads(status_in_tokyo("--json"))
    assert (row["last_success"], row["last_attempt"]) == ("2026-11-06 22:31:50+00:00",) * 2


def test_status_of_chosen_providers_names_only_their_waiting_results(tmp_path: Path) -> None:
    from gpuledger.warehouse import pending
    from gpuledger.warehouse.pending import ScrapeOutcome

    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    now = utcnow()
    for provider, refresh_id in (("lambda", "refresh-a"), ("runpod", "refresh-a"), ("runpod", "refresh-b")):
        pending.write(pending.pending_dir(db) / refresh_id, ScrapeOutcome(provider, "replay", now, now))
    shown = runner.invoke(app, ["status", "--db", str(db), "-p", "lambda"])
    waiting = [" ".join(line.split()) for line in shown.output.splitlines() if "waiting to be merged" in line]
    assert waiting == ["waiting to be merged: refresh-a (lambda); not merged: its refresh stopped first; "
                       "`gpuledger refresh --resume` merges it"], shown.output
    everything = runner.invoke(app, ["status", "--db", str(db)]).output
    assert "refresh-a (lambda, runpod)" in everything and "refresh-b (runpod)" in everything


@pytest.fixture
def flow_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The refresh flow's parameters, each call; nothing fetched, no Prefect started."""
    from contextlib import nullcontext

    from gpuledger.flows import prefect_api, refresh

    calls: list[dict[str, Any]] = []

    class Flow:
        def with_options(self, **options: Any) -> "Flow":
            return self

        def __call__(self, **params: Any) -> dict[str, Any]:
            calls.append(params)
            for provider in params["providers"] if params.get("record_dir") else ():  # a record's manifests
                (Path(params["record_dir"]) / provider).mkdir()
                (Path(params["record_dir"]) / provider / "manifest.json").write_text("{}")
            rows = [{"provider": p, "state": "ok", "offers": 0, "new": 0, "changed": 0, "closed": 0, "quarantined": 0,
                     "egress": 0, "storage": 0, "error": None, "notes": [], "degraded": None}
                    for p in params["providers"]]
            return {"refresh_id": "refresh-test", "ok": True, "failed": [], "providers": rows}

    monkeypatch.setattr(refresh, "nightly_refresh", Flow())
    monkeypatch.setattr(refresh, "ensure_browsers", lambda *a, **k: None)
    monkeypatch.setattr(prefect_api, "start_if_needed", lambda: None)
    monkeypatch.setattr(prefect_api, "flow_api", lambda server: nullcontext())
    return calls


def test_a_recording_of_some_providers_replays_those_without_naming_them(tmp_path: Path,
                                                                          flow_calls: list[dict[str, Any]]) -> None:
    """`gpuledger record DIR` keeps the providers that answered (those without credentials make no recording);
    `refresh --replay --recordings DIR` and `record --from-recordings DIR` then take the providers DIR holds."""
    import shutil

    from gpuledger.adapters.replay import BUNDLED_RECORDINGS

    rec = tmp_path / "rec"
    for provider in ("vultr", "lambda", "aws_capacity_blocks"):  # a refresh unit's recording too
        shutil.copytree(BUNDLED_RECORDINGS / provider, rec / provider)
    (rec / "notes").mkdir()  # not a provider's: no manifest
    db = str(tmp_path / "w.duckdb")
    result = runner.invoke(app, ["refresh", "--replay", "--recordings", str(rec), "--db", db])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["record", str(tmp_path / "again"), "--from-recordings", str(rec), "--db", db])
    assert result.exit_code == 0, result.output
    assert [c["providers"] for c in flow_calls] == [["aws_capacity_blocks", "lambda", "vultr"]] * 2
    # a provider named is one the folder must hold; a folder with none is said so
    result = runner.invoke(app, ["refresh", "--replay", "--recordings", str(rec), "-p", "aws", "--db", db])
    assert result.exit_code == 2 and f"{rec / 'aws' / 'manifest.json'} does not exist" in result.output
    result = runner.invoke(app, ["refresh", "--replay", "--recordings", str(rec / "notes"), "--db", db])
    assert (result.exit_code, result.output.strip()) == (2, f"error: no recordings in {rec / 'notes'}: it holds no "
                                                            "<provider>/manifest.json of a provider")
    assert len(flow_calls) == 2


def test_recording_into_the_folder_being_replayed_is_refused_before_prefect_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from gpuledger.adapters.replay import BUNDLED_RECORDINGS
    from gpuledger.flows import prefect_api

    def started() -> None:
        raise AssertionError("Prefect started for a record that is refused")

    monkeypatch.setattr(prefect_api, "start_if_needed", started)
    rec = tmp_path / "rec"
    shutil.copytree(BUNDLED_RECORDINGS / "lambda", rec / "lambda")
    before = {p: p.read_bytes() for p in rec.rglob("*") if p.is_file()}
    for force in ([], ["--force"]):
        result = runner.invoke(app, ["record", str(rec), "--from-recordings", str(rec), "-p", "lambda", *force,
                                     "--db", str(tmp_path / "w.duckdb")])
        assert (result.exit_code, result.output.strip()) == (
            2, f"error: cannot record into {rec}: it is the recording folder being replayed; record into another "
               "folder"), result.output
    assert {p: p.read_bytes() for p in rec.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]


@pytest.mark.parametrize("query", ["", " ; ", "/* nothing */", "-- nothing\n"])
def test_sql_of_no_statement_is_one_line(query: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    result = runner.invoke(app, ["sql", "--db", str(db), "--", query])
    assert (result.exit_code, result.output.strip()) == (
        2, "error: the query holds no SQL statement (only comments or semicolons)"), result.output


def test_resume_with_nothing_saved_says_so_at_once_and_makes_nothing(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """It started Prefect, warned 'could not read the price moves back: no warehouse at ...' and left a lock file."""
    from gpuledger.flows import prefect_api

    def started() -> None:
        raise AssertionError("Prefect started with nothing to merge")

    monkeypatch.setattr(prefect_api, "start_if_needed", started)
    result = runner.invoke(app, ["refresh", "--resume", "--db", str(tmp_path / "w.duckdb")])
    assert (result.exit_code, result.output.strip()) == (0, "nothing waiting to be merged"), result.output
    assert list(tmp_path.iterdir()) == []
    notes = tmp_path / "notes.txt"
    notes.write_text("not a warehouse\n")
    result = runner.invoke(app, ["refresh", "--resume", "--db", str(notes)])
    assert result.exit_code == 2 and "is not a DuckDB database" in result.output


def test_a_list_or_struct_in_csv_is_json_text(tmp_path: Path) -> None:
    """Lists and structs (sql's, status's `waiting`, recommend's flags) were written as Python's repr."""
    import csv
    import io

    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    query = "select ['it''s', NULL] as l, {'a': 1.5::double} as s, 'plain' as p"
    result = runner.invoke(app, ["sql", query, "--db", str(db), "-f", "csv"])
    assert result.exit_code == 0, result.output
    [row] = list(csv.DictReader(io.StringIO(result.stdout, newline="")))
    assert (json.loads(row["l"]), json.loads(row["s"]), row["p"]) == (["it's", None], {"a": 1.5}, "plain")
    result = runner.invoke(app, ["status", "--db", str(db), "-p", "lambda", "-f", "csv"])
    [row] = list(csv.DictReader(io.StringIO(result.stdout, newline="")))
    assert json.loads(row["waiting"]) == []


def test_record_names_what_it_recorded_and_fails_when_nothing_was(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose providers all lacked credentials said 'recorded to DIR' and exited 0 with DIR empty."""
    from contextlib import nullcontext

    from gpuledger.flows import prefect_api, refresh

    out = tmp_path / "rec"
    states = {"lambda": "not_configured", "runpod": "ok"}

    class Flow:
        def __call__(self, **params: Any) -> dict[str, Any]:
            for provider, state in states.items():
                if state == "ok":  # a provider that answered leaves its manifest
                    (out / provider).mkdir()
                    (out / provider / "manifest.json").write_text("{}")
            rows = [{"provider": p, "state": s, "offers": 0, "new": 0, "changed": 0, "closed": 0, "quarantined": 0,
                     "egress": 0, "storage": 0, "error": None, "notes": [], "degraded": None}
                    for p, s in states.items()]
            return {"refresh_id": "refresh-test", "ok": True, "failed": [], "providers": rows}

    monkeypatch.setattr(refresh, "nightly_refresh", Flow())
    monkeypatch.setattr(prefect_api, "start_if_needed", lambda: None)
    monkeypatch.setattr(prefect_api, "flow_api", lambda server: nullcontext())
    args = ["record", str(out), "-p", "lambda", "-p", "runpod", "--db", str(tmp_path / "w.duckdb")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert f"recorded to {out}: runpod" in result.output
    states["runpod"] = "not_configured"
    result = runner.invoke(app, [*args, "--force"])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == f"error: nothing recorded to {out}: no provider answered"


def test_record_beside_a_warehouse_that_cannot_be_written_is_refused_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS
    from gpuledger.flows import prefect_api

    def started() -> None:
        raise AssertionError("Prefect started for a record that is refused")

    monkeypatch.setattr(prefect_api, "start_if_needed", started)
    notes = tmp_path / "notes.txt"
    notes.write_text("a file, not a folder\n")
    result = runner.invoke(app, ["record", str(tmp_path / "rec"), "--from-recordings", str(BUNDLED_RECORDINGS),
                                 "-p", "lambda", "--db", str(notes / "w.duckdb")])
    assert (result.exit_code, result.output.strip()) == (
        2, f"error: cannot write beside the warehouse {notes / 'w.duckdb'}: {notes / 'w.duckdb.refresh.lock'}: "
           "Not a directory"), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("size", ["1KB", "300KB"])
def test_sql_with_too_little_memory_to_open_the_warehouse_never_calls_it_damaged(size: str, tmp_path: Path) -> None:
    """It said 'a damaged or truncated file: restore it' (1KB) or printed a traceback (300KB)."""
    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    result = runner.invoke(app, ["sql", "select 1", "--db", str(db), "--max-memory", size])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert text.startswith(f"error: --max-memory {size} is too little to open the warehouse (cannot open {db}: "
                           "Out of Memory Error: "), text
    assert "damaged" not in text and len(result.output.strip().splitlines()) == 1


def test_accept_anomaly_takes_a_provider_in_any_case_as_p_does(tmp_path: Path, flow_calls: list[dict[str, Any]],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`-p LAMBDA` was taken, `--accept-anomaly LAMBDA` refused listing all 31 providers."""
    from gpuledger.warehouse import catalog

    pulled: list[Any] = []
    monkeypatch.setattr(catalog, "pull", lambda db, source, accept=(), known=None: pulled.append(accept) or [])
    db = str(tmp_path / "w.duckdb")
    result = runner.invoke(app, ["refresh", "--replay", "-p", "lambda", "--accept-anomaly", "LAMBDA", "--db", db])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["pull", str(tmp_path), "--accept-anomaly", "RunPod", "--accept-anomaly", "runpod",
                                 "--db", db])
    assert result.exit_code == 0, result.output
    assert (flow_calls[0]["accept_anomaly"], pulled) == (["lambda"], [["runpod"]])
    for command in (["refresh", "--replay", "-p", "lambda"], ["pull", str(tmp_path)]):
        result = runner.invoke(app, [*command, "--accept-anomaly", "lambdda", "--db", db])
        assert (result.exit_code, result.output.strip()) == (
            2, "error: --accept-anomaly lambdda: no such provider; did you mean lambda?")


def test_sql_answers_in_utc_whatever_the_machines_time_zone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its configuration is locked, so `set TimeZone = 'UTC'` (docs/queries.md) is refused: days were cut and
    times shown in the machine's zone, unlike status, export and pull."""
    import time

    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # DuckDB takes it at each connect
    time.tzset()
    try:
        result = runner.invoke(app, ["sql", "select current_setting('TimeZone') as tz, date_trunc('day', "
                                     "timestamptz '2026-12-06 22:31:50+00') as day", "--db", str(db), "--json"])
    finally:
        monkeypatch.undo()
        time.tzset()
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"tz": "UTC", "day": "2026-12-06 00:00:00+00:00"}]
    refused = runner.invoke(app, ["sql", "set enable_external_access = true", "--db", str(db)])
    assert refused.exit_code == 1 and "the configuration has been locked" in refused.output


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), RuntimeError("Query interrupted")])
def test_ctrl_c_during_an_export_or_a_publish_is_one_line_exit_130(stop: BaseException, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """They printed DuckDB's 'RuntimeError: Query interrupted' as a traceback (exit 1), or nothing (exit 130)."""
    from gpuledger.warehouse import catalog, export

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise stop

    monkeypatch.setattr(export, "export_snapshot", interrupted)
    monkeypatch.setattr(catalog, "publish", interrupted)
    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    result = runner.invoke(app, ["export", str(tmp_path / "out"), "--db", str(db)])
    assert (result.exit_code, result.output.strip()) == (
        130, "error: the export was cancelled (Ctrl-C); nothing was written")
    result = runner.invoke(app, ["publish", str(tmp_path / "catalog"), "--db", str(db)])
    assert (result.exit_code, result.output.strip()) == (
        130, f"error: the publish was cancelled (Ctrl-C); the manifest of {tmp_path / 'catalog'} is as it was")


@pytest.mark.parametrize("what", ["ctrl-c", "another error"])
def test_ctrl_c_that_pydantic_made_its_own_error_is_still_the_refresh_interrupted(what: str, tmp_path: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch
                                                                                   ) -> None:
    """Ctrl-C in a refresh's first seconds can come while an import defines a model class: pydantic-core turns the
    KeyboardInterrupt into its own SchemaError ("Error building "literal" validator: KeyboardInterrupt"), which the
    refresh printed as a traceback, exit 1. Here the SIGINT is sent from Python code pydantic-core calls while it
    builds a literal validator (the literal's repr); an error of another cause stays that error."""
    import os
    import signal
    import time

    from pydantic_core import SchemaError, SchemaValidator, core_schema

    from gpuledger.flows import refresh

    class Kind(str):
        def __repr__(self) -> str:
            if what == "ctrl-c":
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler runs here, while pydantic-core builds the validator
            raise ValueError("no repr")

    def defines_a_model(*args: Any, **kwargs: Any) -> None:
        SchemaValidator(core_schema.literal_schema([Kind("api")]))

    monkeypatch.setattr(refresh, "ensure_browsers", defines_a_model)
    db = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["refresh", "--replay", "-p", "lambda", "--db", str(db)])
    if what == "ctrl-c":
        assert (result.exit_code, result.output.strip()) == (
            130, "error: refresh interrupted by SIGINT before its fetches began or after its write; the warehouse is "
                 "as its last completed write left it")
    else:
        assert isinstance(result.exception, SchemaError) and "ValueError: no repr" in str(result.exception)
    assert not db.exists()


def test_sql_json_is_valid_json_with_nan_and_infinities(tmp_path: Path) -> None:
    """`--json` wrote NaN and Infinity, which no JSON parser but Python's takes (jq, JavaScript, Go refuse them)."""
    db = tmp_path / "w.duckdb"
    load(db, "lambda", 1)
    result = runner.invoke(app, ["sql", "select 'nan'::double as x, '-inf'::double as y, ['inf'::double, 1.5] as l, "
                                 "{'a': 'nan'::double} as s", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output

    def strict(word: str) -> None:
        raise ValueError(f"{word} is not JSON")

    assert json.loads(result.stdout, parse_constant=strict) == [{"x": None, "y": None, "l": [None, 1.5],
                                                                 "s": {"a": None}}]


def test_another_programs_duckdb_file_is_never_written_into(tmp_path: Path, flow_calls: list[dict[str, Any]]) -> None:
    """pull wrote gpuledger's tables into it (and a refresh was refused only after Prefect had started)."""
    import duckdb

    from gpuledger.adapters.replay import BUNDLED_RECORDINGS

    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("create table mydata as select 42 as answer")
    before = other.read_bytes()
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "manifest.json").write_text(json.dumps({"format": 2, "schema_version": 1, "providers": {"x": {}}}))
    for command in (["pull", str(catalog)], ["refresh", "--replay", "-p", "lambda"],
                    ["record", str(tmp_path / "rec"), "--from-recordings", str(BUNDLED_RECORDINGS), "-p", "lambda"]):
        result = runner.invoke(app, [*command, "--db", str(other)])
        assert (result.exit_code, result.output.strip()) == (
            2, f"error: {other} is a DuckDB file but not a gpuledger warehouse (pass --db a warehouse `gpuledger "
               "refresh` wrote)"), (command, result.output)
    assert other.read_bytes() == before and flow_calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog", "other.duckdb"]
