"""export, publish, pull, serve, plot and the anomaly settings as a user meets them: refusals in one line, nothing
created by a command that failed, the quarantine summary by reason."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters import scaleway
from gpuledger.flows.cli import app
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, load_outcome, open_writer
from tests.builders import T0, batch, load_day, offer, outcome, replayed_warehouse
from tests.test_scaleway import pages, stock


# -- a scrape with no valid offers names its quarantined records' reasons ---------------------

def test_a_scaleway_batch_without_a_rate_says_its_one_reason_once_with_its_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Was: "14 offer records were quarantined, e.g. /compute/l4_1_24g/run_fr-par-2: price in EUR, ... (set
    # GPULEDGER_SCALEWAY_USD_PE; /compute/l4_8_24g/run_fr-par-2: price in EUR, ..." (the same reason twice, cut).
    monkeypatch.delenv("GPULEDGER_SCALEWAY_USD_PER_EUR", raising=False)
    batch = scaleway.parse_catalog(pages(), None, stock())
    con = open_writer(tmp_path / "w.duckdb")
    report = load_outcome(con, outcome(batch, "scaleway"), "r1", AnomalyPolicy())
    error = ("the scrape produced no valid offers (an empty result is never loaded); 14 offer records were "
             "quarantined: 14× price in EUR, not USD; no conversion is configured "
             "(set GPULEDGER_SCALEWAY_USD_PER_EUR)")
    assert (report.state, report.error) == ("failed", error)
    assert con.execute("select state, error, rows_quarantined from scrape_runs").fetchall() == [("failed", error, 14)]
    close_writer(con)
    # status's table cut the error at 120 characters, before the setting to make
    shown = CliRunner().invoke(app, ["status", "-p", "scaleway", "--db", str(tmp_path / "w.duckdb")],
                               env={"COLUMNS": "400"}).output
    assert "(set GPULEDGER_SCALEWAY_USD_PER_EUR)" in shown


def test_the_commonest_reasons_come_first_each_once_and_a_long_one_is_cut_after_a_word(tmp_path: Path) -> None:
    b = Batch("vultr")
    long_reason = "gpu " + " ".join(["unrecognised"] * 20)  # 263 characters
    for ref, reason in [("b", "price is missing"), ("a1", "a1: price in EUR"), ("a2", "a2: price in EUR"),
                        ("c", long_reason), ("a3", "a3: price in EUR"), ("d", "zero GPUs"), ("e", "price is missing"),
                        ("f", "duplicate sku")]:
        b.quarantine("offer", ref, reason, {})
    con = open_writer(tmp_path / "w.duckdb")
    report = load_outcome(con, outcome(b, "vultr"), "r1", AnomalyPolicy())
    cut = "gpu " + " ".join(["unrecognised"] * 11) + " …"  # the whole words of its first 158 characters
    assert report.error == ("the scrape produced no valid offers (an empty result is never loaded); 8 offer records "
                            "were quarantined: 3× price in EUR; 2× price is missing; 1× duplicate sku; "
                            "2× 2 other reasons")
    b.quarantined.reverse()  # the same records in another order: the same words
    assert load_outcome(con, outcome(b, "vultr"), "r2", AnomalyPolicy()).error == report.error
    one = Batch("vultr")
    one.quarantine("offer", "c", long_reason, {})
    assert load_outcome(con, outcome(one, "vultr"), "r3", AnomalyPolicy()).error == (
        "the scrape produced no valid offers (an empty result is never loaded); "
        f"1 offer record was quarantined: 1× {cut}")


# -- a failed export creates nothing ------------------------------------------------------------

@pytest.fixture(scope="module")
def offers_damaged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse that opens but whose offers cannot be read: the block holding them zeroed."""
    db = tmp_path_factory.mktemp("damaged") / "w.duckdb"
    replayed_warehouse(db, ["lambda"])
    with duckdb.connect(str(db), read_only=True) as con:
        [(block,)] = con.execute("select distinct block_id from pragma_storage_info('offers') "
                                 "where block_id >= 0").fetchall()
        [(size,)] = con.execute("select block_size from pragma_database_size()").fetchall()
    with db.open("r+b") as f:
        f.seek(3 * 4096 + block * size)  # after the file's three header blocks of 4 KiB
        f.write(bytes(size))
    return db


def test_an_export_that_fails_leaves_no_folder_it_made_and_an_existing_one_as_it_was(
        offers_damaged: Path, tmp_path: Path) -> None:
    out = tmp_path / "snapshots" / "nightly"
    result = CliRunner().invoke(app, ["export", str(out), "--db", str(offers_damaged)])
    assert result.exit_code == 2, result.output
    assert " ".join(result.output.split()).startswith(f"error: cannot read the warehouse {offers_damaged}: "
                                                       "Corrupt database file")
    assert not (tmp_path / "snapshots").exists()  # before: snapshots/nightly/ was left, empty
    mine = tmp_path / "mine"
    (mine / "2026").mkdir(parents=True)
    (mine / "notes.txt").write_text("kept")
    result = CliRunner().invoke(app, ["export", str(mine), "--db", str(offers_damaged)])
    assert result.exit_code == 2
    assert sorted(p.relative_to(mine).as_posix() for p in mine.rglob("*")) == ["2026", "notes.txt"]
    assert (mine / "notes.txt").read_text() == "kept"


# -- GPULEDGER_ACCEPT_ANOMALY names providers in any case, and only providers ------------------------

def test_accept_anomaly_in_upper_case_loads_the_anomalous_scrape(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    con = open_writer(tmp_path / "w.duckdb")
    assert load_day(con, "aws", [offer(f"t{i}", 10.0 + i) for i in range(10)], 0).state == "ok"
    monkeypatch.setenv("GPULEDGER_ACCEPT_ANOMALY", " AWS ,Lambda")
    assert AnomalyPolicy.from_env().accept == {"aws", "lambda"}  # before: {"AWS", "Lambda"}, which no provider is
    scrape = outcome(batch("aws", [offer(f"t{i}", 10.0 + i) for i in range(4)]), "aws", T0 + timedelta(days=1))
    report = load_outcome(con, scrape, "r1", AnomalyPolicy.from_env(), now=T0 + timedelta(days=1))
    assert (report.state, report.rows_loaded) == ("ok", 4)  # before: failed, "anomaly guard: row count dropped ..."
    assert con.execute("select count(*) from offers").fetchall() == [(4,)]


@pytest.mark.parametrize("command", [["pull", "catalog"], ["refresh", "--resume"]])
def test_accept_anomaly_naming_no_provider_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GPULEDGER_ACCEPT_ANOMALY", "AWS,awz")
    result = CliRunner().invoke(app, [*command, "--db", str(tmp_path / "w.duckdb")])
    # before: awz was ignored without a word (pull: "manifest.json: not in catalog"; refresh: "nothing waiting")
    assert (result.exit_code, result.output) == (
        2, "error: GPULEDGER_ACCEPT_ANOMALY names 'awz': no such provider; did you mean aws?\n")
    assert not (tmp_path / "w.duckdb").exists()


@pytest.mark.prefect
def test_a_deployments_accept_anomaly_parameter_takes_any_case_and_refuses_a_name_that_is_no_provider(
        tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment passes accept_anomaly to the flow itself, past the command line's check."""
    from gpuledger.adapters.registry import UnknownProviderError
    from gpuledger.flows.refresh import nightly_refresh
    from tests.builders import shared_prefect_server

    shared_prefect_server(request.config)
    seen: list[frozenset[str]] = []
    monkeypatch.setattr("gpuledger.flows.refresh.merge_pending", lambda db, refresh_id, policy, **kw: (
        seen.append(policy.accept), [])[1])
    nightly_refresh(db=str(tmp_path / "w.duckdb"), resume=True, accept_anomaly=["AWS", "Lambda"])
    assert seen == [{"aws", "lambda"}]  # before: {"AWS", "Lambda"}, which no provider is: no anomaly accepted
    with pytest.raises(UnknownProviderError) as refused:  # before: ignored without a word
        nightly_refresh(db=str(tmp_path / "w.duckdb"), resume=True, accept_anomaly=["awz"])
    assert str(refused.value) == "accept_anomaly awz: no such provider; did you mean aws?"
    assert seen == [{"aws", "lambda"}]


# -- a failed publish names a damaged warehouse and creates nothing ---------------------------------

def test_a_publish_from_a_damaged_warehouse_names_it_and_leaves_no_folder_it_made(
        offers_damaged: Path, tmp_path: Path) -> None:
    folder = tmp_path / "site" / "catalog"
    result = CliRunner().invoke(app, ["publish", str(folder), "--db", str(offers_damaged)])
    assert result.exit_code == 2, result.output
    # before: "error: cannot publish into .../site/catalog: Error: Corrupt database file: ...", and site/catalog/ left
    text = " ".join(result.output.split())
    assert text.startswith(f"error: cannot read the warehouse {offers_damaged}: Corrupt database file: ")
    assert text.endswith("(a damaged or truncated file: restore it, or refresh into a new --db)")
    assert not (tmp_path / "site").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("kept")
    assert CliRunner().invoke(app, ["publish", str(mine), "--db", str(offers_damaged)]).exit_code == 2
    assert [p.name for p in mine.iterdir()] == ["index.html"] and (mine / "index.html").read_text() == "kept"


# -- serve refuses at once what every scheduled run would fail on ---------------------------------

def test_serve_refuses_a_warehouse_no_run_could_write_or_an_unknown_accept_anomaly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):  # never reached
        no_folder = CliRunner().invoke(app, ["serve", "--db", "/proc/gpuledger/w.duckdb"])
        monkeypatch.setenv("GPULEDGER_ACCEPT_ANOMALY", "vultur")
        unknown = CliRunner().invoke(app, ["serve"])
    # before: "error: cannot reach the Prefect server at ...", and with a server a schedule whose every run fails
    assert (no_folder.exit_code, no_folder.output) == (2, "error: cannot write beside the warehouse "
                                                          "/proc/gpuledger/w.duckdb: /proc/gpuledger/w.duckdb.refresh"
                                                          ".lock: No such file or directory\n")
    assert (unknown.exit_code, unknown.output) == (
        2, "error: GPULEDGER_ACCEPT_ANOMALY names 'vultur': no such provider; did you mean vultr?\n")


# -- exports into one folder in the same second ---------------------------------------------------

def test_two_exports_in_the_same_second_into_one_folder_both_land(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.warehouse import export as export_module

    db = tmp_path / "w.duckdb"
    replayed_warehouse(db, ["lambda"])
    monkeypatch.setattr(export_module, "utcnow", lambda: datetime(2026, 12, 7, 3, 0, 0, tzinfo=timezone.utc))
    hashed, landed = export_module.sha256_file, []

    def another_export_meanwhile(path: Path) -> str:  # the second export runs while the first is writing
        if not landed:
            landed.append(None)
            landed.append(export_module.export_snapshot(con, tmp_path / "out", ["csv"], ["gpu_models"]))
        return hashed(path)

    monkeypatch.setattr(export_module, "sha256_file", another_export_meanwhile)
    with duckdb.connect(str(db), read_only=True) as con:
        first = export_module.export_snapshot(con, tmp_path / "out", ["csv"], ["gpu_models"])
    # before: the second found the first's .20261207T030000Z.partial, failed "File exists" and removed it,
    # so the first failed too ("No such file or directory"): neither export was written
    assert (landed[1].name, first.name) == ("20261207T030000Z", "20261207T030000Z-2")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["20261207T030000Z", "20261207T030000Z-2"]
    for folder in (first, landed[1]):
        manifest = json.loads((folder / "manifest.json").read_text())
        rows = len((folder / "gpu_models.csv").read_text().splitlines()) - 1  # after the header
        assert manifest["tables"]["gpu_models"]["rows"] == 79 == rows


def test_publishing_a_warehouse_without_a_successful_scrape_writes_no_catalog(tmp_path: Path) -> None:
    db, folder = tmp_path / "w.duckdb", tmp_path / "catalog"
    close_writer(open_writer(db))  # a warehouse of no scrape: a new --db, or the wrong one
    result = CliRunner().invoke(app, ["publish", str(folder), "--db", str(db)])
    # before: exit 0, an empty table and a manifest.json of no provider, which pull then refused
    # ("the catalog holds no provider: nothing to load")
    assert (result.exit_code, " ".join(result.output.split())) == (
        2, f"error: {db} holds no successful scrape: nothing to publish "
           "(`gpuledger refresh` or `gpuledger pull` first)")
    assert not folder.exists()


def test_plot_names_the_gpu_as_the_warehouse_does(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    replayed_warehouse(db, ["lambda"])
    result = CliRunner().invoke(app, ["plot", "--gpu", "h100-sxm", str(tmp_path / "h100.png"), "--db", str(db)])
    assert result.exit_code == 0, result.output
    # before: "h100-sxm: ...", the name as typed, where the plot and every other line say H100-SXM
    assert result.stderr.startswith("H100-SXM: a single snapshot (")
    assert result.stderr.rstrip().endswith(" of 1 provider: no history yet, drawn as one bar per provider")


def test_publish_calls_what_it_did_of_each_provider_its_state(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    replayed_warehouse(db, ["lambda"])
    first = CliRunner().invoke(app, ["publish", str(tmp_path / "catalog"), "--db", str(db), "--json"])
    again = CliRunner().invoke(app, ["publish", str(tmp_path / "catalog"), "--db", str(db), "--format", "csv"])
    # before: {"provider": "lambda", "files": "published"}, a column "files" of no files
    assert json.loads(first.stdout) == [{"provider": "lambda", "state": "published"}]
    assert again.stdout == "provider,state\nlambda,kept\n"
