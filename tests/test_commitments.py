"""Commitments as their own purchase options: AWS Reserved terms, GCP committed use, Azure
reservations and savings plans; the effective-rate arithmetic; the recommender leaving them out
unless asked; docs/queries.md's "3-year commitment vs on-demand for a3-highgpu-8g".

Real prices, read by hand from the sources the recordings' READMEs cite:
- AWS, us-east-1, Linux: instances.vantage.sh data in github.com/tsaol/aws-gpu
  data/gpu_instances_raw.json (commit 2d0108c, 2025-11-30), "reserved" of p5.48xlarge, g5.xlarge
  and g4dn.xlarge.
- GCP: Cyclenerd/google-cloud-pricing-cost-calculator pricing.yml (generated 2025-03-06),
  a3-highgpu-8g us-central1 hour 88.4899999025753, month_1y 44810.08066464, month_3y
  28370.99821392 (a 730-hour month); a2-highgpu-1g month_1y 1689.3711392, month_3y 938.56707798.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from pydantic import ValidationError

from gpuledger.adapters import azure
from gpuledger.adapters.aws import offers, pricelist
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.recommend import RecommendRequest, recommend
from gpuledger.warehouse.records import Batch, Offer, amortized_usd_per_hour, commitment_option
from gpuledger.warehouse.store import close_writer, open_reader, open_writer
from tests.builders import T0, load_day, offer, replayed_warehouse
from tests.test_queries import DOC, blocks

AWS_US_EAST_1 = BUNDLED_RECORDINGS / "aws" / "bulk" / "AmazonEC2" / "us-east-1" / "index.csv.gz"
GCP_QUERY = "3-year commitment vs on-demand for a3-highgpu-8g"


# -- the arithmetic and the names ---------------------------------------------------------------

def test_effective_rate_spreads_the_fee_over_the_term_hours() -> None:
    # 1 year = 8760 h, 3 years = 26280 h
    assert amortized_usd_per_hour(8760.0, 0.0, 12) == 1.0
    assert amortized_usd_per_hour(1000.0, 0.5, 12) == pytest.approx(1000 / 8760 + 0.5)  # 0.614155
    assert amortized_usd_per_hour(543866.0, 0.0, 36) == pytest.approx(20.6950532725, abs=1e-9)
    assert amortized_usd_per_hour(0.0, 23.77728, 36) == 23.77728
    with pytest.raises(ValueError):
        amortized_usd_per_hour(-1.0, 1.0, 12)


def test_term_and_payment_keep_commitments_apart() -> None:
    assert commitment_option("reserved", 36, "partial_upfront") == "reserved_3y_partial_upfront"
    assert commitment_option("committed_use", 12, "no_upfront") == "committed_use_1y_no_upfront"
    with pytest.raises(ValueError):
        commitment_option("reserved", 18, "no_upfront")  # terms are whole years
    with pytest.raises(ValueError):
        commitment_option("lease", 12, "no_upfront")
    base = offer("p5.48xlarge", 23.77728)
    ok = Offer(provider="aws", **{**base, "purchase_option": "reserved_3y_no_upfront"},
               term_months=36, payment_option="no_upfront")
    assert ok.key[-1] == "reserved_3y_no_upfront"
    for wrong in ({"term_months": 12, "payment_option": "no_upfront"}, {}):  # a term that is not the name's
        with pytest.raises(ValidationError, match="purchase option reserved_3y_no_upfront has term 36"):
            Offer(provider="aws", **{**base, "purchase_option": "reserved_3y_no_upfront"}, **wrong)
    with pytest.raises(ValidationError, match="purchase option on_demand has term None"):
        Offer(provider="aws", **base, term_months=36, payment_option="no_upfront")
    with pytest.raises(ValidationError, match="unknown purchase option"):
        Offer(provider="aws", **{**base, "purchase_option": "reserved_5y_no_upfront"})


# -- AWS: the bulk CSV's Reserved terms ---------------------------------------------------------

@pytest.fixture(scope="module")
def aws_us_east_1() -> tuple[Batch, Counter[str]]:
    skipped: Counter[str] = Counter()
    rows = list(pricelist.parse_offer_chunks([gzip.decompress(AWS_US_EAST_1.read_bytes())], "us-east-1", skipped=skipped))
    batch = Batch("aws")
    offers.build_region(batch, offers.RegionPayload(region="us-east-1", prices=rows))
    return batch, skipped


def test_aws_reserved_terms_at_their_real_effective_rates(aws_us_east_1) -> None:
    batch, _ = aws_us_east_1
    got = {(o.instance_type, o.purchase_option): o for o in batch.offers}
    p5 = "p5.48xlarge"
    # No Upfront: the hourly rate is the effective rate
    assert got[(p5, "reserved_3y_no_upfront")].price_per_hour == 23.77728
    assert got[(p5, "reserved_convertible_1y_no_upfront")].price_per_hour == 43.344
    assert got[("g5.xlarge", "reserved_1y_no_upfront")].price_per_hour == 0.63378
    # All Upfront: the whole-dollar fee over the term's hours (vantage: 20.695053, 0.197793, 0.591553)
    all_3y = got[(p5, "reserved_3y_all_upfront")]
    assert all_3y.price_per_hour == pytest.approx(20.695053, abs=1e-6)
    assert (all_3y.term_months, all_3y.payment_option) == (36, "all_upfront")
    assert json.loads(all_3y.provider_data)["upfront_fee_usd"] == 543866.0  # 20.695053 x 26280, rounded
    assert got[("g4dn.xlarge", "reserved_3y_all_upfront")].price_per_hour == pytest.approx(0.197793, abs=1e-6)
    assert got[("g5.xlarge", "reserved_1y_all_upfront")].price_per_hour == pytest.approx(0.591553, abs=1e-6)
    # Partial Upfront: fee and hourly part together (vantage 22.015991; the fee is whole dollars)
    partial = got[(p5, "reserved_3y_partial_upfront")]
    data = json.loads(partial.provider_data)
    assert partial.price_per_hour == pytest.approx(data["upfront_fee_usd"] / 26280 + data["hourly_usd"])
    assert partial.price_per_hour == pytest.approx(22.015991, rel=1e-5)
    # the real data has no 1-year Standard term for p5.48xlarge, so neither has the recording
    assert not any(got.get((p5, f"reserved_1y_{p}_upfront")) for p in ("no", "partial", "all"))
    assert got[(p5, "on_demand")].price_per_hour == 55.04 and got[(p5, "on_demand")].term_months is None


def test_aws_reserved_rows_of_cpu_families_are_counted(aws_us_east_1) -> None:
    batch, skipped = aws_us_east_1
    assert batch.quarantined == []
    # m5.large and c5.xlarge: 2 types x 2 OS x (12 hourly + 8 fee rows) Reserved rows
    assert skipped[pricelist.SKIP_TERM] == 80


# -- Azure: reservations (a term's whole price) and savings plans (hourly rates) ----------------

def test_azure_reservation_price_is_the_whole_term() -> None:
    pages = sorted((BUNDLED_RECORDINGS / "azure" / "vm").glob("page-*.json"))
    items = [i for p in pages for i in json.loads(p.read_text())["Items"]]
    h100 = [i for i in items if i["armSkuName"] == "Standard_ND96isr_H100_v5" and i["armRegionName"] == "eastus"
            and "Windows" not in i["productName"] and not i["meterName"].endswith((" Spot", " Low Priority"))]
    batch = Batch("azure")
    azure.build_vm_offers(batch, h100)
    got = {o.purchase_option: o.price_per_hour for o in batch.offers}
    terms = {i["reservationTerm"]: i["retailPrice"] for i in h100 if i["type"] == "Reservation"}
    assert got["on_demand"] == 98.32
    assert got["reserved_1y_upfront_or_monthly"] == pytest.approx(terms["1 Year"] / 8760)
    assert got["reserved_3y_upfront_or_monthly"] == pytest.approx(terms["3 Years"] / 26280)
    plans = {p["term"]: p["retailPrice"] for i in h100 if i["type"] == "Consumption" for p in i["savingsPlan"]}
    assert got["savings_plan_1y_upfront_or_monthly"] == plans["1 Year"]
    assert got["savings_plan_3y_upfront_or_monthly"] == plans["3 Years"]


# -- GCP: committed-use SKUs, and the docs query on a replayed warehouse ------------------------

@pytest.fixture(scope="module")
def gcp_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("commitments") / "gpuledger.duckdb"
    replayed_warehouse(path, ["gcp"], refresh_id="refresh-gcp")
    return path


def rows(db: Path, query: str, params: list | None = None) -> list[dict]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rel = con.execute(query, params or [])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, r)) for r in rel.fetchall()]
    finally:
        con.close()


def test_gcp_committed_use_at_the_real_totals(gcp_db: Path) -> None:
    got = {(r["instance_type"], r["purchase_option"]): r for r in rows(gcp_db, (
        "select instance_type, purchase_option, price_per_hour, term_months, payment_option from offers "
        "where zone = 'us-central1-a' and instance_type in ('a3-highgpu-8g', 'a2-highgpu-1g')"))}
    a3 = "a3-highgpu-8g"
    assert got[(a3, "committed_use_1y_no_upfront")]["price_per_hour"] == pytest.approx(44810.08066464 / 730)
    assert got[(a3, "committed_use_3y_no_upfront")]["price_per_hour"] == pytest.approx(28370.99821392 / 730)
    assert (got[(a3, "committed_use_3y_no_upfront")]["term_months"],
            got[(a3, "committed_use_3y_no_upfront")]["payment_option"]) == (36, "no_upfront")
    assert got[(a3, "on_demand")]["price_per_hour"] == pytest.approx(88.4899999025753)
    assert got[("a2-highgpu-1g", "committed_use_1y_no_upfront")]["price_per_hour"] == \
        pytest.approx(1689.3711392 / 730)
    assert got[("a2-highgpu-1g", "committed_use_3y_no_upfront")]["price_per_hour"] == \
        pytest.approx(938.56707798 / 730)


def test_docs_three_year_commitment_query(gcp_db: Path) -> None:
    (query,) = [q for heading, q in blocks("sql") if heading == GCP_QUERY]
    answer = rows(gcp_db, query)
    # a3-highgpu-8g is committed-use priced in the Americas SKUs' regions (us-central1, us-east1,
    # us-west1): one row per zone of the recording there
    zones = {r["zone"] for r in rows(gcp_db, "select zone from offers where instance_type = 'a3-highgpu-8g' "
                                             "and purchase_option = 'on_demand' and region in "
                                             "('us-central1', 'us-east1', 'us-west1')")}
    assert {r["zone"] for r in answer} == zones and len(answer) == len(zones) >= 3
    first = next(r for r in answer if r["zone"] == "us-central1-a")
    committed = 28370.99821392 / 730  # 38.86438 USD/h
    assert first["purchase_option"] == "committed_use_3y_no_upfront"
    assert first["committed_usd_per_hour"] == pytest.approx(committed)
    assert first["on_demand_usd_per_hour"] == pytest.approx(88.4899999025753)
    assert first["saving_pct"] == 56.1  # 1 - 38.86438 / 88.49
    assert first["break_even_share"] == 0.439
    assert first["term_total_usd"] == round(committed * 26280)  # 1,021,356 USD for three years
    assert "## " + GCP_QUERY in DOC.read_text()


# -- the recommender ----------------------------------------------------------------------------

def test_recommender_leaves_commitments_out_unless_asked(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "aws", [
            offer("p5.48xlarge", 55.04),
            offer("p5.48xlarge", 23.77728, option="reserved_3y_no_upfront", term_months=36, payment_option="no_upfront"),
            offer("p5.48xlarge", 20.0, option="spot", zone="us-east-1a"),
        ], day=0)
    finally:
        close_writer(con)
    reader = open_reader(db)
    try:
        install_macros(reader)

        def options(**kw) -> set[str]:
            rec = recommend(reader, RecommendRequest(method="qlora", model="llama-3-8b", top=10,
                                                     as_of=T0 + timedelta(hours=1), **kw))
            return {c.purchase_option for c in rec.candidates}

        assert options() == {"on_demand"}
        assert options(spot=True) == {"on_demand", "spot"}  # a commitment is not interruptible capacity
        assert options(commitments=True) == {"on_demand", "reserved_3y_no_upfront"}
        rec = recommend(reader, RecommendRequest(method="qlora", model="llama-3-8b", top=10, commitments=True,
                                                 as_of=T0 + timedelta(hours=1)))
        (reserved,) = [c for c in rec.candidates if c.purchase_option == "reserved_3y_no_upfront"]
        assert not reserved.interruptible
        assert any("36-month commitment (no_upfront)" in f for f in reserved.flags)
        # the SQL has them: fits() takes commitments := true
        at = {"at": T0 + timedelta(hours=1)}
        assert reader.execute("select purchase_option from fits(10.0, commitments := true, as_of := $at) "
                              "where term_months = 36", at).fetchall() == [("reserved_3y_no_upfront",)]
        assert reader.execute("select purchase_option from fits(10.0, spot := true, as_of := $at) "
                              "order by 1", at).fetchall() == [("on_demand",), ("spot",)]
    finally:
        reader.close()
