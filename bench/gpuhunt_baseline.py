"""The real gpuhunt as the AWS parse baseline (two lines of benchmark 2).

gpuhunt 0.1.34 (`gpuhunt[aws]`) is installed into a throwaway venv in the bench tmp folder (kept
there for the next run) and its own `AWSProvider.get()` parses the same offer file as
`adapters.aws.pricelist.parse_offer_file`. Both run in child processes, each timing only its parse
(wall and CPU time, file in the page cache), in interleaved rounds whose order alternates; the
lines judge the medians. gpuhunt's `get()` also asks EC2 for GPU details and spot prices; the
worker replaces those two network steps with no-ops, so what is timed is gpuhunt's parse of
the file and the catalog items it builds from it, nothing else.

    python -m bench.gpuhunt_baseline FILE [--rounds 3]   # one comparison on an offer file
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

from bench.common import REPO, Result, median, say, tmp_root

GPUHUNT_REQUIREMENT = "gpuhunt[aws]==0.1.34"
WALL_RATIO_TARGET = 4.0  # gpuhunt wall time / gpuledger wall time, on an idle machine
CPU_RATIO_TARGET = 3.0

_GPUHUNT_WORKER = """
import json, sys, time
from gpuhunt.providers import aws

# Network steps of AWSProvider.get(), outside the parse being compared.
aws._get_ec2_api_regions = lambda: set()
aws.AWSProvider._fill_gpu_details = lambda self, offers: None
aws.AWSProvider._with_spot_offers = lambda self, offers: offers
provider = aws.AWSProvider(cache_path=sys.argv[1])
wall, cpu = time.perf_counter(), time.process_time()
items = provider.get()
print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "rows": len(items)}))
"""


class BaselineUnavailable(RuntimeError):
    """gpuhunt could not be installed here (no package index, no network)."""


def gpuhunt_python() -> Path:
    """The interpreter of a venv holding gpuhunt 0.1.34, created on first use."""
    root = tmp_root() / "gpuhunt-0.1.34-venv"
    python = root / "bin" / "python"
    done = root / ".installed"
    if done.exists():
        return python
    say(f"  installing {GPUHUNT_REQUIREMENT} into {root}")
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          GPUHUNT_REQUIREMENT], capture_output=True, text=True, timeout=900)
    if pip.returncode != 0:
        tail = (pip.stderr or pip.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BaselineUnavailable(f"pip install {GPUHUNT_REQUIREMENT} failed: {tail[0]}")
    done.write_text(GPUHUNT_REQUIREMENT + "\n")
    return python


def _child(cmd: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # never a real account
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[1:3]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_gpuhunt(python: Path, offer_file: Path) -> dict[str, Any]:
    return _child([str(python), "-c", _GPUHUNT_WORKER, str(offer_file)])


def time_gpuledger(offer_file: Path) -> dict[str, Any]:
    return _child([sys.executable, "-m", "bench.gpuhunt_baseline", "--gpuledger-worker", str(offer_file)])


def gpuledger_worker(offer_file: Path) -> None:
    from gpuledger.adapters.aws import pricelist

    with offer_file.open("rb") as f:  # warm-up: the parser's lazy imports are not part of the parse
        head = f.read(2_000_000).rsplit(b"\n", 1)[0] + b"\n"
    pricelist.parse_offer_chunks(iter([head]), "us-east-1")
    wall, cpu = time.perf_counter(), time.process_time()
    rows = pricelist.parse_offer_file(offer_file, "us-east-1")
    print(json.dumps({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "rows": len(rows)}))


def compare(offer_file: Path, rounds: int = 3) -> list[Result]:
    """gpuledger's AWS parse against the real gpuhunt's on one file: medians of `rounds`."""
    name = f"AWS CSV parse vs real gpuhunt 0.1.34 ({offer_file.stat().st_size / 1e9:.1f} GB)"
    try:
        python = gpuhunt_python()
    except (BaselineUnavailable, OSError, subprocess.TimeoutExpired) as err:
        say(f"  gpuhunt baseline not measured: {err}")
        return [Result("2", name + ", wall", float("nan"), "x", None, ratio=0.0, ratio_label="not measured",
                       ratio_target=WALL_RATIO_TARGET, notes=f"not measured: {err}")]
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict[str, Any]]] = {"gpuhunt": [], "gpuledger": []}
    for i in range(rounds):
        order = ("gpuhunt", "gpuledger") if i % 2 == 0 else ("gpuledger", "gpuhunt")
        for who in order:
            doc = time_gpuhunt(python, offer_file) if who == "gpuhunt" else time_gpuledger(offer_file)
            runs[who].append(doc)
        say(f"    round {i + 1}: gpuhunt {runs['gpuhunt'][-1]['wall_s']:.2f} s wall "
            f"({runs['gpuhunt'][-1]['cpu_s']:.2f} s CPU), gpuledger {runs['gpuledger'][-1]['wall_s']:.2f} s wall "
            f"({runs['gpuledger'][-1]['cpu_s']:.2f} s CPU), load {os.getloadavg()[0]:.1f}")
    load_end = os.getloadavg()[0]
    wall = {k: median([d["wall_s"] for d in v]) for k, v in runs.items()}
    cpu = {k: median([d["cpu_s"] for d in v]) for k, v in runs.items()}
    rows = {k: v[-1]["rows"] for k, v in runs.items()}
    loads = f"load average {load_start:.1f} at start, {load_end:.1f} at end"
    say(f"  real gpuhunt, median of {rounds}: gpuhunt {wall['gpuhunt']:.2f} s wall / {cpu['gpuhunt']:.2f} s CPU "
        f"({rows['gpuhunt']} catalog items), parse_offer_chunks {wall['gpuledger']:.2f} s / {cpu['gpuledger']:.2f} s "
        f"({rows['gpuledger']} PriceRows); {loads}")
    extra = {"wall_s": wall, "cpu_s": cpu, "rows": rows, "rounds": runs, "load_start": load_start,
             "load_end": load_end}
    return [
        Result("2", name + ", wall", wall["gpuledger"], "s", None, ratio=wall["gpuhunt"] / wall["gpuledger"],
               ratio_label="gpuhunt wall / ours", ratio_target=WALL_RATIO_TARGET,
               notes=f"gpuhunt {wall['gpuhunt']:.2f} s; {loads} (target is for an idle machine)", extra=extra),
        Result("2", name + ", CPU", cpu["gpuledger"], "s", None, ratio=cpu["gpuhunt"] / cpu["gpuledger"],
               ratio_label="gpuhunt CPU / ours", ratio_target=CPU_RATIO_TARGET,
               notes=f"gpuhunt {cpu['gpuhunt']:.2f} s CPU", extra=extra),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.gpuhunt_baseline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpuledger-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.gpuledger_worker:
        gpuledger_worker(args.file)
        return
    from bench.common import table

    print(table(compare(args.file, args.rounds)))


if __name__ == "__main__":
    main()
