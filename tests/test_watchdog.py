"""No child outlives a killed refresh (flows/watchdog.py), with real processes."""

from __future__ import annotations

import os
import signal
import socket
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


# A stand-in for a refresh that forks both kinds of child from the fork server: a provider fetch
# that takes 300 s, and a crawl of a page that never answers (the test's listener, which outlives
# the refresh, accepts no connection).
REFRESH_WITH_FORKED_CHILDREN = """
import pathlib, sys, tempfile, threading, time
from gpuledger.flows import isolated
from gpuledger.spiders import runner
threading.Thread(target=isolated.fetch_in_child, args=(time.sleep, 300, 300, TimeoutError), daemon=True).start()
work = pathlib.Path(tempfile.mkdtemp())
crawl = runner._start("tests.env_spider:EnvironmentSpider", work, sys.argv[1], {}, None)
print(crawl.pid, flush=True)
time.sleep(300)
"""


def test_children_forked_from_the_fork_server_end_with_a_killed_refresh() -> None:
    """No watchdog here: the fork server ends with the refresh, and each child it forked notices
    that its parent has gone; the crawl takes its own process group with it."""
    listener = socket.create_server(("127.0.0.1", 0))
    page = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    proc = subprocess.Popen([sys.executable, "-c", REFRESH_WITH_FORKED_CHILDREN, page], stdout=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        assert proc.stdout is not None
        crawl_pid = int(proc.stdout.readline())
        fork_server = psutil.Process(crawl_pid).parent()
        deadline = time.monotonic() + 60
        while len(fork_server.children()) < 2:  # the fetch child is up beside the crawl
            assert time.monotonic() < deadline, fork_server.children()
            time.sleep(0.1)
        time.sleep(1.0)  # both children past their first steps
        children = fork_server.children()
        assert psutil.Process(crawl_pid) in children and os.getpgid(crawl_pid) == crawl_pid
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone, alive = psutil.wait_procs([fork_server, *children], timeout=10)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]
    finally:
        listener.close()
        if proc.poll() is None:
            proc.kill()
