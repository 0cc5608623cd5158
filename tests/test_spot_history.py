"""AWS Spot price history (DescribeSpotPriceHistory into spot_price_history) and the time-weighted
statistics views over it and offer_history.

The replayed parts run the real boto3 client against the bundled recording, narrowed to the two
regions whose recording carries 30 days of history (us-east-1, us-west-2: see
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

from gpuledger.adapters import aws
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.pipeline import fetch_source, load_all, outcome_from, plans_for
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.schema import migrate
from gpuledger.warehouse.spot import SpotPricePoint, history_since, load_spot_history, read_since
from gpuledger.warehouse.store import AnomalyPolicy, utcnow
from tests.builders import T0, load_day, offer
from tests.conftest import replay_context

REGIONS = "us-east-1,us-west-2"
UTC = timezone.utc


def replay_refresh(db: Path, server: ReplayServer, refresh_id: str, regions: str = REGIONS) -> None:
    """One AWS refresh of `regions`, as the flow runs it (since read from the warehouse)."""
    settings = {**server.settings["aws"], "aws_regions": regions}
    (plan,) = plans_for(["aws"], "replay", server.endpoints(), {"aws": settings}, since=read_since(db),
                        http_attempts=2, retry_wait_max_s=0.05)
    started = utcnow()
    (report,) = load_all(db, [outcome_from(fetch_source(plan), plan, None, started)], refresh_id, AnomalyPolicy())
    assert report.ok, report.error


def spot_start_times(server: ReplayServer, since: int) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for host, req in server.requests[since:]:
        if req.params.get("Action") == "DescribeSpotPriceHistory":
            out.setdefault(host.split(".")[1], set()).add(req.params["StartTime"])
    return out


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory):
    """A refresh of the two history regions (a backfill), then one of us-east-1 (incremental)."""
    db = tmp_path_factory.mktemp("spot") / "gpuledger.duckdb"
    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        before = utcnow()
        replay_refresh(db, server, "refresh-1")
        first = spot_start_times(server, 0)
        n = len(server.requests)
        since = read_since(db)
        replay_refresh(db, server, "refresh-2", "us-east-1")
        second = spot_start_times(server, n)
    return db, before, first, since, second


def test_first_run_backfills_30_days_then_resumes_from_the_newest_stored(history_db) -> None:
    db, before, first, since, second = history_db
    assert set(first) == {"us-east-1", "us-west-2"}
    for region, (start,) in first.items():
        asked = datetime.fromisoformat(start.replace("Z", "+00:00"))
        assert before - timedelta(days=30, minutes=1) <= asked <= utcnow() - timedelta(days=30), region
    # the newest observations of the recording, read off its bodies: g5.xlarge in us-east-1c at
    # 02:58:05 and g5.4xlarge in us-west-2b at 02:58:21 on 2026-11-30
    assert since == {"aws": {"spot_price_history:us-east-1": "2026-11-30T02:58:05+00:00",
                             "spot_price_history:us-west-2": "2026-11-30T02:58:21+00:00"}}
    assert second == {"us-east-1": {"2026-11-30T02:58:05Z"}}


def test_every_observation_at_its_own_timestamp_over_30_days(history_db) -> None:
    db = history_db[0]
    con = duckdb.connect(str(db), read_only=True)
    try:
        # us-east-1 answers 765 observations, us-west-2 395 (the generator's page statistics)
        assert con.execute("select region, count(*) from spot_price_history group by 1 order by 1").fetchall() == \
            [("us-east-1", 765), ("us-west-2", 395)]
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
        assert "spot price history: 1160 of 1160 observations stored" in notes["refresh-1"]
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
    observations = aws.parse_spot_observations(pages, skipped)
    assert skipped == {aws.SKIP_SPOT_OTHER_PRODUCT: 1, aws.SKIP_SPOT_REPEATED: 1}
    batch = Batch("aws")
    aws.build_region(batch, aws.RegionPayload(region="us-east-1", prices=[], spot_history=observations))
    assert [(p.zone, p.observed_at, p.spot_price_per_hour) for p in batch.spot_prices] == \
        [("us-east-1a", stamp, 27.5)]
    assert [(q.kind, q.reason) for q in batch.quarantined] == [("spot_price", "SpotPrice 'n/a' is not a number")]
    notes = aws.refresh_notes([aws.RegionPayload(region="us-east-1", prices=[], spot_skipped=skipped)])
    assert "spot price observations skipped: 1 observations of another product description; " \
           "1 observations the answer listed twice (first kept)" in notes


def test_an_incremental_fetch_starts_at_the_mark_a_first_run_30_days_back() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    assert aws.spot_history_start({}, "us-east-1", now) == datetime(2026, 11, 1, 12, tzinfo=UTC)
    marks = {"spot_price_history:us-east-1": "2026-11-30T02:58:05+00:00"}
    assert aws.spot_history_start(marks, "us-east-1", now) == datetime(2026, 11, 30, 2, 58, 5, tzinfo=UTC)
    assert aws.spot_history_start(marks, "us-west-2", now) == datetime(2026, 11, 1, 12, tzinfo=UTC)


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
    assert load_spot_history(con, points, "run-hand", T0) == (3, Counter())
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


def test_the_stored_history_is_never_counted_twice(hand_made) -> None:
    again = [point("us-east-1a", datetime(2026, 11, 26, tzinfo=UTC), 20.0),
             point("us-east-1a", datetime(2026, 11, 29, 23, tzinfo=UTC), 41.0),
             point("us-east-1a", datetime(2026, 11, 30, 6, tzinfo=UTC), 25.0)]
    stored, skipped = load_spot_history(hand_made, again, "run-2", T0)
    assert stored == 1 and skipped == {"already in the warehouse": 1,
                                       "already in the warehouse with another price (the stored one kept)": 1}
    assert history_since(hand_made) == {"aws": {"spot_price_history:us-east-1": "2026-11-30T06:00:00+00:00"}}
    assert hand_made.execute("select count(*) from spot_price_stats where provider = 'aws' and zone = 'us-east-1a' "
                             "and source = 'offer_history'").fetchall() == [(0,)]
