"""Ctrl-C while `gpuledger status`, `export` or `recommend` waits for a refresh to release the
warehouse: one line and exit 130, as `gpuledger sql` (tests/test_sql_wait_stop.py, whose way of
seeing the child wait is reused here)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuledger.warehouse.store import close_writer, open_writer
from tests.test_sql_wait_stop import SLEEP_SYSCALL, ctrl_c_as_in_a_terminal, waiting

COMMANDS = {
    "status": (["status"], "status was cancelled (Ctrl-C) while waiting for the refresh that is writing the "
                           "warehouse; nothing was read"),
    "export": (["export", "{out}"], "the export was cancelled (Ctrl-C) while waiting for the refresh that is "
                                    "writing the warehouse; nothing was written"),
    "check": (["check"], "the check was cancelled (Ctrl-C) while waiting for the refresh that is writing the "
                         "warehouse; nothing was read"),
    "publish": (["publish", "{out}"], "the publish was cancelled (Ctrl-C) while waiting for the refresh that is "
                                      "writing the warehouse; nothing was written"),
    "recommend": (["recommend", "--model", "llama-3-8b", "--method", "qlora"],
                  "the recommendation was cancelled (Ctrl-C) while waiting for the refresh that is writing "
                  "the warehouse; nothing was read"),
}


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory):
    """A warehouse whose write lock this process holds, as a refresh does (DuckDB's lock is per
    process, so a child must wait)."""
    db = tmp_path_factory.mktemp("locked") / "ledger.duckdb"
    writer = open_writer(db)
    yield db
    close_writer(writer)


@pytest.mark.skipif(SLEEP_SYSCALL is None or not Path("/proc/self/syscall").exists(),
                    reason="needs Linux /proc and a known syscall number to see the process wait")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_ctrl_c_while_waiting_for_the_refresh_lock_exits_130_in_one_line(command: str, held: Path,
                                                                         tmp_path: Path) -> None:
    args, line = COMMANDS[command]
    argv = [a.format(out=tmp_path / "out") for a in args] + ["--db", str(held)]
    child = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", *argv],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 60
        while child.poll() is None and not waiting(child.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert child.poll() is None, child.communicate()  # still waiting for the lock
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    assert " ".join(err.split()) == f"error: {line}"
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert not (tmp_path / "out").exists()
