"""Benchmark 1's bytes line (bench/sources.py): fetched bytes against the smallest public source."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bench.sources import SOURCES, bytes_table, measure
from gpuledger.adapters.registry import SOURCES as PROVIDERS

BULK = "pricing.us-east-1.amazonaws.com"
EC2_FILE = "/offers/v1.0/aws/AmazonEC2/20261118004117/{}/index.csv"
DT_FILE = "/offers/v1.0/aws/AWSDataTransfer/20261118004117/{}/index.csv"


def get_products(region: str, body_file: str) -> dict:
    return {"host": "api.pricing.us-east-1.amazonaws.com", "method": "POST", "path": "/",
            "match": {"headers": {"X-Amz-Target": "AWSPriceListService.GetProducts"},
                      "json": {"ServiceCode": "AmazonEC2",
                               "Filters": [{"Field": "regionCode", "Value": region}]}},
            "response": {"status": 200, "body_file": body_file}}


def aws_world(root: Path) -> Path:
    """GetProducts answers for two of three regions: us-east-1 100 bytes (plain), eu-west-1 50 (gzipped)."""
    folder = root / "aws"
    folder.mkdir(parents=True)
    (folder / "use1.json").write_bytes(b"x" * 100)
    (folder / "euw1.json.gz").write_bytes(gzip.compress(b"y" * 50))
    (folder / "manifest.json").write_text(json.dumps({"provider": "aws", "exchanges": [
        get_products("us-east-1", "use1.json"), get_products("eu-west-1", "euw1.json.gz"),
        {"host": BULK, "method": "GET", "path": "/x", "response": {"status": 200, "body_file": "use1.json"}}]}))
    return root


def test_every_provider_has_a_source_row_with_a_smallest_source() -> None:
    assert sorted(SOURCES) == sorted(PROVIDERS)
    assert all(s.used and s.why and s.smallest for s in SOURCES.values())


def test_aws_bulk_is_measured_against_get_products_region_by_region(tmp_path: Path) -> None:
    world = aws_world(tmp_path)
    answers = [(BULK, "GET", "/offers/v1.0/aws/AmazonEC2/current/region_index.json", "", 10),
               (BULK, "GET", EC2_FILE.format("us-east-1"), "", 1000),
               (BULK, "GET", DT_FILE.format("us-east-1"), "", 200),
               (BULK, "GET", EC2_FILE.format("eu-west-1"), "", 800),
               (BULK, "GET", EC2_FILE.format("ap-south-1"), "", 600)]
    row = measure("aws", answers, world)
    # 2,610 fetched; us-east-1 (1,200) and eu-west-1 (800) replaced by their 100 + 50 GetProducts
    # bytes, ap-south-1 (no GetProducts answer in this world) kept at 600, the index at 10.
    assert (row.fetched, row.once, row.smallest) == (2610, 2610, 760)
    assert "2 of 3 regions" in row.smallest_basis
    assert row.ratio > 1 and not row.repeated and row.ok  # over, for the stated reason (credentials)
    assert any("over because: GetProducts needs AWS credentials" in line for line in bytes_table([row]))


def test_a_refresh_that_read_get_products_is_its_own_smallest_source(tmp_path: Path) -> None:
    world = aws_world(tmp_path)
    answers = [("api.pricing.us-east-1.amazonaws.com", "POST", "/", "a1", 100),
               ("api.pricing.us-east-1.amazonaws.com", "POST", "/", "b2", 50)]
    row = measure("aws", answers, world)
    assert (row.fetched, row.smallest, row.ratio, row.ok) == (150, 150, 1.0, True)


def test_an_answer_fetched_twice_fails_even_with_a_stated_reason(tmp_path: Path) -> None:
    world = aws_world(tmp_path)
    twice = [(BULK, "GET", EC2_FILE.format("ap-south-1"), "", 600)] * 2
    row = measure("aws", twice, world)
    assert (row.fetched, row.once, row.smallest) == (1200, 600, 600)
    assert row.repeated and not row.ok
    lambda_twice = measure("lambda", [("cloud.lambda.ai", "GET", "/api/v1/instance-types", "", 9)] * 2, world)
    assert (lambda_twice.ratio, lambda_twice.ok) == (2.0, False)


def test_a_single_source_provider_is_one_by_definition(tmp_path: Path) -> None:
    row = measure("lambda", [("cloud.lambda.ai", "GET", "/api/v1/instance-types", "", 9)], tmp_path)
    assert (row.fetched, row.smallest, row.ratio, row.ok) == (9, 9, 1.0, True)
    assert any("1.0 by definition" in line for line in bytes_table([row]))
