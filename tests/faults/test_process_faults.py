"""Process faults against the real command line: `python -m gpuledger.flows.cli refresh --replay` in child processes.

- a refresh killed with SIGKILL inside its merge transaction;
- two refreshes started at once;
- `gpuledger sql` readers in a loop, and a held read-only connection, while a refresh writes;
- a full disk (RLIMIT_FSIZE in the child) for a refresh and for an export, and an export
  directory that cannot be created.

Holding the write window open. The held refresh runs the command line through held_refresh.py,
which passes `warehouse.store.load_outcome` an `on_offers_merged` hook: each provider merge,
inside its transaction right after the provider's offers were replaced, adds itself to
<folder>/merging and waits for <folder>/release. The window merges one provider at a time, so
the first is held and the others have not started. So "kill during the merge", "a signal in the
write window" and "a second refresh during the write window" are deterministic, not a race
against a sleep.

The children talk to the session's one Prefect API server (tests.builders.shared_prefect_server),
instead of each starting its own ephemeral server: same flow, a third of the start-up.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil
import pytest

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from tests.builders import replayed_warehouse, shared_prefect_server

pytestmark = pytest.mark.prefect
# Small, fast recordings (the subject is the process, not the parse).
PROVIDERS = ("lambda", "runpod", "cloudrift")
TABLES = ("offers", "offer_history", "egress_prices", "storage_prices", "scrape_runs", "quarantine", "providers")
STATE_QUERY = "select count(*) as n, round(sum(price_per_hour), 6) as usd from offers"


@pytest.fixture(scope="module")
def prefect_api(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


def cli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpuledger.flows.cli", *args]


def cli_env(api: str | None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    if api:
        env["PREFECT_API_URL"] = api
    env.update(extra)
    return env


def cli(*args: str, api: str | None = None, timeout: float = 240, preexec: Any = None,
        **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_cmd(*args), env=cli_env(api, **extra), capture_output=True, text=True,
                          timeout=timeout, preexec_fn=preexec)


def seed(db: Path) -> None:
    """The warehouse before the refresh under test: the bundled recordings, loaded by the library."""
    replayed_warehouse(db, PROVIDERS, refresh_id="seed")


def raised_prices(root: Path) -> Path:
    """The bundled recordings, with every Lambda price 10% higher: a refresh that changes rows."""
    rec = root / "recordings"
    for p in PROVIDERS:
        shutil.copytree(BUNDLED_RECORDINGS / p, rec / p)
    body = rec / "lambda" / "instance-types.json"
    doc = json.loads(body.read_text())
    for item in doc["data"].values():
        item["instance_type"]["price_cents_per_hour"] = round(item["instance_type"]["price_cents_per_hour"] * 1.1)
    body.write_text(json.dumps(doc))
    return rec


def dump(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"select * from {t} order by all").fetchall() for t in TABLES}
    finally:
        con.close()


def state(db: Path) -> tuple:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(STATE_QUERY).fetchall()[0]
    finally:
        con.close()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 180, lines: int = 1) -> str:
    """The text of `path` once it exists with at least `lines` lines."""
    deadline = time.monotonic() + timeout
    while not path.exists() or len(path.read_text().splitlines()) < lines:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the refresh ended (rc {proc.returncode}) before its merge: {err[-2000:]}")
        assert time.monotonic() < deadline, f"no {path.name} within {timeout} s"
        time.sleep(0.05)
    return path.read_text()


def start_held_refresh(db: Path, recordings: Path, hold: Path, api: str) -> subprocess.Popen[str]:
    hold.mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("held_refresh.py")), str(hold),
         "refresh", "--replay", "--recordings", str(recordings), "--db", str(db),
         *[a for p in PROVIDERS for a in ("-p", p)]],
        env=cli_env(api), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def assert_check_passes(db: Path) -> None:
    result = cli("check", "--db", str(db))
    assert result.returncode == 0 and "FAIL" not in result.stdout, result.stdout + result.stderr
    assert result.stdout.count("ok ") >= 15, result.stdout


# -- kill -9 inside the merge --------------------------------------------------------------------

def test_refresh_killed_mid_merge_leaves_the_previous_state(prefect_api: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    before, old_prices = dump(db), lambda_prices(db)
    recordings = raised_prices(tmp_path)
    hold = tmp_path / "hold"
    proc = start_held_refresh(db, recordings, hold, prefect_api)
    try:
        holder = wait_for(hold / "merging", proc).splitlines()[0].split()
        assert holder[0] == str(proc.pid) and holder[1] in PROVIDERS  # the CLI process itself, inside a merge
        children = psutil.Process(proc.pid).children(recursive=True)  # its watchdog, at least
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert children and not psutil.wait_procs(children, timeout=10)[1]  # no process left behind
    assert_check_passes(db)  # opens (WAL replayed) and passes every integrity check
    assert dump(db) == before  # offers, history, runs, quarantine: byte for byte the state before
    # The lock died with the process: the next refresh runs, and only now does the change land.
    again = cli("refresh", "--replay", "--recordings", str(recordings), "--db", str(db),
                *[a for p in PROVIDERS for a in ("-p", p)], api=prefect_api)
    assert again.returncode == 0, again.stderr[-2000:]
    new_prices = lambda_prices(db)
    assert new_prices.keys() == old_prices.keys()
    assert all(new_prices[k] == round(old_prices[k] * 110) / 100 for k in old_prices), (old_prices, new_prices)


def lambda_prices(db: Path) -> dict[str, float]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return dict(con.execute("select region || '/' || instance_type, price_per_hour from offers "
                                "where provider = 'lambda'").fetchall())
    finally:
        con.close()


# -- SIGTERM inside the write window -------------------------------------------------------------

def test_sigterm_in_the_write_window_stops_the_refresh_as_a_whole(prefect_api: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    old_offers, old_lambda = dump(db)["offers"], lambda_prices(db)
    recordings = raised_prices(tmp_path)
    hold = tmp_path / "hold"
    proc = start_held_refresh(db, recordings, hold, prefect_api)
    try:
        # The first provider inside its merge transaction; the others not started.
        held = wait_for(hold / "merging", proc)
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.5)
        (hold / "release").touch()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    (merged,) = [line.split()[1] for line in held.splitlines()]
    left = sorted(set(PROVIDERS) - {merged})
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert "Traceback" not in err and "Encountered exception" not in err, err[-3000:]  # said once, in one line
    message = " ".join(err.split("error: ")[-1].split())
    kept = Path(str(db) + ".pending")
    assert message == f"refresh interrupted by SIGTERM in the write window: 1 merged, 2 wait in {kept}", \
        message
    con = duckdb.connect(str(db), read_only=True)
    runs = dict(con.execute("select provider, state from scrape_runs where refresh_id <> 'seed'").fetchall())
    left_offers = con.execute("select * from offers where provider in (?, ?) order by all", left).fetchall()
    con.close()
    # The transaction in progress at the signal committed; the other merges never started.
    assert runs == {merged: "ok"}
    assert left_offers == [r for r in old_offers if r[0] in left] and left_offers
    raised = {k: round(v * 110) / 100 for k, v in old_lambda.items()}
    assert lambda_prices(db) == (raised if merged == "lambda" else old_lambda)
    assert sorted(p.stem for p in kept.glob("*/*.json") if p.name.count(".") == 1) == left
    assert_check_passes(db)
    status = cli("status", "--db", str(db))
    said = " ".join(status.stderr.split())
    assert f"({', '.join(left)}); not merged: its refresh stopped first;" in said, said  # no write failed
    # --resume merges what waits, noted as resumed
    resumed = cli("refresh", "--resume", "--db", str(db), api=prefect_api)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    con = duckdb.connect(str(db), read_only=True)
    runs = con.execute("select provider, state, notes from scrape_runs where refresh_id <> 'seed' "
                       "and provider <> ?", [merged]).fetchall()
    con.close()
    assert sorted(r[:2] for r in runs) == [(p, "ok") for p in left]
    assert all("resumed: fetched by refresh-" in r[2] for r in runs)
    assert lambda_prices(db) == raised and not kept.exists()


# -- two refreshes at once ---------------------------------------------------------------------

def test_second_refresh_is_turned_away_while_the_first_writes(prefect_api: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    s0 = state(db)
    recordings = raised_prices(tmp_path)
    hold = tmp_path / "hold"
    first = start_held_refresh(db, recordings, hold, prefect_api)
    try:
        wait_for(hold / "merging", first)
        second = cli("refresh", "--replay", "--recordings", str(recordings), "--db", str(db), "-p", "lambda",
                     api=prefect_api)
        (hold / "release").touch()
        out, err = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
    assert second.returncode == 2, second.stderr[-2000:]
    message = " ".join(second.stderr.split())
    assert f"another refresh of {db} is running (pid {first.pid} since" in message, message
    assert "try again when it has finished" in message
    assert first.returncode == 0, err[-2000:]
    assert_check_passes(db)
    con = duckdb.connect(str(db), read_only=True)
    runs = con.execute("select refresh_id, provider, state from scrape_runs where refresh_id <> 'seed'").fetchall()
    con.close()
    assert len({r[0] for r in runs}) == 1 and sorted(r[1:] for r in runs) == [(p, "ok") for p in sorted(PROVIDERS)]
    assert state(db) != s0  # the first refresh's change is in; the second wrote nothing

# -- readers while a refresh writes ------------------------------------------------------------

def test_readers_never_fail_and_see_committed_states_during_a_refresh(prefect_api: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    s0 = state(db)
    recordings = raised_prices(tmp_path)
    stop = threading.Event()
    seen: list[tuple[float, float, int, str, str]] = []  # (started, ended, rc, stdout, stderr)
    lock = threading.Lock()

    # One reader runs all along (the refresh's start and fetch phase); the second joins it from the
    # write window on, where the refresh writes and publishes: two readers a whole refresh long
    # would keep both cores busy and slow the refresh they watch, and before its window they
    # can only repeat the state before it.
    window = threading.Event()

    def reader(joins_at_window: bool) -> None:
        if joins_at_window:
            window.wait()
        while not stop.is_set():
            t0 = time.monotonic()
            r = subprocess.run(cli_cmd("sql", STATE_QUERY, "--db", str(db), "--format", "json"), env=cli_env(None),
                               capture_output=True, text=True, timeout=120)
            with lock:
                seen.append((t0, time.monotonic(), r.returncode, r.stdout, r.stderr))

    readers = [threading.Thread(target=reader, args=(n == 1,), daemon=True) for n in range(2)]
    for t in readers:
        t.start()
    while len(seen) < 2:
        time.sleep(0.05)
    hold = tmp_path / "hold"
    proc = start_held_refresh(db, recordings, hold, prefect_api)
    try:
        wait_for(hold / "merging", proc)
        window.set()
        # A reader started inside the write window: the refresh writes its working copy, so the
        # reader answers at once, with the snapshot published before the window.
        inside = subprocess.run(cli_cmd("sql", STATE_QUERY, "--db", str(db), "--format", "json"),
                                env=cli_env(None), capture_output=True, text=True, timeout=120)
        # A notebook's read-only connection, held from inside the window through its end.
        notebook = duckdb.connect(str(db), read_only=True)
        (hold / "release").touch()
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    # The notebook keeps its snapshot until it reconnects (closed first: DuckDB gives a process's
    # later connections to the path the instance its open one holds).
    assert notebook.execute(STATE_QUERY).fetchall()[0] == s0
    notebook.close()
    n_after = len(seen)
    while len(seen) < n_after + 2:
        time.sleep(0.05)
    stop.set()
    window.set()  # a reader still waiting (the refresh failed before its window) ends too
    for t in readers:
        t.join(120)
    s1 = state(db)
    assert s1 != s0
    failures = [(rc, e[-300:]) for _, _, rc, _, e in seen if rc != 0]
    assert not failures, failures
    states = [tuple(json.loads(o)[0].values()) for _, _, _, o, _ in seen]
    assert set(states) <= {s0, s1}, states  # never a half-written state
    assert s0 in states and s1 in states
    assert inside.returncode == 0, inside.stderr
    assert tuple(json.loads(inside.stdout)[0].values()) == s0


# -- a full disk, an export directory that cannot be made -------------------------------------------

def file_size_limit(n: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))  # writes past n bytes fail with EFBIG

    return apply


def test_refresh_on_a_full_disk_fails_clearly_and_changes_nothing(prefect_api: str, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    before, digest = dump(db), sha256(db)
    recordings = raised_prices(tmp_path)
    result = cli("refresh", "--replay", "--recordings", str(recordings), "--db", str(db),
                 *[a for p in PROVIDERS for a in ("-p", p)], api=prefect_api, preexec=file_size_limit(4096))
    assert result.returncode == 2, result.stderr[-3000:]
    # The command's own last words: one line naming the warehouse and the first cause (its working
    # copy cannot be written), not a traceback.
    last = " ".join(result.stderr.split("\nerror: ")[-1].split())
    assert last.startswith(f"cannot open {db} for writing:") and "File too large" in last, result.stderr[-3000:]
    assert "rollback" not in last
    assert sha256(db) == digest  # the warehouse file itself was never written
    assert_check_passes(db)
    assert dump(db) == before


def test_export_on_a_full_disk_fails_clearly_and_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    digest = sha256(db)
    out = tmp_path / "snapshots"
    result = cli("export", str(out), "--db", str(db), preexec=file_size_limit(8192))
    message = " ".join(result.stderr.split())
    assert result.returncode == 1, message
    assert f"error: export to {out} failed, nothing written" in message and "File too large" in message, message
    assert not out.exists()  # no snapshot, no half-written .partial folder, not the folder it made
    assert sha256(db) == digest and not Path(str(db) + ".wal").exists()
    ok = cli("export", str(out), "--db", str(db))  # with room on the disk the same export works
    assert ok.returncode == 0, ok.stderr
    assert [p.name for p in out.iterdir() if p.is_dir()] == [Path(ok.stdout.strip().splitlines()[-1]).name]


def test_export_directory_that_cannot_be_created(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    seed(db)
    digest = sha256(db)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = cli("export", str(blocker / "snapshots"), "--db", str(db))
    assert result.returncode == 1
    assert f"error: cannot create export directory {blocker / 'snapshots'}: Not a directory" in \
        " ".join(result.stderr.split())
    assert sha256(db) == digest and blocker.read_text() == "not a directory"
