"""Fast checks of benchmark 1's pieces (bench/world_lines.py) on a tiny world; no timings here."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from gpuledger.adapters.registry import SOURCES
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer, write_endpoints
from bench import world_lines
from bench.sources import SOURCES as BYTE_SOURCES
from tests.builders import shared_prefect_server

LAMBDA_BODY = BUNDLED_RECORDINGS / "lambda" / "instance-types.json"


@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


def test_the_world_folder_is_generated_once_per_key(tmp_path: Path) -> None:
    folder, tallies, reused = world_lines.world_folder("small", ["lambda"], root=tmp_path)
    assert not reused and (folder / "lambda" / "manifest.json").exists()
    assert tallies == [{"provider": "lambda", "exchanges": 1, "body_bytes": LAMBDA_BODY.stat().st_size,
                        "source": "bundled"}]
    again, tallies_again, reused = world_lines.world_folder("small", ["lambda"], root=tmp_path)
    assert reused and again == folder and tallies_again == tallies
    other, _, reused = world_lines.world_folder("world", ["lambda"], root=tmp_path)
    assert not reused and other != folder


def test_the_replay_process_logs_every_answer_and_repeats_count_once(tmp_path: Path) -> None:
    world, _, _ = world_lines.world_folder("small", ["lambda", "runpod"], root=tmp_path)
    with world_lines.replay_process(world, tmp_path) as server:
        endpoints = json.loads(server["endpoints"].read_text())["endpoints"]
        with httpx.Client() as client:
            for _ in range(2):
                resp = client.get(endpoints["cloud.lambda.ai"] + "/api/v1/instance-types")
                assert resp.status_code == 200
    assert server["peak_rss_mb"] > 0
    fetched = world_lines.bytes_by_provider(server["sent"], world_lines.host_providers(world))
    size = LAMBDA_BODY.stat().st_size
    assert fetched == {"lambda": {"requests": 2, "bytes": 2 * size, "distinct_bytes": size}}


def test_every_provider_names_its_source() -> None:
    assert sorted(BYTE_SOURCES) == sorted(SOURCES)
    assert all(s.used and s.why for s in BYTE_SOURCES.values())


def test_refresh_refuses_a_bad_endpoints_file_in_one_line(tmp_path: Path) -> None:
    from gpuledger.flows.cli import app

    bad = tmp_path / "endpoints.json"
    bad.write_text("not json")
    runner = CliRunner()
    result = runner.invoke(app, ["refresh", "--replay", "--replay-endpoints", str(bad), "--db",
                                 str(tmp_path / "w.duckdb")])
    assert result.exit_code == 2 and "not a replay endpoints file" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["refresh", "--replay-endpoints", str(bad), "--db", str(tmp_path / "w.duckdb")])
    assert result.exit_code == 2 and "--replay-endpoints goes with --replay" in result.output
    assert not (tmp_path / "w.duckdb").exists()


@pytest.mark.prefect
def test_a_refresh_sends_its_clients_to_an_already_running_replay_server(api_url: str, tmp_path: Path) -> None:
    from gpuledger.flows.refresh import nightly_refresh

    with ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"]) as server:
        write_endpoints(server, tmp_path / "endpoints.json")
        summary = nightly_refresh(db=str(tmp_path / "w.duckdb"), providers=["lambda"], replay=True,
                                  replay_endpoints=str(tmp_path / "endpoints.json"))
        hosts = [host for host, _ in server.requests]
    assert summary["ok"] and [p["offers"] for p in summary["providers"]] == [27]
    assert hosts == ["cloud.lambda.ai"]  # the one recorded request, answered by this server
    assert server.bytes_sent == {"cloud.lambda.ai": LAMBDA_BODY.stat().st_size}


def test_one_prefect_server_reaches_both_child_processes_and_this_ones_flows(monkeypatch) -> None:
    from prefect.settings import PREFECT_API_URL

    from bench.common import shared_prefect_api

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    outside = PREFECT_API_URL.value()
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # a server already up: used as it is
    with shared_prefect_api() as url:
        assert url == "http://127.0.0.1:9/api"
        assert PREFECT_API_URL.value() == url  # benchmark 1's in-process flows
        assert world_lines.os.environ["PREFECT_API_URL"] == url  # the refresh children
    monkeypatch.delenv("PREFECT_API_URL")
    assert PREFECT_API_URL.value() == outside


SHARED_AFTER_FORK = """
import os, time
block = bytearray(200 * 1024 * 1024)
for i in range(0, len(block), 4096):  # touch every page: 200 MiB resident
    block[i] = 1
if os.fork() == 0:  # the child shares every page of the block with its parent until one writes
    time.sleep(1.5)
    os._exit(0)
time.sleep(1.5)
os.wait()
"""


def test_the_memory_line_counts_a_page_two_processes_share_once() -> None:
    from bench.common import run_measured

    res = run_measured([world_lines.sys.executable, "-c", SHARED_AFTER_FORK], sample_s=0.05)
    assert res["returncode"] == 0
    # Parent and child each map the 200 MiB block: RSS counts it in both, PSS once.
    assert res["peak_tree_rss_mb"] > 400
    assert 200 < res["peak_tree_pss_mb"] < 290
