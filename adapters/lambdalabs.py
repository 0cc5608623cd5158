"""Lambda Cloud: on-demand GPU instance types and where they have capacity now.

`GET https://cloud.lambda.ai/api/v1/instance-types`, the key as a Bearer token (env LAMBDA_API_KEY);
prices in US cents per hour, the GPU as "H100 (80 GB SXM5)".
One offer per region with capacity now, or one "global" offer (available=False) when none has any.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from gpuledger.adapters.base import SchemaDriftError, SourceContext, dig, drift_guard, stated_currency
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.gpus import canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, not_usd

NAME = "lambda"
API_HOST = "cloud.lambda.ai"
INSTANCE_TYPES_PATH = "/api/v1/instance-types"
API_KEY_ENV = "LAMBDA_API_KEY"
GLOBAL_REGION = "global"  # Lambda's prices, storage and egress terms are the same in every region

FILESYSTEM_USD_PER_GIB_MONTH = 0.20

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    # Rows follow capacity (one per region, one when sold out): a crunch can cut them to a third.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    facts=ProviderFacts(
        display_name="Lambda Cloud", kind="gpu_cloud", billing_granularity_s=60, minimum_charge_s=60,
        billing_notes="On-demand instances are billed in one-minute increments (so at least one minute).",
        storage_persists_when_stopped=False,
        stopped_billing_notes="Instances cannot be stopped, only terminated; terminating ends billing. "
                              "Persistent filesystems bill separately at 0.20 USD per GiB-month.",
        access_ssh=True, access_docker=True, access_jupyter=True,
        multinode_interconnect="1-Click Clusters (InfiniBand; bandwidth not verified)",
        price_source="Lambda Cloud API GET /api/v1/instance-types (API key); billing docs for storage/egress",
        source_urls=["https://docs-api.lambda.ai/api/cloud#listInstanceTypes",
                     "https://docs.lambda.ai/public-cloud/billing", "https://lambda.ai/instances"]),
)

# "H100 (80 GB SXM5)", "Tesla V100 (16 GB)", "GH200 (96 GB)", "A10 (24 GB PCIe)".
_GPU_DESCRIPTION = re.compile(
    r"^\s*(?P<name>.+?)\s*\(\s*(?P<mem>\d+(?:\.\d+)?)\s*GB(?:\s+(?P<form>[A-Za-z0-9]+))?\s*\)\s*$")


class GpuDescription(NamedTuple):
    name: str  # "H100", "RTX A6000", "Tesla V100"
    memory_gb: float  # per GPU, as Lambda states it
    form: str | None  # "SXM5", "PCIe", or None when Lambda does not say


def parse_gpu_description(text: str) -> GpuDescription:
    m = _GPU_DESCRIPTION.match(text or "")
    if not m:
        raise ValueError(f"gpu_description {text!r} is not '<name> (<n> GB[ <form>])'")
    return GpuDescription(m.group("name"), float(m.group("mem")), m.group("form"))


def _require(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise KeyError(f"{where} lacks {key!r}")
    return obj[key]


@drift_guard("lambda: instance-types")
def parse_instance_types(doc: Any) -> Batch:
    """The instance-types body -> offers, plus Lambda's documented storage and egress terms."""
    data = dig(doc, "data")
    if not isinstance(data, dict):
        raise SchemaDriftError("lambda: instance-types response lacks the 'data' object")
    batch = PROVIDER.batch()
    for key in sorted(data):
        _add_instance_type(batch, key, data[key])
    batch.add("storage", f"{GLOBAL_REGION}/filesystem", {"source": PROVIDER.facts.source_urls[1]},
              region=GLOBAL_REGION, storage_class="filesystem", usd_per_gb_month=FILESYSTEM_USD_PER_GIB_MONTH,
              description="persistent filesystem, 0.20 USD per GiB-month (Lambda billing docs; per GiB, "
                          "not GB); same in every region")
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[2]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, usd_per_gb=0.0,
              description="Lambda charges no data-transfer (egress) fees (lambda.ai/instances)")
    return batch


def _add_instance_type(batch: Batch, key: str, item: Any) -> None:
    try:
        itype = _require(item, "instance_type", key)
        name = _require(itype, "name", key)
        specs = _require(itype, "specs", name)
        gpus = int(_require(specs, "gpus", name))
        cents = _require(itype, "price_cents_per_hour", name)
        regions = _require(item, "regions_with_capacity_available", name)
        if not isinstance(regions, list):
            raise TypeError(f"{name}: regions_with_capacity_available is not a list")
    except (KeyError, TypeError, ValueError) as err:
        return batch.quarantine("offer", key, f"schema: {err.args[0] if err.args else err}", item)
    if gpus <= 0:
        return  # CPU-only types are out of scope
    try:
        gpu = parse_gpu_description(itype.get("gpu_description", ""))
        # looked up with the form factor when Lambda gives one
        model, exact = canonicalize(NAME, f"{gpu.name} {gpu.form}" if gpu.form else gpu.name, gpu.memory_gb * 1024)
    except ValueError as err:  # an UnknownGPUError too
        return batch.quarantine("offer", name, f"gpu: {err}", item)
    if not isinstance(cents, (int, float)) or isinstance(cents, bool):
        return batch.quarantine("offer", name, f"price_cents_per_hour {cents!r} is not a number", item)
    currency = stated_currency(itype) or stated_currency(item)
    if currency not in (None, "USD"):
        return batch.quarantine("offer", name, not_usd(currency, "USD cents"), item)
    described = {str(r["name"]): r.get("description") for r in regions if isinstance(r, dict) and r.get("name")}
    data = {"price_cents_per_hour": cents, "description": itype.get("description"),
            "regions_with_capacity": sorted(described)}
    common = dict(
        instance_type=name, purchase_option="on_demand", gpu_model=model.gpu_model, gpu_variant_exact=exact,
        gpu_name_reported=itype.get("gpu_description", ""), gpu_count=gpus, gpu_memory_gb=gpu.memory_gb,
        vcpus=specs.get("vcpus"), ram_gb=specs.get("memory_gib"), local_disk_gb=specs.get("storage_gib"),
        price_per_hour=cents / 100,
        # HGX boards (the SXM forms) join their GPUs through NVSwitch; other forms are not stated.
        interconnect="NVSwitch" if gpus > 1 and gpu.form in ("SXM4", "SXM5", "SXM6") else None)
    if not described:
        batch.offer(f"{name}/{GLOBAL_REGION}", item, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="no capacity in any region",
                    provider_data=data, **common)
    for region in sorted(described):
        batch.offer(f"{name}/{region}", item, region=region, available=True, availability_level="capacity",
                    provider_data=dict(data, region_description=described[region]), **common)


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, needs="the instance-types API needs an API key") as client:
        return parse_instance_types(ctx.get_json(client, API_HOST, INSTANCE_TYPES_PATH, conditional=True))
