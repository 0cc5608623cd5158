"""EC2 Capacity Blocks for ML on their own cadence (`registry.UNITS`, flows/cadence.py): only
DescribeInstanceTypes and DescribeCapacityBlockOfferings, never AWS's offers (`side_tables_only`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from gpuledger.adapters import aws
from gpuledger.adapters.aws import ec2
from gpuledger.adapters.aws.offers import RegionPayload, build_region
from gpuledger.adapters.base import MissingCredentialsError, SourceContext, SourceError
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch

NAME = "aws_capacity_blocks"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=aws.PROVIDER.secret_env_vars,
    nightly_secrets=aws.PROVIDER.nightly_secrets, credentials_required=True, side_tables_only=True,
    enrichments=(aws.PROVIDER.enrichment("capacity blocks"),),  # a region's failure costs that region only
    facts=aws.PROVIDER.facts.model_copy(update={
        "display_name": "Amazon Web Services (EC2 Capacity Blocks for ML)",
        "price_source": "EC2 API: DescribeInstanceTypes, DescribeCapacityBlockOfferings",
        "source_urls": (
            "https://aws.amazon.com/ec2/capacityblocks/pricing/",
            "https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityBlockOfferings.html"),
    }),
)


def block_regions(ctx: SourceContext) -> list[str]:
    """The `aws_capacity_blocks` comma list; `auto`: `aws_regions`, else every enabled commercial region."""
    setting = ctx.config.aws_capacity_blocks.strip()
    if setting.lower() == "off":
        return []
    listed = ctx.config.aws_regions if setting.lower() == "auto" else setting
    if listed and listed.strip().lower() != "all":
        return sorted({r.strip() for r in listed.split(",") if r.strip()})
    enabled = ec2.fetch_enabled_regions(ctx)
    return ec2.default_regions(enabled, enabled)


def fetch(ctx: SourceContext) -> Batch:
    if not ec2.has_credentials(ctx):
        raise MissingCredentialsError(f"{NAME}: no credentials: DescribeCapacityBlockOfferings needs AWS "
                                      "credentials (none found in the standard chain)")
    if ctx.config.aws_ec2_api == "off":
        raise SourceError(f"{NAME}: aws_ec2_api=off forbids the EC2 calls Capacity Blocks need")
    batch = aws.PROVIDER.batch()  # the offerings are AWS's; this unit only refreshes them
    max_pages = ctx.config.max_pages

    def one_region(region: str) -> RegionPayload:
        client = ec2.ec2_client(ctx, region)
        specs = ec2.fetch_instance_types(client, region, max_pages)
        return RegionPayload(region=region, prices=[], specs=specs, capacity_blocks=aws.enrich(
            ctx, "capacity blocks", ec2.fetch_capacity_blocks, client, region, specs, max_pages, default=[],
            region=region))

    try:
        regions = block_regions(ctx)
        with ThreadPoolExecutor(max_workers=max(1, ctx.config.aws_concurrency), thread_name_prefix=NAME) as pool:
            payloads = list(pool.map(one_region, regions))
    except SourceError as err:  # EC2's messages name "aws": the failed run is this unit's, under its own name
        raise type(err)(f"{NAME}: {str(err).removeprefix('aws: ')}") from err
    for payload in payloads:
        build_region(batch, payload)
    batch.notes.append(f"capacity blocks only (no prices, spot or offers): {len(batch.capacity_blocks)} offerings "
                       f"in {len(regions)} region{'s' if len(regions) != 1 else ''}"
                       + ("" if regions else " (aws_capacity_blocks=off)"))
    return batch
