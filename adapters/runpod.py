"""RunPod: per-GPU prices of Secure Cloud and Community Cloud pods (the regions), on-demand and spot, from the
GraphQL API (no key needed); the stock levels asked apart, an enrichment that may fail alone.
"""

from __future__ import annotations

from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard, stated_currency
from gpuledger.adapters.contract import Enrichment, ProviderSpec
from gpuledger.warehouse import interruption
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "runpod"
API_HOST = "api.runpod.io"
GRAPHQL_PATH = "/graphql"
API_KEY_ENV = "RUNPOD_API_KEY"
OPERATION = "GpuTypePrices"
STOCK_OPERATION = "GpuTypeStock"
STOCK_LEVELS = "stock levels"

QUERY = (f"query {OPERATION} {{ gpuTypes {{ id displayName manufacturer memoryInGb maxGpuCount secureCloud "
         "communityCloud securePrice communityPrice secureSpotPrice communitySpotPrice } }")
_STOCK_FIELDS = ("stockStatus maxUnreservedGpuCount availableGpuCounts minimumBidPrice uninterruptablePrice "
                 "minVcpu minMemory")
STOCK_QUERY = (
    f"query {STOCK_OPERATION} {{ gpuTypes {{ id "
    f"secureStock: lowestPrice(input: {{gpuCount: 1, secureCloud: true}}) {{ {_STOCK_FIELDS} }} "
    f"communityStock: lowestPrice(input: {{gpuCount: 1, secureCloud: false}}) {{ {_STOCK_FIELDS} }} }} }}"
)


# Our region name for each cloud -> the prefix of its gpuType fields (secureCloud: sold there; securePrice,
# secureSpotPrice) and of its stock alias (secureStock).
CLOUDS = {"secure-cloud": "secure", "community-cloud": "community"}
REQUIRED_FIELDS = ("id", "memoryInGb",
                   *(cloud + field for field in ("Cloud", "Price", "SpotPrice") for cloud in CLOUDS.values()))

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,),
    # provider_data holds the stock block's counts and bid prices beside the type's name and
    # maximum GPU count, which the price query gives again on every run.
    enrichments=(Enrichment(name=STOCK_LEVELS, columns=(
        "available", "available_count", "availability_level", "vcpus", "ram_gb", "interruption_risk_level",
        "interruption_rate_max_pct", "interruption_risk_source", "provider_data")),),
    facts=ProviderFacts(
        display_name="RunPod", kind="gpu_cloud", billing_granularity_s=1, minimum_charge_s=None,
        billing_notes="Pods are billed per second, compute and storage alike.", storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped pod stops compute billing; its volume disk keeps billing at 0.20 USD/GB-month "
                              "(0.10 while running).",
        access_ssh=True, access_docker=True, access_jupyter=True,
        multinode_interconnect="Instant Clusters (bandwidth not verified)",
        interruptible_offer="Spot pods (interruptible; stopped when outbid or reclaimed)",
        price_source="RunPod GraphQL API gpuTypes (no key needed for prices); storage/egress from the docs",
        source_urls=["https://docs.runpod.io/sdks/graphql/configurations",
                     "https://docs.runpod.io/references/graphql-spec",
                     "https://docs.runpod.io/accounts-billing/billing", "https://docs.runpod.io/pods/storage"]),
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


def gpu_types(doc: Any) -> list[Any]:
    """The `data.gpuTypes` list of an answer; an `errors` list raises, naming RunPod's message."""
    if not isinstance(doc, dict):
        raise SchemaDriftError(f"runpod: GraphQL answer is not a JSON object ({type(doc).__name__})")
    if errors := doc.get("errors"):
        messages = "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)[:500]
        codes = {str((e.get("extensions") or {}).get("code", "")) for e in errors if isinstance(e, dict)}
        if "GRAPHQL_VALIDATION_FAILED" in codes or "Cannot query field" in messages:
            raise SchemaDriftError(f"runpod: GraphQL rejected the query (schema changed?): {messages}")
        raise SourceError(f"runpod: GraphQL error: {messages}")
    types = (doc.get("data") or {}).get("gpuTypes")
    if not isinstance(types, list):
        raise SchemaDriftError("runpod: GraphQL answer lacks data.gpuTypes")
    return types


@drift_guard("runpod: stock levels")
def parse_stock(doc: Any) -> dict[str, dict[str, Any]]:
    """A stock answer -> GPU type id -> its lowestPrice block per cloud alias."""
    return {str(gt["id"]): {f"{cloud}Stock": gt.get(f"{cloud}Stock") for cloud in CLOUDS.values()}
            for gt in gpu_types(doc)}


@drift_guard("runpod: gpuTypes")
def parse_gpu_types(doc: Any, stock: dict[str, dict[str, Any]] | None = None) -> Batch:
    """A price answer (and the stock per type id, when it came) -> offers, plus the documented storage/egress."""
    batch = PROVIDER.batch()
    for gt in sorted(gpu_types(doc), key=lambda g: str(g.get("id")) if isinstance(g, dict) else ""):
        if stock and isinstance(gt, dict):
            gt = {**gt, **stock.get(str(gt.get("id")), {})}
        add_gpu_type(batch, gt)
    _add_documented_terms(batch)
    return batch


def add_gpu_type(batch: Batch, gt: Any) -> None:
    """One gpuTypes element (with its stock blocks, if any) -> its offers in each cloud that sells it."""
    if not isinstance(gt, dict):
        raise SchemaDriftError(f"runpod: a gpuTypes element is not an object ({str(gt)[:80]})")
    if missing := [f for f in REQUIRED_FIELDS if f not in gt]:
        raise SchemaDriftError(f"runpod: gpuType {gt.get('id')!r} lacks {missing}")
    gpu_id, memory_gb = str(gt["id"]), gt.get("memoryInGb")
    if (currency := stated_currency(gt)) not in (None, "USD"):
        batch.quarantine("offer", gpu_id, f"prices in {currency}, not USD; no conversion is configured", gt)
        return
    try:  # once per type: an unknown card is one quarantine entry, not one per offer
        model, exact = canonicalize(NAME, gpu_id, memory_gb * 1024 if memory_gb else None)
    except UnknownGPUError as err:
        batch.quarantine("offer", gpu_id, f"gpu: {err}", gt)
        return
    for region, cloud in CLOUDS.items():
        if not gt[f"{cloud}Cloud"]:
            continue
        stock = gt.get(f"{cloud}Stock")
        block = stock if isinstance(stock, dict) else {}
        found = availability(stock)
        data = {"gpu_type_id": gt["id"], "display_name": gt.get("displayName"), "max_gpu_count": gt.get("maxGpuCount"),
                "cloud": region, "available_gpu_counts": block.get("availableGpuCounts"),
                "minimum_bid_price": block.get("minimumBidPrice"),
                "uninterruptable_price": block.get("uninterruptablePrice")}
        for option, price_field in (("on_demand", f"{cloud}Price"), ("interruptible", f"{cloud}SpotPrice")):
            if (price := gt[price_field]) is None:
                continue  # not sold this way in this cloud
            risk = interruption.from_stock_level(found["availability_level"]) if option == "interruptible" else {}
            batch.offer(
                f"{region}/{gpu_id}/{option}", gt, gpu_model=model.gpu_model, gpu_variant_exact=exact,
                gpu_name_reported=gpu_id, gpu_count=1, gpu_memory_gb=memory_gb or None, region=region,
                instance_type=f"1x {gpu_id}", purchase_option=option, price_per_hour=price,
                vcpus=_positive_or_none(block.get("minVcpu")), ram_gb=_positive_or_none(block.get("minMemory")),
                **found, **risk, provider_data=data)


def availability(stock: Any) -> dict[str, Any]:
    """lowestPrice stock block -> availability fields; no block -> unknown. stockStatus High -> "high"."""
    if not isinstance(stock, dict):
        return {"available": None, "available_count": None, "availability_level": None}
    status = stock.get("stockStatus")
    level = str(status).strip().lower() if status else None
    count = stock.get("maxUnreservedGpuCount")
    return {"available": level not in (None, "", "none"), "availability_level": level or "none",
            "available_count": int(count) if isinstance(count, (int, float)) and count >= 0 else None}


def _positive_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _add_documented_terms(batch: Batch) -> None:
    source = {"source": PROVIDER.facts.source_urls[3]}  # storage docs
    for storage_class, usd, clouds, description in DOCUMENTED_STORAGE:
        for region in clouds:
            batch.add("storage", f"{region}/{storage_class}", source, region=region, storage_class=storage_class,
                      usd_per_gb_month=usd, description=description)
    for region in CLOUDS:
        batch.add("egress", f"{region}/internet", {"source": PROVIDER.facts.source_urls[2]}, region=region,
                  destination="internet", tier_start_gb=0.0, usd_per_gb=0.0,
                  description="RunPod charges no data ingress or egress (transfer) fees (RunPod billing docs)")


def fetch(ctx: SourceContext) -> Batch:
    key = ctx.api_key(API_KEY_ENV)  # documented auth; never part of an error message
    with ctx.http_client(headers={"Accept": "application/json"}, params={"api_key": key} if key else None) as client:
        def ask(operation: str, query: str) -> Any:
            body = {"operationName": operation, "query": query, "variables": {}}
            return ctx.post_json(client, API_HOST, GRAPHQL_PATH, json=body)

        prices = ask(OPERATION, QUERY)
        gpu_types(prices)  # a failed price answer fails here, before the stock is asked for
        stock = PROVIDER.enrich(ctx, STOCK_LEVELS, lambda: parse_stock(ask(STOCK_OPERATION, STOCK_QUERY)))
    return parse_gpu_types(prices, stock)
