"""Publishing the warehouse: a refresh writes a working copy; readers keep the file they opened.

DuckDB lets one process write a database file or many processes read it, never both: a
`read_only=True` connection held by a notebook makes a writer's open fail, and a writer's
lock shuts out read-only openers. So a refresh never writes the path readers open. Under the
refresh lock it:

1. copies the published file to a working file beside it (`<db>.refresh-work`; a WAL left by
   an older writer is copied along and replayed into the copy);
2. merges into the working file, then checkpoints and closes it, so no WAL is left;
3. flushes the working file to disk and renames it over the published path (`os.replace`,
   atomic on POSIX), then flushes the folder so the rename itself survives a power cut.

The rename is the only step that touches the published path, so a refresh killed at any
moment (`kill -9` included) leaves either the old snapshot or the new one there, never a torn
file. A reader that holds a connection keeps reading the snapshot it opened (the old file lives
on, unlinked, until its last reader closes it); a reader that connects after the rename sees
the new one. Inside one process DuckDB hands a new connection to a path the database instance
an older, still open connection already holds, so a process sees the new snapshot once all its
connections to the old one are closed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

WORK_SUFFIX = ".refresh-work"


class PublishError(Exception):
    """The working copy cannot be made or published; the published file is unchanged."""


def work_path(path: Path) -> Path:
    return Path(str(path) + WORK_SUFFIX)


def wal_path(path: Path) -> Path:
    return Path(str(path) + ".wal")


def discard(work: Path) -> None:
    """Remove a working copy (and its WAL) that will not be published."""
    for p in (work, wal_path(work)):
        try:
            p.unlink()
        except FileNotFoundError:
            pass


def start_working_copy(path: Path) -> Path:
    """A private copy of the published warehouse for one refresh to write; a copy a killed
    refresh left behind is discarded first (the caller holds the refresh lock, so no other
    refresh is writing it). No published file yet: the working file starts empty."""
    work = work_path(path)
    discard(work)
    if path.exists():
        try:
            shutil.copyfile(path, work)
            if wal_path(path).exists():
                shutil.copyfile(wal_path(path), wal_path(work))
        except OSError as err:
            discard(work)
            raise PublishError(f"copying it to {work.name} failed: {err.strerror or err}") from err
    return work


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(work: Path, path: Path) -> None:
    """Make the closed working copy the published warehouse, atomically and durably.

    A working copy with a WAL beside it was not fully checkpointed (its commits would not
    travel with the rename): it is refused, and the published file stays as it was.
    """
    if wal_path(work).exists():
        raise PublishError(f"{work.name} still has a write-ahead log (its last checkpoint failed)")
    try:
        _fsync(work)
        # A WAL beside the published file belongs to the file being replaced (an older writer was
        # killed before its checkpoint); the working copy already holds its commits.
        if wal_path(path).exists():
            wal_path(path).unlink()
        os.replace(work, path)
        _fsync(path.parent, directory=True)
    except OSError as err:
        raise PublishError(f"publishing {work.name} failed: {err.strerror or err}") from err
