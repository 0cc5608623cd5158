"""End to end: `gpuledger refresh --replay` through Prefect, then sql, export, status, check, record."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.flows.cli import app
from gpuledger.adapters.registry import SOURCES, UNITS
from gpuledger.warehouse.schema import SCHEMA_VERSION
from tests.builders import replayed_warehouse, shared_prefect_server

pytestmark = pytest.mark.prefect
runner = CliRunner()
FIXTURES_DIR = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module", autouse=True)
def prefect_harness(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


@pytest.fixture(scope="module")
def replayed_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("e2e") / "ledger.duckdb"
    result = runner.invoke(app, ["refresh", "--replay", "--db", str(db)])
    assert result.exit_code == 0, result.output
    return db


def offers_without_run_columns(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "select * exclude (first_seen, last_seen, run_id) from offers order by provider, region, zone, "
            "instance_type, purchase_option").fetchall()
    finally:
        con.close()


def test_refresh_replay_loads_every_bundled_provider(replayed_db: Path) -> None:
    con = duckdb.connect(str(replayed_db), read_only=True)
    runs = con.execute("select provider, state, rows_loaded from scrape_runs order by provider").fetchall()
    con.close()
    assert [r[0] for r in runs] == sorted(SOURCES)  # every registered provider has a bundled recording
    assert all(state == "ok" and rows > 0 for _, state, rows in runs), runs


def test_the_refresh_leaves_no_fetch_process_and_no_result_waiting(replayed_db: Path) -> None:
    import psutil

    # (the fault matrix, beside the session, runs crawls of its own)
    assert not [c for c in psutil.Process().children(recursive=True) if "gpuledger.flows.fetch" in " ".join(c.cmdline())]
    assert not Path(str(replayed_db) + ".pending").exists()  # every handed-over result merged and removed


def readme_query(title: str) -> str:
    """The SQL under a `-- title` comment of README.md's query block, up to its `;`."""
    text = (Path(__file__).parents[1] / "README.md").read_text()
    start = text.index(f"-- {title}\n") + len(title) + 4
    return text[start:text.index(";", start)]


def test_the_bundled_market_is_wide(replayed_db: Path) -> None:
    con = duckdb.connect(str(replayed_db), read_only=True)
    try:
        cheapest = con.execute(readme_query("cheapest 80 GB-class card per provider, on demand: one row per provider")
                               ).fetchall()
        regions = dict(con.execute("select provider, count(distinct region) from offers "
                                   "where provider in ('aws', 'azure', 'gcp') group by provider").fetchall())
    finally:
        con.close()
    assert len({row[0] for row in cheapest}) >= 12, sorted({row[0] for row in cheapest})
    assert len(SOURCES) >= 20
    assert regions["aws"] >= 25 and regions["azure"] >= 30 and regions["gcp"] >= 25, regions


def test_sql_answers_and_refuses_writes(replayed_db: Path) -> None:
    q = ("select gpu_model, region, purchase_option, price_per_gpu_hour from offers "
         "where provider = 'aws' order by price_per_gpu_hour limit 3")
    result = runner.invoke(app, ["sql", q, "--db", str(replayed_db), "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3 and all(r["price_per_gpu_hour"] > 0 for r in rows)
    # The real entry point, in another process: a DROP fails with a clear message and nothing changes.
    proc = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql", "drop table offers", "--db", str(replayed_db)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "read-only" in proc.stderr
    assert offers_without_run_columns(replayed_db)


def test_status_and_check(replayed_db: Path) -> None:
    result = runner.invoke(app, ["status", "--db", str(replayed_db), "--format", "json"])
    assert result.exit_code == 0, result.output
    status = {r["provider"]: r for r in json.loads(result.stdout)}
    assert status["aws"]["state"] == "ok" and status["aws"]["offers"] > 0
    result = runner.invoke(app, ["check", "--db", str(replayed_db)])
    assert result.exit_code == 0, result.output
    assert "FAIL" not in result.stdout


def test_refresh_and_check_write_their_rows_as_json_or_csv_for_scripts(tmp_path: Path) -> None:
    """--json / --format csv: a refresh's summary and the check's results on standard output, as status gives
    its rows. The lambda recording's README: 27 offers, 1 egress and 1 storage record, 0 quarantined."""
    db = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["refresh", "--replay", "-p", "lambda", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row == {"provider": "lambda", "state": "ok", "offers": 27, "new": 27, "changed": 0, "closed": 0,
                   "quarantined": 0, "egress": 1, "storage": 1, "error": None, "degraded": None,
                   "notes": ["availability history: 27 of 27 signals stored"]}
    result = runner.invoke(app, ["refresh", "--replay", "-p", "lambda", "--db", str(db), "--format", "csv"])
    assert result.exit_code == 0, result.output
    header, line = csv.reader(io.StringIO(result.stdout))
    assert header == ["provider", "state", "offers", "new", "changed", "closed", "quarantined", "egress", "storage",
                      "error", "degraded", "notes"]
    assert line[:11] == ["lambda", "ok", "27", "0", "0", "0", "0", "1", "1", "", ""]  # the same answer: nothing new
    result = runner.invoke(app, ["refresh", "--resume", "--db", str(db), "--json"])
    assert (result.exit_code, result.stdout) == (0, "[]\n")  # nothing waiting: no provider merged
    result = runner.invoke(app, ["check", "--db", str(db), "--json"])
    checks = json.loads(result.stdout)
    assert result.exit_code == 0 and len(checks) > 10 and all(c["ok"] is True for c in checks)
    assert checks[0] == {"check": "schema version", "ok": True,
                         "detail": f"warehouse at version {SCHEMA_VERSION}, this gpuledger expects {SCHEMA_VERSION}"}
    # two formats asked for: refused before anything is fetched or made
    result = runner.invoke(app, ["refresh", "--json", "--format", "csv", "--db", str(tmp_path / "new.duckdb")])
    assert (result.exit_code, result.stdout) == (2, "") and not (tmp_path / "new.duckdb").exists()


def test_export_writes_timestamped_snapshot(replayed_db: Path, tmp_path: Path) -> None:
    result = runner.invoke(app, ["export", str(tmp_path / "snaps"), "--db", str(replayed_db)])
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.strip().splitlines()[-1])
    manifest = json.loads((folder / "manifest.json").read_text())
    con = duckdb.connect(str(replayed_db), read_only=True)
    n = con.execute("select count(*) from offers").fetchall()[0][0]
    con.close()
    assert manifest["tables"]["offers"]["rows"] == n
    assert (folder / "offers.csv").read_text().count("\n") == n + 1
    assert duckdb.sql(f"select count(*) from '{folder / 'offers.parquet'}'").fetchall()[0][0] == n


def test_rerun_is_idempotent_through_the_flow(replayed_db: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Two of AWS's regions carry every kind of row it has (on demand, spot per zone, the twelve
    # Reserved terms, egress, EBS; a GPU-only region): the rerun, not the size, is the subject.
    monkeypatch.setenv("GPULEDGER_AWS_REGIONS", "us-east-1,eu-north-1")
    db = tmp_path / "again.duckdb"
    for _ in range(2):
        assert runner.invoke(app, ["refresh", "--replay", "--db", str(db), "-p", "aws"]).exit_code == 0
    con = duckdb.connect(str(db), read_only=True)
    hist, cur = con.execute("select (select count(*) from offer_history), (select count(*) from offers)").fetchall()[0]
    runs = con.execute("select offers_new, offers_changed, offers_closed from scrape_runs order by finished_at").fetchall()
    regions = con.execute("select distinct region from offers order by region").fetchall()
    options = {r[0] for r in con.execute("select distinct purchase_option from offers").fetchall()}
    egress, storage = con.execute("select (select count(*) from egress_prices), "
                                  "(select count(*) from storage_prices)").fetchall()[0]
    con.close()
    assert regions == [("eu-north-1",), ("us-east-1",)]
    assert {"on_demand", "spot", "reserved_1y_no_upfront", "reserved_convertible_3y_all_upfront"} <= options
    assert egress > 0 and storage > 0
    assert hist == cur and runs[0][0] == cur > 0
    assert runs[1] == (0, 0, 0)


def test_record_then_replay_gives_the_same_warehouse(replayed_db: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every provider, recorded through the real clients (boto3 events, the HTTP proxy for
    httpx, google and scrapy) and replayed from what was recorded, gives the same offers.
    AWS in three of its regions: the subject is the recorder, not 40 MB of price list twice.
    (The recordings are replayed by the library; `refresh --recordings` is the command's, tested
    in test_failures_stay_with_their_provider.)"""
    regions = ("us-east-1", "eu-west-1", "ap-northeast-1")
    monkeypatch.setenv("GPULEDGER_AWS_REGIONS", ",".join(regions))
    rec = tmp_path / "recorded"
    db1, db2 = tmp_path / "recording.duckdb", tmp_path / "replayed.duckdb"
    result = runner.invoke(app, ["record", str(rec), "--db", str(db1), "--from-recordings", str(BUNDLED_RECORDINGS)])
    assert result.exit_code == 0, result.output
    # every provider and the refresh unit the folder holds a recording of (aws_capacity_blocks)
    assert sorted(p.name for p in rec.iterdir()) == sorted([*SOURCES, *UNITS])
    manifest = json.loads((rec / "aws" / "manifest.json").read_text())
    assert len(manifest["exchanges"]) > 10
    assert "replay" not in json.dumps(manifest)  # no credentials, not even the dummy ones
    replayed_warehouse(db2, SOURCES, recordings=rec)
    recorded = offers_without_run_columns(db1)
    assert {r for r in recorded if r[0] == "aws"} and {r[1] for r in recorded if r[0] == "aws"} <= set(regions)
    assert recorded == offers_without_run_columns(db2) == [
        r for r in offers_without_run_columns(replayed_db) if r[0] != "aws" or r[1] in regions]


def test_refresh_exit_code_names_failed_provider(tmp_path: Path) -> None:
    broken = tmp_path / "recordings"
    (broken / "aws").mkdir(parents=True)
    (broken / "aws" / "manifest.json").write_text(json.dumps({"provider": "aws", "exchanges": []}))
    result = runner.invoke(app, ["refresh", "--replay", "--recordings", str(broken), "--db",
                                 str(tmp_path / "x.duckdb"), "-p", "aws"])
    assert result.exit_code == 1
    assert "failed providers: aws" in result.output


def test_unknown_provider_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["refresh", "--replay", "--db", str(tmp_path / "x.duckdb"), "-p", "nope"])
    assert result.exit_code == 2 and "unknown provider 'nope'" in result.output


def test_every_commands_help_keeps_its_lines_whole_at_80_columns() -> None:
    """rich keeps a docstring's own line breaks: a line of a paragraph or of the examples that it also
    wraps on an 80-column terminal breaks mid-sentence. (A paragraph of one line wraps cleanly.)"""
    import inspect

    import typer.main

    commands = typer.main.get_command(app).commands
    assert {"refresh", "record", "sql", "export", "status", "check", "recommend", "pull"} <= set(commands)
    for name, command in commands.items():
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, name
        shown = [line.strip() for line in result.output.splitlines()]
        for paragraph in inspect.cleandoc(command.help or "").replace("\b\n", "").split("\n\n"):
            lines = paragraph.strip().splitlines()
            assert len(lines) == 1 or all(line.strip() in shown for line in lines), (name, paragraph)
    assert os.environ.get("PREFECT_SERVER_ANALYTICS_ENABLED") == "false"


def test_every_options_help_and_default_are_shown_whole() -> None:
    """rich reads help text as markup: "[default: both]" inside it was a tag, dropped without a trace."""
    import typer.main

    for name, command in typer.main.get_command(app).commands.items():
        shown = runner.invoke(app, [name, "--help"], env={"COLUMNS": "1000"}).output  # no option's line wrapped
        for param in command.params:
            if param.help:
                assert param.help in shown, (name, param.name)
            if isinstance(param.show_default, str):
                assert f"[default: ({param.show_default})]" in shown, (name, param.name)
    shown = runner.invoke(app, ["status", "--help"], env={"COLUMNS": "1000"}).output
    assert "The DuckDB warehouse file. [env var: GPULEDGER_DB] [default: (./gpuledger.duckdb)]" in shown


def test_failures_stay_with_their_provider(replayed_db: Path, tmp_path: Path) -> None:
    """Azure's API starts failing and CoreWeave's page changes layout: both fail, keep their
    previous rows byte for byte, and the other providers of the same refresh still load.
    (The flow, not the market, is the subject: two clean peers stand for the rest; the fault
    matrix in tests/faults loads every provider beside faulted ones.)"""
    import shutil

    recordings = tmp_path / "recordings"
    shutil.copytree(BUNDLED_RECORDINGS, recordings)
    azure = json.loads((recordings / "azure" / "manifest.json").read_text())
    for ex in azure["exchanges"]:
        ex["response"] = {"status": 500, "headers": {"Content-Type": "application/json"},
                          "body": '{"error": "InternalServerError"}'}
    (recordings / "azure" / "manifest.json").write_text(json.dumps(azure))
    changed = FIXTURES_DIR / "coreweave" / "layout_changed"
    page = changed / "coreweave" / "www.coreweave.com" / "pricing.html"
    shutil.copy(page, recordings / "coreweave" / "www.coreweave.com" / "pricing.html")

    db = tmp_path / "faults.duckdb"
    shutil.copy(replayed_db, db)
    before = {p: [r for r in offers_without_run_columns(db) if r[0] == p] for p in ("azure", "coreweave")}
    subset = ["azure", "coreweave", "lambda", "runpod"]
    result = runner.invoke(app, ["refresh", "--replay", "--recordings", str(recordings), "--db", str(db),
                                 *[a for p in subset for a in ("-p", p)]])
    assert result.exit_code == 1
    assert "failed providers: azure, coreweave" in result.output
    after = offers_without_run_columns(db)
    for p in ("azure", "coreweave"):
        assert before[p] and [r for r in after if r[0] == p] == before[p]
    con = duckdb.connect(str(db), read_only=True)
    last = dict(con.execute(
        "select provider, arg_max(state, finished_at) from scrape_runs group by provider").fetchall())
    errors = dict(con.execute(
        "select provider, arg_max(error, finished_at) from scrape_runs group by provider").fetchall())
    [(refresh_id,)] = con.execute("select refresh_id from scrape_runs where provider = 'azure' "
                                  "order by finished_at desc limit 1").fetchall()
    this_refresh = dict(con.execute("select provider, state from scrape_runs where refresh_id = ?",
                                    [refresh_id]).fetchall())
    con.close()
    assert this_refresh == {"azure": "failed", "coreweave": "failed", "lambda": "ok", "runpod": "ok"}
    assert last == {p: ("failed" if p in ("azure", "coreweave") else "ok") for p in SOURCES}
    assert "HTTP 500" in errors["azure"] and "layout" in errors["coreweave"].lower()
