"""Child processes of a refresh (a provider's fetch, a page's crawl), each `python -m ...` in a process group
of its own: a timeout kills it with all it started, and it ends itself when the refresh dies (even by kill -9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from gpuledger.warehouse.settings import PARENT_PID_VARIABLE

PARENT_CHECK_S = 0.5
STDERR_TAIL_CHARS = 2000

_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run(module: str, args: list[str], timeout_s: float, stdin: bytes = b"", **popen: Any
        ) -> tuple[int | None, str]:
    """Run `python -m module args` in its own session, fed `stdin`; (exit code, its stderr). After
    `timeout_s` its whole group is killed and the code is None."""
    env = {**popen.pop("env", os.environ), PARENT_PID_VARIABLE: str(os.getpid())}
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, env=env, **popen)
    with _live_lock:
        _live.add(proc)
    try:
        _, err = proc.communicate(stdin, timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc)
        _, err = proc.communicate()
        code = None
    finally:
        with _live_lock:
            _live.discard(proc)
    return code, err.decode("utf-8", "replace")


def stop_all() -> int:
    """Kill every child still running (a signal stopped the refresh); how many there were."""
    with _live_lock:
        running = list(_live)
    for proc in running:
        kill_group(proc)
    return len(running)


def end_with_parent() -> None:
    """In a child: once the process that started it is gone, kill this child's own group. The parent's
    pid comes from the parent: one killed while its child still imported would be missed otherwise."""
    parent = int(os.environ.get(PARENT_PID_VARIABLE) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()
