"""`gpuledger report`, `gpuledger plot` and `gpuledger serve`: pictures and the schedule."""

from __future__ import annotations

import io
import logging
import math
import os
import sys
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from rich.console import Console

from gpuledger.flows.literal import literal
from gpuledger.flows.output import counted, fail, out
from gpuledger.warehouse.freshness import DEFAULT_MAX_AGE_HOURS, MAX_AGE_HOURS
from gpuledger.warehouse.store import WarehouseError
from gpuledger.warehouse.settings import env_name

err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)

NIGHTLY_CRON = "0 3 * * *"  # 03:00 UTC, after the providers' overnight price-list publications
NIGHTLY_TIMEZONE = "UTC"
DEPLOYMENT_NAME = "nightly"  # prefect.yaml's deployment, run by a work pool's workers
SERVE_DEPLOYMENT_NAME = "serve"  # `gpuledger serve`'s own, so it never takes over prefect.yaml's
DbOption = typer.Option(None, "--db", envvar=env_name("db"), help="The DuckDB warehouse file.",
                        show_default="./gpuledger.duckdb")


def finite(value: float) -> float:
    """An option's number, refused as a usage error when it is NaN or infinite."""
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a finite number")
    return value


def hours_of_staleness(value: float) -> float:
    """--stale-after: more than 0 hours (0 would call every provider stale) and at most MAX_AGE_HOURS."""
    if not 0 < value <= MAX_AGE_HOURS:  # NaN is refused too
        raise typer.BadParameter(f"{value:g} is not a number of hours within (0, {MAX_AGE_HOURS:g}]")
    return value


StaleAfterOption = typer.Option(DEFAULT_MAX_AGE_HOURS, "--stale-after", callback=hours_of_staleness,
                                help="Hours after which a provider's last success counts as stale.")


def accepted_anomalies(names: list[str]) -> list[str]:
    """--accept-anomaly's providers, named in any case (as -p), and the setting's checked alike; one that is
    no provider is a usage error naming the nearest."""
    from gpuledger.adapters import registry

    try:
        return registry.accepted_anomalies(names, "--accept-anomaly")
    except registry.UnknownProviderError as err:
        raise fail(str(err), 2) from None


def report_command(
    out_file: Path = typer.Argument(..., metavar="OUT.html", help="The page to write (one self-contained file)."),
    db: Optional[Path] = DbOption,
    egress_gb: float = typer.Option(140.0, "--egress-gb", min=0, callback=finite, help="The egress column prices "
                                    "downloading this many GB from the offer's region (tiered)."),
    stale_after_hours: float = StaleAfterOption,
    model: list[str] = typer.Option([], "--model", "-m", help="A model whose fine-tuning answers (every method) "
                                    "the page carries (repeatable).",
                                    show_default="nine common ones, llama-3-8b to qwen2.5-72b"),
) -> None:
    """Write a static HTML page comparing every current offer.

    Three views: one row per GPU (cheapest on demand and spot per provider),
    every offer (filter, sort and columns kept in the link), and the
    recommender's answers for common fine-tuning jobs. No external
    resources: open it anywhere.

    \b
    Example:
      gpuledger report prices.html && xdg-open prices.html
    """
    from gpuledger.flows.report import COMMON_MODELS, loaded_count, write_report

    try:
        report = write_report(db, out_file, egress_gb=egress_gb, stale_after_hours=stale_after_hours,
                              models=model or COMMON_MODELS)
    except (WarehouseError, ValueError) as e:
        raise fail(str(e), 2) from None
    except OSError as e:
        raise fail(f"cannot write {out_file}: {e.strerror or e}") from None
    providers = counted(loaded_count(report.providers), "provider")
    err.print(literal(f"{counted(len(report.rows), 'offer')} from {providers}"))
    out.print(literal(report.path))


def plot_command(
    out_file: Path = typer.Argument(..., metavar="OUT.png", help="The PNG to write."),
    gpu: str = typer.Option(..., "--gpu", "-g", help="Canonical GPU model (H100-SXM, A100-SXM4-80, L4, ...)."),
    option: str = typer.Option("on_demand", "--option", help="on_demand, spot (every reclaimable offer: spot, "
                               "low-priority and marketplace interruptible), low_priority, interruptible or any."),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    db: Optional[Path] = DbOption,
) -> None:
    """Plot the price history of one GPU per provider (cheapest price per GPU-hour over time).

    \b
    Example:
      gpuledger plot --gpu H100-SXM h100.png
      gpuledger plot --gpu A100-SXM4-80 --option spot -p aws -p gcp a100-spot.png
    """
    from gpuledger.flows.plot import plot_price_history, utc_minute

    try:  # a WarehouseError: one line, exit 2 (flows/cli.py)
        history = plot_price_history(db, gpu, out_file, option, provider or None)
    except OSError as e:
        raise fail(f"cannot write {out_file}: {e.strerror or e}") from None
    if history.snapshot is not None:
        err.print(literal(f"{history.gpu}: a single snapshot ({utc_minute(history.snapshot)}) of "
                          f"{counted(len(history.series), 'provider')}: no history yet, drawn as one bar per provider"))
    else:
        points = sum(len(s) for s in history.series.values())
        err.print(literal(f"{history.gpu}: {counted(len(history.series), 'provider')}, {counted(points, 'point')}"))
    out.print(literal(history.path))


def nightly_deployment(cron: str = NIGHTLY_CRON, timezone: str = NIGHTLY_TIMEZONE, name: str = DEPLOYMENT_NAME,
                       parameters: dict[str, Any] | None = None) -> Any:
    """The `nightly` deployment of nightly_refresh as a RunnerDeployment (what `serve` runs)."""
    from prefect.schedules import Cron

    from gpuledger.flows.refresh import nightly_refresh

    return nightly_refresh.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters or {},
        description="gpuledger: refresh every provider into the warehouse", tags=["gpuledger"])


def work_pool_of(deployment: str) -> str | None:
    """The work pool the Prefect deployment `flow/name` is bound to, if any."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            return client.read_deployment_by_name(deployment).work_pool_name
        except ObjectNotFound:
            return None


@contextmanager
def _run_logging() -> Iterator[None]:
    """While serving, each run (a process of its own) logs Prefect's and gpuledger's messages here, at INFO unless
    the user chose a level: in the environment (the runs inherit it) and in this process's Prefect settings."""
    from prefect.settings import PREFECT_LOGGING_EXTRA_LOGGERS, PREFECT_LOGGING_LEVEL

    from gpuledger import flows
    from gpuledger.flows.prefect_api import settings_set

    extra = [n.strip() for n in os.environ.get("PREFECT_LOGGING_EXTRA_LOGGERS", "").split(",") if n.strip()]
    updates = {PREFECT_LOGGING_EXTRA_LOGGERS: ",".join(dict.fromkeys([*extra, "gpuledger"]))}
    if "PREFECT_LOGGING_LEVEL" in flows.DEFAULTED:
        updates[PREFECT_LOGGING_LEVEL] = "INFO"
    with settings_set(updates, inherited=updates):
        yield


def _cause_without_traceback(record: logging.LogRecord) -> bool:
    """A warning of Prefect's that carries an exception says its cause in the line instead of a traceback."""
    if record.exc_info and record.exc_info[1] is not None:
        cause = record.exc_info[1]
        record.msg, record.args = f"{record.getMessage()} ({type(cause).__name__}: {cause})", ()
        record.exc_info = record.exc_text = None
    return True


def serve_command(
    cron: str = typer.Option(NIGHTLY_CRON, "--cron", help="Cron schedule of the refresh."),
    timezone: str = typer.Option(NIGHTLY_TIMEZONE, "--timezone", help="Time zone of the cron schedule."),
    name: str = typer.Option(SERVE_DEPLOYMENT_NAME, "--name", help="Deployment name (nightly_refresh/NAME); "
                             "not prefect.yaml's `nightly`."),
    db: Optional[Path] = DbOption,
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    replay: bool = typer.Option(False, "--replay", help="Scheduled runs answer from recordings (a dry run)."),
    force: bool = typer.Option(False, "--force", help="Serve under NAME even if a deployment of that name is "
                               "bound to a work pool (its parameters and schedule are then replaced)."),
) -> None:
    """Run the nightly refresh on a schedule, in this process, until stopped.

    Registers its own deployment, nightly_refresh/serve (default 03:00 UTC),
    with the Prefect server that PREFECT_API_URL names (a `prefect server
    start` or Prefect Cloud), runs each scheduled flow run here and logs it
    to this terminal; Ctrl-C stops it and pauses its schedule. A deployment
    bound to a work pool (prefect.yaml's `nightly`) is never replaced unless
    --force. For a work pool with several workers, use `prefect deploy` with
    prefect.yaml instead (docs/operations.md).

    \b
    Example:
      prefect server start &   # or: prefect cloud login
      PREFECT_API_URL=http://127.0.0.1:4200/api gpuledger serve
    """
    from prefect.settings import PREFECT_API_URL

    from gpuledger.flows.refresh import resolve_providers
    from gpuledger.warehouse.catalog import shown
    from gpuledger.warehouse.store import check_warehouse_file, check_writable

    if not PREFECT_API_URL.value():
        raise fail("`gpuledger serve` needs a Prefect server that keeps running: the temporary one a plain refresh "
                   "starts never fires schedules. Start one (`prefect server start`) and set "
                   "PREFECT_API_URL=http://127.0.0.1:4200/api, or `prefect cloud login`.", 2)
    server = shown(PREFECT_API_URL.value())  # never a user:password it holds
    # What every scheduled run would fail on is said now, before the server is asked anything.
    accepted_anomalies([])  # a setting accept_anomaly that names no provider: said before anything is served
    try:
        providers = resolve_providers(provider) if provider else []
        if db:
            check_writable(db)  # a folder where no run could write its lock: every run would fail
            check_warehouse_file(db)
        from gpuledger.flows.cadence import SCHEDULED_LOCK_WAIT_S

        # A run due while another refresh holds the lock waits for it, as the work pool's deployments do.
        parameters = {k: v for k, v in (("db", db and str(db)), ("providers", providers), ("replay", replay),
                                        ("lock_wait_s", SCHEDULED_LOCK_WAIT_S)) if v}
        deployment = nightly_deployment(cron, timezone, name=name, parameters=parameters)
    except WarehouseError as e:
        raise fail(str(e), 2) from None
    except ValueError as e:  # an unknown provider, a cron or time zone Prefect refuses (pydantic's: one line each)
        errors = getattr(e, "errors", None)
        raise fail("; ".join(x["msg"] for x in errors()) if errors else str(e), 2) from None
    try:
        pool = work_pool_of(f"nightly_refresh/{name}")
    except Exception as e:  # an unreachable or refusing server: one line, not Prefect's traceback
        raise fail(f"cannot reach the Prefect server at {server}: {type(e).__name__}: "
                   f"{str(e).replace(PREFECT_API_URL.value(), server)}", 2) from None
    if pool and not force:
        raise fail(f"nightly_refresh/{name} is deployed to the work pool {pool!r} (prefect.yaml's, or another "
                   "`prefect deploy`); serving under that name would replace its parameters and schedule. Serve "
                   "under another --name, or pass --force to replace it.", 2)
    from prefect import serve

    from gpuledger.flows.prefect_api import ApiServerError, api_lost_said

    err.print(literal(f"serving nightly_refresh/{deployment.name}: cron {cron!r} ({timezone}) "
                      f"on {server}; Ctrl-C stops"))
    # Prefect's runner prints its polls' tracebacks when its server goes away, then raises: that is said in
    # one line below; anything else it printed is shown as it stops.
    printed = io.StringIO()
    for observer in ("prefect.FlowRunCancellingObserver", "prefect.FlowRunSuspendingObserver"):
        logging.getLogger(observer).addFilter(_cause_without_traceback)  # "websocket failed ... polling mode"
    try:
        with _run_logging(), redirect_stdout(printed), api_lost_said(
                PREFECT_API_URL.value(), "(PREFECT_API_URL)", "while serving",
                "serving stopped: start the server again, then `gpuledger serve`"):
            serve(deployment, print_starting_message=False, limit=1)  # one refresh at a time (it holds a lock)
    except ApiServerError as lost:
        raise fail(str(lost)) from None
    sys.stdout.write(printed.getvalue())


def register(app: typer.Typer) -> None:
    app.command(name="report")(report_command)
    app.command(name="plot")(plot_command)
    app.command(name="serve")(serve_command)
