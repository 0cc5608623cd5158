"""Lambda Cloud: on-demand GPU instance types and where they have capacity now.

Source: `GET https://cloud.lambda.ai/api/v1/instance-types` with the account's
API key as a Bearer token (env LAMBDA_API_KEY; the API also takes HTTP Basic,
and the older host cloud.lambdalabs.com serves the same API). The answer is
one JSON body, not paginated:

    {"data": {"gpu_8x_h100_sxm5": {"instance_type": {"name", "description",
      "gpu_description", "price_cents_per_hour", "specs": {"vcpus",
      "memory_gib", "storage_gib", "gpus"}},
      "regions_with_capacity_available": [{"name", "description"}]}}}

Row shape. Lambda sets one price per instance type for all its regions; the
only regional fact is where capacity exists at this moment. So an instance
type becomes:
- one offer per region in `regions_with_capacity_available` (available=True,
  availability_level "capacity"), or
- when no region has capacity, a single offer in region "global"
  (available=False, available_count=0): the price is still real, the type
  still listed, it just cannot be launched right now.
The row count therefore follows Lambda's capacity, not its catalogue.

The GPU is named from `gpu_description` ("H100 (80 GB SXM5)"): name, memory
and, when Lambda gives it, the form factor. A description without a form
factor ("A100 (40 GB)") maps to the family's SXM row with
gpu_variant_exact=False, never to a guessed variant.

Billing, storage and egress are not in the API; they come from Lambda's
billing docs (PROVIDER.facts) and are emitted as provider-wide ("global")
storage and egress records.

`fetch_*` does the I/O; `parse_*` functions are pure.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from gpuledger.adapters.base import (
    MissingCredentialsError, SchemaDriftError, SourceContext, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import AnomalyThresholds, ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "lambda"
API_HOST = "cloud.lambda.ai"
INSTANCE_TYPES_PATH = "/api/v1/instance-types"
API_KEY_ENV = "LAMBDA_API_KEY"
GLOBAL_REGION = "global"  # Lambda's prices, storage and egress terms are the same in every region

FILESYSTEM_USD_PER_GIB_MONTH = 0.20

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(API_KEY_ENV,),
    credentials_required=True,
    # Rows follow capacity: a type with capacity in three regions is three rows, sold out it is
    # one ("global"). A market-wide crunch can cut the rows to a third or less while every type is
    # still listed; a scrape that lost 90% of them is still refused.
    anomaly=AnomalyThresholds(min_row_ratio=0.2),
    facts=ProviderFacts(
        display_name="Lambda Cloud",
        kind="gpu_cloud",
        billing_granularity_s=60,
        minimum_charge_s=60,
        billing_notes="On-demand instances are billed in one-minute increments (so at least one minute).",
        storage_persists_when_stopped=False,
        stopped_billing_notes="Instances cannot be stopped, only terminated; terminating ends billing. "
                              "Persistent filesystems bill separately at 0.20 USD per GiB-month.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=True,
        multinode_interconnect="1-Click Clusters (InfiniBand; bandwidth not verified)",
        interruptible_offer=None,
        price_source="Lambda Cloud API GET /api/v1/instance-types (API key); billing docs for storage/egress",
        source_urls=[
            "https://docs-api.lambda.ai/api/cloud#listInstanceTypes",
            "https://docs.lambda.ai/public-cloud/billing",
            "https://lambda.ai/instances",
        ],
    ),
)

# "H100 (80 GB SXM5)", "Tesla V100 (16 GB)", "GH200 (96 GB)", "A10 (24 GB PCIe)".
_GPU_DESCRIPTION = re.compile(
    r"^\s*(?P<name>.+?)\s*\(\s*(?P<mem>\d+(?:\.\d+)?)\s*GB(?:\s+(?P<form>[A-Za-z0-9]+))?\s*\)\s*$")
_SXM_FORMS = ("SXM4", "SXM5", "SXM6")


@dataclass(frozen=True)
class GpuDescription:
    name: str  # "H100", "RTX A6000", "Tesla V100"
    memory_gb: float  # per GPU, as Lambda states it
    form: str | None  # "SXM5", "PCIe", or None when Lambda does not say

    @property
    def alias(self) -> str:
        """The string looked up in gpu_aliases: the name, with the form factor when given."""
        return f"{self.name} {self.form}" if self.form else self.name


def parse_gpu_description(text: str) -> GpuDescription:
    m = _GPU_DESCRIPTION.match(text or "")
    if not m:
        raise ValueError(f"gpu_description {text!r} is not '<name> (<n> GB[ <form>])'")
    return GpuDescription(m.group("name"), float(m.group("mem")), m.group("form"))


def _interconnect(gpu: GpuDescription, count: int) -> str | None:
    """HGX boards (the SXM forms) join their GPUs through NVSwitch; other forms are not stated."""
    if count > 1 and gpu.form in _SXM_FORMS:
        return "NVSwitch"
    return None


def _require(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise KeyError(f"{where} lacks {key!r}")
    return obj[key]


@drift_guard("lambda: instance-types")
def parse_instance_types(doc: Any) -> Batch:
    """The instance-types body -> offers, plus Lambda's documented storage and egress terms."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, dict):
        raise SchemaDriftError("lambda: instance-types response lacks the 'data' object")
    batch = Batch(NAME)
    for key in sorted(data):
        _add_instance_type(batch, key, data[key])
    _add_documented_terms(batch)
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
        batch.quarantine("offer", key, f"schema: {err.args[0] if err.args else err}", item)
        return
    if gpus <= 0:
        return  # CPU-only types are out of scope
    try:
        gpu = parse_gpu_description(itype.get("gpu_description", ""))
        model, exact = canonicalize(NAME, gpu.alias, gpu.memory_gb * 1024)
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", name, f"gpu: {err}", item)
        return
    if not isinstance(cents, (int, float)) or isinstance(cents, bool):
        batch.quarantine("offer", name, f"price_cents_per_hour {cents!r} is not a number", item)
        return
    currency = stated_currency(itype) or stated_currency(item)
    if currency not in (None, "USD"):
        batch.quarantine("offer", name, f"price in {currency}, not USD cents; no conversion is configured", item)
        return
    price = cents / 100
    region_names = sorted({str(r["name"]) for r in regions if isinstance(r, dict) and r.get("name")})
    common = dict(
        zone="", instance_type=name, purchase_option="on_demand",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=itype.get("gpu_description", ""),
        gpu_vendor=model.vendor, gpu_count=gpus, gpu_memory_gb=gpu.memory_gb,
        gpu_memory_gb_nominal=model.memory_gb, total_gpu_memory_gb=gpu.memory_gb * gpus,
        vcpus=specs.get("vcpus"), ram_gb=specs.get("memory_gib"), local_disk_gb=specs.get("storage_gib"),
        interconnect=_interconnect(gpu, gpus),
        price_per_hour=price, source_currency="USD", source_price_per_hour=price,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )
    data = {"price_cents_per_hour": cents, "description": itype.get("description"),
            "regions_with_capacity": region_names}
    if not region_names:
        batch.offer(f"{name}/{GLOBAL_REGION}", item, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="no capacity in any region",
                    provider_data=json.dumps(data, sort_keys=True), **common)
        return
    described = {str(r["name"]): r.get("description") for r in regions if isinstance(r, dict) and r.get("name")}
    for region in region_names:
        batch.offer(f"{name}/{region}", item, region=region, available=True, available_count=None,
                    availability_level="capacity",
                    provider_data=json.dumps(dict(data, region_description=described[region]), sort_keys=True),
                    **common)


def _add_documented_terms(batch: Batch) -> None:
    """Storage and egress terms from Lambda's docs: the API has no price for them."""
    batch.add("storage", f"{GLOBAL_REGION}/filesystem", {"source": PROVIDER.facts.source_urls[1]},
              region=GLOBAL_REGION, storage_class="filesystem",
              usd_per_gb_month=FILESYSTEM_USD_PER_GIB_MONTH, source_currency="USD",
              source_usd_per_gb_month=FILESYSTEM_USD_PER_GIB_MONTH,
              description="persistent filesystem, 0.20 USD per GiB-month (Lambda billing docs; per GiB, "
                          "not GB); same in every region")
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[2]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, tier_end_gb=None,
              usd_per_gb=0.0, source_currency="USD", source_usd_per_gb=0.0,
              description="Lambda charges no data-transfer (egress) fees (lambda.ai/instances)")


# -- fetching ---------------------------------------------------------------------

def fetch_instance_types(ctx: SourceContext) -> Any:
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key and ctx.reaches_provider:
        raise MissingCredentialsError(f"lambda: {API_KEY_ENV} is not set; the instance-types API needs an API key")
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    with ctx.http_client(headers=headers) as client:
        return ctx.get_json(client, API_HOST, INSTANCE_TYPES_PATH)


def fetch(ctx: SourceContext) -> Batch:
    """One request: every instance type with its price and the regions with capacity."""
    return parse_instance_types(fetch_instance_types(ctx))
