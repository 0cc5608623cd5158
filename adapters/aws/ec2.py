"""The EC2 API through boto3 (credentials needed), and the public Spot Instance Advisor feed."""

from __future__ import annotations

import re
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, TypeVar

from gpuledger.adapters.aws.pricelist import DEFAULT_MAX_PAGES, GPU_FAMILIES, capped, page_items
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard, register_secret, scrubbed
from gpuledger.warehouse.spot import SINCE_KEY

SPOT_ADVISOR_HOST = "spot-bid-advisor.s3.amazonaws.com"
SPOT_ADVISOR_PATH = "/spot-advisor-data.json"
# A default live refresh covers the enabled commercial regions (GovCloud and China are other partitions).
_REGION_CODE = re.compile(r"[a-z]{2}-[a-z]+-\d+")
_OTHER_PARTITIONS = ("us-gov-", "cn-")
_ENABLED = ("opt-in-not-required", "opted-in")
BACKFILL_DAYS = 30  # spot price history asked on a region's first run
SPOT_HISTORY_PAGE_SIZE = 1000
SPOT_PRODUCT = "Linux/UNIX"
SKIP_SPOT_OTHER_PRODUCT = "observations of another product description"
SKIP_SPOT_REPEATED = "observations the answer listed twice (first kept)"
# Capacity Block durations asked (1, 3, 7 and 14 days); AWS sells them up to 8 weeks ahead.
CAPACITY_BLOCK_HOURS = (24, 72, 168, 336)
CAPACITY_BLOCK_AHEAD = timedelta(weeks=8)

T = TypeVar("T")


def has_credentials(ctx: SourceContext) -> bool:
    if not ctx.reaches_provider:
        return True  # the loopback server does not check signatures
    import boto3

    if (creds := boto3.Session().get_credentials()) is None:
        return False
    # The chain may have read them from a file or SSO, not the environment: redact them too.
    frozen = creds.get_frozen_credentials()
    for value in (frozen.access_key, frozen.secret_key, frozen.token):
        register_secret(value)
    return True


def client_kwargs(ctx: SourceContext) -> dict[str, Any]:
    """Under loopback replay boto3 still signs requests: some key, never a secret."""
    return {} if ctx.reaches_provider else {"aws_access_key_id": "replay", "aws_secret_access_key": "replay"}


def ec2_client(ctx: SourceContext, region: str) -> Any:
    return ctx.boto_client("ec2", region, f"ec2.{region}.amazonaws.com", **client_kwargs(ctx))


def gpu_type_filters() -> list[dict[str, Any]]:
    return [{"Name": "instance-type", "Values": [f"{f}.*" for f in sorted(GPU_FAMILIES)]}]


def call_name(action: str, region: str) -> str:
    """How errors name one EC2 call: "aws: EC2 API in us-east-1 (DescribeInstanceTypes)"."""
    return f"aws: EC2 API in {region} ({action})"


def call(action: str, region: str, fetch: Callable[[], T]) -> T:
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    try:
        return fetch()
    except (BotoCoreError, ClientError) as err:
        # a timeout or a broken connection has no answer: its `response` is None
        status = (getattr(err, "response", None) or {}).get("ResponseMetadata", {}).get("HTTPStatusCode")
        raise SourceError(f"{call_name(action, region)} failed: {f'HTTP {status}: ' if status else ''}{err}") \
            from scrubbed(err)
    except ResponseParserError as err:  # a cut or malformed XML answer (not a BotoCoreError)
        raise SchemaDriftError(f"{call_name(action, region)} answered XML botocore cannot parse: "
                               f"{str(err).splitlines()[0][:200]}") from scrubbed(err)


def default_regions(index_regions: Iterable[str], enabled: Iterable[str] | None) -> list[str]:
    """The commercial regions of the price list, narrowed to the enabled ones when EC2 told them."""
    allowed = None if enabled is None else set(enabled)
    return sorted(r for r in index_regions if _REGION_CODE.fullmatch(r) and not r.startswith(_OTHER_PARTITIONS)
                  and (allowed is None or r in allowed))


@drift_guard("aws: DescribeRegions")
def parse_enabled_regions(doc: dict[str, Any]) -> list[str]:
    if "Regions" not in doc:
        raise SchemaDriftError("aws: DescribeRegions answer lacks Regions")
    return sorted(r["RegionName"] for r in doc["Regions"] if r.get("OptInStatus", "opt-in-not-required") in _ENABLED)


def fetch_enabled_regions(ctx: SourceContext) -> list[str]:
    client = ec2_client(ctx, "us-east-1")
    return call("DescribeRegions", "us-east-1", lambda: parse_enabled_regions(client.describe_regions(AllRegions=True)))


@dataclass(frozen=True)
class InstanceSpecs:
    instance_type: str
    gpu_name: str
    gpu_vendor: str
    gpu_count_reported: int  # EC2's Count: 0 for slices (g6f) and, in places, for p5.4xlarge
    gpu_memory_mib: float  # per GPU, as reported
    total_gpu_memory_mib: float
    vcpus: float | None
    ram_gb: float | None
    local_disk_gb: float | None
    network_gbps: float | None
    efa: bool
    logical_gpu_count: int | None = None
    gpu_partition_size: float | None = None  # 0.125 = one eighth of a card
    capacity_block: bool = False  # SupportedUsageClasses lists capacity-block


def parse_network_gbps(text: str) -> float | None:
    """'3200 Gigabit' -> 3200; '4x 100 Gigabit' -> 400; 'Up to 25 Gigabit' -> 25."""
    m = re.search(r"(?:(\d+)x\s*)?(\d+(?:\.\d+)?)\s*Gigabit", text or "")
    return float(m.group(2)) * (int(m.group(1)) if m.group(1) else 1) if m else None


@drift_guard("aws: DescribeInstanceTypes")
def parse_instance_types(pages: Iterable[dict[str, Any]]) -> dict[str, InstanceSpecs]:
    out: dict[str, InstanceSpecs] = {}
    for it in page_items(pages, "InstanceTypes", "DescribeInstanceTypes"):
        info = it.get("GpuInfo") or {}
        if not info.get("Gpus"):
            continue
        g, net = info["Gpus"][0], it.get("NetworkInfo") or {}
        out[it["InstanceType"]] = InstanceSpecs(
            instance_type=it["InstanceType"], gpu_name=g.get("Name", ""), gpu_vendor=g.get("Manufacturer", ""),
            gpu_count_reported=int(g.get("Count", 0)),
            gpu_memory_mib=float((g.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
            total_gpu_memory_mib=float(info.get("TotalGpuMemoryInMiB", 0)),
            vcpus=(it.get("VCpuInfo") or {}).get("DefaultVCpus"),
            ram_gb=((it.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / 1024 or None,
            local_disk_gb=(it.get("InstanceStorageInfo") or {}).get("TotalSizeInGB"),
            network_gbps=parse_network_gbps(net.get("NetworkPerformance", "")), efa=bool(net.get("EfaSupported")),
            logical_gpu_count=g.get("LogicalGpuCount"), gpu_partition_size=g.get("GpuPartitionSize"),
            capacity_block="capacity-block" in (it.get("SupportedUsageClasses") or []))
    return out


def fetch_instance_types(client: Any, region: str, max_pages: int = DEFAULT_MAX_PAGES) -> dict[str, InstanceSpecs]:
    action = "DescribeInstanceTypes"
    return call(action, region, lambda: parse_instance_types(capped(
        client.get_paginator("describe_instance_types").paginate(Filters=gpu_type_filters()), call_name(action, region),
        max_pages)))


@drift_guard("aws: DescribeInstanceTypeOfferings")
def parse_offerings(pages: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """instance type -> sorted availability zones that offer it."""
    out: dict[str, set[str]] = {}
    for page in pages:
        for o in page.get("InstanceTypeOfferings", []):
            out.setdefault(o["InstanceType"], set()).add(o["Location"])
    return {k: sorted(v) for k, v in out.items()}


def fetch_offerings(client: Any, region: str, max_pages: int, described: Future[Any]) -> dict[str, list[str]]:
    """The region's AZ offerings; none of the GPU types DescribeInstanceTypes describes (`described`) is no
    answer, not every offer unavailable."""
    action = "DescribeInstanceTypeOfferings"
    offerings = call(action, region, lambda: parse_offerings(capped(
        client.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone", Filters=gpu_type_filters()), call_name(action, region), max_pages)))
    if not offerings and (types := described.result()):
        raise SchemaDriftError(f"{call_name(action, region)} offered none of the {len(types)} GPU instance types "
                               "DescribeInstanceTypes describes")
    return offerings


@dataclass(frozen=True)
class SpotObservation:
    instance_type: str
    zone: str
    product_description: str
    price: str  # as the API wrote it
    observed_at: datetime


@drift_guard("aws: DescribeSpotPriceHistory")
def parse_spot_observations(pages: Iterable[dict[str, Any]], skipped: Counter[str] | None = None
                            ) -> list[SpotObservation]:
    """Every Linux/UNIX price change, sorted by type, zone and time; the others counted in `skipped`."""
    skipped = Counter() if skipped is None else skipped
    out: dict[tuple[str, str, datetime], SpotObservation] = {}
    for p in page_items(pages, "SpotPriceHistory", "DescribeSpotPriceHistory"):
        if p.get("ProductDescription") != SPOT_PRODUCT:
            skipped[SKIP_SPOT_OTHER_PRODUCT] += 1
            continue
        if not isinstance(p["Timestamp"], datetime):
            raise SchemaDriftError(f"aws: spot price Timestamp {p['Timestamp']!r} is not a timestamp")
        key = (p["InstanceType"], p["AvailabilityZone"], p["Timestamp"].astimezone(timezone.utc))
        if key in out:
            skipped[SKIP_SPOT_REPEATED] += 1
        else:
            out[key] = SpotObservation(key[0], key[1], SPOT_PRODUCT, str(p.get("SpotPrice", "")), key[2])
    return sorted(out.values(), key=lambda o: (o.instance_type, o.zone, o.observed_at))


def spot_history_start(since: dict[str, str], region: str, now: datetime) -> datetime:
    """The region's newest stored observation, or on a first run BACKFILL_DAYS before `now`."""
    mark = since.get(SINCE_KEY.format(region=region))
    return datetime.fromisoformat(mark).astimezone(timezone.utc) if mark else now - timedelta(days=BACKFILL_DAYS)


def fetch_spot_history(ctx: SourceContext, client: Any, region: str) -> tuple[list[SpotObservation], Counter[str]]:
    skipped: Counter[str] = Counter()
    start = spot_history_start(ctx.since, region, datetime.now(timezone.utc))
    action = "DescribeSpotPriceHistory"
    pages = capped(client.get_paginator("describe_spot_price_history").paginate(
        ProductDescriptions=[SPOT_PRODUCT], StartTime=start, Filters=gpu_type_filters(),
        PaginationConfig={"PageSize": SPOT_HISTORY_PAGE_SIZE}), call_name(action, region), ctx.config.max_pages)
    observations = call(action, region, lambda: parse_spot_observations(pages, skipped))
    if not observations and SINCE_KEY.format(region=region) in ctx.since:
        # the answer includes the price in effect at StartTime: none after stored prices is no answer
        raise SourceError(f"{call_name(action, region)} answered no {SPOT_PRODUCT} spot price since "
                          f"{start.isoformat()}, though it returns the price in effect then")
    return observations, skipped


@drift_guard("aws: Spot Instance Advisor feed")
def parse_spot_advisor(doc: Any, region: str) -> dict[str, tuple[str, int]]:
    """instance type -> (interruption frequency bucket label, savings % over on-demand)."""
    try:
        labels = {r["index"]: r["label"] for r in doc["ranges"]}
        linux = doc["spot_advisor"].get(region, {}).get("Linux", {})
        return {t: (labels[v["r"]], int(v["s"])) for t, v in linux.items()}
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: Spot Advisor feed lacks ranges/spot_advisor ({err!r})") from None


def capacity_block_regions(setting: str, regions: Iterable[str]) -> set[str]:
    """The scraped regions whose Capacity Blocks are asked: "auto" (all), else a comma list's ("off": none)."""
    if setting.strip().lower() == "auto":
        return set(regions)
    return {r.strip() for r in setting.split(",") if r.strip()} & set(regions)


@drift_guard("aws: DescribeCapacityBlockOfferings")
def parse_capacity_block_pages(pages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(page_items(pages, "CapacityBlockOfferings", "DescribeCapacityBlockOfferings"))


def fetch_capacity_blocks(client: Any, region: str, specs: dict[str, InstanceSpecs],
                          max_pages: int = DEFAULT_MAX_PAGES) -> list[dict[str, Any]]:
    """Every Capacity Block offering of one instance of each type sold that way, per duration."""
    now, action = datetime.now(timezone.utc), "DescribeCapacityBlockOfferings"
    paginator = client.get_paginator("describe_capacity_block_offerings")
    return call(action, region, lambda: [
        block for itype in sorted(t for t, s in specs.items() if s.capacity_block) for hours in CAPACITY_BLOCK_HOURS
        for block in parse_capacity_block_pages(capped(paginator.paginate(
            InstanceType=itype, InstanceCount=1, CapacityDurationHours=hours, StartDateRange=now,
            EndDateRange=now + CAPACITY_BLOCK_AHEAD), call_name(action, region), max_pages))])
