"""Benchmark 6: peak RSS of a full replayed refresh (`gpuledger refresh --replay`).

Runs the real command in a child process on a fresh warehouse. The judged figure is the peak of
the process tree's summed PSS (the refresh plus the Prefect API server, the fetch processes and
the crawler/Chromium children it starts), sampled from /proc every 50 ms: the heavy sources
parse in processes of their own, so the refresh process's own peak RSS (ru_maxrss from wait4,
shown beside it) is only a part. PSS counts a page shared by several processes once.
The baseline, in the same run: a child that only imports the refresh and the CLI.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from bench.common import Result, peak_parts_line, run_measured, say, tmp_root

TARGET_MB = 1024.0


def run(quick: bool = False) -> list[Result]:
    say("[6] memory: gpuledger refresh --replay")
    work = tmp_root() / "refresh"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ, GPULEDGER_DB=str(work / "ledger.duckdb"))
    # The newcomer's refresh starts Prefect's ephemeral server itself, whichever server the
    # other benchmarks share.
    env.pop("PREFECT_API_URL", None)
    exe = str(Path(sys.executable).with_name("gpuledger"))
    cmd = [exe, "refresh", "--replay"] if Path(exe).exists() else \
        [sys.executable, "-m", "gpuledger.flows.cli", "refresh", "--replay"]
    floor = run_measured([sys.executable, "-c", "import gpuledger.flows.cli, gpuledger.flows.refresh"], env=env)
    res = run_measured(cmd, env=env, timeout=900)
    shutil.rmtree(work, ignore_errors=True)
    if res["returncode"] != 0:
        raise RuntimeError(f"gpuledger refresh --replay failed ({res['returncode']}):\n{res['stderr'][-2000:]}")
    say(f"  refresh: {res['wall_s']:.1f} s, peak PSS of its process tree {res['peak_tree_pss_mb']:.0f} MB (the refresh "
        f"process's own peak RSS {res['peak_rss_mb']:.0f} MB; summed RSS {res['peak_tree_rss_mb']:.0f} MB); importing "
        f"gpuledger.flows.cli + gpuledger.flows.refresh alone: {floor['peak_tree_pss_mb']:.0f} MB PSS")
    say(f"  {peak_parts_line(res)}")
    return [Result("6", "peak memory, gpuledger refresh --replay: PSS summed over the refresh and its child processes "
                        "(Prefect's server, fetch processes, crawlers, Chromium)", res["peak_tree_pss_mb"],
                   "MB", TARGET_MB, ratio=res["peak_tree_pss_mb"] / floor["peak_tree_pss_mb"],
                   ratio_label="/ import-only process (lower is better)",
                   notes=f"the refresh process alone: {res['peak_rss_mb']:.0f} MB RSS; summed RSS of the tree "
                         f"{res['peak_tree_rss_mb']:.0f} MB; wall {res['wall_s']:.1f} s",
                   extra={"peak_rss_mb": res["peak_rss_mb"], "peak_tree_rss_mb": res["peak_tree_rss_mb"],
                          "peak_tree_pss_mb": res["peak_tree_pss_mb"], "import_only_mb": floor["peak_tree_pss_mb"],
                          "wall_s": res["wall_s"]})]
