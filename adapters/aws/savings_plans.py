"""AWS Savings Plans (Compute and EC2 Instance, 1 and 3 years) from the public Savings Plans price list.

Format (AWS Billing User Guide, "Reading the service price list file for a Savings Plan"): the
region index lists `regions` with their `regionCode` and `versionUrl`. A region file holds
`products` (one per plan: `sku`, `productFamily`, `attributes.purchaseOption`) and
`terms.savingsPlan` (one per plan `sku`: `leaseContractLength` {duration, unit} and `rates`, each
the plan's hourly rate `discountedRate` {price, currency} of the on-demand SKU `discountedSku`).
A rate is the effective hourly rate whatever the payment option. The file holds every instance
type, OS and tenancy, Fargate and Lambda: it is parsed as it streams (ijson), keeping only rates
of Linux on-demand usage of GPU families.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Collection, Iterable

import ijson

from gpuledger.adapters.base import SchemaDriftError, SourceContext, drift_guard

SAVINGS_PLAN_REGION_INDEX = "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/current/region_index.json"
# productFamily -> the Commitment of warehouse.records it is sold as.
PLAN_KINDS = {"ComputeSavingsPlans": "compute_savings_plan", "EC2InstanceSavingsPlans": "ec2_instance_savings_plan"}
PAYMENTS = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
# The usage a Linux, shared-tenancy on-demand instance is billed under (`BoxUsage:<type>`, with the
# region's prefix outside us-east-1) and its operation.
LINUX_OPERATION = "RunInstances"
BOX_USAGE = "BoxUsage:"

# Why a Savings Plans rate or plan becomes no offer: keys of the skip counts in the refresh notes.
SKIP_OTHER_SERVICE = "savings-plan rates of other services (Fargate, Lambda, SageMaker)"
SKIP_OTHER_USAGE = "savings-plan rates of EC2 usage other than Linux shared on-demand GPU instances"
SKIP_NO_ON_DEMAND = "savings-plan rates whose discounted SKU is no on-demand offer of the region"
SKIP_OTHER_PLAN = "savings-plan terms of plans other than Compute and EC2 Instance Savings Plans"


@dataclass(frozen=True)
class SavingsPlanRate:
    """One plan's hourly rate for one on-demand SKU."""

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


@drift_guard("aws: Savings Plans region index")
def parse_savings_plan_index(doc: Any) -> dict[str, str]:
    """region code -> path of its Savings Plans file."""
    try:
        return {r["regionCode"]: r["versionUrl"] for r in doc["regions"]}
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: Savings Plans region index lacks regions/regionCode/versionUrl ({err!r})") \
            from None


def instance_type_of(usage_type: str) -> str | None:
    """'USE2-BoxUsage:p5.48xlarge' or 'BoxUsage:p5.48xlarge' -> 'p5.48xlarge'; None for other usage."""
    head, sep, itype = usage_type.partition(BOX_USAGE)
    return itype if sep and itype and (not head or head.endswith("-")) else None


class _SavingsPlanFile:
    """What a region file's stream leaves: its plans and the rates kept of its terms."""

    def __init__(self, region: str, families: Collection[str], skipped: Counter[str]) -> None:
        self.region, self.families, self.skipped = region, families, skipped
        self.products_seen = 0
        self.plans: dict[str, tuple[str, str]] = {}  # plan sku -> (commitment, payment option)
        self.terms: list[tuple[str, int, str, list[dict[str, Any]]]] = []  # (sku, months, description, kept rates)

    def product(self, item: Any) -> None:
        self.products_seen += 1
        try:
            kind = PLAN_KINDS.get(item.get("productFamily", ""))
            payment = PAYMENTS.get((item.get("attributes") or {}).get("purchaseOption", ""))
            if kind is not None and payment is not None:
                self.plans[item["sku"]] = (kind, payment)
        except (AttributeError, KeyError, TypeError) as err:
            raise SchemaDriftError(f"aws: Savings Plans file for {self.region}: a product lacks {err}") from None

    def term(self, item: Any) -> None:
        try:
            length = item["leaseContractLength"]
            if length.get("unit") != "year":
                raise SchemaDriftError(f"aws: Savings Plans file for {self.region}: term {item['sku']} lasts "
                                       f"{length!r}, not whole years")
            kept = []
            for rate in item["rates"]:
                itype = instance_type_of(rate.get("discountedUsageType", ""))
                if rate.get("discountedServiceCode") != "AmazonEC2":
                    self.skipped[SKIP_OTHER_SERVICE] += 1
                elif rate.get("discountedOperation") != LINUX_OPERATION or itype is None \
                        or itype.split(".", 1)[0] not in self.families:
                    self.skipped[SKIP_OTHER_USAGE] += 1
                else:
                    kept.append(dict(discounted_sku=rate["discountedSku"], usage_type=rate["discountedUsageType"],
                                     instance_type=itype, rate_code=rate.get("rateCode", ""),
                                     rate=str(rate["discountedRate"]["price"]),
                                     currency=rate["discountedRate"].get("currency", "")))
            self.terms.append((item["sku"], int(length["duration"]) * 12, item.get("description", ""), kept))
        except (AttributeError, KeyError, TypeError, ValueError) as err:
            raise SchemaDriftError(f"aws: Savings Plans file for {self.region}: a term lacks or garbles {err}") \
                from None

    def rates(self) -> list[SavingsPlanRate]:
        out = []
        for sku, months, description, kept in self.terms:
            if sku not in self.plans:
                self.skipped[SKIP_OTHER_PLAN] += 1
                continue
            commitment, payment = self.plans[sku]
            out.extend(SavingsPlanRate(commitment=commitment, term_months=months, payment_option=payment,
                                       plan_sku=sku, description=description, **r) for r in kept)
        return out


def parse_savings_plan_chunks(chunks: Iterable[bytes], region: str, families: Collection[str],
                              skipped: Counter[str] | None = None) -> list[SavingsPlanRate]:
    """Stream a region's Savings Plans file (raw body chunks of any size) into the rates of Compute
    and EC2 Instance Savings Plans for Linux shared on-demand usage of the instance `families`;
    every other rate is counted in `skipped` by reason. Memory holds one term at a time."""
    found = _SavingsPlanFile(region, families, Counter() if skipped is None else skipped)
    products = ijson.items_coro(SimpleNamespace(send=found.product), "products.item")
    terms = ijson.items_coro(SimpleNamespace(send=found.term), "terms.savingsPlan.item")
    products_open = True
    try:
        for chunk in filter(None, chunks):
            products_before, terms_before = found.products_seen, len(found.terms)
            if products_open:
                products.send(chunk)
            terms.send(chunk)
            if products_open and products_before and not terms_before and found.terms:
                # The first term came in a chunk after products: that array had closed, and the rest
                # of the file, nearly all of it, need not be parsed twice.
                products_open = False
        terms.close()
        if products_open:
            products.close()
    except ijson.JSONError as err:
        raise SchemaDriftError(f"aws: Savings Plans file for {region} is not valid JSON "
                               f"(truncated download?): {str(err)[:200]}") from None
    return found.rates()


def fetch_savings_plans(ctx: SourceContext, client: Any, host: str, region: str, index: dict[str, str],
                        families: Collection[str]) -> tuple[list[SavingsPlanRate], Counter[str]]:
    """A region's Savings Plans rates (of `families` only), streamed, and the rates not kept."""
    skipped: Counter[str] = Counter()
    if region not in index:
        return [], skipped
    return parse_savings_plan_chunks(ctx.stream_bytes(client, host, index[region]), region, families, skipped), skipped


def join_on_demand(rates: list[SavingsPlanRate], on_demand_skus: Collection[str],
                   skipped: Counter[str]) -> list[SavingsPlanRate]:
    """The rates whose `discountedSku` is one of the region's on-demand offers (its price-list SKU);
    the others counted in `skipped`."""
    kept = [rate for rate in rates if rate.discounted_sku in on_demand_skus]
    if len(rates) > len(kept):
        skipped[SKIP_NO_ON_DEMAND] += len(rates) - len(kept)
    return kept
