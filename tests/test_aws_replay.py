"""AWS through the real boto3/httpx clients against the loopback replay of the bundled recording.

Expected values are read off the recording by hand (adapters/recordings/aws/README.md):
the generator's facts table and the bodies themselves.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone

import pytest

from gpuledger.adapters import aws
from gpuledger.adapters.aws import ec2
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError
from tests.conftest import replay_context


@pytest.fixture(scope="module")
def aws_server():
    """One replay server for the module: 28 EC2 hosts take long to shut down, so tests share it."""
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer

    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        yield server


@pytest.fixture(scope="module")
def bulk_batch(aws_server):
    ctx = replay_context(aws_server, "aws")
    batch = aws.fetch(ctx)
    return batch, Window(aws_server, 0, len(aws_server.requests)), ctx


class Window:
    """The requests the shared server answered from `start` (to `end`, if given)."""

    def __init__(self, server, start: int, end: int | None = None) -> None:
        self.server, self.start, self.end = server, start, end

    @property
    def requests(self):
        return self.server.requests[self.start:self.end]


@pytest.fixture
def fresh(aws_server):
    """fresh(hook=None) -> a Window over the requests this test makes, with `hook` on meanwhile."""
    def use(hook=None) -> Window:
        aws_server.hook = hook
        return Window(aws_server, len(aws_server.requests))

    yield use
    aws_server.hook = None


def offer(batch, region: str, itype: str, option: str = "on_demand", zone: str = ""):
    found = [o for o in batch.offers if (o.region, o.instance_type, o.purchase_option, o.zone) ==
             (region, itype, option, zone)]
    assert len(found) == 1, (region, itype, option, zone)
    return found[0]


# The 20 regions beyond the first 8 carry GPU rows only (no EBS, egress or CPU-only rows).
NEW_REGIONS = ["af-south-1", "ap-east-1", "ap-northeast-2", "ap-northeast-3", "ap-south-2", "ap-southeast-2",
               "ap-southeast-3", "ap-southeast-5", "ca-central-1", "eu-central-2", "eu-north-1", "eu-south-1",
               "eu-south-2", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "sa-east-1",
               "us-west-1"]


# Two of the first eight regions and two GPU-only ones: enough for the tests that fetch again.
SOME = "us-east-1,ap-south-1,eu-north-1,af-south-1"


def test_counts_per_purchase_option_and_region(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    # Twelve Reserved terms (1/3 years x 3 payment options x standard/convertible) of every type with
    # Reserved rows: all but p5e, p5en and p6-b200 (README), i.e. 773 of the 789 on-demand offers;
    # p5.48xlarge in us-east-1 has no 1-year Standard term (the real data of the README).
    terms = [f"{c}_{y}y_{p}_upfront" for c in ("reserved", "reserved_convertible") for y in (1, 3)
             for p in ("no", "partial", "all")]
    # Six Compute and six EC2 Instance Savings Plans (1/3 years x 3 payment options): the recording has
    # a rate of each for every GPU type priced in a region, so every on-demand offer has all twelve.
    plans = [f"{c}_savings_plan_{y}y_{p}_upfront" for c in ("compute", "ec2_instance") for y in (1, 3)
             for p in ("no", "partial", "all")]
    assert Counter(o.purchase_option for o in batch.offers) == {
        "on_demand": 789, "spot": 2176, **dict.fromkeys(terms, 773), **dict.fromkeys(plans, 789),
        **dict.fromkeys(("reserved_1y_no_upfront", "reserved_1y_partial_upfront", "reserved_1y_all_upfront"), 772)}
    # One on-demand offer per Linux/Shared/Used GPU row of each region's CSV.
    per_region = Counter(o.region for o in batch.offers if o.purchase_option == "on_demand")
    assert {r: per_region[r] for r in ("us-east-1", "us-west-2", "ap-northeast-1", "eu-central-1", "us-east-2",
                                       "ap-south-1", "eu-west-1", "ap-southeast-1")} == {
        "us-east-1": 63, "us-west-2": 63, "ap-northeast-1": 62, "eu-central-1": 58, "us-east-2": 57,
        "ap-south-1": 48, "eu-west-1": 25, "ap-southeast-1": 17}
    # The public data (README) lists only the seven g4dn sizes in Cape Town, Osaka, Milan and Bahrain.
    assert {r: per_region[r] for r in ("af-south-1", "ap-northeast-3", "eu-south-1", "me-south-1")} == dict.fromkeys(
        ("af-south-1", "ap-northeast-3", "eu-south-1", "me-south-1"), 7)
    assert set(per_region) == set(NEW_REGIONS) | {"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                                                  "ap-northeast-1", "ap-southeast-1", "ap-south-1"}
    assert len({o.region for o in batch.offers}) == 28 >= 25
    assert batch.quarantined == []
    assert (len(batch.egress), len(batch.storage)) == (48, 56)


@pytest.mark.parametrize("region, itype, price", [
    # github.com/tsaol/aws-gpu data/all_gpu_instances.js (instances.vantage.sh data), read by hand
    # 2026-12-01 in both the 2026-01-21 version (commit 7412fd2) and the 2026-08-26 one (18aebd1).
    ("sa-east-1", "g4dn.xlarge", 0.894),
    ("af-south-1", "g4dn.xlarge", 0.698),
    ("il-central-1", "g5.12xlarge", 6.64825),
    ("eu-north-1", "g4dn.8xlarge", 2.308),
    ("ca-central-1", "g5.12xlarge", 6.29784),
])
def test_new_region_prices_match_the_cited_source(bulk_batch, region: str, itype: str, price: float) -> None:
    batch, _, _ = bulk_batch
    o = offer(batch, region, itype)
    assert (o.price_per_hour, o.source_currency) == (price, "USD")
    assert o.available and o.gpu_model in ("T4", "A10G")


def test_described_but_unpriced_types_are_named_in_the_notes(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    assert not any(o.instance_type.startswith(("g7.", "gr6f.", "p6-b300.")) for o in batch.offers)
    [unpriced] = [n for n in batch.notes if "described by EC2" in n]
    # g7: 6 sizes in 3 regions, gr6f.4xlarge in 4, p6-b300.48xlarge in 1 (README, EC2_ONLY)
    assert unpriced.startswith("23 GPU type-region pairs described by EC2 but not in the price list")
    assert "g7 (6 types in us-east-1, us-east-2, us-west-2)" in unpriced
    assert "gr6f (1 type in eu-central-1, us-east-1, us-east-2, us-west-2)" in unpriced
    assert "p6-b300 (1 type in us-west-2)" in unpriced


def test_skipped_price_rows_are_counted_by_reason(bulk_batch) -> None:
    batch, _, _ = bulk_batch
    [skipped] = [n for n in batch.notes if n.startswith("price-list rows skipped")]
    # m5.large and c5.xlarge: one Linux/Shared/Used row each in the first 8 regions' files
    assert "16 CPU-only instance rows" in skipped
    assert "reserved-term rows" in skipped and "another OS, tenancy" in skipped


def test_regions_setting_narrows_the_scrape(aws_server, fresh) -> None:
    server = fresh()
    batch = aws.fetch(replay_context(aws_server, "aws", settings={"aws_regions": "eu-north-1,sa-east-1"}))
    assert {o.region for o in batch.offers} == {"eu-north-1", "sa-east-1"}
    hosts = {h for h, _ in server.requests}
    assert {h for h in hosts if h.startswith("ec2.")} == {"ec2.eu-north-1.amazonaws.com", "ec2.sa-east-1.amazonaws.com"}


def test_default_regions_are_the_commercial_ones_the_account_enabled() -> None:
    index = ["us-east-1", "us-gov-west-1", "cn-north-1", "eu-north-1", "af-south-1", "us-east-1-bos-1", "me-south-1"]
    assert ec2.default_regions(index, None) == ["af-south-1", "eu-north-1", "me-south-1", "us-east-1"]
    assert ec2.default_regions(index, ["us-east-1", "eu-north-1", "ap-south-1"]) == ["eu-north-1", "us-east-1"]
    doc = {"Regions": [{"RegionName": "us-east-1", "OptInStatus": "opt-in-not-required"},
                       {"RegionName": "af-south-1", "OptInStatus": "opted-in"},
                       {"RegionName": "me-south-1", "OptInStatus": "not-opted-in"}]}
    assert ec2.parse_enabled_regions(doc) == ["af-south-1", "us-east-1"]


def test_default_scrape_asks_ec2_which_regions_are_enabled(bulk_batch) -> None:
    _, server, _ = bulk_batch
    asked = [r for h, r in server.requests if r.params.get("Action") == "DescribeRegions"]
    assert len(asked) == 1 and asked[0].params.get("AllRegions") == "true"


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
    assert p5.price_observed_at == datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)  # <timestamp>


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
    assert by_action["DescribeInstanceTypes"] == 7  # seven pages, six NextTokens followed
    assert sum("NextToken" in r.params for r in us_east_1 if r.params["Action"] == "DescribeInstanceTypes") == 6
    assert by_action["DescribeSpotPriceHistory"] >= 2 and by_action["DescribeInstanceTypeOfferings"] >= 2
    assert ctx.requests_made == len(server.requests)


def test_pricing_api_path_gives_the_same_on_demand_prices(bulk_batch, aws_server, fresh) -> None:
    batch, _, _ = bulk_batch
    server = fresh()
    api = aws.fetch(replay_context(aws_server, "aws", settings={"aws_price_source": "api", "aws_regions": SOME}))
    key = lambda o: (o.region, o.instance_type)  # noqa: E731
    bulk_prices = {key(o): o.price_per_hour for o in batch.offers if o.purchase_option == "on_demand"
                   and o.region in SOME.split(",")}
    api_prices = {key(o): o.price_per_hour for o in api.offers if o.purchase_option == "on_demand"}
    assert api_prices == bulk_prices
    assert {(e.region, e.destination, e.tier_start_gb, e.usd_per_gb) for e in api.egress} == \
        {(e.region, e.destination, e.tier_start_gb, e.usd_per_gb) for e in batch.egress if e.region in SOME}
    targets = Counter(r.headers.get("x-amz-target") for h, r in server.requests if h.startswith("api.pricing"))
    # every page of the three queries: us-east-1 8 + 2 + 3, ap-south-1 6 + 2 + 3; the GPU-only regions
    # have their GPU pages (eu-north-1 5, af-south-1 2) plus one empty storage and one empty transfer page
    assert targets["AWSPriceListService.GetProducts"] == 13 + 11 + 7 + 4


def test_without_ec2_the_price_list_alone_names_the_gpus(bulk_batch, aws_server, fresh) -> None:
    batch, _, _ = bulk_batch
    server = fresh()
    plain = aws.fetch(replay_context(aws_server, "aws", settings={"aws_ec2_api": "off", "aws_regions": SOME}))
    assert {o.purchase_option for o in plain.offers if o.term_months is None} == {"on_demand"}
    assert "no AWS credentials" in plain.notes[0]
    assert not any(h.startswith("ec2.") for h, _ in server.requests)
    described = {(o.region, o.instance_type): (o.gpu_model, o.gpu_count) for o in batch.offers
                 if o.purchase_option == "on_demand"}
    from_list = {(o.region, o.instance_type): (o.gpu_model, o.gpu_count) for o in plain.offers
                 if o.purchase_option == "on_demand"}
    assert from_list == {k: v for k, v in described.items() if k[0] in SOME}


def test_spot_history_failing_after_retries_costs_only_the_spot_offers(bulk_batch, aws_server, fresh) -> None:
    def fail_spot(host, req, ex):
        if req.params.get("Action") == "DescribeSpotPriceHistory":
            return 503, {"Content-Type": "text/xml"}, b"<Response><Errors><Error><Code>Unavailable</Code>" \
                b"<Message>Service Unavailable</Message></Error></Errors></Response>"
        return None

    server = fresh(hook=fail_spot)
    ctx = replay_context(aws_server, "aws", settings={"aws_regions": "us-east-1,eu-north-1"})
    batch = aws.fetch(ctx)
    attempts = [r for _, r in server.requests if r.params.get("Action") == "DescribeSpotPriceHistory"]
    assert len(attempts) >= 2  # botocore retried before giving up
    assert set(ctx.degraded) == {"spot prices"}
    assert "DescribeSpotPriceHistory" in ctx.degraded["spot prices"] and "Unavailable" in ctx.degraded["spot prices"]
    assert not [o for o in batch.offers if o.purchase_option == "spot"] and not batch.spot_prices
    # every other offer of the two regions is the full scrape's, as it was
    full, _, _ = bulk_batch
    key = lambda o: (o.region, o.instance_type, o.purchase_option, o.price_per_hour, o.available_count)  # noqa: E731
    assert sorted(map(key, batch.offers)) == sorted(key(o) for o in full.offers if o.purchase_option != "spot"
                                                    and o.region in ("us-east-1", "eu-north-1"))
    assert len(batch.offers) > 1000 and batch.capacity_blocks


def test_truncated_offer_file_is_schema_drift(aws_server, fresh) -> None:
    def truncate(host, req, ex):
        if ex is not None and req.path.endswith("us-east-1/index.csv") and "AmazonEC2" in req.path:
            body = ex.body()
            return 200, {"Content-Type": "text/csv"}, body[: len(body) // 2]
        return None

    fresh(hook=truncate)
    with pytest.raises(SchemaDriftError, match="us-east-1"):
        aws.fetch(replay_context(aws_server, "aws", settings={"aws_regions": "us-east-1,eu-north-1"}))


def test_region_missing_from_the_price_list_fails_loudly(aws_server) -> None:
    ctx = replay_context(aws_server, "aws", settings={"aws_regions": "us-east-1,ap-southeast-4"})
    with pytest.raises(SourceError, match="ap-southeast-4"):
        aws.fetch(ctx)


def test_boto_clients_made_side_by_side_share_one_session_and_the_parsed_models(monkeypatch) -> None:
    """Eight regions' EC2 clients made from eight threads at once (boto3 Sessions are not
    thread-safe): each gets its own region and endpoint, and a second scrape's session reuses the
    service model the first one read (botocore's loader reads none of EC2's model files again)."""
    from concurrent.futures import ThreadPoolExecutor

    from botocore.loaders import Loader

    from gpuledger.adapters import base

    read: list[str] = []
    load = Loader.load_data_with_path
    monkeypatch.setattr(Loader, "load_data_with_path", lambda self, name: read.append(name) or load(self, name))
    monkeypatch.setattr(base, "_BOTO_LOADER", None)  # models an earlier test parsed would hide the first read
    regions = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-south-1",
               "ap-northeast-1", "ap-southeast-2"]
    urls = {f"ec2.{r}.amazonaws.com": f"http://127.0.0.1:{9000 + i}" for i, r in enumerate(regions)}
    ctx = SourceContext("aws", mode="replay", replay_urls=urls)
    with ThreadPoolExecutor(8) as pool:
        clients = list(pool.map(lambda r: ec2.ec2_client(ctx, r), regions))
    assert [c.meta.region_name for c in clients] == regions
    assert [c.meta.endpoint_url for c in clients] == [urls[f"ec2.{r}.amazonaws.com"] for r in regions]
    first = len(read)
    assert "ec2/2016-11-15/service-2" in read
    ec2.ec2_client(SourceContext("aws", mode="replay", replay_urls=urls), "us-east-1")
    assert not [name for name in read[first:] if name.startswith("ec2/")]
