"""Live progress of a refresh: `report` sends events on the `gpuledger.progress` logger, silent unless a
`RefreshProgress` (the command line's rich bar) listens."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

PROGRESS_LOGGER = logging.getLogger("gpuledger.progress")
SHOWN_PENDING = 3  # providers named while fetching; the rest are counted


def report(event: str, provider: str | None = None, total: int | None = None) -> None:
    """Tell a watching RefreshProgress that `event` (fetched, failed, merging, merged) happened to `provider`;
    "merging" says how many saved results the merge takes (earlier refreshes' too, or only those on --resume)."""
    PROGRESS_LOGGER.debug("%s %s", event, provider or "", extra={"refresh_event": (event, provider, total)})


class RefreshProgress(logging.Handler):
    """A progress bar over `providers` for the length of a `with` block, fed by `report`."""

    def __init__(self, console: Console, providers: Sequence[str]) -> None:
        super().__init__(logging.DEBUG)
        self.providers = list(providers)
        self._done: set[str] = set()
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=20),
                                  MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True)
        self._task = self._progress.add_task("starting Prefect and the providers' clients", total=len(self.providers))
        self._saved: tuple[int, bool] = (PROGRESS_LOGGER.level, PROGRESS_LOGGER.propagate)

    def state(self) -> tuple[str, int, int]:
        """(what the bar says, steps done, steps in all)."""
        task = self._progress.tasks[0]
        return task.description, int(task.completed), int(task.total or 0)

    def __enter__(self) -> RefreshProgress:
        PROGRESS_LOGGER.setLevel(logging.DEBUG)
        PROGRESS_LOGGER.propagate = False  # the events are for this display, not the log
        PROGRESS_LOGGER.addHandler(self)
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()
        PROGRESS_LOGGER.removeHandler(self)
        PROGRESS_LOGGER.setLevel(self._saved[0])
        PROGRESS_LOGGER.propagate = self._saved[1]

    def emit(self, record: logging.LogRecord) -> None:
        event, provider, total = getattr(record, "refresh_event", (None, None, None))  # Handler.handle locks
        if event in ("fetched", "failed") and provider:
            self._done.add(provider)
            pending = [p for p in self.providers if p not in self._done]
            shown = ", ".join(pending[:SHOWN_PENDING]) + (f" and {len(pending) - SHOWN_PENDING} more"
                                                          if len(pending) > SHOWN_PENDING else "")
            description = f"fetching, waiting for {shown}" if pending else "fetched every provider"
            self._progress.update(self._task, completed=len(self._done), description=description)
        elif event == "merging":
            self._progress.update(self._task, completed=0, total=total, description="merging into the warehouse")
        elif event == "merged" and provider:
            self._progress.update(self._task, advance=1, description=f"merged {provider}")
