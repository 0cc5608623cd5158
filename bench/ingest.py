"""Benchmark 2: AWS bulk price list ingest (no-credentials path), file, HTTP and a real link.

Generates synthetic EC2 offer files in the real bulk CSV format (bench.awsgen) at 1x and 4x
size, then, in this process, times the same parse three ways on the 1x file (page cache):

- baseline: substring prefilter + csv.DictReader (bench.reference_aws.parse_prefilter_dictreader),
- before: gpuledger's first line-based parser (bench.reference_aws.parse_offer_csv_lines),
- now: adapters.aws.pricelist.parse_offer_file (DuckDB's CSV reader),

each best of N, interleaved, and checks all three return the same PriceRows. Then streaming
over loopback HTTP from a child server (bench.fileserver): the first fetch path
(ctx.stream_lines -> line parser) against adapters.aws.pricelist.fetch_prices_bulk, plus the
httpx transport alone. Peak RSS comes from child processes that parse the 1x and 4x files (and
fetch the 4x one over HTTP) and nothing else.

`--link RECORDING` measures the user scenario the parse serves instead: AWS fetched without
credentials (the public offer files only) from a replay of RECORDING (a world-scale one, `python
-m bench.world OUT -p aws`) whose bodies go through one link of `--mb-s` MB/s shared by every
connection, in a child process of `--python` (another checkout's interpreter compares its code).
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

from bench.common import Result, best_of, run_worker, say, tmp_root

RSS_LIMIT_MB = 300.0
RSS_FLAT_LIMIT = 1.25  # 4x-size peak over 1x-size peak
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


class FileServer:
    def __init__(self, root: Path) -> None:
        from bench.common import REPO

        self.proc = subprocess.Popen([sys.executable, "-m", "bench.fileserver", str(root)], cwd=REPO,
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def __enter__(self) -> "FileServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ctx(port: int) -> Any:
    from gpuledger.adapters.aws.pricelist import PRICING_BULK_HOST
    from gpuledger.adapters.base import SourceContext

    return SourceContext("aws", mode="replay", replay_urls={PRICING_BULK_HOST: f"http://127.0.0.1:{port}"},
                         http_timeout_s=120)


def http_now(port: int, name: str) -> list[Any]:
    from gpuledger.adapters.aws import pricelist

    ctx = _ctx(port)
    with ctx.http_client() as client:
        rows, _ = pricelist.fetch_prices_bulk(ctx, client, "us-east-1", {"us-east-1": "/" + name}, {})
    return rows


def http_before(port: int, name: str) -> list[Any]:
    """The first fetch path: ctx.stream_lines (httpx iter_lines) into the line parser."""
    from gpuledger.adapters.aws.pricelist import PRICING_BULK_HOST
    from bench.reference_aws import parse_offer_csv_lines

    ctx = _ctx(port)
    with ctx.http_client() as client:
        return list(parse_offer_csv_lines(ctx.stream_lines(client, PRICING_BULK_HOST, "/" + name), "us-east-1"))


def http_transport_only(port: int, name: str) -> int:
    import httpx

    n = 0
    with httpx.Client(timeout=120) as client, client.stream("GET", f"http://127.0.0.1:{port}/{name}") as resp:
        for b in resp.iter_raw():
            n += len(b)
    return n


# -- child-process workers (peak RSS of the parse alone) --------------------------------

def worker(argv: list[str]) -> None:
    from gpuledger.adapters.aws import pricelist

    mode, path = argv[0], Path(argv[1])
    t0 = time.perf_counter()
    if mode == "file":
        rows = pricelist.parse_offer_file(path, "us-east-1")
    else:
        with FileServer(path.parent) as srv:
            t0 = time.perf_counter()
            rows = http_now(srv.port, path.name)
    dt = time.perf_counter() - t0
    print(json.dumps({"rows": len(rows), "seconds": dt, "mb_s": path.stat().st_size / dt / 1e6}))


def run(quick: bool = False, keep: bool = False) -> list[Result]:
    from gpuledger.adapters.aws import pricelist
    from bench.reference_aws import parse_dictreader_all, parse_offer_csv_lines, parse_prefilter_dictreader

    gb1, gb4 = (0.1, 0.4) if quick else (1.0, 4.0)
    reps = 2 if quick else 3
    say(f"[2] AWS bulk CSV ingest: generating {gb1:g} GB and {gb4:g} GB offer files in {tmp_root()}")
    f1, f4 = offer_file(gb1), offer_file(gb4)
    size1 = f1.stat().st_size
    warm_page_cache(f1)
    # Warm-up (imports) on a small slice, then interleave the three parsers.
    pricelist.parse_offer_chunks(iter([f1.read_bytes()[:2_000_000].rsplit(b"\n", 1)[0] + b"\n"]), "us-east-1")
    times: dict[str, float] = {"baseline": float("inf"), "before": float("inf"), "now": float("inf")}
    cpu_now = float("inf")
    outputs: dict[str, list[Any]] = {}
    for _ in range(reps):
        for name, fn in (
            ("baseline", lambda: list(parse_prefilter_dictreader(f1.open(newline=""), "us-east-1"))),
            ("before", lambda: list(parse_offer_csv_lines(f1.open(newline=""), "us-east-1"))),
            ("now", lambda: pricelist.parse_offer_file(f1, "us-east-1")),
        ):
            cpu = time.process_time()
            dt, out = best_of(1, fn)
            if name == "now":
                cpu_now = min(cpu_now, time.process_time() - cpu)
            times[name] = min(times[name], dt)
            outputs[name] = out
    same = outputs["baseline"] == outputs["before"] == outputs["now"]
    if not same:
        raise AssertionError("the parsers disagree on the synthetic file")
    mbs = {k: size1 / v / 1e6 for k, v in times.items()}
    say(f"  file {size1 / 1e9:.2f} GB, {len(outputs['now'])} PriceRows (identical from all parsers); best of {reps}:")
    for k, label in (("baseline", "prefilter + DictReader"), ("before", "first line-based parser"),
                     ("now", "parse_offer_file")):
        say(f"    {label:28s} {times[k]:7.2f} s  {mbs[k]:7.1f} MB/s")
    say(f"    parse_offer_file CPU: {cpu_now / (size1 / 1e9):.2f} s/GB")
    extra: dict[str, Any] = {"bytes": size1, "mb_s": mbs, "rows": len(outputs["now"]),
                             "cpu_s_per_gb": cpu_now / (size1 / 1e9)}
    if not quick:
        dt_all, _ = best_of(1, lambda: list(parse_dictreader_all(f1.open(newline=""), "us-east-1")))
        extra["dictreader_all_mb_s"] = size1 / dt_all / 1e6
        say(f"    {'DictReader over every row':28s} {dt_all:7.2f} s  {size1 / dt_all / 1e6:7.1f} MB/s")
    # Informational: the parse serves a refresh over a network link, which its speed does not bound
    # (the --link line measures that scenario).
    results = [Result("2", f"AWS CSV parse, file in page cache ({size1 / 1e9:.1f} GB)", mbs["now"], "MB/s",
                      None, better="higher", ratio=mbs["now"] / mbs["baseline"],
                      ratio_label="vs prefilter+DictReader",
                      notes=f"baseline {mbs['baseline']:.0f} MB/s, first parser {mbs['before']:.0f} MB/s, "
                            f"{cpu_now / (size1 / 1e9):.2f} CPU s/GB", extra=extra)]

    # The real gpuhunt on the same file, in its own venv.
    from bench.gpuhunt_baseline import compare

    results += compare(f1, rounds=3)

    # Streaming over loopback HTTP.
    with FileServer(f1.parent) as srv:
        http_now(srv.port, f1.name)  # warm-up: connection, server
        t_now = t_before = t_raw = float("inf")
        for _ in range(2):
            t_raw = min(t_raw, best_of(1, lambda: http_transport_only(srv.port, f1.name))[0])
            t_before = min(t_before, best_of(1, lambda: http_before(srv.port, f1.name))[0])
            dt, rows = best_of(1, lambda: http_now(srv.port, f1.name))
            t_now = min(t_now, dt)
        if rows != outputs["now"]:
            raise AssertionError("fetch_prices_bulk over HTTP disagrees with the file parse")
    h = {"now": size1 / t_now / 1e6, "before": size1 / t_before / 1e6, "transport": size1 / t_raw / 1e6}
    say(f"  HTTP (loopback, best of 2): fetch_prices_bulk {h['now']:.0f} MB/s, first stream_lines path "
        f"{h['before']:.0f} MB/s, httpx transport alone (iter_raw, no parsing) {h['transport']:.0f} MB/s")
    results.append(Result("2", "AWS CSV parse, streamed over loopback HTTP", h["now"], "MB/s", None,
                          better="higher", ratio=h["now"] / h["before"], ratio_label="vs first stream_lines path",
                          notes=f"httpx transport alone {h['transport']:.0f} MB/s", extra=h))

    # Peak RSS: child processes doing only the parse.
    rss: dict[str, dict[str, Any]] = {}
    for label, mode, path in (("file 1x", "file", f1), ("file 4x", "file", f4), ("http 4x", "http", f4)):
        doc = run_worker("bench.ingest", ["--worker", mode, str(path)])
        rss[label] = doc
        say(f"  peak RSS {label} ({path.stat().st_size / 1e9:.2f} GB): {doc['child_peak_rss_mb']:.0f} MB "
            f"({doc['mb_s']:.0f} MB/s, {doc['rows']} rows)")
    peak = max(d["child_peak_rss_mb"] for d in rss.values())
    flat = rss["file 4x"]["child_peak_rss_mb"] / rss["file 1x"]["child_peak_rss_mb"]
    results.append(Result("2", "AWS CSV parse peak RSS (1x and 4x, file and HTTP)", peak, "MB", RSS_LIMIT_MB,
                          ratio=flat, ratio_label="4x-size / 1x-size peak",
                          notes=f"flat: 4x/1x must stay <= {RSS_FLAT_LIMIT}",
                          extra={k: v["child_peak_rss_mb"] for k, v in rss.items()}))
    results[-1].extra["flat_limit"] = RSS_FLAT_LIMIT
    if flat > RSS_FLAT_LIMIT:
        results[-1].target = 0.0  # fail the line: memory grows with file size
        results[-1].notes += " -- NOT FLAT"
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
