"""Lium: the GPU nodes rentable right now on Lium's marketplace, from its public node feed, no key.

`GET https://lium.io/api/public/v1/nodes`, one answer listing the nodes with free GPUs.
One offer per node: its smallest rentable unit (`min_rentable_gpu_count` GPUs, 1 when absent) with a
share of the node's CPUs, RAM and disk. A "spot" tier node can be taken back: an interruptible offer.
"""

from __future__ import annotations

from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "lium"
API_HOST = "lium.io"
NODES_PATH = "/api/public/v1/nodes"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api",
    # Nodes come and go as they are rented: a busy day can remove most of them.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    facts=ProviderFacts(
        display_name="Lium", kind="marketplace", billing_granularity_s=1, minimum_charge_s=None,
        billing_notes="Pods are billed from the account's balance for the time they run, at the node's price per "
                      "GPU-hour set by its provider (docs.lium.io).",
        stopped_billing_notes="A pod is rented until it is removed; its disk goes with it (docs.lium.io).",
        access_ssh=True, access_docker=True, access_jupyter=True,
        interruptible_offer="spot tier nodes, which their provider can take back",
        price_source="Lium public node feed GET lium.io/api/public/v1/nodes (no key)",
        source_urls=["https://docs.lium.io/developers/public-nodes-feed", "https://lium.io/pricing",
                     "https://lium.io/api/public/v1/nodes"]),
)


def _share(total: Any, part: float) -> float | None:
    return round(total * part, 2) if isinstance(total, (int, float)) and total > 0 else None


@drift_guard("lium: public nodes")
def parse_nodes(doc: Any) -> Batch:
    nodes = dig(doc, "nodes")
    if not isinstance(nodes, list):
        raise SchemaDriftError("lium: the node feed lacks the 'nodes' list")
    if not nodes:
        raise SourceError("lium: the node feed returned no nodes")
    if not any(isinstance(n, dict) and "price_per_gpu_hour" in n for n in nodes):
        raise SchemaDriftError("lium: no node has a 'price_per_gpu_hour' (the feed changed shape)")
    batch, seen = PROVIDER.batch(), set[str]()
    for node in nodes:
        ref = str(node.get("id") if isinstance(node, dict) else "?")
        if batch.listed_again(seen, ref, f"node {ref}", node):
            continue
        try:
            count = int(as_number(node["gpu_count"], "gpu_count", ValueError))
            unit = int(as_number(node.get("min_rentable_gpu_count") or 1, "min_rentable_gpu_count", ValueError))
            free = int(as_number(node.get("available_gpu_count", 0), "available_gpu_count", ValueError))
            price = as_number(node["price_per_gpu_hour"], "price_per_gpu_hour", ValueError) * unit
            if not 0 < unit <= count:
                raise ValueError(f"min_rentable_gpu_count {unit} is outside 1..{count}")
        except (KeyError, TypeError, ValueError) as err:
            batch.quarantine("offer", ref, f"node {ref}: {err}", node)
            continue
        part, spot = unit / count, node.get("tier") == "spot"
        region = "-".join(str(p).lower() for p in (node.get("country_code"), node.get("region")) if p) or "unknown"
        data = {"tier": node.get("tier"), "city": node.get("city"), "country": node.get("country"),
                "gpu_count_on_node": count, "price_per_node_hour": node.get("price_per_node_hour"),
                "rent_url": node.get("rent_url")}
        batch.offer(ref, node, gpu=str(node.get("gpu_model") or ""), gpu_memory_gb=node.get("gpu_memory_gb"),
                    gpu_count=unit, region=region, instance_type=ref, price_per_hour=price,
                    purchase_option="interruptible" if spot else "on_demand", vcpus=_share(node.get("cpu_count"), part),
                    ram_gb=_share(node.get("ram_gb"), part), local_disk_gb=_share(node.get("disk_gb"), part),
                    available=free >= unit, available_count=free // unit,
                    provider_data=data)
    batch.notes.append(f"lium: {len(nodes)} nodes in the feed generated at {doc.get('generated_at')}")
    return batch


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        return parse_nodes(ctx.get_json(client, API_HOST, NODES_PATH))
