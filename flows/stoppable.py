"""A DuckDB query, with the fetching and printing of its rows, stopped by a time limit or Ctrl-C: DuckDB holds
its thread until a query ends, so the work runs in a worker thread; on timeout or SIGINT the main thread calls
`connection.interrupt()` and sets the event the work checks between batches."""

from __future__ import annotations

import signal
import threading
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

import duckdb

from gpuledger.flows.stopping import handling

T = TypeVar("T")

EXIT_CANCELLED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C
EXIT_TIMED_OUT = 124  # what timeout(1) exits with
# After interrupt(), how long to wait for DuckDB to unwind before leaving the worker behind.
UNWIND_S = 10.0


class QueryStopped(Exception):
    """The query was stopped before it finished; `exit_code` says how."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_stoppable(con: duckdb.DuckDBPyConnection, work: Callable[[threading.Event], T],
                  timeout_s: float | None) -> T:
    """`work(stopping)` (queries on `con`) in a worker thread; QueryStopped after `timeout_s` seconds (None or 0:
    no limit) or on SIGINT, with the query interrupted and `stopping` set. Errors of `work` are raised here."""
    done: Future[T] = Future()
    stopping = threading.Event()
    stopped: list[QueryStopped] = []

    def run() -> None:
        try:
            done.set_result(work(stopping))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread, raised there
            done.set_exception(err)

    def stop(reason: QueryStopped) -> None:
        if not stopped:
            stopped.append(reason)
        stopping.set()
        con.interrupt()

    def on_sigint(signum: int, frame: Any) -> None:
        stop(QueryStopped("the query was cancelled (Ctrl-C); the warehouse is unchanged", EXIT_CANCELLED))

    worker = threading.Thread(target=run, name="gpuledger-sql", daemon=True)
    with handling((signal.SIGINT,), on_sigint):
        worker.start()
        worker.join(timeout_s or None)
        if worker.is_alive():
            stop(QueryStopped(f"the query ran longer than {timeout_s:g} s (--timeout) and was stopped",
                              EXIT_TIMED_OUT))
        if stopped:
            worker.join(UNWIND_S)  # a worker that does not unwind is a daemon: it ends with the process
    if stopped:
        raise stopped[0]
    return done.result()
