"""Benchmark 1: a whole refresh on the world replay (bench/world), and the warehouse it leaves.

The world replay is generated once into the bench tmp folder and kept there, under a name made
from a hash of the generators' sources, the bundled recordings' manifests and the scale, so a
later run reuses it until a generator changes. `--quick` uses the small scale. Every refresh is
the real command, `gpuledger refresh --replay --replay-endpoints FILE`, in a child process,
sent to a replay server in a process of its own (bench/replay_serve.py): the refresh's peak RSS
is then the refresh's, not the recording's.

Lines: the full refresh's wall time, and its ratio to the critical path (the slowest providers
of that refresh refreshed alone, in the same run; at full scale 5 back-to-back pairs of the full
refresh and the slowest alone, the median of their ratios judged; none of these runs is
memory-sampled); the first full refresh's peak memory (sampled) against an import-only
process; what a reader waits for while a second refresh publishes, against copying the
warehouse file; recommend() p95 with the time model against a plain select of the offers it
ranks; the comparison page's filter and sort in Chromium against sorting as many numbers; the
bytes fetched per provider against its source's answers fetched once (bench/sources.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from bench.common import (
    REPO, TREE_SAMPLE_S, Result, median, peak_parts_line, percentile, prefect_api, run_measured, say, tmp_root,
)

API_URL: list[str] = []  # the benchmark's Prefect API server while run() runs
WALL_TARGET_S = 90.0
CRITICAL_PATH_TARGET = 1.5
PAIRS = 5  # full refresh and critical provider alone, at full scale (one with --quick)
RSS_TARGET_MB = 1536.0
WRITE_WINDOW_TARGET_S = 2.0
RECOMMEND_P95_TARGET_MS = 50.0
PAGE_TARGET_MS = 100.0
BYTES_RATIO_TARGET = 1.0  # at most the smallest public source (bench/sources.py)

# A reader of the published warehouse, as a notebook or the CLI opens it, in a loop: each read
# is timed from its first attempt to its answer (a failed open is retried and counted).
PROBE = """
import json, os, sys, time
import duckdb
db, stop, out = sys.argv[1:4]
waits, failures = [], 0
while not os.path.exists(stop):
    t0 = time.perf_counter()
    while True:
        try:
            con = duckdb.connect(db, read_only=True)
            con.execute("select count(*) from offers").fetchall()
            con.close()
            break
        except duckdb.Error:
            failures += 1
            time.sleep(0.005)
    waits.append(time.perf_counter() - t0)
    time.sleep(0.02)
waits.sort()
with open(out, "w") as f:
    json.dump({"max_s": waits[-1], "p50_s": waits[len(waits) // 2], "reads": len(waits), "failures": failures}, f)
"""


def world_key(scale: str, providers: Sequence[str] | None = None) -> str:
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS

    h = hashlib.sha256(f"{scale}|{','.join(providers or [])}".encode())
    for path in sorted((REPO / "bench" / "world").glob("*.py")) + sorted(BUNDLED_RECORDINGS.glob("*/manifest.json")):
        h.update(str(path.relative_to(REPO)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def world_folder(scale: str, providers: Sequence[str] | None = None, root: Path | None = None
                 ) -> tuple[Path, list[dict[str, Any]], bool]:
    """The world replay for `scale` (generated unless a folder of the same key is there):
    (folder, the generator's tallies, whether it was reused)."""
    from bench.world import generate

    folder = (root or tmp_root()) / f"world-{scale}-{world_key(scale, providers)}"
    tallies_file = folder / "tallies.json"
    if tallies_file.exists():
        return folder, json.loads(tallies_file.read_text()), True
    shutil.rmtree(folder, ignore_errors=True)
    tallies = generate(folder, scale, list(providers) if providers else None)
    tallies_file.write_text(json.dumps(tallies))  # written last: it marks a complete folder
    return folder, tallies, False


def host_providers(world: Path) -> dict[str, str]:
    from gpuledger.adapters.replay import load_manifest

    hosts = {}
    for manifest in sorted(world.glob("*/manifest.json")):
        for ex in load_manifest(manifest.parent)[1]:
            hosts.setdefault(ex.host, manifest.parent.name)
    return hosts


@contextmanager
def replay_process(world: Path, work: Path, timeout_s: float = 300) -> Iterator[dict[str, Any]]:
    """A replay server of `world` in its own process; yields {"endpoints": FILE}, and after the
    block holds its log too: "sent" (one row per answer) and "peak_rss_mb"."""
    endpoints, log, errors = work / "endpoints.json", work / "replay-log.json", work / "replay.stderr"
    for p in (endpoints, log):
        p.unlink(missing_ok=True)
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "bench.replay_serve", str(world), str(endpoints), str(log)],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
    info: dict[str, Any] = {"endpoints": endpoints}
    try:
        deadline = time.monotonic() + timeout_s
        while not endpoints.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the replay server of {world} did not start:\n{errors.read_text()[-2000:]}")
            time.sleep(0.05)
        yield info
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if log.exists():
        info.update(json.loads(log.read_text()))


def refresh_command(endpoints: Path, providers: Sequence[str] = ()) -> list[str]:
    exe = Path(sys.executable).with_name("gpuledger")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "gpuledger.flows.cli"]
    return [*base, "refresh", "--replay", "--replay-endpoints", str(endpoints),
            *[a for p in providers for a in ("-p", p)]]


def refresh(world: Path, work: Path, db: Path, providers: Sequence[str] = (), during: Any = None,
            memory: bool = True) -> dict[str, Any]:
    """One `gpuledger refresh` of `providers` (all: empty) into db, measured; `during`: a context
    manager factory run around it (the reader probe); memory=False: wall time without sampling
    the process tree's memory (run_measured), for the runs timed against each other."""
    with replay_process(world, work) as server:
        env = dict(os.environ, GPULEDGER_DB=str(db), **({"PREFECT_API_URL": API_URL[0]} if API_URL else {}))
        cmd = refresh_command(server["endpoints"], providers)
        sample_s = TREE_SAMPLE_S if memory else None
        if during is None:
            res = run_measured(cmd, env=env, timeout=1800, sample_s=sample_s)
        else:
            with during() as probe:
                res = run_measured(cmd, env=env, timeout=1800, sample_s=sample_s)
            res["probe"] = probe
    if res["returncode"] != 0:
        raise RuntimeError(f"gpuledger refresh {' '.join(providers) or '(all)'} failed ({res['returncode']}):\n"
                           f"{res['stdout'][-1500:]}\n{res['stderr'][-2500:]}")
    res["server"] = server
    return res


def scrape_runs(db: Path) -> list[dict[str, Any]]:
    """The last refresh's rows of scrape_runs, slowest first."""
    from gpuledger.warehouse.store import open_reader

    con = open_reader(db)
    try:
        cur = con.execute(
            "select provider, state, rows_loaded, requests, duration_s from scrape_runs where refresh_id = "
            "(select refresh_id from scrape_runs order by started_at desc limit 1) order by duration_s desc")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]
    finally:
        con.close()


def bytes_by_provider(sent: list[list[Any]], hosts: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per provider: requests answered, body bytes sent, and the bytes of its distinct answers
    (each request, by host, method, target and body, counted once)."""
    out: dict[str, dict[str, int]] = {}
    seen: set[tuple[Any, ...]] = set()
    for host, method, target, digest, nbytes in sent:
        row = out.setdefault(hosts.get(host, host), {"requests": 0, "bytes": 0, "distinct_bytes": 0})
        row["requests"] += 1
        row["bytes"] += nbytes
        key = (host, method, target, digest)
        if key not in seen:
            seen.add(key)
            row["distinct_bytes"] += nbytes
    return out


@contextmanager
def reader_probe(db: Path, work: Path) -> Iterator[dict[str, Any]]:
    stop, out = work / "probe.stop", work / "probe.json"
    for p in (stop, out):
        p.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", PROBE, str(db), str(stop), str(out)], cwd=REPO)
    info: dict[str, Any] = {}
    try:
        yield info
    finally:
        stop.touch()
        proc.wait(60)
    if out.exists():
        info.update(json.loads(out.read_text()))


def copy_seconds(db: Path, work: Path, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        shutil.copyfile(db, work / "copy.duckdb")
        best = min(best, time.perf_counter() - t0)
        (work / "copy.duckdb").unlink()
    return best


def recommend_p95(db: Path, calls: int) -> dict[str, float]:
    """recommend() with a job size (hours from the time model), ranked by cost and by time, on a
    long-lived reader; and one plain select of the offers it ranks, on the same connection."""
    from gpuledger.warehouse.recommender.recommend import RecommendRequest, recommend
    from gpuledger.warehouse.store import open_reader

    reqs = [RecommendRequest(model="llama-3-8b", method="qlora", tokens=2e8),
            RecommendRequest(model="llama-3-70b", method="qlora", tokens=1e9, by="time"),
            RecommendRequest(model="mistral-7b", method="lora", tokens=5e8, spot=True),
            RecommendRequest(model="llama-3-8b", method="full", tokens=1e9, max_gpus=8, by="time")]
    select = ("select provider, region, instance_type, purchase_option, gpu_model, gpu_count, price_per_hour "
              "from offers where gpu_count > 0 and purchase_option = 'on_demand'")
    con = open_reader(db)
    try:
        for r in reqs:  # warm-up: the macros and DuckDB's caches
            recommend(con, r)
        con.execute(select).fetchall()
        rec, plain = [], []
        for i in range(calls):
            t0 = time.perf_counter()
            recommend(con, reqs[i % len(reqs)])
            rec.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            con.execute(select).fetchall()
            plain.append((time.perf_counter() - t0) * 1000)
    finally:
        con.close()
    return {"p95_ms": percentile(rec, 95), "p50_ms": percentile(rec, 50), "select_p95_ms": percentile(plain, 95)}


def page_timing(db: Path, work: Path, runs: int) -> dict[str, Any]:
    from bench.pagetime import measure
    from gpuledger.flows.report import write_report

    out = work / "prices.html"
    write_report(db, out, models=("llama-3-8b",))
    timing = measure(out, runs)
    timing["page_bytes"] = out.stat().st_size
    return timing


def run(quick: bool = False, world: Path | None = None, providers: Sequence[str] | None = None) -> list[Result]:
    """world: an existing world replay folder to use as it is (default: generated, cached);
    providers: only these (the smoke test's tiny world)."""
    scale = "small" if quick else "world"
    say(f"[1] world refresh ({scale} scale)")
    work = tmp_root() / "world-lines"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # Prefect's server starts (15-60 s) while the world replay is generated or found.
    stack = ExitStack()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefect-start") as pool:
        t_api = time.perf_counter()
        api_started = pool.submit(lambda: (stack.enter_context(prefect_api()), time.perf_counter() - t_api))
        try:
            if world is None:
                t0 = time.perf_counter()
                world, tallies, reused = world_folder(scale, providers)
                say(f"  world replay {world.name}: "
                    f"{'reused' if reused else f'generated in {time.perf_counter() - t0:.0f} s'}, "
                    f"{sum(t['exchanges'] for t in tallies):,} exchanges, "
                    f"{sum(t['body_bytes'] for t in tallies) / 1e6:.1f} MB")
        finally:
            api_url, api_s = api_started.result()  # joined before any error leaves, so the server is stopped
    with stack:
        say(f"  Prefect API server up in {api_s:.0f} s")
        names = list(providers or [])
        hosts = host_providers(world)
        API_URL[:] = [api_url]
        try:
            return _lines(world, work, work / "ledger.duckdb", names, hosts, scale, quick)
        finally:
            API_URL.clear()


def _lines(world: Path, work: Path, db: Path, names: list[str], hosts: dict[str, str], scale: str,
           quick: bool) -> list[Result]:
    full = refresh(world, work, db, names)
    runs = scrape_runs(db)
    say(f"  full refresh (memory sampled): {full['wall_s']:.1f} s, peak PSS of its process tree {full['peak_tree_pss_mb']:.0f} MB "
        f"(the refresh process's own peak RSS {full['peak_rss_mb']:.0f} MB; summed RSS {full['peak_tree_rss_mb']:.0f} MB; "
        f"replay server process {full['server']['peak_rss_mb']:.0f} MB); CPU {full['cpu_s']:.1f} s")
    say(f"  {peak_parts_line(full)}")
    fetched = bytes_by_provider(full["server"].get("sent", []), hosts)
    say(f"  {'provider':<13} {'state':<6} {'offers':>8} {'requests':>9} {'MB fetched':>11} {'fetched once':>13} {'fetch s':>8}")
    for r in sorted(runs, key=lambda r: r["provider"]):
        b = fetched.get(r["provider"], {"requests": 0, "bytes": 0, "distinct_bytes": 0})
        say(f"  {r['provider']:<13} {r['state']:<6} {r['rows_loaded']:>8,} {b['requests']:>9,} "
            f"{b['bytes'] / 1e6:>11.2f} {b['distinct_bytes'] / 1e6:>13.2f} {r['duration_s'] or 0:>8.1f}")

    from bench.world_offers import offer_lines

    for line in offer_lines({r["provider"]: r["rows_loaded"] for r in runs}):
        say(line)

    # The critical path: the providers slowest in the full refresh, each refreshed alone. The runs
    # timed against each other are not memory-sampled (run_measured's sample_s).
    slowest = [r["provider"] for r in runs[: 1 if quick else 2]]
    alone = {}
    for p in slowest:
        res = refresh(world, work, work / f"alone-{p}.duckdb", [p], memory=False)
        alone[p] = res["wall_s"]
        say(f"  {p} alone: {res['wall_s']:.1f} s")
    critical_provider = max(alone, key=alone.get)
    # Pairs of the full refresh and its critical provider alone, each into a warehouse of its own
    # and back to back, in alternating order: this host's speed drifts by tens of percent within
    # minutes (benchmark 1), and one ratio of two runs a minute apart follows the drift. The first
    # pair (alone first) takes the last alone run when it was the critical provider's.
    pairs = []
    for i in range(1 if quick else PAIRS):
        walls = {"alone": alone[critical_provider]} if i == 0 and slowest[-1] == critical_provider else {}
        for arm in (("alone", "full") if i % 2 == 0 else ("full", "alone")):
            if arm in walls:
                continue
            which = [critical_provider] if arm == "alone" else names
            walls[arm] = refresh(world, work, work / f"{arm}-{i}.duckdb", which, memory=False)["wall_s"]
        pairs.append((walls["full"], walls["alone"]))
    say(f"  full refresh / {critical_provider} alone, {len(pairs)} pairs: "
        + ", ".join(f"{f:.1f} / {a:.1f} s = {f / a:.2f}x" for f, a in pairs))
    full_wall = median([f for f, _ in pairs])
    critical = median([a for _, a in pairs])
    critical_ratio = median([f / a for f, a in pairs])

    floor = run_measured([sys.executable, "-c", "import gpuledger.flows.cli, gpuledger.flows.refresh"])

    # The write window: a second refresh into the same warehouse while a reader reads it. With
    # --quick it is the critical provider's alone (the largest merge): a refresh of any providers
    # publishes the whole warehouse file the same way (warehouse/snapshot.py), at a third of the time.
    copy_s = copy_seconds(db, work)
    db_mb = db.stat().st_size / 1e6
    second_of = [critical_provider] if quick else names
    second = refresh(world, work, db, second_of, during=lambda: reader_probe(db, work))
    probe = second["probe"]
    say(f"  second refresh ({', '.join(second_of) or 'all'}): {second['wall_s']:.1f} s; reader: longest wait {probe['max_s'] * 1000:.0f} ms over "
        f"{probe['reads']} reads ({probe['failures']} failed opens retried); copying the {db_mb:.0f} MB "
        f"warehouse {copy_s * 1000:.0f} ms")

    rec = recommend_p95(db, 12 if quick else 40)
    say(f"  recommend(): p95 {rec['p95_ms']:.1f} ms (p50 {rec['p50_ms']:.1f}); plain select p95 {rec['select_p95_ms']:.1f} ms")
    page = page_timing(db, work, 3 if quick else 5)
    worst_action = max(page["best_ms"], key=page["best_ms"].get)
    worst_ms = page["best_ms"][worst_action]
    say(f"  page: {page['offers']:,} offers, {page['page_bytes'] / 1e6:.1f} MB; best ms per action "
        f"{ {k: round(v, 1) for k, v in page['best_ms'].items()} }; sorting {page['offers']:,} numbers "
        f"{page['sort_floor_ms']:.2f} ms")

    from bench.sources import SOURCES, answers_by_provider, bytes_table, measure

    answers = answers_by_provider(full["server"].get("sent", []), hosts)
    by_bytes = [measure(p, answers[p], world) for p in sorted(answers) if p in SOURCES]
    for line in bytes_table(by_bytes):
        say(line)
    unexcused = [b for b in by_bytes if not b.ok]
    # Judged: every provider but those over the smallest source for a stated reason.
    judged = [b for b in by_bytes if not (b.ok and b.ratio > 1.0 + 1e-9)]
    worst_bytes = max(judged, key=lambda b: (not b.ok, b.ratio)) if judged else None
    total = sum(b.fetched for b in by_bytes)
    total_smallest = sum(b.smallest for b in by_bytes)
    excused = "; ".join(f"{b.provider} {b.ratio:.2f}x: {b.source.over_reason}" for b in by_bytes
                        if b.ok and b.ratio > 1.0 + 1e-9)
    shutil.rmtree(work, ignore_errors=True)
    offers = sum(r["rows_loaded"] for r in runs)
    label = f"{scale} scale, {len(runs)} providers, {offers:,} offers"
    return [
        Result("1", f"full refresh on the world replay ({label}), wall" + (f", median of {len(pairs)}" if len(pairs) > 1 else ""),
               full_wall, "s", WALL_TARGET_S,
               ratio=full_wall / critical, ratio_label=f"/ {critical_provider} alone",
               notes=f"second refresh ({', '.join(second_of) or 'all'}) into the same warehouse {second['wall_s']:.1f} s; "
                     "each refresh talks to one Prefect server started before them",
               extra={"runs": runs, "alone_s": alone, "second_wall_s": second["wall_s"], "pairs": pairs}),
        Result("1", f"full refresh / critical path ({critical_provider} alone, {critical:.1f} s)"
                    + (f", median of the ratios of {len(pairs)} back-to-back pairs" if len(pairs) > 1 else ""),
               critical_ratio, "x", CRITICAL_PATH_TARGET, extra={"alone_s": alone, "pairs": pairs}),
        Result("1", "peak memory of the full refresh: PSS summed over the refresh and its child processes "
                    "(fetch processes, crawlers, Chromium; replay server apart)", full["peak_tree_pss_mb"], "MB",
               RSS_TARGET_MB, ratio=full["peak_tree_pss_mb"] / floor["peak_tree_pss_mb"],
               ratio_label="/ import-only process (lower is better)",
               notes=f"the refresh process alone peaked at {full['peak_rss_mb']:.0f} MB RSS; the tree's summed RSS "
                     f"(shared pages counted in every process) {full['peak_tree_rss_mb']:.0f} MB; replay server process "
                     f"{full['server']['peak_rss_mb']:.0f} MB; import-only {floor['peak_tree_pss_mb']:.0f} MB PSS",
               extra={"peak_rss_mb": full["peak_rss_mb"], "peak_tree_rss_mb": full["peak_tree_rss_mb"],
                      "replay_server_mb": full["server"]["peak_rss_mb"], "import_only_mb": floor["peak_tree_pss_mb"]}),
        Result("1", "write window: longest a reader waits during a refresh", probe["max_s"], "s", WRITE_WINDOW_TARGET_S,
               ratio=probe["max_s"] / copy_s if copy_s else None, ratio_label="/ copying the warehouse file",
               notes=f"{probe['reads']} reads, median {probe['p50_s'] * 1000:.0f} ms, {probe['failures']} failed opens; "
                     f"copy {copy_s * 1000:.0f} ms of {db_mb:.0f} MB",
               extra={**probe, "copy_s": copy_s}),
        Result("1", "recommend() with the time model on the world warehouse, p95", rec["p95_ms"], "ms",
               RECOMMEND_P95_TARGET_MS, ratio=rec["p95_ms"] / rec["select_p95_ms"],
               ratio_label="/ plain select of the offers (lower is better)", extra=rec),
        Result("1", f"comparison page filter/sort in Chromium, {page['offers']:,} offers, worst ({worst_action})",
               worst_ms, "ms", PAGE_TARGET_MS, ratio=worst_ms / page["sort_floor_ms"] if page["sort_floor_ms"] else None,
               ratio_label="/ sorting as many numbers (lower is better)", extra=page),
        Result("1", f"offers loaded ({scale} scale; informational, not judged)", offers, "offers", None,
               notes="per large provider, real size -> offers -> left out: bench/world/README.md "
                     "(Offers at world scale) and bench/world_offers.py",
               extra={"by_provider": {r["provider"]: r["rows_loaded"] for r in runs}}),
        Result("1", "bytes fetched per provider / its smallest public source of the same prices, worst "
                    f"without a stated reason ({worst_bytes.provider if worst_bytes else '-'})",
               worst_bytes.ratio if worst_bytes else 0.0, "x", BYTES_RATIO_TARGET,
               ratio=total / total_smallest if total_smallest else None,
               ratio_label=f"all providers: {total / 1e6:.1f} MB fetched, {total_smallest / 1e6:.1f} MB smallest",
               notes=("over the smallest source for a stated reason: " + (excused or "none")
                      + (f"; FAILING: {', '.join(b.provider for b in unexcused)}" if unexcused else "")),
               extra={"by_provider": {b.provider: {"requests": b.requests, "fetched": b.fetched, "once": b.once,
                                                   "smallest": b.smallest, "basis": b.smallest_basis}
                                      for b in by_bytes}}),
        *aws_public_price_list_lines(world, hosts, names, alone),
    ]


# What a user without an AWS account gets: the public price list's offer files, no EC2 API. The
# environment wins over a manifest's settings (warehouse/settings.py), so these reach the refresh
# over the world manifest's credentialed `aws_price_source: api`.
AWS_PUBLIC_ONLY_ENV = {"GPULEDGER_AWS_PRICE_SOURCE": "bulk", "GPULEDGER_AWS_EC2_API": "off"}


def aws_public_price_list_lines(world: Path, hosts: dict[str, str], names: list[str],
                                alone: dict[str, float]) -> list[Result]:
    """AWS alone refreshed from the public price list only (informational: no target), against
    AWS alone in the world's credentialed configuration (the critical-path run's figure when
    AWS was one of the slowest, else measured here). None when the run leaves AWS out."""
    if names and "aws" not in names:
        return []
    work = tmp_root() / "world-lines-aws-public"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        credentialed = alone.get("aws")
        if credentialed is None:
            credentialed = refresh(world, work, work / "aws-credentialed.duckdb", ["aws"], memory=False)["wall_s"]
        db = work / "aws-public.duckdb"
        with replay_process(world, work) as server:
            env = dict(os.environ, GPULEDGER_DB=str(db), **AWS_PUBLIC_ONLY_ENV,
                       **({"PREFECT_API_URL": API_URL[0]} if API_URL else {}))
            res = run_measured(refresh_command(server["endpoints"], ["aws"]), env=env, timeout=1800, sample_s=None)
        if res["returncode"] != 0:
            raise RuntimeError(f"gpuledger refresh aws (public price list only) failed ({res['returncode']}):\n"
                               f"{res['stdout'][-1500:]}\n{res['stderr'][-2500:]}")
        fetched = bytes_by_provider(server.get("sent", []), hosts).get("aws", {"requests": 0, "bytes": 0})
        offers = sum(r["rows_loaded"] for r in scrape_runs(db) if r["provider"] == "aws")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"  aws alone, public price list only: {res['wall_s']:.1f} s, {fetched['bytes'] / 1e6:,.0f} MB in "
        f"{fetched['requests']} requests, {offers:,} offers (credentialed: {credentialed:.1f} s)")
    return [Result("1", f"AWS alone without credentials (public price list only: {offers:,} offers, "
                        f"{fetched['bytes'] / 1e6:,.0f} MB fetched)", res["wall_s"], "s", None,
                   ratio=res["wall_s"] / credentialed, ratio_label="/ AWS alone with credentials (informational)",
                   notes="GPULEDGER_AWS_PRICE_SOURCE=bulk, GPULEDGER_AWS_EC2_API=off: no EC2 facts, AZs or spot prices",
                   extra={"offers": offers, "bytes": fetched["bytes"], "requests": fetched["requests"],
                          "credentialed_s": credentialed, "peak_rss_mb": res["peak_rss_mb"]})]
