"""Latitude.sh: GPU bare-metal plans, their hourly USD price per region and stock.

`GET https://api.latitude.sh/plans?filter[gpu]=true`, the key (LATITUDESH_AUTH_TOKEN) as the raw
`Authorization` header, one JSON:API answer, each plan region priced per currency ({"USD": {"hour", "month"}}).
A region with no USD hourly price (null: not sold there) is counted, BRL is not converted; the monthly
and yearly commitment prices go to provider_data.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME, API_HOST, PLANS_PATH, API_KEY_ENV = "latitudesh", "api.latitude.sh", "/plans", "LATITUDESH_AUTH_TOKEN"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Latitude.sh", kind="gpu_cloud", billing_granularity_s=3600, minimum_charge_s=3600,
        billing_notes="Bare-metal servers are billed hourly, or at lower monthly and yearly rates "
                      "(latitude.sh/pricing); the monthly and yearly prices are kept in provider_data.",
        stopped_billing_notes="A deployed server bills until it is deleted; powering it off is not documented "
                              "as pausing the charge.",
        access_ssh=True,
        price_source="Latitude.sh API GET /plans?filter[gpu]=true (API key), the data behind latitude.sh/pricing",
        source_urls=["https://docs.latitude.sh/reference/get-plans", "https://www.latitude.sh/pricing",
                     "https://github.com/latitudesh/latitudesh-python-sdk"]),
)


@drift_guard("latitudesh: plans")
def parse_plans(doc: Any) -> Batch:
    """The plans answer -> one on-demand offer per GPU plan and region priced in USD."""
    plans = dig(doc, "data")
    if not isinstance(plans, list):
        raise SchemaDriftError("latitudesh: the plans answer lacks the 'data' list")
    gpu = [p for p in plans if (dig(p, "attributes", "specs", "gpu", "count") or 0) > 0]
    regions = [(p, r) for p in gpu for r in dig(p, "attributes", "regions") or []]
    if not regions:
        raise SourceError("latitudesh: the plans answer returned no GPU plan regions")
    if not any(dig(r, "pricing", "USD", "hour") is not None for _, r in regions):
        raise SchemaDriftError("latitudesh: no GPU plan region has a USD 'hour' price (the answer changed shape)")
    batch, skipped, seen = PROVIDER.batch(), Counter[str](), set[tuple[str, str]]()
    for plan, region in regions:
        _add(batch, plan["attributes"], region, seen, skipped)
    batch.note_skipped(f"latitudesh: {len(gpu)} GPU plans of {len(plans)} listed, {len(regions)} plan regions", skipped)
    return batch


def _add(batch: Batch, plan: dict[str, Any], region: Any, seen: set[tuple[str, str]], skipped: Counter[str]) -> None:
    slug, where = str(plan.get("slug") or "?"), str(dig(region, "name") or "?")
    ref = f"{slug}/{where}"
    if batch.listed_again(seen, (slug, where), f"plan region {ref}", region, ref=ref):
        return
    usd = dig(region, "pricing", "USD")
    if not isinstance(usd, dict) or usd.get("hour") is None:
        other = [c for c, v in (dig(region, "pricing") or {}).items() if dig(v, "hour")]
        if other:
            batch.usd_only("offer", ref, other[0], region)
        else:
            skipped["plan regions without an hourly price (not sold there)"] += 1
        return
    gpu, specs = plan["specs"]["gpu"], plan["specs"]
    in_stock = dig(region, "locations", "in_stock") or []
    level = dig(region, "stock_level")
    try:
        price = as_number(usd["hour"], "USD hour", ValueError)
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", region)
    data = {"plan_id": plan.get("id"), "usd_month": usd.get("month"), "usd_year": usd.get("year"),
            "locations": dig(region, "locations"), "deploys_instantly": region.get("deploys_instantly")}
    cpu, link = specs.get("cpu") or {}, gpu.get("interconnect")
    network = isinstance(link, str) and "bps" in link  # "800Gbps Dual Plane RoCE" is the network, not NVLink
    batch.offer(ref, {"plan": slug, "region": region}, gpu=str(gpu.get("type") or ""),
                gpu_memory_gb=gpu.get("vram_per_gpu"), gpu_count=gpu.get("count"), region=where, instance_type=slug,
                purchase_option="on_demand", price_per_hour=price,
                vcpus=(cpu.get("cores") or 0) * (cpu.get("count") or 1) or None, ram_gb=dig(specs, "memory", "total"),
                interconnect=None if network else link, multinode_fabric=link if network else None,
                available=level != "unavailable" and bool(in_stock),
                availability_level=level, provider_data=data)


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, "Authorization: {key}", needs="the plans API needs an API key") as client:
        return parse_plans(ctx.get_json(client, API_HOST, PLANS_PATH, params={"filter[gpu]": "true"}))
