"""Market safeguards and signals of issue 16: the per-offer anomaly guard, staleness per row, one
interruption-risk scale across providers, and the queries of docs/queries.md that use them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.warehouse.store import AnomalyPolicy, ScrapeOutcome, close_writer, load_outcome, open_writer
from tests.builders import T0, batch, load_day, offer

LAMBDA_PRICES = {"gpu_1x_h100_sxm5": 3.29, "gpu_8x_h100_sxm5": 23.92, "gpu_1x_a100_sxm4": 1.29}


@pytest.fixture
def con(db: Path):
    con = open_writer(db)
    yield con
    close_writer(con)


def lambda_offers(prices: dict[str, float]) -> list[dict]:
    return [offer(itype, price, count=8 if "8x" in itype else 1,
                  gpu="A100-SXM4-80" if "a100" in itype else "H100-SXM")
            for itype, price in prices.items()]


def current(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    return dict(con.execute("select instance_type, price_per_hour from offers where provider = 'lambda'").fetchall())


# -- the per-offer anomaly guard -----------------------------------------------------------------

def test_one_offer_jumping_tenfold_is_held_back_and_the_rest_load(con) -> None:
    assert load_day(con, "lambda", lambda_offers(LAMBDA_PRICES), 0).ok
    jumped = dict(LAMBDA_PRICES, gpu_1x_h100_sxm5=32.9, gpu_1x_a100_sxm4=1.19)  # 3.29 read as 32.9; a real cut
    report = load_day(con, "lambda", lambda_offers(jumped), 1)
    assert report.ok, report.error  # the medians moved little: the provider-level guard lets it through
    assert current(con) == {"gpu_1x_h100_sxm5": 3.29, "gpu_8x_h100_sxm5": 23.92, "gpu_1x_a100_sxm4": 1.19}
    assert (report.new, report.changed, report.closed) == (0, 1, 0)
    assert report.rows_quarantined == 1
    assert "1 offer(s) held back at their previous price by the per-offer anomaly guard" in report.notes
    [(ref, reason)] = con.execute("select source_ref, reason from quarantine").fetchall()
    assert ref == "us-east-1//gpu_1x_h100_sxm5/on_demand"
    assert reason.startswith("per-offer anomaly guard: lambda offer us-east-1//gpu_1x_h100_sxm5/on_demand: "
                             "price per hour moved from 3.29 to 32.9 USD (x10.00, limit x5)")
    assert "--accept-anomaly lambda" in reason
    # the held-back offer kept its one version, still open; the a100 cut opened a second
    assert con.execute("select instance_type, price_per_hour, valid_to is null from offer_history "
                       "where instance_type <> 'gpu_8x_h100_sxm5' order by 1, 2").fetchall() == [
        ("gpu_1x_a100_sxm4", 1.19, True), ("gpu_1x_a100_sxm4", 1.29, False), ("gpu_1x_h100_sxm5", 3.29, True)]
    [(notes,)] = con.execute("select notes from scrape_runs order by finished_at desc limit 1").fetchall()
    assert "held back" in notes


def test_the_override_loads_the_jump(con) -> None:
    assert load_day(con, "lambda", lambda_offers(LAMBDA_PRICES), 0).ok
    jumped = dict(LAMBDA_PRICES, gpu_1x_h100_sxm5=32.9)
    now = T0 + timedelta(days=1)
    outcome = ScrapeOutcome("lambda", "replay", now, now, batch=batch("lambda", lambda_offers(jumped)))
    report = load_outcome(con, outcome, "r1", AnomalyPolicy(accept=frozenset({"lambda"})), now=now)
    assert report.ok and report.rows_quarantined == 0
    assert current(con)["gpu_1x_h100_sxm5"] == 32.9
    assert any(n.startswith("offer price jumps accepted by override: lambda offer us-east-1//gpu_1x_h100_sxm5/"
                            "on_demand: price per hour moved from 3.29 to 32.9 USD") for n in report.notes)


def test_the_factor_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AnomalyPolicy().max_offer_ratio == 5.0
    monkeypatch.setenv("GPULEDGER_OFFER_ANOMALY_FACTOR", "12")
    assert AnomalyPolicy.from_env().max_offer_ratio == 12.0
