"""No child outlives a refresh: `python -m gpuledger.flows.watchdog PID` watches process PID.

A refresh starts children it does not always get to stop: Prefect's temporary API server
(`flows.prefect_api`, when no PREFECT_API_URL is set), crawl children in their own
sessions, and the Chromium they drive. A `kill -9` of the refresh runs none of its cleanup,
and those children would live on under PID 1. So the command line starts this watchdog first:
a separate process (its own session, so a terminal's Ctrl-C reaches the refresh, not it)
that notes the refresh's descendants every POLL_S seconds and, once the refresh is gone
(however it ended), kills those still running, then exits. psutil identifies a process by
its pid and start time, so a pid reused by an unrelated process is never killed. A child
started and killed within one poll is not seen; nor does it need to be.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil

POLL_S = 0.25


_WATCHING: dict[int, subprocess.Popen[bytes]] = {}


def ensure_watched() -> None:
    """Start a watchdog for this process, once per process."""
    if os.getpid() not in _WATCHING:
        _WATCHING[os.getpid()] = start()


def start(pid: int | None = None) -> subprocess.Popen[bytes]:
    """Watch `pid` (this process by default) from a new process."""
    return subprocess.Popen([sys.executable, "-m", "gpuledger.flows.watchdog", str(pid or os.getpid())],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)


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
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(left, timeout=5)
    return [p.pid for p in left]


def main() -> None:
    watch(int(sys.argv[1]))


if __name__ == "__main__":
    main()
