"""Publishing the warehouse: a refresh writes a working copy; readers keep the file they opened.

DuckDB lets one process write a file or many read it, never both: a refresh merges into a copy
(`<db>.refresh-work`) and renames it over the published path (fsynced, atomic on POSIX), so a refresh
killed at any moment leaves the old snapshot or the new one, never a torn file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class PublishError(Exception):
    """The working copy cannot be made or published; the published file is unchanged."""


def wal_path(path: Path) -> Path:
    return Path(str(path) + ".wal")


def discard(work: Path) -> None:
    """Remove a working copy (and its WAL) that will not be published."""
    for p in (work, wal_path(work)):
        p.unlink(missing_ok=True)


def start_working_copy(path: Path) -> Path:
    """A private copy of the published warehouse (none yet: an empty one) for one refresh to write;
    a copy a killed refresh left is discarded first (the caller holds the refresh lock)."""
    work = Path(str(path) + ".refresh-work")
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
    """Make the closed working copy the published warehouse, atomically and durably; one with a WAL
    beside it (not fully checkpointed, its commits would not travel) is refused."""
    if wal_path(work).exists():
        raise PublishError(f"{work.name} still has a write-ahead log (its last checkpoint failed)")
    try:
        _fsync(work)
        # A WAL beside the published file belongs to the file being replaced: the copy holds its commits.
        wal_path(path).unlink(missing_ok=True)
        os.replace(work, path)
        _fsync(path.parent, directory=True)
    except OSError as err:
        raise PublishError(f"publishing {work.name} failed: {err.strerror or err}") from err
