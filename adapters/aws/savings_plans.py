"""AWS Savings Plans (Compute and EC2 Instance, 1 and 3 years) from the public Savings Plans price list, a
region's JSON file parsed as it streams (ijson): each plan's rates (`discountedRate` of an on-demand
`discountedSku`) for Linux on-demand usage of GPU families."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Collection, Iterable

import ijson

from gpuledger.adapters.aws.pricelist import GPU_FAMILIES, PRICING_BULK_HOST, family_of
from gpuledger.adapters.base import SchemaDriftError, SourceContext

SAVINGS_PLAN_REGION_INDEX = "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/current/region_index.json"
# productFamily -> the Commitment of warehouse.records it is sold as.
PLAN_KINDS = {"ComputeSavingsPlans": "compute_savings_plan", "EC2InstanceSavingsPlans": "ec2_instance_savings_plan"}
PAYMENTS = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
# The usage and operation a Linux shared on-demand instance is billed under.
LINUX_OPERATION = "RunInstances"
BOX_USAGE = "BoxUsage:"

SKIP_OTHER_SERVICE = "savings-plan rates of other services (Fargate, Lambda, SageMaker)"
SKIP_OTHER_USAGE = "savings-plan rates of EC2 usage other than Linux shared on-demand GPU instances"
SKIP_NO_ON_DEMAND = "savings-plan rates whose discounted SKU is no on-demand offer of the region"
SKIP_OTHER_PLAN = "savings-plan terms of plans other than Compute and EC2 Instance Savings Plans"


@dataclass(frozen=True)
class SavingsPlanRate:
    commitment: str  # compute_savings_plan | ec2_instance_savings_plan
    term_months: int
    payment_option: str  # no_upfront | partial_upfront | all_upfront
    plan_sku: str
    discounted_sku: str
    usage_type: str
    instance_type: str
    rate: str  # as the file writes it
    currency: str
    rate_code: str
    description: str


def parse_savings_plan_index(doc: Any) -> dict[str, str]:
    try:
        return {r["regionCode"]: r["versionUrl"] for r in doc["regions"]}
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: Savings Plans region index lacks regions/regionCode/versionUrl ({err!r})") \
            from None


def instance_type_of(usage_type: str) -> str | None:
    """'USE2-BoxUsage:p5.48xlarge' or 'BoxUsage:p5.48xlarge' -> 'p5.48xlarge'; None for other usage."""
    head, sep, itype = usage_type.partition(BOX_USAGE)
    return itype if sep and itype and (not head or head.endswith("-")) else None


def parse_savings_plan_chunks(chunks: Iterable[bytes], region: str, families: Collection[str],
                              skipped: Counter[str] | None = None) -> list[SavingsPlanRate]:
    """A region's Savings Plans file as it streams -> the rates for Linux shared on-demand usage of
    `families`; every other rate counted in `skipped` by reason."""
    skipped = Counter() if skipped is None else skipped
    plans: dict[str, tuple[str, str]] = {}  # plan sku -> (commitment, payment option)
    terms: list[tuple[str, int, str, list[dict[str, Any]]]] = []  # (sku, months, description, kept rates)

    def product(item: Any) -> None:
        try:
            kind = PLAN_KINDS.get(item.get("productFamily", ""))
            payment = PAYMENTS.get((item.get("attributes") or {}).get("purchaseOption", ""))
            if kind is not None and payment is not None:
                plans[item["sku"]] = (kind, payment)
        except (AttributeError, KeyError, TypeError) as err:
            raise SchemaDriftError(f"aws: Savings Plans file for {region}: a product lacks {err}") from None

    def term(item: Any) -> None:
        try:
            if (length := item["leaseContractLength"]).get("unit") != "year":
                raise SchemaDriftError(f"aws: Savings Plans file for {region}: term {item['sku']} lasts "
                                       f"{length!r}, not whole years")
            kept = []
            for rate in item["rates"]:
                itype = instance_type_of(rate.get("discountedUsageType", ""))
                if rate.get("discountedServiceCode") != "AmazonEC2":
                    skipped[SKIP_OTHER_SERVICE] += 1
                elif rate.get("discountedOperation") != LINUX_OPERATION or itype is None \
                        or family_of(itype) not in families:
                    skipped[SKIP_OTHER_USAGE] += 1
                else:
                    kept.append(dict(discounted_sku=rate["discountedSku"], usage_type=rate["discountedUsageType"],
                                     instance_type=itype, rate_code=rate.get("rateCode", ""),
                                     rate=str(rate["discountedRate"]["price"]),
                                     currency=rate["discountedRate"].get("currency", "")))
            terms.append((item["sku"], int(length["duration"]) * 12, item.get("description", ""), kept))
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise SchemaDriftError(f"aws: Savings Plans file for {region}: a term lacks or garbles {err}") \
                from None

    parsers = [ijson.items_coro(SimpleNamespace(send=product), "products.item"),
               ijson.items_coro(SimpleNamespace(send=term), "terms.savingsPlan.item")]
    try:
        for chunk in filter(None, chunks):
            for parser in parsers:
                parser.send(chunk)
        for parser in parsers:
            parser.close()
    except ijson.JSONError as err:
        raise SchemaDriftError(f"aws: Savings Plans file for {region} is not valid JSON "
                               f"(truncated download?): {str(err)[:200]}") from None
    rates = []
    for sku, months, description, kept in terms:
        if sku not in plans:
            skipped[SKIP_OTHER_PLAN] += 1
            continue
        commitment, payment = plans[sku]
        rates.extend(SavingsPlanRate(commitment=commitment, term_months=months, payment_option=payment,
                                     plan_sku=sku, description=description, **r) for r in kept)
    return rates


def fetch_savings_plans(ctx: SourceContext, client: Any, region: str, index: dict[str, str],
                        skipped: Counter[str]) -> list[SavingsPlanRate]:
    if region not in index:
        return []
    return parse_savings_plan_chunks(ctx.stream_bytes(client, PRICING_BULK_HOST, index[region]), region,
                                     GPU_FAMILIES, skipped)


def join_on_demand(rates: list[SavingsPlanRate], on_demand_skus: Collection[str],
                   skipped: Counter[str]) -> list[SavingsPlanRate]:
    """The rates whose `discountedSku` is an on-demand offer of the region; the others counted in `skipped`."""
    kept = [rate for rate in rates if rate.discounted_sku in on_demand_skus]
    if len(rates) > len(kept):
        skipped[SKIP_NO_ON_DEMAND] += len(rates) - len(kept)
    return kept
