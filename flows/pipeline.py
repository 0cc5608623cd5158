"""The refresh, as plain functions the Prefect flow orchestrates.

fetch (per provider, no warehouse access, may run concurrently) -> load (one
short write window, one transaction per provider). Nothing here knows about
Prefect, so each step can be called and tested directly.
"""

from __future__ import annotations

import logging
import threading
import traceback
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from gpuledger.adapters.base import MissingCredentialsError, RedactingRecorder, SourceContext, redact
from gpuledger.adapters.registry import SOURCES, UnknownProviderError, source_module, spec
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, RecordingProxy
from gpuledger.flows.progress import report as report_progress
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.settings import env_name
from gpuledger.warehouse.store import (
    AnomalyPolicy, LoadReport, PreparedLoad, ScrapeOutcome, WarehouseError, close_writer, db_path, load_outcome,
    open_writer, prepare_loads, root_cause, utcnow,
)

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
            "(Debian's chromium as root, else `playwright install chromium`) ...")

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
        retry_budget_s=plan.retry_budget_s, http_timeout_s=plan.http_timeout_s,
    )
    if recorder is not None:
        proxy = RecordingProxy(recorder, ctx.upstream_url)
        ctx.proxy = proxy
    try:
        batch = module.fetch(ctx)
    finally:
        if proxy is not None:
            proxy.close()
    if recorder is not None:
        recorder.write_manifest(plan.settings, started.isoformat(timespec="seconds"))
    provider = module.PROVIDER
    return FetchResult(plan.provider, batch, ctx.requests_made, started, utcnow(), provider.facts_row(),
                       min_row_ratio=provider.anomaly.min_row_ratio)


class ScrapeTimeout(TimeoutError):
    pass


def fetch_within(plan: SourcePlan, timeout_s: float) -> FetchResult:
    """fetch_source in a daemon thread, waited on for at most `timeout_s` seconds.

    A scrape stuck in blocking I/O cannot be interrupted from outside its thread, so on timeout
    it is abandoned (its thread holds nothing the refresh needs and ends with the process) and
    ScrapeTimeout is raised for the flow to record, while the other providers go on.
    """
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
        raise ScrapeTimeout(f"{plan.provider}: the scrape did not finish within {timeout_s:g} s "
                            f"({env_name('task_timeout_s')}) and was abandoned") from None


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
                             min_row_ratio=result.min_row_ratio)
    return ScrapeOutcome(plan.provider, plan.mode, started, utcnow(), error=error)


def load_all(db: str | Path | None, outcomes: list[ScrapeOutcome], refresh_id: str,
             policy: AnomalyPolicy, prepared: list[PreparedLoad] | None = None) -> list[LoadReport]:
    """The write window: every provider's rows prepared (`prepared`, one per outcome, from
    warehouse.store.LoadPreparer; prepared here when not given), open, merge each provider in
    its own transaction (each commit logged to the WAL), fold them into the file with one
    checkpoint, close.

    A warehouse that cannot be written (disk full, read-only file) raises WarehouseError
    naming the first cause; what was committed before stays, nothing else changes.
    """
    if prepared is None:
        prepared = prepare_loads(outcomes)  # deduplication and Arrow tables: no need to hold the lock for them
    try:
        con = open_writer(db)
    except WarehouseError:
        raise
    except (duckdb.Error, OSError) as err:
        raise WarehouseError(f"cannot open {db_path(db)} for writing: {root_cause(err)}") from err
    try:
        reports = []
        for o, p in zip(outcomes, prepared):
            reports.append(load_outcome(con, o, refresh_id, policy, prepared=p))
            report_progress("merged", o.provider)
        return reports
    finally:
        try:
            close_writer(con)  # the window's one checkpoint
        except duckdb.Error as err:  # a checkpoint that failed: the commits are safe in the WAL
            log.warning("closing %s: %s", db_path(db), root_cause(err))


def plans_for(providers: list[str], mode: str, replay_urls: dict[str, str] | None = None,
              replay_settings: dict[str, dict[str, Any]] | None = None, record_dir: str | None = None,
              **http: Any) -> list[SourcePlan]:
    return [
        SourcePlan(provider=p, mode=mode, replay_urls=dict(replay_urls or {}),
                   settings=dict((replay_settings or {}).get(p, {})), record_dir=record_dir, **http)
        for p in providers
    ]


def bundled_recordings() -> Path:
    return BUNDLED_RECORDINGS
