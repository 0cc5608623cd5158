"""The one fork server a refresh's child processes are forked from.

Python's multiprocessing keeps one fork server per process: the first child started through it
starts it, and it imports the modules named by then once, before it forks any child. A fork of
it costs milliseconds; a fresh interpreter pays its imports every time. Both kinds of child use
it: a provider fetch in a process of its own (flows/isolated.py) and a page crawl
(spiders/runner.py), so each names what it needs here rather than on the server, where one
list would replace the other.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import threading
import time
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Callable, Iterable

# A provider fetch in a process of its own.
FETCH_MODULES = ("gpuledger.flows.pipeline",)
# A page crawl: Scrapy, Twisted and the parsers, about 1 s of CPU in a fresh interpreter.
# Third-party modules only: a module of ours reading a setting at import would keep the fork
# server's value in every child.
CRAWL_MODULES = ("scrapy.crawler", "scrapy.core.downloader.handlers.http11", "scrapy.extensions.feedexport")

PARENT_CHECK_S = 0.5  # how often a child looks whether the fork server is still there

_preload = list(FETCH_MODULES)
_lock = threading.Lock()
# A fork-server child's exit code is read from the fork server's socket, and CPython does not
# guard that read (python/cpython#130895): when two threads poll one child at once, the second
# finds EOF and records exit code 255 over the real one. Any Process.start() polls every other
# child (multiprocessing's cleanup of ended children), so a refresh's threads starting and
# waiting for children hit it: a crawl that succeeded read as "exited with code 255".
# Every start and every exit-code read of a child goes through start() and wait() below.
_reap_lock = threading.Lock()


def preload(modules: Iterable[str]) -> None:
    """Have the fork server import `modules` too. A server already running keeps what it has:
    its children then import the rest themselves."""
    with _lock:
        _preload.extend(m for m in modules if m not in _preload)


def context() -> BaseContext:
    """The forkserver context, its server (when this starts it) preloading every module named."""
    mp = multiprocessing.get_context("forkserver")
    with _lock:
        mp.set_forkserver_preload(list(_preload))
    return mp


def can_fork() -> bool:
    """False in a daemonic process (a Dask worker), which multiprocessing lets start no child."""
    return not multiprocessing.current_process().daemon


def start(proc: multiprocessing.process.BaseProcess) -> None:
    """Start `proc` (a child of this module's context), safe beside other threads' wait()."""
    with _reap_lock:
        proc.start()


def wait(proc: multiprocessing.process.BaseProcess, timeout: float | None) -> int | None:
    """`proc`'s exit code once it has ended, waiting at most `timeout` seconds (None: until it
    ends); None when it is still running. Safe beside other threads' start() and wait()."""
    if not multiprocessing.connection.wait([proc.sentinel], timeout):
        return None
    with _reap_lock:
        return proc.exitcode


@dataclass(frozen=True)
class Handover:
    """What a child takes from the refresh at the moment it asks for the child: the environment
    (the settings it reads) and the names of the secret variables its messages are redacted of."""

    environ: dict[str, str]
    secret_env_vars: tuple[str, ...]


def handover(environ: dict[str, str] | None = None) -> Handover:
    """This process's Handover; `environ` instead of its own environment when given."""
    from gpuledger.adapters.registry import secret_env_vars

    return Handover(dict(os.environ if environ is None else environ), secret_env_vars())


def begin_child(handed: Handover, on_orphaned: Callable[[], None]) -> None:
    """First steps of a child forked from the fork server.

    The fork server holds the environment of the moment it started; the settings a child reads
    are the refresh's of the moment it asked for the child. The fork server ends when every
    holder of its "alive" pipe's write end has closed it; its children, given to another parent
    then, call `on_orphaned` (from a daemon thread) so that they end too."""
    from gpuledger.adapters.registry import adopt_secret_env_vars
    from gpuledger.pandas_refused import refuse_pandas

    os.environ.clear()
    os.environ.update(handed.environ)
    adopt_secret_env_vars(handed.secret_env_vars)
    refuse_pandas()
    # multiprocessing hands each child the refresh's end of that pipe, so that the child could
    # start processes through the server itself (ours start none). Kept, it would hold the
    # server, and so the child, alive after a refresh killed without its cleanup.
    server = multiprocessing.forkserver._forkserver
    if server._forkserver_alive_fd is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                on_orphaned()

    threading.Thread(target=watch, name="end-with-fork-server", daemon=True).start()
