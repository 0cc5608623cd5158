"""Fetching only what changed: conditional requests, the price list's version index, the unchanged merge.

Every source runs its real client against the loopback replay server. The bundled recordings carry
no ETag or Last-Modified (docs/recordings.md); where a test needs them it copies a recording and
adds made-up validators of the real form (an entity tag, an HTTP date), said at each use.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from gpuledger.adapters.aws.pricelist import EC2_REGION_INDEX, PRICING_BULK_HOST
from gpuledger.adapters.base import SourceContext
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Recorder, RecordingProxy, ReplayServer
from gpuledger.flows.fetch import FINGERPRINT, SourcePlan, fetch_outcome
from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.spot import read_since
from gpuledger.warehouse.store import LoadReport
from gpuledger.warehouse.validators import read_validators
from tests.builders import load

LAMBDA_PATH = "/api/v1/instance-types"
LAMBDA_KEY = f"cloud.lambda.ai{LAMBDA_PATH}"
# Made-up validators in the form Lambda's CDN would send them (RFC 9110 entity tag and HTTP date).
ETAG, MODIFIED = '"lambda-v1"', "Wed, 02 Dec 2026 10:00:00 GMT"


def lambda_with_validators(tmp_path: Path, etag: str = ETAG, modified: str = MODIFIED) -> Path:
    """A copy of the bundled Lambda recording whose answer carries an ETag and a Last-Modified date."""
    root = tmp_path / "recordings"
    shutil.copytree(BUNDLED_RECORDINGS / "lambda", root / "lambda")
    manifest = root / "lambda" / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["exchanges"][0]["response"]["headers"].update({"ETag": etag, "Last-Modified": modified})
    manifest.write_text(json.dumps(doc))
    return root


def fetched(db: Path, recordings: Path, provider: str, refresh_id: str, hook: Any = None,
            **plan: Any) -> tuple[Any, LoadReport, ReplayServer]:
    """One provider fetched by its real client from `recordings` and merged as a refresh does."""
    server = ReplayServer(recordings, providers=[provider], hook=hook)
    server.start()
    try:
        outcome = fetch_outcome(SourcePlan(provider, "replay", server.endpoints(), dict(server.settings[provider]),
                                           read_since(db).get(provider, {}), read_validators(db).get(provider, {}),
                                           http_attempts=1, **plan))
    finally:
        server.close()
    [report] = load(db, [outcome], refresh_id)
    return outcome, report, server


def rows(db: Path, query: str, *params: Any) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query, list(params)).fetchall()
    finally:
        con.close()


# -- the replay server and the recorder --------------------------------------------------------

def test_the_replay_server_answers_conditional_gets_as_an_origin_server_does(tmp_path: Path) -> None:
    with ReplayServer(lambda_with_validators(tmp_path), providers=["lambda"]) as server, httpx.Client() as client:
        url = server.endpoints()["cloud.lambda.ai"] + LAMBDA_PATH

        def status(**headers: str) -> int:
            return client.get(url, headers=headers).status_code

        whole = client.get(url)
        assert whole.status_code == 200 and whole.headers["etag"] == ETAG and whole.headers["last-modified"] == MODIFIED
        same = client.get(url, headers={"If-None-Match": ETAG})
        assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == ETAG
        assert "content-type" not in same.headers
        assert status(**{"If-None-Match": f"W/{ETAG}"}) == 304  # weak comparison (RFC 9110 8.8.3.2)
        assert status(**{"If-None-Match": f'"lambda-v0", {ETAG}'}) == 304  # one of a list
        assert status(**{"If-None-Match": '"lambda-v0"'}) == 200
        # If-None-Match decides when both are sent (RFC 9110 13.2.2): an old tag gets the whole answer
        assert status(**{"If-None-Match": '"lambda-v0"', "If-Modified-Since": "Thu, 03 Dec 2026 10:00:00 GMT"}) == 200
        assert status(**{"If-Modified-Since": MODIFIED}) == 304
        assert status(**{"If-Modified-Since": "Thu, 03 Dec 2026 10:00:00 GMT"}) == 304
        assert status(**{"If-Modified-Since": "Tue, 01 Dec 2026 10:00:00 GMT"}) == 200
        assert status(**{"If-Modified-Since": "yesterday"}) == 200  # a date that does not parse is ignored
        missing = client.post(url, headers={"If-None-Match": ETAG})  # only GET is recorded
        assert missing.status_code == 404
        # five whole answers and the 404's text: a 304 sends no body
        assert server.bytes_sent["cloud.lambda.ai"] == len(whole.content) * 5 + len(missing.content)
    with ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"]) as server, httpx.Client() as client:
        # an answer recorded without validators cannot be validated: always the whole answer
        answer = client.get(server.endpoints()["cloud.lambda.ai"] + LAMBDA_PATH,
                            headers={"If-None-Match": ETAG, "If-Modified-Since": MODIFIED})
        assert answer.status_code == 200 and answer.content


def test_a_recording_keeps_the_validators_an_answer_carried(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path / "out", "lambda")
    with ReplayServer(lambda_with_validators(tmp_path), providers=["lambda"]) as upstream:
        proxy = RecordingProxy(recorder, lambda host: upstream.endpoints()[host])
        try:
            assert httpx.get(proxy.url("cloud.lambda.ai") + LAMBDA_PATH).status_code == 200
        finally:
            proxy.close()
    [exchange] = recorder.exchanges
    assert {k.lower(): v for k, v in exchange["response"]["headers"].items()} == {
        "content-type": "application/json", "etag": ETAG, "last-modified": MODIFIED}


# -- a source whose data is one answer: Lambda -------------------------------------------------

def test_an_unchanged_answer_is_neither_downloaded_nor_parsed_and_its_offers_are_confirmed(tmp_path: Path) -> None:
    db, recordings = tmp_path / "w.duckdb", lambda_with_validators(tmp_path)
    first, loaded, server = fetched(db, recordings, "lambda", "refresh-1")
    assert first.state == "ok" and loaded.new == loaded.rows_loaded > 0
    assert first.bytes_fetched == server.bytes_sent["cloud.lambda.ai"] > 1000
    assert json.loads(read_validators(db)["lambda"][LAMBDA_KEY]) == {"etag": ETAG, "last-modified": MODIFIED}
    history = rows(db, "select * from offer_history order by all")

    again, confirmed, server = fetched(db, recordings, "lambda", "refresh-2")
    [(_, asked)] = server.requests
    assert asked.headers["if-none-match"] == ETAG and asked.headers["if-modified-since"] == MODIFIED
    assert again.state == "unchanged" and again.bytes_fetched == 0 == server.bytes_sent["cloud.lambda.ai"]
    assert (confirmed.state, confirmed.rows_loaded, confirmed.new, confirmed.changed, confirmed.closed) == (
        "ok", loaded.rows_loaded, 0, 0, 0)
    assert "unchanged since the last loaded fetch (HTTP 304)" in "; ".join(confirmed.notes)
    assert rows(db, "select * from offer_history order by all") == history  # nothing closed, nothing opened
    [(run_id, state, n, sent, notes)] = rows(
        db, "select run_id, state, rows_loaded, bytes_fetched, notes from scrape_runs where refresh_id = 'refresh-2'")
    assert (state, n, sent) == ("ok", loaded.rows_loaded, 0) and "offers confirmed as they are" in notes
    # last seen moved to the confirming run, first seen stayed
    assert rows(db, "select distinct run_id from offers") == [(run_id,)]
    assert rows(db, "select count(*) from offers where last_seen > first_seen") == [(loaded.rows_loaded,)]
    assert all(r.ok for r in run_checks(duckdb.connect(str(db), read_only=True)))

    # the answer changes (a new tag): fetched whole and merged
    def cheaper(host: str, request: Any, exchange: Any) -> Any:
        body = json.loads(exchange.body())
        body["data"]["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = 119
        return 200, {"Content-Type": "application/json", "ETag": '"lambda-v2"', "Last-Modified": MODIFIED}, \
            json.dumps(body).encode()

    a10 = rows(db, "select count(*) from offers where instance_type = 'gpu_1x_a10'")[0][0]
    changed, merged, _ = fetched(db, recordings, "lambda", "refresh-3", hook=cheaper)
    assert changed.state == "ok" and (merged.new, merged.changed, merged.closed) == (0, a10, 0) and a10 > 0
    assert rows(db, "select distinct price_per_hour from offers where instance_type = 'gpu_1x_a10'") == [(1.19,)]
    assert json.loads(read_validators(db)["lambda"][LAMBDA_KEY])["etag"] == '"lambda-v2"'


def test_an_offer_held_back_forgets_the_validators_so_the_next_fetch_sees_it_again(tmp_path: Path) -> None:
    db, recordings = tmp_path / "w.duckdb", lambda_with_validators(tmp_path)
    fetched(db, recordings, "lambda", "refresh-1")

    def jump(host: str, request: Any, exchange: Any) -> Any:  # one price x10: past the per-offer guard's x5
        if request.headers.get("if-none-match") == '"lambda-v2"':
            return 304, {"ETag": '"lambda-v2"'}, b""
        body = json.loads(exchange.body())
        body["data"]["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = 1290
        return 200, {"Content-Type": "application/json", "ETag": '"lambda-v2"'}, json.dumps(body).encode()

    _, held, _ = fetched(db, recordings, "lambda", "refresh-2", hook=jump)
    assert held.changed == 0 and "held back" in "; ".join(held.notes)
    assert "lambda" not in read_validators(db)  # the rows are not all that answer's
    again, loaded, server = fetched(db, recordings, "lambda", "refresh-3", hook=jump)
    assert "if-none-match" not in server.requests[0][1].headers
    assert again.state == "ok" and loaded.changed > 0  # seen again, the jump is the real price and loads
    assert rows(db, "select distinct price_per_hour from offers where instance_type = 'gpu_1x_a10'") == [(12.9,)]


def test_validators_of_other_code_or_settings_are_not_used(tmp_path: Path) -> None:
    db, recordings = tmp_path / "w.duckdb", lambda_with_validators(tmp_path)
    fetched(db, recordings, "lambda", "refresh-1")
    stored = read_validators(db)["lambda"]
    assert set(stored) == {FINGERPRINT, LAMBDA_KEY}
    server = ReplayServer(recordings, providers=["lambda"])
    with server:
        other = fetch_outcome(SourcePlan("lambda", "replay", server.endpoints(), {},
                                         validators={**stored, FINGERPRINT: "another gpuledger"}))
        assert other.state == "ok" and "if-none-match" not in server.requests[-1][1].headers
        # another setting in effect (the page cap): another fingerprint, the whole answer
        other = fetch_outcome(SourcePlan("lambda", "replay", server.endpoints(), {"max_pages": 7}, validators=stored))
        assert other.state == "ok" and other.validators[FINGERPRINT] != stored[FINGERPRINT]
        same = fetch_outcome(SourcePlan("lambda", "replay", server.endpoints(), {}, validators=stored))
        assert same.state == "unchanged"


# -- AWS's price list: its version index --------------------------------------------------------

THREE_REGIONS = "us-east-1,eu-west-1,ap-northeast-1"  # AWS regions with every kind of price file
NEW_VERSION = "/offers/v1.0/aws/AmazonEC2/20261204120000/us-east-1/index.json"
P5_ON_DEMAND = (b'"HECX59V5UR4U476Y.JRTCKXETXF.6YS6EN2CT7","OnDemand","$55.04 per On Demand Linux p5.48xlarge '
                b'Instance Hour","2026-11-01","0","Inf","Hrs","55.0400000000"')


def new_ec2_version(host: str, request: Any, exchange: Any) -> Any:
    """AWS publishes a new AmazonEC2 version for us-east-1 in which p5.48xlarge costs 49.54 an hour."""
    if host != PRICING_BULK_HOST:
        return None
    if request.path == EC2_REGION_INDEX:
        doc = json.loads(exchange.body())
        doc["regions"]["us-east-1"]["currentVersionUrl"] = NEW_VERSION
        return 200, dict(exchange.headers), json.dumps(doc).encode()
    if request.path == NEW_VERSION.replace(".json", ".csv"):
        body = gzip.decompress((BUNDLED_RECORDINGS / "aws" / "bulk" / "AmazonEC2" / "us-east-1" / "index.csv.gz")
                               .read_bytes())
        assert body.count(P5_ON_DEMAND) == 1
        return 200, {"Content-Type": "text/csv"}, body.replace(P5_ON_DEMAND, P5_ON_DEMAND.replace(b"55.04", b"49.54"))
    return None


def test_aws_public_price_list_unchanged_versions_fetch_under_2_percent_and_a_new_version_is_picked_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_AWS_EC2_API", "off")  # no EC2 credentials: the public price list alone
    db = tmp_path / "w.duckdb"
    first, loaded, server = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-1")
    assert first.state == "ok" and first.bytes_fetched == sum(server.bytes_sent.values()) > 30e6
    assert rows(db, "select bytes_fetched from scrape_runs")[0][0] == first.bytes_fetched
    history = rows(db, "select count(*), count(valid_to) from offer_history")

    again, confirmed, server = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-2")
    assert again.state == "unchanged" and "the price list" in again.notes[0]
    assert {r.path for _, r in server.requests} == {EC2_REGION_INDEX, "/offers/v1.0/aws/AWSDataTransfer/current/"
                                                     "region_index.json", "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan"
                                                     "/current/region_index.json"}  # the version index alone
    assert again.bytes_fetched == sum(server.bytes_sent.values()) <= 0.02 * first.bytes_fetched
    assert (confirmed.rows_loaded, confirmed.egress_rows, confirmed.storage_rows, confirmed.new, confirmed.changed) == (
        loaded.rows_loaded, loaded.egress_rows, loaded.storage_rows, 0, 0)
    assert rows(db, "select count(*), count(valid_to) from offer_history") == history

    changed, merged, server = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-3", hook=new_ec2_version)
    assert changed.state == "ok" and changed.bytes_fetched > 0.9 * first.bytes_fetched
    assert merged.changed >= 1 and merged.new == merged.closed == 0
    assert rows(db, "select price_per_hour from offers where region = 'us-east-1' and instance_type = 'p5.48xlarge' "
                    "and purchase_option = 'on_demand'") == [(49.54,)]
    assert rows(db, "select count(*) from offer_history where valid_to is not null") == [(merged.changed,)]


def test_a_degraded_aws_run_forgets_the_validators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In three regions, one region's Savings Plans missing is a third of them: the rows the failed
    enrichment did not bring are carried before the anomaly guard counts, so AWS still loads."""
    db = tmp_path / "w.duckdb"
    monkeypatch.setenv("GPULEDGER_AWS_EC2_API", "off")
    monkeypatch.setenv("GPULEDGER_AWS_REGIONS", THREE_REGIONS)
    fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-1")
    assert "price list" in read_validators(db)["aws"]

    def new_version_without_one_savings_plan_file(host: str, request: Any, exchange: Any) -> Any:
        if "AWSComputeSavingsPlan" in request.path and "/us-east-1/" in request.path:
            return 500, {}, b"unavailable"
        return new_ec2_version(host, request, exchange)

    degraded, report, _ = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-2",
                                  hook=new_version_without_one_savings_plan_file)
    assert degraded.state == report.state == "ok" and "savings plans" in report.degraded
    assert "aws" not in read_validators(db)  # the rows loaded are not all the new version's
    again, _, _ = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-3", hook=new_ec2_version)
    assert again.state == "ok"  # fetched whole, though its versions are those of refresh-2
    assert "price list" in read_validators(db)["aws"]


def test_aws_with_ec2_downloads_each_versioned_price_file_once(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With EC2 the offers are rebuilt every refresh (spot prices, stock), but a price-list file at an
    address already parsed is taken from the kept parse: each EC2, data-transfer and Savings Plans
    file is downloaded once, and a new version of one region's file is downloaded alone."""
    monkeypatch.setenv("GPULEDGER_AWS_REGIONS", THREE_REGIONS)
    db, cache = tmp_path / "w.duckdb", str(tmp_path / "w.duckdb.cache" / "aws")
    asked: list[str] = []

    def files_asked(hook: Any = None) -> Any:
        def note(host: str, request: Any, exchange: Any) -> Any:
            if host == PRICING_BULK_HOST and request.path.endswith((".csv", "index.json")) \
                    and "region_index" not in request.path:
                asked.append(request.path)
            return hook(host, request, exchange) if hook else None
        return note

    first, _, server = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-1", hook=files_asked(), cache_dir=cache)
    # EC2, Savings Plans and data transfer for each region (the recording has transfer files for
    # 8 regions, these three among them)
    assert first.state == "ok" and len(asked) == 3 * 3
    assert first.bytes_fetched == sum(server.bytes_sent.values())  # httpx and boto3 answers alike
    offers_before = rows(db, "select content_hash from offers order by 1")
    asked.clear()
    second, report, server = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-2", hook=files_asked(),
                                     cache_dir=cache)
    assert second.state == report.state == "ok" and asked == []
    assert "6 price-list files unchanged since their last parse" in " ".join(second.notes)
    assert second.bytes_fetched < 0.3 * first.bytes_fetched  # what is left is EC2's answers
    assert (report.new, report.changed) == (0, 0)
    assert rows(db, "select content_hash from offers order by 1") == offers_before
    third, _, _ = fetched(db, BUNDLED_RECORDINGS, "aws", "refresh-3", hook=files_asked(new_ec2_version),
                          cache_dir=cache)
    # a region's EC2 and data-transfer files are parsed together: its small transfer file comes along
    assert third.state == "ok" and sorted(asked) == [
        "/offers/v1.0/aws/AWSDataTransfer/20261118004117/us-east-1/index.csv", NEW_VERSION.replace(".json", ".csv")]
    assert rows(db, "select price_per_hour from offers where region = 'us-east-1' and instance_type = 'p5.48xlarge' "
                    "and purchase_option = 'on_demand'") == [(49.54,)]


def test_a_kept_parse_serves_only_the_same_files_under_the_same_code(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    ctx = SourceContext("aws", cache_dir=str(tmp_path / "cache"))
    ctx.new_validators[FINGERPRINT] = "code-1"
    parsed: list[str] = []

    def parse() -> dict[str, Any]:
        parsed.append("parsed")
        return {"rows": [["p5.48xlarge", 55.04]], "skipped": {"another OS": 3}}

    def kept(files: list[str]) -> Any:
        return ctx.kept_parse("price list us-east-1", files, parse)

    value = {"rows": [["p5.48xlarge", 55.04]], "skipped": {"another OS": 3}}
    assert kept(["/v1/us-east-1/index.csv"]) == value and len(parsed) == 1
    assert kept(["/v1/us-east-1/index.csv"]) == value and len(parsed) == 1 and ctx.kept_parses == 1
    assert kept(["/v2/us-east-1/index.csv"]) == value and len(parsed) == 2  # a new version
    ctx.new_validators[FINGERPRINT] = "code-2"  # a parser fixed, or other settings
    assert kept(["/v2/us-east-1/index.csv"]) == value and len(parsed) == 3
    [file] = (tmp_path / "cache").iterdir()
    file.write_bytes(b'{"key": ')  # cut short
    assert kept(["/v2/us-east-1/index.csv"]) == value and len(parsed) == 4
    assert kept(["/v2/us-east-1/index.csv"]) == value and len(parsed) == 4
    shutil.rmtree(tmp_path / "cache")
    (tmp_path / "cache").write_text("a file where the folder should be")
    assert kept(["/v2/us-east-1/index.csv"]) == value and len(parsed) == 5
    assert "aws: could not keep the parse of price list us-east-1" in caplog.text


# -- bytes fetched, every client ----------------------------------------------------------------

@pytest.mark.parametrize("provider", ["aws_capacity_blocks", "coreweave", "gcp"])
def test_bytes_fetched_are_counted_for_every_client(tmp_path: Path, provider: str) -> None:
    """boto3 (the body as received), scrapy (its downloader's response bytes, headers included),
    google clients (each page's JSON: their HTTP session is their own)."""
    outcome, report, server = fetched(tmp_path / "w.duckdb", BUNDLED_RECORDINGS, provider, "refresh-1")
    sent = sum(server.bytes_sent.values())
    assert outcome.state == "ok" and report.state == "ok" and sent > 0
    if provider == "aws_capacity_blocks":
        assert outcome.bytes_fetched == sent
    elif provider == "coreweave":
        assert sent < outcome.bytes_fetched < sent + 4000
    else:
        assert 0.3 * sent < outcome.bytes_fetched < 1.5 * sent
    assert rows(tmp_path / "w.duckdb", "select bytes_fetched from scrape_runs")[0][0] == outcome.bytes_fetched
