"""Child processes of a refresh (a provider's fetch, a page's crawl), each `python -m ...` in a process group
of its own: a timeout kills it with all it started, and it ends itself when the refresh dies (even by kill -9).
A fetch worker takes one task a line on stdin, ending each with a DONE line on stderr; inside `reusing_workers()`
one that finished cleanly (in time, no thread left, small RSS) takes the next: its imports are paid once."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager, suppress
from typing import IO, Any, Iterator

from gpuledger.warehouse.settings import PARENT_PID_VARIABLE

PARENT_CHECK_S = 0.5
STDERR_TAIL_CHARS = 2000
LAST_WORDS_CHARS = 300
GROUP_GONE_WAIT_S = 2.0

DONE = b"gpuledger-done"  # a worker's last line for a task: DONE <its RSS in MiB> <threads the task left running>
REUSE_UNDER_RSS_MB = 200  # a worker that holds more after its task (a large provider's parse) ends instead

_live: set[subprocess.Popen[bytes]] = set()
_live_lock = threading.Lock()
_idle: dict[str, list[subprocess.Popen[bytes]]] = {}  # module -> workers waiting for a task
_reusing = False


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the child's whole process group; return once none of it is left (or GROUP_GONE_WAIT_S passed):
    a member of the group may still be exiting after the child itself is reaped."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + GROUP_GONE_WAIT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _start(module: str, args: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """`python -m module args` in a session of its own, told this process's pid; counted as running."""
    env = {**popen.pop("env", os.environ), PARENT_PID_VARIABLE: str(os.getpid())}
    proc = subprocess.Popen([sys.executable, "-m", module, *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True, env=env, **popen)
    with _live_lock:
        _live.add(proc)
    return proc


def last_words(stderr: str) -> str | None:
    """The last line a child wrote that is no frame of a traceback: for a crash, the exception. A frame
    would quote the install's paths, and a message about a failure is one line."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line[0].isspace()]
    return lines[-1][:LAST_WORDS_CHARS] if lines else None


def run(module: str, args: list[str], timeout_s: float, **popen: Any) -> tuple[int | None, str]:
    """Run `python -m module args` in its own session, its stdin closed; (exit code, its stderr). After
    `timeout_s` its whole group is killed and the code is None."""
    proc = _start(module, args, **popen)
    try:
        _, err = proc.communicate(timeout=timeout_s)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc)
        _, err = proc.communicate()
        code = None
    finally:
        with _live_lock:
            _live.discard(proc)
    return code, err.decode("utf-8", "replace")


# Set by a refresh that a signal stopped: its provider tasks still queued start no child (cleared when a
# refresh starts).
NO_NEW_CHILDREN = threading.Event()


def stop_all() -> int:
    """Kill every child still running (a signal stopped the refresh), idle workers too; how many were busy."""
    with _live_lock:
        running = list(_live)
    for proc in running + _take_idle():
        kill_group(proc)
    return len(running)


def _take_idle() -> list[subprocess.Popen[bytes]]:
    with _live_lock:
        idle = [proc for procs in _idle.values() for proc in procs]
        _idle.clear()
    return idle


@contextmanager
def reusing_workers() -> Iterator[None]:
    """Within: a worker that finished a task cleanly is kept for the next one. After: idle workers end."""
    global _reusing
    _reusing = True
    try:
        yield
    finally:
        _reusing = False
        for proc in _take_idle():  # idle: nothing of theirs is left to finish
            _close_pipes(proc)
            kill_group(proc)


def _worker(module: str) -> subprocess.Popen[bytes]:
    """An idle worker of `module` (inside `reusing_workers`), else a new one; counted as running."""
    with _live_lock:
        waiting = _idle.get(module) or []
        while waiting and waiting[-1].poll() is not None:  # one that ended while idle is not handed a task
            _close_pipes(waiting.pop())
        if waiting:
            proc = waiting.pop()
            _live.add(proc)
            return proc
    return _start(module, [])


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    for pipe in filter(None, (proc.stdin, proc.stderr)):
        with suppress(OSError):  # the worker is gone: nothing left to flush
            pipe.close()


def _task_output(stderr: IO[bytes], deadline: float) -> tuple[bytes, bool]:
    """What a worker wrote on stderr for its task, and whether it ended with a DONE line: False when
    the worker ended (EOF) or the deadline passed first."""
    out = bytearray()
    with selectors.DefaultSelector() as selector:
        selector.register(stderr, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            chunk = os.read(stderr.fileno(), 1 << 16)
            if not chunk:
                return bytes(out), False
            out += chunk
            if out.endswith(b"\n") and out[out.rfind(b"\n", 0, -1) + 1:].startswith(DONE):
                return bytes(out), True
    return bytes(out), False


def run_task(module: str, request: bytes, timeout_s: float) -> tuple[int | None, str]:
    """Hand `request` (one line) to a `python -m module` worker: (0 once it said DONE, else its exit code, or
    None when `timeout_s` passed and its group was killed; what it wrote on stderr, the DONE line left out)."""
    deadline = time.monotonic() + timeout_s
    proc = _worker(module)
    assert proc.stdin is not None and proc.stderr is not None
    with suppress(BrokenPipeError):  # it ended before reading: its exit code and stderr say why
        proc.stdin.write(request + b"\n")
        proc.stdin.flush()
    out, done = _task_output(proc.stderr, deadline)
    code: int | None = 0
    if done:
        out, _, last = out.rstrip(b"\n").rpartition(b"\n")
        rss_mb, threads_left = (int(n) for n in last.split()[1:3])
        reusable = rss_mb < REUSE_UNDER_RSS_MB and threads_left == 0
    else:
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            code = None
            out += _task_output(proc.stderr, time.monotonic() + 1.0)[0]  # its last words, if any
        reusable = False
    with _live_lock:
        _live.discard(proc)
        kept = reusable and _reusing
        if kept:
            _idle.setdefault(module, []).append(proc)
    if not kept:
        _close_pipes(proc)
        if done:  # its outcome is written: killed, it spares its interpreter's teardown (a large heap's)
            kill_group(proc)
    return code, out.decode("utf-8", "replace")


def serve_tasks(handle: Any) -> None:
    """In a worker: `handle(request line)` for each line on stdin until it closes, each task ended with
    the DONE line its parent waits for (the memory the worker holds, and the threads the task left running)."""
    import psutil  # not getrusage's peak: after exec it counts the parent's size at the fork

    me = psutil.Process()
    threads_before = threading.active_count()
    while line := sys.stdin.buffer.readline():
        handle(line)
        rss_mb = me.memory_info().rss >> 20
        threads_left = max(0, threading.active_count() - threads_before)
        sys.stderr.buffer.write(DONE + f" {rss_mb} {threads_left}\n".encode())
        sys.stderr.flush()


def end_with_parent() -> None:
    """In a child: once the process that started it is gone, kill this child's own group. The parent's
    pid comes from the parent: one killed while its child still imported would be missed otherwise."""
    parent = int(os.environ.get(PARENT_PID_VARIABLE) or os.getppid())

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()
