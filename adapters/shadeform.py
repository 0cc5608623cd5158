"""Shadeform: a marketplace reselling the GPU instances of many clouds through one API.

`GET https://api.shadeform.ai/v1/instances/types`, the key in `X-API-KEY` (env SHADEFORM_API_KEY);
`hourly_price` in US cents per instance-hour, per cloud and region.
`cloud` runs the machine at its own rate: offers name it in `operated_by`; a cloud loaded from its own
source (the registry) is skipped and counted. Not read: `/volumes/types` (in the clouds' own region names).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from gpuledger.adapters import registry
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, dig, drift_guard, stated_currency
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, require_usd

NAME = "shadeform"
API_HOST = "api.shadeform.ai"
INSTANCE_TYPES_PATH = "/v1/instances/types"
API_KEY_ENV = "SHADEFORM_API_KEY"

# Shadeform's cloud names -> the registry names of the sources loading that cloud directly, where they
# differ (any other cloud is looked up under its own name). DataCrunch renamed itself Verda.
CLOUD_SOURCES: dict[str, tuple[str, ...]] = {
    "lambdalabs": ("lambda",),
    "latitude": ("latitudesh",),
    "datacrunch": ("verda", "datacrunch"),
    "verda": ("verda", "datacrunch"),
}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Shadeform", kind="aggregator", billing_granularity_s=3600, minimum_charge_s=None,
        billing_notes="Prices are per instance-hour at the underlying cloud's own rate, paid from a prepaid "
                      "Shadeform wallet; the billing increment is not documented, so whole hours are assumed.",
        storage_persists_when_stopped=False,
        stopped_billing_notes="The API has no stop: an instance is restarted or deleted, and deleting ends "
                              "billing. Volumes are separate, persist, and bill per GB-hour.",
        access_ssh=True, access_docker=True, access_jupyter=True,
        multinode_interconnect="Clusters API (multi-node fabric is the underlying cloud's; not stated)",
        price_source="Shadeform API GET /v1/instances/types (API key): hourly_price in cents, per cloud and region",
        source_urls=("https://docs.shadeform.ai/api-reference/instances/instances-types",
                     "https://docs.shadeform.ai/getting-started/concepts",
                     "https://docs.shadeform.ai/getting-started/faq")),
)

_MEMORY_TOKEN = re.compile(r"^\d+g(b)?$")


def registered_source(cloud: str, sources: Iterable[str] | None = None) -> str | None:
    """The registered gpuledger source that loads `cloud` directly, or None."""
    names = set(registry.SOURCES if sources is None else sources)
    return next((c for c in CLOUD_SOURCES.get(cloud, (cloud,)) if c in names), None)


def gpu_aliases(gpu_type: str, interconnect: str | None) -> list[str]:
    """The names to look up, most specific first: "A100_80G" over "sxm4" -> ["a100 sxm4", "a100"]."""
    tokens = [t for t in re.split(r"[_\s]+", gpu_type.strip().lower()) if t]
    if len(tokens) > 1 and _MEMORY_TOKEN.match(tokens[-1]):
        tokens = tokens[:-1]
    name, link = " ".join(tokens), (interconnect or "").strip().lower()
    return ([f"{name} {link}"] if link else []) + [name]


def _canonical(gpu_type: str, interconnect: str | None, vram_gb: float | None) -> tuple[Any, bool]:
    for alias in gpu_aliases(gpu_type, interconnect):
        try:
            return canonicalize(NAME, alias, vram_gb * 1024 if vram_gb else None)
        except UnknownGPUError:
            continue
    raise UnknownGPUError(f"unknown GPU name {gpu_type!r} (interconnect {interconnect!r}, {vram_gb} GB) "
                          f"from {NAME}: add it to warehouse/data/gpu_aliases.csv")


def _interconnect(link: str | None, nvlink: Any, count: int) -> str | None:
    """SXM boards join their GPUs through NVSwitch, PCIe cards through NVLink where Shadeform says so."""
    link = (link or "").lower()
    if count <= 1:
        return None
    if link.startswith("sxm"):
        return "NVSwitch"
    return "NVLink" if nvlink is True else "PCIe" if link == "pcie" else None


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


@drift_guard("shadeform: instances/types")
def parse_instance_types(doc: Any, sources: Iterable[str] | None = None) -> Batch:
    """The instances/types body -> offers of the clouds not loaded directly (`sources`: default the registry's)."""
    types = dig(doc, "instance_types")
    if not isinstance(types, list):
        raise SchemaDriftError("shadeform: instances/types response lacks the 'instance_types' list")
    if not types:
        raise SourceError("shadeform: instances/types returned no instance types")
    names = set(registry.SOURCES if sources is None else sources)
    batch = PROVIDER.batch()
    skipped: Counter[tuple[str, str]] = Counter()
    unloaded: Counter[str] = Counter()
    for item in types:
        cloud = dig(item, "cloud")
        if not isinstance(cloud, str) or not cloud:
            batch.quarantine("offer", "?", "schema: an instance type lacks 'cloud'", item)
        elif (direct := registered_source(cloud, names)) is not None:
            regions = item.get("availability")
            skipped[(cloud, direct)] += len(regions) if isinstance(regions, list) and regions else 1
        elif why := _add_instance_type(batch, cloud, item):
            unloaded[why] += 1
    for (cloud, direct), n in sorted(skipped.items()):
        run_by = cloud if cloud == direct else f"{cloud} ({direct})"
        batch.notes.append(f"{n} offer{'s' * (n != 1)} run by {run_by}: skipped, {direct} is loaded from its own "
                           "source")
    batch.notes.extend(f"{n} {what} skipped" for what, n in sorted(unloaded.items()))
    return batch


def _add_instance_type(batch: Batch, cloud: str, item: dict[str, Any]) -> str | None:
    """The type's offers; what it is when it has none to load and is not quarantined."""
    shade_type = item.get("shade_instance_type")
    ref = f"{cloud}/{shade_type}"
    try:
        if lacking := [key for key in ("shade_instance_type", "configuration", "hourly_price", "availability")
                       if key not in item]:
            raise KeyError(f"{ref} lacks {lacking[0]!r}")
        config = item["configuration"]
        if not isinstance(config, dict):
            raise TypeError(f"{ref}: configuration is not an object")
        if lacking := [key for key in ("num_gpus", "gpu_type") if key not in config]:
            raise KeyError(f"{ref}: configuration lacks {lacking[0]!r}")
        gpus = int(config["num_gpus"])
        regions = item["availability"]
        if not isinstance(regions, list):
            raise TypeError(f"{ref}: availability is not a list")
    except (KeyError, TypeError, ValueError) as err:
        batch.quarantine("offer", ref, f"schema: {err.args[0] if err.args else err}", item)
        return None
    if gpus <= 0:
        return "CPU-only instance types"
    if not regions:
        return "instance types listing no region"
    gpu_type, link = str(config["gpu_type"]), config.get("interconnect")
    vram = _number(config.get("vram_per_gpu_in_gb"))
    cents = item["hourly_price"]
    try:
        model, exact = _canonical(gpu_type, link, vram)
        if _number(cents) is None:
            raise ValueError(f"hourly_price {cents!r} is not a number")
        require_usd(stated_currency(item), "USD cents")
    except ValueError as err:  # an unknown GPU too (UnknownGPUError is one)
        batch.quarantine("offer", ref, f"gpu: {err}" if isinstance(err, UnknownGPUError) else str(err), item)
        return None
    data = {"cloud": cloud, "shade_instance_type": shade_type, "cloud_instance_type": item.get("cloud_instance_type"),
            "hourly_price_cents": cents, "interconnect": link, "nvlink": config.get("nvlink"),
            "deployment_type": item.get("deployment_type"), "boot_time": item.get("boot_time")}
    for entry in regions:
        region = dig(entry, "region")
        if not isinstance(region, str) or not region:
            batch.quarantine("offer", ref, "schema: an availability entry lacks 'region'", item)
            continue
        available = entry.get("available")
        batch.offer(f"{ref}/{region}", item, region=region,
                    available=available if isinstance(available, bool) else None,
                    provider_data=dict(data, region_display_name=entry.get("display_name")),
                    instance_type=ref, purchase_option="on_demand", operated_by=cloud, gpu_model=model.gpu_model,
                    gpu_variant_exact=exact, gpu_name_reported=gpu_type, gpu_count=gpus, gpu_memory_gb=vram,
                    vcpus=_number(config.get("vcpus")), ram_gb=_number(config.get("memory_in_gb")),
                    interconnect=_interconnect(link, config.get("nvlink"), gpus),
                    local_disk_gb=_number(config.get("storage_in_gb")),
                    # the billing increment is not documented (the facts assume hours): the offers do not claim one
                    price_per_hour=float(cents) / 100, billing_granularity_s=None, minimum_charge_s=None)
    return None


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, "X-API-KEY: {key}", needs="the instance types API needs an API key") as client:
        return parse_instance_types(ctx.get_json(client, API_HOST, INSTANCE_TYPES_PATH, conditional=True))
