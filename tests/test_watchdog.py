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


# A stand-in for a refresh without a watchdog (a Prefect worker's): a provider fetch and a page crawl,
# each a child in its own session, against a listener that never answers (the test's, which outlives
# the refresh and accepts no connection), and a fetch worker that finished its task and waits idle.
REFRESH_WITH_CHILDREN = """
import json, pathlib, sys, tempfile, threading, time
from gpuledger import children
work = pathlib.Path(tempfile.mkdtemp())
(work / "settings.json").write_text("{}")

def fetch(provider, urls):
    plan = {"provider": provider, "mode": "replay", "replay_urls": urls}
    children.run_task("gpuledger.flows.fetch", json.dumps({"out": str(work), "plan": plan}).encode(), 300)

with children.reusing_workers():
    threading.Thread(target=fetch, args=("lambda", {"cloud.lambda.ai": sys.argv[1]}), daemon=True).start()
    threading.Thread(target=children.run, args=("gpuledger.spiders.runner", [
        "--spider", "tests.env_spider:EnvironmentSpider", "--url", sys.argv[1],
        "--settings", str(work / "settings.json"),
        "--out", str(work / "items.jsonl"), "--status", str(work / "status.json")], 300),
                     kwargs={"env": {**__import__("os").environ, "PYTHONPATH": sys.argv[2]}}, daemon=True).start()
    fetch("nosuch", {})  # fails at once (no such provider): its worker then waits idle for a task
    print("idle", flush=True)
    time.sleep(300)
"""


def test_children_end_with_a_killed_refresh() -> None:
    """No watchdog here: each child, busy or idle, notices that the process that started it has gone."""
    listener = socket.create_server(("127.0.0.1", 0))
    page = f"http://127.0.0.1:{listener.getsockname()[1]}"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", REFRESH_WITH_CHILDREN, page, root], cwd=root,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "idle\n"
        kids = psutil.Process(proc.pid).children()
        assert len(kids) == 3, kids  # the stalled fetch's worker, the idle one, the crawl
        assert all(os.getpgid(k.pid) == k.pid for k in kids)  # each leads a process group of its own
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone, alive = psutil.wait_procs(kids, timeout=10)
        assert not alive, [(p.pid, p.cmdline()) for p in alive]
    finally:
        listener.close()
        if proc.poll() is None:
            proc.kill()
