"""One cell of the fault matrix: fetch one provider through a faulty loopback server, load it
beside clean scrapes of its window peers, and judge what the warehouse kept.

A cell's write window holds the faulted provider and the next WINDOW_PEERS sources in name
order (wrapping round): every source is a peer in other cells, so the whole matrix shows that
no provider's fault reaches another's load, without each of its hundreds of cells reloading
every source. The sources outside the window must keep their rows untouched. A fetch that raised
hands the load nothing but its failed run, the same for every fault but for its one-line error:
the provider's `refused` cell (PEERED_FAILURE) loads it beside its peers and judges the
warehouse; its other such cells judge the error the failed run would carry, and load nothing.

The steps are the refresh's own: `fetch_source` with the real client (flows.fetch), its outcome
(or `describe_failure` of its error) handed over on disk and merged by `merge_pending`, one
transaction per provider. Only the child process and Prefect's orchestration are left out.
"""

from __future__ import annotations

import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.adapters.base import SourceError
from gpuledger.adapters.registry import specs
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer, Request, load_manifest
from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.fetch import SourcePlan, describe_failure, failed, fetch_source
from gpuledger.warehouse import pending
from tests.faults.faultserver import FaultyReplay, Reset, Stall
from tests.faults.providers import DATA_FAULTS, ERROR_PATTERNS, PROVIDERS, REASON_PATTERNS, Edit, ProviderFaults
from tests.faults.shapes import SHAPE_FILE
from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.schema import SPECS
from gpuledger.warehouse.store import AnomalyPolicy, LoadReport, merge_pending, utcnow

PROVIDER_NAMES = sorted(SOURCES)
WINDOW_PEERS = 1
PEERED_FAILURE = "refused"  # the fault whose cell loads a failed fetch beside its peers (every fetch raises)
BOOKKEEPING = ("last_seen", "run_id")  # what every successful merge rewrites, whatever the data
# Sources whose clients wait as long as a 429's Retry-After asks (ProviderSpec.honours_retry_after).
HONOURS_RETRY_AFTER = {s.name for s in specs() if s.honours_retry_after}


def http_plan(provider: str, endpoints: dict[str, str], **overrides: Any) -> SourcePlan:
    settings = dict(PROVIDERS[provider].settings)
    settings.update(overrides.pop("settings", {}))
    kwargs: dict[str, Any] = {"http_attempts": 2, "retry_wait_max_s": 0.05, "http_timeout_s": 10.0}
    kwargs.update(overrides)
    return SourcePlan(provider=provider, mode="replay", replay_urls=endpoints, settings=settings, **kwargs)


# -- the warehouse before any fault ---------------------------------------------------------------

def snapshot(con: duckdb.DuckDBPyConnection, provider: str) -> dict[str, list[tuple]]:
    """Every row the provider owns, in every current and history table, all columns."""
    out = {}
    for spec in SPECS:
        for table in (spec.table, spec.history):
            order = ", ".join(spec.key) + (", valid_from" if table == spec.history else "")
            out[table] = con.execute(f"select * from {table} where provider = ? order by {order}",
                                     [provider]).fetchall()
    return out


def offers(con: duckdb.DuckDBPyConnection, provider: str, exclude: tuple[str, ...] = BOOKKEEPING) -> list[tuple]:
    spec = SPECS[0]
    return con.execute(f"select * exclude ({', '.join(exclude)}) from offers where provider = ? "
                       f"order by {', '.join(spec.key)}", [provider]).fetchall()


@dataclass
class World:
    """Clean scrapes of every provider, saved as a fetch hands them over, and one seeded warehouse
    every cell starts from (a copy). Built once (build_world), opened by any process (open_world)."""

    seed_db: Path
    before: dict[str, dict[str, list[tuple]]]
    root: Path
    _oracles: dict[tuple[str, str], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def oracle(self, provider: str, fault: str) -> tuple[list[tuple], set[tuple[str, str]]]:
        """(offers, quarantine (ref, reason)) the provider must end with after a row-level fault."""
        kind = PROVIDERS[provider].oracles[fault]
        with self._lock:
            lock = self._oracles.setdefault((provider, kind, "lock"), threading.Lock())
        with lock:
            if (provider, kind) not in self._oracles:
                self._oracles[(provider, kind)] = self._oracle(provider, kind)
            return self._oracles[(provider, kind)]

    def _oracle(self, provider: str, kind: str) -> tuple[list[tuple], set[tuple[str, str]]]:
        if kind == "clean":  # the fault only added a bad record: the clean scrape is the answer
            con = duckdb.connect(str(self.seed_db), read_only=True)
            try:
                return (_without_bookkeeping(con, self.before[provider]["offers"]),
                        set(con.execute("select source_ref, reason from quarantine where provider = ?",
                                        [provider]).fetchall()))
            finally:
                con.close()
        run = fetch_with_fault(provider, "price_negative", oracle=True)  # the victim taken out
        assert run.error is None, f"the oracle run of {provider} failed: {run.error}"
        db = self.root / f"oracle-{provider}.duckdb"
        report = {r.provider: r for r in load_beside_clean(self, db, run, f"oracle-{provider}")}[provider]
        assert report.ok, f"the oracle run of {provider} did not load: {report.error}"
        con = duckdb.connect(str(db), read_only=True)
        try:
            return (offers(con, provider), set(con.execute(
                "select source_ref, reason from quarantine where provider = ? and run_id = ?",
                [provider, report.run_id]).fetchall()))
        finally:
            con.close()


CLEAN = "clean"  # the world's folder of clean scrapes
READY, BROKEN = "ready", "broken.txt"  # what the world's folder holds once its build ended


def hand_over(world_root: Path, provider: str, folder: Path) -> None:
    """Put `provider`'s clean scrape in a refresh's pending `folder`, as its fetch would."""
    pending.save(folder, {f.name: f.read_bytes() for f in (world_root / CLEAN).glob(f"{provider}.*")})


def build_world(root: Path) -> World:
    """Scrape every provider from the bundled recordings, save each scrape and seed a warehouse
    with them in `root`; a process that waits for the world reads BROKEN if this raised."""
    try:
        server = ReplayServer(BUNDLED_RECORDINGS)
        server.start()
        try:
            plans = {p: http_plan(p, server.endpoints()) for p in PROVIDER_NAMES}
            for p, plan in plans.items():
                plan.settings = {**server.settings.get(p, {}), **plan.settings}
            with ThreadPoolExecutor(max_workers=4) as pool:  # as the flow does: providers concurrently
                clean = list(pool.map(lambda p: fetch_source(plans[p]), PROVIDER_NAMES))
        finally:
            server.close()
        for outcome in clean:
            pending.write(root / CLEAN, outcome)
        seed = root / "seed.duckdb"
        folder = pending.pending_dir(seed) / "seed"
        for p in PROVIDER_NAMES:
            hand_over(root, p, folder)
        reports = merge_pending(seed, "seed", AnomalyPolicy())
        bad = [(r.provider, r.error) for r in reports if not r.ok]
        assert not bad, f"the clean recordings must load: {bad}"
    except BaseException as err:
        (root / BROKEN).write_text(f"{type(err).__name__}: {err}")
        raise
    (root / READY).touch()
    return open_world(root)


def open_world(root: Path) -> World:
    con = duckdb.connect(str(root / "seed.duckdb"), read_only=True)
    try:
        before = {p: snapshot(con, p) for p in PROVIDER_NAMES}
    finally:
        con.close()
    return World(root / "seed.duckdb", before, root)


# -- one cell -----------------------------------------------------------------------------------------

@dataclass
class Run:
    """What one faulted fetch did."""

    result: pending.ScrapeOutcome | None
    error: BaseException | None
    server: FaultyReplay
    edit: Edit
    plan: SourcePlan
    started: datetime


def faulty_server(spec: ProviderFaults, fault: str, edit: Edit, recordings: Path = BUNDLED_RECORDINGS) -> FaultyReplay:
    transport = hook = None
    refuse: set[str] = set()
    if fault == "refused":
        refuse = set(spec.refuse) or {ex.host for ex in load_manifest(recordings / spec.name)[1]}
    elif fault == "timeout":
        def transport(host: str, req: Request) -> Stall | None:
            return Stall() if spec.hit("timeout", host, req) else None
    elif fault == "reset":
        def transport(host: str, req: Request) -> Reset | None:
            return Reset(0.5) if spec.hit("reset", host, req) else None
    elif fault in ("http_429", "http_500", "http_503_once"):
        hits: list[str] = []

        def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
            if not spec.hit(fault, host, req):
                return None
            hits.append(req.path)
            if fault == "http_429":
                return 429, {"Retry-After": "2", "Content-Type": "text/plain"}, b"Too Many Requests: slow down"
            if fault == "http_500":
                return 500, {"Content-Type": "text/plain"}, b"Internal Server Error"
            if len(hits) == 1:
                return 503, {"Content-Type": "text/plain", "Retry-After": "0"}, b"Service Unavailable"
            return None
    elif fault == "truncated":
        def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
            if ex is None or not spec.truncate(host, req):
                return None
            body = ex.body()
            return ex.status, dict(ex.headers), body[: len(body) // 2]  # a complete answer, half a document
    else:
        def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
            if ex is None or ex.status != 200:
                return None
            try:
                new = spec.edit(edit, host, req, ex.body()) if spec.edit is not None else None
            except Exception as err:  # noqa: BLE001 - the cell reports the broken edit, not a dropped connection
                edit.state["edit_error"] = f"{type(err).__name__}: {err}"
                raise
            return None if new is None else (ex.status, dict(ex.headers), new)
    server = FaultyReplay(recordings, [spec.name], hook=hook, transport=transport, refuse=refuse)
    server.start()
    return server


def fetch_with_fault(provider: str, fault: str, oracle: bool = False) -> Run:
    spec = PROVIDERS[provider]
    edit = Edit(fault, oracle=oracle)
    server = faulty_server(spec, fault, edit)
    http: dict[str, Any] = {}
    if fault == "timeout":
        http["http_timeout_s"] = spec.timeout_s
    if fault == "http_429":
        http["retry_wait_max_s"] = 3.0  # room to honour Retry-After: 2 (the backoff alone waits 0.5-1 s)
    plan = http_plan(provider, server.endpoints(), settings=server.settings.get(provider, {}), **http)
    started = utcnow()
    result = error = None
    try:
        result = fetch_source(plan)
    except BaseException as err:  # noqa: BLE001 - judged below: it must be the project's own error
        error = err
    finally:
        server.close()
    return Run(result, error, server, edit, plan, started)


def window(provider: str, peers: int = WINDOW_PEERS) -> list[str]:
    """The providers loaded in `provider`'s cell: itself and its `peers` successors by name."""
    at = PROVIDER_NAMES.index(provider)
    return [PROVIDER_NAMES[(at + n) % len(PROVIDER_NAMES)] for n in range(min(peers + 1, len(PROVIDER_NAMES)))]


def handed_over(run: Run) -> pending.ScrapeOutcome:
    """What `run`'s fetch hands the load: its scrape, or the failed run that says why it raised."""
    if run.error is None:
        assert run.result is not None
        return run.result
    return failed(run.plan, describe_failure(run.plan.provider, run.error), run.started)


def load_beside_clean(world: World, db: Path, run: Run, refresh_id: str) -> list[LoadReport]:
    """The write window of a refresh in which `run` is one provider and its peers scraped cleanly."""
    provider = run.plan.provider
    shutil.copy(world.seed_db, db)
    folder = pending.pending_dir(db) / refresh_id
    pending.write(folder, handed_over(run))
    for peer in window(provider)[1:]:
        hand_over(world.root, peer, folder)
    return merge_pending(db, refresh_id, AnomalyPolicy())


@dataclass
class Verdict:
    provider: str
    fault: str
    expected: str
    survived: bool = False
    rows_lost: int = 0
    detail: str = ""
    problems: list[str] = field(default_factory=list)

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)


def _diff(a: list[tuple], b: list[tuple]) -> int:
    """Rows in one list and not the other (as multisets)."""
    from collections import Counter

    ca, cb = Counter(a), Counter(b)
    return sum(((ca - cb) + (cb - ca)).values())


def judge(world: World, tmp: Path, provider: str, fault: str) -> Verdict:
    spec = PROVIDERS[provider]
    expected = spec.expected(fault)
    verdict = Verdict(provider, fault, expected)
    if fault in DATA_FAULTS and spec.edit is None:
        verdict.check(False, f"{provider}'s recording declares no body shape: add "
                      f"adapters/recordings/{provider}/{SHAPE_FILE} (see tests/faults/shapes.py)")
        return verdict
    run = fetch_with_fault(provider, fault)
    if "edit_error" in run.edit.state:
        verdict.check(False, f"the {fault} edit of {provider}'s bodies failed: {run.edit.state['edit_error']} "
                      f"(check adapters/recordings/{provider}/{SHAPE_FILE})")
        return verdict
    verdict.check(run.error is None or isinstance(run.error, SourceError),
                  f"the fetch raised a bare {type(run.error).__name__}: {run.error}")
    if fault == "http_429" and provider in HONOURS_RETRY_AFTER:
        times = [t for t, _, r, what in run.server.seen() if what == "429"]
        verdict.check(len(times) >= 2, f"the 429 was not retried ({len(times)} attempts)")
        if len(times) >= 2:
            verdict.check(times[1] - times[0] >= 1.9, f"retried {times[1] - times[0]:.2f} s after a 429 "
                          "with Retry-After: 2")
    if run.error is not None and fault != PEERED_FAILURE:
        return _judge_raised(verdict, spec, run)
    refresh_id = f"fault-{provider}-{fault}"
    db = tmp / f"{provider}-{fault}.duckdb"
    reports = {r.provider: r for r in load_beside_clean(world, db, run, refresh_id)}
    mine = reports[provider]
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = {r[0]: r[1:] for r in con.execute(
            "select provider, state, error, rows_loaded, rows_quarantined, run_id from scrape_runs "
            "where refresh_id = ?", [refresh_id]).fetchall()}
        verdict.check(set(runs) == set(window(provider)), f"scrape_runs rows for {sorted(runs)}")
        state, error, rows_loaded, rows_quarantined, run_id = runs[provider]
        verdict.detail = (error or f"ok, {rows_loaded} offers, {rows_quarantined} quarantined")[:300]
        verdict.check((state, error) == (mine.state, mine.error), "scrape_runs disagrees with the load report")

        # -- the faulted provider ------------------------------------------------------------
        if expected == "fail":
            _check_failed(verdict, spec, fault, state, error)
            after = snapshot(con, provider)
            lost = sum(_diff(world.before[provider][t], after[t]) for t in after)
            verdict.rows_lost += lost
            verdict.check(lost == 0, f"{lost} rows of {provider} changed although its load failed")
        elif expected == "recover":
            verdict.check(state == "ok", f"state {state!r} after a transient error, expected ok: {error}")
            hits = [what for _, host, r, what in run.server.seen() if spec.hit(fault, host, r)]
            verdict.check(len(hits) >= 2 and hits[0] == "503", f"no retry after the 503: {hits}")
            lost = _diff(_without_bookkeeping(con, world.before[provider]["offers"]), offers(con, provider))
            verdict.rows_lost += lost
            verdict.check(lost == 0, f"{lost} offers differ after the retried load")
        else:  # quarantine
            verdict.check(state == "ok", f"state {state!r}, expected ok with the bad records quarantined: {error}")
            expected_offers, oracle_q = world.oracle(provider, fault)
            lost = _diff(expected_offers, offers(con, provider))
            verdict.rows_lost += lost
            verdict.check(lost == 0, f"{lost} offers differ from the run without the bad record")
            got_q = con.execute("select source_ref, reason, raw from quarantine where provider = ? and run_id = ?",
                                [provider, run_id]).fetchall()
            extra = [q for q in got_q if (q[0], q[1]) not in oracle_q]
            victim = run.edit.victim or "?"
            verdict.check(bool(extra), "nothing was quarantined")
            verdict.check(all(victim in (ref + reason + raw) for ref, reason, raw in extra),
                          f"quarantined records other than the victim {victim!r}: "
                          f"{[(r, why) for r, why, raw in extra if victim not in r + why + raw][:3]}")
            pattern = REASON_PATTERNS[fault]
            verdict.check(any(re.search(pattern, reason) for _, reason, _ in extra),
                          f"no quarantine reason matches {pattern!r}: {[why for _, why, _ in extra][:3]}")
            verdict.check(rows_quarantined == mine.rows_quarantined and rows_quarantined >= len(extra),
                          "scrape_runs.rows_quarantined does not count the quarantined records")
            verdict.detail = f"quarantined {len(extra)}: {extra[0][1][:160] if extra else '-'}"
        # -- its peers loaded normally in the same write window; the rest untouched --------------
        kept = dict(con.execute("select provider, count(*) from offers group by provider").fetchall())
        for p in PROVIDER_NAMES:
            if p not in runs:
                verdict.check(kept.get(p, 0) == len(world.before[p]["offers"]),
                              f"{p}: {kept.get(p, 0)} offers, expected {len(world.before[p]['offers'])} "
                              "(not in this refresh)")
                continue
            if p == provider:
                continue
            other_state, other_error, other_rows, _, other_run = runs[p]
            n = len(world.before[p]["offers"])
            verdict.check(other_state == "ok" and other_rows == n, f"{p}: {other_state} {other_error} {other_rows}/{n}")
            got = con.execute("select count(*), count(*) filter (where run_id = ?) from offers where provider = ?",
                              [other_run, p]).fetchall()[0]
            verdict.check(got == (n, n), f"{p}: {got} offers (of them from this refresh), expected {n}")
            lost = _diff(_without_bookkeeping(con, world.before[p]["offers"]), offers(con, p))
            verdict.rows_lost += lost
            verdict.check(lost == 0, f"{p}: {lost} offers changed although it scraped the same data")
        failed_checks = [c.name for c in run_checks(con) if not c.ok]
        verdict.check(not failed_checks, f"integrity checks failed: {failed_checks}")
    finally:
        con.close()
    verdict.survived = not verdict.problems
    return verdict


def _check_failed(verdict: Verdict, spec: ProviderFaults, fault: str, state: str, error: str | None) -> None:
    verdict.check(state == "failed", f"state {state!r}, expected failed")
    pattern = spec.errors.get(fault, ERROR_PATTERNS.get(fault, "."))
    verdict.check(bool(error and re.search(pattern, error)), f"error {error!r} does not match {pattern!r}")
    verdict.check(bool(error) and "\n" not in error and 'File "' not in error,
                  f"error {error!r} is not one line, or quotes a traceback")


def _judge_raised(verdict: Verdict, spec: ProviderFaults, run: Run) -> Verdict:
    """A cell whose fetch raised, outside its provider's PEERED_FAILURE cell: the failed run the
    load would get must say the fault in one line (that cell shows what such a load keeps)."""
    outcome = handed_over(run)
    verdict.detail = (outcome.error or "")[:300]
    if verdict.expected == "fail":
        _check_failed(verdict, spec, verdict.fault, outcome.state, outcome.error)
    else:
        verdict.check(False, f"the fetch raised, expected {verdict.expected}: {outcome.error}")
    verdict.survived = not verdict.problems
    return verdict


def _without_bookkeeping(con: duckdb.DuckDBPyConnection, rows: list[tuple]) -> list[tuple]:
    names = [d[0] for d in con.execute("select * from offers limit 0").description]
    keep = [i for i, n in enumerate(names) if n not in BOOKKEEPING]
    return [tuple(row[i] for i in keep) for row in rows]
