"""Hyperbolic: the GPU marketplace's machines, each at the hourly price its supplier sets.

`POST https://api.hyperbolic.xyz/v1/marketplace` with `{"filters": {}}`; no key needed (HYPERBOLIC_API_KEY,
when set, goes as a Bearer token); prices in US cents per GPU-hour, GPU memory in MiB.
A machine is rented by the GPU: one offer per machine for one GPU, available when it is ready, not
reserved and has a GPU free.
"""

from __future__ import annotations

from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, failure_reason

NAME = "hyperbolic"
API_HOST = "api.hyperbolic.xyz"
MARKETPLACE_PATH = "/v1/marketplace"
API_KEY_ENV = "HYPERBOLIC_API_KEY"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,),
    anomaly=AnomalyThresholds(min_row_ratio=0.2),  # machines come and go with their suppliers
    facts=ProviderFacts(
        display_name="Hyperbolic", kind="marketplace", billing_granularity_s=3600,
        billing_notes="Each supplier sets its machine's price per GPU-hour under Hyperbolic's maximum for the "
                      "GPU type (H100 SXM 3.20 USD); renters pay from prepaid credits. The billing increment is "
                      "not documented, so whole hours are assumed.",
        stopped_billing_notes="Instances are terminated, not stopped; an instance is terminated when the renter's "
                              "credits fall below zero.",
        access_ssh=True,
        price_source="Hyperbolic marketplace API POST /v1/marketplace (no key): price in US cents per GPU-hour",
        source_urls=("https://docs.hyperbolic.xyz/docs/marketplace-api",
                     "https://docs.hyperbolic.xyz/docs/gpu-marketplace-pricing")),
)


@drift_guard("hyperbolic: marketplace")
def parse_marketplace(doc: Any) -> Batch:
    machines = dig(doc, "instances")
    if not isinstance(machines, list):
        raise SchemaDriftError("hyperbolic: the marketplace answer lacks the 'instances' list")
    if not machines:
        raise SourceError("hyperbolic: the marketplace returned no machines")
    batch, seen = PROVIDER.batch(), set()
    for machine in machines:
        node = dig(machine, "id")
        try:
            model, mib = str(machine["hardware"]["gpus"][0]["model"]), machine["hardware"]["gpus"][0].get("ram")
            total, free = int(machine["gpus_total"]), int(machine["gpus_total"]) - int(machine["gpus_reserved"])
            cents = as_number(machine["pricing"]["price"]["amount"], "pricing.price.amount", ValueError)
            region = machine["location"]["region"]
            vcores = (machine["hardware"].get("cpus") or [{}])[0].get("virtual_cores")
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            batch.quarantine("offer", str(node), failure_reason(err), machine)
            continue
        if batch.listed_again(seen, node, f"machine {node}", machine):
            continue
        ready = machine.get("status") == "node_ready" and not machine.get("reserved") and free > 0
        data = {"cluster_name": machine.get("cluster_name"), "gpus_total": total, "price_cents": cents,
                "supplier_id": machine.get("supplier_id")}
        batch.offer(str(node), machine, gpu=model, gpu_count=1, region=str(region),
                    gpu_memory_gb=round(mib / 1024, 3) if isinstance(mib, (int, float)) and mib > 0 else None,
                    instance_type=str(node), purchase_option="on_demand", price_per_hour=cents / 100,
                    available=ready, available_count=max(free, 0) if ready else 0,
                    billing_granularity_s=None, minimum_charge_s=None,  # not documented: the offer claims none
                    provider_data=dict(data, virtual_cores=vcores))
    return batch


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV) as client:
        return parse_marketplace(ctx.post_json(client, API_HOST, MARKETPLACE_PATH, json={"filters": {}}))
