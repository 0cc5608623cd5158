"""CUDO Compute: VM machine types per data center, each GPU, vCPU and GiB of RAM priced apart.

`GET https://rest.compute.cudo.org/v1/vms/machine-types-2`, no key needed (CUDO_API_KEY, when set,
goes as a Bearer token); prices as USD per hour in text ({"value": "2.50"}).
A VM is configured, not picked: one offer per machine type and data center for one GPU with the
fewest vCPUs (minVcpuPerGpu) and the least RAM (vCPUs / maxVcpuPerMemoryGib) allowed; no disk or IPv4.
"""

from __future__ import annotations

import math
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.records import Batch, ProviderFacts, failure_reason

NAME = "cudo"
API_HOST = "rest.compute.cudo.org"
MACHINE_TYPES_PATH = "/v1/vms/machine-types-2"
API_KEY_ENV = "CUDO_API_KEY"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,),
    facts=ProviderFacts(
        display_name="CUDO Compute", kind="gpu_cloud", billing_granularity_s=3600,
        billing_notes="Each VM is billed per GPU-hour, vCPU-hour, GiB-of-RAM-hour and GiB of disk, at rates per GPU "
                      "model and data center. The billing increment is not documented, so whole hours are assumed.",
        access_ssh=True,
        price_source="CUDO Compute API GET /v1/vms/machine-types-2 (no key): per-component hourly prices per machine "
                     "type and data center",
        source_urls=("https://www.cudocompute.com/docs/rest-api/introduction", "https://www.cudocompute.com/pricing")),
)


def _usd(machine: dict[str, Any], field: str) -> float:
    price = as_number(machine[field]["value"], f"{field}.value", ValueError)
    if not math.isfinite(price) or price < 0 or (price == 0 and field == "gpuPriceHr"):
        raise ValueError(f"{field}.value {price} is not a positive price")
    return price


@drift_guard("cudo: machine types")
def parse_machine_types(doc: Any) -> Batch:
    machines = dig(doc, "machineTypes")
    if not isinstance(machines, list):
        raise SchemaDriftError("cudo: the machine-types answer lacks the 'machineTypes' list")
    if not machines:
        raise SourceError("cudo: the machine-types answer returned no machine types")
    batch, seen, cpu_only = PROVIDER.batch(), set(), 0
    for m in machines:
        key = (m.get("machineType"), m.get("dataCenterId")) if isinstance(m, dict) else ("?", "?")
        if isinstance(m, dict) and not m.get("gpuModel"):
            cpu_only += 1
            continue
        try:
            gpu, vcpus = _usd(m, "gpuPriceHr"), max(int(m.get("minVcpuPerGpu") or 1), 1)
            ram = math.ceil(vcpus / float(m["maxVcpuPerMemoryGib"]))
            price = gpu + vcpus * _usd(m, "vcpuPriceHr") + ram * _usd(m, "memoryGibPriceHr")
            free = int(m.get("maxGpuFree") or 0)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
            batch.quarantine("offer", "/".join(map(str, key)), failure_reason(err), m)
            continue
        if batch.listed_again(seen, key, f"machine type {key[0]} in {key[1]}", m, "/".join(map(str, key))):
            continue
        batch.offer("/".join(map(str, key)), m, gpu=str(m["gpuModel"]), gpu_count=1, region=str(key[1]),
                    instance_type=str(key[0]), purchase_option="on_demand", price_per_hour=round(price, 6),
                    vcpus=vcpus, ram_gb=ram, available=free > 0, available_count=free,
                    billing_granularity_s=None, minimum_charge_s=None,  # not documented: the offer claims none
                    provider_data={"gpu_price_hr": gpu, "cpu_model": m.get("cpuModel"),
                                   "total_gpu_free": m.get("totalGpuFree")})
    if cpu_only:
        batch.notes.append(f"{cpu_only} machine types without a GPU skipped")
    return batch


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV) as client:
        return parse_machine_types(ctx.get_json(client, API_HOST, MACHINE_TYPES_PATH))
