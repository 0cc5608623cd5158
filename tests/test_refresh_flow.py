"""The nightly_refresh flow stops a stuck provider's fetch process and still lands the others."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil
import pytest

from prefect.task_runners import ThreadPoolTaskRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, write_endpoints
from gpuledger.flows import refresh
from gpuledger.flows.fetch import SourcePlan, fetch_in_child
from gpuledger.flows.stopping import RefreshInterrupted
from gpuledger.warehouse import pending
from gpuledger.warehouse.store import RefreshRunningError, WarehouseError, refresh_lock
from tests.builders import shared_prefect_server
from tests.faults.faultserver import FaultyReplay, Stall


@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


def stalling(stuck: str) -> FaultyReplay:
    """Lambda's and RunPod's recordings, every request to host `stuck` left unanswered."""
    def transport(host: str, req: Any) -> Stall | None:
        return Stall() if host == stuck else None

    server = FaultyReplay(BUNDLED_RECORDINGS, ["lambda", "runpod"], transport=transport)
    server.start()
    return server


def test_a_stuck_fetch_process_is_killed_with_its_group_and_reported(tmp_path: Path) -> None:
    server = stalling("cloud.lambda.ai")
    started = time.monotonic()
    try:
        files = fetch_in_child(SourcePlan("lambda", "replay", server.endpoints()), timeout_s=3)
    finally:
        server.close()
    assert time.monotonic() - started < 20  # not the client's 60 s read timeout
    outcome = pending.read(pending.save(tmp_path / "r", files))
    assert outcome.state == "failed" and outcome.error.startswith(
        "lambda: the scrape did not finish within 3 s (GPULEDGER_TASK_TIMEOUT_S) and was stopped")
    me = psutil.Process()
    assert not [c for c in me.children(recursive=True) if "gpuledger.flows.fetch" in " ".join(c.cmdline())]


def test_a_failing_source_is_its_outcome_not_a_crash(tmp_path: Path) -> None:
    files = fetch_in_child(SourcePlan("nosuch", mode="replay"), timeout_s=60)
    (outcome,) = (pending.read(p) for p in [pending.save(tmp_path / "r", files)])
    assert outcome.state == "failed" and "unknown provider 'nosuch'" in outcome.error


@pytest.mark.prefect
def test_refresh_records_a_timed_out_provider_and_loads_the_rest(api_url: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    server = stalling("cloud.lambda.ai")
    endpoints = tmp_path / "endpoints.json"
    write_endpoints(server, endpoints)
    monkeypatch.setenv("GPULEDGER_TASK_TIMEOUT_S", "3")
    db = tmp_path / "w.duckdb"
    started = time.monotonic()
    try:
        summary = refresh.nightly_refresh(db=str(db), providers=["lambda", "runpod"], replay=True,
                                          replay_endpoints=str(endpoints))
    finally:
        server.close()
    assert time.monotonic() - started < 40  # not the stuck client's 60 s read timeout
    assert not summary["ok"] and summary["failed"] == ["lambda"]
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = dict(con.execute("select provider, state from scrape_runs").fetchall())
        error = con.execute("select error from scrape_runs where provider = 'lambda'").fetchone()[0]
        offers = dict(con.execute("select provider, count(*) from offers group by 1").fetchall())
    finally:
        con.close()
    assert runs == {"lambda": "failed", "runpod": "ok"}
    assert error.startswith("lambda: the scrape did not finish within 3 s")
    assert offers == {"runpod": 85}
    assert not pending.pending_dir(db).exists()


@pytest.mark.prefect
def test_recording_into_the_folder_being_replayed_is_refused(api_url: str, tmp_path: Path) -> None:
    # The bodies served would be rewritten as they are recorded: AWS's paged answers then never end
    # (`gpuledger record R --from-recordings R --force` wrote 9 GB before it was stopped).
    folder = tmp_path / "rec"
    shutil.copytree(BUNDLED_RECORDINGS / "lambda", folder / "lambda")
    before = {p.name: p.read_bytes() for p in (folder / "lambda").rglob("*") if p.is_file()}
    (tmp_path / "same").symlink_to(folder)  # the same folder by another name
    db = tmp_path / "w.duckdb"
    with pytest.raises(WarehouseError) as err:
        refresh.nightly_refresh(db=str(db), providers=["lambda"], replay=True, recordings=str(folder),
                                record_dir=str(tmp_path / "same"))
    assert str(err.value) == (f"cannot record into {tmp_path / 'same'}: it is the recording folder being "
                              "replayed; record into another folder")
    assert {p.name: p.read_bytes() for p in (folder / "lambda").rglob("*") if p.is_file()} == before
    assert not db.exists() and not pending.pending_dir(db).exists()


@pytest.mark.prefect
def test_a_second_signal_while_the_fetches_stop_still_says_what_is_kept(api_url: str, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C pressed twice: the second lands while the fetch workers are being stopped."""
    def fetched_then_stopped(event: str, provider: str | None = None) -> None:
        if event == "fetched":  # the first Ctrl-C, once a provider's result is on disk
            os.kill(os.getpid(), signal.SIGINT)

    real_stop_all = refresh.children.stop_all

    def stop_all_interrupted() -> int:
        os.kill(os.getpid(), signal.SIGINT)  # the second
        return real_stop_all()

    monkeypatch.setattr(refresh, "report_progress", fetched_then_stopped)
    monkeypatch.setattr(refresh.children, "stop_all", stop_all_interrupted)
    db = tmp_path / "w.duckdb"
    with pytest.raises(RefreshInterrupted) as stop:
        refresh.nightly_refresh(db=str(db), providers=["lambda"], replay=True)
    assert stop.value.exit_code == 130
    assert str(stop.value) == ("refresh interrupted by SIGINT while fetching (0 fetches stopped); 1 fetched results "
                               "are kept for the next refresh (or `gpuledger refresh --resume`)")
    assert [p.stem for p in pending.waiting(db)] == ["lambda"] and not db.exists()


@pytest.mark.prefect
def test_a_stopped_refresh_starts_no_queued_fetch(api_url: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The provider tasks still queued at a Ctrl-C start no fetch process (they would fail against the
    closed replay server, retrying, and hold the refresh's exit for seconds)."""
    fetched: list[str] = []

    def interrupted_fetch(plan: SourcePlan, timeout_s: float) -> dict[str, bytes]:
        fetched.append(plan.provider)
        if len(fetched) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            # a real fetch outlasts the signal's handling (a loaded machine may run this thread on first)
            refresh.children.NO_NEW_CHILDREN.wait(10)
        return {}

    real_stop_all = refresh.children.stop_all

    def slow_stop_all() -> int:  # killing the fetch processes' groups takes a moment
        time.sleep(1)
        return real_stop_all()

    monkeypatch.setattr(refresh.children, "stop_all", slow_stop_all)
    monkeypatch.setattr(refresh, "fetch_in_child", interrupted_fetch)
    one_at_a_time = refresh.nightly_refresh.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))
    with pytest.raises(RefreshInterrupted):
        one_at_a_time(db=str(tmp_path / "w.duckdb"), providers=["cudo", "hotaisle", "lambda", "runpod"], replay=True)
    time.sleep(1)
    assert fetched == ["cudo"]


@pytest.mark.prefect
def test_a_refresh_turned_away_by_the_lock_logs_no_traceback(api_url: str, tmp_path: Path) -> None:
    # A served run due while another refresh held the lock had printed two tracebacks of the flow engine's
    # (~60 lines: "Encountered exception during execution" and "Engine execution exited with unexpected
    # exception") around the lock's one line, which the run's Failed state already says.
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    engine_log = logging.getLogger("prefect.flow_runs")
    engine_log.addHandler(handler)
    db = tmp_path / "w.duckdb"
    try:
        with refresh_lock(db), pytest.raises(RefreshRunningError, match="another refresh of .* is running"):
            refresh.nightly_refresh(db=str(db), providers=["lambda"], replay=True)
    finally:
        engine_log.removeHandler(handler)
    assert not [r.getMessage() for r in seen if r.exc_info], [r.getMessage() for r in seen]
    assert not db.exists()  # turned away before anything was written


def test_the_artifact_says_which_rows_an_earlier_refresh_fetched() -> None:
    # After a served run was killed mid-merge, the next run's artifact listed azure four times, identical rows
    # ("| azure | ok | 1813 | 0 | 0 | 0 | 2 |  |"): three were results kept by killed runs, merged late.
    from gpuledger.warehouse.store import LoadReport

    late = "resumed: fetched by refresh-20261207T023820Z-3e7469b4; merged later"
    summary = refresh.summarize("refresh-20261207T024050Z-4305c61a", [
        LoadReport("azure", "r1", "ok", rows_loaded=1813, rows_quarantined=2, notes=[late]),
        LoadReport("azure", "r2", "ok", rows_loaded=1813, rows_quarantined=2,
                   notes=["availability history: 0 of 68 signals stored"])])
    rows = [line for line in refresh._artifact_markdown(summary).splitlines() if line.startswith("| azure |")]
    assert rows == [f"| azure | ok | 1813 | 0 | 0 | 0 | 2 | {late} |", "| azure | ok | 1813 | 0 | 0 | 0 | 2 |  |"]


@pytest.mark.prefect
def test_a_full_disk_while_saving_a_result_says_so_where_the_saved_ones_wait(api_url: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSPC saving a provider's result: the results saved before it wait with the reason (`status` had said
    'not merged: its refresh stopped first'), and the error says they are kept."""
    import errno

    from typer.testing import CliRunner

    from gpuledger.flows.cli import app
    from gpuledger.flows.fetch import failed

    def fetched(plan: SourcePlan, timeout_s: float) -> dict[str, bytes]:
        out = tmp_path / "fetched" / plan.provider
        pending.write(out, failed(plan, f"{plan.provider}: stub"))
        return {p.name: p.read_bytes() for p in out.iterdir()}

    real_save = pending.save
    saves: list[str] = []

    def full_disk_at_the_second(folder: Path, files: dict[str, bytes]) -> Path:
        if folder.parent != pending.pending_dir(db):  # the stub fetch's own save
            return real_save(folder, files)
        saves.append(folder.name)
        if len(saves) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_save(folder, files)

    from gpuledger.warehouse.store import close_writer, open_writer

    db = tmp_path / "w.duckdb"
    close_writer(open_writer(db))  # a warehouse (empty) for `status` to read
    monkeypatch.setattr(refresh, "fetch_in_child", fetched)
    monkeypatch.setattr(refresh.pending, "save", full_disk_at_the_second)
    one_at_a_time = refresh.nightly_refresh.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))
    with pytest.raises(WarehouseError) as err:
        one_at_a_time(db=str(db), providers=["cudo", "hotaisle"], replay=True)
    monkeypatch.undo()
    folder = pending.pending_dir(db) / saves[0]
    said = f"cannot write beside the warehouse {db}: {folder}: No space left on device"
    assert str(err.value) == (f"{said}. The 1 fetched results saved wait in {pending.pending_dir(db)}: the next "
                              "refresh, or `gpuledger refresh --resume`, merges them")
    (kept,) = pending.waiting(db)
    assert kept == folder / "cudo.json" and pending.write_error(kept) == said
    shown = CliRunner().invoke(app, ["status", "--db", str(db)])  # the line as written, whatever its wrapping
    expected = f"waiting to be merged: {saves[0]} (cudo); write failed: {said}"
    assert "".join(expected.split()) in "".join(shown.output.split()), shown.output
