"""Shared fixtures: real clients against loopback replay servers, temp warehouses."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest

from gpuledger import flows  # noqa: F401  (Prefect/AWS environment defaults)
from gpuledger.adapters.base import SourceContext
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

FIXTURES = Path(__file__).parent / "fixtures"
FAULT_VERDICTS: dict[tuple[str, str], Any] = {}  # (provider, fault) -> the verdict of tests/faults


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == "fault_verdict":  # tests.faults.matrix.keep
            FAULT_VERDICTS[(value["provider"], value["fault"])] = SimpleNamespace(**value)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not FAULT_VERDICTS:
        return
    from tests.faults.matrix import render

    terminalreporter.write_sep("=", "fault matrix: provider x fault")
    for line in render(FAULT_VERDICTS):
        terminalreporter.write_line(line)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "ledger.duckdb"


@pytest.fixture
def replay() -> Iterator[Callable[..., ReplayServer]]:
    """replay("aws", hook=None, recordings=None) -> a started ReplayServer for that provider."""
    servers: list[ReplayServer] = []

    def start(provider: str, hook: Any = None, recordings: Path | None = None) -> ReplayServer:
        server = ReplayServer(recordings or BUNDLED_RECORDINGS, providers=[provider], hook=hook)
        server.start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.close()


def replay_context(server: ReplayServer, provider: str, **overrides: Any) -> SourceContext:
    """A SourceContext that sends the provider's real client to the replay server."""
    settings = dict(server.settings.get(provider, {}))
    settings.update(overrides.pop("settings", {}))
    kwargs: dict[str, Any] = {"http_attempts": 2, "retry_wait_max_s": 0.05, "http_timeout_s": 10}
    kwargs.update(overrides)
    return SourceContext(provider=provider, mode="replay", replay_urls=server.endpoints(), settings=settings,
                         **kwargs)
