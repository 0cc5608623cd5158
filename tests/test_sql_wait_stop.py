"""Ctrl-C while `gpuledger sql` waits for a refresh to release the warehouse: a real SIGINT to a
real process gives one line and exit 130, never a Python traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuledger.warehouse.store import close_writer, open_writer

HOLD = ("import sys, time\n"
        "from gpuledger.warehouse.store import open_writer\n"
        "con = open_writer(sys.argv[1])\n"
        "print('holding', flush=True)\n"
        "time.sleep(120)\n")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0  # utime + stime, in clock ticks of 1/100 s


def waiting(pid: int) -> bool:
    """True once the process has imported duckdb and gone quiet: the lock-retry loop sleeps, the
    imports before it keep a CPU busy."""
    if "duckdb" not in Path(f"/proc/{pid}/maps").read_text():
        return False
    before = cpu_seconds(pid)
    time.sleep(1.0)
    return cpu_seconds(pid) - before < 0.1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to see the process wait")
def test_ctrl_c_while_waiting_for_the_refresh_lock_exits_130_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    close_writer(open_writer(db))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db)], stdout=subprocess.PIPE, text=True)
    sql = None
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        sql = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "sql", "select 42", "--db", str(db)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while sql.poll() is None and not waiting(sql.pid) and time.monotonic() < deadline:
            pass
        assert sql.poll() is None, sql.communicate()  # still waiting for the lock, not answered
        sql.send_signal(signal.SIGINT)
        out, err = sql.communicate(timeout=30)
    finally:
        for proc in (sql, holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert sql.returncode == 130, err
    assert " ".join(err.split()) == ("error: the query was cancelled (Ctrl-C) while waiting for the refresh "
                                     "that is writing the warehouse; nothing was read")
    assert out == ""
