"""The per-offer anomaly guard holds a one-scrape price jump back, and loads the jump when the next
successful scrape sees it again (docs/reliability.md): a marketplace listing whose new price is
real never sticks at its old one."""

from __future__ import annotations

import duckdb
import pytest

from gpuledger.warehouse.store import close_writer, open_writer
from tests.builders import load_day, offer

STEADY = {"h100.a": 2.0, "h100.b": 2.1, "h100.c": 2.2, "h100.d": 2.3}


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    c = open_writer(tmp_path_factory.mktemp("guard") / "ledger.duckdb")
    yield c
    close_writer(c)


def day(con: duckdb.DuckDBPyConnection, provider: str, n: float, **prices: float):
    """One scrape of `provider` (each test has its own) on day n: STEADY with some prices changed."""
    report = load_day(con, provider, [offer(k, v, count=1) for k, v in dict(STEADY, **prices).items()], n)
    assert report.ok, report.error
    return report


def price(con: duckdb.DuckDBPyConnection, provider: str) -> float:
    return con.execute("select price_per_hour from offers where provider = ? and instance_type = 'h100.a'",
                       [provider]).fetchone()[0]


def test_a_jump_seen_on_two_scrapes_in_a_row_loads_on_the_second(con) -> None:
    p = "vastai"
    day(con, p, 0)
    held = day(con, p, 1, **{"h100.a": 12.0})  # x6 against the accepted 2.0: held back
    assert price(con, p) == 2.0 and held.rows_quarantined == 1
    confirmed = day(con, p, 2, **{"h100.a": 12.4})  # seen again, within x5 of the 12.0 held: the real price
    assert price(con, p) == 12.4 and confirmed.rows_quarantined == 0
    assert any(n.startswith("1 offer price jump(s) loaded, seen again after the previous scrape held them back")
               and "us-east-1//h100.a/on_demand 2 -> 12.4 USD" in n for n in confirmed.notes)
    assert con.execute("select price_per_hour from offer_history where provider = ? and instance_type = 'h100.a' "
                       "order by valid_from", [p]).fetchall() == [(2.0,), (12.4,)]


def test_a_slip_is_held_a_second_different_jump_too_and_a_normal_price_needs_no_confirmation(con) -> None:
    p = "runpod"
    day(con, p, 0)
    day(con, p, 1, **{"h100.a": 20.0})  # 2.0 read as 20.0
    other = day(con, p, 2, **{"h100.a": 0.2})  # x100 away from the 20.0 held: no confirmation, held too
    assert price(con, p) == 2.0 and other.rows_quarantined == 1
    [(reason,)] = con.execute("select reason from quarantine where run_id = (select run_id from scrape_runs "
                              "where provider = ? order by finished_at desc limit 1)", [p]).fetchall()
    assert "moved from 2 to 0.2 USD" in reason
    back = day(con, p, 3)  # the source is right again: nothing to confirm, nothing held
    assert price(con, p) == 2.0 and back.rows_quarantined == 0
