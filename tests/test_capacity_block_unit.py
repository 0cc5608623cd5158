"""Capacity Blocks on their own cadence: the refresh unit `aws_capacity_blocks` asks only
DescribeInstanceTypes and DescribeCapacityBlockOfferings, and its run on a warehouse holding AWS's
offers appends a new set of offerings while AWS's offers, history, scrape runs and providers row
stay as they were; a later AWS run deletes none of the unit's offerings.

Counts read by hand from adapters/recordings/aws_capacity_blocks (copies of the AWS recording's
us-east-1 answers, ../aws/README.md "Capacity Blocks for ML"): 24 DescribeCapacityBlockOfferings
answers (6 types x 4 durations) holding 171 `capacityBlockOfferingId`s, and 7 DescribeInstanceTypes
pages; p5.48xlarge for 72 hours starting 2026-11-30T11:30Z in us-east-1a costs 2152.23 USD.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters import registry
from gpuledger.adapters.aws import capacity_blocks as aws_capacity_blocks
from gpuledger.adapters.base import MissingCredentialsError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows import cadence
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, load_outcome, open_writer
from tests.builders import scraped, load_day, offer, replayed_warehouse
from tests.conftest import replay_context

UNIT = "aws_capacity_blocks"


def rows(db: Path, query: str) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def aws_state(db: Path) -> dict[str, list[tuple]]:
    """Everything of AWS's a refresh could change, byte for byte."""
    return {q: rows(db, q) for q in (
        "select * from offers where provider = 'aws' order by all",
        "select * from offer_history where provider = 'aws' order by all",
        "select run_id, state, rows_loaded from scrape_runs where provider = 'aws' order by all",
        "select * from providers where provider = 'aws'",
    )}


@pytest.fixture(scope="module")
def unit_fetch() -> tuple[Batch, list]:
    """The unit's batch, fetched once by its real client from its recording, and the requests it made."""
    with ReplayServer(BUNDLED_RECORDINGS, providers=[UNIT]) as server:
        return aws_capacity_blocks.fetch(replay_context(server, UNIT)), list(server.requests)


@pytest.fixture
def unit_batch(unit_fetch) -> Batch:
    return unit_fetch[0]


def test_the_unit_asks_only_for_instance_types_and_capacity_blocks(unit_fetch) -> None:
    batch, requests = unit_fetch
    actions = sorted({r.params.get("Action") for _, r in requests})
    assert actions == ["DescribeCapacityBlockOfferings", "DescribeInstanceTypes"]
    assert {h for h, _ in requests} == {"ec2.us-east-1.amazonaws.com"}
    assert sum(r.params.get("Action") == "DescribeCapacityBlockOfferings" for _, r in requests) == 24
    assert batch.offers == [] and batch.quarantined == [] and len(batch.capacity_blocks) == 171
    assert {b.provider for b in batch.capacity_blocks} == {"aws"}
    (block,) = [b for b in batch.capacity_blocks if b.offering_id == "cb-098d575e639c27b67"]
    assert (block.instance_type, block.zone, block.duration_hours, block.upfront_fee) == \
        ("p5.48xlarge", "us-east-1a", 72, 2152.23)
    assert block.start_at == datetime(2026, 11, 30, 11, 30, tzinfo=timezone.utc)


def test_a_blocks_only_run_leaves_aws_offers_alone_and_an_aws_run_keeps_the_blocks(unit_batch, tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "aws", [offer("p5.48xlarge", 55.04), offer("p4d.24xlarge", 21.96, gpu="A100-SXM4-80")], day=0)
    finally:
        close_writer(con)
    before = aws_state(db)
    assert len(before["select * from offers where provider = 'aws' order by all"]) == 2

    (report,) = replayed_warehouse(db, [UNIT], refresh_id="refresh-blocks")
    assert report.ok and report.new == report.changed == report.closed == 0
    assert aws_state(db) == before  # AWS's offers, history, runs and providers row untouched
    assert rows(db, "select provider, count(*), count(distinct run_id) from capacity_block_offerings "
                    "group by all") == [("aws", 171, 1)]
    assert rows(db, f"select state, rows_loaded from scrape_runs where provider = '{UNIT}'") == [("ok", 0)]
    assert rows(db, f"select count(*) from providers where provider = '{UNIT}'") == [(0,)]
    assert rows(db, f"select count(*) from offers where provider = '{UNIT}'") == [(0,)]

    # A later AWS run (its price changed) replaces AWS's offers and deletes no capacity block
    con = open_writer(db)
    try:
        load_day(con, "aws", [offer("p5.48xlarge", 54.0), offer("p4d.24xlarge", 21.96, gpu="A100-SXM4-80")], day=2)
    finally:
        close_writer(con)
    assert rows(db, "select price_per_hour from offers where instance_type = 'p5.48xlarge'") == [(54.0,)]
    assert rows(db, "select count(*) from capacity_block_offerings") == [(171,)]

    # The next blocks-only run adds a newer set; the older stays as history
    con = open_writer(db)
    try:
        now = datetime(2026, 12, 1, 7, 30, tzinfo=timezone.utc)
        outcome = scraped(UNIT, "replay", now, now, batch=unit_batch, side_tables_only=True)
        assert load_outcome(con, outcome, "refresh-blocks-2", AnomalyPolicy(), now=now).ok
    finally:
        close_writer(con)
    assert rows(db, "select count(*), count(distinct run_id) from capacity_block_offerings") == [(342, 2)]
    assert rows(db, "select price_per_hour from offers where instance_type = 'p5.48xlarge'") == [(54.0,)]


def test_the_capacity_deployment_runs_the_unit() -> None:
    assert UNIT in cadence.providers_in("capacity")
    assert UNIT not in cadence.providers_in("nightly") and "aws" in cadence.providers_in("nightly")
    assert UNIT in registry.UNITS and UNIT not in registry.SOURCES
    assert registry.spec(UNIT).side_tables_only and not registry.spec("aws").side_tables_only


def test_without_credentials_the_unit_fails_clearly(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from gpuledger.adapters.base import SourceContext

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(MissingCredentialsError, match="no credentials"):
        aws_capacity_blocks.fetch(SourceContext(provider=UNIT, mode="live"))


def test_a_failing_core_answer_fails_the_unit_in_one_line_under_its_own_name() -> None:
    from gpuledger.flows.fetch import describe_failure

    error = (b"<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message>"
             b"</Error></Errors><RequestID>r</RequestID></Response>")
    with ReplayServer(BUNDLED_RECORDINGS, providers=[UNIT], hook=lambda host, req, ex: (
            503, {"Content-Type": "text/xml;charset=UTF-8"}, error)
            if req.params.get("Action") == "DescribeInstanceTypes" else None) as server:
        with pytest.raises(Exception) as failed:
            aws_capacity_blocks.fetch(replay_context(server, UNIT))
    assert describe_failure(UNIT, failed.value) == (
        "aws_capacity_blocks: EC2 API in us-east-1 (DescribeInstanceTypes) failed: HTTP 503: An error occurred "
        "(RequestLimitExceeded) when calling the DescribeInstanceTypes operation (reached max retries: 1): Request "
        "limit exceeded.")
