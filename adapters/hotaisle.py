"""Hot Aisle: AMD Instinct MI300X virtual machines and bare-metal servers, with their stock.

Hot Aisle's REST API, `Authorization: Token <key>` (HOTAISLE_API_KEY), per team (HOTAISLE_TEAM_HANDLE, else
the key's one team from `GET /api/teams/`): `GET /api/teams/{team}/virtual_machines/available/` and
`.../bare_metal/available/`, JSON arrays with prices in US cents per hour and sizes in bytes.
The API names no type, region or GPU memory: a type is named from its specs, every row is in the one
facility, the memory is the canon's.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, dig, drift_guard, stated_currency
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, require_usd

NAME = "hotaisle"
API_HOST = "admin.hotaisle.app"
TEAMS_PATH = "/api/teams/"
VM_PATH = "/api/teams/{team}/virtual_machines/available/"
BARE_METAL_PATH = "/api/teams/{team}/bare_metal/available/"
API_KEY_ENV = "HOTAISLE_API_KEY"
TEAM_ENV = "HOTAISLE_TEAM_HANDLE"
REGION = "us-michigan-1"  # Hot Aisle's one data center (Switch, Grand Rapids, Michigan); the API names none

PRICING_PAGE = "https://www.hotaisle.xyz/pricing/"
PRICE_POST = "https://www.hotaisle.xyz/blog/why-we-raised-our-mi300x-price/"
COMPUTE_PAGE = "https://www.hotaisle.xyz/compute/"

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    # The team handle is no secret, but the nightly run must know it when the key belongs to several teams.
    nightly_secrets=(API_KEY_ENV, TEAM_ENV),
    facts=ProviderFacts(
        display_name="Hot Aisle", kind="gpu_cloud", billing_granularity_s=60, minimum_charge_s=None,
        billing_notes="VMs and bare metal are billed by the minute (pricing page). Each type's minimum is the "
                      "API's MinimumReservationMinutes (loaded per offer); bare metal has a one-month minimum "
                      "(Hot Aisle's price post of 2026-07-14). Allocations made before 2026-07-14 keep 1.99 USD "
                      "per GPU-hour; new ones pay the listed price.",
        stopped_billing_notes="VMs can be stopped and started through the API; whether a stopped VM keeps billing "
                              "is not documented. There is no separate volume product: each type's local NVMe is "
                              "part of its price.",
        access_ssh=True, access_docker=True, access_jupyter=None,
        multinode_interconnect="RoCEv2 Ethernet, 8x400G per 8-GPU bare-metal server; VMs: not stated",
        price_source="Hot Aisle API GET admin.hotaisle.app/api/teams/{team}/virtual_machines/available/ and "
                     "bare_metal/available/ (API key)",
        source_urls=["https://admin.hotaisle.app/api/docs/", PRICING_PAGE, PRICE_POST, COMPUTE_PAGE]),
)


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{what} {value!r} is not a whole number")
    if value < 0:
        raise ValueError(f"{what} {value!r} is negative")
    return value


def _cpu(specs: dict[str, Any]) -> tuple[str, int | None]:
    """The CPU model and its per-processor core count: one object on a VM, a list on bare metal."""
    cpus = specs.get("cpus")
    first = cpus[0] if isinstance(cpus, list) and cpus else cpus
    if not isinstance(first, dict):
        return "", None
    cores = first.get("cores")
    return str(first.get("model") or "").strip(), cores if isinstance(cores, int) else None


def type_name(kind: str, item: Any) -> str:
    """A name for a listed type (the API gives none): "vm-1x-MI300X-13c-Xeon-Platinum-8470"."""
    specs = dig(item, "Specs")
    if not isinstance(specs, dict):
        return f"{kind}-?"
    gpus = specs.get("gpus") if isinstance(specs.get("gpus"), list) else []
    gpu_part = "+".join(f"{g.get('count')}x-{g.get('model')}" for g in gpus if isinstance(g, dict)) or "cpu"
    parts = [kind, gpu_part, f"{specs.get('cpu_cores')}c", _cpu(specs)[0] or "cpu"]
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", "-".join(parts)).strip("-")


@drift_guard("hotaisle: available types")
def parse_available(vm_doc: Any, bare_metal_doc: Any) -> Batch:
    """The two `available` answers -> one offer per type, plus Hot Aisle's documented egress."""
    for what, doc in (("virtual_machines/available", vm_doc), ("bare_metal/available", bare_metal_doc)):
        if not isinstance(doc, list):
            raise SchemaDriftError(f"hotaisle: {what} did not answer a JSON array (got {type(doc).__name__})")
    if not vm_doc:
        raise SourceError("hotaisle: virtual_machines/available returned no types (a sold-out type is listed "
                          "with Quantity 0, so an empty list is not a full house)")
    if not any(isinstance(i, dict) and "OnDemandPrice" in i for i in vm_doc):
        raise SchemaDriftError("hotaisle: no VM type has an 'OnDemandPrice': the answer changed shape")
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for kind, doc in (("vm", vm_doc), ("bm", bare_metal_doc)):
        for item in doc:
            _add_type(batch, kind, item, seen, skipped)
    batch.add("egress", f"{REGION}/internet", {"source": PRICE_POST}, region=REGION, destination="internet",
              tier_start_gb=0.0, usd_per_gb=0.0,
              description="unmetered internet with IPv4 (Hot Aisle's price post, 2026-07-14)")
    batch.notes.append("hotaisle: no storage prices: there is no volume product; each type's local NVMe "
                       "(its local_disk_gb) is included in its price")
    batch.note_skipped(f"hotaisle: {len(vm_doc)} VM types and {len(bare_metal_doc)} bare-metal types listed", skipped)
    return batch


def _add_type(batch: Batch, kind: str, item: Any, seen: set[str], skipped: Counter[str]) -> None:
    ref = type_name(kind, item)
    try:
        if not isinstance(item, dict) or not isinstance(item.get("Specs"), dict):
            raise ValueError("schema: the type lacks its 'Specs' object")
        specs = item["Specs"]
        gpus = specs.get("gpus") or []
        if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
            raise ValueError("schema: Specs.gpus is not a list of objects")
        gpus = [g for g in gpus if g.get("count") != 0]
        if not gpus:
            skipped["CPU-only types"] += 1
            return
        if len({str(g.get("model")) for g in gpus}) > 1:
            raise ValueError(f"mixed GPU models {[g.get('model') for g in gpus]}; one row cannot say which")
        gpu_count = sum(_count(g.get("count"), "gpus.count") for g in gpus)
        cents = item.get("OnDemandPrice")
        if cents is None or isinstance(cents, bool) or not isinstance(cents, (int, float)):
            raise ValueError("no OnDemandPrice" if cents is None else f"OnDemandPrice {cents!r} is not a number")
        quantity = _count(item.get("Quantity"), "Quantity")
        minimum = item.get("MinimumReservationMinutes")
        minimum_s = _count(minimum, "MinimumReservationMinutes") * 60 if minimum is not None else None
        cores = _count(specs["cpu_cores"], "cpu_cores") if specs.get("cpu_cores") is not None else None
        ram_gib, disk_gib = (round(_count(specs[k], k) / 1024 ** 3, 3) or None if specs.get(k) is not None
                             else None for k in ("ram_capacity", "disk_capacity"))
        require_usd(stated_currency(item), "USD cents")
        model, exact = canonicalize(NAME, str(gpus[0].get("model") or ""))
    except UnknownGPUError as err:
        return batch.quarantine("offer", ref, f"gpu: {err} ({ref})", item)
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", item)
    if batch.listed_again(seen, ref, f"type {ref}", item):
        return
    cpu_model, cores_per_cpu = _cpu(specs)
    metal = kind == "bm"
    data = {"kind": "bare_metal" if metal else "virtual_machine", "on_demand_price_cents": cents,
            "quantity": quantity, "minimum_reservation_minutes": minimum, "cpu_model": cpu_model,
            "cores_per_cpu": cores_per_cpu, "gpu_manufacturer": gpus[0].get("manufacturer")}
    # Every server is a Dell XE9680: eight MI300X joined by Infinity Fabric and eight 400G RoCEv2
    # ports (the compute page); whether a VM's passed-through GPUs keep those links is not stated.
    batch.offer(f"{ref}/{REGION}", item, region=REGION, instance_type=ref, purchase_option="on_demand",
                gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=str(gpus[0].get("model")),
                gpu_count=gpu_count, vcpus=cores or None, ram_gb=ram_gib, local_disk_gb=disk_gib,
                interconnect="Infinity Fabric" if metal and gpu_count > 1 else None,
                network_gbps=3200.0 if metal else None, multinode_fabric="RoCEv2 Ethernet 8x400G" if metal else None,
                price_per_hour=cents / 100, minimum_charge_s=minimum_s, available=quantity > 0,
                available_count=quantity, availability_level="in stock" if quantity > 0 else "sold out",
                provider_data=data)


def parse_team(doc: Any) -> str:
    """The one team a key may price for, from GET /api/teams/ (invitations not yet accepted do not count)."""
    if not isinstance(doc, list):
        raise SchemaDriftError(f"hotaisle: {TEAMS_PATH} did not answer a JSON array of teams")
    handles = sorted({str(t["handle"]) for t in doc
                      if isinstance(t, dict) and t.get("handle") and not t.get("invitation")})
    if not handles:
        raise SourceError(f"hotaisle: the API key belongs to no team; create one (ssh admin.hotaisle.app) "
                          f"or set {TEAM_ENV}")
    if len(handles) > 1:
        raise SourceError(f"hotaisle: the API key belongs to {len(handles)} teams ({', '.join(handles)}); "
                          f"set {TEAM_ENV} to the one whose prices to read")
    return handles[0]


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, "Authorization: Token {key}", needs="the API needs a team's API key") as client:
        team = os.environ.get(TEAM_ENV, "").strip() or parse_team(ctx.get_json(client, API_HOST, TEAMS_PATH))
        if not re.fullmatch(r"[A-Za-z0-9._-]+", team):
            raise SourceError(f"hotaisle: team handle {team[:40]!r} is not a handle")
        return parse_available(*(ctx.get_json(client, API_HOST, path.format(team=team))
                                 for path in (VM_PATH, BARE_METAL_PATH)))
