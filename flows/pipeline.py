"""The refresh, as plain functions the Prefect flow orchestrates.

fetch (per provider, no warehouse access, may run concurrently) -> load (one
short write window, one transaction per provider). Nothing here knows about
Prefect, so each step can be called and tested directly.
"""

from __future__ import annotations

import logging
import signal
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, cast

import duckdb

from gpuledger import forkserver
from gpuledger.adapters.base import (
    REDACTED, MissingCredentialsError, RedactingRecorder, SourceContext, quarantine_repeated, redact,
)
from gpuledger.adapters.registry import SOURCES, source_module, spec
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, RecordingProxy
from gpuledger.flows.stopping import NEVER, RefreshInterrupted, Stopper
from gpuledger.warehouse import pending
from gpuledger.flows.progress import report as report_progress
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.settings import env_name
from gpuledger.warehouse.store import (
    AnomalyPolicy, LoadReport, PreparedLoad, ScrapeOutcome, WarehouseError, close_writer, db_path, load_outcome,
    open_reader, open_writer, prepare_loads, root_cause, utcnow,
)
from gpuledger.warehouse.snapshot import PublishError, discard, publish, start_working_copy

log = logging.getLogger("gpuledger.refresh")


def ensure_browsers(providers: list[str], say: Any = print) -> None:
    """Find (or install, the way `gpuledger.spiders.browser --ensure` does) the Chromium that a
    requested page source renders with, before any fetch: a fresh machine has none. A failure is
    said in one line; that provider then fails on its own and the others load."""
    if not any(spec(n).needs_browser for n in providers):
        return
    from gpuledger.spiders.browser import ensure_browser

    installing: list[bool] = []

    def announce() -> None:
        installing.append(True)
        say("No Chromium found for the JavaScript-rendered pricing pages: installing one "
            "(Debian's chromium-headless-shell as root, else `playwright install chromium`) ...")

    try:
        path = ensure_browser(on_install=announce)
    except Exception as err:  # noqa: BLE001 - reported in one line; the page source fails by itself
        say(f"could not install a Chromium ({type(err).__name__}: {err}); the page sources that need it will fail")
        return
    if installing:
        say(f"chromium: {path}")


def resolve_providers(names: list[str] | None) -> list[str]:
    if not names:
        return sorted(SOURCES)
    for n in names:
        source_module(n)
    return list(dict.fromkeys(names))


@dataclass
class SourcePlan:
    """How one provider is to be reached in this refresh (picklable, for any task runner)."""

    provider: str
    mode: str = "live"  # live | replay | record
    replay_urls: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    since: dict[str, str] = field(default_factory=dict)  # SourceContext.since
    record_dir: str | None = None
    http_attempts: int = 3
    retry_wait_max_s: float = 8.0
    retry_budget_s: float = 120.0
    http_timeout_s: float = 60.0


@dataclass
class FetchResult:
    provider: str
    batch: Batch
    requests: int
    started_at: Any
    finished_at: Any
    facts: dict[str, Any]
    min_row_ratio: float | None = None  # the source's own anomaly threshold (ProviderSpec.anomaly), if any
    side_tables_only: bool = False  # ProviderSpec.side_tables_only


def fetch_source(plan: SourcePlan) -> FetchResult:
    """Run one provider's scrape; raises on failure (the flow records it)."""
    module = source_module(plan.provider)
    started = utcnow()
    recorder = proxy = None
    if plan.record_dir is not None:
        recorder = RedactingRecorder(Path(plan.record_dir) / plan.provider, plan.provider)
    ctx = SourceContext(
        provider=plan.provider, mode=plan.mode, replay_urls=plan.replay_urls, settings=dict(plan.settings),
        recorder=recorder, http_attempts=plan.http_attempts, retry_wait_max_s=plan.retry_wait_max_s,
        retry_budget_s=plan.retry_budget_s, http_timeout_s=plan.http_timeout_s, since=dict(plan.since),
    )
    if recorder is not None:
        proxy = RecordingProxy(recorder, ctx.upstream_url)
        ctx.proxy = proxy
    try:
        batch = module.fetch(ctx)
    finally:
        if proxy is not None:
            proxy.close()
    quarantine_repeated(batch, ctx.repeated_keys)
    if batch.secrets_redacted:
        batch.notes.append(f"{plan.provider}: {batch.secrets_redacted} records or notes held a known secret value; "
                           f"it is stored as {REDACTED}")
    if recorder is not None:
        recorder.write_manifest(plan.settings, started.isoformat(timespec="seconds"))
    provider = module.PROVIDER
    return FetchResult(plan.provider, batch, ctx.requests_made, started, utcnow(), provider.facts_row(),
                       min_row_ratio=provider.anomaly.min_row_ratio, side_tables_only=provider.side_tables_only)


class ScrapeTimeout(TimeoutError):
    pass


# The sources whose parse is seconds of CPU at world scale: each fetches and parses in a process
# of its own (flows/isolated.py), so they spread over the cores instead of sharing one
# interpreter lock. The others are mostly waits on the network and stay on threads.
OWN_PROCESS_SOURCES = frozenset({"aws", "gcp", "azure", "vastai"})


# The fetches whose processes are the largest of a refresh. Replaying the bundled recordings,
# PSS at their peaks: AWS's fetch process about 280 MB, GCP's 180 (google-cloud-compute's types
# alone are 137 MB), and a browser-rendered page 330 over its crawl's Python, the Playwright
# driver and Chromium. At most `large_fetches` of them run at once (2: one per core of a small
# machine), so that a refresh's peak never holds all three (turn_waits).
LARGE_PROCESS_SOURCES = frozenset({"aws", "gcp"})


def has_large_process(provider: str) -> bool:
    return provider in LARGE_PROCESS_SOURCES or spec(provider).needs_browser


def turn_waits(plans: list[SourcePlan], limit: int) -> dict[str, str]:
    """Which provider's fetch each fetch with a large process waits for, so that at most `limit`
    run at once: in the plans' order, the k-th of them (k >= limit) starts once the (k - limit)-th
    has ended, failed or not. Empty for a limit of 0 (no limit)."""
    if limit <= 0:
        return {}
    large = [plan.provider for plan in plans if has_large_process(plan.provider)]
    return {large[k]: large[k - limit] for k in range(limit, len(large))}


def prepare_children(providers: list[str]) -> None:
    """Before a refresh of `providers` starts its first child: have the fork server its fetch and
    crawl children are forked from import Scrapy too when a page source is among them (five
    crawls then pay those imports once instead of once each)."""
    if any(spec(n).source_kind == "page" for n in providers):
        forkserver.preload(forkserver.CRAWL_MODULES)


def fetch_within(plan: SourcePlan, timeout_s: float) -> FetchResult:
    """fetch_source in a daemon thread, waited on for at most `timeout_s` seconds.

    A scrape stuck in blocking I/O cannot be interrupted from outside its thread, so on timeout
    it is abandoned (its thread holds nothing the refresh needs and ends with the process) and
    ScrapeTimeout is raised for the flow to record, while the other providers go on. A source of
    OWN_PROCESS_SOURCES runs in a child process instead, killed on timeout.
    """
    def timed_out() -> ScrapeTimeout:
        return ScrapeTimeout(f"{plan.provider}: the scrape did not finish within {timeout_s:g} s "
                             f"({env_name('task_timeout_s')}) and was abandoned")

    # A daemonic process (a Dask worker) may not start children; its task already has a process.
    if plan.provider in OWN_PROCESS_SOURCES and forkserver.can_fork():
        from gpuledger.flows.isolated import fetch_in_child

        return fetch_in_child(fetch_source, plan, timeout_s, timed_out)
    future: Future[FetchResult] = Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fetch_source(plan))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting caller, not swallowed
            future.set_exception(err)

    threading.Thread(target=run, name=f"fetch-{plan.provider}", daemon=True).start()
    try:
        return future.result(timeout=timeout_s)
    except FutureTimeout:
        raise timed_out() from None


def describe_failure(provider: str, err: BaseException) -> str:
    """One line for scrape_runs and the terminal: what failed, never a secret-bearing dump."""
    if isinstance(err, MissingCredentialsError):
        return redact(f"failed: no credentials: {err}")
    text = str(err) or type(err).__name__
    if not text.startswith(provider):
        text = f"{provider}: {type(err).__name__}: {text}"
    log.debug("%s failed:\n%s", provider, redact("".join(traceback.format_exception(err))))
    return redact(text)


def outcome_from(result: FetchResult | None, plan: SourcePlan, error: str | None, started: Any) -> ScrapeOutcome:
    if result is not None:
        return ScrapeOutcome(plan.provider, plan.mode, result.started_at, result.finished_at, batch=result.batch,
                             requests=result.requests, provider_facts=result.facts,
                             min_row_ratio=result.min_row_ratio, side_tables_only=result.side_tables_only)
    return ScrapeOutcome(plan.provider, plan.mode, started, utcnow(), error=error)


def interrupted_outcome(o: ScrapeOutcome, signum: int) -> ScrapeOutcome:
    """What is recorded for a provider whose merge a signal kept from starting."""
    if o.batch is None:
        return o  # a failed fetch: its failure is recorded as it is
    name = signal.Signals(signum).name
    return ScrapeOutcome(o.provider, o.mode, o.started_at, o.finished_at, requests=o.requests, interrupted=True,
                         error=f"interrupted by {name} before its merge; its fetched results are kept "
                               "for the next refresh")


# Providers merged at once in the write window, each in its own transaction on a cursor of the
# writer: DuckDB runs their statements outside the interpreter lock, and no two transactions
# touch the same row (each edits its own provider's). The world replay's 21 merges: 1.8 s one
# after another, 1.2-1.4 s two at a time.
MERGE_WORKERS = 2


def _rows(outcome: ScrapeOutcome) -> int:
    batch = outcome.batch
    return 0 if batch is None else len(batch.offers) + len(batch.spot_prices) + len(batch.egress) + len(batch.storage)


def merge_outcomes(con: duckdb.DuckDBPyConnection, outcomes: list[ScrapeOutcome], prepared: list[PreparedLoad | None],
                   refresh_id: str, policy: AnomalyPolicy, stopper: Stopper = NEVER,
                   now: Any = None, shown: bool = True) -> list[LoadReport]:
    """load_outcome for every outcome, the reports in the outcomes' order. MERGE_WORKERS
    providers at a time, the largest first; one provider's outcomes (results an earlier refresh
    kept, then this one's) one after another, in their order. Once `stopper` says a signal came,
    no further merge starts (those under way finish): the outcomes left are recorded as
    interrupted. An error stops the merges not yet started and is raised. `shown`: each merge
    is reported to the progress display."""
    reports: list[LoadReport | None] = [None] * len(outcomes)
    by_provider: dict[str, list[int]] = {}
    for i, o in enumerate(outcomes):
        by_provider.setdefault(o.provider, []).append(i)
    local = threading.local()
    cursors: list[duckdb.DuckDBPyConnection] = []
    cursors_lock = threading.Lock()

    def merge(indices: list[int]) -> None:
        cursor = getattr(local, "cursor", None)
        if cursor is None:
            cursor = local.cursor = con.cursor()
            with cursors_lock:
                cursors.append(cursor)
        for i in indices:
            o, p = outcomes[i], prepared[i]
            signum = stopper.requested()
            if signum is not None:
                o, p = interrupted_outcome(o, signum), None
            reports[i] = load_outcome(cursor, o, refresh_id, policy, now=now, prepared=p)
            if shown:
                report_progress("merged", o.provider)

    largest_first = sorted(by_provider.values(), key=lambda group: -sum(_rows(outcomes[i]) for i in group))
    pool = ThreadPoolExecutor(MERGE_WORKERS, thread_name_prefix="merge")
    try:
        for future in [pool.submit(merge, group) for group in largest_first]:
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for cursor in cursors:
            cursor.close()
    return cast("list[LoadReport]", reports)  # each merge set its report, or raised


def load_all(db: str | Path | None, outcomes: list[ScrapeOutcome], refresh_id: str,
             policy: AnomalyPolicy, prepared: list[PreparedLoad | None] | None = None,
             stopper: Stopper = NEVER, early: EarlyMerge | None = None) -> list[LoadReport]:
    """The write window: every provider's rows prepared (`prepared`, one per outcome, from
    warehouse.store.LoadPreparer; prepared here when not given), then merged into a working copy
    of the warehouse, each provider in its own transaction, folded into the copy with one
    checkpoint, and the copy published over the warehouse in one atomic rename
    (warehouse.snapshot): readers holding the warehouse open neither block the window nor see
    it until they reconnect.

    A warehouse that cannot be written (disk full, read-only folder) raises WarehouseError
    naming the first cause; the published warehouse is then unchanged. Once `stopper` says a
    signal came, no further merge starts: the providers left are recorded as interrupted.
    `early`: the outcomes merge_early already merged into the working copy (the same objects):
    the window goes on with that copy and merges the others.
    """
    published = db_path(db)
    merged = early.merged() if early is not None else {}
    left = [i for i, o in enumerate(outcomes) if id(o) not in merged]
    # deduplication and Arrow tables: no need to hold the lock for them
    prepared_left = prepare_loads([outcomes[i] for i in left]) if prepared is None else [prepared[i] for i in left]
    if early is not None:
        work = early.work
        for o in early.outcomes:
            report_progress("merged", o.provider)  # counted among this window's merges by the display
    else:
        try:
            work = start_working_copy(published)
        except PublishError as err:
            raise WarehouseError(f"cannot open {published} for writing: {err}") from err
    try:
        try:
            con = open_writer(work)
        except WarehouseError as err:
            raise WarehouseError(str(err).replace(str(work), str(published), 1)) from err
        except (duckdb.Error, OSError) as err:
            raise WarehouseError(f"cannot open {published} for writing: {root_cause(err)}") from err
        try:
            merged_now = merge_outcomes(con, [outcomes[i] for i in left], prepared_left, refresh_id, policy, stopper)
        finally:
            try:
                close_writer(con)  # the window's one checkpoint
            except duckdb.Error as err:  # left in the WAL: publish refuses the copy
                log.warning("closing the working copy of %s: %s", published, root_cause(err))
        publish(work, published)
    except PublishError as err:
        discard(work)
        raise WarehouseError(f"cannot write {published}: {err}") from err
    except BaseException:
        discard(work)
        raise
    reports = [merged.get(id(o)) for o in outcomes]
    for i, report in zip(left, merged_now):
        reports[i] = report
    return cast("list[LoadReport]", reports)


def saved_last_ok(db: Path) -> dict[str, Any]:
    """Per provider, when its latest successful scrape in the published warehouse started."""
    if not db.exists():
        return {}
    con = open_reader(db)
    try:
        return dict(con.execute("select provider, max(started_at) from scrape_runs where state = 'ok' "
                                "group by provider").fetchall())
    finally:
        con.close()


def saved_earlier(published: Path, refresh_id: str) -> tuple[list[pending.PendingRefresh], list[ScrapeOutcome]]:
    """The results earlier refreshes than `refresh_id` saved and could not write, and their
    outcomes to merge (older first); raises WarehouseError for a saved file that cannot be read."""
    try:
        earlier = [saved for saved in pending.waiting(published) if saved.refresh_id != refresh_id]
        last_ok = saved_last_ok(published) if earlier else {}
    except (pending.PendingError, WarehouseError) as err:
        raise WarehouseError(str(err)) from err
    return earlier, [pending.resumed_outcome(o, saved, last_ok.get(o.provider))
                     for saved in earlier for o in saved.outcomes]


@dataclass
class EarlyMerge:
    """What merge_early merged into the refresh's working copy while a last fetch was running:
    the copy (closed, checkpointed, not published), the earlier refreshes' saved results and
    their outcomes (merged first), and the outcomes it merged with their reports, in order."""

    work: Path
    saved: Path  # the outcomes it merged, kept on disk (warehouse.pending)
    earlier: list[pending.PendingRefresh]
    resumed: list[ScrapeOutcome]
    outcomes: list[ScrapeOutcome]  # resumed, then this refresh's merged here
    reports: list[LoadReport]

    def merged(self) -> dict[int, LoadReport]:
        """Each merged outcome's report, by the outcome object's id."""
        return {id(o): r for o, r in zip(self.outcomes, self.reports)}


def waits_for_last_large_fetch(providers: list[str], fetched: Iterable[str]) -> bool:
    """Whether the only provider of `providers` not fetched yet is a source with a large process:
    the others can then be merged (merge_early) while it runs, the longest fetch of a refresh."""
    left = set(providers) - set(fetched)
    return len(left) == 1 and has_large_process(next(iter(left)))


def merge_early(db: str | Path | None, outcomes: list[ScrapeOutcome], prepared: list[PreparedLoad],
                refresh_id: str, policy: AnomalyPolicy, stopper: Stopper = NEVER) -> EarlyMerge | None:
    """Merge the outcomes fetched so far into the refresh's working copy while its last fetch
    runs, so that the write window then merges that one only. Called when no other process of
    the refresh is large any more (waits_for_last_large_fetch): the writer, closed again before
    this returns, never holds its memory beside the fetches' peaks.

    The outcomes are saved first (warehouse.pending), as the write window saves them: a refresh
    killed from here on keeps them for the next one. Nothing is published. A saved file that
    cannot be read, a warehouse that cannot be written, a signal: the copy is discarded, None
    is returned, and the write window does all of it as it would have (and says why)."""
    published = db_path(db)
    saved = work = None
    try:
        earlier, resumed = saved_earlier(published, refresh_id)
        saved = pending.save(published, refresh_id, utcnow(), outcomes)
        work = start_working_copy(published)
        merging = resumed + outcomes
        con = open_writer(work)
        try:
            reports = merge_outcomes(con, merging, prepare_loads(resumed) + prepared, refresh_id, policy, stopper,
                                     shown=False)
        finally:
            close_writer(con)
        if stopper.requested() is not None or any(r.state == "interrupted" for r in reports):
            raise RefreshInterrupted(stopper.requested() or signal.SIGTERM, "while fetching")
    except Exception as err:  # noqa: BLE001 - the write window meets it again and reports it
        log.info("merging every provider once the fetch is over, not early: %s", root_cause(err))
        if work is not None:
            discard(work)
        if saved is not None:
            pending.done(saved)  # the write window saves them again
        return None
    log.info("merged %d providers while the last fetch runs", len(outcomes))
    return EarlyMerge(work, saved, earlier, resumed, merging, reports)


def load_keeping_fetched(db: str | Path | None, outcomes: list[ScrapeOutcome], refresh_id: str,
                         policy: AnomalyPolicy, prepared: list[PreparedLoad] | None = None,
                         stopper: Stopper = NEVER, early: EarlyMerge | None = None) -> list[LoadReport]:
    """load_all, with nothing fetched thrown away (warehouse.pending): this refresh's outcomes are
    saved before the write window and forgotten once it is published; outcomes an earlier
    refresh saved and could not write are merged first, older first. The caller holds the
    refresh lock. A failed window raises WarehouseError saying where the results are kept.
    `early` (from merge_early, with outcomes among `outcomes`): the window goes on from its
    working copy; a fetch cut short by a signal discards it (nothing is merged then)."""
    published = db_path(db)
    if early is not None and stopper.requested() is not None:
        discard(early.work)
        early = None
    if early is not None:
        earlier, resumed = early.earlier, early.resumed
    else:
        earlier, resumed = saved_earlier(published, refresh_id)
    this = None
    if outcomes:
        try:
            this = pending.save(published, refresh_id, utcnow(), outcomes)
        except OSError as err:  # the write window would fail the same way: say so, and try it
            log.warning("could not keep the fetched results of %s on disk: %s", refresh_id, root_cause(err))
            this = early.saved if early is not None else None  # what was kept before
    if prepared is None:
        prepared = prepare_loads(outcomes)
    while_fetching = stopper.requested() is not None  # the fetch was cut short: nothing is merged
    stopper.in_window = True  # a signal from here on stops the window between two merges
    try:
        everything = resumed + outcomes
        # the earlier refreshes' outcomes are either all merged early or all merged in the window
        resumed_prepared = prepare_loads(resumed) if early is None else [None] * len(resumed)
        reports = load_all(db, everything, refresh_id, policy, prepared=resumed_prepared + prepared,
                           stopper=stopper, early=early)
    except WarehouseError as err:
        if this is None:
            raise
        try:
            pending.record_write_error(this, str(err))
        except OSError:
            pass  # the results themselves are on disk; only the reason is missing
        raise WarehouseError(f"{err}. The fetched results are kept in {this}: the next refresh, or "
                             f"`gpuledger refresh --resume`, merges them") from err
    interrupted = sum(r.state == "interrupted" for r in reports)
    left = [o for o, r in zip(everything, reports) if r.state == "interrupted" and o.batch is not None]
    signum = stopper.requested()
    kept = None
    if left:  # the merges a signal kept from starting: saved again, on their own
        try:
            kept = pending.save(published, refresh_id, utcnow(), left)
            pending.record_write_error(kept, f"interrupted by {signal.Signals(signum or signal.SIGTERM).name}")
        except OSError as err:
            log.warning("could not keep the interrupted results of %s on disk: %s", refresh_id, root_cause(err))
    for saved in earlier:
        pending.done(saved.path)
    if this is not None and this != kept:
        pending.done(this)
    if signum is not None and interrupted:
        where = "while fetching" if while_fetching else "in the write window"
        kept_in = (f", the fetched results of {len(left)} kept in {kept} for the next refresh "
                   "(or `gpuledger refresh --resume`)") if kept else ""
        raise RefreshInterrupted(signum, f"{where}: {sum(r.ok for r in reports)} providers merged, "
                                         f"{interrupted} recorded as interrupted{kept_in}")
    return reports


def plans_for(providers: list[str], mode: str, replay_urls: dict[str, str] | None = None,
              replay_settings: dict[str, dict[str, Any]] | None = None, record_dir: str | None = None,
              since: dict[str, dict[str, str]] | None = None, **http: Any) -> list[SourcePlan]:
    """`since`: provider -> its SourceContext.since marks (warehouse.spot.read_since)."""
    return [
        SourcePlan(provider=p, mode=mode, replay_urls=dict(replay_urls or {}),
                   settings=dict((replay_settings or {}).get(p, {})), since=dict((since or {}).get(p, {})),
                   record_dir=record_dir, **http)
        for p in providers
    ]


def last_scrape_seconds(db: str | Path | None) -> dict[str, float]:
    """Per provider, how long its latest successful scrape took (empty for a new warehouse, or one
    that cannot be read: the start order is a schedule, never a reason to fail a refresh)."""
    path = db_path(db)
    if not path.exists():
        return {}
    try:
        con = open_reader(path)
    except (WarehouseError, duckdb.Error, OSError) as err:
        log.debug("no scrape durations for the start order: %s", err)
        return {}
    try:
        rows = con.execute(
            "select provider, arg_max(epoch(finished_at) - epoch(started_at), started_at) from scrape_runs "
            "where state = 'ok' and finished_at is not null group by provider").fetchall()
    except duckdb.Error as err:
        log.debug("no scrape durations for the start order: %s", err)
        return {}
    finally:
        con.close()
    return {provider: float(seconds) for provider, seconds in rows if seconds is not None}


def start_order(plans: list[SourcePlan], last_seconds: dict[str, float] | None = None) -> list[SourcePlan]:
    """The order the flow submits its provider tasks in: the task runner has fewer workers than
    there are providers, and a task submitted late starts late.

    A browser-rendered page source comes first, then the API sources with a large process
    (LARGE_PROCESS_SOURCES: the longest of a refresh, its critical path among them), then the
    other page sources, then the other API sources. The browser-rendered page and the first large
    source so run at once, and the second large source waits for the page (turn_waits): its
    render is over before that source's process grows. A crawl child's start-up (Python, scrapy)
    is CPU work that overlaps the API sources' waits on the network only if it starts early, so
    the page sources come before the small API sources. Within each group the longest scrape of
    the last refresh (`last_scrape_seconds`) starts first; the rest keep their order.
    """
    known = last_seconds or {}

    def key(plan: SourcePlan) -> tuple[int, float]:
        source = spec(plan.provider)
        if source.needs_browser:
            group = 0
        elif plan.provider in LARGE_PROCESS_SOURCES:
            group = 1
        else:
            group = 2 if source.source_kind == "page" else 3
        return group, -known.get(plan.provider, 0.0)

    return sorted(plans, key=key)


def bundled_recordings() -> Path:
    return BUNDLED_RECORDINGS
