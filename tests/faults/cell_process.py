"""The fault matrix in a process of its own, beside the rest of the test run.

Most of the suite waits on child processes (command-line refreshes, Prefect, Chromium) and
leaves a core idle; the matrix is hundreds of cells of CPU work. Run in the pytest process, its
cells would also share that process's global state with every other test (os.environ and module
attributes a test monkeypatches, the logging a test captures), so it could only run beside the
fault tests. In its own process it starts with the session and runs beside every test, isolated
from them: the test process only sends cells and reads back verdicts.

`python -m tests.faults.cell_process ROOT WORLD [--build]` reads cells on stdin (one JSON list of
[provider, fault] pairs a line, so CellRunner orders each batch slow cells first), runs them with
CellRunner (the same cells, the same judge) and writes one `VERDICT {json}` line per finished cell
on stdout. It ends when stdin closes: at the end of the session, or when the test process dies.
With --build it scrapes the clean world into WORLD; without, it waits for another to.

Under pytest-xdist the first worker to run a fault test starts three such processes (MatrixProcess):
the matrix is the session's longest task, and the scheduler gives each process one share of the
cores beside the workers and their children. Each provider's cells go to one of them, so its
oracle is scraped once; the first builds the clean world and the others open it. Each verdict is
left as a file in a folder the workers share; the worker that runs the matrix's tests reads them
there (MatrixVerdicts). The starting worker waits for every cell before its session ends.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, wait
from pathlib import Path

from tests.faults.harness import Verdict
from tests.faults.providers import PROVIDERS
from tests.faults.runner import CellRunner, cost

PREFIX = "VERDICT "
REPO = Path(__file__).resolve().parents[2]
STDERR_TAIL_CHARS = 3000
MATRIX_WAIT_S = 1200  # a session's whole matrix, with room for a loaded machine


def verdict_file(verdicts: Path, provider: str, fault: str) -> Path:
    return verdicts / f"{provider}--{fault}.json"


WORLD_COST = 2  # the clean world the first process scrapes, in runner.cost's units


def deal(processes: int) -> dict[str, int]:
    """Each provider to one process, the costliest first to the least loaded."""
    loads = [WORLD_COST] + [0] * (processes - 1)
    child_of = {}
    for p in sorted(PROVIDERS, key=lambda p: (-cost(p), p)):
        child_of[p] = loads.index(min(loads))
        loads[child_of[p]] += cost(p)
    return child_of


class MatrixProcess:
    """The test process's side: CellRunner's interface (submit, result, close) over `processes` child
    processes, each provider's cells dealt to one of them."""

    def __init__(self, root: Path, cells: list[tuple[str, str]], verdicts: Path, processes: int) -> None:
        self.verdicts = verdicts
        self.verdicts.mkdir(parents=True, exist_ok=True)
        world = root / "world"
        world.mkdir()
        self.children: list[tuple[subprocess.Popen[str], Path]] = []
        for n in range(processes):
            stderr_path = root / f"cell-process-{n}.stderr"
            with open(stderr_path, "wb") as stderr:
                builds = ["--build"] if n == 0 else []
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.faults.cell_process", str(root), str(world), *builds],
                    cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, bufsize=1)
            self.children.append((proc, stderr_path))
        self.child_of = deal(processes)
        self.futures: dict[tuple[str, str], Future[Verdict]] = {}
        self.dealt: dict[int, list[tuple[str, str]]] = {n: [] for n in range(processes)}
        self._lock = threading.Lock()
        for n, (proc, stderr_path) in enumerate(self.children):
            threading.Thread(target=self._read, args=(n, proc, stderr_path), name="fault-verdicts", daemon=True).start()
        self.submit(cells)

    def submit(self, cells: list[tuple[str, str]]) -> None:
        with self._lock:
            new = [c for c in cells if c not in self.futures and PROVIDERS[c[0]].expected(c[1]) != "n/a"]
            for cell in new:
                self.futures[cell] = Future()
            for n, (proc, _) in enumerate(self.children):
                dealt = [c for c in new if self.child_of[c[0]] == n]
                self.dealt[n] += dealt
                if dealt and proc.stdin is not None and not proc.stdin.closed:
                    try:
                        proc.stdin.write(json.dumps(dealt) + "\n")
                        proc.stdin.flush()
                    except (BrokenPipeError, OSError):
                        pass  # the child is gone: _read reports every open cell with its log tail

    def _settle(self, verdict: Verdict) -> None:
        target = verdict_file(self.verdicts, verdict.provider, verdict.fault)
        target.with_suffix(".tmp").write_text(json.dumps(dataclasses.asdict(verdict)))
        target.with_suffix(".tmp").replace(target)  # whole or absent for a reader
        with self._lock:
            future = self.futures.setdefault((verdict.provider, verdict.fault), Future())
        if not future.done():
            future.set_result(verdict)

    def _read(self, n: int, proc: subprocess.Popen[str], stderr_path: Path) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(PREFIX):
                self._settle(Verdict(**json.loads(line[len(PREFIX):])))
        rc = proc.wait()
        tail = stderr_path.read_text(errors="replace")[-STDERR_TAIL_CHARS:]
        with self._lock:
            lost = [cell for cell in self.dealt[n] if not self.futures[cell].done()]
        for provider, fault in lost:
            self._settle(Verdict(provider, fault, PROVIDERS[provider].expected(fault), problems=[
                f"the matrix process ended (exit code {rc}) before this cell; its log tail: {tail}"]))

    def result(self, provider: str, fault: str) -> Verdict:
        self.submit([(provider, fault)])
        return self.futures[(provider, fault)].result()

    def close(self) -> None:
        with self._lock:
            open_cells = list(self.futures.values())
        wait(open_cells, timeout=MATRIX_WAIT_S)  # another worker may still read them
        for proc, _ in self.children:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc, _ in self.children:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class MatrixVerdicts:
    """The reading side under pytest-xdist: the verdicts another worker's MatrixProcess leaves as files
    (every cell it was given gets one, a lost cell's saying why)."""

    def __init__(self, verdicts: Path) -> None:
        self.verdicts = verdicts

    def result(self, provider: str, fault: str) -> Verdict:
        target = verdict_file(self.verdicts, provider, fault)
        deadline = time.monotonic() + MATRIX_WAIT_S
        while not target.exists():
            if time.monotonic() > deadline:
                return Verdict(provider, fault, PROVIDERS[provider].expected(fault),
                               problems=[f"the matrix process gave no verdict for this cell within {MATRIX_WAIT_S} s"])
            time.sleep(0.2)
        return Verdict(**json.loads(target.read_text()))


def main(argv: list[str]) -> int:
    from gpuledger.adapters.registry import specs

    specs()  # every source module imported before the background world build starts its threads
    root, world = Path(argv[0]), Path(argv[1])
    out_lock = threading.Lock()
    runner = CellRunner(root, [], world, build="--build" in argv[2:])

    def report(future: Future[Verdict]) -> None:
        if future.cancelled():  # queued when stdin closed: nobody waits for it any more
            return
        line = PREFIX + json.dumps(dataclasses.asdict(future.result())) + "\n"
        with out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    for line in sys.stdin:
        if not line.strip():
            continue
        cells = [(provider, fault) for provider, fault in json.loads(line)]
        with runner._lock:
            new = [c for c in cells if c not in runner.futures]
        runner.submit(new)
        for cell in new:
            if cell in runner.futures:  # not n/a
                runner.futures[cell].add_done_callback(report)
    runner.close()  # stdin closed: the running cells finish, the queued ones are dropped
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
