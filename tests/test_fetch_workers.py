"""Fetch workers (gpuledger.children): reused after a clean finish inside `reusing_workers`, never after
a timeout or past the memory line, and ended when the block ends; a reused worker's outcome is the one a
fresh worker gives."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psutil
import pytest

from gpuledger import children
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.fetch import SourcePlan, fetch_in_child
from gpuledger.warehouse import pending
from tests.faults.faultserver import FaultyReplay, Stall


def fetch_workers() -> list[int]:
    return sorted(c.pid for c in psutil.Process().children()
                  if c.cmdline()[-2:] == ["-m", "gpuledger.flows.fetch"])


def offers(files: dict[str, bytes], tmp: Path) -> tuple[str, int, list[Any]]:
    outcome = pending.read(pending.save(tmp, files))
    rows = json.loads(files[f"{outcome.provider}.offers.json"])
    return outcome.state, outcome.count("offers"), sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.fixture(scope="module")
def replay() -> Any:
    with ReplayServer(BUNDLED_RECORDINGS, providers=["lambda", "runpod"]) as server:
        yield server


def plan(provider: str, server: Any) -> SourcePlan:
    return SourcePlan(provider, "replay", server.endpoints(), settings=server.settings.get(provider, {}))


def lambda_stalled() -> FaultyReplay:
    """Lambda's and RunPod's recordings, Lambda's requests never answered."""
    server = FaultyReplay(BUNDLED_RECORDINGS, ["lambda", "runpod"],
                          transport=lambda host, req: Stall() if host == "cloud.lambda.ai" else None)
    server.start()
    return server


def test_a_worker_takes_the_next_task_and_its_outcome_is_a_fresh_workers(replay: Any, tmp_path: Path) -> None:
    fresh = offers(fetch_in_child(plan("runpod", replay), 120), tmp_path / "fresh")
    assert fetch_workers() == []  # outside the block a worker ends after its one task
    with children.reusing_workers():
        first = offers(fetch_in_child(plan("lambda", replay), 120), tmp_path / "lambda")
        (worker,) = fetch_workers()
        reused = offers(fetch_in_child(plan("runpod", replay), 120), tmp_path / "runpod")
        assert fetch_workers() == [worker]
    assert fetch_workers() == []
    assert first[:2] == ("ok", 27) and reused[:2] == ("ok", 85)
    assert reused == fresh  # lambda's fetch before it left nothing behind


def test_a_worker_that_overran_is_killed_and_not_reused(tmp_path: Path) -> None:
    stalled = lambda_stalled()
    try:
        with children.reusing_workers():
            outcome = pending.read(pending.save(tmp_path / "a", fetch_in_child(plan("lambda", stalled), 3)))
            assert fetch_workers() == []
            after = offers(fetch_in_child(plan("runpod", stalled), 120), tmp_path / "b")
    finally:
        stalled.close()
    assert outcome.state == "failed" and outcome.error.startswith("lambda: the scrape did not finish within 3 s")
    assert after[:2] == ("ok", 85)


def test_a_worker_past_the_memory_line_is_not_reused(replay: Any, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "REUSE_UNDER_RSS_MB", 1)
    with children.reusing_workers():
        assert offers(fetch_in_child(plan("lambda", replay), 120), tmp_path)[:2] == ("ok", 27)
        assert fetch_workers() == []


# A refresh that is large when it starts a worker: the worker's own memory decides, not the parent's
# (getrusage's peak of a child counts its parent's size at the fork).
LARGE_PARENT = """
import json, sys
import psutil
from gpuledger import children
from gpuledger.flows.fetch import SourcePlan, fetch_in_child
ballast = bytearray(600 << 20)
ballast[::4096] = bytes(len(ballast) // 4096)  # written, so resident
plan = SourcePlan(**json.loads(sys.argv[1]))
with children.reusing_workers():
    fetch_in_child(plan, 120)
    print(psutil.Process().memory_info().rss >> 20, len(psutil.Process().children()), flush=True)
"""


def test_a_large_refresh_still_reuses_its_workers(replay: Any) -> None:
    out = subprocess.run([sys.executable, "-c", LARGE_PARENT, json.dumps(asdict(plan("lambda", replay)))],
                         capture_output=True, text=True, timeout=120)
    parent_mb, workers = map(int, out.stdout.split())
    assert parent_mb > children.REUSE_UNDER_RSS_MB and workers == 1, out.stderr[-2000:]


def test_a_worker_killed_mid_task_fails_its_provider_alone(tmp_path: Path) -> None:
    """As the kernel's OOM killer would: the provider in that worker fails, named; the next gets a new worker."""
    stalled = lambda_stalled()
    killer = threading.Thread(target=lambda: psutil.Process(wait_for_one_worker()).kill())
    try:
        with children.reusing_workers():
            killer.start()
            files = fetch_in_child(plan("lambda", stalled), 60)
            killer.join()
            after = offers(fetch_in_child(plan("runpod", stalled), 120), tmp_path / "b")
    finally:
        stalled.close()
    outcome = pending.read(pending.save(tmp_path / "a", files))
    assert outcome.state == "failed"
    assert outcome.error.startswith("lambda: the fetch process ended without a result (exit code -9)")
    assert after[:2] == ("ok", 85)


def test_a_worker_that_crashes_is_named_by_its_exception_not_its_traceback() -> None:
    from gpuledger.flows.fetch import relay_logs

    code, stderr = children.run_task("gpuledger.flows.fetch", b"{}", 60)  # a task without its plan
    assert code == 1 and 'File "' in stderr  # a real traceback, quoting the install's paths
    assert children.last_words(relay_logs(stderr)) == "KeyError: 'plan'"
    assert children.last_words("\n \n") is None


def wait_for_one_worker() -> int:
    for _ in range(600):
        if workers := fetch_workers():
            time.sleep(1.0)  # into its task: the request is sent at once, the stalled answer never comes
            return workers[0]
        time.sleep(0.05)
    raise AssertionError("no fetch worker started")
