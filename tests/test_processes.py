"""Process-level guarantees: readers during a write window, a writer killed mid-merge."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import load_outcome, open_reader, open_writer
from tests.builders import scraped

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def batch(n: int, price: float, provider: str = "aws") -> Batch:
    b = Batch(provider)
    for i in range(n):
        b.offer(str(i), {}, region="us-east-1", instance_type=f"t{i}", purchase_option="on_demand",
                gpu_model="L4", gpu_name_reported="L4", gpu_vendor="NVIDIA", gpu_count=1,
                price_per_hour=price, source_currency="USD", source_price_per_hour=price)
    return b


def seed(db: Path) -> None:
    con = open_writer(db)
    load_outcome(con, scraped("aws", "replay", T0, T0, batch=batch(500, 1.0)), "seed", now=T0)
    con.close()


def _slow_writer(db: str, ready: mp.Event, hold_s: float) -> None:
    con = open_writer(db)
    con.execute("begin transaction")
    con.execute("update offers set price_per_hour = 2.0, price_per_gpu_hour = 2.0")
    ready.set()
    time.sleep(hold_s)
    con.execute("commit")
    con.close()


def _reader(db: str, rounds: int, out: mp.Queue) -> None:
    seen = []
    for _ in range(rounds):
        try:
            con = open_reader(db, wait_s=30)
            seen.append(con.execute("select min(price_per_hour), max(price_per_hour), count(*) from offers").fetchall()[0])
            con.close()
        except Exception as err:  # reported, and the test fails on it
            seen.append(("error", repr(err)))
        time.sleep(0.05)
    out.put(seen)


def test_readers_wait_out_the_write_window_and_see_committed_state(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    writer = ctx.Process(target=_slow_writer, args=(str(db), ready, 1.5))
    writer.start()
    assert ready.wait(60)
    readers = [ctx.Process(target=_reader, args=(str(db), 15, out)) for _ in range(3)]
    for r in readers:
        r.start()
    results = [out.get(timeout=120) for _ in readers]
    for p in readers + [writer]:
        p.join(60)
    flat = [row for seen in results for row in seen]
    assert len(flat) == 45
    # Every read succeeded and saw one whole committed state: all 1.0 (before) or all 2.0 (after).
    assert set(flat) <= {(1.0, 1.0, 500), (2.0, 2.0, 500)}, [r for r in flat if r[0] == "error"][:3]
    assert (2.0, 2.0, 500) in flat


def _killed_mid_merge(db: str) -> None:
    """Run the real merge and die by SIGKILL inside its transaction, right after the
    provider's current rows were replaced: the most damaging moment to crash."""
    import gpuledger.warehouse.store as store

    real_merge = store._merge

    def dying_merge(*args, **kwargs):
        result = real_merge(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return result

    store._merge = dying_merge
    con = open_writer(db)
    now = datetime(2026, 11, 2, tzinfo=timezone.utc)
    load_outcome(con, scraped("aws", "replay", now, now, batch=batch(400, 3.0)), "killed", now=now)


def test_kill_9_mid_merge_leaves_the_previous_state(tmp_path: Path) -> None:
    db = tmp_path / "k.duckdb"
    seed(db)
    con = open_reader(db)
    before = con.execute("select * from offers order by instance_type").fetchall()
    con.close()
    proc = mp.get_context("spawn").Process(target=_killed_mid_merge, args=(str(db),))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL
    con = open_writer(db)  # opens (WAL replay) and passes every integrity check
    assert con.execute("select * from offers order by instance_type").fetchall() == before
    assert all(r.ok for r in run_checks(con)), [r for r in run_checks(con) if not r.ok]
    assert con.execute("select count(*) from scrape_runs where refresh_id = 'killed'").fetchall() == [(0,)]
    con.close()


def _killed_in_second_merge(db: str) -> None:
    """One write window, two providers: aws's merge commits (to the WAL: the window's one
    checkpoint comes when it closes), then SIGKILL inside lambda's merge transaction."""
    import gpuledger.warehouse.store as store

    real_merge = store._merge

    def dying_merge(con, spec, provider, *args, **kwargs):
        result = real_merge(con, spec, provider, *args, **kwargs)
        if provider == "lambda":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    store._merge = dying_merge
    con = open_writer(db)
    now = datetime(2026, 11, 2, tzinfo=timezone.utc)
    assert load_outcome(con, scraped("aws", "replay", now, now, batch=batch(400, 3.0)), "window", now=now).ok
    wal = Path(db + ".wal")
    if not (wal.exists() and wal.stat().st_size > 0):  # the commit must be in the WAL only, or the test proves nothing
        os._exit(3)
    load_outcome(con, scraped("lambda", "replay", now, now, batch=batch(50, 2.0, "lambda")), "window", now=now)


def test_kill_9_after_a_commit_keeps_it_and_loses_only_the_merge_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "k.duckdb"
    seed(db)
    proc = mp.get_context("spawn").Process(target=_killed_in_second_merge, args=(str(db),))
    proc.start()
    proc.join(120)
    assert proc.exitcode == -signal.SIGKILL, f"exit code {proc.exitcode} (3: aws's commit did not stay in the WAL)"
    assert Path(str(db) + ".wal").stat().st_size > 0  # aws's commit was never checkpointed
    # A reader (read-only, so the WAL stays as it is) sees aws's commit and nothing of lambda's.
    con = open_reader(db)
    assert con.execute("select count(*), min(price_per_hour), max(price_per_hour) from offers where provider = 'aws'"
                       ).fetchall() == [(400, 3.0, 3.0)]
    assert con.execute("select count(*) from offers where provider = 'lambda'").fetchall() == [(0,)]
    assert con.execute("select count(*) from offer_history where provider = 'lambda'").fetchall() == [(0,)]
    runs = con.execute("select provider, state from scrape_runs where refresh_id = 'window'").fetchall()
    assert runs == [("aws", "ok")]
    assert all(r.ok for r in run_checks(con)), [r for r in run_checks(con) if not r.ok]
    con.close()
    con = open_writer(db)  # replays the WAL and checkpoints it into the file
    assert con.execute("select count(*) from offers where provider = 'aws' and price_per_hour = 3.0"
                       ).fetchall() == [(400,)]
    assert con.execute("select count(*) from offer_history where provider = 'aws'").fetchall() == [(900,)]
    assert all(r.ok for r in run_checks(con)), [r for r in run_checks(con) if not r.ok]
    con.close()


def _children(pid: int) -> dict[Any, list[str]]:
    """The live descendants of `pid` and their command lines (one that ends while asked is left out)."""
    import psutil

    found = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            found[child] = child.cmdline()
        except psutil.Error:
            continue
    return found


def test_ctrl_c_at_a_terminal_stops_a_refresh_at_once_and_leaves_no_process(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the whole foreground process group. Prefect's temporary API server was in it
    and died with it, and the flow engine then retried reporting its state for 8.5 minutes before saying 'lost
    the Prefect API'; now the refresh stops in one line with what it kept, and no process of it is left."""
    import subprocess
    import sys

    import psutil

    from tests.test_sql_wait_stop import ctrl_c_as_in_a_terminal

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}  # its own temporary server
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay", "-p", "aws",
                             "-p", "gcp", "-p", "azure", "--db", str(tmp_path / "w.duckdb")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=ctrl_c_as_in_a_terminal)
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:  # the server and a fetch worker are running
            children = _children(proc.pid)
            if {"server", "gpuledger.flows.fetch"} <= {word for words in children.values() for word in words}:
                started = list(children)
                break
            time.sleep(0.2)
        assert started, "the refresh did not start its server and fetches"
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = output.strip().splitlines()
    assert proc.returncode == 130, output
    assert lines[-1].startswith("error: refresh interrupted by SIGINT while fetching ("), output
    time.sleep(2)  # the watchdog's poll
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], output


def test_ctrl_c_before_the_fetches_begin_is_said_in_one_line(tmp_path: Path) -> None:
    """Ctrl-C in a refresh's first seconds (Prefect loading, its temporary server starting), before the flow's own
    handlers: typer turned the KeyboardInterrupt into exit 130 with nothing said. Now one line, and no process of
    it is left."""
    import subprocess
    import sys

    import psutil

    from tests.test_sql_wait_stop import ctrl_c_as_in_a_terminal

    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}  # its own temporary server
    db = tmp_path / "w.duckdb"
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay", "-p", "lambda",
                             "--db", str(db)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    started: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:  # the watchdog: past the command's own imports
            children = _children(proc.pid)
            if any("gpuledger.flows.watchdog" in words for words in children.values()):
                started = list(children)
                break
            time.sleep(0.05)
        assert started and not any("gpuledger.flows.fetch" in words for words in children.values()), children
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output
    assert output.strip() == ("error: refresh interrupted by SIGINT before its fetches began or after its write; "
                              "the warehouse is as its last completed write left it"), output
    assert not db.exists()
    time.sleep(2)  # the watchdog's poll
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], output
