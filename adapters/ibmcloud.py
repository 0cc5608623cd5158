"""IBM Cloud VPC: GPU virtual server profiles priced from the public Global Catalog, no key.

1. `GET https://globalcatalog.cloud.ibm.com/api/v1?q=kind:instance.profile&include=metadata`, paged by
   `_offset`/`_limit` against `count`: {"offset", "limit", "count", "resources": [{"name": "gx3-16x80x1l4",
   "kind": "instance.profile", "metadata": {"other": {"profile": {
     "default_config": {"cpu": 16, "ram": 80, "gpu_count": 1, "gpu_model": "L4", "gpu_memory": 24, "bandwidth": 32000},
     "measures": [{"component": "instance", "deployments": [{"type": "multi-tenant", "plan": "<plan id>"}]}]}}}}]}
2. Per GPU profile's plan: `GET /api/v1/{plan}/pricing/deployment`, paged alike: {"resources": [
   {"deployment_id", "deployment_location": "us-south", "metrics": [{"metric_id": "part-is.instance-hours-<profile>",
    "amounts": [{"country": "USA", "currency": "USD", "prices": [{"quantity_tier": 1, "price": 1.02}]}]}]}]}

A profile's on-demand price is its `part-is.instance-hours-<profile>` metric, its spot price
`part-is.spot-<profile>`, read from the USA (USD) amount per region. A profile priced only by
components (vCPU, memory and GPU hours, the older gx2 family) is quarantined, not summed.
"""

from __future__ import annotations

import json
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "ibmcloud"
API_HOST = "globalcatalog.cloud.ibm.com"
SEARCH_PATH = "/api/v1"
PRICING_PATH = "/api/v1/{plan}/pricing/deployment"
PAGE_SIZE = 100
METRICS = {"part-is.instance-hours-{}": "on_demand", "part-is.spot-{}": "spot"}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    facts=ProviderFacts(
        display_name="IBM Cloud", kind="hyperscaler", billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="VPC virtual servers are billed per second with a one-minute minimum (VPC pricing); the "
                      "catalog's instance-hour rate is the Linux rate, OS licences are extra per-vCPU meters.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped virtual server is not billed for its profile; boot and data volumes keep "
                              "billing, and instance storage is emptied.",
        access_ssh=True, interruptible_offer="spot virtual servers (part-is.spot-<profile>)",
        multinode_interconnect="cluster networks (RDMA) for gx3d H100 profiles",
        price_source="IBM Global Catalog API: instance.profile entries and GET /api/v1/{plan}/pricing/deployment",
        source_urls=["https://cloud.ibm.com/apidocs/resource-catalog/global-catalog",
                     "https://cloud.ibm.com/docs/account?topic=account-getting-pricing-api",
                     "https://cloud.ibm.com/docs/vpc?topic=vpc-accelerated-profile-family"]),
)


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _resources(doc: Any) -> list[Any]:
    if not isinstance(_get(doc, "resources"), list):
        raise SchemaDriftError("ibmcloud: a Global Catalog answer lacks the 'resources' list")
    return doc["resources"]


def _next_offset(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
    """The next `_offset`, until `count` items have come or a page is short of the `limit` it answered
    with (entries can go between pages: a short page ends the listing whatever the count says)."""
    got, count, limit = (_get(doc, "offset") or 0) + len(items), _get(doc, "count"), _get(doc, "limit")
    if not items or not isinstance(count, int) or got >= count or (isinstance(limit, int) and len(items) < limit):
        return None
    return {**request, "params": {**request["params"], "_offset": got}}


def profile_plan(profile: Any) -> str | None:
    """The pricing plan of a profile's multi-tenant instance (else its catalog starting price's)."""
    for m in _get(profile, "metadata", "other", "profile", "measures") or []:
        for d in _get(m, "deployments") or [] if _get(m, "component") == "instance" else []:
            if _get(d, "type") == "multi-tenant" and _get(d, "plan"):
                return str(d["plan"])
    return _get(profile, "metadata", "pricing", "starting_price", "plan_id")


def gpu_profiles(profiles: list[Any]) -> list[dict[str, Any]]:
    return [p for p in profiles if (_get(p, "metadata", "other", "profile", "default_config", "gpu_count") or 0) > 0]


@drift_guard("ibmcloud: global catalog")
def parse_pricing(profiles: list[Any], pricing: dict[str, list[Any]]) -> Batch:
    """GPU profiles and their plans' deployment pricing -> offers per profile, region and option."""
    gpus = gpu_profiles(profiles)
    if not gpus:
        raise SourceError("ibmcloud: the Global Catalog returned no GPU instance profiles")
    batch, seen = PROVIDER.batch(), set[tuple[str, str, str]]()
    for p in gpus:
        name, plan = str(p.get("name")), profile_plan(p)
        deployments = pricing.get(plan or "", [])
        if plan and not deployments:
            raise SourceError(f"ibmcloud: plan {plan} of {name} returned no priced deployments")
        wanted = {m.format(name): option for m, option in METRICS.items()}
        metrics = [(d, m) for d in deployments for m in _get(d, "metrics") or [] if _get(m, "metric_id") in wanted]
        if not metrics:
            batch.quarantine("offer", name, f"{name}: plan {plan} has no instance-hours metric for it (priced by "
                                            "vCPU, memory and GPU components, not loaded)", p)
            continue
        usa = [(d, m, next((a for a in m.get("amounts") or [] if _get(a, "country") == "USA"), None)) for d, m in metrics]
        if not any("price" in (_get(a, "prices") or [{}])[0] for _, _, a in usa if a):
            raise SchemaDriftError(f"ibmcloud: {name}: no USA amount carries a 'price' (the pricing answer changed shape)")
        for d, m, amount in usa:
            _add(batch, p, d, m, amount, wanted[m["metric_id"]], seen)
    batch.notes.append(f"ibmcloud: {len(gpus)} GPU profiles of {len(profiles)} listed, {len(pricing)} plans priced")
    return batch


def _add(batch: Batch, p: dict[str, Any], d: Any, m: dict[str, Any], amount: Any, option: str,
         seen: set[tuple[str, str, str]]) -> None:
    name, region = str(p["name"]), str(_get(d, "deployment_location") or _get(d, "deployment_region"))
    ref, raw = f"{name}/{region}/{option}", {"deployment_id": _get(d, "deployment_id"), "metric": m}
    if batch.listed_again(seen, (name, region, option), f"price {ref}", raw, ref=ref):
        return
    try:
        price = as_number((_get(amount, "prices") or [{}])[0].get("price"), "USA price", ValueError)
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", raw)
    if not batch.usd_only("offer", ref, _get(amount, "currency"), raw):
        return
    cfg = p["metadata"]["other"]["profile"]["default_config"]
    bandwidth = cfg.get("bandwidth")
    data = {"plan": profile_plan(p), "metric_id": m.get("metric_id"), "deployment_id": _get(d, "deployment_id"),
            "effective_from": m.get("effective_from")}
    batch.offer(ref, raw, gpu=str(cfg.get("gpu_model") or ""), gpu_memory_gb=cfg.get("gpu_memory"),
                gpu_count=cfg.get("gpu_count"), region=region, instance_type=name, purchase_option=option,
                price_per_hour=price, vcpus=cfg.get("cpu"), ram_gb=cfg.get("ram"),
                network_gbps=bandwidth / 1000 if isinstance(bandwidth, (int, float)) else None,
                provider_data=json.dumps(data, sort_keys=True))


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        profiles = list(ctx.paginate(client, API_HOST, SEARCH_PATH, _resources, _next_offset, what="instance profiles",
                                     params={"q": "kind:instance.profile", "include": "metadata", "_limit": PAGE_SIZE}))
        plans = sorted({plan for p in gpu_profiles(profiles) if (plan := profile_plan(p))})
        pricing = {plan: list(ctx.paginate(client, API_HOST, PRICING_PATH.format(plan=plan), _resources, _next_offset,
                                           params={"_limit": PAGE_SIZE}, what=f"plan {plan} pricing"))
                   for plan in plans}
    return parse_pricing(profiles, pricing)
