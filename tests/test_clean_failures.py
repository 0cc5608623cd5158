"""Clean failures: a damaged warehouse, a directory as --db, a read-only filesystem. Every
command says one `error:` line and exits 2, never a traceback (docs/reliability.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from tests.builders import replayed_warehouse

ROOT = Path(__file__).parent.parent


def commands(out: Path) -> dict[str, list[str]]:
    """Every command that opens the warehouse, with what it needs besides --db."""
    return {
        "sql": ["sql", "select sum(price_per_hour) from offer_history"],
        "status": ["status"],
        "check": ["check"],
        "export": ["export", str(out / "exports")],
        "report": ["report", str(out / "report.html")],
        "recommend": ["recommend", "--model", "llama-3-8b", "--method", "qlora"],
        "plot": ["plot", "--gpu", "H100-SXM", str(out / "plot.png")],
    }


READERS = list(commands(Path(".")))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("good") / "w.duckdb"
    replayed_warehouse(db, ["lambda"])
    return db


def damaged(warehouse: Path, folder: Path, kind: str) -> Path:
    data = warehouse.read_bytes()
    db = folder / f"{kind}.duckdb"
    if kind == "truncated":  # cut where a copy or a download stopped
        db.write_bytes(data[: len(data) // 2])
    elif kind == "garbled":  # blocks overwritten after the header: their checksums fail
        db.write_bytes(data[:5000] + bytes(4000) + data[9000:])
    elif kind == "directory":
        db.mkdir()
    return db


def one_error_line(output: str) -> str:
    text = " ".join(output.split())
    assert text.startswith("error: ") and text.count("error: ") == 1, output
    assert "Traceback" not in output, output
    return text


# A refresh meets a damaged warehouse only when it writes, after fetching (a failing write:
# tests/test_pending.py); a directory as --db it refuses before fetching.
CASES = [(c, k) for c in READERS for k in ("truncated", "garbled", "directory")] + [("refresh", "directory")]


@pytest.mark.parametrize("command, kind", CASES)
def test_a_bad_warehouse_is_one_line_and_exit_2(warehouse: Path, tmp_path: Path, kind: str, command: str) -> None:
    db = damaged(warehouse, tmp_path, kind)
    args = commands(tmp_path)[command] if command != "refresh" else ["refresh", "--replay", "-p", "lambda"]
    result = CliRunner().invoke(app, [*args, "--db", str(db)])
    assert result.exit_code == 2, (result.output, result.exception)
    text = one_error_line(result.output)
    if kind == "directory":
        assert text == f"error: {db} is a directory, not a warehouse file: pass the file with --db"
    else:
        assert text.startswith(f"error: cannot read the warehouse {db}: ")
        assert ("Could not read enough bytes" if kind == "truncated" else "Corrupt database file") in text


# On a read-only filesystem (a read-only bind mount in a private mount namespace: `unshare -rm`,
# no root needed) every reading command works as usual, and a refresh says in one line that
# it cannot write, before fetching anything.
READ_ONLY_RUN = """
import json, sys
from typer.testing import CliRunner
from gpuledger.flows.cli import app
from tests.test_clean_failures import commands
from pathlib import Path
db, out = sys.argv[1], Path(sys.argv[2])
runs = {name: args for name, args in commands(out).items()}
runs["refresh"] = ["refresh", "--replay", "-p", "lambda"]
results = {}
for name, args in runs.items():
    r = CliRunner().invoke(app, [*args, "--db", db])
    crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
    results[name] = [r.exit_code, r.output, repr(r.exception) if crashed else None]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def read_only_results(warehouse: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    if shutil.which("unshare") is None:
        pytest.fail("needs util-linux's unshare to mount a read-only filesystem")
    ro = tmp_path_factory.mktemp("ro")
    shutil.copy(warehouse, ro / "w.duckdb")
    out = tmp_path_factory.mktemp("out")
    script = (f"mount --bind {ro} {ro} && mount -o remount,ro,bind {ro} && "
              f"exec {sys.executable} -c \"$0\" {ro / 'w.duckdb'} {out}")
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script, READ_ONLY_RUN], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (ro / "w.duckdb.refresh.lock").exists()
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("command", READERS)
def test_reading_commands_work_on_a_read_only_filesystem(read_only_results: dict[str, list], command: str) -> None:
    code, output, crashed = read_only_results[command]
    assert crashed is None and code == 0, (code, output, crashed)
    assert "Read-only file system" not in output, output


def test_refresh_on_a_read_only_filesystem_is_one_line_and_exit_2(read_only_results: dict[str, list]) -> None:
    code, output, crashed = read_only_results["refresh"]
    assert crashed is None and code == 2, (code, output, crashed)
    text = one_error_line(output)
    assert "cannot write beside the warehouse" in text and "Read-only file system" in text, text


@pytest.mark.parametrize("args", [["macros"], ["sql", "select 1 as a", "--format", "csv"],
                                  ["show-gpus", "--format", "csv"], ["status", "--json"]],
                         ids=lambda a: " ".join(a[:2]))
def test_output_onto_a_full_disk_is_one_line_and_exit_1(warehouse: Path, args: list[str]) -> None:
    # /dev/full refuses every write with ENOSPC, as a full disk does; a small output fails only at the final flush
    with open("/dev/full", "w") as full:
        db = [] if args == ["macros"] else ["--db", str(warehouse)]  # macros reads no warehouse
        proc = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", *args, *db], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert one_error_line(proc.stderr) == "error: cannot write the output: No space left on device"
