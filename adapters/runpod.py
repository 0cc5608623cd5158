"""RunPod: per-GPU prices of Secure Cloud and Community Cloud pods, on-demand and spot.

Source: one GraphQL query, `POST https://api.runpod.io/graphql`. The public
price fields need no API key (gpuhunt queries them without one); when
RUNPOD_API_KEY is set it is sent as the documented `api_key` query parameter.
The answer is a single JSON body: `gpuTypes` is not paginated.

    gpuTypes { id displayName manufacturer memoryInGb secureCloud communityCloud
               securePrice communityPrice secureSpotPrice communitySpotPrice
               secureStock: lowestPrice(input: {gpuCount: 1, secureCloud: true}) {...}
               communityStock: lowestPrice(input: {gpuCount: 1, secureCloud: false}) {...} }

Row shape. RunPod prices a GPU per cloud, not per data center, so the region
is the cloud: "secure-cloud" or "community-cloud". Each GPU type offered in a
cloud gives up to two offers there: on_demand (securePrice/communityPrice) and
interruptible (secureSpotPrice/communitySpotPrice, RunPod's "spot" pods, which
can be stopped when outbid). A null price means "not sold that way" and gives
no row; a zero or negative price is a contract breach and is quarantined.
instance_type is "1x <RunPod GPU type id>" with gpu_count 1: prices are per
GPU, and the id (unlike the display name or our canonical name) is unique.

Availability comes from the two aliased `lowestPrice` blocks (one per cloud,
the GraphQL alias keeps it one request): stockStatus High/Medium/Low becomes
availability_level "high"/"medium"/"low", null means no stock
(available=False); maxUnreservedGpuCount is available_count.

GraphQL reports errors with HTTP 200 and an `errors` list: a validation error
(a field RunPod renamed or removed) raises SchemaDriftError, any other
SourceError, each naming RunPod's message.

Storage and egress are not in the API: RunPod's docs give network volumes
0.07 USD/GB-month (0.05 above 1 TB), container and pod-volume disk 0.10
(pod volumes 0.20 while stopped), and no data-transfer fees; they are emitted
per cloud so they join to the offers' regions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard, stated_currency
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse import interruption
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "runpod"
API_HOST = "api.runpod.io"
GRAPHQL_PATH = "/graphql"
API_KEY_ENV = "RUNPOD_API_KEY"
OPERATION = "GpuTypePrices"

_STOCK_FIELDS = ("stockStatus maxUnreservedGpuCount availableGpuCounts minimumBidPrice uninterruptablePrice "
                 "minVcpu minMemory")
QUERY = (
    f"query {OPERATION} {{ gpuTypes {{ id displayName manufacturer memoryInGb maxGpuCount "
    "secureCloud communityCloud securePrice communityPrice secureSpotPrice communitySpotPrice "
    f"secureStock: lowestPrice(input: {{gpuCount: 1, secureCloud: true}}) {{ {_STOCK_FIELDS} }} "
    f"communityStock: lowestPrice(input: {{gpuCount: 1, secureCloud: false}}) {{ {_STOCK_FIELDS} }} }} }}"
)


@dataclass(frozen=True)
class Cloud:
    region: str  # our region name for the cloud
    offered_flag: str  # gpuType field: is this GPU sold in this cloud
    on_demand_price: str
    spot_price: str
    stock_alias: str


CLOUDS = (
    Cloud("secure-cloud", "secureCloud", "securePrice", "secureSpotPrice", "secureStock"),
    Cloud("community-cloud", "communityCloud", "communityPrice", "communitySpotPrice", "communityStock"),
)
REQUIRED_FIELDS = ("id", "memoryInGb", "secureCloud", "communityCloud", "securePrice", "communityPrice",
                   "secureSpotPrice", "communitySpotPrice")

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(API_KEY_ENV,),
    facts=ProviderFacts(
        display_name="RunPod",
        kind="gpu_cloud",
        billing_granularity_s=1,
        minimum_charge_s=None,
        billing_notes="Pods are billed per second, compute and storage alike.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped pod stops compute billing; its volume disk keeps billing at 0.20 USD/GB-month "
                              "(0.10 while running).",
        access_ssh=True,
        access_docker=True,
        access_jupyter=True,
        multinode_interconnect="Instant Clusters (bandwidth not verified)",
        interruptible_offer="Spot pods (interruptible; stopped when outbid or reclaimed)",
        price_source="RunPod GraphQL API gpuTypes (no key needed for prices); storage/egress from the docs",
        source_urls=[
            "https://docs.runpod.io/sdks/graphql/configurations",
            "https://docs.runpod.io/references/graphql-spec",
            "https://docs.runpod.io/accounts-billing/billing",
            "https://docs.runpod.io/pods/storage",
        ],
    ),
)

# (storage_class, USD per GB-month, clouds it exists in, description) from RunPod's storage docs.
DOCUMENTED_STORAGE = (
    ("network-volume", 0.07, ("secure-cloud",),
     "network volume, 0.07 USD/GB-month up to 1 TB, 0.05 above (RunPod storage docs); Secure Cloud only"),
    ("container-disk", 0.10, ("secure-cloud", "community-cloud"),
     "container disk, 0.10 USD/GB-month, billed while the pod runs (RunPod storage docs)"),
    ("pod-volume", 0.10, ("secure-cloud", "community-cloud"),
     "pod volume disk, 0.10 USD/GB-month running, 0.20 while the pod is stopped (RunPod storage docs)"),
)


def check_graphql_errors(doc: Any) -> None:
    """GraphQL answers failures with HTTP 200: raise on an `errors` list, naming RunPod's message."""
    if not isinstance(doc, dict):
        raise SchemaDriftError(f"runpod: GraphQL answer is not a JSON object ({type(doc).__name__})")
    errors = doc.get("errors")
    if not errors:
        return
    messages = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)[:500]
    codes = {str((e.get("extensions") or {}).get("code", "")) for e in errors if isinstance(e, dict)}
    if "GRAPHQL_VALIDATION_FAILED" in codes or "Cannot query field" in messages:
        raise SchemaDriftError(f"runpod: GraphQL rejected the query (schema changed?): {messages}")
    raise SourceError(f"runpod: GraphQL error: {messages}")


@drift_guard("runpod: gpuTypes")
def parse_gpu_types(doc: Any) -> Batch:
    """A gpuTypes answer -> offers per GPU type, cloud and purchase option, plus documented storage/egress."""
    check_graphql_errors(doc)
    gpu_types = (doc.get("data") or {}).get("gpuTypes")
    if not isinstance(gpu_types, list):
        raise SchemaDriftError("runpod: GraphQL answer lacks data.gpuTypes")
    batch = Batch(NAME)
    for gt in sorted(gpu_types, key=lambda g: str(g.get("id")) if isinstance(g, dict) else ""):
        add_gpu_type(batch, gt)
    _add_documented_terms(batch)
    return batch


def add_gpu_type(batch: Batch, gt: Any) -> None:
    """One gpuTypes element -> its offers in each cloud that sells it."""
    if not isinstance(gt, dict):
        raise SchemaDriftError(f"runpod: a gpuTypes element is not an object ({str(gt)[:80]})")
    missing = [f for f in REQUIRED_FIELDS if f not in gt]
    if missing:
        raise SchemaDriftError(f"runpod: gpuType {gt.get('id')!r} lacks {missing}")
    gpu_id = str(gt["id"])
    memory_gb = gt.get("memoryInGb")
    currency = stated_currency(gt)
    if currency not in (None, "USD"):
        batch.quarantine("offer", gpu_id, f"prices in {currency}, not USD; no conversion is configured", gt)
        return
    try:
        model, exact = canonicalize(NAME, gpu_id, memory_gb * 1024 if memory_gb else None)
    except UnknownGPUError as err:
        batch.quarantine("offer", gpu_id, f"gpu: {err}", gt)
        return
    for cloud in CLOUDS:
        if not gt[cloud.offered_flag]:
            continue
        stock = gt.get(cloud.stock_alias)
        for option, price_field in (("on_demand", cloud.on_demand_price), ("interruptible", cloud.spot_price)):
            price = gt[price_field]
            if price is None:
                continue  # not sold this way in this cloud
            batch.offer(
                f"{cloud.region}/{gpu_id}/{option}", gt, region=cloud.region, zone="",
                instance_type=f"1x {gpu_id}", purchase_option=option,
                gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=gpu_id,
                gpu_vendor=model.vendor, gpu_count=1, gpu_memory_gb=memory_gb or None,
                gpu_memory_gb_nominal=model.memory_gb, total_gpu_memory_gb=memory_gb or None,
                vcpus=_positive_or_none((stock or {}).get("minVcpu")),
                ram_gb=_positive_or_none((stock or {}).get("minMemory")),
                price_per_hour=price, source_currency="USD", source_price_per_hour=price,
                billing_granularity_s=PROVIDER.facts.billing_granularity_s,
                minimum_charge_s=PROVIDER.facts.minimum_charge_s,
                **availability(stock),
                **(interruption.from_stock_level(availability(stock)["availability_level"])
                   if option == "interruptible" else {}),
                provider_data=json.dumps(_provider_data(gt, cloud, stock), sort_keys=True),
            )


def availability(stock: Any) -> dict[str, Any]:
    """lowestPrice stock block -> availability fields; no block (not queried) -> unknown."""
    if not isinstance(stock, dict):
        return {"available": None, "available_count": None, "availability_level": None}
    status = stock.get("stockStatus")
    level = str(status).strip().lower() if status else None
    count = stock.get("maxUnreservedGpuCount")
    return {
        "available": level not in (None, "", "none"),
        "available_count": int(count) if isinstance(count, (int, float)) and count >= 0 else None,
        "availability_level": level or "none",
    }


def _positive_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _provider_data(gt: dict[str, Any], cloud: Cloud, stock: Any) -> dict[str, Any]:
    stock = stock if isinstance(stock, dict) else {}
    return {
        "gpu_type_id": gt["id"], "display_name": gt.get("displayName"), "max_gpu_count": gt.get("maxGpuCount"),
        "cloud": cloud.region, "available_gpu_counts": stock.get("availableGpuCounts"),
        "minimum_bid_price": stock.get("minimumBidPrice"), "uninterruptable_price": stock.get("uninterruptablePrice"),
    }


def _add_documented_terms(batch: Batch) -> None:
    source = {"source": PROVIDER.facts.source_urls[3]}  # storage docs
    for storage_class, usd, clouds, description in DOCUMENTED_STORAGE:
        for region in clouds:
            batch.add("storage", f"{region}/{storage_class}", source, region=region, storage_class=storage_class,
                      usd_per_gb_month=usd, source_currency="USD", source_usd_per_gb_month=usd,
                      description=description)
    for cloud in CLOUDS:
        batch.add("egress", f"{cloud.region}/internet", {"source": PROVIDER.facts.source_urls[2]},
                  region=cloud.region, destination="internet", tier_start_gb=0.0, tier_end_gb=None,
                  usd_per_gb=0.0, source_currency="USD", source_usd_per_gb=0.0,
                  description="RunPod charges no data ingress or egress (transfer) fees (RunPod billing docs)")


# -- fetching ---------------------------------------------------------------------

def fetch_gpu_types(ctx: SourceContext) -> Any:
    key = os.environ.get(API_KEY_ENV, "").strip()
    params = {"api_key": key} if key else None  # documented auth; never part of an error message
    body = {"operationName": OPERATION, "query": QUERY, "variables": {}}
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        return ctx.post_json(client, API_HOST, GRAPHQL_PATH, json=body, params=params)


def fetch(ctx: SourceContext) -> Batch:
    """One GraphQL request: every GPU type's prices and stock in both clouds."""
    return parse_gpu_types(fetch_gpu_types(ctx))
