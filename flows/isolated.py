"""One provider's fetch in a Python process of its own.

The provider tasks run on threads of one process, and threads share one interpreter lock: the
sources whose parse is seconds of CPU at world scale (AWS's price lists and spot history, GCP's
SKU catalog and aggregated lists, Azure's retail feed, Vast.ai's listings) would parse one after
another on one core however many cores the machine has. Such a source's fetch and parse run in
a child process, which hands back the same FetchResult a thread would have returned. The
children are forked from the refresh's fork server (gpuledger/forkserver.py), a fresh
single-threaded process that imports gpuledger once (a fork of the refresh itself, holding
Prefect's threads and sockets, is unsafe; a fresh interpreter per child pays the imports, about
1.5 s of CPU, each time).

The child is killed when the timeout passes, when this process's main thread has ended (a
signal ended the refresh, and the interpreter waits for its worker threads before it exits), or
when this process dies (it watches its parent and exits with it), so a stopped refresh neither
waits for a fetch nor leaves one running.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any, Callable

from gpuledger import forkserver
from gpuledger.adapters.base import SourceError

RESULT_POLL_S = 0.2  # how often the waiting thread looks at the child while waiting


class ChildCrashed(RuntimeError):
    """The child process ended without handing back a result (killed, out of memory)."""


def _child(fetch: Callable[[Any], Any], plan: Any, conn: Any, handed: forkserver.Handover) -> None:
    forkserver.begin_child(handed, on_orphaned=lambda: os._exit(1))
    try:
        outcome: tuple[str, Any] = ("ok", fetch(plan))
    except BaseException as err:  # noqa: BLE001 - handed to the parent, which raises it
        outcome = ("error", err)
    try:
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        if outcome[0] == "error":
            pickle.loads(payload)  # an exception whose __init__ takes other arguments pickles but does not load
    except Exception as err:  # noqa: BLE001 - an exception that cannot travel: its type and text are kept
        raised = outcome[1] if outcome[0] == "error" else err
        payload = pickle.dumps(("error", SourceError(f"{type(raised).__name__}: {raised}")))
    conn.send_bytes(payload)
    conn.close()


def fetch_in_child(fetch: Callable[[Any], Any], plan: Any, timeout_s: float,
                   on_timeout: Callable[[], BaseException]) -> Any:
    """`fetch(plan)` in a fresh child process; its result, or its exception raised here.

    `fetch` must be a module-level function (the child imports it by name). After `timeout_s`
    the child is killed and `on_timeout()` is raised."""
    mp = forkserver.context()
    receive, send = mp.Pipe(duplex=False)
    proc = mp.Process(target=_child, args=(fetch, plan, send, forkserver.handover()),
                      name=f"fetch-{getattr(plan, 'provider', 'source')}", daemon=True)
    forkserver.start(proc)
    send.close()  # the child holds the only sending end: its death closes the pipe
    deadline = time.monotonic() + timeout_s
    try:
        while not receive.poll(RESULT_POLL_S):
            if time.monotonic() > deadline:
                raise on_timeout()
            if not threading.main_thread().is_alive():  # the interpreter is exiting (a signal ended the refresh)
                raise ChildCrashed(f"the fetch process of {getattr(plan, 'provider', 'the source')} was "
                                   "stopped: the refresh is ending")
        try:
            payload = receive.recv_bytes()
        except EOFError:
            code = forkserver.wait(proc, 5)
            raise ChildCrashed(f"the fetch process of {getattr(plan, 'provider', 'the source')} ended "
                               f"without a result (exit code {code})") from None
        forkserver.wait(proc, 30)
    finally:
        receive.close()
        if forkserver.wait(proc, 0) is None:
            proc.kill()
            forkserver.wait(proc, None)
    state, value = pickle.loads(payload)
    if state == "error":
        raise value
    return value
