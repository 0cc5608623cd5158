"""Benchmark 2: AWS without credentials, the scenario its offer-file parse serves.

The line: AWS fetched without credentials (the public offer files only) from the world replay's AWS
(`python -m bench.world OUT -p aws`; the small world with --quick) whose bodies go through one link of
LINK_MB_S MB/s shared by every connection, as a nightly run's download would; judged against the
link's own transfer time of the same bytes. Beside it, informational: the parse's CPU seconds per GB
on a generated offer file in the real format (bench.awsgen), and the peak RSS of child processes that
parse the 1x and 4x files (it must stay flat with the file's size).

`--link RECORDING --python A --python B` runs the link scenario for other interpreters (another
checkout's), in turn, to compare their code side by side.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from bench.common import Result, run_worker, say, tmp_root

RSS_LIMIT_MB = 300.0
RSS_FLAT_LIMIT = 1.25  # 4x-size peak over 1x-size peak
LINK_MB_S = 50.0  # a realistic link for a nightly run (issue 41)
LINK_OVERHEAD_TARGET = 1.1  # the refresh within 10 % of the link's own transfer time
READ_BYTES = 4 << 20


def file_chunks(path: Path, size: int = READ_BYTES) -> Iterator[bytes]:
    with path.open("rb") as f:
        while True:
            b = f.read(size)
            if not b:
                return
            yield b


def offer_file(gb: float) -> Path:
    """The synthetic offer file of that size, generated once per bench tmp folder."""
    from bench.awsgen import GENERATOR_VERSION, write_offer_file

    path = tmp_root() / f"AmazonEC2_synthetic_{gb:g}GB.csv"
    done = path.with_suffix(".json")
    if path.exists() and done.exists() and json.loads(done.read_text()).get("version") == GENERATOR_VERSION:
        return path
    free = shutil.disk_usage(path.parent).free
    if free < gb * 1e9 * 1.5:
        raise RuntimeError(f"not enough disk in {path.parent}: {free / 1e9:.1f} GB free, {gb:g} GB needed")
    t0 = time.perf_counter()
    info = write_offer_file(path, int(gb * 1e9))
    info["generate_s"] = round(time.perf_counter() - t0, 1)
    done.write_text(json.dumps(info))
    say(f"  generated {path.name}: {info['bytes'] / 1e9:.2f} GB, {info['rows']:,} rows, "
        f"{100 * info['on_demand'] / info['rows']:.1f}% OnDemand, in {info['generate_s']} s")
    return path


def warm_page_cache(path: Path) -> None:
    for _ in file_chunks(path, 8 << 20):
        pass


def worker(argv: list[str]) -> None:
    from gpuledger.adapters.aws import pricelist

    path = Path(argv[1])
    t0 = time.perf_counter()
    rows = pricelist.parse_offer_chunks(file_chunks(path), "us-east-1")
    dt = time.perf_counter() - t0
    print(json.dumps({"rows": len(rows), "seconds": dt, "mb_s": path.stat().st_size / dt / 1e6}))


def run(quick: bool = False, keep: bool = False) -> list[Result]:
    from gpuledger.adapters.aws import pricelist
    from bench.world_lines import world_folder

    world, _, _ = world_folder("small" if quick else "world", ["aws"])
    say(f"[2] AWS without credentials over a {LINK_MB_S:g} MB/s link, from {world}")
    doc = link_refresh(world, LINK_MB_S, sys.executable)
    floor = doc["mb_sent"] / LINK_MB_S
    say(f"  {doc['offers']:,} offers, {doc['mb_sent']:,.0f} MB in {doc['wall_s']:.1f} s (the link alone "
        f"{floor:.1f} s), {doc['cpu_s']:.1f} s of CPU")
    # Judged at world scale only: a few tens of MB take a second on the link, less than a refresh's start-up.
    results = [Result("2", f"AWS without credentials over a {LINK_MB_S:g} MB/s link ({doc['mb_sent']:,.0f} MB"
                      f"{'; judged at world scale only' if quick else ''})",
                      doc["wall_s"], "s", None, ratio=doc["wall_s"] / floor, ratio_label="/ the link's transfer time",
                      ratio_target=None if quick else LINK_OVERHEAD_TARGET, better_ratio="lower",
                      notes=f"CPU {doc['cpu_s']:.1f} s, {doc['offers']:,} offers", extra=doc)]
    gb1, gb4 = (0.1, 0.4) if quick else (1.0, 4.0)
    f1, f4 = offer_file(gb1), offer_file(gb4)
    warm_page_cache(f1)
    pricelist.parse_offer_chunks(file_chunks(f1), "us-east-1")  # warm-up (imports)
    cpu = time.process_time()
    rows = pricelist.parse_offer_chunks(file_chunks(f1), "us-east-1")
    cpu_per_gb = (time.process_time() - cpu) / (f1.stat().st_size / 1e9)
    say(f"  parse: {cpu_per_gb:.2f} CPU s/GB ({len(rows):,} rows of {f1.stat().st_size / 1e9:.1f} GB)")
    rss = {label: run_worker("bench.ingest", ["--worker", "file", str(path)])["child_peak_rss_mb"]
           for label, path in (("1x", f1), ("4x", f4))}
    flat = rss["4x"] / rss["1x"]
    results.append(Result("2", f"offer-file parse peak RSS, {gb1:g} and {gb4:g} GB files", max(rss.values()), "MB",
                          RSS_LIMIT_MB, ratio=flat, ratio_label="4x-size / 1x-size peak", ratio_target=RSS_FLAT_LIMIT,
                          better_ratio="lower", notes=f"parse {cpu_per_gb:.2f} CPU s/GB (informational)",
                          extra={"rss_mb": rss, "cpu_s_per_gb": cpu_per_gb}))
    if not keep:
        for p in (f1, f4):
            p.unlink(missing_ok=True)
            p.with_suffix(".json").unlink(missing_ok=True)
    return results


# -- the user scenario: a refresh without credentials over a real link ----------------------------

# Runs in a child of the interpreter compared: only what every version of the adapter has.
_LINK_CHILD = """
import hashlib, json, sys, time
from gpuledger.adapters import aws
from gpuledger.adapters.base import SourceContext

ctx = SourceContext("aws", mode="replay", replay_urls=json.loads(sys.argv[1]), http_timeout_s=600,
                    settings={"aws_ec2_api": "off", "aws_price_source": "bulk"})
wall, cpu = time.perf_counter(), time.process_time()
batch = aws.fetch(ctx)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
offers = sorted(repr((o.region, o.instance_type, o.purchase_option, o.price_per_hour)) for o in batch.offers)
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "offers": len(offers),
                  "offers_md5": hashlib.md5("|".join(offers).encode()).hexdigest()}))
"""


class Link:
    """One network link shared by every connection: a body chunk leaves when the link has sent
    the bytes before it at `bytes_per_s`."""

    def __init__(self, bytes_per_s: float) -> None:
        import threading

        self.bytes_per_s, self.free_at, self.lock = bytes_per_s, 0.0, threading.Lock()

    def send(self, n: int) -> None:
        with self.lock:
            now = time.monotonic()
            self.free_at = max(now, self.free_at) + n / self.bytes_per_s
            wait = self.free_at - now
        time.sleep(wait)


def link_refresh(recording: Path, mb_s: float, python: str) -> dict[str, Any]:
    """AWS without credentials from a replay of `recording` whose streamed bodies share one link."""
    from dataclasses import dataclass

    from gpuledger.adapters.replay import FileBody, ReplayServer

    link = Link(mb_s * 1e6)

    @dataclass(frozen=True)
    class LinkedBody(FileBody):
        def chunks(self, size: int = 1 << 16) -> Iterator[bytes]:
            for chunk in super().chunks(size):
                link.send(len(chunk))
                yield chunk

    def through_link(host: str, req: Any, ex: Any) -> Any:
        payload = ex.payload() if ex is not None else None
        return (ex.status, dict(ex.headers), LinkedBody(payload.path)) if isinstance(payload, FileBody) else None

    with ReplayServer(recording, providers=["aws"], hook=through_link) as server:
        out = subprocess.run([python, "-c", _LINK_CHILD, json.dumps(server.endpoints())], capture_output=True,
                             text=True, check=False)
        sent = sum(server.bytes_sent.values())
    if out.returncode != 0:
        raise RuntimeError(f"{python}: the fetch failed:\n{out.stderr[-3000:]}")
    doc = json.loads(out.stdout.splitlines()[-1])
    doc["mb_sent"] = sent / 1e6
    return doc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "FILE"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    ap.add_argument("--link", type=Path, metavar="RECORDING", help="time AWS without credentials over a link")
    ap.add_argument("--mb-s", type=float, default=50.0, help="the link's speed (--link)")
    ap.add_argument("--python", action="append", help="interpreters to compare (--link), in turn; repeatable")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    if args.link:
        for _ in range(args.rounds):
            for python in args.python or [sys.executable]:
                doc = link_refresh(args.link, args.mb_s, python)
                print(json.dumps({"python": python, **doc}), flush=True)
        return
    from bench.common import table

    print(table(run(args.quick, args.keep)))


if __name__ == "__main__":
    main()
