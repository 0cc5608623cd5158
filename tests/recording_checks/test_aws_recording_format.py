"""Format checks for the AWS replay recording in adapters/recordings/aws/.

These read the recording exactly as the replay server would (manifest + body files, .gz
decompressed) and check wire formats with the real parsers (csv, botocore).  They do not
import the generator, so they also catch hand edits.  Regenerate with
``python tools/build_aws_recordings.py``.
"""
from __future__ import annotations

import csv
import functools
import gzip
import io
import json
from pathlib import Path

import pytest

import botocore.parsers
import botocore.session

ROOT = Path(__file__).resolve().parents[2] / "adapters" / "recordings" / "aws"
# The first eight regions carry the whole price list (EBS, CPU-only rows, data transfer); the
# other twenty only their GPU rows.
FULL_REGIONS = ["us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1",
                "ap-northeast-1", "ap-southeast-1", "ap-south-1"]
GPU_ONLY_REGIONS = ["af-south-1", "ap-east-1", "ap-northeast-2", "ap-northeast-3", "ap-south-2",
                    "ap-southeast-2", "ap-southeast-3", "ap-southeast-5", "ca-central-1", "eu-central-2",
                    "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-2", "eu-west-3", "il-central-1",
                    "me-central-1", "me-south-1", "sa-east-1", "us-west-1"]
REGIONS = FULL_REGIONS + GPU_ONLY_REGIONS
EC2_CSV_PATH = "/offers/v1.0/aws/AmazonEC2/20261125173012/{}/index.csv"


def body(rel: str) -> bytes:
    data = (ROOT / rel).read_bytes()
    return gzip.decompress(data) if rel.endswith(".gz") else data


@pytest.fixture(scope="module")
def manifest():
    return json.loads((ROOT / "manifest.json").read_text())


def exchanges(manifest, host=None, path=None, action=None):
    out = []
    for ex in manifest["exchanges"]:
        if host and ex["host"] != host:
            continue
        if path and ex["path"] != path:
            continue
        if action and ex["match"].get("params", {}).get("Action") != action:
            continue
        out.append(ex)
    return out


@functools.lru_cache(maxsize=None)
def ec2_model():
    """botocore's EC2 model, loaded once (loading it takes about a second)."""
    return botocore.session.get_session().get_service_model("ec2")


def ec2_pages(manifest, region, action):
    """Follow NextToken the way a client would; returns parsed pages."""
    shape = ec2_model().operation_model(action).output_shape
    parser = botocore.parsers.create_parser("ec2")
    exs = exchanges(manifest, host=f"ec2.{region}.amazonaws.com", action=action)
    by_token = {ex["match"]["params"].get("NextToken"): ex for ex in exs}
    pages, token = [], None
    while True:
        ex = by_token[token]
        parsed = parser.parse({"body": body(ex["response"]["body_file"]), "headers": {},
                               "status_code": 200}, shape)
        pages.append(parsed)
        token = parsed.get("NextToken") or None
        if token is None:
            return pages


def ec2_items(manifest, region, action, key):
    return [it for p in ec2_pages(manifest, region, action) for it in p[key]]


def ec2_csv(manifest, region):
    ex = exchanges(manifest, host="pricing.us-east-1.amazonaws.com",
                   path=EC2_CSV_PATH.format(region))[0]
    rows = list(csv.reader(io.StringIO(body(ex["response"]["body_file"]).decode())))
    return rows[:5], rows[5], [dict(zip(rows[5], r)) for r in rows[6:]]


def kept_rows(rows):
    return [r for r in rows if r["TermType"] == "OnDemand" and r["Instance Family"] == "GPU instance"
            and r["Operating System"] == "Linux" and r["Tenancy"] == "Shared"
            and r["Pre Installed S/W"] == "NA" and r["CapacityStatus"] == "Used"
            and r["License Model"] == "No License required"]


def test_manifest_shape(manifest):
    assert manifest["provider"] == "aws"
    assert manifest["settings"] == {"aws_price_source": "bulk", "aws_capacity_blocks": "us-east-1"}
    for ex in manifest["exchanges"]:
        assert ex["method"] in ("GET", "POST")
        assert (ROOT / ex["response"]["body_file"]).is_file()
        assert ex["response"]["status"] == 200


def test_total_size_under_6mb():
    total = sum(p.stat().st_size for p in ROOT.rglob("*") if p.is_file())
    assert total < 6_000_000


@pytest.mark.parametrize("region", REGIONS)
def test_bulk_csv_format(manifest, region):
    ex = exchanges(manifest, host="pricing.us-east-1.amazonaws.com",
                   path=EC2_CSV_PATH.format(region))[0]
    text = body(ex["response"]["body_file"]).decode()
    meta, header, rows = ec2_csv(manifest, region)
    assert [m[0] for m in meta] == ["FormatVersion", "Disclaimer", "Publication Date", "Version",
                                    "OfferCode"]
    assert len(header) == 91
    raw = list(csv.reader(io.StringIO(text)))
    assert all(len(r) == 91 for r in raw[6:])
    # every non-empty field quoted, empty fields bare
    for line in text.splitlines()[5:]:
        assert ',""' not in line and not line.startswith('""')
        fields = next(csv.reader([line]))
        rebuilt = ",".join('"' + f.replace('"', '""') + '"' if f else "" for f in fields)
        assert rebuilt == line
    reserved = sum(r["TermType"] == "Reserved" for r in rows)
    assert 0.75 <= reserved / len(rows) <= 0.85
    kept = kept_rows(rows)
    assert len({r["Instance Type"] for r in kept}) == len(kept)
    if region in FULL_REGIONS:
        assert {r["Product Family"] for r in rows} >= {"Compute Instance", "Storage",
                                                       "Storage Snapshot", "IP Address"}
        assert {r["Instance Type"] for r in rows} >= {"m5.large", "c5.xlarge"}
    else:
        assert {r["Product Family"] for r in rows} <= {"Compute Instance", "Compute Instance (bare metal)"}
        assert all(r["Instance Family"] == "GPU instance" for r in rows)


def test_region_indexes(manifest):
    for offer, listed in (("AmazonEC2", REGIONS), ("AWSDataTransfer", FULL_REGIONS)):
        ex = exchanges(manifest, host="pricing.us-east-1.amazonaws.com",
                       path=f"/offers/v1.0/aws/{offer}/current/region_index.json")[0]
        doc = json.loads(body(ex["response"]["body_file"]))
        assert sorted(doc["regions"]) == sorted(listed)
        assert all(v["currentVersionUrl"].endswith(f"/{k}/index.json") for k, v in doc["regions"].items())


def test_describe_regions(manifest):
    model = ec2_model()
    [ex] = exchanges(manifest, host="ec2.us-east-1.amazonaws.com", action="DescribeRegions")
    parsed = botocore.parsers.create_parser("ec2").parse(
        {"body": body(ex["response"]["body_file"]), "headers": {}, "status_code": 200},
        model.operation_model("DescribeRegions").output_shape)
    status = {r["RegionName"]: r["OptInStatus"] for r in parsed["Regions"]}
    assert {r for r, s in status.items() if s != "not-opted-in"} == set(REGIONS)
    assert status["us-east-1"] == "opt-in-not-required" and status["af-south-1"] == "opted-in"


def test_gpu_only_region_prices(manifest):
    # github.com/tsaol/aws-gpu data/all_gpu_instances.js (2026-01-21 and 2026-08-26 versions)
    od = {r["Instance Type"]: float(r["PricePerUnit"]) for r in kept_rows(ec2_csv(manifest, "sa-east-1")[2])}
    assert od["g4dn.xlarge"] == 0.894
    od = {r["Instance Type"]: float(r["PricePerUnit"]) for r in kept_rows(ec2_csv(manifest, "il-central-1")[2])}
    assert od["g5.12xlarge"] == 6.64825


def test_bulk_csv_known_prices(manifest):
    _, _, rows = ec2_csv(manifest, "us-east-1")
    od = {r["Instance Type"]: float(r["PricePerUnit"]) for r in kept_rows(rows)}
    assert od["p5.48xlarge"] == 55.04
    assert od["p4d.24xlarge"] == 21.957642
    assert od["g5.xlarge"] == 1.006
    assert od["g6.xlarge"] == 0.8048
    assert od["g6e.xlarge"] == 1.861
    assert len(od) == 63
    gp3 = [r for r in rows if r["Volume API Name"] == "gp3" and r["Product Family"] == "Storage"]
    assert float(gp3[0]["PricePerUnit"]) == 0.08
    assert gp3[0]["usageType"] == "EBS:VolumeUsage.gp3"
    _, _, rows2 = ec2_csv(manifest, "us-east-2")
    gp3 = [r for r in rows2 if r["Volume API Name"] == "gp3" and r["Product Family"] == "Storage"]
    assert gp3[0]["usageType"] == "USE2-EBS:VolumeUsage.gp3"


def test_datatransfer_csv(manifest):
    ex = [e for e in exchanges(manifest, host="pricing.us-east-1.amazonaws.com")
          if "/AWSDataTransfer/" in e["path"] and e["path"].endswith("/ap-south-1/index.csv")][0]
    rows = list(csv.reader(io.StringIO(body(ex["response"]["body_file"]).decode())))
    header = rows[5]
    recs = [dict(zip(header, r)) for r in rows[6:]]
    out = sorted((float(r["StartingRange"]), float(r["PricePerUnit"])) for r in recs
                 if r["Transfer Type"] == "AWS Outbound" and r["To Location"] == "External")
    assert out[1] == (100.0, 0.1093)


def test_describe_instance_types(manifest):
    for region in REGIONS:
        pages = ec2_pages(manifest, region, "DescribeInstanceTypes")
        assert len(pages) >= 2
    types = {it["InstanceType"]: it for it in ec2_items(manifest, "us-east-1",
                                                        "DescribeInstanceTypes", "InstanceTypes")}
    assert "m5.large" not in types and "p3.2xlarge" not in types   # p3: priced, not offered
    g6f = types["g6f.large"]["GpuInfo"]
    assert g6f["Gpus"][0]["Count"] == 0 and g6f["Gpus"][0]["MemoryInfo"]["SizeInMiB"] == 2861
    assert types["g5.xlarge"]["GpuInfo"]["Gpus"][0]["MemoryInfo"]["SizeInMiB"] == 22888
    assert types["p5.48xlarge"]["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"] == 32
    assert types["g7e.2xlarge"]["GpuInfo"]["Gpus"][0]["Name"] == "RTX PRO Server 6000"
    # described, offered, and absent from the price list (README: EC2_ONLY)
    _, _, rows = ec2_csv(manifest, "us-east-1")
    priced = {r["Instance Type"] for r in rows}
    assert {"g7.2xlarge", "gr6f.4xlarge"} <= set(types) and not {"g7.2xlarge", "gr6f.4xlarge"} & priced


def test_offerings_and_spot(manifest):
    for region in REGIONS:
        assert len(ec2_pages(manifest, region, "DescribeInstanceTypeOfferings")) >= 2
        assert len(ec2_pages(manifest, region, "DescribeSpotPriceHistory")) >= 2
        offered = {(o["InstanceType"], o["Location"]) for o in ec2_items(
            manifest, region, "DescribeInstanceTypeOfferings", "InstanceTypeOfferings")}
        for sp in ec2_items(manifest, region, "DescribeSpotPriceHistory", "SpotPriceHistory"):
            assert (sp["InstanceType"], sp["AvailabilityZone"]) in offered
            assert sp["ProductDescription"] == "Linux/UNIX"
            assert sp["Timestamp"].year == 2026
    spot = {(s["InstanceType"], s["AvailabilityZone"]): s["SpotPrice"] for s in ec2_items(
        manifest, "us-east-1", "DescribeSpotPriceHistory", "SpotPriceHistory")}
    assert spot[("g5.xlarge", "us-east-1a")] == "0.453700"


def test_get_products_pages(manifest):
    model = botocore.session.get_session().get_service_model("pricing")
    shape = model.operation_model("GetProducts").output_shape
    parser = botocore.parsers.create_parser("json")
    gp = exchanges(manifest, host="api.pricing.us-east-1.amazonaws.com")
    for region in REGIONS:
        for field, value in (("instanceFamily", "GPU instance"), ("productFamily", "Storage")):
            if field == "productFamily" and region in GPU_ONLY_REGIONS:
                continue
            exs = [e for e in gp if {"Field": "regionCode", "Value": region} in e["match"]["json"]["Filters"]
                   and {"Field": field, "Value": value} in e["match"]["json"]["Filters"]]
            assert len(exs) >= 2
            for ex in exs:
                parsed = parser.parse({"body": body(ex["response"]["body_file"]), "headers": {},
                                       "status_code": 200}, shape)
                assert parsed["FormatVersion"] == "aws_v1"
                for item in parsed["PriceList"]:
                    item = json.loads(item)
                    attrs = item["product"]["attributes"]
                    if field == "instanceFamily":
                        assert attrs["operatingSystem"] == "Linux"
                        assert attrs["capacitystatus"] == "Used"
                        assert attrs["regionCode"] == region


def test_spot_advisor(manifest):
    ex = exchanges(manifest, host="spot-bid-advisor.s3.amazonaws.com")[0]
    feed = json.loads(body(ex["response"]["body_file"]))
    assert set(feed) == {"instance_types", "ranges", "spot_advisor", "global_rate"}
    assert set(feed["spot_advisor"]) == set(REGIONS)
    assert feed["spot_advisor"]["us-east-1"]["Linux"]["p5.48xlarge"] == {"s": 52, "r": 4}
