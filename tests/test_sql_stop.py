"""`gpuledger sql` can be stopped: a time limit, and Ctrl-C (a real SIGINT to a real process),
each with one line, its own exit code and the warehouse unchanged."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import SQL_TIMEOUT_S, app
from gpuledger.warehouse.store import close_writer, open_writer

# A cross join of 10^12 rows: minutes of work on any machine, started at once.
SLOW = "select sum(a.range * b.range) from range(1000000) a cross join range(1000000) b"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sqlstop") / "ledger.duckdb"
    close_writer(open_writer(db))
    return db


def test_a_query_past_its_timeout_is_stopped(warehouse: Path) -> None:
    before = warehouse.read_bytes()
    started = time.monotonic()
    result = CliRunner().invoke(app, ["sql", SLOW, "--db", str(warehouse), "--timeout", "0.5"])
    elapsed = time.monotonic() - started
    assert result.exit_code == 124, result.output
    assert "ran longer than 0.5 s (--timeout) and was stopped" in result.output
    assert elapsed < 15, elapsed
    assert warehouse.read_bytes() == before
    quick = CliRunner().invoke(app, ["sql", "select 42 as n", "--db", str(warehouse), "--format", "csv",
                                     "--timeout", "0.5"])
    assert quick.exit_code == 0 and quick.output.splitlines() == ["n", "42"], quick.output
    assert SQL_TIMEOUT_S == 300  # the documented default (docs/reliability.md)


def opened(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to see the warehouse opened")
def test_ctrl_c_cancels_a_running_query_and_exits_130(warehouse: Path) -> None:
    before = warehouse.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "sql", SLOW, "--db", str(warehouse),
                             "--timeout", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while not opened(proc.pid, warehouse) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        time.sleep(1.0)  # the query is running (the connection opens just before it)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=30)
        stopped_after = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert " ".join(err.split()) == "error: the query was cancelled (Ctrl-C); the warehouse is unchanged"
    assert out == "" and stopped_after < 10, stopped_after
    assert warehouse.read_bytes() == before
