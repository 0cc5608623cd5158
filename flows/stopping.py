"""Stopping a refresh on SIGTERM or SIGINT: at once while fetching (RefreshInterrupted); inside the write
window only noted, so the merge in progress finishes, no later one starts and the rest stay pending."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class RefreshInterrupted(Exception):
    """The refresh was stopped by a signal; `signum` says which."""

    def __init__(self, signum: int, during: str) -> None:
        self.signum = signum
        self.exit_code = 128 + signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM
        super().__init__(f"refresh interrupted by {signal.Signals(signum).name} {during}")


@dataclass
class Stopper:
    """What the signal handlers set, and what the write window asks between merges."""

    signum: int | None = None
    in_window: bool = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        if not self.in_window:
            raise RefreshInterrupted(signum, "while fetching")


def _not_interrupted(record: logging.LogRecord) -> bool:
    from gpuledger.adapters.registry import UnknownProviderError
    from gpuledger.warehouse.store import WarehouseError

    said = (RefreshInterrupted, WarehouseError, UnknownProviderError)  # each says itself in one line
    return not (record.exc_info and isinstance(record.exc_info[1], said))


def stop_reported_once() -> None:
    """Drop the flow engine's tracebacks of a RefreshInterrupted and of a refresh refused in one line (another one
    running, a warehouse it cannot use, an unknown provider): the command line says each in one line, a served or
    worker-run flow's state does (`Finished in state Failed('... RefreshRunningError: another refresh of ...')`).
    Idempotent."""
    logging.getLogger("prefect.flow_runs").addFilter(_not_interrupted)


@contextmanager
def handling(signals: tuple[int, ...], handler: Any) -> Iterator[None]:
    """`handler` for `signals` within the block (only the main thread can set one: elsewhere nothing is set);
    the handlers before put back after (one not set from Python, which signal.signal gave as None, as the
    default)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, signal.SIG_DFL if before is None else before)


@contextmanager
def stop_on_signals() -> Iterator[Stopper]:
    stopper = Stopper()
    with handling(SIGNALS, stopper._handle):
        yield stopper
