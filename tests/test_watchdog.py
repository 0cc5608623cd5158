"""No child outlives a killed refresh (flows/watchdog.py), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

# A stand-in for a refresh: a child in its own session (as a crawl child is) with a child of
# its own (as Chromium is), a plain child (as Prefect's server is), and the watchdog.
REFRESH = """
import subprocess, sys, time
from gpuledger.flows import watchdog
watchdog.ensure_watched()
crawl = subprocess.Popen(["sh", "-c", "sleep 300 & sleep 300; wait"], start_new_session=True)
server = subprocess.Popen(["sleep", "300"])
print(crawl.pid, server.pid, flush=True)
time.sleep(300)
"""


def test_a_killed_refresh_leaves_no_process_behind() -> None:
    proc = subprocess.Popen([sys.executable, "-c", REFRESH], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        crawl_pid, server_pid = map(int, proc.stdout.readline().split())
        deadline = time.monotonic() + 30
        while True:  # the crawl child's own child is up, and the watchdog has had a poll
            tree = psutil.Process(proc.pid).children(recursive=True)
            if len(tree) >= 5:
                break
            assert time.monotonic() < deadline, tree
            time.sleep(0.1)
        time.sleep(0.6)
        started = {p.pid: p for p in tree}
        watchdogs = [p for p in tree if "gpuledger.flows.watchdog" in " ".join(p.cmdline())]
        assert len(watchdogs) == 1 and {crawl_pid, server_pid} <= started.keys()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone, alive = psutil.wait_procs(list(started.values()), timeout=10)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]  # the watchdog too, once done
    finally:
        if proc.poll() is None:
            proc.kill()
