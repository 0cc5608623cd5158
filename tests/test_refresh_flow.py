"""The nightly_refresh flow gives up on a stuck provider and still lands the others."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import duckdb
import pytest

import gpuledger.flows.pipeline
import gpuledger.flows.refresh
from gpuledger import flows
from gpuledger.flows.pipeline import ScrapeTimeout, SourcePlan, fetch_within
from tests.builders import shared_prefect_server

@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


def stuck_for(provider: str, release: threading.Event, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `provider`'s fetch block (as on a socket that never answers) until `release` is set."""
    real = flows.pipeline.fetch_source

    def fetch(plan: SourcePlan):
        if plan.provider == provider:
            release.wait(60)
        return real(plan)

    monkeypatch.setattr(flows.pipeline, "fetch_source", fetch)


def test_fetch_within_abandons_a_stuck_scrape(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    stuck_for("lambda", release, monkeypatch)
    started = time.monotonic()
    try:
        with pytest.raises(ScrapeTimeout, match=r"^lambda: the scrape did not finish within 0.3 s"):
            fetch_within(SourcePlan("lambda", mode="replay"), 0.3)
        assert time.monotonic() - started < 5
    finally:
        release.set()


def test_fetch_within_passes_the_scrape_error_through() -> None:
    with pytest.raises(Exception, match="unknown provider 'nosuch'"):
        fetch_within(SourcePlan("nosuch", mode="replay"), 30)


@pytest.mark.prefect
def test_refresh_records_a_timed_out_provider_and_loads_the_rest(api_url: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    stuck_for("lambda", release, monkeypatch)
    monkeypatch.setenv("GPULEDGER_TASK_TIMEOUT_S", "3")
    db = tmp_path / "w.duckdb"
    started = time.monotonic()
    try:
        summary = flows.refresh.nightly_refresh(db=str(db), providers=["lambda", "runpod"], replay=True)
    finally:
        release.set()
    assert time.monotonic() - started < 40  # not the stuck fetch's 60 s
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
