"""`gpuledger publish` and `gpuledger pull`: the warehouse as a static catalog (warehouse/catalog.py)."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from dataclasses import astuple, fields, replace
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from gpuledger.adapters.registry import specs
from gpuledger.flows.literal import labelled, plain
from gpuledger.flows.ops_cli import DbOption, accepted_anomalies
from gpuledger.flows.output import Format, FormatOption, JsonOption, chosen, emit, fail, on_ctrl_c
from gpuledger.flows.output import err as console
from gpuledger.flows.stopping import handling


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """SIGTERM (a CI job cancelled, a service stopped) stops the block as Ctrl-C does, so its clean-up runs;
    the list yielded holds the signal once it came."""
    terminated: list[int] = []

    def on_sigterm(signum: int, frame: Any) -> None:
        terminated.append(signum)
        raise KeyboardInterrupt

    with handling((signal.SIGTERM,), on_sigterm):
        yield terminated


def publish_command(
    folder: str = typer.Argument(..., metavar="DIR", help="The catalog folder (or its file:// URL): empty, or "
                                 "holding the previous catalog (a provider with nothing new keeps its files "
                                 "there)."),
    db: Optional[Path] = DbOption,
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Publish the warehouse as a static catalog (Parquet + manifest.json) any web host can serve.

    Per provider: current offers, egress and storage prices, and the history
    since the previous publish into DIR; manifest.json gives each file's
    sha256, rows and bytes, the schema version and each provider's last
    successful scrape. `gpuledger pull` loads it.

    \b
    Example:
      gpuledger publish catalog/ && python -m http.server -d catalog/ 8000
    """
    from gpuledger.flows.cli import cancellable_reader
    from gpuledger.warehouse.catalog import CatalogError, local_folder, publish
    from gpuledger.warehouse.store import damaged_error

    output = chosen(fmt, as_json)
    if not folder:  # "$DIR" of an unset variable: not a catalog spread over the current folder
        raise fail("DIR is empty: name the catalog folder ('.' for the current one)", 2)
    try:  # not s3://bucket/catalog written as the local folder s3:/bucket/catalog
        path = Path(local_folder(folder, "publish writes a local folder (or its file:// URL): serve it, or upload "
                                         "its files (a GitHub release's assets, a bucket)"))
    except CatalogError as err:
        raise fail(str(err), 2) from None
    # a WarehouseError: one line, exit 2 (flows/cli.py); on SIGTERM as on Ctrl-C, a folder the publish made goes
    with (sigterm_as_ctrl_c() as terminated,
          cancellable_reader(db, "the publish", "nothing was written", allow_files=True) as con,
          on_ctrl_c(f"the publish was cancelled (Ctrl-C); the manifest of {path} is as it was")):
        try:
            done = publish(con, path)
        except BaseException as err:
            if terminated:  # a KeyboardInterrupt, or the error of the query it interrupted
                raise fail(f"the publish was stopped (SIGTERM); the manifest of {path} is as it was", 143) from None
            if not isinstance(err, CatalogError):
                raise
            damaged = err.__cause__ is not None and damaged_error(err.__cause__, db)  # named as such, not the folder
            raise fail(str(damaged or err), 2) from None
    emit(["provider", "state"], sorted(done.items()), output, title=f"published into {path}")


def pull_command(
    source: str = typer.Argument(..., metavar="URL|DIR", help="Where the catalog is: the URL of its folder "
                                 "(https://.../manifest.json is beside the files, each fetched with the URL's "
                                 "query string) or a local folder (or its file:// URL); its manifest.json's own "
                                 "address will do."),
    db: Optional[Path] = DbOption,
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
    accept_anomaly: list[str] = typer.Option([], "--accept-anomaly", help="Load this provider even if the "
                                             "anomaly guard objects (a warehouse that refreshes it itself "
                                             "merges the catalog as a scrape). Repeatable."),
) -> None:
    """Load a published catalog into the warehouse: current prices and their history, no keys needed.

    Every file is checked against the manifest (size, sha256, rows, columns)
    before anything of its provider is loaded; a provider whose files fail
    is refused and left as it was. Pulling again loads only what is new.
    Exit codes: 0 every provider loaded or up to date; 1 a provider was
    refused (the others are loaded); 2 the catalog or the warehouse cannot
    be read.

    \b
    Example:
      gpuledger pull https://github.com/OWNER/REPO/releases/download/catalog
    """
    from gpuledger.warehouse.catalog import CatalogError, PullReport, pull, shown
    from gpuledger.warehouse.store import WarehouseError, check_warehouse_file, check_writable

    output = chosen(fmt, as_json)
    accept_anomaly = accepted_anomalies(accept_anomaly)
    # on SIGTERM as on Ctrl-C, the pull's downloads and working copy go
    with sigterm_as_ctrl_c() as terminated, on_ctrl_c("the pull was cancelled (Ctrl-C); the warehouse is as it was"):
        try:
            check_writable(db)
            check_warehouse_file(db)
            reports = pull(db, source, accept_anomaly, known={s.name: s.anomaly.min_row_ratio for s in specs()})
        except (CatalogError, WarehouseError) as err:
            raise fail(str(err), 2) from None
        except KeyboardInterrupt:
            if terminated:
                raise fail("the pull was stopped (SIGTERM); the warehouse is as it was", 143) from None
            raise
    # a detail that names its provider again ("vultr: the manifest's entry is malformed"), beside its provider
    reports = [replace(r, detail=r.detail.removeprefix(f"{r.provider}: ")) for r in reports]
    emit([f.name for f in fields(PullReport)], [astuple(r) for r in reports], output,
         title=f"pull {shown(source)}")
    refused = [r for r in reports if r.state == "refused"]
    for r in refused:  # one line each, naming the file
        console.print(labelled(f"{plain(r.provider)}: refused:", "red", r.detail, limit=None), soft_wrap=True)
    if refused:
        raise fail(f"refused providers: {', '.join(r.provider for r in refused)}")


def register(app: typer.Typer) -> None:
    app.command(name="publish")(publish_command)
    app.command(name="pull")(pull_command)
