"""The AWS, Azure and GCP world generators at `--scale small`: their output replays through the
real clients (the replay server and each adapter's fetch), and every page chain in their
manifests is complete (each NextToken / NextPageLink / nextPageToken answered by an exchange).

Expected prices are the bundled recordings' real ones, read off their READMEs by hand.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from bench.world import aws as world_aws
from bench.world import azure as world_azure
from bench.world import gcp as world_gcp
from gpuledger.adapters import aws, azure, gcp
from gpuledger.adapters.replay import ReplayServer
from tests.conftest import replay_context


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("world")
    for module in (world_aws, world_azure, world_gcp):
        module.generate(root, "small")
    return root


def manifest(root: Path, provider: str) -> list[dict]:
    return json.loads((root / provider / "manifest.json").read_text())["exchanges"]


def body(root: Path, provider: str, exchange: dict) -> bytes:
    data = (root / provider / exchange["response"]["body_file"]).read_bytes()
    return gzip.decompress(data) if exchange["response"]["body_file"].endswith(".gz") else data


def replayed(root: Path, provider: str, **settings):
    with ReplayServer(root, providers=[provider]) as server:
        return server, getattr({"aws": aws, "azure": azure, "gcp": gcp}[provider], "fetch")(
            replay_context(server, provider, settings=settings))


def test_aws_ec2_page_chains_are_complete(world: Path) -> None:
    exchanges = manifest(world, "aws")
    asked = {(e["host"], e["match"]["params"]["Action"], e["match"]["params"].get("NextToken"))
             for e in exchanges if e["host"].startswith("ec2.")}
    chains = 0
    for e in exchanges:
        action = e["host"].startswith("ec2.") and e["match"]["params"]["Action"]
        if action not in world_aws.SCALED_ACTIONS:
            continue
        token = re.search(rb"<nextToken>([^<]*)</nextToken>", body(world, "aws", e))
        if token and token.group(1):
            assert (e["host"], action, token.group(1).decode()) in asked, e["response"]["body_file"]
        else:
            chains += 1
    # One chain per call per region: 28 regions x 3 calls, each ending once.
    assert chains == 28 * 3


def test_aws_replays_through_boto3(world: Path) -> None:
    # The bulk offer file: the path that carries the CPU-only rows and their notes.
    server, batch = replayed(world, "aws", aws_regions="eu-north-1", aws_price_source="bulk")
    exchanges = manifest(world, "aws")
    spot_pages = [e for e in exchanges if e["host"] == "ec2.eu-north-1.amazonaws.com"
                  and e["match"]["params"]["Action"] == "DescribeSpotPriceHistory"]
    type_pages = [e for e in exchanges if e["host"] == "ec2.eu-north-1.amazonaws.com"
                  and e["match"]["params"]["Action"] == "DescribeInstanceTypes"]
    asked = [r for host, r in server.requests if host == "ec2.eu-north-1.amazonaws.com"]
    assert sum(r.params.get("Action") == "DescribeSpotPriceHistory" for r in asked) == len(spot_pages) > 1
    assert sum(r.params.get("Action") == "DescribeInstanceTypes" for r in asked) == len(type_pages) > 1
    g4 = [o for o in batch.offers if (o.region, o.instance_type, o.purchase_option) ==
          ("eu-north-1", "g4dn.8xlarge", "on_demand")]
    assert [o.price_per_hour for o in g4] == [2.308]  # the bundle's real price (its README)
    spot = [o for o in batch.offers if o.purchase_option == "spot"]
    assert spot and all(o.region == "eu-north-1" for o in spot)
    # The CPU-only types added to the offer files are dropped and counted, never offered.
    assert not [o for o in batch.offers if o.instance_type.split(".")[0] not in aws.GPU_FAMILIES]
    offer_file = next(e for e in exchanges if e["path"].endswith("/eu-north-1/index.csv"))
    rows = list(csv.DictReader(io.StringIO(body(world, "aws", offer_file).decode().split("\n", 5)[5])))
    cpu_reserved = sum(r["TermType"] == "Reserved" and r["Instance Family"] != "GPU instance" for r in rows)
    assert cpu_reserved > 0
    assert any(f"{cpu_reserved} reserved-term rows of instance families without GPUs" in n for n in batch.notes)
    assert any(s.region == "eu-north-1" for s in batch.storage)  # EBS rows added to a GPU-only file


def test_aws_pricing_api_and_bulk_files_agree(world: Path) -> None:
    # The manifest's configuration is a credentialed deployment's: GetProducts, not the offer files.
    assert json.loads((world / "aws" / "manifest.json").read_text())["settings"]["aws_price_source"] == "api"
    fetched = {source: replayed(world, "aws", aws_regions="eu-north-1", aws_ec2_api="off", aws_price_source=source)
               for source in ("api", "bulk")}
    (api_server, api), (bulk_server, bulk) = fetched["api"], fetched["bulk"]
    pages = [e for e in manifest(world, "aws") if e["host"] == world_aws.PRICING_API_HOST
             and "/eu-north-1/" in e["response"]["body_file"]]
    asked = [r for host, r in api_server.requests if host == world_aws.PRICING_API_HOST]
    assert len(asked) == len(pages) > 3  # every NextToken followed, each page asked once
    assert not [r for host, r in bulk_server.requests if host == world_aws.PRICING_API_HOST]

    def on_demand(batch):
        return sorted((o.instance_type, o.region, o.price_per_hour) for o in batch.offers
                      if o.purchase_option == "on_demand")

    # Two formats of one catalog: the same on-demand offers, storage prices and reserved terms.
    assert on_demand(api) == on_demand(bulk)
    assert ("g4dn.8xlarge", "eu-north-1", 2.308) in on_demand(api)  # the bundle's real price (its README)
    assert sorted(map(repr, api.storage)) == sorted(map(repr, bulk.storage))
    assert {s.storage_class: s.usd_per_gb_month for s in api.storage} == {  # bench/awsgen.py EBS
        "gp3": 0.08, "gp2": 0.10, "io2": 0.125, "io1": 0.125, "st1": 0.045, "sc1": 0.015, "standard": 0.05}
    reserved = sorted((o.instance_type, o.purchase_option, o.price_per_hour) for o in api.offers
                      if o.purchase_option.startswith("reserved"))
    assert reserved and reserved == sorted((o.instance_type, o.purchase_option, o.price_per_hour)
                                           for o in bulk.offers if o.purchase_option.startswith("reserved"))


def test_azure_pages_and_replay(world: Path) -> None:
    exchanges = manifest(world, "azure")
    skips = {(e["match"]["params"]["$filter"], e["match"]["params"]["$skip"]) for e in exchanges
             if e["host"] == azure.PRICES_HOST}
    items = 0
    for e in exchanges:
        if e["host"] != azure.PRICES_HOST:
            continue
        doc = json.loads(body(world, "azure", e))
        assert doc["Count"] == len(doc["Items"]) <= world_azure.PAGE_SIZE
        items += doc["Count"] if e["match"]["params"]["$filter"] == azure.VM_FILTER else 0
        if doc["NextPageLink"]:
            query = parse_qs(urlsplit(doc["NextPageLink"]).query)
            assert (query["$filter"][0], query["$skip"][0]) in skips
    server, batch = replayed(world, "azure")
    vm_pages = sum(1 for e in exchanges if e["match"]["params"].get("$filter") == azure.VM_FILTER)
    assert vm_pages >= 2
    assert f"azure: Virtual Machines: {vm_pages} pages, {items} items (pages' Count total {items})" in batch.notes
    h100 = [o for o in batch.offers if (o.region, o.instance_type, o.purchase_option) ==
            ("eastus", "Standard_ND96isr_H100_v5", "on_demand")]
    assert [o.price_per_hour for o in h100] == [98.32]  # real, captured 2026-09-16 (bundle README)
    # An added region, absent from the bundle, is in the feed and becomes offers.
    assert any(o.region == "australiacentral" for o in batch.offers)


def test_gcp_pages_and_replay(world: Path) -> None:
    exchanges = manifest(world, "gcp")
    tokens = {(e["path"], e["match"]["params"]["pageToken"]) for e in exchanges}
    for e in exchanges:
        nxt = json.loads(body(world, "gcp", e)).get("nextPageToken")
        if nxt:
            assert (e["path"], nxt) in tokens, e["response"]["body_file"]
    billing_pages = [e for e in exchanges if e["host"] == gcp.BILLING_HOST]
    assert len(billing_pages) >= 2
    server, batch = replayed(world, "gcp")
    assert sum(host == gcp.BILLING_HOST for host, _ in server.requests) == len(billing_pages)
    a2 = [o for o in batch.offers if (o.zone, o.instance_type, o.purchase_option) ==
          ("us-central1-a", "a2-highgpu-1g", "on_demand")]
    assert [round(o.price_per_hour, 6) for o in a2] == [3.673385]  # the bundle's real SKUs
    zones = json.loads(body(world, "gcp", exchanges[0]))["items"]
    assert {"africa-south1-a", "europe-west12-c"} <= {z["name"] for z in zones}


def test_the_public_price_list_line_overrides_the_world_manifest(world: Path, monkeypatch) -> None:
    from bench.world_lines import AWS_PUBLIC_ONLY_ENV
    from gpuledger.adapters.base import SourceContext

    manifest_settings = json.loads((world / "aws" / "manifest.json").read_text())["settings"]
    for name, value in AWS_PUBLIC_ONLY_ENV.items():
        monkeypatch.setenv(name, value)
    config = SourceContext(provider="aws", mode="replay", settings=manifest_settings).config
    assert (config.aws_price_source, config.aws_ec2_api) == ("bulk", "off")
