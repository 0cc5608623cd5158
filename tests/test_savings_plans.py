"""AWS Savings Plans as their own purchase options: the Savings Plans price list streamed, its rates
joined to the on-demand offers by SKU, and docs/queries.md's "3-year commitment vs on-demand for
p5.48xlarge" answering Reserved and Savings Plans side by side.

Values read by hand from the bundled recording (adapters/recordings/aws, built by
tools/build_aws_recordings.py; its Savings Plans rates are made up, README): in
bulk/AWSComputeSavingsPlan/us-east-1/index.json.gz the term "1 year No Upfront Compute Savings Plan"
rates discountedSku HECX59V5UR4U476Y (usage BoxUsage:p5.48xlarge, RunInstances) at "41.28" USD,
"3 year All Upfront p5 EC2 Instance Savings Plan in us-east-1" at "22.016"; in
bulk/AmazonEC2/us-east-1/index.csv.gz HECX59V5UR4U476Y is the SKU of p5.48xlarge's Linux
shared on-demand row, 55.04 USD/h. Reserved 3-year Standard No Upfront is 23.77728 (real,
tests/test_commitments.py).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.aws import offers, pricelist, savings_plans as sp
from gpuledger.adapters.base import SchemaDriftError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, load_outcome, open_writer
from tests.builders import scraped
from tests.test_queries import DOC, blocks

BULK = BUNDLED_RECORDINGS / "aws" / "bulk"
SP_US_EAST_1 = BULK / "AWSComputeSavingsPlan" / "us-east-1" / "index.json.gz"
EC2_US_EAST_1 = BULK / "AmazonEC2" / "us-east-1" / "index.csv.gz"
P5_SKU = "HECX59V5UR4U476Y"
QUERY = "3-year commitment vs on-demand for p5.48xlarge: Reserved and Savings Plans"


def parsed_rates(chunk_size: int | None = None) -> tuple[list[sp.SavingsPlanRate], Counter[str]]:
    body = gzip.decompress(SP_US_EAST_1.read_bytes())
    chunks = [body] if chunk_size is None else [body[i:i + chunk_size] for i in range(0, len(body), chunk_size)]
    skipped: Counter[str] = Counter()
    return sp.parse_savings_plan_chunks(chunks, "us-east-1", pricelist.GPU_FAMILIES, skipped), skipped


@pytest.fixture(scope="module")
def us_east_1() -> tuple[Batch, offers.RegionPayload]:
    prices = list(pricelist.parse_offer_chunks([gzip.decompress(EC2_US_EAST_1.read_bytes())], "us-east-1"))
    rates, skipped = parsed_rates()
    payload = offers.RegionPayload(region="us-east-1", prices=prices, savings_plans=rates,
                                savings_plan_publication="2026-11-24T18:35:51Z", skipped=skipped)
    batch = Batch("aws")
    offers.build_region(batch, payload)
    return batch, payload


def test_one_and_three_year_rates_join_the_on_demand_sku(us_east_1) -> None:
    batch, _ = us_east_1
    assert batch.quarantined == []
    got = {(o.instance_type, o.purchase_option): o for o in batch.offers}
    od = got[("p5.48xlarge", "on_demand")]
    assert od.price_per_hour == 55.04 and json.loads(od.provider_data)["sku"] == P5_SKU
    one = got[("p5.48xlarge", "compute_savings_plan_1y_no_upfront")]
    assert (one.price_per_hour, one.term_months, one.payment_option) == (41.28, 12, "no_upfront")
    three = got[("p5.48xlarge", "ec2_instance_savings_plan_3y_all_upfront")]
    assert (three.price_per_hour, three.term_months, three.payment_option) == (22.016, 36, "all_upfront")
    for o in (one, three):
        data = json.loads(o.provider_data)
        assert data["sku"] == P5_SKU and data["usage_type"] == "BoxUsage:p5.48xlarge"
        assert o.interruption_risk is None and o.zone == "" and o.region == "us-east-1"
        assert o.gpu_model == od.gpu_model and o.gpu_count == 8
        assert o.price_observed_at == datetime(2026, 11, 24, 18, 35, 51, tzinfo=timezone.utc)
    assert json.loads(one.provider_data)["saving_vs_on_demand_pct"] == 25.0  # 1 - 41.28 / 55.04
    assert json.loads(three.provider_data)["saving_vs_on_demand_pct"] == 60.0  # 1 - 22.016 / 55.04
    # p5en has no Reserved terms (README) but Savings Plans
    options = {opt for (t, opt) in got if t == "p5en.48xlarge"}
    assert "compute_savings_plan_3y_no_upfront" in options and not any(o.startswith("reserved") for o in options)


def test_rates_left_out_are_counted_by_reason(us_east_1) -> None:
    _, payload = us_east_1
    # Compute Savings Plans carry one Fargate rate each (6 plans), and one m5.large rate each
    assert payload.skipped[sp.SKIP_OTHER_SERVICE] == 6
    rates, skipped = parsed_rates()
    assert skipped[sp.SKIP_OTHER_USAGE] >= 6  # the m5.large rates, and every plan's Windows rate
    assert {r.commitment for r in rates} == {"compute_savings_plan", "ec2_instance_savings_plan"}
    assert all(r.usage_type.startswith("BoxUsage:") for r in rates)
    stray = sp.SavingsPlanRate("compute_savings_plan", 12, "no_upfront", "PLAN", "NOSUCHSKU", "BoxUsage:p5.48xlarge",
                               "p5.48xlarge", "1.0", "USD", "PLAN.NOSUCHSKU", "")
    counts: Counter[str] = Counter()
    assert sp.join_on_demand([stray, rates[0]], {rates[0].discounted_sku}, counts) == [rates[0]]
    assert counts == {sp.SKIP_NO_ON_DEMAND: 1}


def test_the_stream_parses_the_same_in_small_chunks_and_a_cut_body_is_drift() -> None:
    whole, _ = parsed_rates()
    assert parsed_rates(chunk_size=777)[0] == whole
    body = gzip.decompress(SP_US_EAST_1.read_bytes())
    with pytest.raises(SchemaDriftError, match="Savings Plans file for us-east-1 is not valid JSON"):
        sp.parse_savings_plan_chunks([body[: len(body) // 2]], "us-east-1", pricelist.GPU_FAMILIES)


def test_usage_types_name_the_instance() -> None:
    assert sp.instance_type_of("USE2-BoxUsage:p5.48xlarge") == "p5.48xlarge"
    assert sp.instance_type_of("BoxUsage:g5.xlarge") == "g5.xlarge"
    assert sp.instance_type_of("USE2-UnusedBox:p5.48xlarge") is None
    assert sp.instance_type_of("USE2-DedicatedUsage:p5.48xlarge") is None
    assert sp.instance_type_of("Fargate-vCPU-Hours:perCPU") is None


def test_index_lists_each_regions_file() -> None:
    doc = json.loads((BULK / "AWSComputeSavingsPlan" / "region_index.json").read_text())
    index = sp.parse_savings_plan_index(doc)
    assert index["us-east-1"] == "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/20261124183551/us-east-1/index.json"
    with pytest.raises(SchemaDriftError):
        sp.parse_savings_plan_index({"regions": {"us-east-1": {}}})


def test_docs_query_shows_savings_plans_beside_reserved(us_east_1, tmp_path: Path) -> None:
    batch, _ = us_east_1
    db = tmp_path / "w.duckdb"
    now = datetime(2026, 11, 30, 3, tzinfo=timezone.utc)
    con = open_writer(db)
    try:
        report = load_outcome(con, scraped("aws", "replay", now, now, batch=batch), "refresh-sp",
                              AnomalyPolicy(), now=now)
        assert report.ok, report.error
    finally:
        close_writer(con)
    (query,) = [q for heading, q in blocks("sql") if heading == QUERY]
    con = duckdb.connect(str(db), read_only=True)
    try:
        rel = con.execute(query)
        names = [d[0] for d in rel.description]
        rows = [dict(zip(names, r)) for r in rel.fetchall()]
    finally:
        con.close()
    by_option = {r["purchase_option"]: r for r in rows}
    # 3 Reserved Standard + 3 Convertible + 3 EC2 Instance + 3 Compute Savings Plans, 3 years
    assert len(rows) == 12 and len(by_option) == 12
    assert {r["on_demand_usd_per_hour"] for r in rows} == {55.04}
    ec2_all = by_option["ec2_instance_savings_plan_3y_all_upfront"]
    assert ec2_all["committed_usd_per_hour"] == 22.016 and ec2_all["saving_pct"] == 60.0
    assert ec2_all["break_even_share"] == 0.4 and ec2_all["term_total_usd"] == round(22.016 * 26280)
    assert by_option["compute_savings_plan_3y_no_upfront"]["committed_usd_per_hour"] == 30.272  # 55.04 x 0.55
    assert by_option["reserved_3y_no_upfront"]["committed_usd_per_hour"] == 23.77728
    assert rows[0]["purchase_option"] == "reserved_3y_all_upfront"  # 20.695053, the cheapest
    assert [r["committed_usd_per_hour"] for r in rows] == sorted(r["committed_usd_per_hour"] for r in rows)
    assert "## " + QUERY in DOC.read_text()


def test_an_on_demand_row_quarantined_takes_its_savings_plans_with_it(us_east_1) -> None:
    _, payload = us_east_1
    prices = [dataclasses.replace(r, currency="EUR") if r.sku == P5_SKU and r.kind == "instance" else r
              for r in payload.prices]
    skipped: Counter[str] = Counter()
    batch = Batch("aws")
    offers.build_region(batch, offers.RegionPayload(region="us-east-1", prices=prices, savings_plans=payload.savings_plans,
                                              skipped=skipped))
    options = {o.purchase_option for o in batch.offers if o.instance_type == "p5.48xlarge"}
    assert not any("savings_plan" in o for o in options) and "on_demand" not in options
    assert skipped[sp.SKIP_NO_ON_DEMAND] == 12  # the twelve plans' rates of that SKU
    assert any(q.source_ref.startswith("us-east-1/p5.48xlarge/") and "EUR" in q.reason for q in batch.quarantined)


def test_terms_before_products_parse_the_same() -> None:
    # The documentation shows products first; a file that lists its terms first loses nothing.
    whole, _ = parsed_rates()
    doc = json.loads(gzip.decompress(SP_US_EAST_1.read_bytes()))
    body = json.dumps({"terms": doc["terms"], "products": doc["products"]}).encode()
    chunks = [body[i:i + 4096] for i in range(0, len(body), 4096)]
    assert sp.parse_savings_plan_chunks(chunks, "us-east-1", pricelist.GPU_FAMILIES) == whole
    assert len(whole) == 756  # 63 GPU types' rates x 12 plans
