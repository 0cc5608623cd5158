"""Amazon EC2: GPU instance prices (on-demand, Reserved, Savings Plans, spot per AZ), EBS and egress from the
public price list (or, with credentials, the Pricing API) and the EC2 API; each enrichment fails alone.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import astuple
from typing import Any, Callable

from gpuledger.adapters.aws import ec2, savings_plans
from gpuledger.adapters.aws.ec2 import has_credentials
from gpuledger.adapters.aws.offers import RegionPayload, build_region, refresh_notes
from gpuledger.adapters.aws.pricelist import (
    DATA_TRANSFER_REGION_INDEX, EC2_REGION_INDEX, GPU_FAMILIES, PRICING_BULK_HOST, PriceRow, fetch_prices_api,
    fetch_prices_bulk, parse_region_index, price_list_versions,
)
from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.adapters.contract import Enrichment, ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, commitment_option

NAME = "aws"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    secret_env_vars=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    # A session token belongs to short-lived credentials, which a repository secret cannot be.
    nightly_secrets=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    enrichments=(
        Enrichment(name="spot prices", options=("spot",)),
        Enrichment(name="spot advisor", columns=("interruption_risk", "interruption_risk_level",
                                                 "interruption_rate_max_pct", "interruption_risk_source"),
                   provider_data_keys=("advisor_savings_pct",)),
        Enrichment(name="az offerings", columns=("available", "available_count", "availability_level"),
                   provider_data_keys=("availability_zones",)),
        Enrichment(name="savings plans", options=tuple(
            commitment_option(plan, months, payment) for plan in savings_plans.PLAN_KINDS.values()
            for months in (12, 36) for payment in savings_plans.PAYMENTS.values())),
        Enrichment(name="capacity blocks"),
    ),
    # A region's price list file runs to hundreds of MB (streamed); an answer read whole (region_index.json, the
    # Spot Advisor) keeps the default limit (bounds.held_limit).
    max_answer_mb=4096,
    facts=ProviderFacts(
        display_name="Amazon Web Services (EC2)", kind="hyperscaler", billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="Linux on-demand and Spot are billed per second with a 60-second minimum.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped instance stops compute billing; its EBS volumes keep billing.",
        access_ssh=True, access_docker=True, access_jupyter=False,
        multinode_interconnect="EFA (p4d 400 Gbps, p5 3200 Gbps)",
        interruptible_offer="Spot (2-minute interruption notice)",
        price_source="AWS Price List (bulk files or Pricing API), EC2 API, Spot Instance Advisor",
        source_urls=[
            "https://aws.amazon.com/ec2/pricing/on-demand/",
            "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-lifecycle.html",
            "https://aws.amazon.com/ec2/instance-types/p5/",
            "https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/price-changes.html"]),
)


enrich = PROVIDER.enrich


def fetch_savings_plan_index(ctx: SourceContext, client: Any) -> tuple[dict[str, str], str | None]:
    doc = ctx.get_json(client, PRICING_BULK_HOST, savings_plans.SAVINGS_PLAN_REGION_INDEX)
    return savings_plans.parse_savings_plan_index(doc), doc.get("publicationDate")


def fetch_spot_advisor(ctx: SourceContext, client: Any) -> Any:
    """The Spot Advisor feed, its own shape (ranges, spot_advisor) checked once here rather than once per region."""
    doc = ctx.get_json(client, ec2.SPOT_ADVISOR_HOST, ec2.SPOT_ADVISOR_PATH)
    ec2.parse_spot_advisor(doc, "")
    return doc


def kept_rows(ctx: SourceContext, name: str, files: Any, row: type,
              parse: Callable[[Counter[str]], tuple[list[Any], Any]]) -> tuple[list[Any], Any, Counter[str]]:
    """parse(skipped)'s rows and publication date and the rows skipped, or those kept from the last parse of the
    same versioned price-list files."""
    def as_json() -> dict[str, Any]:
        skipped: Counter[str] = Counter()
        rows, publication = parse(skipped)
        return {"rows": [astuple(r) for r in rows], "publication": publication, "skipped": skipped}

    kept = ctx.kept_parse(name, files, as_json)
    return [row(*r) for r in kept["rows"]], kept["publication"], Counter(kept["skipped"])


def fetch(ctx: SourceContext) -> Batch:
    batch = PROVIDER.batch()
    creds, config = has_credentials(ctx), ctx.config
    use_ec2 = creds and config.aws_ec2_api != "off"
    use_api = config.aws_price_source == "api" or (config.aws_price_source == "auto" and creds and ctx.mode == "live")
    if use_api and not creds:
        raise SourceError("aws: aws_price_source=api needs AWS credentials (none found in the standard chain)")
    if not use_ec2:
        batch.notes.append("no AWS credentials (or aws_ec2_api=off): on-demand prices from the public "
                           "price list only; no EC2 facts, AZ offerings or spot prices")
    with ctx.http_client() as client:
        ec2_index = parse_region_index(ctx.get_json(client, PRICING_BULK_HOST, EC2_REGION_INDEX), "AmazonEC2")
        dt_index = {} if use_api else parse_region_index(
            ctx.get_json(client, PRICING_BULK_HOST, DATA_TRANSFER_REGION_INDEX), "AWSDataTransfer")
        advisor = enrich(ctx, "spot advisor", fetch_spot_advisor, ctx, client) if use_ec2 else None
        plans = enrich(ctx, "savings plans", fetch_savings_plan_index, ctx, client)
        enabled = ec2.fetch_enabled_regions(ctx) if use_ec2 and config.aws_regions is None else None
        regions = ctx.select_regions(ec2_index, ec2.default_regions(ec2_index, enabled), "the price list")
        if not use_ec2 and not use_api:  # the price list alone, whose version index says what changed
            ctx.unless_unchanged("price list", price_list_versions(regions, ec2_index, dt_index, plans and plans[0]),
                                 "the price list (the version of every region's offer files)")
        block_regions = ec2.capacity_block_regions(config.aws_capacity_blocks, regions) if use_ec2 else set()

        def one_region(region: str) -> RegionPayload:
            p = RegionPayload(region=region, prices=[])
            # The region's other answers (other hosts) are fetched while its price list streams.
            with ThreadPoolExecutor(max_workers=5, thread_name_prefix=f"aws-{region}") as side:
                rates = side.submit(
                    enrich, ctx, "savings plans", kept_rows, ctx, f"savings plans {region}", plans[0].get(region),
                    savings_plans.SavingsPlanRate, lambda skipped: (
                        savings_plans.fetch_savings_plans(ctx, client, region, plans[0], skipped), None),
                    default=([], None, Counter()), region=region) if plans else None
                if use_ec2:
                    client_ec2 = ec2.ec2_client(ctx, region)
                    types = side.submit(ec2.fetch_instance_types, client_ec2, region, config.max_pages)
                    offerings = side.submit(enrich, ctx, "az offerings", ec2.fetch_offerings, client_ec2, region,
                                            config.max_pages, types, region=region)
                    spot = side.submit(enrich, ctx, "spot prices", ec2.fetch_spot_history, ctx, client_ec2, region,
                                       default=([], Counter()), region=region)
                    blocks = side.submit(lambda: enrich(ctx, "capacity blocks", ec2.fetch_capacity_blocks, client_ec2,
                                                        region, types.result(), config.max_pages, default=[],
                                                        region=region) if region in block_regions else [])
                if use_api:
                    p.prices = fetch_prices_api(ctx, region, ec2.client_kwargs(ctx), p.skipped)
                else:
                    p.prices, p.publication, skipped = kept_rows(
                        ctx, f"price list {region}", [ec2_index.get(region), dt_index.get(region)], PriceRow,
                        lambda skipped: fetch_prices_bulk(ctx, client, region, ec2_index, dt_index, skipped))
                    p.skipped.update(skipped)
                if rates is not None:
                    p.savings_plans, _, skipped = rates.result()
                    p.skipped.update(skipped)
                    p.savings_plan_publication = plans[1]
                if use_ec2:
                    p.specs, p.offerings, p.capacity_blocks = types.result(), offerings.result(), blocks.result()
                    p.spot_history, p.spot_skipped = spot.result()
                    if advisor is not None:
                        p.advisor = enrich(ctx, "spot advisor", ec2.parse_spot_advisor, advisor, region, default={},
                                           region=region)
            return p

        with ThreadPoolExecutor(max_workers=max(1, config.aws_concurrency), thread_name_prefix="aws") as pool:
            payloads = list(pool.map(one_region, regions))
    for payload in payloads:
        build_region(batch, payload)
    batch.notes.extend(refresh_notes(payloads))
    if ctx.kept_parses:
        batch.notes.append(f"{ctx.kept_parses} price-list files unchanged since their last parse (their versioned "
                           "addresses the same): not downloaded")
    if no_plans := sorted(set(regions) - set(plans[0])) if plans else []:
        batch.notes.append(f"{len(no_plans)} regions have no Savings Plans price file: {', '.join(no_plans)}")
    return batch
