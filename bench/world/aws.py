"""AWS at world scale: each GPU region's EC2 offer file at its real share, EC2 pages, 30 days of spot.

Built on the bundled recording (tools/build_aws_recordings.py), which already holds every
commercial region with a GPU type, their real on-demand GPU prices and every other request the
adapter makes. What this module scales, and how (bench/world/README.md gives the figures):

- each region's AmazonEC2 offer file (CSV): the bundled GPU rows, then the CPU-only instance
  types of `bench.awsgen` (its real row mix: 12 OS/licence variants x 3 tenancies x 3 capacity
  statuses, 12 Reserved terms) until the file reaches the region's share of the real 5.7 GB;
- DescribeInstanceTypes and DescribeInstanceTypeOfferings: paged over the region's whole type
  list (CPU and GPU), with the adapter's instance-type filter applied inside each page, so most
  pages carry few or no items and every page but the last a NextToken;
- DescribeSpotPriceHistory: 30 days of Linux/UNIX price changes for every GPU type and AZ,
  1,000 per page (the adapter's page size), the last page with an empty nextToken;
- Pricing API GetProducts: the three queries the adapter sends per region (GPU instances,
  storage, data transfer) answered with the same products and terms as the offer files, at
  GetProducts' page size. The bundled GPU and data-transfer items are the bundled files' rows in
  JSON form (tools/build_aws_recordings.py writes both from one catalog); the EBS volumes the
  world adds to a GPU-only region's file get their Storage items from those very CSV rows.

The manifest sets `aws_price_source: api`, the configuration of a deployment with credentials
(adapters/aws.py `fetch`: `auto` picks the Pricing API live when credentials are found); the
bulk offer files stay, for a refresh that sets GPULEDGER_AWS_PRICE_SOURCE=bulk (the environment
wins over a manifest's settings), as a user without an AWS account gets.

Every other exchange of the bundled manifest (price-list indexes, data-transfer files,
DescribeRegions, capacity blocks, the spot advisor, and any request added to the bundled
recording later) is carried over unchanged with its body, so no request the adapter makes goes
unanswered.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import importlib.util
import json
import random
import shutil
import sys
from pathlib import Path
from typing import Any, Iterator

from bench import awsgen
from bench.world.writer import ProviderRecording
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

PROVIDER = "aws"
BUNDLED = BUNDLED_RECORDINGS / PROVIDER
REPO = Path(__file__).resolve().parents[2]
BUILDER_PATH = REPO / "tools" / "build_aws_recordings.py"

# The real all-region AmazonEC2 offer file (bench/awsgen.py: ~5.7 GB, ~7.7 M rows over 36
# regions) split by an ESTIMATED weight per region: us-east-1 carries nearly every instance
# type, the other large regions most, the rest fewer (README.md says why).
ALL_REGIONS_BYTES = awsgen.FULL_SCALE_BYTES
ALL_REGIONS_COUNT = 36
REGION_WEIGHT = {
    "us-east-1": 2.5, "us-east-2": 1.8, "us-west-2": 1.8,
    "eu-west-1": 1.4, "eu-central-1": 1.4, "ap-northeast-1": 1.4,
    "ap-southeast-1": 1.1, "ap-southeast-2": 1.1, "ap-south-1": 1.1, "eu-west-2": 1.1,
    "ca-central-1": 1.1, "ap-northeast-2": 1.1, "sa-east-1": 1.1, "us-west-1": 1.1,
}
OTHER_WEIGHT = 0.8
SCALE = {"world": 1.0, "small": 0.0005}
# Days of spot history: the adapter's first run asks 30 (RECORDED_AT minus 30 days).
HISTORY_DAYS = {"world": 30, "small": 2}
# Share of a CPU type's products kept: all at "world"; at "small" a tenth, the same row mix.
FILLER_KEEP = {"world": 1.0, "small": 0.1}

# Items scanned per page: at "world" the APIs' MaxResults upper bounds (API reference:
# DescribeInstanceTypes 5-100, DescribeInstanceTypeOfferings 5-1000; the adapter sends no
# MaxResults, and that the default is the upper bound is an estimate) and for spot history the
# MaxResults the adapter asks (adapters/aws.py SPOT_HISTORY_PAGE_SIZE); "small" pages smaller so
# its few items still span several pages.
PAGE_DESCRIBE_TYPES = {"world": 100, "small": 20}
PAGE_OFFERINGS = {"world": 1000, "small": 100}
PAGE_SPOT = {"world": 1000, "small": 100}
SCALED_ACTIONS = {"DescribeInstanceTypes", "DescribeInstanceTypeOfferings", "DescribeSpotPriceHistory"}
XML = "text/xml;charset=UTF-8"

# GetProducts: items per page. The API reference (Billing and Cost Management API Reference,
# GetProducts: "MaxResults ... Valid Range: Minimum value of 1. Maximum value of 100") gives 100
# as the upper bound; the adapter sends no MaxResults, and that the default is that bound is an
# estimate. "small" pages smaller so its chains still span several pages.
PRICING_API_HOST = "api.pricing.us-east-1.amazonaws.com"
GET_PRODUCTS = {"X-Amz-Target": "AWSPriceListService.GetProducts"}
PAGE_GET_PRODUCTS = {"world": 100, "small": 10}
GET_PRODUCTS_KINDS = ("gpu", "storage", "transfer")


def builder(scale: str = "world"):
    """tools/build_aws_recordings.py as a private module (its facts and serializers), with its
    spot history starting HISTORY_DAYS[scale] before the recording's moment."""
    name = f"bench_world_aws_builder_{scale}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BUILDER_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        recorded = dt.datetime.fromisoformat(module.RECORDED_AT.replace("Z", "+00:00"))
        module.HISTORY_START = recorded - dt.timedelta(days=HISTORY_DAYS[scale])
    return sys.modules[name]


def region_weight(region: str) -> float:
    return REGION_WEIGHT.get(region, OTHER_WEIGHT)


def region_target_bytes(region: str, scale: str) -> int:
    """The region's share of the real all-region offer file, at `scale`."""
    total_weight = sum(REGION_WEIGHT.values()) + OTHER_WEIGHT * (ALL_REGIONS_COUNT - len(REGION_WEIGHT))
    return int(ALL_REGIONS_BYTES * region_weight(region) / total_weight * SCALE[scale])


def cpu_types() -> list[dict[str, Any]]:
    """awsgen's CPU-only instance types, minus the two the bundled files already carry."""
    b = builder()
    return [t for t in awsgen.instance_types() if not t["gpu"] and t["name"] not in b.NON_GPU]


def region_cpu_order(region: str) -> list[dict[str, Any]]:
    """The CPU types in the order a region takes them (seeded per region)."""
    types = cpu_types()
    random.Random(f"aws-world|types|{region}").shuffle(types)
    return types


# ---------------------------------------------------------------- offer files

def offer_chunks(region: str, scale: str, bundled_csv: bytes, used: list[str],
                 storage: list[str] | None = None) -> Iterator[bytes]:
    """The region's offer file: the bundled file (metadata, header, GPU rows), then CPU types'
    rows in shuffled chunks until the target size. The names of the CPU types written go to `used`,
    the EBS rows added (GPU-only regions) to `storage`."""
    location = builder().REGIONS[region]["name"]
    prefix = builder().REGIONS[region]["prefix"]
    row = awsgen._Row(awsgen.header())
    rng = random.Random(f"aws-world|rows|{region}")
    stats = {"rows": 0, "on_demand": 0}
    target = region_target_bytes(region, scale)
    yield bundled_csv
    written = len(bundled_csv)
    lines: list[str] = []
    if region not in builder().REGION_ORDER:  # the bundled GPU-only files have no EBS products
        lines.extend(awsgen._storage_lines(row, rng, region, location, prefix))
        if storage is not None:
            storage.extend(lines)
    pending = sum(map(len, lines))
    for t in region_cpu_order(region):
        if used and written + pending >= target:
            break
        used.append(t["name"])
        more = awsgen.product_lines(row, rng, t, region, location, prefix, FILLER_KEEP[scale], stats)
        lines.extend(more)
        pending += sum(map(len, more))
        if len(lines) >= 20000:
            rng.shuffle(lines)  # the real file is sorted by SKU: products interleave
            chunk = "".join(lines).encode()
            lines, pending = [], 0
            written += len(chunk)
            yield chunk
    if lines:
        rng.shuffle(lines)
        yield "".join(lines).encode()


def write_streamed(rec: ProviderRecording, exchange: dict[str, Any], body_file: str,
                   chunks: Iterator[bytes]) -> None:
    """One exchange whose gzipped body is written as it is generated (world files do not fit
    comfortably in memory); the tally counts the bytes as served (decompressed)."""
    rel = body_file if body_file.endswith(".gz") else body_file + ".gz"
    target = rec.folder / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    served = 0
    with target.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as out:
        for chunk in chunks:
            out.write(chunk)
            served += len(chunk)
    rec.body_bytes += served
    rec.exchanges.append({**exchange, "response": {**exchange["response"], "body_file": rel}})


# ---------------------------------------------------------------- EC2 Query API

def _paged(rec: ProviderRecording, region: str, op: str, key: str, pages: list[list[dict]],
           extra: dict[str, str], empty_last_token: bool = False) -> None:
    b = builder()
    tokens = [b.ec2_token("world", region, op, i) for i in range(len(pages))]
    for i, items in enumerate(pages):
        body: dict[str, Any] = {key: items}
        if i + 1 < len(pages):
            body["NextToken"] = tokens[i + 1]
        elif empty_last_token:
            body["NextToken"] = ""  # the real last spot page: <nextToken></nextToken>
        data = b.ec2_xml(op, body, b.uuid_like("world", region, op, i))
        params = {"Action": op, **extra}
        if i > 0:
            params["NextToken"] = tokens[i]
        rec.add(f"ec2.{region}.amazonaws.com", "/", data, body_file=f"ec2/{region}/{op}.{i + 1}.xml",
                method="POST", match={"params": params}, headers={"Content-Type": XML},
                compress=len(data) > 40_000)


def filtered_pages(scanned: list[Any], page_size: int, keep) -> list[list[Any]]:
    """Pages over the whole list with the request's filter applied inside each page."""
    return [[x for x in scanned[i:i + page_size] if keep(x)]
            for i in range(0, len(scanned), page_size)] or [[]]


def cpu_azs(region: str, name: str) -> list[str]:
    """The AZs a CPU type is offered in: all but the legacy one, minus a stable few."""
    b = builder()
    r = b.REGIONS[region]
    names = [a for a, _ in r["azs"] if a not in r["legacy"]]
    return [a for a in names if b.frac("world-cpu-az", name, a) < 0.85] or names[:1]


def write_ec2(rec: ProviderRecording, region: str, cpu_names: list[str], scale: str) -> dict[str, int]:
    b = builder(scale)
    gpu = sorted(b.types_offered(region))
    gpu_set = set(gpu)
    every = sorted(set(cpu_names) | gpu_set)
    infos = {t: b.instance_type_info(t) for t in gpu}
    type_pages = filtered_pages(every, PAGE_DESCRIBE_TYPES[scale], gpu_set.__contains__)
    _paged(rec, region, "DescribeInstanceTypes", "InstanceTypes", [[infos[t] for t in page] for page in type_pages], {})

    offerings = []
    for t in every:
        azs = b.azs_for(t, region) if t in gpu_set else cpu_azs(region, t)
        offerings.extend((t, a) for a in azs)
    offerings.sort(key=lambda o: b.h("world-off", region, *o))
    pages = filtered_pages(offerings, PAGE_OFFERINGS[scale], lambda o: o[0] in gpu_set)
    _paged(rec, region, "DescribeInstanceTypeOfferings", "InstanceTypeOfferings",
           [[{"InstanceType": t, "LocationType": "availability-zone", "Location": a} for t, a in page]
            for page in pages], {"LocationType": "availability-zone"})

    spots = []
    for t in gpu:
        for a in b.azs_for(t, region):
            if b.spot_price(t, region, a) is None:
                continue
            for price, stamp in b.spot_history(t, region, a):
                spots.append({"AvailabilityZone": a, "AvailabilityZoneId": b.az_id(region, a),
                              "InstanceType": t, "ProductDescription": "Linux/UNIX",
                              "SpotPrice": f"{price:.6f}", "Timestamp": stamp})
    spots.sort(key=lambda s: (s["Timestamp"], s["InstanceType"], s["AvailabilityZone"]), reverse=True)
    size = PAGE_SPOT[scale]
    spot_pages = [spots[i:i + size] for i in range(0, len(spots), size)] or [[]]
    _paged(rec, region, "DescribeSpotPriceHistory", "SpotPriceHistory", spot_pages, {}, empty_last_token=True)
    return {"types": len(every), "gpu_types": len(gpu), "offerings": len(offerings), "spot": len(spots)}


# ---------------------------------------------------------------- Pricing API GetProducts

def _get_products_kind(exchange: dict[str, Any]) -> tuple[str, str, int] | None:
    """(region, kind, page number) of a bundled GetProducts exchange (None for any other)."""
    if exchange["host"] != PRICING_API_HOST:
        return None
    region, name = exchange["response"]["body_file"].split("/")[-2:]
    kind, number = name.split(".")[:2]
    return region, kind, int(number)


def storage_items(lines: list[str]) -> list[str]:
    """GetProducts Storage items (aws_v1) of offer-file rows: the EBS volume rows among `lines`
    (productFamily Storage, what the adapter's storage query asks), one item per SKU with its
    OnDemand term, attributes named as GetProducts names the CSV columns."""
    b = builder()
    header = awsgen.header()
    items = []
    for values in csv.reader(lines):
        r = dict(zip(header, values))
        if r["Product Family"] != "Storage":
            continue
        terms = {"OnDemand": b.od_term(r["SKU"], [(b.RATE_HOURLY, r["Unit"], r["StartingRange"], r["EndingRange"],
                                                   float(r["PricePerUnit"]), r["PriceDescription"])])}
        items.append(b.price_item("Storage", r["SKU"], b.attrs_from(r), terms, "AmazonEC2",
                                  b.EC2_VERSION, b.EC2_PUBLICATION))
    return items


def write_get_products(rec: ProviderRecording, region: str, kind: str, match_json: dict[str, Any],
                       items: list[str], scale: str) -> int:
    """One query's answer, paged at PAGE_GET_PRODUCTS[scale] with NextToken; returns its pages."""
    b = builder()
    size = PAGE_GET_PRODUCTS[scale]
    pages = [items[i:i + size] for i in range(0, len(items), size)] or [[]]
    tokens = [b.pricing_token("world", region, kind, i) for i in range(len(pages))]
    for i, page in enumerate(pages):
        body: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": page}
        if i + 1 < len(pages):
            body["NextToken"] = tokens[i + 1]
        data = json.dumps(body, separators=(",", ":")).encode()
        match = {**match_json, **({"NextToken": tokens[i]} if i else {})}
        rec.add(PRICING_API_HOST, "/", data, body_file=f"pricing/{region}/{kind}.{i + 1}.json", method="POST",
                match={"headers": GET_PRODUCTS, "json": match},
                headers={"Content-Type": "application/x-amz-json-1.1"}, compress=len(data) > 40_000)
    return len(pages)


# ---------------------------------------------------------------- the recording

def _action(exchange: dict[str, Any]) -> str | None:
    return (exchange.get("match") or {}).get("params", {}).get("Action")


def _offer_file_region(exchange: dict[str, Any]) -> str | None:
    """The region of an AmazonEC2 offer-file exchange (None for any other exchange)."""
    parts = exchange["path"].split("/")
    if exchange["method"] == "GET" and parts[-1] == "index.csv" and "/AmazonEC2/" in exchange["path"]:
        return parts[-2]
    return None


def _read_bundled(rel: str) -> bytes:
    data = (BUNDLED / rel).read_bytes()
    return gzip.decompress(data) if rel.endswith(".gz") else data


def generate(root: Path, scale: str) -> dict[str, Any]:
    manifest = json.loads((BUNDLED / "manifest.json").read_text())
    rec = ProviderRecording(root, PROVIDER, manifest["recorded_at"],
                            {**manifest.get("settings", {}), "aws_price_source": "api"})
    offer_files: dict[str, dict[str, Any]] = {}
    ec2_regions: list[str] = []
    # (region, kind) -> the query's match (first page) and its items, page after page
    queries: dict[tuple[str, str], tuple[dict[str, Any], list[tuple[int, list[str]]]]] = {}
    for ex in manifest["exchanges"]:
        region = _offer_file_region(ex)
        if region:
            offer_files[region] = ex
            continue
        query = _get_products_kind(ex)
        if query:
            region, kind, number = query
            page = json.loads(_read_bundled(ex["response"]["body_file"]))["PriceList"]
            match = {k: v for k, v in ex["match"]["json"].items() if k != "NextToken"}
            queries.setdefault((region, kind), (match, []))[1].append((number, page))
            continue
        if ex["host"].startswith("ec2.") and _action(ex) in SCALED_ACTIONS:
            region = ex["host"].split(".")[1]
            if region not in ec2_regions:
                ec2_regions.append(region)
            continue
        rel = ex["response"].get("body_file")
        if rel:
            (rec.folder / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(BUNDLED / rel, rec.folder / rel)
            rec.body_bytes += len(_read_bundled(rel))
        else:
            rec.body_bytes += len(ex["response"].get("body", "").encode())
        rec.exchanges.append(ex)
    tally: dict[str, Any] = {"regions": {}}
    for region in sorted(set(offer_files) | set(ec2_regions) | {r for r, _ in queries}):
        cpu_names: list[str] = []
        storage_lines: list[str] = []
        before = rec.body_bytes
        if region in offer_files:
            ex = offer_files[region]
            write_streamed(rec, ex, ex["response"]["body_file"],
                           offer_chunks(region, scale, _read_bundled(ex["response"]["body_file"]), cpu_names,
                                        storage_lines))
        csv_bytes = rec.body_bytes - before
        ec2 = write_ec2(rec, region, cpu_names, scale) if region in ec2_regions else {}
        before = rec.body_bytes
        api_pages = 0
        for kind in GET_PRODUCTS_KINDS:
            if (region, kind) not in queries:
                continue
            match, pages = queries[region, kind]
            items = [item for _, page in sorted(pages, key=lambda p: p[0]) for item in page]
            if kind == "storage":
                items = sorted(items + storage_items(storage_lines), key=lambda i: json.loads(i)["product"]["sku"])
            api_pages += write_get_products(rec, region, kind, match, items, scale)
        tally["regions"][region] = {"offer_file_bytes": csv_bytes, **ec2, "get_products_pages": api_pages,
                                    "get_products_bytes": rec.body_bytes - before}
    return {**rec.close(), **tally}
