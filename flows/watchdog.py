"""No child outlives a refresh, even one killed by `kill -9` (Prefect's temporary server, crawls, Chromium):
`python -m gpuledger.flows.watchdog PID`, in its own session, notes PID's descendants every POLL_S seconds and
kills those still running once PID is gone (psutil's pid and start time never mistake a reused pid)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import suppress

import psutil

POLL_S = 0.25
_WATCHING: dict[int, subprocess.Popen[bytes]] = {}


def ensure_watched() -> None:
    """Start a watchdog for this process from a new process, once per process."""
    if os.getpid() not in _WATCHING:
        _WATCHING[os.getpid()] = subprocess.Popen(
            [sys.executable, "-m", "gpuledger.flows.watchdog", str(os.getpid())], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def watch(pid: int, poll_s: float = POLL_S) -> list[int]:
    """Until `pid` is gone: note its descendants. Then kill the ones still running; their pids."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return []
    me = os.getpid()
    seen: dict[int, psutil.Process] = {}
    while True:
        try:
            for child in parent.children(recursive=True):
                if child.pid != me:
                    seen.setdefault(child.pid, child)
            if not parent.is_running() or parent.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(poll_s)
    left = [p for p in seen.values() if p.is_running()]
    for p in left:
        with suppress(psutil.NoSuchProcess):
            p.kill()
    psutil.wait_procs(left, timeout=5)
    return [p.pid for p in left]


if __name__ == "__main__":
    watch(int(sys.argv[1]))
