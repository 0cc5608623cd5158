"""The 7/30/90-day windows of the warehouse's own SQL (availability_obtainable_at, spot_price_stats_at) are the
same hours in every session: a DuckDB CLI or pandas session is in the machine's time zone, where DuckDB counts
a day interval by the local calendar (a window across a DST change an hour longer or shorter)."""

from __future__ import annotations

from datetime import datetime, timezone

import duckdb
import pytest

from gpuledger.warehouse.schema import migrate

# US daylight saving time ended on Sunday 2026-11-01: seven local days before this are 169 hours in Los Angeles
AS_OF = datetime(2026, 11, 5, 12, 0, tzinfo=timezone.utc)
ZONES = ("UTC", "America/Los_Angeles", "Pacific/Chatham")


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    migrate(con)
    key = ("lambda", "us-east-1", "", "gpu_1x_h100", "H100-SXM")
    for at, available in ((datetime(2026, 10, 29, 11, 30, tzinfo=timezone.utc), False),  # 168.5 h before AS_OF
                          (datetime(2026, 11, 3, 12, 0, tzinfo=timezone.utc), True),
                          (datetime(2026, 10, 6, 11, 30, tzinfo=timezone.utc), False)):  # 720.5 h before
        con.execute("insert into availability_history values (?, ?, ?, ?, ?, ?, ?, null, null, 'run-1')",
                    [*key, at, available])
    for at, price in ((datetime(2026, 7, 1, tzinfo=timezone.utc), 30.0),
                      (datetime(2026, 10, 29, 11, 30, tzinfo=timezone.utc), 40.0)):  # 168.5 h before AS_OF
        con.execute("insert into spot_price_history values ('aws', 'us-east-1', 'us-east-1a', 'p5.48xlarge', "
                    "'Linux/UNIX', ?, ?, 'USD', 'run-1', ?)", [at, price, AS_OF])
    return con


@pytest.mark.parametrize("zone", ZONES)
def test_the_availability_windows_are_7_and_30_times_24_hours(con: duckdb.DuckDBPyConnection, zone: str) -> None:
    con.execute(f"set TimeZone = '{zone}'")
    rows = con.execute("select observations_7d, obtainable_7d, observations_30d, obtainable_30d "
                       "from availability_obtainable_at(?)", [AS_OF]).fetchall()
    assert rows == [(1, 1.0, 2, 0.5)]  # Los Angeles: (2, 0.5, 3, 0.3333): the two outside the windows counted


@pytest.mark.parametrize("zone", ZONES)
def test_the_spot_stats_windows_are_24_hour_days(con: duckdb.DuckDBPyConnection, zone: str) -> None:
    con.execute(f"set TimeZone = '{zone}'")
    rows = con.execute("select window_days, hours_covered, price_periods, min_price, max_price "
                       "from spot_price_stats_at(?) order by window_days", [AS_OF]).fetchall()
    # Los Angeles: the 7 days began an hour earlier, in the half hour of 30.00 before 40.00
    assert rows == [(7, 168.0, 1, 40.0, 40.0), (30, 720.0, 2, 30.0, 40.0), (90, 2160.0, 2, 30.0, 40.0)]


@pytest.mark.parametrize("zone", ZONES)
def test_a_providers_age_is_the_hours_since_its_last_success(zone: str) -> None:
    from gpuledger.warehouse.recommender.macros import install_macros

    con = duckdb.connect()
    migrate(con)
    install_macros(con)
    con.execute("insert into scrape_runs (run_id, refresh_id, provider, mode, started_at, finished_at, state) "
                "values ('run-1', 'refresh-1', 'lambda', 'live', ?, ?, 'ok')",
                [datetime(2026, 10, 31, 12, 0, tzinfo=timezone.utc)] * 2)
    con.execute(f"set TimeZone = '{zone}'")
    rows = con.execute("select provider, age_hours, state from provider_freshness(as_of := ?, max_age_hours := 120)",
                       [AS_OF]).fetchall()
    assert rows == [("lambda", 120.0, "ok")]  # Los Angeles: 119 h, across the end of daylight saving time
