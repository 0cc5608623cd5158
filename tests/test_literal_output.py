"""Scraped text and user input are data on every terminal surface: printed as the characters they
are (no markup, no emoji codes, no escape sequences obeyed), bounded in tables, and kept whole in
JSON and CSV. The warehouse is built with the real merge (tests/builders.py), not a refresh."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import _print_summary, app
from gpuledger.flows.literal import CELL_LIMIT, ELLIPSIS, MESSAGE_LIMIT, plain
from gpuledger.warehouse.store import AnomalyPolicy, load_outcome, open_writer, utcnow
from tests.builders import batch, offer, replayed_warehouse, scraped

runner = CliRunner()

# Each piece is one word, so a table that wraps a cell keeps it whole on one line.
MARKUP = "[/x] [bold]loud[/bold] :warning: [link=http://x]click[/link]"
ESCAPES = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07title \x1b[2J"
HOSTILE = f"{MARKUP} {ESCAPES} over\rwritten rtl\u202eevil\u200fmark tab\tbell\x07"
SHOWN = "[/x] [bold]loud[/bold] :warning: [link=http://x]click[/link] red title  over written rtlevilmark tab bell "
LONG = "long-" + "L" * 5000
PROVIDER = "evil[/x]"
FORBIDDEN = ("\x1b", "\r", "\u202e", "\u200f", "\x07", "\u26a0")  # \u26a0: what :warning: renders as


def shows_literally(text: str) -> None:
    """Every hostile piece is there as the characters it is, and nothing a terminal would obey."""
    for piece in ("[/x]", "[bold]loud[/bold]", ":warning:", "[link=http://x]click[/link]", "rtlevilmark"):
        assert piece in text, (piece, text[:3000])
    for bad in FORBIDDEN:
        assert bad not in text, (repr(bad), text[:3000])


def test_plain_cuts_escapes_controls_and_bidi_and_bounds_length() -> None:
    assert plain(HOSTILE) == SHOWN
    assert plain("H100 \u00e9\u4e2d ok") == "H100 \u00e9\u4e2d ok"  # printable text passes as it is
    assert plain("x" * 10, limit=4) == "xxx" + ELLIPSIS
    assert plain(None) == ""


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A provider whose every shown field is hostile, loaded now (fresh for `recommend`), and a
    provider whose last run failed with a hostile error (for `status`)."""
    db = tmp_path_factory.mktemp("hostile") / "ledger.duckdb"
    rows = [dict(offer(HOSTILE, 1.25, count=1), gpu_name_reported=HOSTILE),
            offer(LONG, 1.50, count=1),
            offer("spot-" + HOSTILE, 0.75, count=1, option="spot", interruption_risk=HOSTILE)]
    now = utcnow()
    good = batch(PROVIDER, rows)
    good.notes.append(HOSTILE)
    con = open_writer(db)
    try:
        assert load_outcome(con, scraped(PROVIDER, "replay", now, now, batch=good), "r1",
                            AnomalyPolicy(), now=now).ok
        load_outcome(con, scraped("broken", "replay", now, now, error=f"broken: HTTP 500: {HOSTILE}"),
                     "r1", AnomalyPolicy(), now=now)
    finally:
        con.close()
    return db


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_sql_table_shows_provider_text_literally_and_bounded(hostile_db: Path) -> None:
    code, text = invoke("sql", "select instance_type, gpu_name_reported from offers order by price_per_hour",
                        "--db", str(hostile_db))
    assert code == 0, text
    shows_literally(text)
    assert text.count("L") < CELL_LIMIT + 10 and ELLIPSIS in text  # the 5000-character name is cut
    # A column name is user input too.
    code, text = invoke("sql", 'select 1 as "[/x] :warning:"', "--db", str(hostile_db))
    assert code == 0 and "[/x] :warning:" in text, text


def test_sql_json_and_csv_keep_the_full_value(hostile_db: Path) -> None:
    query = "select instance_type from offers order by price_per_hour"
    code, text = invoke("sql", query, "--db", str(hostile_db), "--format", "json")
    assert code == 0, text
    assert [r["instance_type"] for r in json.loads(text)] == ["spot-" + HOSTILE, HOSTILE, LONG]
    assert not any(bad in text for bad in FORBIDDEN)  # escaped as \\u sequences, still the same value
    code, text = invoke("sql", query, "--db", str(hostile_db), "--format", "csv")
    assert code == 0, text
    assert [r[0] for r in csv.reader(io.StringIO(text, newline=""))] == ["instance_type", "spot-" + HOSTILE,
                                                                         HOSTILE, LONG]


def test_csv_on_a_terminal_writes_controls_as_escapes(hostile_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sql/pull --format csv to a terminal wrote a provider's ESC [2J and BEL as they are: the screen cleared."""
    from gpuledger.flows import output

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr(output.sys, "stdout", screen)
    output.emit(["instance_type"], [[HOSTILE], [["list", HOSTILE]]], "csv")
    header, (text,), (listed,) = csv.reader(io.StringIO(screen.getvalue(), newline=""))
    assert not any(bad in text + listed for bad in FORBIDDEN), (text, listed)
    assert text.startswith(MARKUP + " \\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07title \\x1b[2J over\\rwritten rtl\\u202eevil")
    assert text.encode("ascii", "backslashreplace").decode("unicode_escape") == HOSTILE  # every character kept
    assert listed.startswith('["list", "[/x]') and "\\u001b[2J" in listed and "rtl\\u202eevil" in listed


def test_sql_error_quoting_the_query_is_one_literal_line(hostile_db: Path) -> None:
    code, text = invoke("sql", "select '[/x]' from no_such_table", "--db", str(hostile_db))
    assert code == 1, text
    assert "error:" in text and "no_such_table" in text and "Traceback" not in text


def test_status_shows_hostile_errors_and_provider_names_literally(hostile_db: Path) -> None:
    code, text = invoke("status", "--db", str(hostile_db))
    assert code == 1, text  # a provider failed: status says so in its exit code too
    assert PROVIDER in text and "broken" in text
    for bad in FORBIDDEN:
        assert bad not in text, repr(bad)
    assert "[/x]" in text.split("broken", 1)[1] and ":warning:" in text  # the failed run's error, as text
    code, text = invoke("status", "--db", str(hostile_db), "--format", "json")
    assert code == 1, text
    rows = {r["provider"]: r for r in json.loads(text)}
    assert rows["broken"]["last_error"] == f"broken: HTTP 500: {HOSTILE}"  # whole, in JSON


def test_recommend_table_and_json(hostile_db: Path) -> None:
    args = ("recommend", "--params", "1e9", "--method", "qlora", "--spot", "--db", str(hostile_db),
            "--provider", PROVIDER, "--all-locations")
    code, text = invoke(*args)
    assert code == 0, text
    assert PROVIDER in text
    shows_literally(text)
    assert text.count("L") < CELL_LIMIT + 10
    code, text = invoke(*args, "--json")
    assert code == 0, text
    names = {c["instance_type"] for c in json.loads(text)["candidates"]}
    assert names == {HOSTILE, LONG, "spot-" + HOSTILE}
    # User input in an error message.
    code, text = invoke("recommend", "--model", "[/x]:warning:", "--method", "qlora", "--db", str(hostile_db))
    assert code == 2 and "[/x]:warning:" in text, text


def test_check_report_plot_and_export_messages(hostile_db: Path, tmp_path: Path) -> None:
    code, text = invoke("check", "--db", str(hostile_db))
    assert code == 0, text
    folder = tmp_path / "[/x] :warning:"
    code, text = invoke("report", str(folder / "page.html"), "--db", str(hostile_db))
    assert code == 0 and "[/x] :warning:" in text, text
    code, text = invoke("plot", "--gpu", "[/x]H100", "--db", str(hostile_db), str(tmp_path / "p.png"))
    assert code == 2 and "[/x]H100" in text and "Traceback" not in text, text
    code, text = invoke("export", str(folder / "export"), "--db", str(hostile_db), "--format", "csv",
                        "--table", "offers")
    assert code == 0 and "[/x] :warning:" in text, text
    exported = next((folder / "export").glob("*/offers.csv"))
    with open(exported, newline="") as f:
        names = sorted(r["instance_type"] for r in csv.DictReader(f))
    assert names == sorted([HOSTILE, LONG, "spot-" + HOSTILE])  # whole; no formula prefix to neutralize


def test_check_cuts_a_long_offending_row_on_the_terminal(hostile_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    db.write_bytes(hostile_db.read_bytes())
    with duckdb.connect(str(db)) as con:  # the offer named by 5,000 characters, at no finite price per GPU-hour
        con.execute("update offers set price_per_gpu_hour = 'nan'::double where instance_type = $long", {"long": LONG})
    code, text = invoke("check", "--db", str(db))
    assert code == 1, text
    [line] = [line for line in text.splitlines() if "prices positive and finite" in line]
    assert line.startswith("FAIL offers: prices positive and finite, GPU model known: 1 offending rows, the first: "
                           f"provider={PROVIDER}, region=us-east-1, instance_type=long-LLL")
    # before: the whole 5,000-character name, on one line of over 5,100
    assert len(line) == len("FAIL ") + MESSAGE_LIMIT and line.endswith(ELLIPSIS), len(line)


def test_refresh_summary_prints_errors_and_notes_literally(capsys: pytest.CaptureFixture[str]) -> None:
    row = {"provider": PROVIDER, "state": "ok", "offers": 3, "new": 3, "changed": 0, "closed": 0,
           "quarantined": 0, "egress": 0, "storage": 0, "error": None, "notes": [HOSTILE, LONG], "degraded": None}
    failed = dict(row, provider="broken", state="failed", error=f"broken: {HOSTILE}", notes=[])
    degraded = dict(row, provider="dented", notes=[], degraded=f"stock levels ({HOSTILE})")
    _print_summary({"refresh_id": "r[/x]", "ok": False, "failed": ["broken"], "providers": [row, failed, degraded]})
    text = capsys.readouterr().err
    shows_literally(text)
    flat, shown = " ".join(text.split()), " ".join(SHOWN.split())  # the console wraps long lines
    assert "r[/x]" in text and f"{PROVIDER}: {shown}" in flat and f"broken: {shown}" in flat
    assert f"dented: degraded: stock levels ({shown}" in flat
    assert text.count("L") < MESSAGE_LIMIT + 10  # a note the length of a page is cut, on the terminal only


def test_log_lines_quoting_provider_text_are_literal() -> None:
    import logging

    from rich.console import Console

    from gpuledger.flows.literal import LiteralRichHandler

    buf = io.StringIO()
    handler = LiteralRichHandler(console=Console(file=buf, width=400), show_path=False, show_time=False)
    record = logging.LogRecord("gpuledger.adapters", logging.INFO, __file__, 1, "lambda: retrying after %s\nline 2",
                               (HOSTILE,), None)
    handler.emit(record)
    text = buf.getvalue()
    shows_literally(text)
    assert "line 2" in text.splitlines()[1]  # a message's own lines stay lines


def test_the_hostile_warehouse_is_stored_as_given(hostile_db: Path) -> None:
    """The guard for every test above: the data really holds the hostile values."""
    con = duckdb.connect(str(hostile_db), read_only=True)
    try:
        assert con.execute("select count(*) from offers where instance_type = ?", [HOSTILE]).fetchone() == (1,)
        assert con.execute("select notes from scrape_runs where provider = ?", [PROVIDER]).fetchone() == (HOSTILE,)
    finally:
        con.close()


EVIL = "=HYPERLINK(http://evil/)-us-south-1"  # a region a spreadsheet would run as a formula


@pytest.fixture(scope="module")
def formula_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Lambda replayed through its real client, every instance type offered in the region EVIL."""
    def hook(host: str, request: object, exchange: Any) -> tuple[int, dict[str, str], bytes] | None:
        if exchange is None or host != "cloud.lambda.ai" or not exchange.path.endswith("/instance-types"):
            return None
        body = json.loads(exchange.body())
        for entry in body["data"].values():
            entry["regions_with_capacity_available"] = [{"name": EVIL, "description": "Texas, USA"}]
        return exchange.status, dict(exchange.headers), json.dumps(body).encode()

    db = tmp_path_factory.mktemp("formula") / "ledger.duckdb"
    replayed_warehouse(db, ["lambda"], hook=hook)
    return db


def csv_rows(*args: str) -> list[dict[str, str]]:
    result = runner.invoke(app, [*args, "--format", "csv"])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(io.StringIO(result.stdout, newline="")))


def test_every_commands_csv_neutralises_a_formula_as_export_does(formula_db: Path, tmp_path: Path) -> None:
    # before: show-gpus, sql and recommend wrote =HYPERLINK(http://evil/)-us-south-1 as it came; export alone
    # wrote it after a ' (OWASP: a cell starting with = + - @ is a formula)
    code, text = invoke("export", str(tmp_path / "export"), "--db", str(formula_db), "--format", "csv",
                        "--table", "offers")
    assert code == 0, text
    with open(next((tmp_path / "export").glob("*/offers.csv")), newline="") as f:
        assert {r["region"] for r in csv.DictReader(f)} == {"'" + EVIL}
    db = ("--db", str(formula_db))
    for rows in (csv_rows("show-gpus", "H100-SXM", *db), csv_rows("sql", "select region from offers", *db),
                 csv_rows("recommend", "--params", "1e9", "--method", "qlora", "--all-locations", *db)):
        assert rows and {r["region"] for r in rows} == {"'" + EVIL}, rows
    # numbers stay numbers (a negative one too), text that starts with a minus does not; a column name is
    # neutralised as a cell is; JSON keeps the value exact
    result = runner.invoke(app, ["sql", "select -5 as n, -2.5 as d, '-5' as t, 'a-b' as u, 1 as \"@x\"", *db,
                                 "--format", "csv"])
    assert result.stdout.splitlines() == ["n,d,t,u,'@x", "-5,-2.5,'-5,a-b,1"], result.output
    code, text = invoke("sql", "select distinct region from offers", *db, "--format", "json")
    assert json.loads(text) == [{"region": EVIL}]


def test_csv_neutralises_each_formula_trigger_export_names(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuledger.flows.output import emit

    cells = ["=1+1", "+1", "-1", "@SUM(A1)", "|cmd", "\t1", "\r1", " =1", "\u3000=1", "\x00=1", "\uff1d1",
             "\uff0b1", "\uff0d1", "\uff20x", "\uff5cx", "a=1", "1-1", "x@y"]
    emit(["cell"], [[c] for c in cells] + [[-1], [-1.5]], "csv")
    written = [r[0] for r in csv.reader(io.StringIO(capsys.readouterr().out, newline=""))]
    assert written == ["cell", *("'" + c for c in cells[:15]), "a=1", "1-1", "x@y", "-1", "-1.5"]
