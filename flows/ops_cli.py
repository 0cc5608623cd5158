"""`gpuledger report`, `gpuledger plot` and `gpuledger serve`: pictures and the schedule.

Registered on the main app by `register(app)` (flows/cli.py), like `recommend`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console

from gpuledger.flows.literal import labelled, literal

from gpuledger.warehouse.freshness import DEFAULT_MAX_AGE_HOURS
from gpuledger.warehouse.store import WarehouseError
from gpuledger.warehouse.settings import env_name

err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)

NIGHTLY_CRON = "0 3 * * *"  # 03:00 UTC, after the providers' overnight price-list publications
NIGHTLY_TIMEZONE = "UTC"
DEPLOYMENT_NAME = "nightly"


def _db_option() -> Any:
    return typer.Option(None, "--db", envvar=env_name("db"), help="Warehouse file [default: ./gpuledger.duckdb].")


def report_command(
    out_file: Path = typer.Argument(..., metavar="OUT.html", help="The page to write (one self-contained file)."),
    db: Optional[Path] = _db_option(),
    egress_gb: float = typer.Option(140.0, "--egress-gb", help="The egress column prices downloading this many GB "
                                    "from the offer's region (tiered)."),
    stale_after_hours: float = typer.Option(DEFAULT_MAX_AGE_HOURS, "--stale-after", help="Hours after which a "
                                            "provider's last success counts as stale."),
    model: list[str] = typer.Option([], "--model", "-m", help="A model whose fine-tuning answers (every method) "
                                    "the page carries (repeatable) [default: nine common ones, llama-3-8b to "
                                    "qwen2.5-72b]."),
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
    except (WarehouseError, OSError, ValueError) as e:
        err.print(labelled("error:", "red", e))
        raise typer.Exit(1 if isinstance(e, OSError) else 2) from None
    err.print(literal(f"{len(report.rows)} offers from {loaded_count(report.providers)} providers"))
    out.print(literal(report.path))


def plot_command(
    out_file: Path = typer.Argument(..., metavar="OUT.png", help="The PNG to write."),
    gpu: str = typer.Option(..., "--gpu", "-g", help="Canonical GPU model (H100-SXM, A100-SXM4-80, L4, ...)."),
    option: str = typer.Option("on_demand", "--option", help="on_demand, spot (every reclaimable offer: spot, "
                               "low-priority and marketplace interruptible), low_priority, interruptible or any."),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    db: Optional[Path] = _db_option(),
) -> None:
    """Plot the price history of one GPU per provider (cheapest price per GPU-hour over time).

    \b
    Example:
      gpuledger plot --gpu H100-SXM h100.png
      gpuledger plot --gpu A100-SXM4-80 --option spot --provider aws --provider gcp a100-spot.png
    """
    from gpuledger.flows.plot import plot_price_history, utc_minute

    try:
        history = plot_price_history(db, gpu, out_file, option, provider or None)
    except WarehouseError as e:
        err.print(labelled("error:", "red", e))
        raise typer.Exit(2) from None
    changes = sum(len(s) for s in history.series.values())
    if history.snapshot is not None:
        when = utc_minute(history.snapshot)
        err.print(literal(f"{gpu}: a single snapshot ({when}) of {len(history.series)} providers: no history yet, "
                          "drawn as one bar per provider"))
    else:
        err.print(literal(f"{gpu}: {len(history.series)} providers, {changes} points"))
    out.print(literal(history.path))


def nightly_deployment(cron: str = NIGHTLY_CRON, timezone: str = NIGHTLY_TIMEZONE, name: str = DEPLOYMENT_NAME,
                       parameters: dict[str, Any] | None = None) -> Any:
    """The `nightly` deployment of nightly_refresh as a RunnerDeployment (what `serve` runs)."""
    from prefect.schedules import Cron

    from gpuledger.flows.refresh import nightly_refresh

    return nightly_refresh.to_deployment(
        name=name, schedules=[Cron(cron, timezone=timezone)], parameters=parameters or {},
        description="gpuledger: refresh every provider into the warehouse",
        tags=["gpuledger"])


def serve_command(
    cron: str = typer.Option(NIGHTLY_CRON, "--cron", help="Cron schedule of the refresh."),
    timezone: str = typer.Option(NIGHTLY_TIMEZONE, "--timezone", help="Time zone of the cron schedule."),
    name: str = typer.Option(DEPLOYMENT_NAME, "--name", help="Deployment name (nightly_refresh/NAME)."),
    db: Optional[Path] = _db_option(),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    replay: bool = typer.Option(False, "--replay", help="Scheduled runs answer from recordings (a dry run)."),
) -> None:
    """Run the nightly refresh on a schedule, in this process, until stopped.

    Registers the `nightly` deployment (default 03:00 UTC) with the Prefect
    server that PREFECT_API_URL names (a `prefect server start` or Prefect
    Cloud) and runs each scheduled flow run here. For a work pool with
    several workers, use `prefect deploy` with prefect.yaml instead
    (docs/operations.md).

    \b
    Example:
      prefect server start &   # or: prefect cloud login
      PREFECT_API_URL=http://127.0.0.1:4200/api gpuledger serve
    """
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        err.print("[red]error:[/red] `gpuledger serve` needs a Prefect server that keeps running: the temporary "
                  "one a plain refresh starts never fires schedules. Start one (`prefect server start`) and set "
                  "PREFECT_API_URL=http://127.0.0.1:4200/api, or `prefect cloud login`.", highlight=False)
        raise typer.Exit(2)
    parameters: dict[str, Any] = {}
    if db is not None:
        parameters["db"] = str(db)
    if provider:
        parameters["providers"] = list(provider)
    if replay:
        parameters["replay"] = True
    deployment = nightly_deployment(cron, timezone, name=name, parameters=parameters)
    from prefect import serve

    err.print(literal(f"serving nightly_refresh/{deployment.name}: cron {cron!r} ({timezone}) "
                      f"on {PREFECT_API_URL.value()}; Ctrl-C stops"))
    serve(deployment, print_starting_message=False, limit=1)  # one refresh at a time (it holds a lock anyway)


def register(app: typer.Typer) -> None:
    """Add `report`, `plot` and `serve` to the gpuledger command line."""
    app.command(name="report")(report_command)
    app.command(name="plot")(plot_command)
    app.command(name="serve")(serve_command)
