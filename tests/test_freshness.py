"""One freshness rule (warehouse/freshness.py) behind `gpuledger status`, the report, export
manifests and the recommender; every registered source is listed, never-loaded ones too."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.cli import app, provider_status
from gpuledger.warehouse.export import freshness as manifest_freshness
from gpuledger.warehouse.freshness import DEFAULT_MAX_AGE_HOURS, provider_freshness
from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.store import open_reader, open_writer
from tests.builders import T0, load_day, offer

NOW = T0 + timedelta(days=2)  # aws: 48 h old; lambda: 36 h; runpod failed after a good run 12 h ago


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("fresh") / "ledger.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "aws", [offer("p5.48xlarge", 55.04)], 0)
        load_day(con, "lambda", [offer("gpu_8x_h100", 23.92)], 0.5)
        load_day(con, "runpod", [offer("H100 SXM", 2.99, count=1)], 1.5)
        load_day(con, "runpod", None, 1.75, error="HTTP 503")
        load_day(con, "acme", [offer("x1", 9.0)], 1.9)  # not a registered source: listed for its runs
    finally:
        con.close()
    return db


def test_the_rule(warehouse: Path) -> None:
    con = open_reader(warehouse)
    try:
        judged = {f.provider: f for f in provider_freshness(con, 36.0, NOW, ["aws", "gcp"])}
    finally:
        con.close()
    assert sorted(judged) == ["acme", "aws", "gcp", "lambda", "runpod"]
    assert (judged["aws"].age_hours, judged["aws"].fresh, judged["aws"].state) == (48.0, False, "stale")
    assert (judged["lambda"].age_hours, judged["lambda"].fresh, judged["lambda"].state) == (36.0, True, "ok")  # <=
    runpod = judged["runpod"]  # a later failure keeps it fresh, and shows
    assert (runpod.age_hours, runpod.fresh, runpod.state, runpod.last_error) == (12.0, True, "failed", "HTTP 503")
    assert runpod.last_ok == T0 + timedelta(days=1.5) and runpod.last_attempt == T0 + timedelta(days=1.75)
    gcp = judged["gcp"]
    assert (gcp.last_ok, gcp.last_attempt, gcp.age_hours, gcp.fresh, gcp.state) == (None, None, None, False, "never")
    assert DEFAULT_MAX_AGE_HOURS == 36.0


def test_the_sql_macros_apply_the_same_rule(warehouse: Path) -> None:
    con = open_reader(warehouse)
    try:
        install_macros(con)
        rows = con.execute("select provider, age_hours, fresh, state from provider_freshness(as_of := ?) "
                           "order by provider", [NOW]).fetchall()
        fresh = con.execute("select provider from fresh_providers(max_age_hours := 24, as_of := ?) order by 1",
                            [NOW]).fetchall()
    finally:
        con.close()
    assert rows == [("acme", pytest.approx(2.4), True, "ok"), ("aws", 48.0, False, "stale"),
                    ("lambda", 36.0, True, "ok"), ("runpod", 12.0, True, "failed")]
    assert fresh == [("acme",), ("runpod",)]


def test_a_run_finished_after_the_reference_time_says_nothing_of_it(warehouse: Path) -> None:
    """Judged as of a past moment (or by a clock set back after one that ran ahead), only the runs finished by
    then count: runpod, first scraped on day 1.5, was not loaded on day 1, and lambda was 12 h old, not -24."""
    day1 = T0 + timedelta(days=1)
    con = open_reader(warehouse)
    try:
        judged = {f.provider: f for f in provider_freshness(con, 36.0, day1, ["runpod"])}
        install_macros(con)
        rows = con.execute("select provider, last_ok, age_hours, fresh, state from provider_freshness(as_of := ?) "
                           "order by provider", [day1]).fetchall()
    finally:
        con.close()
    assert sorted(judged) == ["aws", "lambda", "runpod"]  # acme's only run is on day 1.9
    assert (judged["lambda"].last_ok, judged["lambda"].age_hours, judged["lambda"].state) == (
        T0 + timedelta(days=0.5), 12.0, "ok")
    runpod = judged["runpod"]
    assert (runpod.last_ok, runpod.last_attempt, runpod.fresh, runpod.state) == (None, None, False, "never")
    assert rows == [("aws", T0, 24.0, True, "ok"), ("lambda", T0 + timedelta(days=0.5), 12.0, True, "ok")]


def test_status_lists_every_registered_source(warehouse: Path) -> None:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = {r["provider"]: r for r in provider_status(con, timedelta(hours=36), NOW, SOURCES)}
    finally:
        con.close()
    assert sorted(rows) == sorted({*SOURCES, "acme"})
    assert rows["aws"]["state"] == "stale" and rows["aws"]["offers"] == 1
    assert rows["runpod"]["state"] == "failed" and rows["runpod"]["last_error"] == "HTTP 503"
    assert rows["lambda"]["state"] == "ok" and rows["lambda"]["last_error"] is None
    assert rows["gcp"] == {"provider": "gcp", "state": "never", "last_success": None, "last_attempt": None,
                           "offers": 0, "egress": 0, "storage": 0, "last_error": None, "degraded": None}


def test_status_command_shows_never_loaded_sources(warehouse: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["status", "--db", str(warehouse), "--format", "json"])
    assert result.exit_code == 1, result.output  # runpod's latest attempt failed
    states = {r["provider"]: r["state"] for r in json.loads(result.stdout)}
    # judged now, weeks after T0: everything loaded is stale or failed
    loaded = {"acme": "stale", "aws": "stale", "lambda": "stale", "runpod": "failed"}
    never = sorted(set(SOURCES) - set(loaded))  # every other registered source
    assert {"azure", "gcp", "vastai", "coreweave", "hyperstack"} <= set(never)
    assert states == loaded | {p: "never" for p in never}
    table = runner.invoke(app, ["status", "--db", str(warehouse)])
    assert table.exit_code == 1 and table.stdout.count("never loaded") == len(never)


def test_status_takes_a_refresh_unit_before_its_first_run(warehouse: Path) -> None:
    # `refresh -p aws_capacity_blocks` takes the unit; status had called the same name unknown
    # ("did you mean paperspace, ...", exit 2) until the unit had a run in scrape_runs.
    result = CliRunner().invoke(app, ["status", "--db", str(warehouse), "-p", "AWS_Capacity_Blocks", "--json"])
    assert result.exit_code == 0, result.output
    assert [(r["provider"], r["state"], r["last_attempt"], r["offers"]) for r in json.loads(result.stdout)] == [
        ("aws_capacity_blocks", "never", None, 0)]


def test_the_export_manifest_reads_the_same_runs(warehouse: Path) -> None:
    con = open_reader(warehouse)
    try:
        manifest = manifest_freshness(con)
    finally:
        con.close()
    assert manifest["runpod"] == {"last_success": (T0 + timedelta(days=1.5)).isoformat(),
                                  "last_attempt": (T0 + timedelta(days=1.75)).isoformat(), "last_state": "failed"}
    assert sorted(manifest) == ["acme", "aws", "lambda", "runpod"]


def test_gpuledger_sql_has_the_recommender_macros(warehouse: Path) -> None:
    result = CliRunner().invoke(app, ["sql", "select billed_seconds(1200, 3600, 60) as s", "--db", str(warehouse),
                                      "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"s": 3600.0}]


def test_last_error_is_the_latest_attempts_none_after_a_success(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "lambda", None, 0, error="HTTP 503")
        load_day(con, "lambda", [offer("gpu_8x_h100", 23.92)], 1)  # it recovered
        load_day(con, "runpod", [offer("H100 SXM", 2.99, count=1)], 0)
        load_day(con, "runpod", None, 1, error="HTTP 429")
    finally:
        con.close()
    con = open_reader(db)
    try:
        judged = {f.provider: (f.last_state, f.last_error) for f in provider_freshness(con, 36.0, NOW)}
        install_macros(con)
        rows = con.execute("select provider, last_state, last_error from provider_freshness(as_of := ?) "
                           "order by provider", [NOW]).fetchall()
    finally:
        con.close()
    # before: lambda's last_error was the HTTP 503 of the run before its latest, successful one
    assert judged == {"lambda": ("ok", None), "runpod": ("failed", "HTTP 429")}
    assert rows == [("lambda", "ok", None), ("runpod", "failed", "HTTP 429")]


def test_a_run_dated_by_a_clock_that_was_ahead_hides_no_later_failure(tmp_path: Path) -> None:
    """A refresh made with the clock three days ahead, then the clock corrected: status showed that future run as
    the last success and the latest attempt, so the failures after it read `ok` until the real time passed it."""
    db = tmp_path / "ledger.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "lambda", [offer("gpu_8x_h100", 23.92)], 0)
        load_day(con, "lambda", [offer("gpu_8x_h100", 23.92)], 5)  # the clock ahead (NOW is day 2)
        load_day(con, "lambda", None, 1.9, error="HTTP 503")  # corrected: the refresh of now failed
    finally:
        con.close()
    con = open_reader(db)
    try:
        [f] = provider_freshness(con, 36.0, NOW)
    finally:
        con.close()
    assert (f.state, f.last_error, f.last_ok, f.last_attempt, f.age_hours) == (
        "failed", "HTTP 503", T0, T0 + timedelta(days=1.9), 48.0)
