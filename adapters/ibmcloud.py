"""IBM Cloud VPC: GPU virtual server profiles from the public Global Catalog (no key), each priced per region
by its plan's `part-is.instance-hours-<profile>` (on demand) and `part-is.spot-<profile>` USA amounts.
"""

from __future__ import annotations

from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME, API_HOST, SEARCH_PATH = "ibmcloud", "globalcatalog.cloud.ibm.com", "/api/v1"
PRICING_PATH = "/api/v1/{plan}/pricing/deployment"
METRICS = {"part-is.instance-hours-{}": "on_demand", "part-is.spot-{}": "spot"}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    facts=ProviderFacts(
        display_name="IBM Cloud", kind="hyperscaler", billing_granularity_s=1, minimum_charge_s=60,
        billing_notes="VPC virtual servers are billed per second with a one-minute minimum; the instance-hour rate "
                      "is the Linux one, OS licences are extra per-vCPU meters.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped virtual server is not billed for its profile; its volumes keep billing.",
        access_ssh=True, interruptible_offer="spot virtual servers (part-is.spot-<profile>)",
        multinode_interconnect="cluster networks (RDMA) for gx3d H100 profiles",
        price_source="IBM Global Catalog API: instance.profile entries, GET /api/v1/{plan}/pricing/deployment",
        source_urls=["https://cloud.ibm.com/apidocs/resource-catalog/global-catalog",
                     "https://cloud.ibm.com/docs/account?topic=account-getting-pricing-api",
                     "https://cloud.ibm.com/docs/vpc?topic=vpc-accelerated-profile-family"]),
)


def _resources(doc: Any) -> list[Any]:
    if not isinstance(dig(doc, "resources"), list):
        raise SchemaDriftError("ibmcloud: a Global Catalog answer lacks the 'resources' list")
    return doc["resources"]


def _next_offset(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
    """The next `_offset` until `count` items came or a page is short of its `limit` (entries go between pages)."""
    got, count, limit = (dig(doc, "offset") or 0) + len(items), dig(doc, "count"), dig(doc, "limit")
    if not items or not isinstance(count, int) or got >= count or (isinstance(limit, int) and len(items) < limit):
        return None
    return {**request, "params": {**request["params"], "_offset": got}}


def profile_plan(profile: Any) -> str | None:
    """The pricing plan of a profile's multi-tenant instance, else its catalog starting price's."""
    plans = [d["plan"] for m in dig(profile, "metadata", "other", "profile", "measures") or []
             if dig(m, "component") == "instance" for d in dig(m, "deployments") or []
             if dig(d, "type") == "multi-tenant" and dig(d, "plan")]
    return str(plans[0]) if plans else dig(profile, "metadata", "pricing", "starting_price", "plan_id")


def gpu_profiles(profiles: list[Any]) -> list[dict[str, Any]]:
    return [p for p in profiles if (dig(p, "metadata", "other", "profile", "default_config", "gpu_count") or 0) > 0]


@drift_guard("ibmcloud: global catalog")
def parse_pricing(profiles: list[Any], pricing: dict[str, list[Any]]) -> Batch:
    """GPU profiles and their plans' deployment pricing -> offers per profile, region and option."""
    if not (gpus := gpu_profiles(profiles)):
        raise SourceError("ibmcloud: the Global Catalog returned no GPU instance profiles")
    batch, seen = PROVIDER.batch(), set[tuple[str, str, str]]()
    for p in gpus:
        name, plan = str(p.get("name")), profile_plan(p)
        if plan and not pricing.get(plan):
            raise SourceError(f"ibmcloud: plan {plan} of {name} returned no priced deployments")
        wanted = {m.format(name): option for m, option in METRICS.items()}
        metrics = [(d, m) for d in pricing.get(plan or "", []) for m in dig(d, "metrics") or []
                   if dig(m, "metric_id") in wanted]
        if not metrics:
            batch.quarantine("offer", name, f"{name}: plan {plan} has no instance-hours metric for it (priced by "
                                            "vCPU, memory and GPU components, not loaded)", p)
            continue
        usa = [(d, m, next((a for a in m.get("amounts") or [] if dig(a, "country") == "USA"), {})) for d, m in metrics]
        if not any("price" in (dig(a, "prices") or [{}])[0] for _, _, a in usa):
            raise SchemaDriftError(f"ibmcloud: {name}: no USA amount carries a 'price' (the answer changed shape)")
        for d, m, amount in usa:
            _add(batch, p, d, m, amount, wanted[m["metric_id"]], seen)
    batch.notes.append(f"ibmcloud: {len(gpus)} GPU profiles of {len(profiles)} listed, {len(pricing)} plans priced")
    return batch


def _add(batch: Batch, p: dict[str, Any], d: Any, m: dict[str, Any], amount: Any, option: str,
         seen: set[tuple[str, str, str]]) -> None:
    name, region = str(p["name"]), str(dig(d, "deployment_location") or dig(d, "deployment_region"))
    ref, raw = f"{name}/{region}/{option}", {"deployment_id": dig(d, "deployment_id"), "metric": m}
    if batch.listed_again(seen, (name, region, option), f"price {ref}", raw, ref=ref):
        return
    try:
        price = as_number((dig(amount, "prices") or [{}])[0].get("price"), "USA price", ValueError)
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", raw)
    if batch.usd_only("offer", ref, dig(amount, "currency"), raw):
        cfg = p["metadata"]["other"]["profile"]["default_config"]
        batch.offer(ref, raw, gpu=str(cfg.get("gpu_model") or ""), gpu_memory_gb=cfg.get("gpu_memory"),
                    gpu_count=cfg.get("gpu_count"), region=region, instance_type=name, purchase_option=option,
                    price_per_hour=price, vcpus=cfg.get("cpu"), ram_gb=cfg.get("ram"),
                    network_gbps=cfg["bandwidth"] / 1000 if isinstance(cfg.get("bandwidth"), (int, float)) else None,
                    provider_data={"plan": profile_plan(p), "deployment_id": raw["deployment_id"],
                                   "metric_id": m.get("metric_id")})


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        profiles = list(ctx.paginate(client, API_HOST, SEARCH_PATH, _resources, _next_offset, what="instance profiles",
                                     params={"q": "kind:instance.profile", "include": "metadata", "_limit": 100}))
        plans = sorted({plan for p in gpu_profiles(profiles) if (plan := profile_plan(p))})
        pricing = {plan: list(ctx.paginate(client, API_HOST, PRICING_PATH.format(plan=plan), _resources, _next_offset,
                                           params={"_limit": 100}, what=f"plan {plan} pricing")) for plan in plans}
    return parse_pricing(profiles, pricing)
