"""`gpuledger pull` of a catalog whose manifest or files lie, or whose server trickles, and a pull stopped
by SIGTERM: each is refused in one line naming what is wrong, the other providers load and nothing of the
refused one changes. `gpuledger publish` over a previous catalog whose files are damaged."""

from __future__ import annotations

import contextlib
import email.utils
import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest

from gpuledger.warehouse import catalog
from gpuledger.warehouse.catalog import MANIFEST, pull
from tests.test_catalog import (  # noqa: F401 (served: a fixture)
    checks_pass, cli, digests, query, replayed_and_published, served,
)


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Warehouse A, refreshed from the recordings of CUDO, Lambda and RunPod by their real clients, and its
    catalog: three small providers, each pull of it a second's work (tests/test_catalog.py's has AWS's)."""
    return replayed_and_published(tmp_path_factory.mktemp("published"), ["cudo", "lambda", "runpod"])


def copied(published: tuple[Path, Path], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    return folder, json.loads((folder / MANIFEST).read_text())


def later(when: str) -> str:
    return (datetime.fromisoformat(when) + timedelta(seconds=1)).isoformat()


def rewrite(folder: Path, entry: dict[str, Any], select: str) -> None:
    """File `entry` of the catalog in `folder` rewritten by `select` (from `f`, the file as published), the
    manifest's entry made to match it: a publisher that wrote it so."""
    path = folder / entry["name"]
    con = duckdb.connect()
    con.execute(f"create view f as select * from read_parquet('{path}')")
    con.sql(select).write_parquet(str(path) + ".new")
    Path(str(path) + ".new").replace(path)
    entry.update(bytes=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def send_trickled(handler: SimpleHTTPRequestHandler, data: bytes, step: int = 500) -> None:
    """`data` as a whole answer, `step` bytes every 0.2 s: a server that trickles."""
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    with contextlib.suppress(OSError):  # the client gone
        for at in range(0, len(data), step):
            handler.wfile.write(data[at:at + step])
            handler.wfile.flush()
            time.sleep(0.2)


@pytest.mark.parametrize("field, value", [("bytes", "as text"), ("bytes", float("inf")), ("rows", float("inf")),
                                          ("rows", "as text"), ("bytes", True)])
def test_a_file_entry_whose_rows_or_bytes_are_no_whole_number_is_refused_in_one_line(
        published: tuple[Path, Path], tmp_path: Path, field: str, value: Any) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]
    entry[field] = str(entry[field]) if value == "as text" else value
    (folder / MANIFEST).write_text(json.dumps(manifest))  # inf as Infinity, which json reads back
    b = tmp_path / "b.duckdb"
    # before: bytes as text, a ValueError traceback ("Cannot specify ',' with 's'"); Infinity, an OverflowError
    # traceback; rows as text, "27 rows (0 of another provider), the manifest says 27"
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1 and "Traceback" not in output
    [line] = [line for line in output.splitlines() if ": refused:" in line]
    assert line.startswith(f"lambda: refused: the manifest's entry is malformed (file entry {{'name': '{entry['name']}'")
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]


def test_a_file_of_other_types_merged_as_a_scrape_is_refused_naming_it(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    lam = manifest["providers"]["lambda"]
    lam.update(started_at=later(lam["started_at"]), finished_at=later(lam["finished_at"]))  # a later scrape
    [entry] = [f for f in lam["files"] if f["table"] == "offers"]
    rewrite(folder, entry, "select * replace (case when instance_type = 'gpu_1x_a10' then 'n/a' "
                           "else price_per_hour::varchar end as price_per_hour) from f")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    own = tmp_path / "own.duckdb"  # a warehouse that refreshes lambda itself
    shutil.copyfile(published[0], own)
    before = digests(own)
    # before: a pyarrow ArrowInvalid traceback, nothing loaded
    code, output = cli("pull", str(folder), "--db", str(own), "--format", "csv")
    assert code == 1 and "Traceback" not in output
    assert (f"lambda: refused: {entry['name']}: the row lambda/us-east-1//gpu_1x_a10/on_demand breaks the offer "
            "contract: price_per_hour: Input should be a valid number, unable to parse string as a number") in output
    assert "cudo,up to date," in output and "runpod,up to date," in output
    assert digests(own) == before


A10 = "case when instance_type = 'gpu_1x_a10' and region = 'us-east-1' then {} else {} end"  # one GPU, in USD


@pytest.mark.parametrize("table, replace, said", [
    ("offers", A10.format("'nan'::double", "gpu_count") + " as gpu_count",
     "values that are not finite numbers (1 in gpu_count)"),
    ("offers", ", ".join(f"{A10.format('1e-07', c)} as {c}"
                         for c in ("price_per_hour", "source_price_per_hour", "price_per_gpu_hour")),
     "the row lambda/us-east-1//gpu_1x_a10/on_demand breaks the offer contract: record: Value error, "
     "price_per_gpu_hour 1e-07 USD is outside 0.007..22, the plausible range for A10 "
     "(warehouse/data/plausibility.csv)"),
    ("offers", f"{A10.format('price_per_gpu_hour / 10', 'price_per_gpu_hour')} as price_per_gpu_hour",
     "the row lambda/us-east-1//gpu_1x_a10/on_demand gives price_per_gpu_hour 0.129, its other values make it 1.29"),
    ("storage_prices", "'inf'::double as usd_per_gb_month", "values that are not finite numbers (1 in usd_per_gb_month)"),
    ("storage_prices", "usd_per_gb_month * 1e6 as usd_per_gb_month, source_usd_per_gb_month * 1e6 as "
                       "source_usd_per_gb_month",  # Lambda's 0.20 USD per GB-month a million times
     "the row lambda/global/filesystem breaks the storage contract: record: Value error, usd_per_gb_month 200000.0 "
     "is not plausible"),
    ("offer_history", A10.format("'nan'::double", "price_per_hour") + " as price_per_hour",
     "values that are not finite numbers (1 in price_per_hour)"),
])
def test_a_file_whose_values_break_the_record_contract_is_refused_naming_the_row(
        published: tuple[Path, Path], tmp_path: Path, table: str, replace: str, said: str) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == table]
    rewrite(folder, entry, f"select * replace ({replace}) from f")  # its sha256 the manifest's: only its values lie
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: loaded; NaN passes CHECK (x > 0), `gpuledger check` passed, and show-gpus listed the A10 first
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1, output
    assert f"lambda: refused: {entry['name']}: {said}" in output.replace("\n", " ")
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]


def test_a_later_catalog_that_lost_most_of_a_providers_offers_replaces_none_of_them(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    b = tmp_path / "b.duckdb"
    assert cli("pull", str(folder), "--db", str(b))[0] == 0
    lam = manifest["providers"]["lambda"]
    now = datetime.now(timezone.utc).replace(microsecond=0)
    lam.update(started_at=now.isoformat(), finished_at=now.isoformat(), run_id="run-truncated")
    kept = "instance_type = 'gpu_1x_a10' and region = 'us-east-1'"
    for entry in lam["files"]:  # a publish cut short: one offer left, the other 26 closed in its history
        if entry["table"] == "offers":
            rewrite(folder, entry, f"select * from f where {kept}")
        elif entry["table"] == "offer_history":
            rewrite(folder, entry, f"select * replace (case when {kept} then valid_to else '{now}'::timestamptz end "
                                   f"as valid_to, case when {kept} then closed_by_run_id else 'run-truncated' end as "
                                   "closed_by_run_id) from f")
            entry.update(through=now.isoformat())
    [offers] = [f for f in lam["files"] if f["table"] == "offers"]
    offers["rows"] = 1
    (folder / MANIFEST).write_text(json.dumps(manifest))
    # before: "lambda,loaded,1,0,0,26": 26 of its 27 offers closed, and `gpuledger check` passed
    code, output = cli("pull", str(folder), "--db", str(b), "--format", "csv")
    assert code == 1, output
    assert ("lambda: refused: not loaded, nothing of it changed: anomaly guard: row count dropped from 27 to 1 "
            "(below 20% of the last good run) (if this is a real market move, rerun with --accept-anomaly lambda)"
            ) in output.replace("\n", " ")
    assert query(b, "select count(*) from offers where provider = 'lambda'") == [(27,)]
    code, output = cli("pull", str(folder), "--db", str(b), "--accept-anomaly", "lambda", "--format", "csv")
    assert code == 0 and "lambda,loaded,1,0,0,26," in output.splitlines(), output
    assert checks_pass(b)


def test_a_file_without_an_optional_column_merged_as_a_scrape_loads_it_as_null(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    lam = manifest["providers"]["lambda"]
    lam.update(started_at=later(lam["started_at"]), finished_at=later(lam["finished_at"]))
    [entry] = [f for f in lam["files"] if f["table"] == "offers"]
    rewrite(folder, entry, "select * exclude (vcpus) from f")  # as a publisher from before the column was
    (folder / MANIFEST).write_text(json.dumps(manifest))
    own = tmp_path / "own.duckdb"
    shutil.copyfile(published[0], own)
    assert query(own, "select count(*), count(vcpus) from offers where provider = 'lambda'") == [(27, 27)]
    # before: "error: cannot write own.duckdb: Binder Error: Referenced column "vcpus" not found", exit 2,
    # and no provider loaded
    code, output = cli("pull", str(folder), "--db", str(own), "--format", "csv")
    assert code == 0, output
    assert "lambda,loaded,27,0,27,0,merged as a scrape" in output.splitlines()
    assert query(own, "select count(*), count(vcpus) from offers where provider = 'lambda'") == [(27, 0)]
    assert checks_pass(own)


def test_a_provider_this_gpuledger_does_not_know_is_refused(published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    entry = json.loads(json.dumps(manifest["providers"]["lambda"]))
    for f in entry["files"]:  # lambda's files, as those of a provider "acme" of a newer gpuledger
        name = f["name"].replace("lambda.", "acme.", 1)
        duckdb.sql(f"select * replace ('acme' as provider) from read_parquet('{folder / f['name']}')"
                   ).write_parquet(str(folder / name))
        f.update(name=name, bytes=(folder / name).stat().st_size,
                 sha256=hashlib.sha256((folder / name).read_bytes()).hexdigest())
    manifest["providers"]["acme"] = {**entry, "facts": {**entry["facts"], "provider": "acme"}}
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, acme's 27 offers loaded: in `show-gpus` and `recommend`, in no `gpuledger status`
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert "acme: refused: a provider this gpuledger does not know: upgrade gpuledger" in output
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("lambda",), ("runpod",)]
    assert query(b, "select count(*) from scrape_runs where provider = 'acme'") == [(0,)]


def test_a_file_listed_twice_is_refused_not_loaded_twice(published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    files = manifest["providers"]["lambda"]["files"]
    [offers] = [f for f in files if f["table"] == "offers"]
    files.append(offers)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, each of lambda's 27 offers loaded twice, and `gpuledger check` failed (duplicate current keys)
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert "lambda: refused: the manifest's entry is malformed (more than one file of offers)" in output
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]
    assert checks_pass(b)


@pytest.mark.parametrize("table, key", [
    ("offers", "provider, region, zone, instance_type, purchase_option"),
    ("offer_history", "provider, region, zone, instance_type, purchase_option, valid_from")])
def test_a_file_whose_rows_repeat_a_key_is_refused(published: tuple[Path, Path], tmp_path: Path, table: str,
                                                   key: str) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == table]
    rewrite(folder, entry, "select * from f union all (select * from f where instance_type = 'gpu_1x_a10')")
    entry["rows"] += 2  # the A10's two offers (or versions) twice, and the manifest counting them
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, the A10 twice: two current rows of one offer, or two open versions of it
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert f"lambda: refused: {entry['name']}: 2 of its rows repeat another's {key}" in output.replace("\n", " ")
    assert query(b, "select distinct provider from offer_history order by 1") == [("cudo",), ("runpod",)]
    assert checks_pass(b)


@pytest.mark.parametrize("times, said", [
    ({"started_at": "2099-01-01T00:00:00+00:00"}, "started_at 2099-01-01T00:00:00+00:00 is in the future"),
    ({"finished_at": "2000-01-01T00:00:00+00:00"}, "finished_at 2000-01-01T00:00:00+00:00 is before its started_at"),
])
def test_a_scrape_time_in_the_future_or_ending_before_it_began_is_refused(
        published: tuple[Path, Path], tmp_path: Path, times: dict[str, str], said: str) -> None:
    folder, manifest = copied(published, tmp_path)
    manifest["providers"]["lambda"].update(times)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, loaded; a scrape of 2099 made every later catalog of lambda 'kept' ("the warehouse holds its
    # scrape of 2099-01-01 00:00 UTC"): lambda's prices froze at this one's
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert f"lambda: refused: the manifest's entry is malformed ({said})" in output.replace("\n", " ")
    assert query(b, "select distinct provider from scrape_runs order by 1") == [("cudo",), ("runpod",)]
    [reloaded] = [r for r in pull(b, str(published[1])) if r.provider == "lambda"]
    assert reloaded.state == "loaded"


def test_sigterm_during_a_pull_is_one_line_and_leaves_the_warehouse_and_no_download_behind(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    db = tmp_path / "w.duckdb"
    without = {**manifest, "providers": {p: e for p, e in manifest["providers"].items() if p != "lambda"}}
    (folder / MANIFEST).write_text(json.dumps(without))
    assert [r.state for r in pull(db, str(folder))] == ["loaded", "loaded"]  # cudo, runpod
    (folder / MANIFEST).write_text(json.dumps(manifest))
    before = digests(db)
    asked, release = threading.Event(), threading.Event()

    class Stalling(SimpleHTTPRequestHandler):  # lambda's offers answered only once the test is over
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if self.path.startswith("/lambda.offers."):
                asked.set()
                release.wait(120)
            super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Stalling, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    downloads = tmp_path / "tmp"
    downloads.mkdir()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "pull",
                                 f"http://127.0.0.1:{server.server_address[1]}", "--db", str(db)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": str(downloads), "COLUMNS": "200"})
        assert asked.wait(120)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    # before: killed at once (exit -15, nothing said), its downloads left in $TMPDIR/gpuledger-pull-*, and its
    # working copy (w.duckdb.refresh-work and its WAL) beside the warehouse until the next pull
    assert (proc.returncode, err.strip()) == (143, "error: the pull was stopped (SIGTERM); the warehouse is as it was")
    assert list(downloads.iterdir()) == []
    assert sorted(p.name for p in tmp_path.glob("w.duckdb*")) == ["w.duckdb", "w.duckdb.refresh.lock"]
    assert digests(db) == before


@pytest.mark.parametrize("drop, said", [
    ("offers", "0 current rows without their one open version, 27 open versions without their current row"),
    ("offer_history", "27 current rows without their one open version, 0 open versions without their current row"),
])
def test_a_catalog_whose_current_rows_and_history_disagree_is_refused(
        published: tuple[Path, Path], tmp_path: Path, drop: str, said: str) -> None:
    folder, manifest = copied(published, tmp_path)
    lam = manifest["providers"]["lambda"]
    lam["files"] = [f for f in lam["files"] if f["table"] != drop]  # a file left out of the manifest
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, lambda loaded with 27 offers and no open version of them (or 27 open versions of none),
    # and `gpuledger check` failed
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert (f"lambda: refused: not loaded, nothing of it changed: its offers and offer_history disagree ({said})"
            in output.replace("\n", " "))
    assert query(b, "select distinct provider from offer_history order by 1") == [("cudo",), ("runpod",)]
    assert checks_pass(b)


def test_a_file_trickled_slower_than_the_least_rate_is_refused(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]

    def trickled(handler: SimpleHTTPRequestHandler) -> bool:  # lambda's offers, 500 bytes each 0.2 s: no read timeout
        if not handler.path.startswith("/lambda.offers."):
            return False
        send_trickled(handler, (folder / entry["name"]).read_bytes())
        return True

    monkeypatch.setattr(catalog, "TIMEOUT_S", 1.0)  # reads of 1 s, and 1 s + bytes / 1 MB a second in all
    monkeypatch.setattr(catalog, "MIN_RATE", 1 << 20)
    b = tmp_path / "b.duckdb"
    with serving(folder, trickled) as url:
        reports = {r.provider: r for r in pull(b, url)}
    # before: loaded, however long it took (a byte every 59 s: for ever)
    assert reports["lambda"].state == "refused"
    assert re.fullmatch(rf"{re.escape(entry['name'])}: [\d,]+ of {entry['bytes']:,} bytes in 1 s from "
                        rf"http://127\.0\.0\.1:\d+/{re.escape(entry['name'])}: slower than 1,048,576 bytes a "
                        r"second, refused",
                        reports["lambda"].detail)
    assert reports["cudo"].state == reports["runpod"].state == "loaded"
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]


def test_a_providers_facts_merged_as_a_scrape_are_its_own_whatever_provider_they_name(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    lam = manifest["providers"]["lambda"]
    lam.update(started_at=later(lam["started_at"]), finished_at=later(lam["finished_at"]))
    lam["facts"].update(provider="cudo", display_name="Not Lambda")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    own = tmp_path / "own.duckdb"  # a warehouse that refreshes lambda itself
    shutil.copyfile(published[0], own)
    [(cudo,)] = query(own, "select display_name from providers where provider = 'cudo'")
    assert cudo == "CUDO Compute"
    code, output = cli("pull", str(folder), "--db", str(own), "--format", "csv")
    assert code == 0 and "lambda,loaded,27,0,0,0,merged as a scrape" in output.splitlines()
    # before: lambda's entry rewrote cudo's facts: cudo was "Not Lambda", lambda as it was
    assert query(own, "select provider, display_name from providers where provider in ('cudo', 'lambda') order by 1"
                 ) == [("cudo", "CUDO Compute"), ("lambda", "Not Lambda")]


def test_an_entry_whose_run_id_is_another_providers_scrape_is_refused(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    cudo_run = manifest["providers"]["cudo"]["run_id"]
    manifest["providers"]["lambda"]["run_id"] = cudo_run
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, lambda's offers loaded but its scrape run not stored (the insert ignored): lambda 'never'
    # scraped in `gpuledger status`, its offers stale to the recommender
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert (f"lambda: refused: not loaded, nothing of it changed: its run_id {cudo_run} is a scrape of cudo"
            in output.replace("\n", " "))
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]
    assert query(b, "select provider from scrape_runs order by 1") == [("cudo",), ("runpod",)]
    assert checks_pass(b)


def test_publishing_over_a_damaged_file_of_the_previous_catalog_is_refused(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = published
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offer_history"]
    cut = folder / entry["name"]  # as a download of the published catalog that stopped part way
    cut.write_bytes(cut.read_bytes()[:1000])
    # before: exit 0, lambda 'kept' with the cut file in the new manifest: every pull refused lambda from then on
    code, said = cli("publish", str(folder), "--db", str(a))
    assert code == 2
    assert said.replace("\n", " ").strip() == (
        f"error: cannot publish into {folder}: 1 files are not those its manifest names (truncated or replaced), "
        f"{entry['name']} first (download the published catalog's files into it again)")
    assert json.loads((folder / MANIFEST).read_text()) == manifest


def test_a_url_with_a_control_character_is_refused_in_one_line(tmp_path: Path) -> None:
    b = tmp_path / "b.duckdb"
    # before: an httpx InvalidURL traceback, exit 1
    code, said = cli("pull", "http://127.0.0.1:9/catalog\x1b[31m", "--db", str(b))
    assert (code, said.strip()) == (2, "error: manifest.json: InvalidURL from "
                                       "http://127.0.0.1:9/catalog/manifest.json: Invalid non-printable ASCII "
                                       "character in URL, '\\x1b' at position 26.")
    assert not b.exists()


def test_a_manifest_nested_too_deep_is_refused_in_one_line(tmp_path: Path) -> None:
    folder, b = tmp_path / "catalog", tmp_path / "b.duckdb"
    folder.mkdir()
    (folder / MANIFEST).write_text("[" * 100_000)
    # before: a RecursionError traceback ("maximum recursion depth exceeded while decoding a JSON array"), exit 1
    code, said = cli("pull", str(folder), "--db", str(b))
    assert (code, said.strip()) == (2, f"error: {folder}/manifest.json: not a gpuledger catalog manifest: not a JSON "
                                       "object")


def test_publishing_over_a_manifest_nested_too_deep_is_refused_in_one_line(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "catalog"
    folder.mkdir()
    (folder / MANIFEST).write_text("[" * 100_000)
    # before: a RecursionError traceback, exit 1
    code, said = cli("publish", str(folder), "--db", str(published[0]))
    assert code == 2
    assert said.replace("\n", " ").strip() == (f"error: cannot publish into {folder}: {folder}/manifest.json: not a "
                                               "gpuledger catalog manifest: not a JSON object")
    assert (folder / MANIFEST).read_text() == "[" * 100_000


def test_a_manifest_larger_than_a_manifest_may_be_is_refused_saying_so(
        served: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = served
    monkeypatch.setattr(catalog, "MANIFEST_MAX_BYTES", 1000)  # as an endless answer meets 16 MiB
    code, said = cli("pull", url, "--db", str(tmp_path / "b.duckdb"))
    # before: "(the manifest's size)": no manifest gives its own size
    assert (code, said.strip()) == (2, "error: manifest.json: larger than 1,000 bytes (the most a manifest may be): "
                                       "refused")


def test_a_catalog_merged_as_a_scrape_dates_its_changes_at_its_scrape_not_at_the_pull(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    own = tmp_path / "own.duckdb"  # a warehouse that refreshes lambda itself
    shutil.copyfile(published[0], own)
    [(loaded,)] = query(own, "select max(last_seen) from offers where provider = 'lambda'")
    started, finished = loaded + timedelta(milliseconds=1), loaded + timedelta(milliseconds=2)  # a later scrape
    lam = manifest["providers"]["lambda"]
    lam.update(started_at=started.isoformat(), finished_at=finished.isoformat())
    [entry] = [f for f in lam["files"] if f["table"] == "offers"]
    raised = "case when instance_type = 'gpu_1x_a10' then round(price_per_hour * 1.1, 4) else {} end"  # one GPU, USD
    rewrite(folder, entry, f"select * replace ({raised.format('price_per_hour')} as price_per_hour, "
                           f"{raised.format('source_price_per_hour')} as source_price_per_hour, "
                           f"{raised.format('price_per_gpu_hour')} as price_per_gpu_hour) from f")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    code, output = cli("pull", str(folder), "--db", str(own), "--format", "csv")
    assert code == 0, output
    assert "lambda,loaded,27,0,2,0,merged as a scrape" in output.splitlines()
    # before: the A10's new price began, and its old one ended, when the pull ran, not when it was seen (here
    # moments later; a nightly catalog pulled in the evening, hours later); last_seen was the pull's time too
    assert query(own, "select count(*), min(valid_from), max(valid_from) from offer_history where provider = 'lambda' "
                      "and instance_type = 'gpu_1x_a10' and valid_to is null") == [(2, finished, finished)]
    assert query(own, "select count(*), max(valid_to) from offer_history where provider = 'lambda' "
                      "and instance_type = 'gpu_1x_a10' and valid_to is not null") == [(2, finished)]
    assert query(own, "select distinct last_seen from offers where provider = 'lambda'") == [(finished,)]
    assert checks_pass(own)


def test_a_history_segment_whose_versions_overlap_is_refused(published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offer_history"]
    # each A10 offer also priced from a day before its version until an hour into it: two prices at once
    rewrite(folder, entry, "select * from f union all select * replace (valid_from - interval 1 day as valid_from, "
                           "valid_from + interval 1 hour as valid_to) from f where instance_type = 'gpu_1x_a10'")
    entry["rows"] += 2
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: exit 0, loaded, and `gpuledger check` failed "offer_history: versions do not overlap and end after
    # they start"
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert ("lambda: refused: not loaded, nothing of it changed: 2 of its offer_history versions end before they "
            "start or overlap the next") in output.replace("\n", " ")
    assert query(b, "select distinct provider from offer_history order by 1") == [("cudo",), ("runpod",)]
    assert checks_pass(b)


@contextlib.contextmanager
def serving(folder: Path, answer: Any) -> Any:
    """`folder` served on 127.0.0.1, each GET first offered to `answer(handler)`, which returns True once it
    has answered; the URL of the server."""

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if not answer(self):
                super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_redirected_404_names_the_address_that_answered_without_its_query_string(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    def moved(handler: SimpleHTTPRequestHandler) -> bool:  # a release asset moved: its signed URL answers 404
        if handler.path.startswith("/catalog/"):
            handler.send_response(302)
            handler.send_header("Location", f"/moved/{handler.path[9:]}?X-Amz-Signature=s3cr3t&token=t0k3n")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return True
        if handler.path.startswith("/moved/"):
            handler.send_error(404)
            return True
        return False

    with serving(published[1], moved) as url:
        code, said = cli("pull", f"{url}/catalog", "--db", str(tmp_path / "b.duckdb"))
    # before: "error: manifest.json: HTTP 404 from http://127.0.0.1:PORT/catalog", the address asked, not the
    # one that answered 404
    assert (code, said.strip()) == (2, f"error: manifest.json: HTTP 404 from {url}/moved/manifest.json")
    assert not (tmp_path / "b.duckdb").exists()


def test_a_trickled_manifest_is_refused_at_the_least_rate(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = (published[1] / MANIFEST).read_bytes()
    assert len(data) > 2500  # 500 bytes each 0.2 s: more than a second

    def trickled(handler: SimpleHTTPRequestHandler) -> bool:  # a few bytes a second, far under 16 MiB
        if handler.path != f"/{MANIFEST}":
            return False
        send_trickled(handler, data)
        return True

    monkeypatch.setattr(catalog, "TIMEOUT_S", 1.0)  # reads of 1 s, then 1 MB a second at the least
    monkeypatch.setattr(catalog, "MIN_RATE", 1 << 20)
    with serving(published[1], trickled) as url:
        code, said = cli("pull", url, "--db", str(tmp_path / "b.duckdb"))
    # before: loaded; the manifest had 1 s + 16 MiB / MIN_RATE, at 16 KiB a second 18 minutes
    assert code == 2, said
    assert re.fullmatch(rf"error: manifest\.json: [\d,]+ bytes in 1 s from {re.escape(url)}/manifest\.json: slower "
                        r"than 1,048,576 bytes a second, refused", said.strip()), said
    assert not (tmp_path / "b.duckdb").exists()


def test_a_manifest_encoded_as_gzip_inside_gzip_is_refused_unread(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    data = gzip.compress(gzip.compress((published[1] / MANIFEST).read_bytes()))
    asked = []

    def doubly_gzipped(handler: SimpleHTTPRequestHandler) -> bool:  # a few KB of it may inflate to gigabytes
        if handler.path != f"/{MANIFEST}":
            return False
        asked.append(handler.headers["Accept-Encoding"])
        handler.send_response(200)
        handler.send_header("Content-Encoding", "gzip, gzip")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        return True

    with serving(published[1], doubly_gzipped) as url:
        code, said = cli("pull", url, "--db", str(tmp_path / "b.duckdb"))
    # before: httpx asked for and decoded any coding it knows (brotli too), a whole read at once, and it loaded
    assert asked == ["gzip, deflate"]
    assert (code, said.strip()) == (2, "error: manifest.json: the answer is encoded as 'gzip, gzip', not gzip or "
                                       f"deflate alone as asked, from {url}/manifest.json: refused")
    assert not (tmp_path / "b.duckdb").exists()


@pytest.mark.parametrize("given", ["{url}/?token=t0k3n", "{url}/manifest.json?token=t0k3n", "{url}?token=t0k3n#top"])
def test_a_url_with_a_query_string_fetches_each_file_beside_the_manifest_with_it(
        published: tuple[Path, Path], tmp_path: Path, given: str) -> None:
    asked = []

    def tokened(handler: SimpleHTTPRequestHandler) -> bool:  # a host that takes a token for each file
        asked.append(handler.path)
        if handler.path.endswith("?token=t0k3n"):
            handler.path = handler.path.removesuffix("?token=t0k3n")
            return False
        handler.send_error(403)
        return True

    b = tmp_path / "b.duckdb"
    with serving(published[1], tokened) as url:
        code, said = cli("pull", given.format(url=url), "--db", str(b))
    # before: the manifest fetched from /?token=t0k3n/manifest.json ("HTTP 403 from http://...?token=t0k3n"), or
    # (the manifest's own address) each file from /manifest.json?token=t0k3n/<file>
    assert code == 0, said
    assert asked[0] == "/manifest.json?token=t0k3n" and len(asked) == 1 + sum(
        len(e["files"]) for e in json.loads((published[1] / MANIFEST).read_text())["providers"].values())
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("lambda",), ("runpod",)]
    assert "t0k3n" not in said
    assert query(b, "select distinct notes from scrape_runs") == [(f"pulled from {url}",)]
    assert checks_pass(b)


@pytest.mark.parametrize("change, said", [
    ({"format": 3}, "not a gpuledger catalog manifest: format 3, this gpuledger reads format 1 or 2"),
    ({"schema_version": 99}, "made for warehouse schema 99; this gpuledger reads up to 13 (upgrade gpuledger)"),
    ({"providers": None}, "not a gpuledger catalog manifest: no 'providers' object"),
])
def test_publishing_over_a_catalog_of_a_newer_gpuledger_or_no_catalog_is_refused(
        published: tuple[Path, Path], tmp_path: Path, change: dict[str, Any], said: str) -> None:
    folder, manifest = copied(published, tmp_path)
    (folder / MANIFEST).write_text(json.dumps({**manifest, **change}))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    # before: a newer gpuledger's catalog rewritten as format 2 of schema 12 (its files of a table this one does
    # not know deleted), or "cannot publish into ...: TypeError: 'NoneType' object is not subscriptable"
    code, output = cli("publish", str(folder), "--db", str(published[0]))
    assert (code, output.replace("\n", " ").strip()) == (2, f"error: cannot publish into {folder}: "
                                                           f"{folder}/manifest.json: {said}")
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_a_file_trickled_for_ever_is_refused_at_the_least_rate_whatever_size_the_manifest_says(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]
    entry["bytes"] = 50 << 20  # a manifest that lies, and a server that sends its 50 MiB a few bytes at a time
    (folder / MANIFEST).write_text(json.dumps(manifest))

    def endless(handler: SimpleHTTPRequestHandler) -> bool:
        if not handler.path.startswith("/lambda.offers."):
            return False
        handler.send_response(200)
        handler.end_headers()
        with contextlib.suppress(OSError):  # the client gone
            for _ in range(600):
                handler.wfile.write(b"\0" * 500)
                handler.wfile.flush()
                time.sleep(0.2)
        return True

    monkeypatch.setattr(catalog, "TIMEOUT_S", 1.0)  # reads of 1 s, then 1 MB a second at the least
    monkeypatch.setattr(catalog, "MIN_RATE", 1 << 20)
    with serving(folder, endless) as url:
        reports = {r.provider: r for r in pull(tmp_path / "b.duckdb", url)}
    # before: held for 1 s + 50 MiB / MIN_RATE (51 s here; at 16 KiB a second, a 2 GiB entry held it 36 hours)
    assert re.fullmatch(rf"{re.escape(entry['name'])}: [\d,]+ of 52,428,800 bytes in 1 s from "
                        rf"{re.escape(url)}/{re.escape(entry['name'])}: slower than 1,048,576 bytes a second, refused",
                        reports["lambda"].detail), reports["lambda"].detail
    assert reports["cudo"].state == reports["runpod"].state == "loaded"


def test_files_not_in_within_the_pulls_time_are_refused_and_the_providers_loaded_before_stay(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = copied(published, tmp_path)

    def trickled(handler: SimpleHTTPRequestHandler) -> bool:  # 500 bytes a second: within the least rate's minute
        if not handler.path.startswith("/lambda.offers."):
            return False
        send_trickled(handler, (folder / handler.path[1:]).read_bytes(), step=100)
        return True

    monkeypatch.setenv("GPULEDGER_PULL_TIMEOUT_S", "8")
    with serving(folder, trickled) as url:
        start = time.monotonic()
        reports = {r.provider: r for r in pull(tmp_path / "b.duckdb", url)}
        took = time.monotonic() - start
    # before: each file had a minute, then 16 KiB a second, however many there were: lambda's 11 KB loaded
    # after 22 s
    assert reports["cudo"].state == "loaded" and took < 16
    [name] = [f.name for f in folder.glob("lambda.offers.*")]
    assert (reports["lambda"].state, reports["lambda"].detail) == (
        "refused", f"{name}: not fetched within the pull's 8 s (GPULEDGER_PULL_TIMEOUT_S)")
    assert reports["runpod"].state == "refused" and "within the pull's 8 s" in reports["runpod"].detail
    assert query(tmp_path / "b.duckdb", "select distinct provider from offers") == [("cudo",)]



def test_a_providers_downloads_are_removed_once_it_is_merged_before_the_next_providers_come(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    downloads = tmp_path / "tmp"
    downloads.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(downloads))  # where the pull's temporary folder goes
    on_disk_when_asked: dict[str, list[str]] = {}

    def looked(handler: SimpleHTTPRequestHandler) -> bool:
        on_disk_when_asked[handler.path[1:]] = sorted(p.name for p in downloads.rglob("*.parquet"))
        return False

    with serving(published[1], looked) as url:
        reports = {r.provider: r.state for r in pull(tmp_path / "b.duckdb", url)}
    assert reports == {"cudo": "loaded", "lambda": "loaded", "runpod": "loaded"}
    files = {p: sorted(f["name"] for f in e["files"])
             for p, e in json.loads((published[1] / MANIFEST).read_text())["providers"].items()}
    asked = list(on_disk_when_asked)  # in the order the pull asked for them
    # before: every file of the pull stayed on disk until its end, cudo's and lambda's still there as runpod's came
    for provider in ("lambda", "runpod"):
        assert on_disk_when_asked[min(files[provider], key=asked.index)] == [], provider
    # while a provider's files come, its earlier ones are there (the look finds what is on disk)
    last = max(files["runpod"], key=asked.index)
    assert on_disk_when_asked[last] and all(name.startswith("runpod.") for name in on_disk_when_asked[last])
    assert list(downloads.iterdir()) == []
    assert checks_pass(tmp_path / "b.duckdb")


STALLED_PUBLISH = """
import pathlib, sys, time
from gpuledger.warehouse import catalog
write = catalog._write
def stalled(*args):  # the first file written, the publish stalls there: the test stops it
    out = write(*args)
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(120)
    return out
catalog._write = stalled
from gpuledger.flows.cli import app
app(sys.argv[2:])
"""


def test_sigterm_during_a_publish_is_one_line_and_leaves_no_folder_it_made(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder, ready = tmp_path / "new" / "catalog", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", STALLED_PUBLISH, str(ready), "publish", str(folder), "--db",
                             str(published[0])], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        for _ in range(600):
            if ready.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # before: killed at once (exit -15, nothing said), the folders it made left with the files it had written
    assert (proc.returncode, err.strip()) == (143, f"error: the publish was stopped (SIGTERM); the manifest of "
                                                   f"{folder} is as it was")
    assert list(tmp_path.iterdir()) == [ready]


def test_a_publish_that_fails_into_the_previous_catalog_leaves_it_as_it_was(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the files a failed publish had written stayed beside the catalog, listed by no manifest, until the next
    # publish: a release uploaded from the folder carried them
    folder, manifest = copied(published, tmp_path)
    lambda_entry = manifest["providers"]["lambda"]  # published from a scrape before this warehouse's: written again
    lambda_entry["started_at"] = (datetime.fromisoformat(lambda_entry["started_at"]) - timedelta(days=1)).isoformat()
    (folder / MANIFEST).write_text(json.dumps(manifest))
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    monkeypatch.setattr(catalog, "MAX_FILES", 2)  # fewer than any catalog's files, however far they are folded
    code, said = cli("publish", str(folder), "--db", str(published[0]))
    assert (code, said.strip()) == (2, f"error: cannot publish into {folder}: its files would be more than 1")
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_a_busy_host_is_asked_again_and_one_that_stays_busy_or_says_not_found_is_not_waited_on(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    # A CDN's 503 (GitHub's release assets redirect to one) refused the catalog at once: the nightly that
    # restores an evicted warehouse from it failed
    [offers] = [f["name"] for f in json.loads((published[1] / MANIFEST).read_text())["providers"]["lambda"]["files"]
                if f["table"] == "offers"]
    asked: list[str] = []

    def busy_once(handler: SimpleHTTPRequestHandler) -> bool:
        asked.append(handler.path)
        if handler.path.lstrip("/") in (MANIFEST, offers) and asked.count(handler.path) == 1:
            handler.send_response(503)
            handler.send_header("Retry-After", "0")
            handler.end_headers()
            return True
        return False

    with serving(published[1], busy_once) as url:
        code, said = cli("pull", url, "--db", str(tmp_path / "b.duckdb"), "--format", "csv")
    assert code == 0, said  # before: "error: manifest.json: HTTP 503 from ...", exit 2
    assert asked.count(f"/{MANIFEST}") == 2 and asked.count(f"/{offers}") == 2
    assert "lambda,loaded," in said

    def always(status: int) -> Any:
        def answer(handler: SimpleHTTPRequestHandler) -> bool:
            asked.append(handler.path)
            handler.send_response(status)
            handler.send_header("Retry-After", "0")
            handler.end_headers()
            return True
        return answer

    for status, times in ((503, 3), (404, 1)):
        asked.clear()
        with serving(published[1], always(status)) as url:
            code, said = cli("pull", url, "--db", str(tmp_path / "c.duckdb"))
        assert (code, len(asked)) == (2, times), said
        assert said.strip() == (f"error: manifest.json: HTTP {status} from {url}/manifest.json"
                                + (" (asked 3 times)" if status == 503 else ""))


def test_a_retry_after_given_as_an_http_date_is_waited_until_that_date(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    # RFC 9110 lets Retry-After be a date: it was read as no wait asked, and the file waited the 2 s backoff
    in_ten_minutes = email.utils.format_datetime(datetime.now(timezone.utc) + timedelta(minutes=10), usegmt=True)
    assert 595 < catalog.HostBusy("busy", in_ten_minutes).retry_after <= 600
    asked_at: list[float] = []

    def busy_until_a_past_date(handler: SimpleHTTPRequestHandler) -> bool:
        if handler.path.lstrip("/") != MANIFEST:
            return False
        asked_at.append(time.monotonic())
        if len(asked_at) > 1:
            return False
        handler.send_response(503)
        handler.send_header("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")
        handler.end_headers()
        return True

    with serving(published[1], busy_until_a_past_date) as url:
        code, said = cli("pull", url, "--db", str(tmp_path / "b.duckdb"), "--format", "csv")
    assert code == 0 and "lambda,loaded," in said, said
    assert len(asked_at) == 2 and asked_at[1] - asked_at[0] < 1.5  # the date is past: asked again at once


def test_a_file_whose_headers_are_trickled_is_given_up_once_the_time_for_an_answer_is_over(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]
    data = (folder / entry["name"]).read_bytes()
    asked = []

    def slow_headers(handler: SimpleHTTPRequestHandler) -> bool:  # a header byte each 0.1 s, each read in time
        if not handler.path.startswith("/lambda.offers."):
            return False
        asked.append(handler.path)
        with contextlib.suppress(OSError):  # the client gone
            handler.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(160):
                handler.wfile.write(b"a")
                handler.wfile.flush()
                time.sleep(0.1)
            handler.wfile.write(f"\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        handler.close_connection = True
        return True

    monkeypatch.setattr(catalog, "TIMEOUT_S", 1.0)  # reads of 1 s, and 1 s for the status and headers
    monkeypatch.setattr(catalog, "WAIT_MAX_S", 0.1)
    b = tmp_path / "b.duckdb"
    with serving(folder, slow_headers) as url:
        start = time.monotonic()
        reports = {r.provider: r for r in pull(b, url)}
        took = time.monotonic() - start
    # before: refused once the 16 s of headers were over (a byte every 59 s: for ever)
    assert reports["lambda"].state == "refused"
    assert reports["lambda"].detail == (f"{entry['name']}: no status and headers in 1 s from {url}/{entry['name']} "
                                        "(asked 3 times)")
    assert len(asked) == 3
    assert took < 12  # three tries of 1 s, and loading cudo and runpod on a busy machine
    assert reports["cudo"].state == reports["runpod"].state == "loaded"
    assert query(b, "select distinct provider from offers order by 1") == [("cudo",), ("runpod",)]


def test_a_connection_reset_mid_file_is_said_with_its_reason(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]

    def reset(handler: SimpleHTTPRequestHandler) -> bool:  # half the file, then a TCP reset
        if not handler.path.startswith("/lambda.offers."):
            return False
        handler.send_response(200)
        handler.send_header("Content-Length", str(entry["bytes"]))
        handler.end_headers()
        handler.wfile.write((folder / entry["name"]).read_bytes()[:entry["bytes"] // 2])
        handler.wfile.flush()
        time.sleep(0.2)
        handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        handler.connection.close()
        handler.close_connection = True
        return True

    monkeypatch.setattr(catalog, "WAIT_MAX_S", 0.1)
    b = tmp_path / "b.duckdb"
    with serving(folder, reset) as url:
        reports = {r.provider: r for r in pull(b, url)}
    # the async client's ReadError has no text of its own: it had read "ReadError from <url>:  (asked 3 times)"
    assert reports["lambda"].detail == (f"{entry['name']}: ReadError from {url}/{entry['name']}: [Errno 104] "
                                        "Connection reset by peer (asked 3 times)")
    assert reports["cudo"].state == reports["runpod"].state == "loaded"


def test_a_host_that_refuses_the_connection_is_named_with_the_reason_under_the_clients_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(catalog, "WAIT_MAX_S", 0.1)
    with pytest.raises(catalog.CatalogError) as raised:
        pull(tmp_path / "b.duckdb", f"http://127.0.0.1:{port}/catalog")
    # the async client's own text is "All connection attempts failed"; the OSError under it says why
    assert re.fullmatch(rf"manifest\.json: ConnectError from http://127\.0\.0\.1:{port}/catalog/manifest\.json: "
                        r"\[Errno 111\] [^\n]+ \(asked 3 times\)", str(raised.value)), str(raised.value)
    assert not (tmp_path / "b.duckdb").exists()
