"""AWS Spot price history (DescribeSpotPriceHistory into spot_price_history) and the time-weighted
statistics views over it and offer_history.

The replayed parts run the real boto3 client against the bundled recording, narrowed to
us-east-1, whose recording carries 30 days of history and the Capacity Blocks (see
adapters/recordings/aws/README.md). The statistics are checked on a tiny hand-made history whose
figures are worked out by hand in each test.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.aws import ec2, offers
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.fetch import SourcePlan, fetch_source
from gpuledger.warehouse.pending import records_table
from tests.builders import load
from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.schema import migrate
from gpuledger.warehouse.spot import SpotPricePoint, history_since, load_spot_history, read_since
from gpuledger.warehouse.store import AnomalyPolicy, utcnow
from tests.builders import T0, load_day, offer

REGIONS = "us-east-1"
UTC = timezone.utc


def replay_refresh(db: Path, server: ReplayServer, refresh_id: str, regions: str = REGIONS) -> None:
    """One AWS refresh of `regions`, as the flow runs it (since read from the warehouse)."""
    settings = {**server.settings["aws"], "aws_regions": regions}
    plan = SourcePlan("aws", "replay", server.endpoints(), settings, read_since(db).get("aws", {}),
                      http_attempts=2, retry_wait_max_s=0.05)
    (report,) = load(db, [fetch_source(plan)], refresh_id)
    assert report.ok, report.error


def spot_start_times(server: ReplayServer, since: int) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for host, req in server.requests[since:]:
        if req.params.get("Action") == "DescribeSpotPriceHistory":
            out.setdefault(host.split(".")[1], set()).add(req.params["StartTime"])
    return out


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory):
    """Two refreshes of us-east-1: the first backfills, the second is incremental."""
    db = tmp_path_factory.mktemp("spot") / "gpuledger.duckdb"
    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        before = utcnow()
        replay_refresh(db, server, "refresh-1")
        first = spot_start_times(server, 0)
        n = len(server.requests)
        since = read_since(db)
        replay_refresh(db, server, "refresh-2")
        second = spot_start_times(server, n)
    return db, before, first, since, second


def test_first_run_backfills_30_days_then_resumes_from_the_newest_stored(history_db) -> None:
    db, before, first, since, second = history_db
    assert set(first) == {"us-east-1"}
    for region, (start,) in first.items():
        asked = datetime.fromisoformat(start.replace("Z", "+00:00"))
        assert before - timedelta(days=30, minutes=1) <= asked <= utcnow() - timedelta(days=30), region
    # the newest observation of the recording, read off its bodies: g5.xlarge in us-east-1c at
    # 02:58:05 on 2026-11-30
    assert since == {"aws": {"spot_price_history:us-east-1": "2026-11-30T02:58:05+00:00"}}
    assert second == {"us-east-1": {"2026-11-30T02:58:05Z"}}


def test_every_observation_at_its_own_timestamp_over_30_days(history_db) -> None:
    db = history_db[0]
    con = duckdb.connect(str(db), read_only=True)
    try:
        # us-east-1 answers 765 observations (the generator's page statistics)
        assert con.execute("select region, count(*) from spot_price_history group by 1 order by 1").fetchall() == \
            [("us-east-1", 765)]
        rows = con.execute(
            "select zone, count(*), min(observed_at), max(observed_at), count(distinct spot_price_per_hour) "
            "from spot_price_history where region = 'us-east-1' and instance_type = 'p5.48xlarge' "
            "group by 1 order by 1").fetchall()
        assert [r[0] for r in rows] == [f"us-east-1{c}" for c in "abcdef"]  # p5 is in all six AZs
        for zone, n, oldest, newest, prices in rows:
            assert oldest <= datetime(2026, 10, 31, 3, tzinfo=UTC) and newest >= datetime(2026, 11, 29, tzinfo=UTC)
            assert n >= 20 and prices >= 15, zone
        # the newest price of each series is the spot offer's price
        assert con.execute("""
            select count(*), count(*) filter (where o.price_per_hour = h.spot_price_per_hour)
            from offers o join (select region, zone, instance_type, arg_max(spot_price_per_hour, observed_at)
                                  as spot_price_per_hour from spot_price_history group by all) h
              using (region, zone, instance_type)
            where o.purchase_option = 'spot'""").fetchall() == [(con.execute(
                "select count(*) from offers where purchase_option = 'spot'").fetchall()[0][0],) * 2]
        # the second (incremental) run was answered the same history: nothing stored twice, said so
        notes = dict(con.execute("select refresh_id, notes from scrape_runs").fetchall())
        assert "spot price history: 765 of 765 observations stored" in notes["refresh-1"]
        assert "spot price history: 0 of 765 observations stored (765 already in the warehouse)" in \
            notes["refresh-2"]
    finally:
        con.close()


def test_spot_observations_not_kept_are_counted_or_quarantined() -> None:
    stamp = datetime(2026, 11, 29, 12, tzinfo=UTC)
    row = {"InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX",
           "SpotPrice": "27.500000", "Timestamp": stamp}
    pages = [{"SpotPriceHistory": [row, {**row, "ProductDescription": "Windows"}]},
             {"SpotPriceHistory": [row, {**row, "SpotPrice": "n/a", "Timestamp": stamp + timedelta(hours=1)}]}]
    skipped: Counter[str] = Counter()
    observations = ec2.parse_spot_observations(pages, skipped)
    assert skipped == {ec2.SKIP_SPOT_OTHER_PRODUCT: 1, ec2.SKIP_SPOT_REPEATED: 1}
    batch = Batch("aws")
    offers.build_region(batch, offers.RegionPayload(region="us-east-1", prices=[], spot_history=observations))
    assert [(p.zone, p.observed_at, p.spot_price_per_hour) for p in batch.spot_prices] == \
        [("us-east-1a", stamp, 27.5)]
    assert [(q.kind, q.reason) for q in batch.quarantined] == [("spot_price", "SpotPrice 'n/a' is not a number")]
    notes = offers.refresh_notes([offers.RegionPayload(region="us-east-1", prices=[], spot_skipped=skipped)])
    assert "spot price observations skipped: 1 observations of another product description; " \
           "1 observations the answer listed twice (first kept)" in notes


def test_an_incremental_fetch_starts_at_the_mark_a_first_run_30_days_back() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert ec2.spot_history_start({}, "us-east-1", now) == datetime(2026, 11, 1, 12, tzinfo=UTC)
    marks = {"spot_price_history:us-east-1": "2026-11-30T02:58:05+00:00"}
    assert ec2.spot_history_start(marks, "us-east-1", now) == datetime(2026, 11, 30, 2, 58, 5, tzinfo=UTC)
    assert ec2.spot_history_start(marks, "us-west-2", now) == datetime(2026, 11, 1, 12, tzinfo=UTC)


# -- the time-weighted statistics on a hand-made history --------------------------------------------

def point(zone: str, when: datetime, price: float) -> SpotPricePoint:
    return SpotPricePoint(provider="aws", region="us-east-1", zone=zone, instance_type="p5.48xlarge",
                          product_description="Linux/UNIX", observed_at=when, spot_price_per_hour=price,
                          source_currency="USD")


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    """AWS us-east-1a p5.48xlarge: 10.00 from 11-20, 20.00 from 11-26, 40.00 from 11-29 23:00
    (on-demand 30.00). RunPod interruptible "x" (no on-demand): 3.00 from T0 (11-01 03:00), 4.00
    for one hour from T0 + 6 days, then 3.00 again."""
    con = duckdb.connect(str(tmp_path_factory.mktemp("hand") / "w.duckdb"))
    migrate(con)
    load_day(con, "aws", [offer("p5.48xlarge", 30.0),
                          # AWS's own history replaces offer_history for this AZ: this version must not count
                          offer("p5.48xlarge", 99.0, option="spot", zone="us-east-1a")], 0)
    points = [point("us-east-1a", datetime(2026, 11, 20, tzinfo=UTC), 10.0),
              point("us-east-1a", datetime(2026, 11, 26, tzinfo=UTC), 20.0),
              point("us-east-1a", datetime(2026, 11, 29, 23, tzinfo=UTC), 40.0)]
    assert load_spot_history(con, records_table("spot_prices", points), "run-hand", T0) == (3, Counter())
    rp = [offer("x", 3.0, gpu="L4", count=1, region="US", option="interruptible")]
    load_day(con, "runpod", rp, 0)
    load_day(con, "runpod", [{**rp[0], "price_per_hour": 4.0, "source_price_per_hour": 4.0}], 6)
    load_day(con, "runpod", rp, 6 + 1 / 24)
    return con


def stats(con: duckdb.DuckDBPyConnection, provider: str, as_of: datetime, days: int, **kw: float) -> dict:
    args = "".join(f", {k} := {v}" for k, v in kw.items())
    rel = con.execute(f"select * from spot_price_stats_at(?::timestamptz{args}) "
                      f"where provider = ? and window_days = ?", [as_of, provider, days])
    (row,) = rel.fetchall()
    return dict(zip([d[0] for d in rel.description], row))


def test_aws_history_is_weighted_by_the_time_each_price_held(hand_made) -> None:
    s = stats(hand_made, "aws", datetime(2026, 11, 30, tzinfo=UTC), 7, above_pct=60)
    # window 11-23 00:00 .. 11-30 00:00 = 168 h: 10.00 for 72 h (11-23 .. 11-26), 20.00 for 95 h
    # (11-26 .. 11-29 23:00), 40.00 for 1 h
    assert (s["source"], s["zone"], s["price_periods"], s["hours_covered"]) == \
        ("spot_price_history", "us-east-1a", 3, 168.0)
    assert (s["min_price"], s["max_price"]) == (10.0, 40.0)
    # at or below 10.00: 72 h < 84 h (half) -> p50 20.00; at or below 20.00: 167 h >= 159.6 h -> p95 20.00
    assert (s["p50_price"], s["p95_price"]) == (20.0, 20.0)
    mean = (10 * 72 + 20 * 95 + 40 * 1) / 168  # 15.833; an unweighted mean of the three would be 23.33
    assert s["mean_price"] == pytest.approx(mean)
    sd = math.sqrt((72 * (10 - mean) ** 2 + 95 * (20 - mean) ** 2 + 1 * (40 - mean) ** 2) / 168)
    assert s["volatility_cv"] == pytest.approx(sd / mean) and s["volatility_cv"] == pytest.approx(0.3335, abs=1e-4)
    # on-demand 30.00: above 15.00 (50 %) 96 h, above 22.50 (75 %) and 30.00 (100 %) 1 h, above 18.00 (60 %) 96 h
    assert s["on_demand_price_per_hour"] == 30.0
    assert s["share_above_50_pct_on_demand"] == pytest.approx(96 / 168)
    assert s["share_above_75_pct_on_demand"] == pytest.approx(1 / 168)
    assert s["share_above_100_pct_on_demand"] == pytest.approx(1 / 168)
    assert (s["above_pct"], s["share_above_pct_on_demand"]) == (60.0, pytest.approx(96 / 168))
    # 30 days (10-31 .. 11-30): the history starts 11-20, so 240 h are covered, 10.00 for 144 of them
    s30 = stats(hand_made, "aws", datetime(2026, 11, 30, tzinfo=UTC), 30)
    assert (s30["hours_covered"], s30["p50_price"]) == (240.0, 10.0)
    assert s30["mean_price"] == pytest.approx((10 * 144 + 20 * 95 + 40) / 240)


def test_offer_history_intervals_for_providers_without_their_own(hand_made) -> None:
    as_of = T0 + timedelta(days=7)
    s = stats(hand_made, "runpod", as_of, 7)
    # 3.00 for 144 h, 4.00 for 1 h, 3.00 for 23 h: 168 h
    assert (s["source"], s["purchase_option"], s["price_periods"], s["hours_covered"]) == \
        ("offer_history", "interruptible", 3, 168.0)
    assert (s["min_price"], s["p50_price"], s["p95_price"], s["max_price"]) == (3.0, 3.0, 3.0, 4.0)
    assert s["mean_price"] == pytest.approx((3 * 167 + 4) / 168)  # 3.006, not the versions' mean 3.33
    # no on-demand offer to compare with: the shares are unknown, not 0
    assert s["on_demand_price_per_hour"] is None and s["share_above_50_pct_on_demand"] is None
    # ending with the 4.00 hour: 1 h of 145 h is under 5 %, so even p95 is 3.00 while max is 4.00
    s = stats(hand_made, "runpod", T0 + timedelta(days=6, hours=1), 7)
    assert (s["hours_covered"], s["p95_price"], s["max_price"]) == (145.0, 3.0, 4.0)
    # nothing from before the first version
    assert hand_made.execute("select count(*) from spot_price_stats_at(?::timestamptz) where provider = 'runpod'",
                             [T0 - timedelta(hours=1)]).fetchall() == [(0,)]


def test_a_version_that_only_restates_its_price_is_no_new_price_period(tmp_path: Path) -> None:
    """Vast.ai interruptible "y": 2.00 available from T0, 2.00 sold out from T0 + 1 day (a new version of the
    offer, the same price), 2.50 from T0 + 2 days: two prices held, 48 h and 24 h by T0 + 3 days."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    migrate(con)
    y = offer("y", 2.0, gpu="L4", count=1, region="US", option="interruptible", available=True)
    load_day(con, "vastai", [y], 0)
    load_day(con, "vastai", [dict(y, available=False)], 1)
    load_day(con, "vastai", [dict(y, available=False, price_per_hour=2.5, source_price_per_hour=2.5)], 2)
    assert con.execute("select count(*) from offer_history where provider = 'vastai'").fetchall() == [(3,)]
    s = stats(con, "vastai", T0 + timedelta(days=3), 7)
    assert (s["price_periods"], s["hours_covered"], s["min_price"], s["max_price"]) == (2, 72.0, 2.0, 2.5)
    assert s["mean_price"] == pytest.approx((2.0 * 48 + 2.5 * 24) / 72)
    assert con.execute("select price_per_hour, valid_from, valid_to from spot_price_intervals "
                       "where provider = 'vastai' order by valid_from").fetchall() == [
        (2.0, T0, T0 + timedelta(days=2)), (2.5, T0 + timedelta(days=2), None)]


def test_the_stored_history_is_never_counted_twice(hand_made) -> None:
    again = [point("us-east-1a", datetime(2026, 11, 26, tzinfo=UTC), 20.0),
             point("us-east-1a", datetime(2026, 11, 29, 23, tzinfo=UTC), 41.0),
             point("us-east-1a", datetime(2026, 11, 30, 6, tzinfo=UTC), 25.0)]
    stored, skipped = load_spot_history(hand_made, records_table("spot_prices", again), "run-2", T0)
    assert stored == 1 and skipped == {"already in the warehouse": 1,
                                       "already in the warehouse with another price (the stored one kept)": 1}
    assert history_since(hand_made) == {"aws": {"spot_price_history:us-east-1": "2026-11-30T06:00:00+00:00"}}
    assert hand_made.execute("select count(*) from spot_price_stats where provider = 'aws' and zone = 'us-east-1a' "
                             "and source = 'offer_history'").fetchall() == [(0,)]


# -- Capacity Blocks and the docs/queries.md sections that need this module's warehouse -----------

def doc_query(heading: str) -> str:
    from tests.test_queries import blocks

    (query,) = [q for h, q in blocks("sql") if h == heading]
    return query


def recorded_spot_series(region: str, itype: str) -> dict[str, list[tuple[datetime, float]]]:
    """zone -> [(timestamp, price)] read straight from the recorded XML bodies, not via the adapter."""
    import gzip
    import xml.etree.ElementTree as ET

    ns = {"e": "http://ec2.amazonaws.com/doc/2016-11-15/"}
    out: dict[str, list[tuple[datetime, float]]] = {}
    for path in sorted((BUNDLED_RECORDINGS / "aws" / "ec2" / region).glob("DescribeSpotPriceHistory.*")):
        data = path.read_bytes()
        root = ET.fromstring(gzip.decompress(data) if path.suffix == ".gz" else data)
        for item in root.iterfind("e:spotPriceHistorySet/e:item", ns):
            if item.findtext("e:instanceType", namespaces=ns) == itype:
                stamp = datetime.fromisoformat(item.findtext("e:timestamp", namespaces=ns).replace("Z", "+00:00"))
                out.setdefault(item.findtext("e:availabilityZone", namespaces=ns), []).append(
                    (stamp, float(item.findtext("e:spotPrice", namespaces=ns))))
    return out


def test_docs_query_p95_spot_price_per_az_over_30_days(history_db) -> None:
    db = history_db[0]
    con = duckdb.connect(str(db), read_only=True)  # as a user would
    try:
        rel = con.execute(doc_query("p95 spot price of p5.48xlarge in us-east-1 over 30 days, per AZ"))
        cols = [d[0] for d in rel.description]
        rows = [dict(zip(cols, r)) for r in rel.fetchall()]
    finally:
        con.close()
    # the same p95 worked out from the recorded bodies: each price weighted by the seconds it held
    # between 2026-10-31 03:00 and 2026-11-30 03:00
    end = datetime(2026, 11, 30, 3, tzinfo=UTC)
    start = end - timedelta(days=30)
    expected = {}
    for zone, series in recorded_spot_series("us-east-1", "p5.48xlarge").items():
        series.sort()
        held = []
        for (t, price), nxt in zip(series, [s[0] for s in series[1:]] + [end]):
            seconds = (min(nxt, end) - max(t, start)).total_seconds()
            if seconds > 0:
                held.append((price, seconds))
        total, run = sum(s for _, s in held), 0.0
        for price, seconds in sorted(held):
            run += seconds
            if run >= 0.95 * total:
                expected[zone] = round(price, 4)
                break
    assert [r["zone"] for r in rows] == [f"us-east-1{c}" for c in "abcdef"]
    assert {r["zone"]: r["p95_usd"] for r in rows} == expected
    assert all(r["hours_covered"] == 720 and r["source"] == "spot_price_history" for r in rows)
    assert all(r["p50_usd"] <= r["p95_usd"] <= r["max_usd"] for r in rows)


def test_docs_query_capacity_block_of_8_h100_for_3_days_next_week(history_db) -> None:
    db = history_db[0]
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(doc_query("Capacity Block of 8 x H100 for 3 days starting next week")).fetchall()
        # every scrape appends its offerings: two refreshes, and the query read the newest only
        runs = con.execute("select count(distinct run_id) from capacity_block_offerings").fetchall()
    finally:
        con.close()
    assert runs == [(2,)]
    # read off ec2/us-east-1/DescribeCapacityBlockOfferings.p5.48xlarge.72h.xml: the offerings that
    # start between Monday 2026-12-07 and Sunday 2026-12-13, cheapest first
    got = [(r[0], r[1], r[2].astimezone(UTC), r[3].astimezone(UTC), r[4], r[5], r[6], r[7]) for r in rows]
    dec = lambda d, h=11, m=30: datetime(2026, 12, d, h, m, tzinfo=UTC)  # noqa: E731
    assert got == [
        ("p5.48xlarge", "us-east-1a", dec(8), dec(11), 1, 2211.29, round(2211.29 / 72, 2), round(2211.29 / 72 / 8, 3)),
        ("p5.48xlarge", "us-east-1e", dec(8), dec(11), 1, 2341.96, round(2341.96 / 72, 2), round(2341.96 / 72 / 8, 3)),
        ("p5.48xlarge", "us-east-1c", dec(7), dec(10), 1, 2371.09, round(2371.09 / 72, 2), round(2371.09 / 72 / 8, 3)),
    ]


def test_capacity_blocks_are_asked_per_type_and_duration_where_the_setting_says(history_db) -> None:
    assert ec2.capacity_block_regions("auto", ["us-east-1", "us-west-2"]) == {"us-east-1", "us-west-2"}
    assert ec2.capacity_block_regions("off", ["us-east-1"]) == set()
    assert ec2.capacity_block_regions("us-east-1, eu-west-1", ["us-east-1", "us-west-2"]) == {"us-east-1"}
    db = history_db[0]
    con = duckdb.connect(str(db), read_only=True)
    try:
        newest = con.execute(
            "select instance_type, duration_hours, count(*) from capacity_block_offerings "
            "where run_id = (select arg_max(run_id, observed_at) from capacity_block_offerings) "
            "group by all order by all").fetchall()
    finally:
        con.close()
    # the recording's us-east-1 capacity-block types (SupportedUsageClasses), 4 durations each;
    # counts from the generator's statistics
    assert [(t, h) for t, h, _ in newest] == [(t, h) for t in ("p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
                                                               "p5.4xlarge", "p5en.48xlarge", "p6-b200.48xlarge")
                                              for h in (24, 72, 168, 336)]
    assert sum(n for *_, n in newest) == 171


def test_a_capacity_block_breaking_the_contract_is_quarantined() -> None:
    specs = ec2.InstanceSpecs("p5.48xlarge", "H100", "NVIDIA", 8, 81920, 655360, 192, 2048, 7600, 3200, True,
                              capacity_block=True)
    start = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
    good = {"CapacityBlockOfferingId": "cb-1", "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
            "InstanceCount": 1, "StartDate": start, "EndDate": start + timedelta(hours=72),
            "CapacityBlockDurationHours": 72, "UpfrontFee": "2211.29", "CurrencyCode": "USD", "Tenancy": "default"}
    payload = offers.RegionPayload(region="us-east-1", prices=[], specs={"p5.48xlarge": specs}, capacity_blocks=[
        good, {**good, "CapacityBlockOfferingId": "cb-2", "CurrencyCode": "EUR"},
        {**good, "CapacityBlockOfferingId": "cb-3", "UpfrontFee": "n/a"},
        {**good, "CapacityBlockOfferingId": "cb-4", "InstanceType": "p9.48xlarge"}])
    batch = Batch("aws")
    offers.build_region(batch, payload)
    (block,) = batch.capacity_blocks
    assert (block.offering_id, block.gpu_model, block.usd_per_hour, block.usd_per_gpu_hour) == \
        ("cb-1", "H100-SXM", 2211.29 / 72, 2211.29 / 72 / 8)
    reasons = {q.source_ref.rsplit("/", 1)[1]: q.reason for q in batch.quarantined}
    assert set(reasons) == {"cb-2", "cb-3", "cb-4"}
    assert "fee in EUR, not USD" in reasons["cb-2"]
    assert "could not convert string to float: 'n/a'" in reasons["cb-3"]
    assert reasons["cb-4"] == "capacity block of a type EC2 did not describe"


def test_the_integrity_check_finds_an_observation_stored_twice(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    migrate(con)
    name = "spot_price_history: no observation stored twice"
    p = point("us-east-1a", datetime(2026, 11, 20, tzinfo=UTC), 10.0)
    load_spot_history(con, records_table("spot_prices", [p]), "run-1", T0)
    assert {r.name: r.ok for r in run_checks(con)}[name]
    con.execute("insert into spot_price_history select * from spot_price_history")  # bypassing the loader
    (check,) = [r for r in run_checks(con) if r.name == name]
    assert not check.ok and check.detail.startswith(
        "1 offending rows, the first: provider=aws, region=us-east-1, zone=us-east-1a, instance_type=p5.48xlarge, "
        "product_description=Linux/UNIX, observed_at=2026-11-20 00:00:00"), check.detail


def test_a_region_refusing_capacity_blocks_degrades_them_alone() -> None:
    from gpuledger.adapters import aws
    from tests.conftest import replay_context

    specs = {"p5.48xlarge": ec2.InstanceSpecs("p5.48xlarge", "H100", "NVIDIA", 8, 81920, 655360, 192, 2048, 7600,
                                              3200, True, capacity_block=True),
             "g5.xlarge": ec2.InstanceSpecs("g5.xlarge", "A10G", "NVIDIA", 1, 22888, 22888, 4, 16, 250, 10, False)}
    refused = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>Unsupported</Code>'
               b'<Message>Capacity Blocks are not supported in this Region.</Message></Error></Errors>'
               b'<RequestID>5f1b0c4e-0000-4000-8000-000000000000</RequestID></Response>')

    def refuse(host, req, ex):
        if req.params.get("Action") == "DescribeCapacityBlockOfferings":
            return 400, {"Content-Type": "text/xml;charset=UTF-8"}, refused
        return None

    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        ctx = replay_context(server, "aws")
        client = ec2.ec2_client(ctx, "us-east-1")
        blocks = ec2.fetch_capacity_blocks(client, "us-east-1", specs)
        asked = [r.params for _, r in server.requests if r.params.get("Action") == "DescribeCapacityBlockOfferings"]
        server.hook = refuse
        assert aws.enrich(ctx, "capacity blocks", ec2.fetch_capacity_blocks, client, "us-east-1", specs,
                          default=[]) == []
    # only the type sold as capacity blocks, once per duration, one instance
    assert [(a["InstanceType"], a["InstanceCount"], a["CapacityDurationHours"]) for a in asked] == \
        [("p5.48xlarge", "1", str(h)) for h in (24, 72, 168, 336)]
    assert len(blocks) == 8 + 7 + 8 + 7  # the four p5.48xlarge answers of the recording
    assert ctx.degraded == {"capacity blocks": "aws: EC2 API in us-east-1 (DescribeCapacityBlockOfferings) failed: "
                            "HTTP 400: An error occurred (Unsupported) when calling the DescribeCapacityBlockOfferings "
                            "operation: Capacity Blocks are not supported in this Region."}
