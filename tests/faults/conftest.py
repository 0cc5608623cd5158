"""The fault-injection suite: its fixtures and the `faults` marker (tests/conftest.py prints the matrix)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "faults: fault injection (tests/faults): providers, processes, disks")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faults)
    # The matrix's verdicts are read last: its cells run in their own process from the first
    # fault test on, beside every other test, and are mostly done by the time they are read.
    matrix = Path(__file__).with_name("test_provider_faults.py")
    items.sort(key=lambda item: Path(str(item.fspath)) == matrix)  # stable: each group keeps its order


@pytest.fixture(scope="session", autouse=True)
def cells(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """The matrix's cells selected in this session, started in a process of their own as the first
    test of tests/faults begins (tests/faults/cell_process.py): the clean world is scraped and
    seeded once, then the cells run on a small pool (tests/faults/runner.py) while the rest of the
    session runs here. Under pytest-xdist the first worker to get here starts it; the others read
    its verdicts from the folder the workers share."""
    from tests.faults.cell_process import MatrixProcess, MatrixVerdicts

    selected = [(item.callspec.params["provider"], item.callspec.params["fault"])
                for item in request.session.items
                if getattr(item, "originalname", "") == "test_fault" and hasattr(item, "callspec")]
    if not selected:
        yield None
        return
    root = tmp_path_factory.mktemp("fault-cells")
    verdicts, processes = root / "verdicts", 1
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The matrix is the longest task: with fewer processes, fewer shares of the cores, it ends last.
        verdicts, processes = tmp_path_factory.getbasetemp().parent / "fault-verdicts", 3  # the session's
        try:
            verdicts.mkdir()
        except FileExistsError:
            yield MatrixVerdicts(verdicts)
            return
    runner = MatrixProcess(root, selected, verdicts, processes)
    yield runner
    runner.close()
