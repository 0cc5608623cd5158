"""`python held_refresh.py FOLDER ARGS...`: the `gpuledger` command line (ARGS), with the write
window held open inside the first provider's merge.

Its load_outcome calls get `on_offers_merged`: the first provider's merge, inside its transaction
right after its offers were replaced, writes FOLDER/merging ("<pid> <provider>", whole or absent)
and waits until FOLDER/release exists (at most 120 s). test_process_faults.py kills the process
there, or runs readers and a second refresh against the held window.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Callable


def hold_first_merge(folder: Path, timeout_s: float = 120.0) -> Callable[[str], None]:
    held = False

    def hold(provider: str) -> None:
        nonlocal held
        if held:
            return
        held = True
        (folder / "merging.part").write_text(f"{os.getpid()} {provider}")
        os.replace(folder / "merging.part", folder / "merging")  # the test polls for it
        deadline = time.monotonic() + timeout_s
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    return hold


def main() -> None:
    folder, args = Path(sys.argv[1]), sys.argv[2:]
    from gpuledger.flows import pipeline
    from gpuledger.flows.cli import app

    pipeline.load_outcome = functools.partial(pipeline.load_outcome, on_offers_merged=hold_first_merge(folder))
    app(args, prog_name="gpuledger")


if __name__ == "__main__":
    main()
