"""CloudRift: GPU instance types, their prices and the free nodes per datacenter.

`POST https://api.cloudrift.ai/api/v1/instance-types/list` with the envelope `{"version", "data"}`, no key
needed (CLOUDRIFT_API_KEY, when set, goes in `X-API-Key`); sizes in bytes, money in US cents (seen live:
25.0 on a 0.25 USD/h rental). One offer per variant and datacenter listing it, or one "global" row,
available=False.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, dig, drift_guard, finite_number, listed_price, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, require_usd

NAME = "cloudrift"
API_HOST = "api.cloudrift.ai"
INSTANCE_TYPES_PATH = "/api/v1/instance-types/list"
API_KEY_ENV = "CLOUDRIFT_API_KEY"
API_VERSION = "2026-09-08"  # the protocol date CloudRift's own client pins (cloudrift-ai/emmy PR #809)
# VM-capable types: what SSH access and a custom image need
REQUEST = {"version": API_VERSION, "data": {"selector": {"ByServiceAndLocation": {"services": ["vm"]}}}}
GLOBAL_REGION = "global"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=False,
    facts=ProviderFacts(
        display_name="CloudRift", kind="gpu_cloud", billing_granularity_s=1, minimum_charge_s=0,
        billing_notes="Billed per second of active runtime with no minimum (cloudrift.ai/pricing); a rental "
                      "that fails to start is not charged (docs changelog).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="Persistent volumes bill until deleted, attached or not; stopping a reserved "
                              "instance terminates it and its ephemeral disk (docs: volumes).",
        access_ssh=True, access_docker=True, access_jupyter=None,
        price_source="CloudRift API POST api.cloudrift.ai/api/v1/instance-types/list (no key needed; "
                     "cost_per_hour in US cents per variant)",
        source_urls=["https://api.cloudrift.ai/api-docs/openapi.json", "https://docs.cloudrift.ai/extras/rest-api",
                     "https://docs.cloudrift.ai/cli-interface/instance-management",
                     "https://docs.cloudrift.ai/features/volumes", "https://www.cloudrift.ai/pricing"]),
)


def _counts(value: Any) -> dict[str, int]:
    """A {datacenter: node count} map, read leniently: what is not a count is left out."""
    return {str(dc): int(n) for dc, n in value.items() if finite_number(n) is not None and n >= 0} \
        if isinstance(value, dict) else {}


def _gib(value: Any) -> float | None:
    n = finite_number(value)
    return round(n / 1024 ** 3, 3) if n and n > 0 else None


@drift_guard("cloudrift: instance-types")
def parse_instance_types(doc: Any) -> list[dict[str, Any]]:
    types = dig(doc, "data", "instance_types")
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
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    variants = 0
    unknown: dict[str, tuple[str, list[str]]] = {}  # brand -> (why, its variants)
    for itype in types:
        if not isinstance(itype, dict) or not isinstance(itype.get("variants"), list):
            batch.quarantine("offer", str(itype.get("name") if isinstance(itype, dict) else "?"),
                             "schema: an instance type lacks the 'variants' list", itype)
            continue
        for variant in itype["variants"]:
            variants += 1
            outcome = _add_variant(batch, itype, variant, seen)
            if isinstance(outcome, UnknownGPUError):
                unknown.setdefault(str(itype.get("brand_short") or ""), (str(outcome), []))[1].append(variant["name"])
            elif outcome:
                skipped[outcome] += 1
    for brand, (why, names) in sorted(unknown.items()):
        batch.quarantine("offer", f"gpu/{brand}", f"gpu: {why} ({len(names)} variants)",
                         {"brand_short": brand, "variants": sorted(names)})
    batch.note_skipped(f"cloudrift: {len(types)} instance types, {variants} variants", skipped)
    _add_volumes(batch, types)
    batch.add("egress", f"{GLOBAL_REGION}/internet", {"source": PROVIDER.facts.source_urls[-1]},
              region=GLOBAL_REGION, destination="internet", tier_start_gb=0.0, usd_per_gb=0.0,
              description="no egress or ingress charges (cloudrift.ai/pricing); every datacenter")
    return batch


def _add_variant(batch: Batch, itype: dict[str, Any], variant: Any, seen: set[str]) -> Any:
    """Offers of one variant; returns what was skipped (a reason to count, or an unknown GPU)."""
    name = dig(variant, "name")
    if not isinstance(name, str) or not name:
        return batch.quarantine("offer", f"{itype.get('name')}/?", "schema: a variant lacks 'name'", variant)
    if batch.listed_again(seen, name, f"variant {name}", variant):
        return None
    gpus, cents, vram = variant.get("gpu_count"), variant.get("cost_per_hour"), finite_number(variant.get("vram"))
    if finite_number(gpus) == 0:
        return "CPU-only variants"
    brand = str(itype.get("brand_short") or "")
    try:
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
            raise ValueError(f"gpu_count {gpus!r} is not a whole count")
        require_usd(stated_currency(variant) or stated_currency(itype), "USD cents")
        model, exact = canonicalize(NAME, brand, vram / 2 ** 20 if vram else None)
        price_cents = listed_price(cents, "cost_per_hour")
    except UnknownGPUError as err:
        return err
    except ValueError as err:
        return batch.quarantine("offer", name, f"{name}: {err}", variant)
    common = dict(
        instance_type=name, purchase_option="on_demand", gpu_model=model.gpu_model, gpu_variant_exact=exact,
        gpu_name_reported=brand, gpu_count=gpus, gpu_memory_gb=_gib(vram), price_per_hour=round(price_cents / 100, 6),
        vcpus=finite_number(variant.get("logical_cpu_count")) or finite_number(variant.get("cpu_count")) or None,
        ram_gb=_gib(variant.get("dram")), local_disk_gb=_gib(variant.get("disk")))
    nodes, free = _counts(variant.get("nodes_per_dc")), _counts(variant.get("available_nodes_per_dc"))
    data = {"instance_type": itype.get("name"), "cost_per_hour_cents": cents,
            "available_nodes": variant.get("available_nodes"), "cpu_count": variant.get("cpu_count")}
    if not nodes and not free:
        batch.offer(f"{name}/{GLOBAL_REGION}", variant, region=GLOBAL_REGION, available=False, available_count=0,
                    availability_level="listed in no datacenter", provider_data=data,
                    **common)
    for dc in sorted(set(nodes) | set(free)):
        count = free.get(dc, 0)
        batch.offer(f"{name}/{dc}", variant, region=dc, available=count > 0, available_count=count,
                    availability_level="free nodes" if count else "no free node",
                    provider_data=dict(data, nodes=nodes.get(dc),
                                       ip_availability=dig(variant, "ip_availability_per_dc", dc)), **common)
    return None


def _add_volumes(batch: Batch, types: list[dict[str, Any]]) -> None:
    """Volume types per datacenter (cents per GB-month), once each; a note when none are listed."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for itype in types:
        for variant in itype.get("variants") or [] if isinstance(itype, dict) else []:
            per_dc = dig(variant, "volume_types_per_dc")
            for dc, vtypes in per_dc.items() if isinstance(per_dc, dict) else ():
                for vtype in vtypes if isinstance(vtypes, list) else []:
                    if isinstance(vtype, dict) and vtype.get("name"):
                        found.setdefault((str(dc), str(vtype["name"])), vtype)
    if not found:
        batch.notes.append("cloudrift: no volume type is listed in any datacenter; no storage price loaded")
    for (dc, vname), vtype in sorted(found.items()):
        cents = finite_number(vtype.get("cost_per_gb_per_month"))
        if cents is None or cents <= 0:
            batch.quarantine("storage", f"{dc}/{vname}", f"volume type {vname} in {dc}: cost_per_gb_per_month "
                             f"{vtype.get('cost_per_gb_per_month')!r} is not a positive price", vtype)
            continue
        usd = round(cents / 100, 6)
        batch.add("storage", f"{dc}/{vname}", vtype, region=dc, storage_class=vname, usd_per_gb_month=usd,
                  description=f"persistent volume '{vname}', {cents:g} US cents per GB-month; bills until deleted")


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, "X-API-Key: {key}") as client:
        doc = ctx.post_json(client, API_HOST, INSTANCE_TYPES_PATH, json=REQUEST)
    return build_batch(parse_instance_types(doc))
