"""Provider tasks on a real Dask cluster (worker processes on loopback) give the same warehouse.

The cluster's workers are separate processes, so every SourcePlan going out and
every FetchResult (a Batch of validated records) coming back is really pickled.
The replay server runs in the flow's process on 127.0.0.1; the workers reach it
there. CoreWeave's spider starts its crawl in a child process: that must work
from inside a (daemonic) Dask worker too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest

from tests.builders import shared_prefect_server

PROVIDERS = ["lambda", "runpod", "coreweave"]


@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=2, host="127.0.0.1",
                      dashboard_address=None) as c:
        yield c


def tables(db: Path) -> dict[str, list[tuple]]:
    """Everything a refresh writes, less what differs between two runs by design (ids, instants)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "offers": con.execute("select * exclude (first_seen, last_seen, run_id) from offers order by all"
                                  ).fetchall(),
            "offer_history": con.execute("select * exclude (valid_from, run_id) from offer_history order by all"
                                         ).fetchall(),
            "egress": con.execute("select * exclude (first_seen, last_seen, run_id) from egress_prices order by all"
                                  ).fetchall(),
            "storage": con.execute("select * exclude (first_seen, last_seen, run_id) from storage_prices order by all"
                                   ).fetchall(),
            "quarantine": con.execute("select provider, kind, source_ref, reason, raw from quarantine order by all"
                                      ).fetchall(),
            "providers": con.execute("select * exclude (updated_at) from providers order by all").fetchall(),
            "runs": con.execute(
                "select provider, mode, state, rows_parsed, rows_loaded, rows_quarantined, egress_rows, storage_rows, "
                "offers_new, offers_changed, offers_closed, requests, error, notes from scrape_runs order by all"
            ).fetchall(),
        }
    finally:
        con.close()


@pytest.mark.prefect
def test_dask_runner_gives_the_thread_runner_warehouse(api_url: str, cluster: Any, tmp_path: Path) -> None:
    """`gpuledger refresh` in a fresh process, told by GPULEDGER_TASK_RUNNER=dask and GPULEDGER_DASK_ADDRESS
    to send its provider tasks to the cluster, loads exactly what the default thread runner loads."""
    from distributed import Client, get_task_stream
    from prefect.task_runners import ThreadPoolTaskRunner

    from gpuledger.flows.refresh import nightly_refresh

    assert isinstance(nightly_refresh.task_runner, ThreadPoolTaskRunner)  # the default, GPULEDGER_TASK_RUNNER unset
    threads = nightly_refresh(db=str(tmp_path / "threads.duckdb"), providers=PROVIDERS, replay=True)
    assert threads["ok"], threads

    env = dict(os.environ, PREFECT_API_URL=api_url, GPULEDGER_TASK_RUNNER="dask",
               GPULEDGER_DASK_ADDRESS=cluster.scheduler_address)
    args = [a for p in PROVIDERS for a in ("-p", p)]
    with Client(cluster) as client:
        worker_pids = set(client.run(os.getpid).values())
        with get_task_stream(client=client) as stream:
            done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay", *args,
                                   "--db", str(tmp_path / "dask.duckdb")],
                                  env=env, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stdout + done.stderr
    # the provider tasks ran on the cluster's two worker processes, not in the flow's process
    assert len(worker_pids) == 2 and os.getpid() not in worker_pids
    ran = [t for t in stream.data if t["key"].startswith("scrape_provider-")]  # Dask key: the task function's name
    assert len(ran) == len(PROVIDERS), [t["key"] for t in stream.data]
    assert {t["worker"] for t in ran} <= set(cluster.scheduler_info["workers"])

    a, b = tables(tmp_path / "threads.duckdb"), tables(tmp_path / "dask.duckdb")
    assert [r[0] for r in a["runs"]] == sorted(PROVIDERS) and all(r[2] == "ok" for r in a["runs"])
    assert len(a["offers"]) == 27 + 85 + 14 and len(a["offer_history"]) == len(a["offers"])
    for name in a:
        assert a[name] == b[name], name


def test_a_replay_runs_as_many_fetches_as_the_cores_and_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows.refresh import fetches_at_once

    for cores, replay, live in ((2, 3, 8), (4, 5, 8), (16, 8, 8), (None, 2, 8)):
        monkeypatch.setattr("os.cpu_count", lambda: cores)
        assert (fetches_at_once(replay=True), fetches_at_once(replay=False)) == (replay, live)


def test_runner_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows.refresh import task_runner_from_env

    monkeypatch.setenv("GPULEDGER_DASK_ADDRESS", "tcp://127.0.0.1:8786")
    for value, expected in (("dask", "DaskTaskRunner"), ("thread", "ThreadPoolTaskRunner"),
                            ("", "ThreadPoolTaskRunner")):
        monkeypatch.setenv("GPULEDGER_TASK_RUNNER", value)
        runner = task_runner_from_env()
        assert type(runner).__name__ == expected
        if expected == "DaskTaskRunner":
            assert runner.address == "tcp://127.0.0.1:8786"
    monkeypatch.delenv("GPULEDGER_DASK_ADDRESS")
    monkeypatch.setenv("GPULEDGER_DASK_WORKERS", "3")
    monkeypatch.setenv("GPULEDGER_TASK_RUNNER", "dask")
    runner = task_runner_from_env()
    assert runner.address is None and runner.cluster_kwargs == {"n_workers": 3}  # a temporary local cluster
    monkeypatch.setenv("GPULEDGER_TASK_RUNNER", "ray")
    with pytest.raises(ValueError, match="GPULEDGER_TASK_RUNNER='ray': use thread or dask"):
        task_runner_from_env()
