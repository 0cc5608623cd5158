"""`python held_refresh.py FOLDER ARGS...`: the `gpuledger` command line (ARGS), with the write
window held open inside the providers' merges.

Its load_outcome calls get `on_offers_merged`: each merge, inside its transaction right after its
offers were replaced, adds "<pid> <provider>" to FOLDER/merging (whole or absent) and waits until
FOLDER/release exists (at most 120 s). test_process_faults.py kills the process there, stops it
with a signal, or runs readers and a second refresh against the held window.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable


def hold_every_merge(folder: Path, timeout_s: float = 120.0) -> Callable[[str], None]:
    """The hook: each merge that reaches it adds "<pid> <provider>" as a line of FOLDER/merging
    (the file rewritten whole) and waits there for FOLDER/release. The window merges one
    provider at a time, so the first is held and the others wait."""
    lock = threading.Lock()
    held: list[str] = []

    def hold(provider: str) -> None:
        with lock:
            held.append(f"{os.getpid()} {provider}")
            (folder / "merging.part").write_text("\n".join(held))
            os.replace(folder / "merging.part", folder / "merging")  # the test polls for it
        deadline = time.monotonic() + timeout_s
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    return hold


def main() -> None:
    folder, args = Path(sys.argv[1]), sys.argv[2:]
    from gpuledger.flows.cli import app
    from gpuledger.warehouse import store

    real, hold = store.load_outcome, hold_every_merge(folder)

    def held(*args: Any, on_offers_merged: Any = None, **kwargs: Any) -> Any:
        return real(*args, on_offers_merged=hold, **kwargs)

    store.load_outcome = held
    app(args, prog_name="gpuledger")


if __name__ == "__main__":
    main()
