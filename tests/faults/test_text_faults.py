"""Faults in the text of an answer, from the wire to every output: hostile strings and a secret
inside the data. Lambda's client reads the edited answer from the loopback
replay server; the load is the refresh's own (`fetch_source`, `load_all`); then every output
path is read: `sql` as a table, JSON and CSV, `recommend`, and an exported CSV.

One provider, two cells: each is seconds, and the same code paths serve every source (the
secret cutter lives in `Batch`, the terminal helper in `flows.literal`). The cells join the
printed provider x fault matrix. A key given twice has its Lambda test in
tests/test_repeated_keys.py (the same fetch again here would cost seconds and prove nothing more).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Request
from gpuledger.flows.cli import app
from tests.builders import replayed_warehouse
from tests.faults.harness import Verdict
from tests.faults.matrix import keep

RECORDING = BUNDLED_RECORDINGS / "lambda" / "instance-types.json"
HOSTILE = "[/x] [bold]b[/bold] :warning: \x1b[31mred\x1b[0m over\rwrite rtl\u202eevil"
KEY = "secret_lambda_CANARYtext9z8y7x6w"
TERMINAL_FORBIDDEN = ("\x1b", "\r", "\u202e", "\u26a0")
runner = CliRunner()


def recorded() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def renamed(name: str) -> bytes:
    doc = recorded()
    doc["data"]["gpu_1x_a10"]["instance_type"]["name"] = name
    return json.dumps(doc).encode()


def load(body: bytes, db: Path) -> None:
    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
        if ex is None or req.path != "/api/v1/instance-types":
            return None
        return 200, {"Content-Type": "application/json"}, body

    replayed_warehouse(db, ["lambda"], hook=hook, refresh_id="r-text")


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output + (repr(result.exception) if result.exception
                                               and not isinstance(result.exception, SystemExit) else "")


def query(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def exported_offers(db: Path, out: Path) -> list[dict[str, str]]:
    code, text = cli("export", str(out), "--db", str(db), "--format", "csv", "--table", "offers")
    assert code == 0, text
    with open(next(out.glob("*/offers.csv")), newline="") as f:
        return list(csv.DictReader(f))


def hostile_everywhere(v: Verdict, db: Path, tmp: Path) -> None:
    name = f"gpu_1x_a10 {HOSTILE}"
    select = "select instance_type, price_per_hour from offers where price_per_hour = 1.29 order by 1"
    code, table = cli("sql", select, "--db", str(db))
    v.check(code == 0, f"sql table: exit {code}: {table[:300]}")
    v.check("[/x]" in table and ":warning:" in table, "sql table: the name is not shown as its characters")
    v.check(not any(c in table for c in TERMINAL_FORBIDDEN), "sql table: an escape or control reached the terminal")
    code, text = cli("sql", select, "--db", str(db), "--format", "json")
    v.check(code == 0 and json.loads(text)[0]["instance_type"] == name, "sql json: the value is not whole")
    code, text = cli("sql", select, "--db", str(db), "--format", "csv")
    rows = list(csv.reader(io.StringIO(text, newline=""))) if code == 0 else []
    v.check(rows[1:2] == [[name, "1.29"]], f"sql csv: {rows[:2]}")
    # tests/test_literal_output.py runs every command on such text (built from records); here,
    # one reader besides sql shows the text that came over the wire.
    code, text = cli("recommend", "--params", "1e9", "--method", "qlora", "--all-locations", "--top", "40",
                     "--db", str(db))
    v.check(code == 0 and "[/x]" in text, f"recommend: exit {code}, or the name is not shown as its characters")
    v.check(not any(c in text for c in TERMINAL_FORBIDDEN), "recommend: an escape reached the terminal")
    v.check({r["instance_type"] for r in exported_offers(db, tmp / "export")} >= {name},
            "export: the name is not whole in offers.csv")


def secret_nowhere(v: Verdict, db: Path, tmp: Path) -> None:
    stored = query(db, "select instance_type from offer_history where price_per_hour = 1.29")
    v.check(stored and all(r == ("gpu_1x_a10 [redacted]",) for r in stored), f"offer_history: {stored}")
    dump = str(query(db, "select * from offers")) + str(query(db, "select * from scrape_runs"))
    v.check(KEY not in dump, "the key is in offers or scrape_runs")
    code, text = cli("sql", "select * from offers", "--db", str(db), "--format", "csv")
    v.check(code == 0 and KEY not in text and "[redacted]" in text, "sql csv: the key shows, or no redaction")
    exported = exported_offers(db, tmp / "export")
    v.check(not any(KEY in json.dumps(r) for r in exported), "export: the key is in offers.csv")
    v.check(any(r["instance_type"] == "gpu_1x_a10 [redacted]" for r in exported), "export: no redacted row")


CELLS: dict[str, tuple[Callable[[], bytes], Callable[[Verdict, Path, Path], None]]] = {
    "hostile_text": (lambda: renamed(f"gpu_1x_a10 {HOSTILE}"), hostile_everywhere),
    "secret_in_data": (lambda: renamed(f"gpu_1x_a10 {KEY}"), secret_nowhere),
}


@pytest.mark.parametrize("fault", list(CELLS), ids=[f"lambda-{f}" for f in CELLS])
def test_text_fault(fault: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                    request: pytest.FixtureRequest) -> None:
    monkeypatch.setenv("LAMBDA_API_KEY", KEY)  # known, as in a live run; replay sends no key
    body, judge = CELLS[fault]
    db = tmp_path / "ledger.duckdb"
    verdict = Verdict("lambda", fault, "survived")
    load(body(), db)
    judge(verdict, db, tmp_path)
    verdict.survived = not verdict.problems
    keep(request.node, verdict)
    assert verdict.survived, "; ".join(verdict.problems)
