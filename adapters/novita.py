"""Novita AI: GPU instance products, priced per GPU, on demand and spot, per cluster.

`GET https://api.novita.ai/gpu-instance/openapi/v1/products`, the key as a Bearer token (env
NOVITA_API_KEY, required), one answer. Prices are 1/100000 USD per GPU-hour: one offer of one GPU per
product, cluster and purchase option. The GPU and its memory are read from the product name;
memoryPerGpu is host RAM.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, failure_reason

NAME = "novita"
API_HOST = "api.novita.ai"
PRODUCTS_PATH = "/gpu-instance/openapi/v1/products"
API_KEY_ENV = "NOVITA_API_KEY"
PRICE_UNIT = 100_000  # API price units per USD
_MEMORY = re.compile(r"(\d+(?:\.\d+)?)\s*GB\s*$", re.IGNORECASE)

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Novita AI", kind="gpu_cloud", billing_granularity_s=1, minimum_charge_s=0,
        billing_notes="Instance unit price x duration x GPUs, the duration accurate to the second and settled "
                      "hourly; billing runs from the pulling state until the instance is stopped.",
        storage_persists_when_stopped=False,
        stopped_billing_notes="Stopping ends compute billing. The container and volume disks do not persist on "
                              "stop (container disk: 60 GB free, then 0.005 USD/GB/day; volume disk 0.005 USD/GB/day); "
                              "network volumes persist at 0.002 USD/GB/day.",
        access_ssh=True, access_docker=True, access_jupyter=True,
        interruptible_offer="Spot instances: a 1-hour guaranteed run time and a 1-hour reclaim notice.",
        price_source="Novita GPU instance API GET /gpu-instance/openapi/v1/products (API key): price per GPU-hour "
                     "in 1/100000 USD",
        source_urls=("https://novita.ai/docs/api-reference/gpu-instance-list-products",
                     "https://novita.ai/docs/guides/gpu-instance-pricing", "https://novita.ai/gpus")),
)


@drift_guard("novita: products")
def parse_products(doc: Any) -> Batch:
    products = dig(doc, "data")
    if not isinstance(products, list):
        raise SchemaDriftError("novita: the products answer lacks the 'data' list")
    if not products:
        raise SourceError("novita: the products answer returned no GPU products")
    batch, seen = PROVIDER.batch(), set()
    for item in products:
        pid = dig(item, "id")
        try:
            name, price = str(item["name"]), as_number(item["price"], "price", ValueError)
            spot = item.get("spotPrice")
            spot = as_number(spot, "spotPrice", ValueError) if spot not in (None, "", "0", 0) else None
            regions = list(item.get("regions") or [])
            if not (math.isfinite(price) and price > 0):  # the whole product goes, its spot rows too
                raise ValueError(f"price {price} is not a positive number")
        except (KeyError, TypeError, ValueError) as err:
            batch.quarantine("offer", str(pid), failure_reason(err), item)
            continue
        if batch.listed_again(seen, pid, f"product {pid}", item):
            continue
        memory = _MEMORY.search(name)
        data = {"price_units": item["price"], "spot_price_units": item.get("spotPrice"),
                "billing_methods": item.get("billingMethods")}
        for region in regions or ["global"]:  # a product listing no cluster cannot be deployed now
            for option, units in (("on_demand", price), ("spot", spot)) if spot else (("on_demand", price),):
                batch.offer(f"{pid}/{region}/{option}", item, gpu=name, gpu_count=1, region=str(region),
                            gpu_memory_gb=float(memory.group(1)) if memory else None, instance_type=str(pid),
                            purchase_option=option, price_per_hour=units / PRICE_UNIT,
                            vcpus=item.get("cpuPerGpu") or None, ram_gb=item.get("memoryPerGpu") or None,
                            local_disk_gb=item.get("diskPerGpu"), availability_level=item.get("inventoryState"),
                            available=bool(item.get("availableDeploy") and regions), provider_data=data)
    return batch


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, needs="the products API needs an API key") as client:
        return parse_products(ctx.get_json(client, API_HOST, PRODUCTS_PATH))
