"""Opening the warehouse, and merging each provider's scrape into it (one transaction each).

A refresh fetches with the warehouse closed, then merges into a working copy (warehouse/snapshot.py)
in one short write window; a lock file beside the warehouse keeps two refreshes from running at once.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import re
import tempfile
import time
import uuid
from collections import Counter
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import duckdb

# pyarrow is imported by the functions that write: it costs every reading command a second of CPU.
if TYPE_CHECKING:
    import pyarrow as pa

from gpuledger.warehouse import availability, gpus, pending
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.records import shortened
from gpuledger.warehouse.schema import (
    CAPACITY_BLOCK_FIELDS, EGRESS, OFFERS, PROVIDER_FACT_COLUMNS, SCRAPE_RUN_COLUMNS, SPECS, STORAGE, TableSpec,
    migrate, transaction,
)
from gpuledger.warehouse.settings import Settings, load_settings
from gpuledger.warehouse.validators import keep_validators

log = logging.getLogger("gpuledger.refresh")

DEFAULT_DB = "gpuledger.duckdb"
LOCK_WAIT_S = 60.0


class WarehouseError(Exception):
    """The warehouse cannot be opened or used; the message says why."""


class RefreshRunningError(WarehouseError):
    """Another refresh holds the refresh lock."""


def db_path(path: str | os.PathLike[str] | None = None) -> Path:
    return Path(path or load_settings().db or DEFAULT_DB)


NOT_A_WAREHOUSE = "{} is a DuckDB file but not a gpuledger warehouse (pass --db a warehouse `gpuledger refresh` wrote)"


def check_warehouse_file(path: str | os.PathLike[str] | None = None) -> Path:
    """The warehouse path; WarehouseError when it exists and is not a readable DuckDB database, or holds another
    program's tables."""
    p = db_path(path)
    _not_a_directory(p)
    if p.exists():
        _duckdb_magic(p)
        try:  # a truncated or garbled file fails at open; one another process holds is left to the refresh
            with duckdb.connect(str(p), read_only=True) as con:
                tables = {t for (t,) in con.execute("select table_name from duckdb_tables()").fetchall()}
        except duckdb.Error as err:
            if not _is_lock_conflict(err):  # damaged, or one this DuckDB cannot read (a newer DuckDB's)
                raise _not_opened(p, err) from None
        else:
            if tables and "schema_migrations" not in tables:  # another program's data: never written into
                raise WarehouseError(NOT_A_WAREHOUSE.format(p))
    return p


def _duckdb_magic(p: Path) -> None:
    """WarehouseError unless the file `p` begins as a DuckDB database does (a Parquet or CSV file as --db)."""
    try:
        with p.open("rb") as f:
            head = f.read(12)
    except OSError as err:
        raise WarehouseError(f"cannot read {p}: {err.strerror or err}") from err
    if head[8:] != b"DUCK":  # a DuckDB database file's magic bytes
        raise WarehouseError(f"{p} is not a DuckDB database (pass --db a gpuledger warehouse, or a new file name)")


def _is_lock_conflict(err: Exception) -> bool:
    text = str(err)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


def damaged_error(err: BaseException, db: str | os.PathLike[str] | None) -> WarehouseError | None:
    """The WarehouseError to raise for `err` when it is a DuckDB error saying the warehouse file (`db`, as --db
    gives it) itself cannot be read; None when it is another error (a query's own mistake)."""
    path, text = db_path(db), str(err)
    if not isinstance(err, duckdb.Error) or not (
            "Corrupt database" in text or "not a valid DuckDB" in text or isinstance(err, duckdb.FatalException)
            or isinstance(err, duckdb.IOException) and "Could not read" in text and path.name in text):
        return None
    return WarehouseError(f"cannot read the warehouse {path}: {' '.join(text.split())[:300]} (a damaged or "
                          "truncated file: restore it, or refresh into a new --db)")


def _not_a_directory(path: Path) -> None:
    """Only a regular file (or nothing yet) is a warehouse: a FIFO or a device would hang its reader."""
    if path.exists() and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise WarehouseError(f"{path} is {what}, not a warehouse file: pass the file with --db")


def _connect_retrying(path: Path, wait_s: float, **kwargs: Any) -> duckdb.DuckDBPyConnection:
    _not_a_directory(path)
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), **kwargs)
        except duckdb.IOException as err:
            if not _is_lock_conflict(err) or time.monotonic() >= deadline:
                raise WarehouseError(f"cannot open {path}: {err}") from err
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)
        except duckdb.Error as err:  # a garbled file fails its checksum at open
            raise _not_opened(path, err) from err


def _not_opened(path: Path, err: duckdb.Error) -> WarehouseError:
    """A DuckDB error opening `path`: a damaged file, or another cause (too small a memory limit)."""
    return damaged_error(err, path) or WarehouseError(
        f"cannot open {path}: {(str(err).strip().splitlines() or [''])[0][:300]}")


def open_writer(path: str | os.PathLike[str] | None = None) -> duckdb.DuckDBPyConnection:
    """Open for writing, upgrading the schema and the GPU reference tables; end with close_writer (the
    window's one checkpoint: DuckDB would checkpoint every commit)."""
    p = db_path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    con = _connect_retrying(p, LOCK_WAIT_S)
    con.execute("set auto_checkpoint_skip_wal_threshold = 1000000000000")
    con.execute("set checkpoint_threshold = '1GB'")
    migrate(con)
    sync_reference(con)
    return con


def close_writer(con: duckdb.DuckDBPyConnection) -> None:
    """End a write window: one checkpoint, then close (a failed checkpoint leaves the WAL to replay)."""
    try:
        con.execute("checkpoint")
    finally:
        con.close()


def open_reader(path: str | os.PathLike[str] | None = None, wait_s: float = LOCK_WAIT_S,
                allow_files: bool = False, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """Open read-only; unless allow_files (exports), no other file can be touched (ATTACH, COPY, ...) and its
    session is in UTC (times shown, days cut), its configuration then locked."""
    p = db_path(path)
    if not p.exists():
        raise WarehouseError(f"no warehouse at {p}: run `gpuledger refresh` first (or pass --db)")
    if p.is_file():
        _duckdb_magic(p)
    config: dict[str, Any] = {"memory_limit": memory_limit} if memory_limit else {}
    if not allow_files:
        config |= {"enable_external_access": False, "autoinstall_known_extensions": False,
                   "autoload_known_extensions": False}
    con = _connect_retrying(p, wait_s, read_only=True, config=config)
    try:
        # A query cannot set the time zone once the configuration is locked. Another reader of the file in this
        # process shares the first one's database: it finds the zone set for every session, and locked.
        if not allow_files and not con.execute("select current_setting('lock_configuration')").fetchall()[0][0]:
            con.execute("set global TimeZone = 'UTC'")
            con.execute("set lock_configuration = true")
        ours = con.execute("select count(*) from duckdb_tables() where table_name = 'schema_migrations'").fetchall()
    except duckdb.Error as err:
        con.close()
        raise _not_opened(p, err) from err
    if not ours[0][0]:
        con.close()  # another program's DuckDB file: every command refuses it in these words
        raise WarehouseError(NOT_A_WAREHOUSE.format(p))
    return con


def _lock_path(db: Path) -> Path:
    return Path(str(db) + ".refresh.lock")


def _lock_unwritable(db: Path, err: OSError) -> WarehouseError:
    return WarehouseError(f"cannot write beside the warehouse {db}: {_lock_path(db)}: {err.strerror or err}")


def _open_lock_file(db: Path) -> Any:
    """The refresh lock file beside the warehouse; WarehouseError (one line) if it cannot be made."""
    _not_a_directory(db)
    lock_path = _lock_path(db)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        return open(lock_path, "a+")
    except OSError as err:
        raise _lock_unwritable(db, err) from None


def check_writable(path: str | os.PathLike[str] | None = None) -> None:
    """Fail at once, before any fetch, where a refresh could never write its lock file (see _open_lock_file).
    Nothing is created: a command refused now or later leaves no lock file or folder behind."""
    db = db_path(path)
    lock_path = _lock_path(db)
    if lock_path.exists():  # opening it creates nothing
        _open_lock_file(db).close()
        return
    _not_a_directory(db)
    folder = next(p for p in lock_path.parents if p.exists())  # where _open_lock_file would make its first folder
    try:
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        tempfile.TemporaryFile(dir=folder).close()  # a file without a name (O_TMPFILE): nothing to remove
    except OSError as err:
        raise _lock_unwritable(db, err) from None


@contextmanager
def refresh_lock(path: str | os.PathLike[str] | None = None, doing: str = "refresh") -> Iterator[None]:
    """Only one writer (a refresh, or a `doing` such as a pull) per warehouse at a time: a second one is told so
    at once, and which it is."""
    with _open_lock_file(db_path(path)) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "unknown"
            running, _, holder = holder.partition(": ") if ": " in holder else ("refresh", "", holder)
            raise RefreshRunningError(f"another {running.split()[0]} of {db_path(path)} is running ({holder}); "
                                      "try again when it has finished") from None
        f.truncate(0)  # in append mode the write goes to the (new) end
        f.write(f"{doing}: pid {os.getpid()} since {utcnow().isoformat(timespec='seconds')}")
        f.flush()
        try:
            yield
        finally:
            f.truncate(0)
            fcntl.flock(f, fcntl.LOCK_UN)


def lock_holder(path: str | os.PathLike[str] | None = None) -> str | None:
    """What holds the refresh lock ("refresh refresh-...: pid 123 since ..."), while its process runs; None when
    nothing does (a killed holder leaves its words in the file)."""
    import psutil

    try:
        holder = _lock_path(db_path(path)).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    pid = re.search(r"\bpid (\d+)\b", holder)
    return holder if pid and psutil.pid_exists(int(pid.group(1))) else None


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    return f"{prefix}-{utcnow().strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def sync_reference(con: duckdb.DuckDBPyConnection) -> None:
    """Make gpu_models/gpu_aliases equal to the CSVs the parsers use."""
    import pyarrow as pa
    with transaction(con):
        for table, rows in (("gpu_models", gpus.models().values()), ("gpu_aliases", gpus.aliases())):
            data = pa.Table.from_pylist([vars(r) for r in rows])
            with registered(con, _reference=data):
                con.execute(f"delete from {table}")
                con.execute(f"insert into {table} ({', '.join(data.column_names)}) select * from _reference")


@dataclass
class AnomalyPolicy:
    """When a successful-looking scrape is still too suspicious to load; `accept` names providers
    whose anomalies load anyway (a real market move: `--accept-anomaly aws`, setting `accept_anomaly`)."""

    # Fewer offers than this share of the last good run's is held back, overall and per purchase option
    # (a source whose listing follows live capacity declares its own: ProviderSpec.anomaly).
    min_row_ratio: float = 0.75
    max_median_ratio: float = 3.0  # median price per GPU-hour moved more than 3x either way
    accept: frozenset[str] = frozenset()
    # A purchase option with this many rows is checked on its own too (AWS's spot and on-demand prices
    # come from different APIs); a smaller provider is held back only when it lost more than half.
    min_rows: int = 10
    small_min_row_ratio: float = 0.5
    # One offer's price moving more than this factor either way is held back (hold_back_offer_jumps).
    max_offer_ratio: float = Settings.model_fields["offer_anomaly_factor"].default

    @classmethod
    def from_env(cls, accept: Sequence[str] = ()) -> "AnomalyPolicy":
        settings = load_settings()
        return cls(accept=settings.accepted_anomalies() | {name.lower() for name in accept},  # AWS is aws
                   max_offer_ratio=settings.offer_anomaly_factor)


@dataclass
class LoadReport:
    provider: str
    run_id: str
    state: str  # ok | failed | not_configured | interrupted
    error: str | None = None
    rows_parsed: int = 0
    rows_loaded: int = 0
    rows_quarantined: int = 0
    egress_rows: int = 0
    storage_rows: int = 0
    new: int = 0
    changed: int = 0
    closed: int = 0
    notes: list[str] = field(default_factory=list)
    degraded: str | None = None  # the enrichments that failed, and why

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "not_configured")


def content_hash_sql(spec: TableSpec) -> str:
    """content_hash: DuckDB's hash() of the key and tracked columns, pairing a current row with its
    open history version (changes are found by comparing columns, so a collision hides nothing)."""
    return f"hash({', '.join(spec.key + spec.tracked)})::VARCHAR"


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, **tables: pa.Table) -> Iterator[None]:
    """The Arrow `tables` as views of `con`, by name, for the block."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield
    finally:
        for name in tables:
            con.unregister(name)


def _merge(con: duckdb.DuckDBPyConnection, spec: TableSpec, provider: str, rows: pa.Table,
           run_id: str, now: datetime) -> tuple[int, int, int]:
    """SCD2 merge of one provider's complete current set; returns (new, changed, closed). The current table
    is edited in place, so a nightly load writes little more than what changed (NULLs compare equal)."""
    stage = f"_stage_{spec.table}"
    p, stamp = {"p": provider}, {"now": now, "run": run_id}
    same = " AND ".join(f"s.{c} IS NOT DISTINCT FROM o.{c}" for c in spec.tracked) or "true"
    with registered(con, _incoming=rows):
        con.execute(
            f"""create or replace temp table {stage} as
                select *, case when unchanged then current_hash else {content_hash_sql(spec)} end as content_hash
                from (select s.*, coalesce(o.content_hash is not null and {same}, false) as unchanged,
                             o.content_hash as current_hash, o.first_seen as current_first_seen
                      from _incoming s left join (select * from {spec.table} where provider = $p) o
                        on {spec.key_join('o', 's')})""", p)
    new, changed = con.execute(
        "select count(*) filter (where current_hash is null), "
        f"count(*) filter (where current_hash is not null and not unchanged) from {stage}").fetchall()[0]
    cols = ", ".join(spec.columns)
    s_cols = ", ".join(f"s.{c}" for c in spec.columns)
    con.execute(
        f"""update {spec.history} h set valid_to = $now, closed_by_run_id = $run
            where h.provider = $p and h.valid_to is null and not exists
                  (select 1 from {stage} s where {spec.key_join('s', 'h')} and s.unchanged)""", p | stamp)
    con.execute(
        f"""insert into {spec.history} ({cols}, content_hash, valid_from, valid_to, run_id, closed_by_run_id)
            select {s_cols}, s.content_hash, $now, null, $run, null from {stage} s where not s.unchanged""", stamp)
    # The current rows: drop vanished and changed ones, restamp the unchanged, insert new and changed (an offer
    # back after a gap keeps the first_seen of its first version).
    dropped = con.execute(
        f"""delete from {spec.table} o where o.provider = $p and not exists
            (select 1 from {stage} s where {spec.key_join('s', 'o')} and s.unchanged)""", p).fetchall()[0][0]
    # Restamped by a scan, not UPDATE ... FROM a join: updating rows in a join's probe order is many times slower.
    untracked = "".join(
        f", {c} = (select s.{c} from {stage} s where {spec.key_join('s', 'o')} and s.unchanged)"
        for c in spec.attrs if c not in spec.tracked)
    con.execute(f"update {spec.table} o set last_seen = $now, run_id = $run{untracked} where o.provider = $p",
                p | stamp)
    con.execute(
        f"""insert into {spec.table} ({cols}, content_hash, first_seen, last_seen, run_id)
            select {s_cols}, s.content_hash,
                   coalesce(s.current_first_seen, (select min(h.valid_from) from {spec.history} h
                                                   where h.provider = $p and {spec.key_join('h', 's')}), $now),
                   $now, $run from {stage} s
            where not s.unchanged""", p | stamp)
    con.execute(f"drop table {stage}")
    return new, changed, dropped - changed


def _medians(con: duckdb.DuckDBPyConnection, offers: str,
             params: dict[str, Any]) -> tuple[float | None, dict[str, tuple[int, float | None]]]:
    """The median price per GPU-hour of the `offers` relation, and per purchase option (rows, median)."""
    rows = con.execute("select purchase_option, grouping(purchase_option), count(*), median(price_per_gpu_hour) "
                       f"from {offers} group by grouping sets ((purchase_option), ())", params).fetchall()
    return (next((m for _, total, _, m in rows if total), None),
            {option: (n, m) for option, total, n, m in rows if not total})


def _quarantine_summary(quarantined: list[dict[str, str]], most: int = 3, width: int = 160) -> list[str]:
    """The quarantined offers as one problem: their `most` commonest reasons, each once with its count
    (a reason that only names its record, as "REF: why" does, counts as one), most first and then by
    text, a long one cut after a whole word."""
    bad = [q for q in quarantined if q["kind"] == "offer"]
    if not bad:
        return []
    counts = Counter(shortened(q["reason"].removeprefix(f"{q['source_ref']}: "), width) for q in bad)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    said = [f"{n}× {reason}" for reason, n in ranked[:most]]
    if len(ranked) > most:
        rest = sum(n for _, n in ranked[most:])
        said.append(f"{rest}× {len(ranked) - most} other reason{'s' if len(ranked) - most > 1 else ''}")
    return [f"{len(bad)} offer record{'s were' if len(bad) > 1 else ' was'} quarantined: {'; '.join(said)}"]


def check_anomalies(con: duckdb.DuckDBPyConnection, outcome: ScrapeOutcome, offers: pa.Table | None,
                    policy: AnomalyPolicy, notes: list[str]) -> str | None:
    """Why this scrape must not replace the provider's current rows, or None (an accepted anomaly goes to `notes`)."""
    provider = outcome.provider
    if offers is None:
        why = "the scrape produced no valid offers (an empty result is never loaded)"
        return "; ".join([why, *_quarantine_summary(outcome.quarantined)])
    last_good = con.execute("select rows_loaded from scrape_runs where provider = ? and state = 'ok' "
                            "order by finished_at desc, rowid desc limit 1", [provider]).fetchall()
    if not last_good:
        return None
    last_rows = last_good[0][0]
    last_median, current = _medians(con, "offers where provider = $p", {"p": provider})
    with registered(con, _incoming=offers):
        median, incoming = _medians(con, "_incoming", {})
    min_ratio = policy.min_row_ratio if outcome.min_row_ratio is None else outcome.min_row_ratio
    problems = []

    def median_moved(label: str, old: float | None, new: float | None) -> None:
        limit = policy.max_median_ratio
        if old and new is not None and (new / old > limit or new / old < 1 / limit):
            problems.append(f"{label}median price per GPU-hour moved from {old:.4f} to {new:.4f} USD "
                            f"(x{new / old:.2f}, limit x{limit:g})")

    overall_ratio = min_ratio if last_rows >= policy.min_rows else min(min_ratio, policy.small_min_row_ratio)
    if last_rows and offers.num_rows < overall_ratio * last_rows:
        problems.append(f"row count dropped from {last_rows} to {offers.num_rows} "
                        f"(below {overall_ratio:.0%} of the last good run)")
    median_moved("", last_median, median)
    if len(current) > 1:  # with one option the checks above already said it all
        for option, (old_rows, old_median) in sorted(current.items()):
            rows, option_median = incoming.get(option, (0, None))
            if old_rows >= policy.min_rows and rows < min_ratio * old_rows:
                problems.append(f"{option} rows dropped from {old_rows} to {rows} "
                                f"(below {min_ratio:.0%} of the current {option} offers)")
            median_moved(f"{option} ", old_median, option_median)
    if not problems:
        return None
    problems += _quarantine_summary(outcome.quarantined)
    if provider in policy.accept:
        notes.append("anomaly accepted by override: " + "; ".join(problems))
        return None
    return "anomaly guard: " + "; ".join(problems) + \
        f" (if this is a real market move, rerun with --accept-anomaly {provider})"


def carry_degraded(con: duckdb.DuckDBPyConnection, provider: str, offers: pa.Table,
                   failed: dict[str, Any]) -> pa.Table:
    """The offers to merge when the enrichment `failed`: the purchase options, columns and provider_data keys
    only it yields keep their current rows and values, in the regions it failed in when it names them (the
    other regions' answers are fresh)."""
    import pyarrow as pa
    options, keys = list(failed.get("options", ())), list(failed.get("provider_data_keys", ()))
    kept, models, regions = set(failed.get("columns", ())), failed.get("gpu_models_like") or "", failed.get("regions")
    if not options and not kept and not keys and not models:
        return offers
    where = "list_contains($regions, {}.region)" if regions else "true"
    carried = f"o.provider is not null and {where.format('i')}"
    picked = ", ".join(f"case when {carried} then o.{c} else i.{c} end as {c}" if c in kept else f"i.{c}"
                       for c in OFFERS.columns)
    with registered(con, _incoming=offers):
        table = con.sql(
            f"""select {picked}, case when {carried} then o.provider_data end as stored_data from _incoming i
                left join (select * from offers where provider = $p) o on {OFFERS.key_join('o', 'i')}
                union all
                select {', '.join(OFFERS.columns)}, null from offers o where o.provider = $p
                  and (list_contains($options, o.purchase_option) or $models <> '' and o.gpu_model like $models)
                  and {where.format('o')}
                  and not exists (select 1 from _incoming i where {OFFERS.key_join('o', 'i')})""",
            params={"p": provider, "options": options, "models": models, **({"regions": regions} if regions else {})},
        ).to_arrow_table()
    stored = table.column("stored_data").to_pylist()
    table = table.drop_columns(["stored_data"])
    if keys:
        data = [new if old is None else _with_stored_keys(new, old, keys)
                for new, old in zip(table.column("provider_data").to_pylist(), stored)]
        table = table.set_column(table.schema.get_field_index("provider_data"), "provider_data",
                                 pa.array(data, pa.string()))
    return table.cast(offers.schema)


def _with_stored_keys(new: str | None, old: str, keys: list[str]) -> str:
    """provider_data `new` with `keys` as in `old` (absent where it lacks them), written as the adapters
    write it (json.dumps, keys sorted), so an offer nothing else changed keeps its content hash."""
    merged, before = json.loads(new) if new else {}, json.loads(old)
    for key in keys:
        if key in before:
            merged[key] = before[key]
        else:
            merged.pop(key, None)
    return json.dumps(merged, sort_keys=True)


def hold_back_offer_jumps(con: duckdb.DuckDBPyConnection, provider: str, offers: pa.Table, policy: AnomalyPolicy,
                          notes: list[str]) -> tuple[pa.Table, list[dict[str, str]]]:
    """The offers to merge, each one whose price moved beyond `policy.max_offer_ratio` replaced by its current
    row, and a quarantine entry per offer held back (3.99 read as 39.9). A jump the previous scrape held
    back, seen again within the factor, loads; so does every offer of a provider in `policy.accept`."""
    limit = policy.max_offer_ratio
    with registered(con, _incoming=offers):
        rows = con.execute(
            f"""with last_run as (
                    select run_id from scrape_runs where provider = $p and state = 'ok'
                    order by finished_at desc, rowid desc limit 1),
                held_before as (
                    select [json_extract_string(q.raw, '$.region'), coalesce(json_extract_string(q.raw, '$.zone'), ''),
                            json_extract_string(q.raw, '$.instance_type'),
                            json_extract_string(q.raw, '$.purchase_option')] as key,
                           try_cast(json_extract(q.raw, '$.price_per_hour') as double) as price
                    from quarantine q join last_run r on r.run_id = q.run_id
                    where q.provider = $p and q.kind = 'offer'
                      and starts_with(q.reason, 'per-offer anomaly guard: '))
                select {', '.join('i.' + k for k in OFFERS.key)}, o.price_per_hour, i.price_per_hour,
                       coalesce(i.price_per_hour <= h.price * $limit and i.price_per_hour * $limit >= h.price,
                                false) as confirmed, to_json(i)::varchar as raw
                from _incoming i join offers o on {OFFERS.key_join('i', 'o')}
                left join held_before h on h.key = [i.region, i.zone, i.instance_type, i.purchase_option]
                where o.provider = $p and (i.price_per_hour > o.price_per_hour * $limit
                                           or i.price_per_hour * $limit < o.price_per_hour)
                order by all""", {"p": provider, "limit": limit}).fetchall()
        if confirmed := [r for r in rows if r[7]]:
            notes.append(f"{len(confirmed)} offer price jump(s) loaded, seen again after the previous scrape held them "
                         "back: " + "; ".join(f"{_offer_ref(r)} {r[5]:g} -> {r[6]:g} USD" for r in confirmed))
        if not (jumps := [r for r in rows if not r[7]]):
            return offers, []
        described = [f"{provider} offer {_offer_ref(row)}: price per hour moved from {row[5]:g} to {row[6]:g} USD "
                     f"(x{row[6] / row[5]:.2f}, limit x{limit:g})" for row in jumps]
        if provider in policy.accept:
            notes.append(f"offer price jumps accepted by override: {'; '.join(described)}")
            return offers, []
        cols, key = ", ".join(OFFERS.columns), ", ".join(OFFERS.key[1:])
        kept = con.sql(
            f"""select {cols} from _incoming where not list_contains($held, [{key}])
                union all
                select {cols} from offers where provider = $p and list_contains($held, [{key}])""",
            params={"p": provider, "held": [list(row[1:5]) for row in jumps]}).to_arrow_table()
    quarantined = [
        {"provider": provider, "kind": "offer", "source_ref": _offer_ref(row),
         "reason": f"per-offer anomaly guard: {text}; kept at its previous version "
                   f"(if this is a real price change, rerun with --accept-anomaly {provider})", "raw": row[8]}
        for row, text in zip(jumps, described)]
    notes.append(f"{len(jumps)} offer(s) held back at their previous price by the per-offer anomaly guard")
    return kept.cast(offers.schema), quarantined


def _offer_ref(row: tuple[Any, ...]) -> str:
    """region/zone/instance type/purchase option of a (provider, region, ...) row."""
    return "/".join(str(v) for v in row[1:5])


def load_outcome(con: duckdb.DuckDBPyConnection, outcome: ScrapeOutcome, refresh_id: str,
                 policy: AnomalyPolicy | None = None, now: datetime | None = None,
                 on_offers_merged: Callable[[str], None] | None = None) -> LoadReport:
    """Merge one provider's scrape in one transaction, or record why it was not loaded.
    `on_offers_merged(provider)` runs inside the transaction (the process-fault tests hold it there)."""
    import pyarrow as pa
    policy = policy or AnomalyPolicy()
    now = now or utcnow()
    run_id = new_id(f"run-{outcome.provider}")
    report = LoadReport(outcome.provider, run_id, "failed" if outcome.state == "ok" else outcome.state,
                        error=outcome.error, notes=list(outcome.notes),
                        degraded="; ".join(f"{d['name']} ({d['reason']})" for d in outcome.degraded) or None)
    quarantined = list(outcome.quarantined)
    offers = None if outcome.side_tables_only else outcome.table("offers")  # such a source owns no offers
    report.rows_parsed = outcome.count("offers") + sum(q["kind"] == "offer" for q in quarantined)
    held_back: list[dict[str, str]] = []
    con.execute("begin transaction")
    try:
        if outcome.state == "unchanged":
            report.state = "ok"
            report.rows_loaded, report.egress_rows, report.storage_rows = confirm_unchanged(con, outcome.provider,
                                                                                            run_id, now)
            report.notes.append(f"{report.rows_loaded} offers confirmed as they are")
            availability.record_unchanged(con, outcome.provider, outcome.started_at, run_id, report.notes)
        elif outcome.state == "ok":
            if offers is not None:
                # before the guard: what a failed enrichment did not bring is not a drop in the market
                for failed in outcome.degraded:
                    offers = carry_degraded(con, outcome.provider, offers, failed)
            report.error = None if outcome.side_tables_only else check_anomalies(con, outcome, offers, policy,
                                                                                  report.notes)
            if report.error is None:
                if offers is not None:
                    offers, held_back = hold_back_offer_jumps(con, outcome.provider, offers, policy, report.notes)
                    quarantined += held_back
                    report.new, report.changed, report.closed = _merge(con, OFFERS, outcome.provider, offers,
                                                                       run_id, now)
                    if on_offers_merged is not None:
                        on_offers_merged(outcome.provider)
                for spec, name in ((EGRESS, "egress"), (STORAGE, "storage")):
                    if name in outcome.tables:  # a source without egress/storage data leaves those rows alone
                        _merge(con, spec, outcome.provider, outcome.table(name), run_id, now)
                load_side_tables(con, outcome, run_id, now, report.notes)
                report.rows_loaded = outcome.count("offers")
                report.egress_rows, report.storage_rows = outcome.count("egress"), outcome.count("storage")
                report.state = "ok"
                if outcome.provider_facts and not outcome.side_tables_only:
                    upsert_provider_facts(con, outcome.provider_facts, now)
                # what validates the rows now loaded: none unless they are all this answer's
                keep_validators(con, outcome.provider, {} if outcome.degraded or held_back else outcome.validators,
                                run_id, now)
        report.rows_quarantined = len(quarantined)
        if quarantined:
            with registered(con, _q=pa.Table.from_pylist(quarantined)):
                con.execute("insert into quarantine select $run, provider, kind, source_ref, reason, raw, $now from _q",
                            {"run": run_id, "now": now})
        _insert_run(con, outcome, report, refresh_id, run_id)
        con.execute("commit")
    except Exception as err:
        with suppress(duckdb.Error):  # a failed commit has already rolled back
            con.execute("rollback")
        report.state = "failed"
        report.error = f"load failed, nothing changed: {type(err).__name__}: {root_cause(err)}"
        report.new = report.changed = report.closed = report.rows_loaded = 0
        try:
            with transaction(con):
                _insert_run(con, outcome, report, refresh_id, run_id)
        except duckdb.Error as again:
            # Not even the failure can be recorded (a full disk, a vanished file): stop with the first cause.
            raise WarehouseError(
                f"cannot write to the warehouse, stopped at {outcome.provider} (its rows and those of the "
                f"providers after it are unchanged): {root_cause(err)}") from again
    return report


def confirm_unchanged(con: duckdb.DuckDBPyConnection, provider: str, run_id: str, now: datetime) -> list[int]:
    """An unchanged answer's merge: the current rows are restamped; returns their counts per table."""
    return [con.execute(f"update {spec.table} set last_seen = $now, run_id = $run where provider = $p",
                        {"now": now, "run": run_id, "p": provider}).fetchall()[0][0] for spec in SPECS]


def load_side_tables(con: duckdb.DuckDBPyConnection, outcome: ScrapeOutcome, run_id: str, now: datetime,
                     notes: list[str]) -> None:
    """Append the scrape's spot price history, capacity block offerings and availability signals; their
    counts go to `notes`."""
    from gpuledger.warehouse.spot import load_spot_history

    if "spot_prices" in outcome.tables:
        stored, skipped = load_spot_history(con, outcome.table("spot_prices"), run_id, now)
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(skipped.items()))
        notes.append(f"spot price history: {stored} of {outcome.count('spot_prices')} observations stored"
                     + (f" ({why})" if why else ""))
    if "capacity_blocks" in outcome.tables:
        with registered(con, _blocks=outcome.table("capacity_blocks")):
            con.execute(f"insert into capacity_block_offerings ({', '.join(CAPACITY_BLOCK_FIELDS)}, observed_at, "
                        "run_id) select *, $now, $run from _blocks", {"now": now, "run": run_id})
        notes.append(f"capacity blocks: {outcome.count('capacity_blocks')} offerings stored")
    availability.record(con, outcome, run_id, notes)


def _chain(err: BaseException) -> list[BaseException]:
    """`err` and each error behind it (its cause, else its context), each once."""
    chain: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and cause not in chain:  # an exception equals only itself
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def first_error(err: BaseException) -> BaseException:
    """The first error of the chain `err` ends: a failed rollback must not hide a full disk."""
    return _chain(err)[-1]


def error_text(err: BaseException) -> str:
    """The text of the deepest error of `err`'s chain that has one ('' when none does): under an async client
    httpx's ReadError has no text, its cause says '[Errno 104] Connection reset by peer', and its ConnectError
    says 'All connection attempts failed' where the OSError under it names the address refused."""
    return next((str(e) for e in reversed(_chain(err)) if str(e)), "")


def root_cause(err: BaseException) -> str:
    """The first error of a chain, in one line."""
    first = first_error(err)
    text = " ".join(str(first).split())
    return f"{type(first).__name__}: {text}"[:500] if first is not err else text[:500]


def _insert_run(con: duckdb.DuckDBPyConnection, outcome: ScrapeOutcome, report: LoadReport,
                refresh_id: str, run_id: str) -> None:
    columns = [c.name for c in SCRAPE_RUN_COLUMNS]
    con.execute(
        f"insert into scrape_runs ({', '.join(columns)}) values ({', '.join('?' * len(columns))})",
        [run_id, refresh_id, outcome.provider, outcome.mode, outcome.started_at, outcome.finished_at,
         report.state, report.rows_parsed, report.rows_loaded, report.rows_quarantined,
         report.egress_rows, report.storage_rows, report.new, report.changed, report.closed,
         outcome.requests, (outcome.finished_at - outcome.started_at).total_seconds(),
         report.error, "; ".join(report.notes) or None, report.degraded, outcome.bytes_fetched])


def upsert_provider_facts(con: duckdb.DuckDBPyConnection, facts: dict[str, Any], now: datetime) -> None:
    """Replace the provider's `providers` row with `facts` (ProviderFacts' fields and `provider`)."""
    values = {c: facts.get(c) for c in PROVIDER_FACT_COLUMNS}
    if isinstance(values["source_urls"], (list, tuple)):
        values["source_urls"] = json.dumps(list(values["source_urls"]))
    con.execute("delete from providers where provider = ?", [facts["provider"]])
    cols = ("provider", *values, "updated_at")
    con.execute(f"insert into providers ({', '.join(cols)}) values ({', '.join('?' for _ in cols)})",
                [facts["provider"], *values.values(), now])


def _resumed(outcome: ScrapeOutcome, refresh_id: str, last_ok: dict[str, datetime],
             recorded: set[tuple[str, datetime]]) -> ScrapeOutcome | None:
    """A result an earlier refresh saved: noted as resumed, refused when the warehouse holds a later
    successful scrape (it would set prices back), or None when it is in the warehouse already: its run
    (`recorded`: provider and start of every run), whatever its state, was published by a refresh killed
    before it removed the file."""
    if outcome.refresh_id == refresh_id:
        return outcome
    if (outcome.provider, outcome.started_at) in recorded:
        return None
    newer = last_ok.get(outcome.provider)
    why = f"fetched by {outcome.refresh_id}"
    if outcome.path is not None and (error := pending.write_error(outcome.path)):
        why += f", whose write failed ({error})"
    if newer is not None and newer >= outcome.started_at:
        return ScrapeOutcome(outcome.provider, outcome.mode, outcome.started_at, outcome.finished_at, state="failed",
                             requests=outcome.requests, error=f"not merged: {why}; the warehouse already holds a "
                             f"later scrape (started {newer.astimezone(timezone.utc).isoformat(timespec='seconds')})")
    outcome.notes.append(f"resumed: {why}; merged later")
    return outcome


def merge_time(con: duckdb.DuckDBPyConnection, provider: str, scraped_at: datetime) -> datetime:
    """When a scrape merged after the fact (a saved result, a pulled catalog) takes effect: when it was made (a
    price seen at 04:00 and merged at 04:34 held from 04:00), never later than now (a clock ahead) nor before
    what the warehouse already holds of the provider (its versions would overlap): a refresh's own results,
    dated now, too, since a clock set back (an NTP step, a resumed VM) would date them before the last ones.
    Such a merge is dated a microsecond after the last: at the same instant, its versions could not be told apart
    from the last merge's, nor ordered."""
    p = {"p": provider}
    held = [m for spec in SPECS for sql in (f"select max(last_seen) from {spec.table} where provider = $p",
                                           f"select max(coalesce(valid_to, valid_from)) from {spec.history} "
                                           "where provider = $p")
            for (m,) in con.execute(sql, p).fetchall() if m is not None]
    at = min(scraped_at, utcnow())
    return at if not held or at > max(held) else max(held) + timedelta(microseconds=1)


def _unreadable(path: Path, err: Exception) -> ScrapeOutcome:
    """A saved result that cannot be read: recorded as its provider's failed run, its file set aside."""
    aside = path.with_name(path.name + ".unreadable")
    path.replace(aside)
    now = utcnow()
    return ScrapeOutcome(path.stem, "unknown", now, now, state="failed", error=f"{err}; set aside as {aside.name}")


def merge_pending(db: str | os.PathLike[str] | None, refresh_id: str, policy: AnomalyPolicy,
                  stop_requested: Callable[[], bool] = lambda: False,
                  on_merged: Callable[[str], None] | None = None) -> list[LoadReport]:
    """Merge every saved result of this warehouse (warehouse.pending), oldest refresh first, into a working
    copy published in one atomic rename (warehouse.snapshot); the caller holds the refresh lock. Once
    `stop_requested()`, the results left keep waiting; an unwritable warehouse raises WarehouseError."""
    from gpuledger.warehouse.snapshot import PublishError, discard, publish, start_working_copy

    published = db_path(db)
    pending.remove_partial(published)
    paths = pending.waiting(published)
    if not paths:
        with suppress(OSError):  # none left, once a partial save's files are gone
            pending.pending_dir(published).rmdir()
        return []
    reports: list[LoadReport] = []
    merged: list[Path] = []
    work = None
    try:
        try:
            work = start_working_copy(published)
            con = open_writer(work)
        except WarehouseError as err:
            raise WarehouseError(str(err).replace(str(work), str(published), 1)) from err
        except (PublishError, duckdb.Error, OSError) as err:
            raise WarehouseError(f"cannot open {published} for writing: {root_cause(err)}") from err
        try:
            last_ok = dict(con.execute("select provider, max(started_at) from scrape_runs where state = 'ok' "
                                       "group by provider").fetchall())
            recorded = set(con.execute("select provider, started_at from scrape_runs").fetchall())
            for path in paths:
                if stop_requested():
                    reports.append(LoadReport(path.stem, "", "interrupted", error="interrupted before its merge; "
                                              f"its fetched result waits in {path.parent}"))
                    continue
                try:
                    outcome = _resumed(pending.read(path), refresh_id, last_ok, recorded)
                except pending.PendingError as err:
                    outcome = _unreadable(path, err)
                if outcome is not None:  # None: in the warehouse already
                    # an earlier refresh's result is dated at its scrape, not at this merge
                    late = outcome.refresh_id != refresh_id
                    when = merge_time(con, outcome.provider, outcome.finished_at if late else utcnow())
                    if when > utcnow():  # what a clock that was ahead dated: said, never silently in the future
                        outcome.notes.append(
                            f"dated {when.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC, after this machine's "
                            f"clock: the warehouse holds {outcome.provider}'s data dated up to then (a clock that "
                            "was ahead); its versions, last_seen and changes stay dated so until then")
                    reports.append(load_outcome(con, outcome, refresh_id, policy, now=when))
                    if on_merged is not None:
                        on_merged(outcome.provider)
                merged.append(path)
        finally:
            try:
                close_writer(con)  # the window's one checkpoint
            except duckdb.Error as err:  # left in the WAL: publish refuses the copy
                log.warning("closing the working copy of %s: %s", published, root_cause(err))
        publish(work, published)
    except BaseException as err:
        if work is not None:
            discard(work)
        if not isinstance(err, (WarehouseError, PublishError)):
            raise
        said = str(err) if isinstance(err, WarehouseError) else f"cannot write {published}: {err}"
        pending.record_write_error(paths, said)
        raise WarehouseError(f"{said}. The fetched results wait in {pending.pending_dir(published)}: the next "
                             "refresh, or `gpuledger refresh --resume`, merges them") from err
    for path in merged:
        if path.exists():  # an unreadable one stays set aside for its operator
            pending.done(path)
    with suppress(OSError):  # results still wait there
        pending.pending_dir(published).rmdir()
    return reports
