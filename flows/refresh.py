"""The `nightly_refresh` Prefect flow: per provider, concurrently, a fetch in a child process (flows.fetch)
whose outcome waits on disk (warehouse.pending); then one short write window merges them, one transaction
per provider. A failed task becomes a failed scrape_runs row and never stops or rolls back the others."""

from __future__ import annotations

import json
import logging
import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Sequence

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.futures import as_completed
from prefect.runtime import deployment as this_deployment
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from gpuledger import children
from gpuledger.adapters.base import SourceError
from gpuledger.adapters.registry import SOURCES, UNITS, UnknownProviderError, accepted_anomalies, source_module
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer, read_endpoints
from gpuledger.flows import cadence
from gpuledger.flows.changes import moves_markdown, refresh_price_moves
from gpuledger.flows.fetch import SourcePlan, describe_failure, failed, fetch_in_child
from gpuledger.flows.prefect_api import api_troubles_off_the_terminal
from gpuledger.flows.progress import report as report_progress
from gpuledger.flows.stopping import RefreshInterrupted, stop_on_signals, stop_reported_once
from gpuledger.warehouse import pending
from gpuledger.warehouse.recommender.names import resolve_name
from gpuledger.warehouse.settings import env_name, load_settings
from gpuledger.warehouse.spot import read_since
from gpuledger.warehouse.validators import read_validators
from gpuledger.warehouse.store import AnomalyPolicy, LoadReport, WarehouseError, db_path, merge_pending, new_id

log = logging.getLogger("gpuledger.refresh")
# Before the import-time settings warning below: a record logged outside a flow run never makes Prefect's API
# handler warn on the terminal of the process that runs the flow (a served or worker run's own).
api_troubles_off_the_terminal()

PRICE_MOVES_TOP = 10
FETCHES_AT_ONCE = 8


def fetches_at_once(replay: bool) -> int:
    """Live fetches wait on the providers' answers, so more run than there are cores; a replay waits on
    none, and more fetches than the cores and one only contend for them."""
    return min(FETCHES_AT_ONCE, (os.cpu_count() or 1) + 1) if replay else FETCHES_AT_ONCE


def task_runner_from_env(replay: bool = False) -> TaskRunner:
    """The flow's task runner by the `task_runner` setting at import (a process worker imports the module afresh
    per run): threads (`fetches_at_once(replay)` at a time), or prefect-dask's on `dask_address`, else a local one."""
    settings = load_settings()
    var = env_name("task_runner")
    kind = settings.task_runner.strip().lower()
    if kind in ("", "thread", "threads"):
        return ThreadPoolTaskRunner(max_workers=fetches_at_once(replay))
    if kind != "dask":
        raise ValueError(f"{var}={kind!r}: use thread or dask")
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError as err:
        raise ImportError(f"{var}=dask needs prefect-dask: pip install prefect-dask") from err
    if settings.dask_address.strip():
        return DaskTaskRunner(address=settings.dask_address.strip())
    return DaskTaskRunner(cluster_kwargs={"n_workers": settings.dask_workers} if settings.dask_workers else None)


def retry_only_crashes(task: Any, task_run: Any, state: Any) -> bool:
    """Retry a crash of a provider task itself (a lost Dask worker), never a provider's verdict: the fetch
    child makes every failure of the provider its outcome, after the HTTP policy's own retries."""
    err = state.result(raise_on_failure=False)
    return isinstance(err, BaseException) and not isinstance(err, SourceError)


@task(name="scrape-provider", task_run_name="scrape-{plan.provider}")
def scrape_provider(plan: SourcePlan) -> dict[str, bytes]:
    """One provider's fetch in a child process, stopped after `task_timeout_s`; its outcome's files."""
    if children.NO_NEW_CHILDREN.is_set():  # a module's flag: the task is pickled whole for a dask worker
        return {}
    return fetch_in_child(plan, load_settings().task_timeout_s)


def ensure_browsers(providers: list[str], say: Any = print) -> None:
    """Find (or install) the Chromium a requested page source renders with, before any fetch; a failure is
    one line, and that provider then fails on its own."""
    if not any(source_module(n).PROVIDER.needs_browser for n in providers):
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
    try:  # any case (AWS is aws); an unknown name is refused naming the nearest
        return list(dict.fromkeys(resolve_name("provider", n, [*SOURCES, *UNITS]) for n in names))
    except ValueError as err:
        raise UnknownProviderError(str(err)) from None


def check_record_dir(record_dir: str | None, replay: bool, recordings: str | None) -> None:
    """WarehouseError when `record_dir` is the folder being replayed (bundled unless `recordings`): the bodies
    being served would be rewritten as they are recorded, and a paged answer then never ends."""
    if replay and record_dir and Path(record_dir).resolve() == Path(recordings or BUNDLED_RECORDINGS).resolve():
        raise WarehouseError(f"cannot record into {record_dir}: it is the recording folder being replayed; "
                             "record into another folder")


def summarize(refresh_id: str, reports: list[LoadReport]) -> dict[str, Any]:
    return {
        "refresh_id": refresh_id,
        "ok": all(r.ok for r in reports),
        "failed": [r.provider for r in reports if not r.ok],
        "not_configured": [r.provider for r in reports if r.state == "not_configured"],
        "providers": [
            {"provider": r.provider, "state": r.state, "offers": r.rows_loaded, "new": r.new,
             "changed": r.changed, "closed": r.closed, "quarantined": r.rows_quarantined,
             "egress": r.egress_rows, "storage": r.storage_rows, "error": r.error, "notes": r.notes,
             "degraded": r.degraded}
            for r in reports
        ],
    }


def _artifact_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# gpuledger refresh {summary['refresh_id']}", "",
             "| provider | state | offers | new | changed | closed | quarantined | error or note |",
             "|---|---|---|---|---|---|---|---|"]
    for p in summary["providers"]:
        # A result an earlier refresh fetched, merged now: its row says so, else it reads as the same provider twice.
        resumed = "; ".join(n for n in p["notes"] if n.startswith("resumed: "))
        said = p["error"] or (f"degraded: {p['degraded']}" if p["degraded"] else resumed)
        err = said.replace("|", "/").replace("\n", " ")[:300]
        lines.append(f"| {p['provider']} | {p['state']} | {p['offers']} | {p['new']} | {p['changed']} | "
                     f"{p['closed']} | {p['quarantined']} | {err} |")
    if "price_moves" in summary:
        lines += ["", f"## Largest price moves (top {PRICE_MOVES_TOP}, by relative change)", "",
                  moves_markdown(summary["price_moves"])]
    failures = [p for p in summary["providers"] if p["state"] not in ("ok", "not_configured")]
    if failures:
        lines += ["", "## Failures", ""]
        for p in failures:
            said = pending.unlabelled(p["provider"], p["error"] or "failed").replace("\n", " ")
            lines.append(f"- **{p['provider']}**: {said}")
    return "\n".join(lines)


@flow(name="nightly_refresh", task_runner=task_runner_from_env())
def nightly_refresh(db: str | None = None, providers: Sequence[str] | None = None, replay: bool = False,
                    recordings: str | None = None, record_dir: str | None = None,
                    accept_anomaly: Sequence[str] = (), http_attempts: int = 3,
                    retry_wait_max_s: float = 8.0, group: str | None = None,
                    lock_wait_s: float = 0.0, resume: bool = False,
                    replay_endpoints: str | None = None) -> dict[str, Any]:
    """Refresh the warehouse from every provider (or the named ones, or a cadence group's). replay: answer from
    recordings (bundled, or the running replay server whose endpoints file `replay_endpoints` is); record_dir: save
    every answer; lock_wait_s: wait this long for a running refresh (0: refused at once). Results an earlier refresh
    could not write are merged first; resume: only those."""
    stop_reported_once()
    api_troubles_off_the_terminal(run_process=this_deployment.id is not None)
    children.NO_NEW_CHILDREN.clear()
    check_record_dir(record_dir, replay, recordings)
    names = [] if resume else resolve_providers(list(providers or (cadence.providers_in(group) if group else [])))
    accept_anomaly = accepted_anomalies(accept_anomaly, "accept_anomaly")  # a deployment's parameter too
    refresh_id = new_id("refresh")
    folder = pending.pending_dir(db_path(db)) / refresh_id
    # the lock names this refresh's id: `status` tells its saved results from a stopped refresh's
    with (cadence.refresh_lock_within(db, lock_wait_s, doing=f"refresh {refresh_id}"),
          stop_on_signals() as stopper, ExitStack() as replaying):
        urls: dict[str, str] = {}
        settings: dict[str, dict[str, Any]] = {}
        if replay and names and replay_endpoints:
            urls, settings = read_endpoints(replay_endpoints)
        elif replay and names:
            server = replaying.enter_context(ReplayServer(recordings or BUNDLED_RECORDINGS, providers=names))
            urls, settings = server.endpoints(), server.settings
        mode = "record" if record_dir else ("replay" if replay else "live")
        since, validators = read_since(db), read_validators(db)
        plans = [SourcePlan(provider=p, mode=mode, replay_urls=dict(urls), settings=dict(settings.get(p, {})),
                            since=since.get(p, {}), validators=validators.get(p, {}), record_dir=record_dir,
                            cache_dir=f"{db_path(db)}.cache/{p}", http_attempts=http_attempts,
                            retry_wait_max_s=retry_wait_max_s) for p in names]
        # A recording answers the same way every time: a replay is never retried. Live, only a
        # crash is (retry_only_crashes): the HTTP policy already retried each request.
        retries = 0 if replay else load_settings().task_retries
        runner = scrape_provider.with_options(retries=retries, retry_delay_seconds=[10, 60][:retries] or 0,
                                              retry_condition_fn=retry_only_crashes)
        try:
            with children.reusing_workers():
                futures = {runner.submit(plan): plan for plan in plans}
                for future in as_completed(list(futures)):
                    plan = futures[future]
                    files = future.result(raise_on_failure=False)
                    try:
                        if isinstance(files, BaseException):  # the task itself crashed, after its retries
                            pending.write(folder, failed(plan, describe_failure(plan.provider, files)))
                        else:
                            saved = pending.save(folder, files)
                            log.info("%s", pending.describe(json.loads(files[saved.name])))
                    except OSError as err:
                        children.NO_NEW_CHILDREN.set()  # the provider tasks still to run fetch nothing
                        children.stop_all()
                        said = f"cannot write beside the warehouse {db_path(db)}: {folder}: {err.strerror or err}"
                        kept = pending.waiting(db_path(db))
                        pending.record_write_error([p for p in kept if p.parent == folder], said)
                        raise WarehouseError(f"{said}. The {len(kept)} fetched results saved wait in "
                                             f"{pending.pending_dir(db_path(db))}: the next refresh, or "
                                             "`gpuledger refresh --resume`, merges them") from None
                    report_progress("fetched", plan.provider)
        except RefreshInterrupted as stop:
            stopper.in_window = True  # a second Ctrl-C is only noted: the fetches are stopped and the rest said
            children.NO_NEW_CHILDREN.set()
            stopped = children.stop_all()
            kept = len(pending.waiting(db_path(db)))
            raise RefreshInterrupted(stop.signum, f"while fetching ({stopped} fetches stopped); {kept} fetched "
                                     "results are kept for the next refresh (or `gpuledger refresh --resume`)")
        replaying.close()  # the merge needs no recording: the replay server's threads and files go first
        report_progress("merging", total=len(pending.waiting(db_path(db))))
        stopper.in_window = True  # a signal from here on stops the merge between two providers
        reports = merge_pending(db, refresh_id, AnomalyPolicy.from_env(accept_anomaly),
                                stop_requested=lambda: stopper.signum is not None,
                                on_merged=lambda provider: report_progress("merged", provider))
        if stopper.signum is not None:
            left = sum(r.state == "interrupted" for r in reports)
            raise RefreshInterrupted(stopper.signum, f"in the write window: {len(reports) - left} merged, "
                                     f"{left} wait in {pending.pending_dir(db_path(db))}")
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
