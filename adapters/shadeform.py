"""Shadeform: a marketplace reselling the GPU instances of many clouds through one API.

Source: `GET https://api.shadeform.ai/v1/instances/types` with the account's API key in the
`X-API-KEY` header (env SHADEFORM_API_KEY, the name Shadeform's own SDK reads). Without filters
the answer is every instance type Shadeform sells, in one JSON body, not paginated:

    {"instance_types": [{"cloud": "massedcompute", "shade_instance_type": "A6000",
      "cloud_instance_type": "gpu_1x_a6000",
      "configuration": {"memory_in_gb", "storage_in_gb", "vcpus", "num_gpus", "gpu_type",
                        "interconnect", "nvlink", "os_options", "vram_per_gpu_in_gb",
                        "gpu_manufacturer"},
      "hourly_price": 57,                     integer US cents per instance-hour
      "availability": [{"region": "kansascity-usa-1", "available": true,
                        "display_name": "US, Kansas City, KS"}],
      "boot_time": {"min_boot_in_sec", "max_boot_in_sec"}, "deployment_type": "vm"}]}

Who runs the machine. `cloud` names the cloud that operates it; Shadeform charges that cloud's
own rate (its FAQ: "the same rate as going direct to the cloud provider"). So every offer says
so in `operated_by`, and an offer of a cloud that gpuledger loads from the cloud's own source
(the registry) is the same machine at the same price seen a second time: it is skipped, and the
skipped rows are counted per cloud in the batch notes. CLOUD_SOURCES maps Shadeform's cloud
names to registry names; the check runs against the registry at fetch time, so a cloud gets
skipped here from the day its own source is registered. Offers of every other cloud are kept
with provider "shadeform".

Row shape. One offer per entry of `availability`: the region is Shadeform's region name (the
one its create API takes), `available` its flag (the availability signal the API has: yes or
no per region, no count). The instance type is "<cloud>/<shade_instance_type>": Shadeform
documents that cloud and shade instance type together name an instance type, and two clouds
sell the same shade type in the same region name.

The GPU is named from `gpu_type` ("H100", "A100_80G", "H100_nvl"), the interconnect ("sxm5",
"pcie") deciding the variant where the family has several; a trailing memory token ("_80G")
is left to `vram_per_gpu_in_gb`. A name the reference does not know is quarantined.

Not in the API: billing increments (undocumented: PROVIDER.facts assumes whole hours), egress
(not documented by Shadeform; it depends on the underlying cloud) and storage: `/volumes/types`
prices volumes per GB-hour, but in the clouds' own region names, which the instance types do
not use, and its documented example is marked as not having correct values, so it is not read.

`fetch_*` does the I/O; `parse_*` functions are pure.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from typing import Any, Iterable

from gpuledger.adapters import registry
from gpuledger.adapters.base import (
    MissingCredentialsError, SchemaDriftError, SourceContext, SourceError, drift_guard, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "shadeform"
API_HOST = "api.shadeform.ai"
INSTANCE_TYPES_PATH = "/v1/instances/types"
API_KEY_ENV = "SHADEFORM_API_KEY"

# Shadeform's cloud names (its API reference's Cloud enum and documented examples) -> the
# registry names of the gpuledger sources that load the same cloud directly. A cloud not listed
# is looked up under its own name. DataCrunch renamed itself Verda; Shadeform lists both names.
CLOUD_SOURCES: dict[str, tuple[str, ...]] = {
    "lambdalabs": ("lambda",),
    "aws": ("aws",),
    "azure": ("azure",),
    "gcp": ("gcp",),
    "oci": ("oci",),
    "runpod": ("runpod",),
    "vastai": ("vastai",),
    "coreweave": ("coreweave",),
    "hyperstack": ("hyperstack",),
    "vultr": ("vultr",),
    "digitalocean": ("digitalocean",),
    "datacrunch": ("verda", "datacrunch"),
    "verda": ("verda", "datacrunch"),
    "scaleway": ("scaleway",),
    "tensordock": ("tensordock",),
    "cloudrift": ("cloudrift",),
    "hotaisle": ("hotaisle",),
    "jarvislabs": ("jarvislabs",),
    "crusoe": ("crusoe",),
    "nebius": ("nebius",),
    "cudo": ("cudo",),
    "paperspace": ("paperspace",),
    "fluidstack": ("fluidstack",),
}

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(API_KEY_ENV,),
    credentials_required=True,
    facts=ProviderFacts(
        display_name="Shadeform",
        kind="aggregator",
        billing_granularity_s=3600,
        minimum_charge_s=None,
        billing_notes="Prices are per instance-hour at the underlying cloud's own rate, paid from a prepaid "
                      "Shadeform wallet; the billing increment is not documented, so whole hours are assumed.",
        storage_persists_when_stopped=False,
        stopped_billing_notes="The API has no stop: an instance is restarted or deleted, and deleting ends "
                              "billing. Volumes are separate, persist, and bill per GB-hour.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=True,
        multinode_interconnect="Clusters API (multi-node fabric is the underlying cloud's; not stated)",
        interruptible_offer=None,
        price_source="Shadeform API GET /v1/instances/types (API key): hourly_price in cents, per cloud and region",
        source_urls=(
            "https://docs.shadeform.ai/api-reference/instances/instances-types",
            "https://docs.shadeform.ai/getting-started/concepts",
            "https://docs.shadeform.ai/getting-started/faq",
        ),
    ),
)

_MEMORY_TOKEN = re.compile(r"^\d+g(b)?$")


def registered_source(cloud: str, sources: Iterable[str] | None = None) -> str | None:
    """The registered gpuledger source that loads `cloud` directly, or None."""
    names = set(registry.SOURCES if sources is None else sources)
    for candidate in CLOUD_SOURCES.get(cloud, (cloud,)):
        if candidate in names:
            return candidate
    return None


def gpu_aliases(gpu_type: str, interconnect: str | None) -> list[str]:
    """The names to look up for a Shadeform GPU, most specific first: "A100_80G" over "sxm4" is
    ["a100 sxm4", "a100"] (the memory token dropped: the memory comes from vram_per_gpu_in_gb)."""
    tokens = [t for t in re.split(r"[_\s]+", gpu_type.strip().lower()) if t]
    if len(tokens) > 1 and _MEMORY_TOKEN.match(tokens[-1]):
        tokens = tokens[:-1]
    name = " ".join(tokens)
    link = (interconnect or "").strip().lower()
    return ([f"{name} {link}"] if link else []) + [name]


def _canonical(gpu_type: str, interconnect: str | None, vram_gb: float | None) -> tuple[Any, bool]:
    memory_mib = vram_gb * 1024 if vram_gb else None
    for alias in gpu_aliases(gpu_type, interconnect):
        try:
            return canonicalize(NAME, alias, memory_mib)
        except UnknownGPUError:
            continue
    raise UnknownGPUError(f"unknown GPU name {gpu_type!r} (interconnect {interconnect!r}, {vram_gb} GB) "
                          f"from {NAME}: add it to warehouse/data/gpu_aliases.csv")


def _interconnect(link: str | None, nvlink: Any, count: int) -> str | None:
    """The intra-node link between GPUs: SXM boards join theirs through NVSwitch, PCIe cards
    through NVLink bridges where Shadeform says nvlink, else through PCIe."""
    if count <= 1:
        return None
    link = (link or "").lower()
    if link.startswith("sxm"):
        return "NVSwitch"
    if nvlink is True:
        return "NVLink"
    return "PCIe" if link == "pcie" else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@drift_guard("shadeform: instances/types")
def parse_instance_types(doc: Any, sources: Iterable[str] | None = None) -> Batch:
    """The instances/types body -> offers of the clouds gpuledger does not load directly.
    `sources`: the registered source names (default: the registry's)."""
    types = doc.get("instance_types") if isinstance(doc, dict) else None
    if not isinstance(types, list):
        raise SchemaDriftError("shadeform: instances/types response lacks the 'instance_types' list")
    if not types:
        raise SourceError("shadeform: instances/types returned no instance types")
    names = set(registry.SOURCES if sources is None else sources)
    batch = Batch(NAME)
    skipped: Counter[tuple[str, str]] = Counter()
    cpu_only = no_region = 0
    for item in types:
        cloud = item.get("cloud") if isinstance(item, dict) else None
        if not isinstance(cloud, str) or not cloud:
            batch.quarantine("offer", "?", "schema: an instance type lacks 'cloud'", item)
            continue
        direct = registered_source(cloud, names)
        if direct is not None:
            regions = item.get("availability")
            skipped[(cloud, direct)] += len(regions) if isinstance(regions, list) and regions else 1
            continue
        outcome = _add_instance_type(batch, cloud, item)
        cpu_only += outcome == "cpu"
        no_region += outcome == "no region"
    for (cloud, direct), n in sorted(skipped.items()):
        run_by = cloud if cloud == direct else f"{cloud} ({direct})"
        batch.notes.append(f"{n} offer{'s' if n != 1 else ''} run by {run_by}: skipped, {direct} is loaded "
                           f"from its own source")
    if cpu_only:
        batch.notes.append(f"{cpu_only} CPU-only instance types skipped")
    if no_region:
        batch.notes.append(f"{no_region} instance types listing no region skipped")
    return batch


def _add_instance_type(batch: Batch, cloud: str, item: dict[str, Any]) -> str:
    shade_type = item.get("shade_instance_type")
    ref = f"{cloud}/{shade_type}"
    try:
        for key in ("shade_instance_type", "configuration", "hourly_price", "availability"):
            if key not in item:
                raise KeyError(f"{ref} lacks {key!r}")
        config = item["configuration"]
        if not isinstance(config, dict):
            raise TypeError(f"{ref}: configuration is not an object")
        for key in ("num_gpus", "gpu_type"):
            if key not in config:
                raise KeyError(f"{ref}: configuration lacks {key!r}")
        gpus = int(config["num_gpus"])
        regions = item["availability"]
        if not isinstance(regions, list):
            raise TypeError(f"{ref}: availability is not a list")
    except (KeyError, TypeError, ValueError) as err:
        batch.quarantine("offer", ref, f"schema: {err.args[0] if err.args else err}", item)
        return "bad"
    if gpus <= 0:
        return "cpu"
    if not regions:
        return "no region"
    gpu_type = str(config["gpu_type"])
    link = config.get("interconnect")
    vram = _number(config.get("vram_per_gpu_in_gb"))
    try:
        model, exact = _canonical(gpu_type, link, vram)
    except UnknownGPUError as err:
        batch.quarantine("offer", ref, f"gpu: {err}", item)
        return "bad"
    cents = item["hourly_price"]
    if _number(cents) is None:
        batch.quarantine("offer", ref, f"hourly_price {cents!r} is not a number", item)
        return "bad"
    currency = stated_currency(item)
    if currency not in (None, "USD"):
        batch.quarantine("offer", ref, f"price in {currency}, not USD cents; no conversion is configured", item)
        return "bad"
    price = float(cents) / 100
    common = dict(
        zone="", instance_type=ref, purchase_option="on_demand", operated_by=cloud,
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=gpu_type,
        gpu_vendor=model.vendor, gpu_count=gpus, gpu_memory_gb=vram, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=vram * gpus if vram else None,
        vcpus=_number(config.get("vcpus")), ram_gb=_number(config.get("memory_in_gb")),
        local_disk_gb=_number(config.get("storage_in_gb")), interconnect=_interconnect(link, config.get("nvlink"), gpus),
        price_per_hour=price, source_currency="USD", source_price_per_hour=price,
    )
    data = {"cloud": cloud, "shade_instance_type": shade_type, "cloud_instance_type": item.get("cloud_instance_type"),
            "hourly_price_cents": cents, "interconnect": link, "nvlink": config.get("nvlink"),
            "deployment_type": item.get("deployment_type"), "boot_time": item.get("boot_time")}
    for entry in regions:
        region = entry.get("region") if isinstance(entry, dict) else None
        if not isinstance(region, str) or not region:
            batch.quarantine("offer", ref, "schema: an availability entry lacks 'region'", item)
            continue
        available = entry.get("available")
        batch.offer(f"{ref}/{region}", item, region=region,
                    available=available if isinstance(available, bool) else None,
                    provider_data=json.dumps(dict(data, region_display_name=entry.get("display_name")),
                                             sort_keys=True),
                    **common)
    return "ok"


# -- fetching ---------------------------------------------------------------------

def fetch_instance_types(ctx: SourceContext) -> Any:
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key and ctx.reaches_provider:
        raise MissingCredentialsError(f"shadeform: {API_KEY_ENV} is not set; the instance types API needs an API key")
    headers = {"Accept": "application/json"}
    if key:
        headers["X-API-KEY"] = key
    with ctx.http_client(headers=headers) as client:
        return ctx.get_json(client, API_HOST, INSTANCE_TYPES_PATH)


def fetch(ctx: SourceContext) -> Batch:
    """One request: every instance type of every cloud, with its price and availability per region."""
    return parse_instance_types(fetch_instance_types(ctx))
