"""Runs the matrix's cells concurrently, as a refresh runs its providers.

A cell mostly waits: on a stalled socket until the client's timeout, on a Retry-After, on a
crawler child process and its browser. Running a few cells at once keeps the whole matrix
within minutes on two cores. Each cell has its own replay server, its own client and its own
copy of the warehouse; the verdicts are the same as run one by one (GPULEDGER_FAULT_WORKERS=1).

The runner starts with the session, in a process of its own (tests/faults/cell_process.py): the
clean world is built and the selected cells run there while the rest of the session runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from tests.faults.harness import BROKEN, READY, Verdict, World, build_world, judge, open_world
from tests.faults.providers import PROVIDERS

# A provider's matrix CPU in units of a plain API's (about 6 CPU seconds): a page source's cells each
# start a crawl child (Hyperstack's a browser too); the hyperscalers' answers are larger.
COST = {"hyperstack": 5, "aws": 3, "gcp": 2, "azure": 2}
PAGE_SOURCE_COST = 3


def cost(provider: str) -> int:
    return COST.get(provider, 1 if PROVIDERS[provider].source_kind == "api" else PAGE_SOURCE_COST)


WORLD_WAIT_S = 600


def wait_for_world(root: Path) -> World:
    deadline = time.monotonic() + WORLD_WAIT_S
    while not (root / READY).exists():
        if (root / BROKEN).exists():
            raise RuntimeError((root / BROKEN).read_text())
        if time.monotonic() > deadline:
            raise RuntimeError(f"no clean world in {root} after {WORLD_WAIT_S} s")
        time.sleep(0.2)
    return open_world(root)


class CellRunner:
    """Runs cells on a thread pool; the clean world in `world_root` is built here (`build`), or waited
    for while another process builds it."""

    def __init__(self, root: Path, cells: list[tuple[str, str]], world_root: Path, build: bool = True,
                 workers: int | None = None) -> None:
        self.root = root
        self.world_root, self.build = world_root, build
        workers = workers or int(os.environ.get("GPULEDGER_FAULT_WORKERS", "3"))
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="fault-cell")
        self.futures: dict[tuple[str, str], Future[Verdict]] = {}
        self._world: World | None = None
        self._world_error: BaseException | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._build, name="fault-world", daemon=True).start()
        self.submit(cells)

    def _build(self) -> None:
        try:
            self._world = build_world(self.world_root) if self.build else wait_for_world(self.world_root)
        except BaseException as err:  # noqa: BLE001 - every cell reports it
            self._world_error = err
        finally:
            self._ready.set()

    def world(self) -> World:
        self._ready.wait()
        if self._world_error is not None:
            raise RuntimeError(f"building the clean world failed: {self._world_error!r}") from self._world_error
        assert self._world is not None
        return self._world

    def submit(self, cells: list[tuple[str, str]]) -> None:
        # The costliest providers' cells first, timeouts first among them, so the pool ends together.
        order = sorted(cells, key=lambda c: (-cost(c[0]), c[1] != "timeout"))
        with self._lock:
            for cell in order:
                if cell not in self.futures and PROVIDERS[cell[0]].expected(cell[1]) != "n/a":
                    self.futures[cell] = self.pool.submit(self._run, *cell)

    def _run(self, provider: str, fault: str) -> Verdict:
        try:
            world = self.world()
            tmp = Path(tempfile.mkdtemp(prefix=f"{provider}-{fault}-", dir=self.root))
            verdict = judge(world, tmp, provider, fault)
        except BaseException as err:  # noqa: BLE001 - a harness error is a lost cell, with its reason
            return Verdict(provider, fault, PROVIDERS[provider].expected(fault),
                           problems=[f"the harness raised {type(err).__name__}: {err}"])
        if verdict.survived:  # a lost cell's warehouse stays to be looked at; the matrix's others take GBs
            shutil.rmtree(tmp, ignore_errors=True)
        return verdict

    def result(self, provider: str, fault: str) -> Verdict:
        self.submit([(provider, fault)])
        return self.futures[(provider, fault)].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
