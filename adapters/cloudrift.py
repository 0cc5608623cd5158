"""CloudRift: GPU instance types, their prices and the free nodes per datacenter.

Source: `POST https://api.cloudrift.ai/api/v1/instance-types/list`, CloudRift's public REST API
(https://api.cloudrift.ai/api-docs/openapi.json, https://docs.cloudrift.ai/extras/rest-api).
Every call is a POST with the envelope `{"version": "<date>", "data": {...}}` and answers in the
same envelope. The listing answers without credentials; CLOUDRIFT_API_KEY, when set, goes in
the `X-API-Key` header. One answer, no paging:

    {"version": "2025-01-29",
     "data": {"instance_types": [{"name": "rtx49-10c-kn", "brand_short": "RTX 4090",
       "datacenters": [...],
       "variants": [{"name": "rtx49-10c-kn.1", "gpu_count": 1, "vram": <bytes per GPU>,
                     "cpu_count", "logical_cpu_count", "dram": <bytes>, "disk": <bytes>,
                     "cost_per_hour": 39,                      # US cents for the variant
                     "nodes_per_dc": {"usny01_a01": 2},
                     "available_nodes": 1, "available_nodes_per_dc": {"usny01_a01": 1},
                     "ip_availability_per_dc": {...},
                     "volume_types_per_dc": {"<dc>": [{"name", "cost_per_gb_per_month"}]}}]}]}}

Money is in cents everywhere (observed live: `cost_per_hour` 25.0 on a 0.25 USD/h rental), so
a price is `cost_per_hour / 100` for the whole variant (its GPUs, vCPUs, RAM and disk).

Row shape. One on-demand offer per variant and datacenter it is listed in (`nodes_per_dc` or
`available_nodes_per_dc`): region = the datacenter name, available = it has a free node there,
available_count = its free nodes there, availability_level "free nodes" / "no free node". A
variant listed in no datacenter is one row in region "global" with available=False (the price
is listed; nothing can be rented now), as Lambda's sold-out types are.

GPUs are named by `brand_short` ("RTX 4090", "V100") and mapped with the per-GPU `vram`
through gpu_aliases; an unknown brand is quarantined once with its variants. CPU-only variants
are counted in the notes. A variant without a usable price, a variant name listed twice, or a
price in another currency is quarantined with the reason. Storage: the volume types' prices
(cents per GB-month) per datacenter when any are listed, otherwise a note says none are.
Egress: CloudRift charges none (cloudrift.ai/pricing), one "global" record at 0.

`fetch_*` does the I/O; `parse_*`/`build_*` functions are pure.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard, stated_currency
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "cloudrift"
API_HOST = "api.cloudrift.ai"
INSTANCE_TYPES_PATH = "/api/v1/instance-types/list"
API_KEY_ENV = "CLOUDRIFT_API_KEY"
# The protocol date CloudRift's own client pins (cloudrift-ai/emmy PR #809); the listing
# answers whatever the pin.
API_VERSION = "2026-09-08"
SERVICES = ("vm",)  # VM-capable types: what SSH access and a custom image need
GLOBAL_REGION = "global"
GIB = 1024 ** 3

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(API_KEY_ENV,),
    credentials_required=False,
    facts=ProviderFacts(
        display_name="CloudRift",
        kind="gpu_cloud",
        billing_granularity_s=1,
        minimum_charge_s=0,
        billing_notes="Billed per second of active runtime with no minimum (cloudrift.ai/pricing); a rental "
                      "that fails to start is not charged (docs changelog).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="Persistent volumes bill until deleted, attached or not; stopping a reserved "
                              "instance terminates it and its ephemeral disk (docs: volumes).",
        access_ssh=True,
        access_docker=True,
        access_jupyter=None,
        multinode_interconnect=None,
        interruptible_offer=None,
        price_source="CloudRift API POST api.cloudrift.ai/api/v1/instance-types/list (no key needed; "
                     "cost_per_hour in US cents per variant)",
        source_urls=[
            "https://api.cloudrift.ai/api-docs/openapi.json",
            "https://docs.cloudrift.ai/extras/rest-api",
            "https://docs.cloudrift.ai/cli-interface/instance-management",
            "https://docs.cloudrift.ai/features/volumes",
            "https://www.cloudrift.ai/pricing",
        ],
    ),
)


class _BadVariant(Exception):
    """One variant that cannot become a row: its reason goes to quarantine."""


def build_request() -> dict[str, Any]:
    return {"version": API_VERSION, "data": {"selector": {"ByServiceAndLocation": {"services": list(SERVICES)}}}}


# -- pure helpers ---------------------------------------------------------------------

def _num(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def price_usd(cents: Any) -> float:
    """A variant's cost_per_hour (US cents) as USD per hour; _BadVariant when it is not a price."""
    if cents is None:
        raise _BadVariant("cost_per_hour is missing")
    if isinstance(cents, bool) or not isinstance(cents, (int, float)):
        raise _BadVariant(f"cost_per_hour {cents!r} is not a number")
    if not math.isfinite(cents):
        raise _BadVariant(f"cost_per_hour {cents!r} is not a finite number")
    if cents <= 0:
        raise _BadVariant(f"cost_per_hour {cents!r} is not a positive price")
    return round(cents / 100, 6)


def _counts(value: Any) -> dict[str, int]:
    """A {datacenter: node count} map, read leniently: what is not a count is left out."""
    if not isinstance(value, dict):
        return {}
    return {str(dc): int(n) for dc, n in value.items()
            if isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n >= 0}


def _gib(value: Any) -> float | None:
    n = _num(value)
    return round(n / GIB, 3) if n and n > 0 else None


# -- the answer -----------------------------------------------------------------------

@drift_guard("cloudrift: instance-types")
def parse_instance_types(doc: Any) -> list[dict[str, Any]]:
    """The instance-types answer -> its instance types; the envelope and shape checked."""
    data = doc.get("data") if isinstance(doc, dict) else None
    types = data.get("instance_types") if isinstance(data, dict) else None
    if not isinstance(types, list):
        raise SchemaDriftError("cloudrift: instance-types answer lacks the 'data.instance_types' list")
    if not types:
        raise SourceError("cloudrift: the instance-types answer returned no instance types")
    variants = [v for t in types if isinstance(t, dict) for v in (t.get("variants") or []) if isinstance(v, dict)]
    for field in ("name", "gpu_count", "cost_per_hour"):
        if variants and not any(field in v for v in variants):
            raise SchemaDriftError(f"cloudrift: no variant of any instance type has {field!r}: the API changed shape")
    return types


@drift_guard("cloudrift: variants")
def build_batch(types: list[dict[str, Any]]) -> Batch:
    """Instance types -> one offer per variant and datacenter, volume prices, quarantine."""
    batch = Batch(NAME)
    skipped: Counter[str] = Counter()
    unknown: dict[str, list[str]] = defaultdict(list)
    unknown_reason: dict[str, str] = {}
    seen: set[str] = set()
    variants = 0
    for itype in types:
        if not isinstance(itype, dict) or not isinstance(itype.get("variants"), list):
            batch.quarantine("offer", str(itype.get("name") if isinstance(itype, dict) else "?"),
                             "schema: an instance type lacks the 'variants' list", itype)
            continue
        for variant in itype["variants"]:
            variants += 1
            _add_variant(batch, itype, variant, seen, skipped, unknown, unknown_reason)
    for brand in sorted(unknown):
        names = unknown[brand]
        batch.quarantine("offer", f"gpu/{brand}", f"gpu: {unknown_reason[brand]} ({len(names)} variants)",
                         {"brand_short": brand, "variants": sorted(names)})
    _add_volumes(batch, types)
    _add_free_egress(batch)
    counted = ", ".join(f"{n} {why}" for why, n in sorted(skipped.items())) or "none"
    batch.notes.insert(0, f"cloudrift: {len(types)} instance types, {variants} variants; skipped: {counted}")
    return batch


def _add_variant(batch: Batch, itype: dict[str, Any], variant: Any, seen: set[str], skipped: Counter[str],
                 unknown: dict[str, list[str]], unknown_reason: dict[str, str]) -> None:
    if not isinstance(variant, dict) or not isinstance(variant.get("name"), str) or not variant["name"]:
        batch.quarantine("offer", f"{itype.get('name')}/?", "schema: a variant lacks 'name'", variant)
        return
    name = variant["name"]
    if batch.listed_again(seen, name, f"variant {name}", variant):
        return
    gpus = variant.get("gpu_count")
    if isinstance(gpus, (int, float)) and not isinstance(gpus, bool) and gpus == 0:
        skipped["CPU-only variants"] += 1
        return
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        batch.quarantine("offer", name, f"{name}: gpu_count {gpus!r} is not a whole count", variant)
        return
    currency = stated_currency(variant) or stated_currency(itype)
    if currency not in (None, "USD"):
        batch.quarantine("offer", name, f"{name}: price in {currency}, not USD cents; no conversion is "
                         "configured", variant)
        return
    brand = str(itype.get("brand_short") or "")
    vram = _num(variant.get("vram"))
    try:
        model, exact = canonicalize(NAME, brand, vram / 2 ** 20 if vram else None)
    except UnknownGPUError as err:
        unknown[brand].append(name)
        unknown_reason.setdefault(brand, str(err))
        return
    try:
        price = price_usd(variant.get("cost_per_hour"))
    except _BadVariant as err:
        batch.quarantine("offer", name, f"{name}: {err}", variant)
        return
    per_gpu_gb = _gib(vram)
    common = dict(
        zone="", instance_type=name, purchase_option="on_demand",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=brand, gpu_vendor=model.vendor,
        gpu_count=gpus, gpu_memory_gb=per_gpu_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=per_gpu_gb * gpus if per_gpu_gb else None,
        vcpus=_num(variant.get("logical_cpu_count")) or _num(variant.get("cpu_count")) or None,
        ram_gb=_gib(variant.get("dram")), local_disk_gb=_gib(variant.get("disk")),
        price_per_hour=price, source_currency="USD", source_price_per_hour=price,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )
    nodes, free = _counts(variant.get("nodes_per_dc")), _counts(variant.get("available_nodes_per_dc"))
    ips = variant.get("ip_availability_per_dc") if isinstance(variant.get("ip_availability_per_dc"), dict) else {}
    data = {"instance_type": itype.get("name"), "cost_per_hour_cents": variant.get("cost_per_hour"),
            "available_nodes": variant.get("available_nodes"), "cpu_count": variant.get("cpu_count")}
    datacenters = sorted(set(nodes) | set(free))
    if not datacenters:
        batch.offer(f"{name}/{GLOBAL_REGION}", variant, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="listed in no datacenter", provider_data=json.dumps(data, sort_keys=True),
                    **common)
        return
    for dc in datacenters:
        count = free.get(dc, 0)
        batch.offer(f"{name}/{dc}", variant, region=dc, available=count > 0, available_count=count,
                    availability_level="free nodes" if count else "no free node",
                    provider_data=json.dumps(dict(data, nodes=nodes.get(dc), ip_availability=ips.get(dc)),
                                             sort_keys=True, default=str),
                    **common)


def _add_volumes(batch: Batch, types: list[dict[str, Any]]) -> None:
    """Volume types per datacenter (cents per GB-month), once each; a note when none are listed."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for itype in types:
        for variant in itype.get("variants") or [] if isinstance(itype, dict) else []:
            per_dc = variant.get("volume_types_per_dc") if isinstance(variant, dict) else None
            if not isinstance(per_dc, dict):
                continue
            for dc, vtypes in per_dc.items():
                for vtype in vtypes if isinstance(vtypes, list) else []:
                    if isinstance(vtype, dict) and vtype.get("name"):
                        found.setdefault((str(dc), str(vtype["name"])), vtype)
    if not found:
        batch.notes.append("cloudrift: no volume type is listed in any datacenter; no storage price loaded")
        return
    for (dc, vname), vtype in sorted(found.items()):
        cents = _num(vtype.get("cost_per_gb_per_month"))
        if cents is None or cents <= 0:
            batch.quarantine("storage", f"{dc}/{vname}", f"volume type {vname} in {dc}: cost_per_gb_per_month "
                             f"{vtype.get('cost_per_gb_per_month')!r} is not a positive price", vtype)
            continue
        usd = round(cents / 100, 6)
        batch.add("storage", f"{dc}/{vname}", vtype, region=dc, storage_class=vname, usd_per_gb_month=usd,
                  source_currency="USD", source_usd_per_gb_month=usd,
                  description=f"persistent volume '{vname}', {cents:g} US cents per GB-month; bills until deleted")


def _add_free_egress(batch: Batch) -> None:
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[-1]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, tier_end_gb=None, usd_per_gb=0.0,
              source_currency="USD", source_usd_per_gb=0.0,
              description="no egress or ingress charges (cloudrift.ai/pricing); every datacenter")


# -- fetching ---------------------------------------------------------------------

def fetch_instance_types(ctx: SourceContext) -> Any:
    headers = {"Accept": "application/json"}
    key = os.environ.get(API_KEY_ENV, "").strip()
    if key:
        headers["X-API-Key"] = key
    with ctx.http_client(headers=headers) as client:
        return ctx.post_json(client, API_HOST, INSTANCE_TYPES_PATH, json=build_request())


def fetch(ctx: SourceContext) -> Batch:
    """One request: every VM instance type with its variants, prices and free nodes per datacenter."""
    return build_batch(parse_instance_types(fetch_instance_types(ctx)))
