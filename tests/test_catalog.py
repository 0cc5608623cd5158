"""`gpuledger publish` and `gpuledger pull`: a static catalog served by a plain HTTP server, loaded
into another warehouse with its history, every file checked against the manifest."""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.warehouse import catalog
from gpuledger.warehouse.catalog import MANIFEST, pull
from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.store import open_reader
from tests.builders import lambda_price_hook, load, outcome, replayed_warehouse

# Every table a catalog carries, and the providers table without its local update time.
TABLES = ("offers", "offer_history", "egress_prices", "egress_price_history", "storage_prices",
          "storage_price_history", "spot_price_history", "capacity_block_offerings", "availability_history",
          "(select * exclude (updated_at) from providers)")


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def digests(db: Path, where: str = "true") -> dict[str, tuple[int, str]]:
    """Each table's rows and an md5 of all of them, every column included."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: tuple(con.execute(f"select count(*), md5(coalesce(string_agg(t::varchar, '|' order by t::varchar), "
                                     f"'')) from {t} t where {where}").fetchall()[0]) for t in TABLES}
    finally:
        con.close()


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def checks_pass(db: Path) -> bool:
    con = open_reader(db)
    try:
        return all(r.ok for r in run_checks(con))
    finally:
        con.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Warehouse A, refreshed from the recordings of AWS (spot history, capacity blocks), Lambda and
    RunPod by their real clients, and its catalog. AWS in three of its regions: the subject is the
    catalog, which every pull here reads whole, not 21,000 offers each time."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPULEDGER_AWS_REGIONS", "us-east-1,eu-west-1,ap-northeast-1")
        return replayed_and_published(tmp_path_factory.mktemp("published"), ["aws", "lambda", "runpod"])


def replayed_and_published(root: Path, providers: list[str]) -> tuple[Path, Path]:
    """A warehouse in `root` refreshed from the recordings of `providers`, and its catalog."""
    a, folder = root / "a.duckdb", root / "catalog"
    replayed_warehouse(a, providers)
    code, said = cli("publish", str(folder), "--db", str(a))
    assert code == 0, said
    return a, folder


@pytest.fixture
def served(published: tuple[Path, Path], tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A copy of the catalog folder (a test may damage it) served by a plain HTTP server on 127.0.0.1."""
    folder = tmp_path / "served"
    shutil.copytree(published[1], folder)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def file_of(folder: Path, provider: str, table: str) -> Path:
    [path] = folder.glob(f"{provider}.{table}.*.parquet")
    return path


def test_the_catalog_lists_every_file_with_its_sha256_rows_and_scrape(published: tuple[Path, Path]) -> None:
    a, folder = published
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["format"] == 2 and manifest["schema_version"] == 13 and set(manifest["providers"]) == {
        "aws", "lambda", "runpod"}
    runs = dict(query(a, "select provider, max(started_at) from scrape_runs where state = 'ok' group by all"))
    for provider, entry in manifest["providers"].items():
        assert entry["started_at"] == runs[provider].isoformat()
        assert entry["facts"]["provider"] == provider and entry["facts"]["display_name"]
        for f in entry["files"]:
            path = folder / f["name"]
            assert path.stat().st_size == f["bytes"] and hashlib.sha256(path.read_bytes()).hexdigest() == f["sha256"]
            assert query(a, f"select count(*) from {f['table']} where provider = '{provider}'") == [(f["rows"],)]
    assert {f["table"] for f in manifest["providers"]["aws"]["files"]} == {
        "offers", "offer_history", "egress_prices", "egress_price_history", "storage_prices",
        "storage_price_history", "spot_price_history", "capacity_block_offerings", "availability_history"}
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [MANIFEST] + [f["name"] for e in manifest["providers"].values() for f in e["files"]])


def test_pull_over_http_gives_the_publishers_warehouse_and_pulling_again_loads_nothing(
        published: tuple[Path, Path], served: tuple[Path, str], tmp_path: Path) -> None:
    a, (_, url) = published[0], served
    b = tmp_path / "b.duckdb"
    code, said = cli("pull", url, "--db", str(b))
    assert code == 0, said
    assert "aws" in said and "loaded" in said
    assert digests(b) == digests(a)  # offers, their history and the rest: every column equal
    assert checks_pass(b)
    code, said = cli("status", "--db", str(b))
    assert code == 0, said  # each provider ok, as of the publisher's last successful scrape
    again = pull(b, url)
    assert [(r.provider, r.state, r.new, r.changed, r.closed) for r in again] == [
        (p, "up to date", 0, 0, 0) for p in ("aws", "lambda", "runpod")]
    assert digests(b) == digests(a)


def test_availability_history_comes_along_and_a_format_1_catalog_without_it_still_loads(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    a, folder = published
    # the 7- and 30-day share with capacity (show-gpus, the page, recommend) is computed from this history:
    # after one refresh, one row per signal its offers carry (spot offers one per zone)
    signals = query(a, "select provider, count(*) from (select distinct provider, region, zone, instance_type, "
                       "gpu_model, available, available_count, availability_level from offers where not "
                       "(available is null and available_count is null and availability_level is null)) "
                       "group by all order by 1")
    assert [p for p, _ in signals] == ["aws", "lambda", "runpod"]
    assert query(a, "select provider, count(*) from availability_history group by all order by 1") == signals
    b = tmp_path / "b.duckdb"
    pull(b, str(folder))
    assert digests(b, "provider = 'aws'")["availability_history"] == digests(a, "provider = 'aws'")[
        "availability_history"]
    older = tmp_path / "format1"
    shutil.copytree(folder, older)
    manifest = json.loads((older / MANIFEST).read_text())
    manifest["format"] = 1
    for entry in manifest["providers"].values():
        entry["files"] = [f for f in entry["files"] if f["table"] != "availability_history"]
        del entry["marks"]["availability_history"]
    (older / MANIFEST).write_text(json.dumps(manifest))
    c = tmp_path / "c.duckdb"
    assert [r.state for r in pull(c, str(older))] == ["loaded"] * 3
    assert {t: d for t, d in digests(c).items() if t != "availability_history"} == {
        t: d for t, d in digests(a).items() if t != "availability_history"}
    assert query(c, "select count(*) from availability_history") == [(0,)]
    assert checks_pass(c)


def test_a_password_in_the_catalog_url_is_neither_printed_nor_stored(
        served: tuple[Path, str], tmp_path: Path) -> None:
    url = served[1].replace("http://", "http://reader:s3cret-Passw0rd@")
    b = tmp_path / "b.duckdb"
    code, said = cli("pull", url, "--db", str(b))
    assert code == 0, said
    # before: "pull http://reader:s3cret-Passw0rd@..." as the title and in every pulled provider's scrape notes
    # (which `gpuledger export` writes out)
    assert "s3cret" not in said and f"pull {served[1]}" in said
    assert query(b, "select distinct notes from scrape_runs") == [(f"pulled from {served[1]}",)]
    code, said = cli("pull", url + "/nope", "--db", str(b))
    assert code == 2 and said.strip() == f"error: manifest.json: HTTP 404 from {served[1]}/nope/manifest.json"

def test_a_url_whose_scheme_is_in_capitals_is_fetched(served: tuple[Path, str], tmp_path: Path) -> None:
    # before: "error: manifest.json: not in HTTP://127.0.0.1:...", read as a local folder's name
    code, said = cli("pull", served[1].replace("http://", "HTTP://"), "--db", str(tmp_path / "b.duckdb"))
    assert code == 0, said
    assert query(tmp_path / "b.duckdb", "select distinct provider from offers order by 1") == [
        ("aws",), ("lambda",), ("runpod",)]

def test_a_damaged_file_is_refused_in_one_line_and_nothing_of_its_provider_is_loaded(
        published: tuple[Path, Path], served: tuple[Path, str], tmp_path: Path) -> None:
    folder, url = served
    flipped = file_of(folder, "lambda", "offers")
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0x01
    flipped.write_bytes(bytes(data))
    longer = file_of(folder, "aws", "egress_prices")
    longer.write_bytes(longer.read_bytes() + b"\0" * 64)
    b = tmp_path / "b.duckdb"
    code, said = cli("pull", url, "--db", str(b))
    assert code == 1
    lines = said.replace("\n", " ")
    assert f"lambda: refused: {flipped.name}: its sha256 is not the manifest's" in lines
    assert f"aws: refused: {longer.name}: larger than" in lines
    assert "error: refused providers: aws, lambda" in lines
    for table in (*TABLES[:-1], "scrape_runs", "providers"):
        assert query(b, f"select distinct provider from {table} order by 1") in ([], [("runpod",)]), table
    assert digests(b, "provider = 'runpod'") == digests(published[0], "provider = 'runpod'")


def test_a_truncated_or_mismatched_file_is_refused(published: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    cut = file_of(folder, "runpod", "offer_history")
    size = cut.stat().st_size
    cut.write_bytes(cut.read_bytes()[:-100])
    manifest = json.loads((folder / MANIFEST).read_text())
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "storage_prices"]
    entry["rows"] += 1  # the manifest and the file disagree
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    reports = {r.provider: r for r in pull(b, str(folder))}
    assert reports["runpod"].detail == (f"{cut.name}: {size - 100:,} bytes, the manifest says {size:,} "
                                        "(truncated or replaced)")
    assert reports["lambda"].detail.startswith(f"{entry['name']}: {entry['rows'] - 1} rows (0 of another provider), "
                                               f"the manifest says {entry['rows']}")
    assert reports["aws"].state == "loaded" and reports["runpod"].state == reports["lambda"].state == "refused"
    assert query(b, "select distinct provider from offer_history") == [("aws",)]


@pytest.mark.parametrize("damage, said", [
    (lambda folder: (folder / MANIFEST).unlink(), "manifest.json: not in"),
    (lambda folder: (folder / MANIFEST).write_text("<html>"), "not a gpuledger catalog manifest: not a JSON object"),
    (lambda folder: (folder / MANIFEST).write_text(json.dumps({"format": 3, "providers": {}})),
     "not a gpuledger catalog manifest: format 3, this gpuledger reads format 1 or 2"),
    (lambda folder: (folder / MANIFEST).write_text(json.dumps({"format": 1})),
     "not a gpuledger catalog manifest: no 'providers' object"),
    (lambda folder: (folder / MANIFEST).write_text(json.dumps({"format": 1, "schema_version": 99, "providers": {}})),
     "made for warehouse schema 99; this gpuledger reads up to 13"),
    # before: exit 0, an empty table, and an empty warehouse (the nightly restore went on with it)
    (lambda folder: (folder / MANIFEST).write_text(json.dumps({"format": 1, "schema_version": 12, "providers": {}})),
     "manifest.json: the catalog holds no provider: nothing to load"),
])
def test_a_catalog_that_cannot_be_read_is_refused_whole(published: tuple[Path, Path], tmp_path: Path, damage: Any,
                                                        said: str) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    damage(folder)
    code, output = cli("pull", str(folder), "--db", str(tmp_path / "b.duckdb"))
    assert code == 2 and said in output.replace("\n", " ")
    assert not (tmp_path / "b.duckdb").exists() or query(tmp_path / "b.duckdb", "select count(*) from offers") == [(0,)]


@pytest.mark.parametrize("damage, said", [
    (lambda e: e.update(facts="x"), "its facts are not an object"),
    (lambda e: e.update(finished_at=5), "fromisoformat: argument must be str"),
    (lambda e: e.update(started_at="2026-12-07T03:00:00"), "time '2026-12-07T03:00:00' without a UTC offset"),
    (lambda e: [f.update(through="2026-12-07") for f in e["files"] if "through" in f],
     "time '2026-12-07' without a UTC offset"),
])
def test_an_entry_with_a_malformed_time_or_facts_is_refused_in_one_line(
        published: tuple[Path, Path], tmp_path: Path, damage: Any, said: str) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    damage(manifest["providers"]["lambda"])
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: a TypeError traceback (facts, finished_at; a time without offset once the warehouse held lambda),
    # or a time without offset loaded as if it were UTC
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1 and "Traceback" not in output
    assert f"lambda: refused: the manifest's entry is malformed ({said})" in output.replace("\n", " ")
    assert "lambda: the manifest's" not in output  # before: "lambda: refused: lambda: the manifest's ..."
    assert query(b, "select distinct provider from offers order by 1") == [("aws",), ("runpod",)]

def test_offers_of_a_gpu_model_this_gpuledger_does_not_know_are_refused(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]
    path = folder / entry["name"]  # as a newer publisher, whose gpu_models has a card this one lacks, wrote it
    duckdb.sql(f"select * replace (case when instance_type = 'gpu_1x_a10' then 'X999' else gpu_model end "
               f"as gpu_model) from read_parquet('{path}')").write_parquet(str(path) + ".new")
    Path(str(path) + ".new").replace(path)
    entry.update(bytes=path.stat().st_size, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    (folder / MANIFEST).write_text(json.dumps(manifest))
    b = tmp_path / "b.duckdb"
    # before: loaded, and `gpuledger check` then failed "offers: prices positive and finite, GPU model known"
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1
    assert query(published[0], "select count(*) from offers where instance_type = 'gpu_1x_a10'") == [(2,)]
    assert (f"lambda: refused: {entry['name']}: 2 offers of a GPU model this gpuledger does not know ('X999'): "
            "upgrade gpuledger") in output.replace("\n", " ")
    assert query(b, "select distinct provider from offers order by 1") == [("aws",), ("runpod",)]
    assert checks_pass(b)

def test_a_catalog_file_or_manifest_that_cannot_be_read_is_one_line(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, b = published[1], tmp_path / "b.duckdb"
    unreadable = file_of(folder, "lambda", "offers")  # as a file of another user, mode 600, is to this one
    hash_of = catalog.sha256_file

    def reading(path: Path) -> str:
        if path == unreadable:
            raise PermissionError(13, "Permission denied", str(path))
        return hash_of(path)

    monkeypatch.setattr(catalog, "sha256_file", reading)
    # before: a PermissionError traceback, nothing loaded
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1 and f"lambda: refused: {unreadable.name}: cannot be read (Permission denied)" in output
    assert query(b, "select distinct provider from offers order by 1") == [("aws",), ("runpod",)]

    read_bytes = Path.read_bytes

    def reading_bytes(path: Path) -> bytes:
        if path.name == MANIFEST:
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", reading_bytes)
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 2 and output.strip() == f"error: {folder}/manifest.json: cannot be read (Permission denied)"

def test_a_file_entry_naming_another_place_is_refused(published: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["providers"]["lambda"]["files"][0]["name"] = "../../etc/passwd"
    (folder / MANIFEST).write_text(json.dumps(manifest))
    reports = {r.provider: r for r in pull(tmp_path / "b.duckdb", str(folder))}
    assert reports["lambda"].state == "refused" and "the manifest's entry is malformed" in reports["lambda"].detail


def test_a_provider_name_with_terminal_escapes_is_refused_in_one_line_shown_inert(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["providers"]["lambda\x1b[2J\x1b]0;owned\x07\nfake: loaded"] = manifest["providers"].pop("lambda")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    result = CliRunner().invoke(app, ["pull", str(folder), "--db", str(tmp_path / "b.duckdb")])
    assert result.exit_code == 1
    # before: the refused line printed the name as it is: the escapes reached the terminal, and its
    # newline made a second line "fake: loaded: refused: ..."
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if ": refused:" in line]
    assert line.startswith("lambda fake: loaded: refused: the manifest's entry is malformed")

def test_publishing_again_adds_the_history_since_and_keeps_a_failed_providers_files(tmp_path: Path) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    folder = tmp_path / "it's a catalog; drop table offers"  # paths reach DuckDB as parameters
    replayed_warehouse(a, ["lambda", "runpod"], refresh_id="refresh-1")
    assert catalog.publish(duckdb.connect(str(a), read_only=True), folder) == {"lambda": "published",
                                                                               "runpod": "published"}
    first = json.loads((folder / MANIFEST).read_text())["providers"]
    assert {r.state for r in pull(b, str(folder))} == {"loaded"}

    # the next night: one Lambda price moves, RunPod fails
    replayed_warehouse(a, ["lambda"], hook=lambda_price_hook("gpu_1x_a10", 119), refresh_id="refresh-2")
    load(a, [outcome(None, "runpod", error="runpod: HTTP 503")], "refresh-2b")
    a10 = query(a, "select count(*) from offers where instance_type = 'gpu_1x_a10'")[0][0]
    assert catalog.publish(duckdb.connect(str(a), read_only=True), folder) == {"lambda": "published",
                                                                               "runpod": "kept"}
    second = json.loads((folder / MANIFEST).read_text())["providers"]
    assert second["runpod"] == first["runpod"]
    old, new = ({f["name"]: f for f in m["lambda"]["files"]} for m in (first, second))
    [segment] = [f for name, f in new.items() if f["table"] == "offer_history" and name not in old]
    assert segment["rows"] == 2 * a10  # the versions it closed and the ones it opened, nothing else
    assert set(old) - set(new) == {f["name"] for f in old.values() if f["table"] in catalog.CURRENT}
    assert not any((folder / name).exists() for name in set(old) - set(new))

    reports = {r.provider: r for r in pull(b, str(folder))}
    assert (reports["lambda"].state, reports["lambda"].new, reports["lambda"].changed, reports["lambda"].closed) == (
        "loaded", 0, a10, 0)
    assert reports["runpod"].state == "up to date"
    assert digests(b, "provider = 'lambda'") == digests(a, "provider = 'lambda'")
    assert checks_pass(b)


def test_an_older_catalog_pulled_after_a_newer_one_changes_nothing(tmp_path: Path) -> None:
    a, b, older, newer = tmp_path / "a.duckdb", tmp_path / "b.duckdb", tmp_path / "older", tmp_path / "newer"
    replayed_warehouse(a, ["lambda"], refresh_id="refresh-1")
    catalog.publish(duckdb.connect(str(a), read_only=True), older)
    shutil.copytree(older, newer)
    replayed_warehouse(a, ["lambda"], hook=lambda_price_hook("gpu_1x_a10", 119), refresh_id="refresh-2")
    catalog.publish(duckdb.connect(str(a), read_only=True), newer)
    assert [r.state for r in pull(b, str(newer))] == ["loaded"]
    [kept] = pull(b, str(older))
    # before: "loaded", the current offers rolled back to the older prices while their history kept the newer
    # ones open, and `gpuledger check` failed
    assert kept.state == "kept" and "holds its scrape of" in kept.detail
    assert digests(b) == digests(a)
    assert checks_pass(b)

def test_a_warehouse_that_refreshes_a_provider_itself_merges_the_catalog_as_a_scrape(tmp_path: Path) -> None:
    older, own, newer = (tmp_path / f"{n}.duckdb" for n in ("older", "own", "newer"))
    replayed_warehouse(older, ["lambda"])
    catalog.publish(duckdb.connect(str(older), read_only=True), tmp_path / "older")
    replayed_warehouse(own, ["lambda"])
    replayed_warehouse(newer, ["lambda"], hook=lambda_price_hook("gpu_1x_a10", 119))
    catalog.publish(duckdb.connect(str(newer), read_only=True), tmp_path / "newer")
    [kept] = pull(own, str(tmp_path / "older"))
    assert kept.state == "kept" and "holds its scrape of" in kept.detail
    a10 = query(own, "select count(*) from offers where instance_type = 'gpu_1x_a10'")[0][0]
    [merged] = pull(own, str(tmp_path / "newer"))
    assert (merged.state, merged.new, merged.changed, merged.closed) == ("loaded", 0, a10, 0)
    assert query(own, "select count(*), count(valid_to) from offer_history where instance_type = 'gpu_1x_a10'") == [
        (2 * a10, a10)]
    assert query(own, "select mode from scrape_runs order by started_at") == [("replay",), ("pull",)]
    assert checks_pass(own)


def test_a_catalog_merged_as_a_scrape_takes_accept_anomaly_as_its_refusal_says(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    from tests.test_schema import v1_warehouse

    own = tmp_path / "own.duckdb"
    v1_warehouse(own)  # its own AWS scrape: one p5.48xlarge at 6.88 per GPU-hour, far above AWS's median
    code, said = cli("pull", str(published[1]), "--db", str(own))
    assert code == 1 and "rerun with --accept-anomaly aws" in said.replace("\n", " ")
    # before: "No such option: --accept-anomaly", exit 2: the refusal named an option pull did not have
    code, said = cli("pull", str(published[1]), "--db", str(own), "--accept-anomaly", "aws", "--format", "csv")
    assert code == 0, said
    aws = query(published[0], "select count(*) from offers where provider = 'aws'")[0][0]
    assert f"aws,loaded,{aws},{aws - 1},1,0,merged as a scrape" in said.splitlines()
    assert checks_pass(own)
    code, said = cli("pull", str(published[1]), "--db", str(own), "--accept-anomaly", "nope")
    assert code == 2 and "--accept-anomaly nope: no such provider" in said

def nights_published(db: Path, folder: Path) -> Iterator[int]:
    """Four nights of Lambda into `db`, the A10's price moving each night, each published into `folder`."""
    for night, cents in enumerate((129, 119, 109, 99)):
        replayed_warehouse(db, ["lambda"], hook=lambda_price_hook("gpu_1x_a10", cents), refresh_id=f"refresh-{night}")
        catalog.publish(duckdb.connect(str(db), read_only=True), folder)
        yield night


def test_segments_past_the_limit_are_folded_into_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "MAX_SEGMENTS", 2)
    a, folder = tmp_path / "a.duckdb", tmp_path / "catalog"
    for _ in nights_published(a, folder):
        pass
    files = json.loads((folder / MANIFEST).read_text())["providers"]["lambda"]["files"]
    segments = [f for f in files if f["table"] == "offer_history"]
    assert len(segments) == 2  # three folded into one, then the fourth night's
    assert sum(f["rows"] for f in segments) >= query(a, "select count(*) from offer_history")[0][0]
    b = tmp_path / "b.duckdb"
    assert [r.state for r in pull(b, str(folder))] == ["loaded"]
    assert digests(b) == digests(a)
    assert checks_pass(b)


def test_publishing_a_warehouse_older_than_this_gpuledger_is_refused_naming_why(tmp_path: Path) -> None:
    from tests.test_schema import v1_warehouse

    v1_warehouse(tmp_path / "v1.duckdb")
    code, said = cli("publish", str(tmp_path / "catalog"), "--db", str(tmp_path / "v1.duckdb"))
    # before: "cannot publish into ...: CatalogException: Catalog Error: Table with name spot_price_history ..."
    assert code == 2 and said.replace("\n", " ").strip() == (
        f"error: cannot publish into {tmp_path / 'catalog'}: the warehouse is at schema version 1, this gpuledger "
        "reads version 13: the next `gpuledger refresh` upgrades it in place")
    assert not (tmp_path / "catalog").exists()  # before: the empty catalog/ the publish had made

def test_publishing_over_a_manifest_without_its_files_is_refused(published: tuple[Path, Path], tmp_path: Path) -> None:
    a, folder = published
    (tmp_path / "catalog").mkdir()
    shutil.copy(folder / MANIFEST, tmp_path / "catalog" / MANIFEST)  # the files were not downloaded
    code, said = cli("publish", str(tmp_path / "catalog"), "--db", str(a))
    assert code == 2 and "files its manifest names are not there" in said.replace("\n", " ")
    assert json.loads((tmp_path / "catalog" / MANIFEST).read_text()) == json.loads((folder / MANIFEST).read_text())


def test_publishing_another_warehouses_history_into_a_catalog_is_refused(tmp_path: Path) -> None:
    (a, b, c, d), folder = (tmp_path / f"{n}.duckdb" for n in "abcd"), tmp_path / "catalog"
    replayed_warehouse(a, ["lambda"], refresh_id="refresh-a")
    catalog.publish(duckdb.connect(str(a), read_only=True), folder)
    manifest, names = (folder / MANIFEST).read_text(), sorted(f.name for f in folder.iterdir())
    replayed_warehouse(b, ["lambda"], refresh_id="refresh-b")  # its own, later scrape of the same offers
    run_a = query(a, "select run_id from scrape_runs")[0][0]
    code, said = cli("publish", str(folder), "--db", str(b))
    # before: published; a pull of the catalog then held 27 offers with two versions open, and check failed
    assert code == 2 and said.replace("\n", " ").strip() == (
        f"error: cannot publish into {folder}: its history of lambda was published from another warehouse "
        f"(scrape {run_a} is not in this one); publish into a new folder, or pull the catalog into a new "
        "warehouse and refresh that one")
    assert (folder / MANIFEST).read_text() == manifest and sorted(f.name for f in folder.iterdir()) == names
    # the nightly's way: a warehouse restored from the catalog refreshes and publishes into it
    assert [r.state for r in pull(c, str(folder))] == ["loaded"]
    replayed_warehouse(c, ["lambda"], hook=lambda_price_hook("gpu_1x_a10", 119), refresh_id="refresh-c")
    assert catalog.publish(duckdb.connect(str(c), read_only=True), folder) == {"lambda": "published"}
    assert [r.state for r in pull(d, str(folder))] == ["loaded"]
    assert digests(d) == digests(c) and checks_pass(d)


def test_a_catalog_keeps_within_a_github_releases_1000_assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each night adds a segment per provider and table that changed; folded only at 30 segments of one table,
    # 31 providers' catalog outgrew a release's 1,000 assets within weeks and every later upload failed.
    monkeypatch.setattr(catalog, "MAX_FILES", 9)
    a, folder = tmp_path / "a.duckdb", tmp_path / "catalog"
    for _ in nights_published(a, folder):
        files = json.loads((folder / MANIFEST).read_text())["providers"]["lambda"]["files"]
        assert len(files) + 1 <= 9 and len(list(folder.iterdir())) == len(files) + 1
    assert [f["table"] for f in files].count("offer_history") >= 2  # folded only as far as needed
    b = tmp_path / "b.duckdb"
    assert [r.state for r in pull(b, str(folder))] == ["loaded"]
    assert digests(b) == digests(a)
    assert checks_pass(b)


def test_the_time_of_the_scrape_a_pull_keeps_is_utc_whatever_the_machines_time_zone(tmp_path: Path) -> None:
    """'the warehouse holds its scrape of 2026-12-07 07:31 UTC' in Tokyo was 22:31 UTC: local time called UTC."""
    import csv
    import io
    import os
    import subprocess
    import sys
    from datetime import timezone

    older, own = tmp_path / "older.duckdb", tmp_path / "own.duckdb"
    replayed_warehouse(older, ["lambda"])
    catalog.publish(duckdb.connect(str(older), read_only=True), tmp_path / "older")
    replayed_warehouse(own, ["lambda"])
    [(last,)] = query(own, "select max(started_at) from scrape_runs where provider = 'lambda'")
    done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "pull", str(tmp_path / "older"), "--db",
                           str(own), "--format", "csv"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TZ": "Asia/Tokyo"})
    assert done.returncode == 0, done.stderr
    [row] = list(csv.DictReader(io.StringIO(done.stdout, newline="")))
    assert (row["state"], row["detail"]) == (
        "kept", f"the warehouse holds its scrape of {last.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC")


@pytest.mark.parametrize("stop", [KeyboardInterrupt(), RuntimeError("Query interrupted")])
def test_ctrl_c_during_a_pull_is_one_line_exit_130_and_the_warehouse_is_as_it_was(
        stop: BaseException, published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C landing in a provider's load printed a traceback (DuckDB's 'Query interrupted', or the rollback's
    'cannot rollback - no transaction is active'), exit 1."""
    def interrupted(con: duckdb.DuckDBPyConnection, *args: Any) -> None:
        con.execute("rollback")  # as DuckDB does when Ctrl-C stops a query in a transaction
        raise stop

    monkeypatch.setattr(catalog, "upsert_provider_facts", interrupted)
    db = tmp_path / "w.duckdb"
    code, said = cli("pull", str(published[1]), "--db", str(db))
    assert (code, said.strip()) == (130, "error: the pull was cancelled (Ctrl-C); the warehouse is as it was")
    assert not db.exists()


def test_a_pull_into_a_truncated_warehouse_is_one_line_and_leaves_it_as_it_was(published: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    """The file opens (its first blocks are whole) and fails as the pull reads on: the failed cleanup's
    'Current transaction is aborted' came as a traceback, hiding DuckDB's 'Could not read enough bytes'."""
    db = tmp_path / "w.duckdb"
    db.write_bytes(published[0].read_bytes()[:300_000])  # cut where a copy or a download stopped
    before = db.read_bytes()
    code, said = cli("pull", str(published[1]), "--db", str(db))
    text = " ".join(said.split())
    assert code == 2 and text.startswith(f"error: cannot read the warehouse {db}: "), said
    assert "Could not read enough bytes" in text and len(said.strip().splitlines()) == 1, said
    assert db.read_bytes() == before and not (tmp_path / "w.duckdb.refresh-work").exists()


def test_the_manifests_own_address_pulls_its_catalog(published: tuple[Path, Path], served: tuple[Path, str],
                                                     tmp_path: Path) -> None:
    """`pull URL/manifest.json` fetched URL/manifest.json/manifest.json and said 'HTTP 404 from URL/manifest.json'."""
    a, (folder, url) = published[0], served
    for n, source in enumerate((f"{url}/manifest.json", str(folder / "manifest.json"))):
        b = tmp_path / f"b{n}.duckdb"
        code, said = cli("pull", source, "--db", str(b), "--format", "csv")
        assert code == 0, said
        assert digests(b) == digests(a)


def test_a_file_url_pulls_its_folder_and_another_scheme_is_refused_in_one_line(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    a, folder = published
    for n, source in enumerate((f"file://{folder}", f"FILE://localhost{folder}/manifest.json")):
        b = tmp_path / f"b{n}.duckdb"
        code, said = cli("pull", source, "--db", str(b), "--format", "csv")
        # before: "error: manifest.json: not in file:///...", the folder that holds it
        assert code == 0, said
        assert digests(b) == digests(a)
        assert query(b, "select distinct notes from scrape_runs") == [(f"pulled from {folder}",)]
    for source in ("s3://bucket/catalog", "file://otherhost/catalog"):
        code, said = cli("pull", source, "--db", str(tmp_path / "c.duckdb"))
        # before: "error: manifest.json: not in s3://bucket/catalog", as a local folder's name
        assert (code, said.strip()) == (2, f"error: {source}: a catalog is read from an http(s) URL, a file:// URL "
                                           "of this machine or a folder")
        assert not (tmp_path / "c.duckdb").exists()


def test_publishing_into_a_url_writes_its_file_url_folder_and_refuses_another_or_none(
        published: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = published[0]
    monkeypatch.chdir(tmp_path)
    code, said = cli("publish", "s3://bucket/catalog", "--db", str(a))
    # before: exit 0, "published into s3:/bucket/catalog": a local folder ./s3:/bucket/catalog, nothing in any bucket
    assert (code, " ".join(said.split())) == (2, "error: s3://bucket/catalog: publish writes a local folder (or its "
                                                 "file:// URL): serve it, or upload its files (a GitHub release's "
                                                 "assets, a bucket)")
    assert list(tmp_path.iterdir()) == []
    code, said = cli("publish", "", "--db", str(a))
    # before: exit 0, "published into .": the catalog's files spread over the current folder ("$DIR" unset)
    assert (code, said.strip()) == (2, "error: DIR is empty: name the catalog folder ('.' for the current one)")
    assert list(tmp_path.iterdir()) == []
    # before: "cannot publish into file:/...: IOException: IO Error: Cannot open file ...", a folder ./file: made
    code, said = cli("publish", f"file://{tmp_path}/catalog", "--db", str(a), "--format", "csv")
    assert code == 0, said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog"]
    manifest = json.loads((tmp_path / "catalog" / MANIFEST).read_text())
    assert sorted(manifest["providers"]) == ["aws", "lambda", "runpod"]


def test_publishing_a_warehouse_whose_successful_scrapes_left_no_rows_writes_no_catalog(
        published: tuple[Path, Path], tmp_path: Path) -> None:
    db, folder = tmp_path / "w.duckdb", tmp_path / "catalog"
    shutil.copyfile(published[0], db)
    con = duckdb.connect(str(db))
    for table in (*catalog.CURRENT, *catalog.SEGMENTED):  # its scrapes ok, their rows gone (none found)
        con.execute(f"delete from {table}")
    con.close()
    code, said = cli("publish", str(folder), "--db", str(db))
    # before: exit 0, a manifest.json of no provider, which pull refused ("the catalog holds no provider")
    # and the next publish into it too
    assert (code, " ".join(said.split())) == (2, f"error: {db} holds no rows of a successful scrape: nothing to "
                                                 "publish (`gpuledger refresh` or `gpuledger pull` first)")
    assert not folder.exists()


@pytest.mark.parametrize("source, said", [
    # before: "manifest.json: UnsupportedProtocol from http://: Request URL is missing an 'http://' or 'https://'
    # protocol", which it has
    ("http://", "http://: not a URL (no host)"),
    ("https:///catalog", "https:///catalog: not a URL (no host)"),
    ("", "manifest.json: not in ."),  # before: "manifest.json: not in " (an unset variable: the folder it read)
])
def test_an_address_of_no_host_or_none_is_refused_naming_what_was_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       source: str, said: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, output = cli("pull", source, "--db", str(tmp_path / "b.duckdb"))
    assert (code, output.strip()) == (2, f"error: {said}")
    assert not (tmp_path / "b.duckdb").exists()
