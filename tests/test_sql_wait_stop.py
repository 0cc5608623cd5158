"""Ctrl-C while `gpuledger sql` waits for a refresh to release the warehouse: a real SIGINT to a
real process gives one line and exit 130, never a Python traceback."""

from __future__ import annotations

import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuledger.warehouse.store import close_writer, open_writer

# clock_nanosleep, what time.sleep calls: the lock-retry loop of warehouse.store._connect_retrying
SLEEP_SYSCALL = {"x86_64": 230, "aarch64": 115}.get(platform.machine())


def ctrl_c_as_in_a_terminal() -> None:
    """preexec_fn of the child: SIGINT at its default, as a terminal's foreground command has it.
    A command started in the background by a shell without job control inherits SIGINT ignored
    (POSIX), and Python then leaves it ignored: a test run started that way would see no Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def waiting(pid: int) -> bool:
    """True once the process has imported duckdb and its main thread sleeps between attempts to
    open the warehouse (nothing else in `gpuledger sql` sleeps), seen three times in a row."""
    for _ in range(3):
        if "duckdb" not in Path(f"/proc/{pid}/maps").read_text():
            return False
        if Path(f"/proc/{pid}/syscall").read_text().split()[0] != str(SLEEP_SYSCALL):
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(SLEEP_SYSCALL is None or not Path("/proc/self/syscall").exists(),
                    reason="needs Linux /proc and a known syscall number to see the process wait")
def test_ctrl_c_while_waiting_for_the_refresh_lock_exits_130_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    writer = open_writer(db)  # as a refresh holds it: DuckDB's lock is per process, the child must wait
    sql = None
    try:
        sql = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "sql", "select 42", "--db", str(db)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=ctrl_c_as_in_a_terminal)
        deadline = time.monotonic() + 60
        while sql.poll() is None and not waiting(sql.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sql.poll() is None, sql.communicate()  # still waiting for the lock, not answered
        sql.send_signal(signal.SIGINT)
        out, err = sql.communicate(timeout=30)
    finally:
        if sql is not None and sql.poll() is None:
            sql.kill()
            sql.wait()
        close_writer(writer)
    assert sql.returncode == 130, err
    assert " ".join(err.split()) == ("error: the query was cancelled (Ctrl-C) while waiting for the refresh "
                                     "that is writing the warehouse; nothing was read")
    assert out == ""
