"""The `nightly_refresh` Prefect flow: one task per provider, concurrently.

A provider task only fetches and parses; the flow then merges every result
in one short write window (one transaction per provider), the others meanwhile
when only a large fetch is left (flows.pipeline.merge_early). A failed task,
after its retries, becomes a failed scrape_runs row: it never stops, delays
past its timeout, or rolls back the other providers.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from prefect import allow_failure, flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.futures import as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from gpuledger.adapters.base import SourceError
from gpuledger.adapters.replay import ReplayServer, read_endpoints
from gpuledger.flows import cadence
from gpuledger.flows.pipeline import (
    EarlyMerge, FetchResult, ScrapeTimeout, SourcePlan, bundled_recordings, describe_failure, fetch_within,
    last_scrape_seconds, load_keeping_fetched, merge_early, outcome_from, plans_for, resolve_providers,
    prepare_children, start_order, turn_waits, waits_for_last_large_fetch,
)
from gpuledger.flows.changes import moves_markdown, refresh_price_moves
from gpuledger.flows.progress import report as report_progress
from gpuledger.warehouse.settings import env_name, load_settings
from gpuledger.flows.stopping import RefreshInterrupted, stop_on_signals, stop_reported_once
from gpuledger.warehouse.spot import read_since
from gpuledger.warehouse.store import (
    AnomalyPolicy, LoadPreparer, LoadReport, PreparedLoad, ScrapeOutcome, new_id, utcnow,
)

log = logging.getLogger("gpuledger.refresh")

PRICE_MOVES_TOP = 10


def task_runner_from_env() -> TaskRunner:
    """The flow's task runner, chosen by the `task_runner` setting when the flow module is imported
    (Prefect binds a flow's runner when the flow object is made; a process worker imports the
    module afresh for every flow run, so that is the run's own environment).

    thread (default): provider tasks on threads of this process. dask: prefect-dask's
    DaskTaskRunner; with `dask_address` (tcp://scheduler:8786) the tasks go to that cluster,
    otherwise to a temporary local cluster of processes (`dask_workers` of them) started for each
    flow run. A test or script can also pass any runner: `nightly_refresh.with_options(task_runner=...)`.
    """
    settings = load_settings()
    var = env_name("task_runner")
    kind = settings.task_runner.strip().lower()
    if kind in ("", "thread", "threads"):
        return ThreadPoolTaskRunner(max_workers=8)
    if kind != "dask":
        raise ValueError(f"{var}={kind!r}: use thread or dask")
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as err:
        raise ImportError(f"{var}=dask needs prefect-dask: pip install prefect-dask") from err
    address = settings.dask_address.strip()
    if address:
        return DaskTaskRunner(address=address)
    workers = settings.dask_workers
    return DaskTaskRunner(cluster_kwargs={"n_workers": workers} if workers else None)


def retry_only_crashes(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect's retry condition for a provider task: retry a crash, never a provider's verdict.

    A SourceError (or a ScrapeTimeout) comes after the HTTP policy already spent its attempts on
    the failing request, or from an answer that will not change (a 4xx, a changed schema): running
    the whole scrape again would only multiply the hits on a failing endpoint. What is left is a
    crash of the task itself (a lost Dask worker, an unexpected exception), which a fresh attempt
    may get past.
    """
    err = state.result(raise_on_failure=False)
    return isinstance(err, BaseException) and not isinstance(err, (SourceError, ScrapeTimeout))


@task(name="scrape-provider", task_run_name="scrape-{plan.provider}")
def scrape_provider(plan: SourcePlan) -> FetchResult:
    """One provider's scrape, given up after the `task_timeout_s` setting (see fetch_within).

    The timeout is enforced here, not by Prefect's timeout_seconds: that cannot interrupt a
    synchronous task's blocking I/O, and an async task (awaiting a worker thread) would start an
    event loop and an API client of its own, CPU the other providers' parsing needs.
    """
    return fetch_within(plan, load_settings().task_timeout_s)


def summarize(refresh_id: str, reports: list[LoadReport]) -> dict[str, Any]:
    return {
        "refresh_id": refresh_id,
        "ok": all(r.ok for r in reports),
        "failed": [r.provider for r in reports if not r.ok],
        "providers": [
            {"provider": r.provider, "state": r.state, "offers": r.rows_loaded, "new": r.new,
             "changed": r.changed, "closed": r.closed, "quarantined": r.rows_quarantined,
             "egress": r.egress_rows, "storage": r.storage_rows, "error": r.error, "notes": r.notes}
            for r in reports
        ],
    }


def _artifact_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# gpuledger refresh {summary['refresh_id']}", "",
             "| provider | state | offers | new | changed | closed | quarantined | error |",
             "|---|---|---|---|---|---|---|---|"]
    for p in summary["providers"]:
        err = (p["error"] or "").replace("|", "/").replace("\n", " ")[:300]
        lines.append(f"| {p['provider']} | {p['state']} | {p['offers']} | {p['new']} | {p['changed']} | "
                     f"{p['closed']} | {p['quarantined']} | {err} |")
    if "price_moves" in summary:
        lines += ["", f"## Largest price moves (top {PRICE_MOVES_TOP}, by relative change)", "",
                  moves_markdown(summary["price_moves"])]
    failed = [p for p in summary["providers"] if p["state"] != "ok"]
    if failed:
        lines += ["", "## Failures", ""]
        lines += [f"- **{p['provider']}**: {(p['error'] or 'failed').replace(chr(10), ' ')}" for p in failed]
    return "\n".join(lines)


@contextmanager
def interruptible_fetch(plans: list[SourcePlan], outcomes: dict[str, Any], prepared: dict[str, Any],
                        started: Any) -> Iterator[None]:
    """A signal while fetching ends the fetch: the providers not fetched yet count as interrupted
    (the write window then records every provider as interrupted, merging none, and keeps what
    was fetched for the next refresh)."""
    try:
        yield
    except RefreshInterrupted as stop:
        log.warning("%s: the providers fetched so far are kept, none is merged", stop)
        for plan in plans:
            if plan.provider not in outcomes:
                outcomes[plan.provider] = ScrapeOutcome(
                    plan.provider, plan.mode, started, utcnow(), interrupted=True,
                    error=f"interrupted by {stop.name} while fetching")
                prepared[plan.provider] = PreparedLoad()


@flow(name="nightly_refresh", task_runner=task_runner_from_env())
def nightly_refresh(db: str | None = None, providers: Sequence[str] | None = None, replay: bool = False,
                    recordings: str | None = None, record_dir: str | None = None,
                    accept_anomaly: Sequence[str] = (), http_attempts: int = 3,
                    retry_wait_max_s: float = 8.0, group: str | None = None,
                    lock_wait_s: float = 0.0, resume: bool = False,
                    replay_endpoints: str | None = None) -> dict[str, Any]:
    """Refresh the warehouse from every provider (or the named ones, or a cadence group's).

    replay=True answers every request from recordings (bundled by default)
    over loopback HTTP; record_dir saves what each provider answered.
    `group` (flows/cadence.py) names the providers when `providers` does not; `lock_wait_s`:
    how long to wait for a running refresh to finish before giving up (0: refused at once).
    Results an earlier refresh fetched but could not write are merged first;
    resume=True merges only those, fetching nothing. `replay_endpoints` (with replay=True): a
    file from adapters.replay.write_endpoints; the clients go to that already running replay
    server (another process) instead of one started here.
    """
    stop_reported_once()
    names = [] if resume else resolve_providers(list(providers or (cadence.providers_in(group) if group else [])))
    refresh_id = new_id("refresh")
    with cadence.refresh_lock_within(db, lock_wait_s), stop_on_signals() as stopper:
        external = read_endpoints(replay_endpoints) if replay and replay_endpoints and names else None
        server = ReplayServer(recordings or bundled_recordings(), providers=names) \
            if replay and names and external is None else None
        if server is not None:
            server.start()
        try:
            mode = "record" if record_dir else ("replay" if replay else "live")
            urls, replay_settings = external or ((server.endpoints(), server.settings) if server else (None, None))
            plans = plans_for(names, mode, urls, replay_settings, record_dir, since=read_since(db),
                              http_attempts=http_attempts, retry_wait_max_s=retry_wait_max_s)
            plans = start_order(plans, last_scrape_seconds(db) if names else {})
            prepare_children(names)
            # A recording answers the same way every time: a replay is never retried. Live, only a
            # crash is (retry_only_crashes): the HTTP policy already retried each request.
            retries = 0 if replay else load_settings().task_retries
            runner = scrape_provider.with_options(retries=retries, retry_delay_seconds=[10, 60][:retries] or 0,
                                                  retry_condition_fn=retry_only_crashes)
            waits = turn_waits(plans, load_settings().large_fetches)
            started = utcnow()
            futures: dict[Any, SourcePlan] = {}
            submitted: dict[str, Any] = {}
            for plan in plans:
                waited = waits.get(plan.provider)  # a provider earlier in `plans`, so already submitted
                future = runner.submit(plan, wait_for=[allow_failure(submitted[waited])] if waited else None)
                futures[future] = plan
                submitted[plan.provider] = future
            outcomes, prepared = {}, {}
            policy = AnomalyPolicy.from_env(accept_anomaly)
            early: Future[EarlyMerge | None] | None = None
            # Each provider's rows are prepared for the write window (deduplicated, made Arrow) as
            # its scrape finishes, while slower providers are still fetching; once only a large
            # fetch is left, the others are merged meanwhile (merge_early).
            with LoadPreparer() as preparer, ThreadPoolExecutor(1, thread_name_prefix="early-merge") as merger, \
                    interruptible_fetch(plans, outcomes, prepared, started):
                for fut in as_completed(list(futures)):
                    plan = futures[fut]
                    result = fut.result(raise_on_failure=False)
                    if isinstance(result, BaseException):
                        error = describe_failure(plan.provider, result)
                        log.warning("%s: failed: %s", plan.provider, error)
                        outcomes[plan.provider] = outcome_from(None, plan, error, started)
                        report_progress("failed", plan.provider)
                    else:
                        counts = result.batch.counts()
                        log.info("%s: fetched %d offers, %d egress, %d storage, %d quarantined (%d requests)",
                                 plan.provider, counts["offers"], counts["egress"], counts["storage"],
                                 counts["quarantined"], result.requests)
                        outcomes[plan.provider] = outcome_from(result, plan, None, started)
                        report_progress("fetched", plan.provider)
                    prepared[plan.provider] = preparer.prepare(outcomes[plan.provider])
                    if early is None and waits_for_last_large_fetch(names, outcomes):
                        done = [n for n in names if n in outcomes]
                        early = merger.submit(merge_early, db, [outcomes[n] for n in done],
                                              [prepared[n] for n in done], refresh_id, policy, stopper)
        finally:
            if server is not None:
                server.close()
        report_progress("merging")
        reports = load_keeping_fetched(db, [outcomes[n] for n in names], refresh_id, policy,
                                       prepared=[prepared[n] for n in names], stopper=stopper,
                                       early=early.result() if early is not None else None)
    summary = summarize(refresh_id, reports)
    try:  # read back after the write window: what this refresh changed most
        summary["price_moves"] = refresh_price_moves(db, refresh_id, PRICE_MOVES_TOP)
    except Exception as err:  # a report, never a reason to fail the refresh
        log.warning("could not read the price moves back: %s", err)
    try:
        create_markdown_artifact(markdown=_artifact_markdown(summary), key="gpuledger-refresh",
                                 description="rows, changes, largest price moves and failures per provider")
    except Exception as err:  # an artifact is a report, never a reason to fail the refresh
        log.warning("could not publish the Prefect artifact: %s", err)
    return summary

