"""AWS's enrichments fail alone: through the real boto3 and httpx clients against the loopback
replay of the bundled recording, each optional answer is made to fail (HTTP 404, 500, a cut or
malformed body) and the scrape still returns every on-demand and Reserved offer of the full
scrape, with `ctx.degraded` naming the enrichment and why. The core answers still fail the scrape."""

from __future__ import annotations

import re

import pytest

from gpuledger.adapters import aws
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from tests.conftest import replay_context

REGION = "us-east-1"  # the recording's capacity-block region (its manifest's aws_capacity_blocks)
CORE = ("on_demand", "reserved_1y_no_upfront", "reserved_convertible_3y_all_upfront")
EC2_ERROR = b"<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>r</RequestID>" \
    b"</Response>"


@pytest.fixture(scope="module")
def server():
    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as replay:
        yield replay


@pytest.fixture(scope="module")
def full(server):
    ctx = replay_context(server, "aws", settings={"aws_regions": REGION})
    batch = aws.fetch(ctx)
    assert ctx.degraded == {}
    return batch


def scrape(server, hook):
    server.hook = hook
    try:
        ctx = replay_context(server, "aws", settings={"aws_regions": REGION})
        return aws.fetch(ctx), ctx
    finally:
        server.hook = None


def offers(batch, options=CORE):
    return sorted((o.instance_type, o.purchase_option, o.price_per_hour, o.gpu_model, o.gpu_count)
                  for o in batch.offers if o.purchase_option in options)


def ec2_answer(action: str, status: int, body: bytes):
    def hook(host, req, ex):
        if host.startswith("ec2.") and req.params.get("Action") == action:
            return status, {"Content-Type": "text/xml;charset=UTF-8"}, body
        return None

    return hook


# What each fault looks like on the wire, and what the reason must then say.
FAULTS = {
    "404": (404, EC2_ERROR % (b"InvalidAction", b"The action is not valid for this web service."),
            r"failed: HTTP 404: An error occurred \(InvalidAction\).*not valid for this web service"),
    "404 with a body that is no XML": (404, b"Not Found", r"answered XML botocore cannot parse"),
    "500": (500, EC2_ERROR % (b"InternalError", b"An internal error has occurred."),
            r"failed: HTTP 500: An error occurred \(InternalError\).*reached max retries"),
    "malformed XML": (200, b"<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item><instanceType>p5",
                      r"answered XML botocore cannot parse"),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("action, enrichment, lost", [
    ("DescribeCapacityBlockOfferings", "capacity blocks", "capacity_blocks"),
    ("DescribeSpotPriceHistory", "spot prices", "spot_prices"),
])
def test_a_failing_ec2_enrichment_leaves_the_on_demand_offers(server, full, fault, action, enrichment, lost) -> None:
    status, body, reason = FAULTS[fault]
    batch, ctx = scrape(server, ec2_answer(action, status, body))
    assert list(ctx.degraded) == [enrichment]
    assert ctx.degraded[enrichment].startswith(f"aws: EC2 API in {REGION} ({action}) ")
    assert re.search(reason, ctx.degraded[enrichment]), ctx.degraded[enrichment]
    # README: 63 GPU types priced in us-east-1, all with Reserved terms but p5en and p6-b200, and
    # p5.48xlarge without a 1-year Standard one
    assert offers(batch) == offers(full) and len(offers(full)) == 63 + 60 + 61
    assert getattr(batch, lost) == [] and getattr(full, lost)
    if enrichment == "spot prices":
        assert not [o for o in batch.offers if o.purchase_option == "spot"]
    else:  # the spot offers, another enrichment, are all there
        assert offers(batch, ("spot",)) == offers(full, ("spot",))


def test_a_failing_spot_advisor_leaves_spot_offers_without_an_interruption_band(server, full) -> None:
    batch, ctx = scrape(server, lambda host, req, ex: (500, {}, b"SlowDown") if host == aws.ec2.SPOT_ADVISOR_HOST
                        else None)
    assert list(ctx.degraded) == ["spot advisor"] and "HTTP 500" in ctx.degraded["spot advisor"]
    spot = [o for o in batch.offers if o.purchase_option == "spot"]
    assert len(spot) == len([o for o in full.offers if o.purchase_option == "spot"]) > 100
    assert {(o.interruption_risk, o.interruption_risk_level) for o in spot} == {(None, "unknown")}
    assert {o.interruption_risk_level for o in full.offers if o.purchase_option == "spot"} >= {"high", "low"}
    assert offers(batch) == offers(full)


def test_a_failing_az_offerings_answer_leaves_availability_unknown(server, full) -> None:
    status, body, _ = FAULTS["500"]
    batch, ctx = scrape(server, ec2_answer("DescribeInstanceTypeOfferings", status, body))
    assert list(ctx.degraded) == ["az offerings"]
    on_demand = [o for o in batch.offers if o.purchase_option == "on_demand"]
    assert {(o.available, o.available_count) for o in on_demand} == {(None, None)}
    assert {o.available for o in full.offers if o.purchase_option == "on_demand"} == {True, False}
    assert offers(batch) == offers(full)


@pytest.mark.parametrize("part", ["index", "region file"])
def test_failing_savings_plans_leave_the_other_offers(server, full, part) -> None:
    def hook(host, req, ex):
        if "/savingsPlan/" not in req.path:
            return None
        if part == "index" and req.path.endswith("region_index.json"):
            return 404, {}, b"<Error><Code>NoSuchKey</Code></Error>"
        if part == "region file" and not req.path.endswith("region_index.json"):
            return 200, {"Content-Type": "application/json"}, ex.body()[:5000]  # a cut download
        return None

    batch, ctx = scrape(server, hook)
    assert list(ctx.degraded) == ["savings plans"]
    assert ("HTTP 404" if part == "index" else "is not valid JSON") in ctx.degraded["savings plans"]
    assert not [o for o in batch.offers if "savings_plan" in o.purchase_option]
    assert len([o for o in full.offers if "savings_plan" in o.purchase_option]) == 63 * 12
    assert offers(batch) == offers(full) and offers(batch, ("spot",)) == offers(full, ("spot",))
    assert not [n for n in batch.notes if "Savings Plans price file" in n]


@pytest.mark.parametrize("action, error", [("DescribeInstanceTypes", SourceError), ("DescribeRegions", SourceError)])
def test_a_failing_core_answer_still_fails_the_scrape(server, action, error) -> None:
    status, body, _ = FAULTS["500"]
    server.hook = ec2_answer(action, status, body)
    try:
        ctx = replay_context(server, "aws", settings={"aws_regions": REGION} if action != "DescribeRegions" else {})
        with pytest.raises(error, match=rf"EC2 API in us-east-1 \({action}\) failed"):
            aws.fetch(ctx)
    finally:
        server.hook = None


def test_a_malformed_instance_types_answer_is_schema_drift(server) -> None:
    server.hook = ec2_answer("DescribeInstanceTypes", 200, b"<DescribeInstanceTypesResponse><instanceTypeSet><item>")
    try:
        with pytest.raises(SchemaDriftError, match="EC2 API in us-east-1 .*XML"):
            aws.fetch(replay_context(server, "aws", settings={"aws_regions": REGION}))
    finally:
        server.hook = None


def test_az_offerings_failing_in_one_region_change_no_stored_offer(server, tmp_path) -> None:
    # IAM without ec2:DescribeInstanceTypeOfferings (or one region throttled): each offer's provider_data lost its
    # availability_zones, so every offer of the region was 'changed', a new history version each, and one
    # region's failure kept the stale availability of every other region too.
    from datetime import timedelta

    from tests.builders import T0, load, outcome

    regions = {"aws_regions": "us-east-1,us-west-2"}
    first = aws.fetch(replay_context(server, "aws", settings=regions))
    west = [o for o in first.offers if o.region == "us-west-2" and o.purchase_option == "on_demand"]
    assert west and all('"availability_zones": [' in o.provider_data for o in west)
    status, body, _ = FAULTS["500"]
    hook = ec2_answer("DescribeInstanceTypeOfferings", status, body)
    server.hook = lambda host, req, ex: hook(host, req, ex) if host.startswith("ec2.us-west-2.") else None
    try:
        ctx = replay_context(server, "aws", settings=regions)
        second = aws.fetch(ctx)
    finally:
        server.hook = None
    degraded = aws.PROVIDER.degraded(ctx)
    assert [(d["name"], d["regions"]) for d in degraded] == [("az offerings", ["us-west-2"])]
    db = tmp_path / "w.duckdb"
    load(db, [outcome(first, "aws")], "refresh-1")
    [report] = load(db, [outcome(second, "aws", when=T0 + timedelta(days=1), degraded=degraded)], "refresh-2")
    assert (report.state, report.new, report.changed, report.closed) == ("ok", 0, 0, 0)
    assert report.degraded.startswith("az offerings (aws: EC2 API in us-west-2 (DescribeInstanceTypeOfferings)")
