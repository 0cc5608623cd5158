"""The fault-injection suite: fixtures, the `faults` marker, and the provider x fault matrix it prints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

MATRIX: dict[tuple[str, str], object] = {}  # (provider, fault) -> harness.Verdict


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: fault injection (tests/faults): providers, processes, disks")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)


@pytest.fixture(scope="session", autouse=True)
def cells(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """The matrix's cells selected in this session, started in the background as the first test of
    tests/faults begins: the clean world is scraped and seeded once, then the cells run on a small
    pool (tests/faults/runner.py) while the process-fault tests run in the main thread."""
    from tests.faults.runner import CellRunner

    selected = [(item.callspec.params["provider"], item.callspec.params["fault"])
                for item in request.session.items
                if getattr(item, "originalname", "") == "test_fault" and hasattr(item, "callspec")]
    if not selected:
        yield None
        return
    # Every source module is imported here, in the main thread: imports done by the background
    # world build would add to sys.modules, the logging registry and os.environ while pytest's own
    # hooks iterate them in this thread.
    from gpuledger.adapters.registry import specs
    specs()
    runner = CellRunner(tmp_path_factory.mktemp("fault-cells"), selected)
    yield runner
    runner.close()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if not MATRIX:
        return
    from tests.faults.matrix import render

    terminalreporter.write_sep("=", "fault matrix: provider x fault")
    for line in render(MATRIX):
        terminalreporter.write_line(line)
