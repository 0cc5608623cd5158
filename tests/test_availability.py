"""Availability over time (warehouse/availability.py): what each merge records, the view of the share
of observations with capacity, and where it is shown (show-gpus, the page, the recommender).

The replayed GCP warehouse carries the bundled recording's 15 earlier zones.list answers
(adapters/recordings/gcp/README.md: made up, one a day 2026-11-15..29 at 03:12:45 UTC, zones DOWN on
the days build_recording.py HISTORY_DOWN lists) and the replay's own answer.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.flows.report import offer_columns, report_rows
from gpuledger.warehouse.availability import add_observation, obtainable
from gpuledger.warehouse.pending import ScrapeOutcome
from gpuledger.warehouse.recommender.recommend import RecommendRequest, recommend
from gpuledger.warehouse.recommender.throughput import node_link
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, load_outcome, open_reader, open_writer
from tests.builders import T0, batch, load_day, offer, outcome, replayed_warehouse

UTC = timezone.utc
SIGNAL = dict(available=True, available_count=3, availability_level="high")


def history(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute("select instance_type, observed_at, available, available_count, availability_level "
                       "from availability_history order by all").fetchall()


def test_a_signal_is_stored_once_a_day_and_again_when_it_changes(tmp_path: Path) -> None:
    con = open_writer(tmp_path / "w.duckdb")
    try:
        # Two purchase options of one machine share its signal (one row); an offer without any signal
        # is counted in the notes, not stored.
        day0 = [offer("gpu_1x_h100", 2.99, count=1, **SIGNAL), offer("gpu_1x_h100", 1.2, count=1, option="spot",
                                                                        **SIGNAL),
                offer("gpu_8x_h100", 23.92)]
        report = load_day(con, "lambda", day0, 0)
        assert "availability history: 1 of 1 signals stored; 1 offers carry no availability signal" in report.notes
        two_hours_on = load_day(con, "lambda", day0, 2 / 24)
        assert ("availability history: 0 of 1 signals stored (1 already stored for their day); 1 offers carry no "
                "availability signal") in two_hours_on.notes
        fewer = [dict(o, available_count=1) if "available" in o else o for o in day0]
        load_day(con, "lambda", fewer, 0.5)  # the count changed the same day: stored
        load_day(con, "lambda", fewer, 1)  # unchanged, but a new UTC day: stored
        assert history(con) == [
            ("gpu_1x_h100", T0, True, 3, "high"),
            ("gpu_1x_h100", T0 + timedelta(days=0.5), True, 1, "high"),
            ("gpu_1x_h100", T0 + timedelta(days=1), True, 1, "high")]
        failed = load_day(con, "lambda", None, 2)  # a failed scrape records nothing
        assert failed.state == "failed" and len(history(con)) == 3
    finally:
        close_writer(con)


def test_a_failed_signal_enrichment_records_no_observation(tmp_path: Path) -> None:
    con = open_writer(tmp_path / "w.duckdb")
    try:
        scraped = outcome(batch("gcp", [offer("a2-highgpu-1g", 3.67, gpu="A100-SXM4-80", count=1, available=True)]),
                          degraded=[{"name": "zone status", "reason": "timed out", "options": [],
                                     "columns": ["available", "availability_level"]}])
        report = load_outcome(con, scraped, "refresh-1", AnomalyPolicy(), now=T0)
        assert report.ok and history(con) == []
        assert "availability history: the offers' signals not recorded (zone status failed)" in report.notes
    finally:
        close_writer(con)


def test_a_signal_enrichment_failed_in_one_region_records_the_other_regions(tmp_path: Path) -> None:
    """AWS's AZ offerings denied in us-west-2 alone (a degraded enrichment naming its region): the offers
    there carry their stored signal, those of us-east-1 a fresh one, which is recorded (none was)."""
    con = open_writer(tmp_path / "w.duckdb")
    try:
        east = offer("p5.48xlarge", 55.04, available=True, available_count=6, availability_level="offered in 6 AZs")
        west = offer("p5.48xlarge", 55.04, region="us-west-2", available=True, available_count=4,
                     availability_level="offered in 4 AZs")
        assert load_day(con, "aws", [east, west], 0).ok
        scraped = outcome(batch("aws", [dict(east, available_count=5, availability_level="offered in 5 AZs"),
                                        dict(west, available=None, available_count=None, availability_level=None)]),
                          when=T0 + timedelta(days=1),
                          degraded=[{"name": "az offerings", "reason": "UnauthorizedOperation", "options": [],
                                     "columns": ["available", "available_count", "availability_level"],
                                     "regions": ["us-west-2"]}])
        report = load_outcome(con, scraped, "refresh-1", AnomalyPolicy(), now=T0 + timedelta(days=1))
        assert report.ok, report.error
        assert con.execute("select region, observed_at, available, available_count from availability_history "
                           "order by all").fetchall() == [
            ("us-east-1", T0, True, 6), ("us-east-1", T0 + timedelta(days=1), True, 5), ("us-west-2", T0, True, 4)]
        assert "availability history: 1 of 1 signals stored" in report.notes
        assert ("availability history: the offers' signals in us-west-2 not recorded (az offerings failed there)"
                in report.notes)
        # the carried, stored signal is what offers holds in us-west-2
        assert con.execute("select region, available_count from offers order by 1").fetchall() == [
            ("us-east-1", 5), ("us-west-2", 4)]
    finally:
        close_writer(con)


def test_an_answer_proven_unchanged_observes_its_offers_signals_again(tmp_path: Path) -> None:
    """An HTTP 304 (Lambda, Shadeform, TensorDock send validators) confirms the offers as they are: what they
    said is what the provider says that night, so it is an observation of its day like any other."""
    con = open_writer(tmp_path / "w.duckdb")
    try:
        h100 = offer("gpu_1x_h100", 2.99, count=1, available=True, available_count=2)
        assert load_day(con, "lambda", [h100, offer("gpu_8x_h100", 23.92)], 0).ok
        night = T0 + timedelta(days=1)
        same = ScrapeOutcome("lambda", "replay", night, night, state="unchanged")
        report = load_outcome(con, same, "refresh-2", AnomalyPolicy(), now=night)
        assert report.ok, report.error
        assert history(con) == [("gpu_1x_h100", T0, True, 2, None), ("gpu_1x_h100", night, True, 2, None)]
        assert ("availability history: 1 of 1 signals stored; 1 offers carry no availability signal"
                in report.notes)
        again = load_outcome(con, ScrapeOutcome("lambda", "replay", night + timedelta(hours=2),
                                                night + timedelta(hours=2), state="unchanged"),
                             "refresh-3", AnomalyPolicy(), now=night + timedelta(hours=2))
        assert len(history(con)) == 2 and any("1 already stored for their day" in n for n in again.notes)
    finally:
        close_writer(con)


AS_OF = T0 + timedelta(days=30)


@pytest.fixture(scope="module")
def shares_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Daily earlier observations a source handed over (through the on-disk hand-off): Lambda's H100 in
    us-east-1 on days 1..29 after T0, without capacity on days 10, 25 and 27, and on day 28 a second
    signal that says nothing of capacity (a level only); Vast.ai's L4 counts 5 then 0."""
    db = tmp_path_factory.mktemp("shares") / "w.duckdb"
    con = open_writer(db)
    try:
        lam = batch("lambda", [offer("gpu_1x_h100", 2.99, count=1)])
        for day in range(1, 30):
            at = T0 + timedelta(days=day)
            assert add_observation(lam, f"d{day}", {}, region="us-east-1", instance_type="gpu_1x_h100",
                                   gpu_model="H100-SXM", observed_at=at, available=day not in (10, 25, 27))
        assert add_observation(lam, "d28-level", {}, region="us-east-1", instance_type="gpu_1x_h100",
                               gpu_model="H100-SXM", observed_at=T0 + timedelta(days=28, hours=1),
                               availability_level="unknown")
        assert not add_observation(lam, "bad", {}, region="us-east-1", instance_type="gpu_1x_h100",
                                   gpu_model="H100-SXM", observed_at=datetime(2026, 11, 2))  # no time zone
        assert [q.kind for q in lam.quarantined] == ["availability"]
        vast = batch("vastai", [offer("1x L4", 0.3, gpu="L4", count=1)])
        for day, count in ((28, 5), (29, 0)):
            assert add_observation(vast, f"d{day}", {}, region="us-east-1", instance_type="1x L4", gpu_model="L4",
                                   observed_at=T0 + timedelta(days=day), available_count=count)
        for b in (lam, vast):
            report = load_outcome(con, outcome(b, when=AS_OF), "refresh-1", AnomalyPolicy(), now=AS_OF)
            assert report.ok, report.error
    finally:
        close_writer(con)
    return db


def test_the_view_gives_the_share_with_capacity_over_7_and_30_days(shares_db: Path) -> None:
    con = open_reader(shares_db)
    try:
        # 7 days before T0+30d: days 24..29, without capacity on 25 and 27: 4 of 6 (the level-only
        # signal of day 28 is stored but says nothing). 30 days: days 1..29, 26 of 29.
        assert obtainable(con, AS_OF) == {("H100-SXM", "lambda", "us-east-1"): (0.6667, 0.8966),
                                          ("L4", "vastai", "us-east-1"): (0.5, 0.5)}
        row = con.execute("select observations_7d, observations_30d, last_observed "
                          "from availability_obtainable_at($at) where provider = 'lambda'", {"at": AS_OF}).fetchall()
        assert row == [(6, 29, T0 + timedelta(days=29))]
        assert obtainable(con, AS_OF, [("L4", "vastai", "us-east-1")]) == {("L4", "vastai", "us-east-1"): (0.5, 0.5)}
        assert obtainable(con, AS_OF, []) == {}
        # a day later day 1 leaves the 30-day window (25 of 28) and day 24 the 7-day one (3 of 5)
        assert obtainable(con, T0 + timedelta(days=31))[("H100-SXM", "lambda", "us-east-1")] == (0.6, 0.8929)
    finally:
        con.close()


# -- the replayed GCP warehouse ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gcp_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("gcp") / "w.duckdb"
    replayed_warehouse(db, ["gcp"])
    return db


def test_the_replay_carries_two_weeks_of_recorded_history(gcp_db: Path) -> None:
    con = open_reader(gcp_db)
    try:
        first, last, days, rows, keys = con.execute(
            "select min(observed_at), max(observed_at), count(distinct observed_at), count(*), "
            "count(distinct (zone, instance_type, gpu_model)) from availability_history").fetchall()[0]
        assert first == datetime(2026, 11, 15, 3, 12, 45, tzinfo=UTC) and last - first >= timedelta(days=14)
        # 852 GPU and 116 TPU machine/zone pairs (the TPU offers' on-demand and Spot share one), 15 earlier
        # answers and the replay's own
        assert (days, keys, rows) == (16, 968, 16 * 968)
        # As of 2026-11-30 12:00 (the replay's own observation left out): TPU v5e in us-east5 (zones a, b,
        # c x v5litepod-1/4/8) over 15 days, us-east5-b DOWN on 11-18 and 11-19: 129 of 135; europe-west4
        # (zones a, b), europe-west4-a DOWN 11-20..22: 81 of 90; within 7 days (11-24..29) all up.
        shares = obtainable(con, datetime(2026, 11, 30, 12, tzinfo=UTC))
        assert shares[("TPU-v5e", "gcp", "us-east5")] == (1.0, round(129 / 135, 4))
        assert shares[("TPU-v5e", "gcp", "europe-west4")] == (1.0, round(81 / 90, 4))
        # europe-west1-c DOWN 11-25..29 (and in the current answer): v5e in europe-west1 (zones b, c),
        # 21 of the 7 days' 36 observations, 75 of the 30 days' 90
        assert shares[("TPU-v5e", "gcp", "europe-west1")] == (round(21 / 36, 4), round(75 / 90, 4))
    finally:
        con.close()
    again = replayed_warehouse(gcp_db, ["gcp"], refresh_id="refresh-again")
    assert f"availability history: 0 of {16 * 968} signals stored ({16 * 968} already stored for their day)" \
        in again[0].notes


@pytest.fixture(scope="module")
def recent_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Lambda's gpu_1x_h100 seen with capacity now and 1..6 days ago, but for 2 days ago."""
    db = tmp_path_factory.mktemp("recent") / "w.duckdb"
    now = datetime.now(UTC)
    lam = batch("lambda", [offer("gpu_1x_h100", 2.99, count=1, available=True)])
    for day in range(1, 7):
        assert add_observation(lam, f"d{day}", {}, region="us-east-1", instance_type="gpu_1x_h100",
                               gpu_model="H100-SXM", observed_at=now - timedelta(days=day), available=day != 2)
    con = open_writer(db)
    try:
        assert load_outcome(con, outcome(lam, when=now), "refresh-1", AnomalyPolicy(), now=now).ok
    finally:
        close_writer(con)
    return db


def test_show_gpus_the_page_and_the_recommender_show_the_share(recent_db: Path) -> None:
    share = round(6 / 7, 4)  # 7 observations within 7 days, one without capacity
    result = CliRunner().invoke(app, ["show-gpus", "--db", str(recent_db), "--format", "json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert (row["gpu_model"], row["obtainable"]) == ("H100-SXM", share)
    con = open_reader(recent_db)
    try:
        page = offer_columns(report_rows(con))["cols"]["obtainable"]
        assert page == {"dict": [share], "codes": [0]}
        [c] = recommend(con, RecommendRequest(method="lora", model="llama-3-8b")).candidates
        assert (c.instance_type, c.obtainable_7d, c.obtainable_30d) == ("gpu_1x_h100", share, share)
    finally:
        con.close()


def test_the_recommender_knows_tpu_memory_per_chip_and_marks_the_time_it_cannot_estimate(gcp_db: Path) -> None:
    con = open_reader(gcp_db)
    try:
        rec = recommend(con, RecommendRequest(method="lora", model="llama-3-8b", providers=("gcp",), top=500,
                                              region="us-central1", per_instance=False))
    finally:
        con.close()
    tpus = {(c.zone, c.instance_type): c for c in rec.candidates if c.gpu_vendor == "Google"}
    # 19.8 GiB on one chip: a v6e chip's 32 GB HBM fits (30.4 usable), a v5e's 16 does not (15.2)
    assert tpus and {c.gpu_model for c in tpus.values()} == {"TPU-v6e", "TPU-v5p"}
    one = tpus[("us-central1-b", "v6e-1")]
    assert (one.memory_gb_per_gpu, one.usable_gb_per_gpu, one.plan, one.price_per_hour) == (32, 30.4, "single", 2.7)
    assert one.tokens_per_s is None and one.cost.total_usd is None
    assert ("TPU-v6e is a TPU: the time model covers CUDA/ROCm GPUs, not XLA on TPU: speed, time and cost unknown: "
            "ranked after every offer with a known time") in one.flags
    four = tpus[("us-central1-b", "v6e-4")]  # copies on 4 chips joined by ICI (800 GB/s both ways)
    assert (four.plan, four.gpus_used, four.link_kind, four.link_gbs) == ("data-parallel", 4, "ICI", 400)
    assert node_link("Google", "ICI 800 GB/s", "TPU", "TPU v6e (Trillium)", 4, "ICI") == ("ICI", 400)  # the same in Python
    known = [c.rank for c in rec.candidates if c.tokens_per_s is not None]
    assert max(known) < min(c.rank for c in tpus.values())
