"""AWS through the real boto3/httpx clients against the loopback replay of the bundled recording.

Expected values are read off the recording by hand (adapters/recordings/aws/README.md):
the generator's facts table and the bodies themselves.
"""

from __future__ import annotations

from collections import Counter

import pytest

from gpuledger.adapters import aws
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError
from tests.conftest import replay_context


@pytest.fixture(scope="module")
def bulk_batch():
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer

    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        ctx = replay_context(server, "aws")
        batch = aws.fetch(ctx)
        yield batch, server, ctx


def offer(batch, region: str, itype: str, option: str = "on_demand", zone: str = ""):
    found = [o for o in batch.offers if (o.region, o.instance_type, o.purchase_option, o.zone) ==
             (region, itype, option, zone)]
    assert len(found) == 1, (region, itype, option, zone)
    return found[0]


def test_counts_per_purchase_option_and_region(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    assert Counter(o.purchase_option for o in batch.offers) == {"on_demand": 393, "spot": 1084}
    # One on-demand offer per Linux/Shared/Used GPU row of each region's CSV.
    assert Counter(o.region for o in batch.offers if o.purchase_option == "on_demand") == {
        "us-east-1": 63, "us-west-2": 63, "ap-northeast-1": 62, "eu-central-1": 58, "us-east-2": 57,
        "ap-south-1": 48, "eu-west-1": 25, "ap-southeast-1": 17}
    assert batch.quarantined == []
    assert (len(batch.egress), len(batch.storage)) == (48, 56)


def test_on_demand_prices_and_gpu_facts(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    p5 = offer(batch, "us-east-1", "p5.48xlarge")
    assert (p5.price_per_hour, p5.price_per_gpu_hour, p5.gpu_model, p5.gpu_count) == (55.04, 6.88, "H100-SXM", 8)
    assert (p5.interconnect, p5.multinode_fabric, p5.network_gbps, p5.available_count) == ("NVSwitch", "EFA", 3200, 6)
    assert offer(batch, "ap-northeast-1", "p5.48xlarge").price_per_hour == 68.8
    assert offer(batch, "us-east-2", "p4d.24xlarge").price_per_hour == 21.95764
    g5 = offer(batch, "us-east-1", "g5.xlarge")
    assert (g5.price_per_hour, g5.gpu_model, g5.gpu_memory_gb, g5.gpu_memory_gb_nominal) == (1.006, "A10G", 22.352, 24)
    # EC2 reports p5.4xlarge with Count 0 and LogicalGpuCount 1: one whole H100, not zero.
    assert offer(batch, "us-east-1", "p5.4xlarge").gpu_count == 1
    g6f = offer(batch, "us-east-1", "g6f.large")
    assert (g6f.gpu_model, g6f.gpu_count, g6f.gpu_memory_gb) == ("L4", 0.125, 2.794)
    assert g6f.price_per_gpu_hour == pytest.approx(g6f.price_per_hour * 8)
    b200 = offer(batch, "us-east-1", "p6-b200.48xlarge")
    assert (b200.gpu_model, b200.price_per_hour) == ("B200", 113.9328)


def test_p3_priced_but_not_offered_is_flagged_unavailable(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    p3 = offer(batch, "us-east-1", "p3.2xlarge")
    # The price list still carries p3, EC2 no longer offers it in any us-east-1 AZ.
    assert (p3.available, p3.available_count, p3.availability_level) == (False, 0, "not offered")
    assert p3.gpu_model == "V100-SXM2-16"  # named from the family table: EC2 no longer describes it


def test_spot_per_zone_with_advisor_risk(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    spot = offer(batch, "us-east-1", "g5.xlarge", "spot", "us-east-1a")
    assert spot.price_per_hour == 0.4537
    assert spot.spot_savings_pct == round(100 * (1 - 0.4537 / 1.006), 1)
    p5 = offer(batch, "us-east-1", "p5.48xlarge", "spot", "us-east-1a")
    assert (p5.price_per_hour, p5.interruption_risk) == (26.8666, ">20%")  # advisor {"s": 52, "r": 4}
    assert p5.price_observed_at.endswith("+00:00")


def test_egress_tiers_and_ebs_from_price_lists(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    tiers = sorted((e.tier_start_gb, e.tier_end_gb, e.usd_per_gb) for e in batch.egress
                   if e.region == "us-east-1" and e.destination == "internet")
    assert tiers == [(0.0, 100.0, 0.0), (100.0, 10240.0, 0.09), (10240.0, 51200.0, 0.085),
                     (51200.0, 153600.0, 0.07), (153600.0, None, 0.05)]
    assert [e.usd_per_gb for e in batch.egress if e.region == "ap-south-1" and e.tier_start_gb == 100] == [0.1093]
    gp3 = {s.region: s.usd_per_gb_month for s in batch.storage if s.storage_class == "gp3"}
    assert gp3["us-east-1"] == 0.08


def test_pagination_really_followed(bulk_batch) -> None:
    _, server, ctx = bulk_batch
    us_east_1 = [r for h, r in server.requests if h == "ec2.us-east-1.amazonaws.com"]
    by_action = Counter(r.params["Action"] for r in us_east_1)
    assert by_action["DescribeInstanceTypes"] == 6  # six pages, five NextTokens followed
    assert sum("NextToken" in r.params for r in us_east_1 if r.params["Action"] == "DescribeInstanceTypes") == 5
    assert by_action["DescribeSpotPriceHistory"] >= 2 and by_action["DescribeInstanceTypeOfferings"] >= 2
    assert ctx.requests_made == len(server.requests)


def test_pricing_api_path_gives_the_same_on_demand_prices(bulk_batch, replay) -> None:
    batch, _, _ = bulk_batch
    server = replay("aws")
    api = aws.fetch(replay_context(server, "aws", settings={"aws_price_source": "api"}))
    key = lambda o: (o.region, o.instance_type)  # noqa: E731
    bulk_prices = {key(o): o.price_per_hour for o in batch.offers if o.purchase_option == "on_demand"}
    api_prices = {key(o): o.price_per_hour for o in api.offers if o.purchase_option == "on_demand"}
    assert api_prices == bulk_prices
    assert {(e.region, e.destination, e.tier_start_gb, e.usd_per_gb) for e in api.egress} == \
        {(e.region, e.destination, e.tier_start_gb, e.usd_per_gb) for e in batch.egress}
    targets = Counter(r.headers.get("x-amz-target") for h, r in server.requests if h.startswith("api.pricing"))
    assert targets["AWSPriceListService.GetProducts"] == 93  # every page of the three queries x 8 regions


def test_without_ec2_the_price_list_alone_names_the_gpus(bulk_batch, replay) -> None:
    batch, _, _ = bulk_batch
    server = replay("aws")
    plain = aws.fetch(replay_context(server, "aws", settings={"aws_ec2_api": "off"}))
    assert {o.purchase_option for o in plain.offers} == {"on_demand"}
    assert "no AWS credentials" in plain.notes[0]
    assert not any(h.startswith("ec2.") for h, _ in server.requests)
    described = {(o.region, o.instance_type): (o.gpu_model, o.gpu_count) for o in batch.offers
                 if o.purchase_option == "on_demand"}
    from_list = {(o.region, o.instance_type): (o.gpu_model, o.gpu_count) for o in plain.offers}
    assert from_list == described


def test_server_error_after_retries_fails_the_provider(replay) -> None:
    def fail_spot(host, req, ex):
        if req.params.get("Action") == "DescribeSpotPriceHistory":
            return 503, {"Content-Type": "text/xml"}, b"<Response><Errors><Error><Code>Unavailable</Code>" \
                b"<Message>Service Unavailable</Message></Error></Errors></Response>"
        return None

    server = replay("aws", hook=fail_spot)
    with pytest.raises(SourceError, match="aws: EC2 API in .* failed"):
        aws.fetch(replay_context(server, "aws"))
    attempts = [r for _, r in server.requests if r.params.get("Action") == "DescribeSpotPriceHistory"]
    assert len(attempts) >= 2  # botocore retried before giving up


def test_truncated_offer_file_is_schema_drift(replay) -> None:
    def truncate(host, req, ex):
        if ex is not None and req.path.endswith("us-east-1/index.csv") and "AmazonEC2" in req.path:
            body = ex.body()
            return 200, {"Content-Type": "text/csv"}, body[: len(body) // 2]
        return None

    server = replay("aws", hook=truncate)
    with pytest.raises(SchemaDriftError, match="us-east-1"):
        aws.fetch(replay_context(server, "aws"))


def test_unrecorded_request_fails_loudly(replay) -> None:
    server = replay("aws")
    ctx = replay_context(server, "aws", settings={"aws_regions": "us-east-1,eu-north-1"})
    with pytest.raises(SourceError, match="eu-north-1"):
        aws.fetch(ctx)


def test_boto_clients_made_side_by_side_share_one_session_and_the_parsed_models() -> None:
    """Eight regions' EC2 clients made from eight threads at once (boto3 Sessions are not
    thread-safe): each gets its own region and endpoint, one session per scrape, and a second
    scrape's session reuses the service models the first one parsed."""
    from concurrent.futures import ThreadPoolExecutor

    regions = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1",
               "ap-northeast-1", "ap-southeast-2"]
    urls = {f"ec2.{r}.amazonaws.com": f"http://127.0.0.1:{9000 + i}" for i, r in enumerate(regions)}
    ctx = SourceContext("aws", mode="replay", replay_urls=urls)
    with ThreadPoolExecutor(8) as pool:
        clients = list(pool.map(lambda r: ctx.boto_client("ec2", r, f"ec2.{r}.amazonaws.com",
                                                          aws_access_key_id="replay",
                                                          aws_secret_access_key="replay"), regions))
    assert [c.meta.region_name for c in clients] == regions
    assert [c.meta.endpoint_url for c in clients] == [urls[f"ec2.{r}.amazonaws.com"] for r in regions]
    other = SourceContext("aws", mode="replay", replay_urls=urls)
    other.boto_client("ec2", "us-east-1", "ec2.us-east-1.amazonaws.com", aws_access_key_id="replay",
                      aws_secret_access_key="replay")
    assert ctx._boto_session is not other._boto_session
    loader = ctx._boto_session._session.get_component("data_loader")
    assert other._boto_session._session.get_component("data_loader") is loader
