"""Children of the fork server started and waited for from many threads at once, as a refresh's
provider threads do."""

from __future__ import annotations

import sys
import threading
import time

from gpuledger import forkserver

THREADS = 6
CHILDREN_PER_THREAD = 40


def _exits_with(code: int) -> None:
    time.sleep(0.005)
    sys.exit(code)


def test_each_child_exit_code_survives_threads_starting_and_waiting_at_once() -> None:
    # Unguarded (Process.start() and join() straight from the threads), 31 of 240 such children
    # read exit code 255 on a 2-core machine: CPython's unlocked read of the fork server's socket.
    ctx = forkserver.context()
    read: dict[tuple[int, int], tuple[int, int | None]] = {}

    def run(thread: int) -> None:
        for n in range(CHILDREN_PER_THREAD):
            code = (thread + n) % 4
            proc = ctx.Process(target=_exits_with, args=(code,), daemon=True)
            forkserver.start(proc)
            read[(thread, n)] = (code, forkserver.wait(proc, 60))

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(read) == THREADS * CHILDREN_PER_THREAD
    wrong = {child: codes for child, codes in read.items() if codes[0] != codes[1]}
    assert wrong == {}, f"{len(wrong)} children read a wrong exit code (exit code, read): {wrong}"


def test_wait_gives_none_while_the_child_runs_and_its_code_once_it_ends() -> None:
    proc = forkserver.context().Process(target=_exits_with, args=(3,), daemon=True)
    forkserver.start(proc)
    assert forkserver.wait(proc, 0) is None
    assert forkserver.wait(proc, 60) == 3
