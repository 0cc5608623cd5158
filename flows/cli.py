"""The `gpuledger` command line: thin commands over the flows and the warehouse."""

from __future__ import annotations

import errno
import functools
import itertools
import json
import logging
import math
import re
import sys
import tempfile
import threading
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import click
import duckdb
import typer
import typer.core
from rich import box
from rich.table import Table

from gpuledger import flows  # noqa: F401  (Prefect environment defaults, before prefect is imported)
from gpuledger.adapters.registry import SOURCES
from gpuledger.flows import prefect_api
from gpuledger.flows.literal import MESSAGE_LIMIT, LiteralRichHandler, cell, labelled, literal
from gpuledger.flows.ops_cli import DbOption, StaleAfterOption, accepted_anomalies
from gpuledger.flows.output import Format, FormatOption, JsonOption, chosen, emit, fail, on_ctrl_c, out
from gpuledger.flows.output import err as console
from gpuledger.flows.stoppable import QueryStopped, run_stoppable
from gpuledger.flows.stopping import RefreshInterrupted
from gpuledger.warehouse import pending
from gpuledger.warehouse.freshness import NEVER, STATE_SHOWN, provider_freshness
from gpuledger.warehouse.offer_filter import FilterError, known_names, resolve_names
from gpuledger.warehouse.store import (
    WarehouseError, check_warehouse_file, check_writable, damaged_error, db_path, lock_holder, open_reader,
)
from gpuledger.warehouse.settings import SettingsError

app = typer.Typer(no_args_is_help=True, add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
SQL_TIMEOUT_S = 300.0  # `gpuledger sql --timeout`: long enough for any query over a year of history


def _print_version(value: bool) -> None:
    if value:
        from gpuledger import __version__

        out.print(f"gpuledger {__version__}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print gpuledger's version and exit."),
) -> None:
    """gpuledger: rented-GPU prices for fine-tuning, in a DuckDB warehouse with full history."""  # the --help


def _prefect_said_once(record: logging.LogRecord) -> bool:
    """Drops Prefect's own tracebacks and complaints: the command says each failure in one line; -v shows them."""
    if record.name.startswith(("prefect.flow_runs", "prefect.task_runs")):
        return record.levelno < logging.ERROR and not record.exc_info
    return record.levelno >= logging.CRITICAL


PREFECT_NOISE = ("prefect.flow_runs", "prefect.task_runs", "prefect._internal.concurrency", "prefect.events.clients")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s",
                        handlers=[LiteralRichHandler(console=console, show_path=False, show_time=False)])
    logging.getLogger("gpuledger").setLevel(logging.DEBUG if verbose else logging.INFO)
    if not verbose:
        for name in PREFECT_NOISE:
            logging.getLogger(name).addFilter(_prefect_said_once)
        logging.raiseExceptions = False  # Prefect's log worker writes "--- Error logging to API ---" unless


def cancellable_reader(db: Path | None, what: str, outcome: str = "nothing was read", **options: Any) -> Any:
    """open_reader; Ctrl-C while it waits for a refresh's write lock is one line, exit 130."""
    with on_ctrl_c(f"{what} was cancelled (Ctrl-C) while waiting for the refresh that is writing the warehouse; "
                   f"{outcome}"):
        return open_reader(db, **options)


STATE_COLOURS = {"ok": "green", "stale": "yellow", "failed": "red", NEVER: "yellow", "not_configured": "yellow"}
COUNTS = ("offers", "new", "changed", "closed", "quarantined", "egress", "storage")  # the refresh summary's
SUMMARY_COLUMNS = ("provider", "state", *COUNTS, "error", "degraded", "notes")


def _print_summary(summary: dict[str, Any], output: str = "table") -> None:
    if output != "table":  # every provider's line, its error, enrichments lost and notes in it, on standard output
        emit(SUMMARY_COLUMNS, [[p[c] for c in SUMMARY_COLUMNS] for p in summary["providers"]], output)
        return
    # Columns one space apart, no outer border: 80 columns hold the longest provider name and six-digit counts.
    t = Table(title=literal(f"refresh {summary['refresh_id']}"), box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 0))
    for col in ("provider", "state", *COUNTS):
        t.add_column(col, justify="left" if col in ("provider", "state") else "right", no_wrap=True)
    for p in summary["providers"]:
        state = cell(STATE_SHOWN.get(p["state"], p["state"]), STATE_COLOURS.get(p["state"], "red"))
        t.add_row(cell(p["provider"]), state, *(cell(p[k]) for k in COUNTS))
    console.print(t)
    for p in summary["providers"]:
        if p["error"]:
            console.print(labelled(f"{p['provider']}:", "yellow" if p["state"] == "not_configured" else "red",
                                   pending.unlabelled(p["provider"], p["error"])))
        if p["degraded"]:
            console.print(labelled(f"{p['provider']}: degraded:", "yellow", p["degraded"]))
        for note in p["notes"]:
            console.print(labelled(f"{p['provider']}:", "yellow", pending.unlabelled(p["provider"], note)))


@app.command()
def refresh(
    db: Optional[Path] = DbOption,
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    replay: bool = typer.Option(False, "--replay", help="Answer every request from recordings (offline)."),
    recordings: Optional[Path] = typer.Option(None, "--recordings", help="Recording folder for --replay; "
                                              "without --provider, the providers it holds a recording of.",
                                              show_default="the recordings bundled with gpuledger"),
    replay_endpoints: Optional[Path] = typer.Option(None, "--replay-endpoints", help="With --replay: send the "
                                                    "clients to an already running replay server, whose endpoints "
                                                    "file (adapters.replay.write_endpoints) this is."),
    accept_anomaly: list[str] = typer.Option([], "--accept-anomaly", help="Load this provider even if the "
                                             "anomaly guard objects (a real market move). Repeatable."),
    resume: bool = typer.Option(False, "--resume", help="Only merge the results an earlier refresh fetched but "
                                "could not write (kept beside the warehouse); fetch nothing."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show gpuledger's debug log messages."),
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Fetch prices from the providers and merge them into the warehouse.

    Exits 0 only when every requested provider succeeded; failed providers
    are named, and the ones that succeeded are committed regardless.

    \b
    Examples:
      gpuledger refresh --replay              # offline, from bundled recordings
      gpuledger refresh --provider aws        # live, AWS only
      gpuledger refresh --resume              # merge what a failed write left
    """
    _setup_logging(verbose)
    from gpuledger.flows.refresh import resolve_providers

    output = chosen(fmt, as_json)
    if recordings and not replay:
        raise fail("--recordings goes with --replay", 2)
    if replay_endpoints and (not replay or recordings):
        raise fail("--replay-endpoints goes with --replay and without --recordings", 2)
    if replay_endpoints:
        from gpuledger.adapters.replay import RecordingError, read_endpoints

        try:
            read_endpoints(replay_endpoints)
        except RecordingError as err:
            raise fail(str(err), 2) from None
    if resume and (provider or replay):
        raise fail("--resume fetches nothing: it goes without --provider and --replay", 2)
    accept_anomaly = accepted_anomalies(accept_anomaly)

    def prepare() -> list[str]:
        wanted = [] if resume else resolve_providers(provider)
        return _check_recordings(replay and not replay_endpoints, recordings, wanted, named=bool(provider))

    if resume and not pending.pending_dir(db_path(db)).exists():  # said at once, Prefect not started
        check_warehouse_file(db)
        summary: dict[str, Any] = {"providers": [], "ok": True}
    else:
        summary = _run_refresh(db, prepare, True, replay=replay,
                               recordings=str(recordings) if recordings else None, accept_anomaly=accept_anomaly,
                               resume=resume, replay_endpoints=str(replay_endpoints) if replay_endpoints else None)
    if resume and not summary["providers"]:
        console.print("nothing waiting to be merged", highlight=False)
    if summary["providers"] or output != "table":
        _print_summary(summary, output)
    if not summary["ok"]:
        raise fail(f"failed providers: {', '.join(summary['failed'])}")


def _run_refresh(db: Path | None, prepare: Callable[[], list[str]], watch: bool, **params: Any) -> dict[str, Any]:
    """nightly_refresh under the watchdog and Prefect's API, after the warehouse's checks and `prepare` (its own
    checks, the providers); each failure one line; the flow refreshes the providers `prepare` returns. `watch`:
    find browsers first and show the progress bar."""
    from gpuledger.adapters.registry import UnknownProviderError
    from gpuledger.flows import watchdog

    watchdog.ensure_watched()  # no child of this refresh outlives it, kill -9 included
    api_server = None
    try:
        with on_ctrl_c("refresh interrupted by SIGINT before its fetches began or after its write; the warehouse "
                       "is as its last completed write left it"):
            check_writable(db)  # a read-only folder or a directory as --db: said now, not after the fetch
            check_warehouse_file(db)  # a file that is no DuckDB warehouse: the same
            wanted = prepare()
            api_server = prefect_api.start_if_needed()  # starts while the checks and imports below run
            from gpuledger.flows.progress import RefreshProgress
            from gpuledger.flows.refresh import ensure_browsers, nightly_refresh, task_runner_from_env

            if watch:
                ensure_browsers(wanted, say=lambda line: console.print(literal(line)))
            refresh_flow = nightly_refresh.with_options(task_runner=task_runner_from_env(replay=True)) \
                if params.get("replay") else nightly_refresh
            with prefect_api.flow_api(api_server), RefreshProgress(console, wanted) if watch else nullcontext():
                return refresh_flow(db=str(db_path(db)), providers=wanted, **params)
    except (UnknownProviderError, WarehouseError) as err:  # a running refresh included
        raise fail(str(err), 2) from None
    except prefect_api.ApiServerError as err:
        raise fail(str(err)) from None
    except RefreshInterrupted as stop:
        raise fail(str(stop), stop.exit_code) from None
    finally:
        if api_server is not None:
            api_server.stop()  # a failure before the flow ran leaves it started


def _check_recordings(replay: bool, folder: Path | None, providers: list[str], named: bool) -> list[str]:
    """The providers to refresh: under replay, each one's recording (bundled unless `folder`) read now, a
    malformed one said in one line; unless they were `named` (-p), those `folder` holds a recording of
    (`gpuledger record DIR` of some providers or refresh units, replayed)."""
    from gpuledger.adapters.registry import UNITS
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS, RecordingError, holds_recording, load_manifest

    if not replay:
        return providers
    root = Path(folder or BUNDLED_RECORDINGS)
    if folder is not None and not named:
        if not root.is_dir():
            raise fail(f"no recordings in {folder}: it is not a folder", 2)
        providers = [name for name in sorted({*providers, *UNITS}) if holds_recording(root / name)]
        if not providers:
            raise fail(f"no recordings in {folder}: it holds no <provider>/manifest.json of a provider", 2)
    try:
        for name in providers:
            load_manifest(root / name)
    except RecordingError as err:
        raise fail(str(err), 2) from None
    return providers


@app.command()
def record(
    out_dir: Path = typer.Argument(..., help="Folder to write <provider>/manifest.json and bodies into."),
    db: Optional[Path] = DbOption,
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    from_recordings: Optional[Path] = typer.Option(None, "--from-recordings", help="Record from a replay of "
                                                   "this folder instead of the live providers (for tests); "
                                                   "without --provider, the providers it holds a recording of."),
    force: bool = typer.Option(False, "--force", help="Record into OUT_DIR even if it holds files (those of the "
                               "same names are replaced)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show gpuledger's debug log messages."),
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Refresh from the live providers and save every response for later replay.

    \b
    Example:
      gpuledger record recordings/
      gpuledger refresh --replay --recordings recordings/
    """
    _setup_logging(verbose)
    from gpuledger.adapters.replay import holds_recording
    from gpuledger.flows.refresh import check_record_dir, resolve_providers

    output = chosen(fmt, as_json)

    def prepare() -> list[str]:
        check_record_dir(str(out_dir), from_recordings is not None, from_recordings and str(from_recordings))
        wanted = _check_recordings(from_recordings is not None, from_recordings, resolve_providers(provider),
                                   named=bool(provider))
        try:  # made and writable, and empty unless --force
            out_dir.mkdir(parents=True, exist_ok=True)
            if any(out_dir.iterdir()) and not force:
                raise fail(f"{out_dir} is not empty: record into a new folder, or pass --force to write into it", 2)
            with tempfile.TemporaryFile(dir=out_dir):
                pass
        except OSError as err:
            raise fail(f"cannot record into {out_dir}: {err.strerror or err}", 2) from None
        return wanted

    summary = _run_refresh(db, prepare, False, replay=from_recordings is not None,
                           recordings=str(from_recordings) if from_recordings else None, record_dir=str(out_dir))
    _print_summary(summary, output)
    recorded = [p["provider"] for p in summary["providers"]
                if p["state"] == "ok" and holds_recording(out_dir / p["provider"])]
    if recorded:
        console.print(literal(f"recorded to {out_dir}: {', '.join(recorded)}"))
    if not summary["ok"]:
        raise fail(f"failed providers: {', '.join(summary['failed'])}")
    if not recorded:  # every provider without credentials: a replay of the folder would find nothing
        raise fail(f"nothing recorded to {out_dir}: no provider answered")


SQL_BATCH_ROWS = 10_000  # rows fetched and written at a time: memory stays flat, a stop lands between batches
# Rows a table shows, as DuckDB's own shell does: rich lays out 1,000 rows of the offers in half a minute.
SQL_TABLE_ROWS = 40
MEMORY_SIZE = re.compile(r"^\d+(\.\d+)?\s*(B|[KMGT]i?B)$", re.I)  # DuckDB's memory_limit: 2GB, 500MiB


# DuckDB's Python values hold no months: an INTERVAL of 1 month comes out as a timedelta of 30 days; nor
# nanoseconds: a TIMESTAMP_NS loses its last three digits. Such columns (and lists, structs, maps holding them)
# are cast to DuckDB's own text ('1 month', '3 days', '01:30:00', '2026-01-01 00:00:00.123456789') before they
# leave the engine.
_INTERVAL_TYPE = re.compile(r""""(?:[^"]|"")*"|'(?:[^']|'')*'|\b(?:INTERVAL|TIMESTAMP_NS)\b""")  # not in a quoted name
_TRAILING_SEMICOLON = re.compile(r";(?:\s|--[^\n]*|/\*.*?\*/)*\Z", re.S)


def _intervals_as_text(con: duckdb.DuckDBPyConnection, statement: str) -> str:
    """`statement` (one SELECT), its interval and nanosecond values cast to their text; as it is without any."""
    try:
        described = con.execute(f"describe {statement}").fetchall()
    except duckdb.InterruptException:
        raise
    except duckdb.Error:  # DuckDB describes no such statement: it runs as written (and fails as written)
        return statement
    types = [str(t) for _, t, *_ in described]
    casts = [_INTERVAL_TYPE.sub(lambda m: m.group() if m.group()[0] in "\"'" else "VARCHAR", t) for t in types]
    if casts == types:
        return statement
    names = ['"' + name.replace('"', '""') + '"' for name, *_ in described]  # each kept, a repeated one too
    columns = ", ".join(f"#{i}{'' if cast == t else '::' + cast} as {name}"
                        for i, (name, t, cast) in enumerate(zip(names, types, casts), 1))
    return f"select {columns} from (\n{_TRAILING_SEMICOLON.sub('', statement.rstrip())}\n)"


# Statements whose answer is rows: before the last one, their rows would be dropped unseen.
ANSWERING = {duckdb.StatementType.SELECT, duckdb.StatementType.MULTI, duckdb.StatementType.EXPLAIN,
             duckdb.StatementType.PRAGMA, duckdb.StatementType.CALL}


def run_query(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyConnection | None:
    """`query` (statements run in order, the last one's rows answered) on `con`, an interval shown as DuckDB
    writes it; None for a query of comments or semicolons only. A statement before the last that answers rows
    of its own is refused (exit 2), nothing run."""
    statements = con.extract_statements(query)
    for n, statement in enumerate(statements[:-1], 1):
        if statement.type in ANSWERING:
            raise fail(f"statement {n} of {len(statements)} is a {statement.type.name.lower()}, whose rows would not "
                       "be shown (`gpuledger sql` shows the last statement's): run each query on its own", 2)
    # a PIVOT whose columns come from the data is MULTI: DuckDB reads the values first, then selects
    if not statements or statements[-1].type not in (duckdb.StatementType.SELECT, duckdb.StatementType.MULTI):
        return con.execute(query)
    for statement in statements[:-1]:
        con.execute(statement.query).complete()  # run to its end, as a script runs it
    return con.execute(_intervals_as_text(con, statements[-1].query))


def write_answer(rel: duckdb.DuckDBPyConnection, fmt: str, stopping: threading.Event,
                 max_rows: int = SQL_TABLE_ROWS) -> None:
    """The answer of `rel` in `fmt`, a batch of rows at a time; CSV and JSON are written whole as they are
    fetched, a table shows `max_rows` rows (0: all) and counts the rest. Nothing more is fetched or
    written once `stopping` is set."""
    columns = [d[0] for d in rel.description] if rel.description else []

    def rows() -> Iterator[tuple[Any, ...]]:
        while columns and not stopping.is_set() and (batch := rel.fetchmany(SQL_BATCH_ROWS)):
            yield from batch

    if fmt != "table":
        emit(columns, rows(), fmt)
        return
    answer = rows()
    table = list(itertools.islice(answer, max_rows or None))
    more = sum(1 for _ in answer)
    if not stopping.is_set():
        emit(columns, table, fmt)
        if more:
            console.print(literal(f"{len(table) + more:,} rows, the first {len(table)} shown "
                                  "(--max-rows 0 shows all; --format csv or json writes all)"))


class SqlCommand(typer.core.TyperCommand):
    """`sql`, whose query may begin with a `--` comment (the README's do): an argument that begins with a dash,
    holds a space or a line break and names none of the command's options is the query, not an option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        names = {name for param in self.get_params(ctx) for name in param.opts + param.secondary_opts}
        end = args.index("--") if "--" in args else len(args)
        queries = {i for i, a in enumerate(args[:end])
                   if a.startswith("-") and a.split("=", 1)[0] not in names and any(c.isspace() for c in a)}
        if queries:  # after click's end of options, each as it came
            args = ([a for i, a in enumerate(args) if i not in queries] + ["--"] * (end == len(args))
                    + [args[i] for i in sorted(queries)])
        return super().parse_args(ctx, args)


@app.command(cls=SqlCommand)
def sql(
    query: str = typer.Argument(..., help="A SQL query against the warehouse."),
    db: Optional[Path] = DbOption,
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
    timeout: float = typer.Option(SQL_TIMEOUT_S, "--timeout", min=0, help="Stop the query, its fetching and its "
                                  "printing after this many seconds, exit 124 (0: no limit)."),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE", help="DuckDB's memory limit "
                                             "for the query (500MB, 2GB).", show_default="DuckDB's, 80% of RAM"),
    max_rows: int = typer.Option(SQL_TABLE_ROWS, "--max-rows", min=0, help="Rows the table shows, the others "
                                 "counted (0: all); CSV and JSON have every row."),
) -> None:
    """Run a read-only SQL query (DuckDB dialect) against the warehouse.

    The recommender's macros (fits, fresh_providers, billed_seconds, ...) are
    available. Ctrl-C cancels a running query (exit 130); the warehouse is
    never changed.

    \b
    Example:
      gpuledger sql "select gpu_model, region, purchase_option, price_per_gpu_hour
                     from offers order by price_per_gpu_hour limit 10"
    """
    from gpuledger.warehouse.recommender.macros import install_macros

    output = chosen(fmt, as_json)
    if not math.isfinite(timeout):
        raise fail(f"--timeout {timeout} is not a number of seconds", 2)
    if max_memory is not None and not MEMORY_SIZE.match(max_memory.strip()):
        raise fail(f"--max-memory {max_memory!r} is not a size (500MB, 2GB)", 2)
    try:
        # waits while a refresh writes
        con = cancellable_reader(db, "the query", memory_limit=max_memory and max_memory.strip())
    except WarehouseError as err:
        if not isinstance(err.__cause__, duckdb.OutOfMemoryException):
            raise
        raise fail(f"--max-memory {max_memory.strip()} is too little to open the warehouse ({err})", 2) from None

    def answer(stopping: threading.Event) -> None:
        install_macros(con)  # fits(), fresh_providers(), ...: docs/recommender.md
        answered = run_query(con, query)
        if answered is None:  # DuckDB's answer to a query of comments or semicolons only
            raise fail("the query holds no SQL statement (only comments or semicolons)", 2)
        write_answer(answered, output, stopping, max_rows)

    with con:
        try:
            run_stoppable(con, answer, timeout)
        except QueryStopped as stop:
            raise fail(str(stop), stop.exit_code) from None
        except duckdb.Error as err:
            if damaged := damaged_error(err, db):
                raise fail(str(damaged), 2) from None
            text = str(err)
            if "read-only" in text or "read only" in text:
                text = f"the warehouse is opened read-only by `gpuledger sql`; writes are refused ({text})"
            elif "external access" in text.lower() or "disabled" in text.lower():
                text = f"`gpuledger sql` cannot read or write other files ({text})"
            raise fail(text, 1) from None


@app.command()
def export(
    out_dir: Path = typer.Argument(..., help="Snapshots go to OUT_DIR/<UTC timestamp>/."),
    db: Optional[Path] = DbOption,
    fmt: str = typer.Option("csv,parquet", "--format", "-f", help="csv, parquet, or both (comma-separated)."),
    table: list[str] = typer.Option([], "--table", "-t", help="Only these tables (repeatable): the current "
                                    "ones, offer_history, egress_price_history, storage_price_history, "
                                    "quarantine, scrape_runs.", show_default="the current tables and scrape_runs"),
    since: Optional[str] = typer.Option(None, "--since", metavar="DATE", help="History, quarantine and scrape "
                                        "runs only from this UTC date or time on (2026-11-01, "
                                        "2026-11-01T03:00); the current tables are always whole."),
) -> None:
    """Write a snapshot of warehouse tables (CSV and/or Parquet) with a manifest.

    The manifest gives each table's columns with their types, and each file's
    row count and sha256. Timestamps are UTC in both formats.

    \b
    Examples:
      gpuledger export snapshots/ --format csv
      gpuledger export snapshots/ -t offer_history --since 2026-11-01
    """
    from gpuledger.warehouse.export import EXPORT_TABLES, FORMATS, export_snapshot

    formats = resolve_names("export format", [f.strip() for f in fmt.split(",") if f.strip()], FORMATS)
    tables = resolve_names("table", table, EXPORT_TABLES)
    start = None
    if since is not None:
        try:
            start = datetime.fromisoformat(since)
        except ValueError:
            raise fail(f"--since {since!r} is not a date or time (2026-11-01, 2026-11-01T03:00)", 2) from None
        start = start if start.utcoffset() is not None else start.replace(tzinfo=timezone.utc)
    with (cancellable_reader(db, "the export", "nothing was written", allow_files=True) as con,
          on_ctrl_c("the export was cancelled (Ctrl-C); nothing was written")):
        try:
            folder = export_snapshot(con, out_dir, list(formats), list(tables) or None, since=start)
        except WarehouseError as err:
            if err.__cause__ is not None and (damaged := damaged_error(err.__cause__, db)):
                raise fail(str(damaged), 2) from None
            raise fail(str(err), 1) from None
    manifest = json.loads((folder / "manifest.json").read_text())
    for name, info in manifest["tables"].items():
        console.print(literal(f"{name}: {info['rows']} rows -> {', '.join(f['name'] for f in info['files'])}"))
    out.print(literal(folder))


def provider_status(con: duckdb.DuckDBPyConnection, stale_after: timedelta, now: datetime | None = None,
                    providers: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Every provider with a scrape run, and each of `providers` (state `never` without one):
    state by warehouse.freshness, and its current rows."""
    now = now or datetime.now(timezone.utc)
    offers, egress, storage = (dict(con.execute(f"select provider, count(*) from {t} group by provider").fetchall())
                               for t in ("offers", "egress_prices", "storage_prices"))
    try:  # the enrichments the latest run went without (a warehouse older than schema 9 has none)
        # arg_max_null: the latest run's, even when it went without none (arg_max skips a NULL)
        degraded = dict(con.execute("select provider, arg_max_null(degraded, finished_at) from scrape_runs "
                                    "where finished_at <= $now group by provider", {"now": now}).fetchall())
    except duckdb.BinderException:
        degraded = {}

    def utc(t: datetime | None) -> datetime | None:  # DuckDB gives them in the machine's time zone
        return t and t.astimezone(timezone.utc)

    return [{"provider": f.provider, "state": f.state, "last_success": utc(f.last_ok),
             "last_attempt": utc(f.last_attempt),
             "offers": offers.get(f.provider, 0), "egress": egress.get(f.provider, 0),
             "storage": storage.get(f.provider, 0), "last_error": f.last_error if f.last_state != "ok" else None,
             "degraded": degraded.get(f.provider)}
            for f in provider_freshness(con, stale_after.total_seconds() / 3600.0, now, providers)]


@app.command()
def status(
    db: Optional[Path] = DbOption,
    stale_after_hours: float = StaleAfterOption,
    provider: list[str] = typer.Option([], "--provider", "-p", help="Judge only these providers (repeatable)."),
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Per provider: last success, last attempt (UTC), state (ok, stale, failed, not configured, never), rows.

    Every registered source is listed, one that never loaded too (state
    `never`). Exit codes: 0 every loaded provider is ok;
    1 a provider's latest attempt failed; 3 a provider is stale (none
    failed); 2 the warehouse cannot be read.

    \b
    Example:
      gpuledger status --json -p aws -p gcp || echo "aws or gcp needs attention"
    """
    from gpuledger.adapters.registry import UNITS  # refresh -p takes them: a name before their first run too

    output = chosen(fmt, as_json)
    with cancellable_reader(db, "status") as con:
        provider = list(resolve_names("provider", provider, {*SOURCES, *UNITS, *known_names(con, "provider")}))
        rows = provider_status(con, timedelta(hours=stale_after_hours), providers=provider or SOURCES)
    # fetched results a failed write left for the next merge (with -p, the chosen providers')
    saved = [p for p in pending.waiting(db_path(db)) if not provider or p.stem in provider]
    for r in rows:
        r["waiting"] = sorted({p.parent.name for p in saved if p.stem == r["provider"]})
    if provider:
        rows = [r for r in rows if r["provider"] in provider]
    states = {r["state"] for r in rows}  # a provider never loaded or without credentials counts for neither
    code = 1 if "failed" in states else 3 if "stale" in states else 0
    if output != "table":
        emit(list(rows[0]) if rows else [], [list(r.values()) for r in rows], output)
        raise typer.Exit(code)
    t = Table("provider", "state", "last success", "last attempt", "offers", "egress", "storage", "last error")
    for r in rows:
        t.add_row(cell(r["provider"]), cell(STATE_SHOWN.get(r["state"], r["state"]), STATE_COLOURS[r["state"]]),
                  *(cell(f"{r[k]:%Y-%m-%d %H:%M} UTC" if r[k] else "-") for k in ("last_success", "last_attempt")),
                  cell(r["offers"]), cell(r["egress"]), cell(r["storage"]),
                  literal(r["last_error"] or (f"degraded: {r['degraded']}" if r["degraded"] else ""), 240))
    out.print(t)
    running = lock_holder(db) or ""
    for folder in sorted({p.parent for p in saved}):
        providers = sorted(p.stem for p in saved if p.parent == folder)
        if f"refresh {folder.name}:" in running:  # fetched by the refresh running now, which merges them itself
            console.print(literal(f"fetched by the running {folder.name} ({', '.join(providers)}), not merged yet",
                                  style="yellow"))
            continue
        error = pending.write_error(folder / f"{providers[0]}.json")
        why = f"write failed: {error}" if error else "not merged: its refresh stopped first"
        console.print(literal(f"waiting to be merged: {folder.name} ({', '.join(providers)}); {why}; "
                              "`gpuledger refresh --resume` merges it", style="yellow"))
    raise typer.Exit(code)


@app.command()
def check(db: Optional[Path] = DbOption, fmt: Format = FormatOption, as_json: bool = JsonOption) -> None:
    """Integrity check: schema version, constraints, unique current keys, history consistent with current."""
    from gpuledger.warehouse.check import run_checks

    output = chosen(fmt, as_json)
    with cancellable_reader(db, "the check") as con:
        results = run_checks(con)
    if output != "table":
        emit(["check", "ok", "detail"], [[r.name, r.ok, r.detail] for r in results], output)
    else:
        for r in results:
            mark = literal("ok  ", style="green") if r.ok else literal("FAIL", style="red")
            out.print(mark, literal(f"{r.name}: {r.detail}", MESSAGE_LIMIT))  # the first offending row may be long
    if not all(r.ok for r in results):
        raise fail(f"{sum(not r.ok for r in results)} integrity check(s) failed")


# Commands that live in their own modules, listed after the core ones in --help.
from gpuledger.flows import catalog_cli, ops_cli, recommend_cli, show_gpus  # noqa: E402

for _module in (recommend_cli, ops_cli, show_gpus, catalog_cli):
    _module.register(app)


def _older_warehouse(db: Path | None) -> str | None:
    """Why a command's query failed when the warehouse predates a table, view or column it reads."""
    from gpuledger.warehouse.export import older_warehouse

    try:
        with open_reader(db) as con:
            return older_warehouse(con)
    except (WarehouseError, duckdb.Error):
        return None


def _warehouse_guard(command: Any) -> Any:
    """One line and exit 2, never a traceback, for a damaged or older warehouse, a WarehouseError or an unknown
    name."""
    @functools.wraps(command)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except duckdb.Error as err:
            db = kwargs.get("db")
            why = damaged_error(err, db) or (
                isinstance(err, (duckdb.BinderException, duckdb.CatalogException)) and _older_warehouse(db))
            if not why:
                raise
            raise fail(str(why), 2) from None
        except (WarehouseError, FilterError) as err:  # every usage error: one line, exit 2
            raise fail(str(err), 2) from None
    return guarded


for _command in app.registered_commands:
    _command.callback = _warehouse_guard(_command.callback)


# A write that fails for want of room or of a working device: one line, not the traceback of the write.
UNWRITABLE_OUTPUT = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def main() -> None:
    """The `gpuledger` command: an invalid setting is one line; text the terminal cannot encode is escaped."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        try:
            app()
        finally:
            sys.stdout.flush()  # here, not at exit, where a failed write is only a warning and code 120
    except SettingsError as err:
        raise SystemExit(fail(f"invalid setting: {err}", 2).exit_code) from None
    except OSError as err:
        if err.errno not in UNWRITABLE_OUTPUT:
            raise
        raise SystemExit(fail(f"cannot write the output: {err.strerror}").exit_code) from None


if __name__ == "__main__":
    main()
