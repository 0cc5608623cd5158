"""`gpuledger refresh --resume` loads what a direct load would: a kept outcome keeps its spot price
history, its capacity block offerings and, for the `aws_capacity_blocks` unit, that it loads side
tables only (warehouse/pending.py).

The unit's outcome is fetched by its real client from its bundled recording (171 offerings,
tests/test_capacity_block_unit.py); AWS's outcome is built from records by hand.
"""

from __future__ import annotations


from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.aws import capacity_blocks as aws_capacity_blocks
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.warehouse import pending
from gpuledger.warehouse.capacity_blocks import add_capacity_block
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.spot import add_spot_price
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, merge_pending, open_writer
from tests.builders import batch, load, load_day, offer, scraped
from tests.conftest import replay_context

UNIT = "aws_capacity_blocks"
AT = datetime(2026, 12, 1, 6, 0, tzinfo=timezone.utc)
# Every column but the run ids and the load times, which differ between two loads of the same rows.
TABLES = {
    "offers": "select * exclude (run_id, first_seen, last_seen) from offers order by all",
    "offer_history": "select * exclude (run_id, closed_by_run_id, valid_from, valid_to) from offer_history "
                     "order by all",
    "spot_price_history": "select * exclude (run_id, loaded_at) from spot_price_history order by all",
    "capacity_block_offerings": "select * exclude (run_id, observed_at) from capacity_block_offerings order by all",
    "providers": "select * exclude (updated_at) from providers order by all",
    "scrape_runs": "select provider, state, rows_parsed, rows_loaded, rows_quarantined, offers_new, offers_changed, "
                   "offers_closed, error from scrape_runs order by all",
}


@pytest.fixture(scope="module")
def unit_fetch() -> Batch:
    with ReplayServer(BUNDLED_RECORDINGS, providers=[UNIT]) as server:
        return aws_capacity_blocks.fetch(replay_context(server, UNIT))


def fetched(unit_fetch: Batch) -> list[ScrapeOutcome]:
    """A fresh copy of one refresh's outcomes (a load changes its batches' notes)."""
    aws = batch("aws", [offer("p5.48xlarge", 54.0), offer("p4d.24xlarge", 21.96, gpu="A100-SXM4-80")])
    assert add_spot_price(aws, "p5/us-east-1a", {}, region="us-east-1", zone="us-east-1a",
                          instance_type="p5.48xlarge", product_description="Linux/UNIX",
                          observed_at=datetime(2026, 12, 1, 5, 12, tzinfo=timezone.utc),
                          spot_price_per_hour=31.4683, source_currency="USD")
    assert add_capacity_block(aws, "cb-1", {}, region="us-east-1", zone="us-east-1a", instance_type="p5.48xlarge",
                              offering_id="cb-0123456789abcdef0", instance_count=1,
                              start_at=datetime(2026, 12, 3, 11, 30, tzinfo=timezone.utc),
                              end_at=datetime(2026, 12, 4, 11, 30, tzinfo=timezone.utc), duration_hours=24,
                              upfront_fee=717.41, source_currency="USD", gpu_model="H100-SXM", gpu_count=8)
    unit = unit_fetch
    return [scraped("aws", "replay", AT, AT, batch=aws),
            scraped(UNIT, "replay", AT, AT, batch=unit, side_tables_only=True)]


def warehouse_with_aws(db: Path) -> None:
    con = open_writer(db)
    try:
        load_day(con, "aws", [offer("p5.48xlarge", 55.04), offer("p4d.24xlarge", 21.96, gpu="A100-SXM4-80")], day=0)
    finally:
        close_writer(con)


def tables(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {name: con.execute(q).fetchall() for name, q in TABLES.items()}
    finally:
        con.close()


def test_a_resumed_load_equals_a_direct_one(unit_fetch: Batch, tmp_path: Path) -> None:
    direct, resumed = tmp_path / "direct.duckdb", tmp_path / "resumed.duckdb"
    warehouse_with_aws(direct)
    warehouse_with_aws(resumed)
    assert all(r.ok for r in load(direct, fetched(unit_fetch), "refresh-x"))

    for outcome in fetched(unit_fetch):
        pending.write(pending.pending_dir(resumed) / "refresh-x", outcome)
    reports = merge_pending(resumed, "refresh-resume", AnomalyPolicy())
    assert [(r.provider, r.state) for r in reports] == [("aws", "ok"), (UNIT, "ok")]
    got = tables(resumed)
    assert got == tables(direct)
    # What the comparison holds, read by hand: the new p5 price, the spot and block rows, and AWS's
    # two offers left open by the unit's run (it merges no offers).
    assert got["spot_price_history"] == [("aws", "us-east-1", "us-east-1a", "p5.48xlarge", "Linux/UNIX",
                                          datetime(2026, 12, 1, 5, 12, tzinfo=timezone.utc), 31.4683, "USD")]
    assert len(got["capacity_block_offerings"]) == 171 + 1
    assert sorted((r[0], r[3], r[19]) for r in got["offers"]) == \
        [("aws", "p4d.24xlarge", 21.96), ("aws", "p5.48xlarge", 54.0)]


def test_a_kept_unit_outcome_stays_side_tables_only(unit_fetch: Batch, tmp_path: Path) -> None:
    aws, unit = (pending.read(pending.write(tmp_path / "refresh-x", o)) for o in fetched(unit_fetch))
    assert not aws.side_tables_only and unit.side_tables_only and unit.provider == UNIT
    blocks = unit.tables["capacity_blocks"]
    assert set(blocks.column("provider").to_pylist()) == {"aws"} and blocks.num_rows == 171
    (spot,) = aws.tables["spot_prices"].to_pylist()
    assert (spot["instance_type"], spot["spot_price_per_hour"]) == ("p5.48xlarge", 31.4683)
    (block,) = aws.tables["capacity_blocks"].to_pylist()
    assert (block["offering_id"], block["upfront_fee"], block["duration_hours"]) == ("cb-0123456789abcdef0", 717.41, 24)
