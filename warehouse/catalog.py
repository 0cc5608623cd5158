"""A published catalog of the warehouse (`gpuledger publish DIR`: manifest.json plus per provider Parquet
files of its current tables and history segments) and its checked, transactional loading (`gpuledger pull`)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit
from urllib.request import url2pathname

import anyio
import duckdb
import httpx
import pyarrow
from anyio.from_thread import start_blocking_portal
from pydantic import ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from gpuledger import __version__
from gpuledger.http_headers import ACCEPT_ENCODING, retry_after_s, unsafe_coding
from gpuledger.warehouse.check import history_checks
from gpuledger.warehouse.export import missing_folders, older_warehouse, sha256_file
from gpuledger.warehouse.pending import SCD2_TABLES, ScrapeOutcome
from gpuledger.warehouse.records import RECORD_TYPES, describe_validation_error
from gpuledger.warehouse.schema import SCHEMA_VERSION, SPECS, SPOT_PRICE_FIELDS, TABLES, arrow_schema, column_names
from gpuledger.warehouse.settings import env_name, load_settings
from gpuledger.warehouse.store import (
    AnomalyPolicy, WarehouseError, check_anomalies, close_writer, damaged_error, db_path, error_text, first_error,
    load_outcome, merge_time, new_id, open_writer, refresh_lock, root_cause, upsert_provider_facts, utcnow,
)
from gpuledger.warehouse.validators import keep_validators

FORMAT = 2  # 2: availability history segments; format 1 catalogs (without them) are read too
FORMATS_READ = (1, 2)
MANIFEST = "manifest.json"
MANIFEST_MAX_BYTES = 16 << 20
FILE_MAX_BYTES = 2 << 30  # a GitHub release asset's limit
MAX_SEGMENTS = 30  # segments of one table, beyond which they are folded into one
MAX_FILES = 1000  # a GitHub release's assets, the manifest one of them: beyond, the longest segment runs are folded
TIMEOUT_S = 60.0
MIN_RATE = 16 << 10  # bytes a second: a download slower than this (beyond TIMEOUT_S) is a server trickling
CATALOG_KEY = "catalog"  # fetch_validators key: the files of a provider's last pull
# A host busy or restarting (a CDN's 503, a rate limit's 429) or a dropped connection: each download is tried
# ATTEMPTS times, waiting its Retry-After (seconds or an HTTP date) or 2, 4 s, at most WAIT_MAX_S.
BUSY = frozenset({429, 500, 502, 503, 504})
ATTEMPTS, WAIT_MAX_S = 3, 30.0
NAME = re.compile(r"([a-z0-9_]+)\.([a-z_]+)\.\d{8}T\d{6}Z(-\d+)*\.parquet")

CURRENT = {spec.table: spec for spec in SPECS}
# table -> (what identifies a row across segments, the time that marks a row as changed)
SEGMENTED: dict[str, tuple[tuple[str, ...], str]] = {
    **{s.history: (s.key + ("valid_from",), "greatest(valid_from, coalesce(valid_to, valid_from))") for s in SPECS},
    "spot_price_history": (SPOT_PRICE_FIELDS[:6], "loaded_at"),
    "capacity_block_offerings": (column_names("capacity_block_offerings"), "observed_at"),
    # its run_id aside, every column: one key may give two signals at one time (two listings of a marketplace)
    "availability_history": (tuple(c for c in column_names("availability_history") if c != "run_id"), "observed_at"),
}
HISTORY = {s.history for s in SPECS}


class CatalogError(Exception):
    """A catalog or one of its files cannot be written or read; the message names it and why."""


class HostBusy(CatalogError):
    """A download the host may answer if asked again (BUSY, or the connection failed)."""

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after_s(retry_after)


def _wait_s(state: RetryCallState) -> float:
    error = state.outcome.exception() if state.outcome else None
    asked = getattr(error, "retry_after", None)
    return min(asked if asked is not None else 2.0 ** state.attempt_number, WAIT_MAX_S)


def shown(source: str) -> str:
    """`source` as it may be printed or stored (scrape_runs.notes): a URL as scheme://host/path, without its
    user and password, query string or fragment (a signed URL's token is in its query string)."""
    if not re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", source):
        return source
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@", r"\1", re.split(r"[?#]", source, maxsplit=1)[0])


def local_folder(source: str, refused: str) -> str:
    """The folder `source` names: a file:// URL of this machine as its path, a path as it is; another URL
    (s3://, ftp://, or a file:// URL of another host) is refused, CatalogError "<source>: <refused>"."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]+)://", source)
    if scheme and scheme[1].lower() == "file" and urlsplit(source).netloc in ("", "localhost"):
        return url2pathname(urlsplit(source).path)
    if scheme:
        raise CatalogError(f"{shown(source)}: {refused}")
    return source


def _folder_url(source: str) -> str:
    """The catalog's URL `source` (its folder, or its manifest's own address) as its folder's: the path
    without a trailing / or manifest.json, the query string kept (a host's token for each file)."""
    try:
        parts = urlsplit(source)
    except ValueError as err:  # http://[::1
        raise CatalogError(f"{shown(source)}: not a URL ({err})") from None
    if not parts.hostname:  # http:///catalog
        raise CatalogError(f"{shown(source)}: not a URL (no host)")
    path = parts.path.rstrip("/")
    if path.rpartition("/")[2] == MANIFEST:
        path = path.rpartition("/")[0]
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _file_url(folder: str, name: str) -> str:
    """File `name` of the catalog whose folder's URL is `folder` (from _folder_url), with its query string."""
    parts = urlsplit(folder)
    return urlunsplit((parts.scheme, parts.netloc, f"{parts.path}/{name}", parts.query, ""))


def _time(text: str | None) -> datetime | None:
    """A manifest's time: ISO 8601 with its UTC offset (ValueError without one, TypeError if no text)."""
    if not text:
        return None
    time = datetime.fromisoformat(text)
    if time.utcoffset() is None:
        raise ValueError(f"time {text!r} without a UTC offset")
    return time


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _marks(con: duckdb.DuckDBPyConnection, provider: str) -> dict[str, Any]:
    """Per segmented table, the latest time that marks a row of `provider` as changed."""
    return {t: con.execute(f"select max({mark}) from {t} where provider = $p", {"p": provider}).fetchall()[0][0]
            for t, (_, mark) in SEGMENTED.items()}


# -- publishing -------------------------------------------------------------------------------------

def _write(con: duckdb.DuckDBPyConnection, folder: Path, name: str, table: str, query: str,
           params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of `query` as Parquet file `name` and its manifest entry; none when there are none."""
    rows = con.execute(f"select count(*) from ({query})", params).fetchall()[0][0]
    if not rows:
        return []
    path = folder / name
    con.sql(query, params=params).write_parquet(str(path), compression="zstd")
    return [{"name": name, "table": table, "rows": rows, "bytes": path.stat().st_size, "sha256": sha256_file(path)}]


def publish(con: duckdb.DuckDBPyConnection, folder: Path, now: datetime | None = None) -> dict[str, str]:
    """Publish the warehouse open on `con` into `folder` (empty, or holding the previous catalog):
    provider -> "published" or "kept" (nothing later of it). Raises CatalogError. A failed publish leaves
    no folder it made, nor a file it wrote that the manifest there does not list (a publish into it at the
    same time may have listed it)."""
    made = missing_folders(folder)[-1:]  # the first folder it makes, if any
    now = now or utcnow()
    stamp, n = now.strftime("%Y%m%dT%H%M%SZ"), 1  # in the name of every file this publish writes
    while any(folder.glob(f"*.{stamp}.parquet")):
        n += 1
        stamp = f"{now.strftime('%Y%m%dT%H%M%SZ')}-{n}"
    try:
        return _publish_into(con, folder, now, stamp)
    except BaseException:
        if made and not (folder / MANIFEST).exists():
            shutil.rmtree(made[0], ignore_errors=True)
        else:
            _remove_unlisted(folder, stamp)
        raise


def _remove_unlisted(folder: Path, stamp: str) -> None:
    """Remove the files a failed publish wrote (named with its `stamp`, a folded segment's `<stamp>-0`) that the
    manifest in `folder` does not list."""
    manifest = folder / MANIFEST
    try:
        listed = {f["name"] for e in (read_manifest(manifest.read_bytes(), str(manifest))["providers"].values()
                                      if manifest.exists() else ()) for f in e["files"]}
        for path in [*folder.glob(f"*.{stamp}.parquet"), *folder.glob(f"*.{stamp}-0.parquet")]:
            if path.name not in listed:
                path.unlink()
    except (OSError, CatalogError, KeyError, TypeError):  # unreadable, or a manifest entry not as written
        pass  # the publish's own error is what the user reads; what is left goes at the next publish


def _publish_into(con: duckdb.DuckDBPyConnection, folder: Path, now: datetime, stamp: str) -> dict[str, str]:
    try:
        con.execute("set TimeZone = 'UTC'")
        runs = {p: (run_id, started, finished) for p, run_id, started, finished in con.execute(
            "select provider, arg_max(run_id, started_at), max(started_at), arg_max(finished_at, started_at) "
            "from scrape_runs where state = 'ok' group by provider").fetchall()}
        providers = sorted({p for t in (*CURRENT, *SEGMENTED) for (p,) in
                            con.execute(f"select distinct provider from {t}").fetchall()} & set(runs))
        # a catalog of nothing, which pull refuses, is never made
        if not providers and not (folder / MANIFEST).exists():
            [(path,)] = con.execute("select path from duckdb_databases() where database_name = current_database()"
                                    ).fetchall()
            why = "no rows of a successful scrape" if runs else "no successful scrape"
            raise CatalogError(f"{path} holds {why}: nothing to publish "
                               "(`gpuledger refresh` or `gpuledger pull` first)")
        folder.mkdir(parents=True, exist_ok=True)
        before = {"providers": {}}
        if (folder / MANIFEST).exists():  # a newer gpuledger's catalog is not rewritten as this one's format
            try:
                before = read_manifest((folder / MANIFEST).read_bytes(), str(folder / MANIFEST))
            except CatalogError as err:
                raise CatalogError(f"cannot publish into {folder}: {err}") from None
        marks = {p: {t: _iso(mark) for t, mark in _marks(con, p).items()} for p in providers}
        kept = {p for p in providers if (prev := before["providers"].get(p)) and (
            _time(prev["started_at"]) > runs[p][1] or _time(prev["started_at"]) == runs[p][1]
            and prev["marks"] == marks[p])}
        fresh = [p for p in providers if p not in kept]
        _same_history(con, folder, {p: e for p, e in before["providers"].items() if p in fresh})
        # the others, with nothing later or not in this warehouse, are kept as published
        entries = dict(before["providers"])
        done = dict.fromkeys(entries, "kept")
        for p in fresh:
            prev, (run_id, started, finished) = before["providers"].get(p, {}), runs[p]
            files = [f for f in prev.get("files", []) if f["table"] in SEGMENTED]
            for table, spec in CURRENT.items():
                files += _write(con, folder, f"{p}.{table}.{stamp}.parquet", table,
                                f"select {', '.join(column_names(table))} from {table} where provider = $p "
                                f"order by {', '.join(spec.key)}", {"p": p})
            for table, (ids, mark) in SEGMENTED.items():
                since = prev.get("marks", {}).get(table)
                new = _write(con, folder, f"{p}.{table}.{stamp}.parquet", table,
                             f"select {', '.join(column_names(table))} from {table} where provider = $p and "
                             f"($since::timestamptz is null or {mark} > $since::timestamptz) order by {', '.join(ids)}",
                             {"p": p, "since": since})
                files += [dict(f, through=marks[p][table]) for f in new]
                segments = [f for f in files if f["table"] == table]
                if len(segments) > MAX_SEGMENTS:
                    files = [f for f in files if f["table"] != table] + _fold(con, folder, p, table, segments, stamp)
            facts = con.execute("select * exclude (updated_at) from providers where provider = $p", {"p": p})
            row = facts.fetchone()
            entries[p] = {"run_id": run_id, "started_at": started.isoformat(), "finished_at": _iso(finished),
                          "facts": dict(zip([d[0] for d in facts.description], map(_iso, row))) if row else None,
                          "marks": marks[p], "files": files}
            done[p] = "published"
        while sum(len(e["files"]) for e in entries.values()) >= MAX_FILES:
            p, table, run = max(((p, t, [f for f in e["files"] if f["table"] == t])
                                 for p, e in sorted(entries.items()) for t in SEGMENTED), key=lambda ptr: len(ptr[2]))
            if len(run) < 2:
                raise CatalogError(f"cannot publish into {folder}: its files would be more than {MAX_FILES - 1}")
            entries[p] = {**entries[p], "files": [f for f in entries[p]["files"] if f["table"] != table]
                          + _fold(con, folder, p, table, run, stamp)}
        listed = {f["name"] for e in entries.values() for f in e["files"]}
        missing = sorted(name for name in listed if not (folder / name).is_file())
        if missing:
            raise CatalogError(f"cannot publish into {folder}: {len(missing)} files its manifest names are not there, "
                               f"{missing[0]} first (download the published catalog's files into it)")
        # a previous file kept as it is listed: a truncated download of it would be refused by every pull
        changed = sorted(f["name"] for e in entries.values() for f in e["files"]
                         if (folder / f["name"]).stat().st_size != f["bytes"]
                         or sha256_file(folder / f["name"]) != f["sha256"])
        if changed:
            raise CatalogError(f"cannot publish into {folder}: {len(changed)} files are not those its manifest names "
                               f"(truncated or replaced), {changed[0]} first (download the published catalog's files "
                               "into it again)")
        manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "gpuledger": __version__,
                    "published_at": now.isoformat(), "providers": dict(sorted(entries.items()))}
        part = folder / f".{MANIFEST}.part"
        part.write_text(json.dumps(manifest, indent=1))
        os.replace(part, folder / MANIFEST)
        for old in folder.iterdir():
            if NAME.fullmatch(old.name) and old.name not in listed:
                old.unlink()
    except (OSError, duckdb.Error, KeyError, TypeError, ValueError, RecursionError) as err:
        why = isinstance(err, duckdb.Error) and older_warehouse(con) or f"{type(err).__name__}: {err}"
        raise CatalogError(f"cannot publish into {folder}: {why}") from err
    return done


def _same_history(con: duckdb.DuckDBPyConnection, folder: Path, previous: dict[str, dict[str, Any]]) -> None:
    """Refuse to add this warehouse's history to segments another warehouse published: a puller would hold
    two histories of one offer, versions of both open at once. Each provider's last published scrape must
    be one this warehouse made or pulled."""
    runs = [entry.get("run_id") for entry in previous.values()]
    known = {r for (r,) in con.execute("select run_id from scrape_runs where list_contains($runs, run_id)",
                                        {"runs": [r for r in runs if r]}).fetchall()}
    foreign = sorted(p for p, entry in previous.items() if entry.get("run_id") and entry["run_id"] not in known)
    if foreign:
        raise CatalogError(f"cannot publish into {folder}: its history of {', '.join(foreign)} was published from "
                           f"another warehouse (scrape {previous[foreign[0]]['run_id']} is not in this one); publish "
                           "into a new folder, or pull the catalog into a new warehouse and refresh that one")


def _fold(con: duckdb.DuckDBPyConnection, folder: Path, provider: str, table: str, segments: list[dict[str, Any]],
          stamp: str) -> list[dict[str, Any]]:
    """A table's segments as one: each row as its latest segment (the last listed) has it."""
    ids = ", ".join(SEGMENTED[table][0])
    # by position in the list, not by name: publishes within one second are named -2, -3 ... after it
    [folded] = _write(con, folder, f"{provider}.{table}.{stamp}-0.parquet", table,
                      f"select * exclude (filename) from read_parquet($paths, filename = true) "
                      f"qualify row_number() over (partition by {ids} "
                      f"order by list_position($paths, filename) desc) = 1 order by {ids}",
                      {"paths": [str(folder / f["name"]) for f in segments]})
    return [dict(folded, through=max((f["through"] for f in segments), key=_time))]


# -- pulling ----------------------------------------------------------------------------------------

@dataclass
class PullReport:
    provider: str
    state: str  # loaded | up to date | kept (the warehouse's own scrape is later) | refused
    offers: int = 0
    new: int = 0
    changed: int = 0
    closed: int = 0
    detail: str = ""


Downloader = Callable[[str, str, int, Path], Path]  # (file name, its URL, most bytes, where to) -> the file


def _fetch(source: str, name: str, limit: int, tmp: Path, download: Downloader | None) -> Path:
    """File `name` of the catalog at `source` (a folder, or a URL from _folder_url), downloaded into `tmp`
    (a URL) within `limit` bytes. Errors name the address that failed (the last of its redirects)."""
    if download is None:
        path = Path(source) / name
        if not path.is_file():
            raise CatalogError(f"{name}: not in {source}")
        return path
    retrying = Retrying(stop=stop_after_attempt(ATTEMPTS), wait=_wait_s, retry=retry_if_exception_type(HostBusy),
                        reraise=True)
    return retrying(download, name, _file_url(source, name), limit, tmp / name)


@contextlib.contextmanager
def _downloads(timeout_s: float) -> Iterator[Downloader]:
    """A download function for the pull's files, each run on one event loop in a thread (anyio's portal), all
    within `timeout_s`: httpx bounds each read, never a whole answer, and only a cancel scope bounds headers sent a
    byte at a time."""
    client = httpx.AsyncClient(timeout=TIMEOUT_S, follow_redirects=True, headers={
        "User-Agent": f"gpuledger/{__version__} (catalog pull)", "Accept-Encoding": ACCEPT_ENCODING})
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(client):
        yield functools.partial(portal.call, _download, client, (time.monotonic() + timeout_s, timeout_s))


async def _download(client: httpx.AsyncClient, deadline: tuple[float, float], name: str, url: str, limit: int,
                    out: Path) -> Path:
    # each read has TIMEOUT_S; a byte a minute would go on for ever. The status and headers get TIMEOUT_S in all,
    # and the body is held to MIN_RATE on what has come, whatever size the manifest says: TIMEOUT_S, and a second
    # for each MIN_RATE bytes
    start = time.monotonic()
    end, timeout_s = deadline  # every file of the pull, however fast each is
    over = CatalogError(f"{name}: not fetched within the pull's {timeout_s:g} s ({env_name('pull_timeout_s')})")
    if start >= end:
        raise over
    try:
        try:
            with anyio.fail_after(min(TIMEOUT_S, end - start)):
                resp = await client.send(client.build_request("GET", url), stream=True)
        except TimeoutError:  # as a read timeout is: the host may answer if asked again
            if time.monotonic() >= end:
                raise over from None
            raise HostBusy(f"{name}: no status and headers in {TIMEOUT_S:.0f} s from {shown(url)} (asked {ATTEMPTS} "
                           "times)") from None
        async with contextlib.aclosing(resp):
            if resp.status_code != 200:
                said = f"{name}: HTTP {resp.status_code} from {shown(str(resp.url))}"
                raise (HostBusy(said + f" (asked {ATTEMPTS} times)", resp.headers.get("retry-after"))
                       if resp.status_code in BUSY else CatalogError(said))
            if refused := unsafe_coding(resp.headers.get("content-encoding", "")):
                raise CatalogError(f"{name}: {refused}, from {shown(str(resp.url))}: refused")
            with out.open("wb") as f:
                async for chunk in resp.aiter_bytes():
                    if f.tell() + len(chunk) > limit:
                        said = "the most a manifest may be" if name == MANIFEST else "the manifest's size"
                        raise CatalogError(f"{name}: larger than {limit:,} bytes ({said}): refused")
                    got, took = f.tell() + len(chunk), time.monotonic() - start
                    if start + took > end:
                        raise over
                    if took > TIMEOUT_S + got / MIN_RATE:
                        of = "" if name == MANIFEST else f" of {limit:,}"
                        raise CatalogError(f"{name}: {got:,}{of} bytes in {took:.0f} s from {shown(str(resp.url))}: "
                                           f"slower than {MIN_RATE:,} bytes a second, refused")
                    f.write(chunk)
    except (httpx.HTTPError, httpx.InvalidURL) as err:  # InvalidURL: no HTTPError ('\x1b' in the URL)
        try:
            where = shown(str(err.request.url))  # the request that failed, a redirect's perhaps
        except (AttributeError, RuntimeError):  # none made (InvalidURL)
            where = shown(url)
        said = f"{name}: {type(err).__name__} from {where}" + (f": {text}" if (text := error_text(err)) else "")
        raise (HostBusy(f"{said} (asked {ATTEMPTS} times)") if isinstance(err, httpx.TransportError)
               else CatalogError(said)) from None
    except OSError as err:
        raise CatalogError(f"{name}: cannot be written to {out.parent} ({err.strerror or err})") from None
    return out


def _check(con: duckdb.DuckDBPyConnection, path: Path, entry: dict[str, Any], provider: str) -> None:
    """`path` is the file the manifest describes, a Parquet file of its table and provider."""
    name = entry["name"]
    table = entry["table"]
    try:
        size, digest = path.stat().st_size, sha256_file(path)
    except OSError as err:
        raise CatalogError(f"{name}: cannot be read ({err.strerror or err})") from None
    if size != entry["bytes"]:
        raise CatalogError(f"{name}: {size:,} bytes, the manifest says {entry['bytes']:,} (truncated or replaced)")
    if digest != entry["sha256"]:
        raise CatalogError(f"{name}: its sha256 is not the manifest's (the file changed after it was published)")
    try:
        described = con.execute("describe select * from read_parquet($f)", {"f": str(path)}).fetchall()
        columns = {r[0] for r in described}
        doubles = [r[0] for r in described if r[1] == "DOUBLE"]
        # NaN passes the tables' CHECK (x > 0): DuckDB orders it above every number
        rows, others, *not_finite = con.execute(
            "select count(*), count(*) filter (where provider is distinct from $p)"
            + "".join(f", count(*) filter (where not isfinite({c}))" for c in doubles) + " from read_parquet($f)",
            {"f": str(path), "p": provider}).fetchall()[0]
    except duckdb.Error as err:
        raise CatalogError(f"{name}: not a readable Parquet file ({str(err).splitlines()[0][:160]})") from None
    required = {c.name for c in TABLES[table] if c.not_null and "DEFAULT" not in c.extra}
    if not required <= columns <= set(column_names(table)):
        raise CatalogError(f"{name}: its columns are not those of {table} (missing {sorted(required - columns)}, "
                           f"unknown {sorted(columns - set(column_names(table)))})")
    if (rows, others) != (entry["rows"], 0):
        raise CatalogError(f"{name}: {rows} rows ({others} of another provider), the manifest says {entry['rows']}")
    key = [c for c in (CURRENT[table].key if table in CURRENT else SEGMENTED[table][0]) if c in columns]
    [(twice,)] = con.execute(f"select count(*) - count(distinct ({', '.join(key)})) from read_parquet($f)",
                             {"f": str(path)}).fetchall()
    if twice:  # loaded, a current key twice (two open versions of one offer), or a history row twice
        raise CatalogError(f"{name}: {twice} of its rows repeat another's {', '.join(key)}")
    if bad := [f"{n} in {c}" for c, n in zip(doubles, not_finite) if n]:
        raise CatalogError(f"{name}: values that are not finite numbers ({', '.join(bad)})")
    if table in CURRENT:
        _check_records(con, path, name, CURRENT[table].kind, columns)
    if table == "offers":  # a newer publisher's GPU: loaded, its offers would fail `gpuledger check`
        unknown = con.execute("select count(*), min(gpu_model) from read_parquet($f) where gpu_model not in "
                              "(select gpu_model from gpu_models)", {"f": str(path)}).fetchall()[0]
        if unknown[0]:
            raise CatalogError(f"{name}: {unknown[0]} offers of a GPU model this gpuledger does not know "
                               f"({unknown[1]!r}): upgrade gpuledger")


def _check_records(con: duckdb.DuckDBPyConnection, path: Path, name: str, kind: str, columns: set[str]) -> None:
    """Every row of the current table in `path` holds to the record contract a refresh's records meet (a finite,
    plausible price, its price per GPU-hour that price over its GPUs): the catalog's sha256 proves only that the
    files are the manifest's, not that its publisher is honest."""
    model = RECORD_TYPES[kind]
    fields = [f for f in model.model_fields if f in columns]
    derived = [f for f in model.model_computed_fields if f in columns]
    rows = con.execute(f"select {', '.join(fields + derived)} from read_parquet($f)", {"f": str(path)})
    while batch := rows.fetchmany(10_000):
        for row in batch:
            given = dict(zip(fields, row))
            try:  # a null is the field's default, as an optional column a file has not
                record = model.model_validate({k: v for k, v in given.items() if v is not None})
            except ValidationError as err:
                raise CatalogError(f"{name}: the row {record_key(model, given)} breaks the {kind} contract: "
                                   f"{describe_validation_error(err)}") from None
            for field, value in zip(derived, row[len(fields):]):
                if not math.isclose(getattr(record, field), value, rel_tol=1e-9):
                    raise CatalogError(f"{name}: the row {record_key(model, given)} gives {field} {value}, "
                                       f"its other values make it {getattr(record, field)}")


def record_key(model: Any, row: dict[str, Any]) -> str:
    return "/".join(str(row.get(k)) for k in model.KEY)


def _entry_files(provider: str, entry: Any) -> list[dict[str, Any]]:
    """The provider's file entries, refused (CatalogError) unless each is well formed."""
    try:
        files = list(entry["files"])
        started, finished = _time(entry["started_at"]), _time(entry.get("finished_at"))
        if started is None:
            raise ValueError("no started_at")
        if started > utcnow() + timedelta(hours=1):  # loaded, no later catalog of the provider would ever be
            raise ValueError(f"started_at {entry['started_at']} is in the future")
        if finished is not None and finished < started:
            raise ValueError(f"finished_at {entry['finished_at']} is before its started_at")
        if not isinstance(entry.get("facts"), (dict, type(None))):
            raise ValueError("its facts are not an object")
        if not re.fullmatch(r"[a-z0-9_]+", provider):
            raise ValueError("a provider name of other characters than a-z, 0-9 and _")
        for f in files:
            m = NAME.fullmatch(f["name"])
            if not (m and m.group(1) == provider and m.group(2) == f["table"] and f["table"] in (*CURRENT, *SEGMENTED)
                    and all(type(f[n]) is int for n in ("rows", "bytes"))  # not 1e400, "14", true
                    and 0 <= f["rows"] and 0 <= f["bytes"] <= FILE_MAX_BYTES
                    and re.fullmatch(r"[0-9a-f]{64}", f["sha256"])):
                raise ValueError(f"file entry {str(f)[:120]}")
            _time(f.get("through"))
        current = [f["table"] for f in files if f["table"] in CURRENT]
        if len(current) != len(set(current)):  # a publisher writes one; two would each load their rows
            raise ValueError(f"more than one file of {min(t for t in current if current.count(t) > 1)}")
        return files
    except (KeyError, TypeError, ValueError) as err:
        raise CatalogError(f"{provider}: the manifest's entry is malformed ({err})") from None


def _pull_provider(con: duckdb.DuckDBPyConnection, source: str, tmp: Path, download: Downloader | None,
                   provider: str, entry: dict[str, Any], refresh_id: str, policy: AnomalyPolicy,
                   known: Mapping[str, float | None] | None) -> PullReport:
    p, min_row_ratio = {"p": provider}, (known or {}).get(provider)  # the source's own share (None: the policy's)
    files = _entry_files(provider, entry)
    if known is not None and provider not in known:  # a newer publisher's: loaded, its offers would be in no status
        raise CatalogError(f"{provider}: a provider this gpuledger does not know: upgrade gpuledger")
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    pulled, own, last, offers = con.execute(
        "select exists (select 1 from fetch_validators where provider = $p and key = $k and validator = $v), "
        "exists (select 1 from offer_history h join scrape_runs r using (run_id) where h.provider = $p "
        "and r.mode <> 'pull'), (select max(started_at) from scrape_runs where provider = $p and state = 'ok'), "
        "(select count(*) from offers where provider = $p)", {**p, "k": CATALOG_KEY, "v": digest}).fetchall()[0]
    started = _time(entry["started_at"])
    if pulled:
        return PullReport(provider, "up to date", offers, detail="its files are those of the last pull")
    if last is not None and (last > started or own and last == started):  # an older catalog never rolls back
        last = last.astimezone(timezone.utc)  # DuckDB gives it in the machine's time zone
        return PullReport(provider, "up to date" if last == started else "kept", offers,
                          detail=f"the warehouse holds its scrape of {last:%Y-%m-%d %H:%M} UTC")
    marks = _marks(con, provider)
    # the current files, and (into a warehouse that holds what it pulled) the segments past its own history
    wanted = [f for f in files if f["table"] in CURRENT or not own and (
        marks[f["table"]] is None or _time(f.get("through")) is None or _time(f["through"]) > marks[f["table"]])]
    paths = {}
    for f in wanted:  # every file checked before anything of the provider is loaded
        paths[f["name"]] = _fetch(source, f["name"], f["bytes"], tmp, download)
        _check(con, paths[f["name"]], f, provider)
    by_table = {t: [str(paths[f["name"]]) for f in sorted(wanted, key=lambda f: f["name"]) if f["table"] == t]
                for t in (*CURRENT, *SEGMENTED)}
    if own:  # merged as a scrape of the provider, like a refresh's
        tables = {name: _scraped(con, spec.table, spec.columns, by_table[spec.table])
                  for name, spec in SCD2_TABLES.items() if by_table[spec.table]}
        outcome = ScrapeOutcome(provider, "pull", started, _time(entry.get("finished_at")) or started, tables=tables,
                                min_row_ratio=min_row_ratio,
                                provider_facts=entry.get("facts") and {**entry["facts"], "provider": provider},
                                notes=[f"pulled from {shown(source)}"])
        # dated at the catalog's scrape, not at the pull, and after every history segment the warehouse holds
        now = max([merge_time(con, provider, outcome.finished_at), *(m for m in marks.values() if m is not None)])
        r = load_outcome(con, outcome, refresh_id, policy, now=now)
        return (PullReport(provider, "loaded", r.rows_loaded, r.new, r.changed, r.closed, "merged as a scrape")
                if r.state == "ok" else PullReport(provider, "refused", detail=r.error or r.state))
    notes = [f"pulled from {shown(source)}"]
    if offers or by_table["offers"]:  # a catalog that lost most of a provider's offers replaces none of them
        incoming = con.sql("select * from read_parquet($f)", params={"f": by_table["offers"]}).to_arrow_table() \
            if by_table["offers"] else None
        outcome = ScrapeOutcome(provider, "pull", started, started, min_row_ratio=min_row_ratio)
        if why := check_anomalies(con, outcome, incoming, policy, notes):
            raise CatalogError(f"{provider}: not loaded, nothing of it changed: {why}")
    return _replicate(con, provider, entry, by_table, digest, refresh_id, "; ".join(notes))


def _scraped(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], files: list[str]) -> Any:
    """The rows of `files` (checked) as a scrape hands table `table` over: its optional columns a file has
    not as nulls; CatalogError naming the files when a value is not of its column's type."""
    try:
        have = {r[0] for r in con.execute("describe select * from read_parquet($f)", {"f": files}).fetchall()}
        return con.sql(f"select {', '.join(c if c in have else f'null as {c}' for c in columns)} "
                       "from read_parquet($f)", params={"f": files}).to_arrow_table().cast(arrow_schema(table, columns))
    except (duckdb.Error, pyarrow.ArrowException) as err:
        raise CatalogError(f"{', '.join(Path(f).name for f in files)}: its values are not those of {table} "
                           f"({type(err).__name__}: {str(err).splitlines()[0][:160]})") from None


def _replicate(con: duckdb.DuckDBPyConnection, provider: str, entry: dict[str, Any], by_table: dict[str, list[str]],
               digest: str, refresh_id: str, notes: str) -> PullReport:
    """The catalog's rows and versions of `provider`, as they are, in one transaction."""
    p, now = {"p": provider}, utcnow()
    con.execute("begin transaction")
    try:
        join = CURRENT["offers"].key_join("o", "c")
        new, changed, matched = con.execute(
            f"select count(*) filter (where o.provider is null), count(*) filter "
            f"(where o.content_hash <> c.content_hash), count(o.provider) from read_parquet($f) c "
            f"left join (select * from offers where provider = $p) o on {join}",
            {**p, "f": by_table["offers"]}).fetchall()[0] if by_table["offers"] else (0, 0, 0)
        closed = con.execute("select count(*) from offers where provider = $p", p).fetchall()[0][0] - matched
        for table in CURRENT:
            con.execute(f"delete from {table} where provider = $p", p)
            if by_table[table]:
                con.execute(f"insert into {table} by name select * from read_parquet($f)", {"f": by_table[table]})
        for table, (ids, _) in SEGMENTED.items():
            same = " and ".join(f"t.{c} is not distinct from s.{c}" for c in ids)
            for f in by_table[table]:  # oldest first: a later segment's closing wins
                if table in HISTORY:
                    con.execute(f"update {table} t set valid_to = s.valid_to, closed_by_run_id = s.closed_by_run_id "
                                f"from read_parquet($f) s where t.provider = $p and t.valid_to is null "
                                f"and s.valid_to is not null and {same}", {**p, "f": f})
                con.execute(f"insert into {table} by name select * from read_parquet($f) s "
                            f"where not exists (select 1 from {table} t where {same})", {"f": f})
        for spec in SPECS:  # a file left out of the manifest, or rows out of a file, leave the two disagreeing
            current, versions, overlapping = (con.execute(f"select count(*) from ({query})", p).fetchall()[0][0]
                                              for query in history_checks(spec, of_provider=True).values())
            if current or versions:
                raise CatalogError(f"{provider}: not loaded, nothing of it changed: its {spec.table} and "
                                   f"{spec.history} disagree ({current} current rows without their one open version, "
                                   f"{versions} open versions without their current row)")
            if overlapping:  # a segment's versions laid over the others: two prices of one offer at once
                raise CatalogError(f"{provider}: not loaded, nothing of it changed: {overlapping} of its "
                                   f"{spec.history} versions end before they start or overlap the next")
        offers = con.execute("select count(*) from offers where provider = $p", p).fetchall()[0][0]
        run_id = str(entry.get("run_id") or new_id(f"run-{provider}"))
        [other] = con.execute("select min(provider) from scrape_runs where run_id = ? and provider <> ?",
                              [run_id, provider]).fetchall()[0]
        if other:  # its run would be ignored: loaded, the provider would have no scrape ('never' in status)
            raise CatalogError(f"{provider}: not loaded, nothing of it changed: its run_id {run_id} is a scrape "
                               f"of {other}")
        con.execute(
            "insert or ignore into scrape_runs (run_id, refresh_id, provider, mode, started_at, finished_at, state, "
            "rows_parsed, rows_loaded, offers_new, offers_changed, offers_closed, notes) "
            "values (?, ?, ?, 'pull', ?, ?, 'ok', ?, ?, ?, ?, ?, ?)",
            [run_id, refresh_id, provider, _time(entry["started_at"]),
             _time(entry.get("finished_at")), offers, offers, new, changed, closed, notes])
        if entry.get("facts"):
            upsert_provider_facts(con, {**entry["facts"], "provider": provider}, now)
        keep_validators(con, provider, {CATALOG_KEY: digest}, refresh_id, now)
        con.execute("commit")
    except BaseException as err:
        with contextlib.suppress(duckdb.Error):  # DuckDB ends the transaction itself of a query Ctrl-C interrupted
            con.execute("rollback")
        if not isinstance(err, duckdb.Error):
            raise
        raise CatalogError(f"{provider}: not loaded, nothing of it changed: {type(err).__name__}: "
                           f"{str(err).splitlines()[0][:200]}") from None
    return PullReport(provider, "loaded", offers, new, changed, closed)


def read_manifest(data: bytes, where: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: arrays nested 100,000 deep
        doc = None
    why = ("not a JSON object" if not isinstance(doc, dict)
           else f"format {doc.get('format')!r}, this gpuledger reads format {' or '.join(map(str, FORMATS_READ))}"
           if doc.get("format") not in FORMATS_READ
           else "no 'providers' object" if not isinstance(doc.get("providers"), dict) else None)
    if why:
        raise CatalogError(f"{where}: not a gpuledger catalog manifest: {why}")
    if not isinstance(doc.get("schema_version"), int) or doc["schema_version"] > SCHEMA_VERSION:
        raise CatalogError(f"{where}: made for warehouse schema {doc.get('schema_version')!r}; this gpuledger "
                           f"reads up to {SCHEMA_VERSION} (upgrade gpuledger)")
    if not doc["providers"]:
        raise CatalogError(f"{where}: the catalog holds no provider: nothing to load")
    return doc


def pull(db: str | os.PathLike[str] | None, source: str, accept_anomaly: Sequence[str] = (),
         known: Mapping[str, float | None] | None = None) -> list[PullReport]:
    """Load the catalog at `source` (a URL or a folder) into the warehouse at `db`. CatalogError when
    the manifest cannot be read; a provider whose files fail their checks is reported refused.
    `accept_anomaly`: providers loaded even if the anomaly guard objects. `known`: the providers this gpuledger
    has sources for, each with its own share of rows below which a load is held back (None: the policy's); the
    command line passes the registry's. Another provider is refused."""
    from gpuledger.warehouse.snapshot import discard, publish as publish_copy, start_working_copy

    url = re.match(r"https?://", source, re.I)
    if url:
        source = _folder_url(source)
    else:
        source = local_folder(source, "a catalog is read from an http(s) URL, a file:// URL of this machine or a "
                                      "folder")
        parent, _, name = source.rstrip("/").rpartition("/")
        if name == MANIFEST:  # the manifest's own address given: the catalog is its folder
            source = parent
        source = source or "."  # '' (an unset variable) is the folder it reads: said so
    published = db_path(db)
    refresh_id = new_id("pull")
    with (tempfile.TemporaryDirectory(prefix="gpuledger-pull-") as folder,
          _downloads(load_settings().pull_timeout_s) if url else contextlib.nullcontext() as download):
        tmp = Path(folder)
        where = f"{shown(source).rstrip('/')}/{MANIFEST}"
        try:
            data = _fetch(source, MANIFEST, MANIFEST_MAX_BYTES, tmp, download).read_bytes()
        except OSError as err:
            raise CatalogError(f"{where}: cannot be read ({err.strerror or err})") from None
        manifest = read_manifest(data, where)
        with refresh_lock(published, "pull"):
            work = start_working_copy(published)
            try:
                con = open_writer(work)
                reports, policy = [], AnomalyPolicy.from_env(accept_anomaly)
                try:
                    for provider, entry in sorted(manifest["providers"].items()):
                        # each provider's files go once it is merged: the disk holds one provider's at a time
                        downloaded = Path(tempfile.mkdtemp(dir=tmp))
                        try:
                            reports.append(_pull_provider(con, source, downloaded, download, provider, entry,
                                                          refresh_id, policy, known))
                        except CatalogError as err:
                            reports.append(PullReport(provider, "refused", detail=str(err)))
                        finally:
                            shutil.rmtree(downloaded, ignore_errors=True)
                finally:
                    close_writer(con)
                publish_copy(work, published)
            except BaseException as err:
                discard(work)
                if not isinstance(err, duckdb.Error):
                    raise
                # a damaged warehouse fails as its pages are read, its error perhaps hidden by a failed cleanup's
                first = first_error(err)
                raise damaged_error(first, published) or WarehouseError(
                    f"cannot write {published}: {root_cause(err)}") from err
    return reports
