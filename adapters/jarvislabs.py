"""Jarvislabs.ai: per-GPU prices, spot prices and free GPUs per region, for containers and VMs.

The catalogue the official `jarvislabs` SDK reads (Bearer JL_API_KEY): `GET https://backendn.jarvislabs.net/misc/`
({"success": true}: the account pays in INR, quarantined) and `GET .../misc/server_meta` (numbers may be text).
Rows are per server: one GPU, region and workload at one price are merged (free GPUs summed), another
price refused. One 1-GPU offer per GPU x region x workload and purchase option.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts

NAME = "jarvislabs"
API_HOST = "backendn.jarvislabs.net"  # the SDK's default region (india-noida-01) answers for all regions
CURRENCY_PATH = "/misc/"
SERVER_META_PATH = "/misc/server_meta"
API_KEY_ENV = "JL_API_KEY"
# The regions the SDK has a backend host for (REGION_URLS): a row elsewhere is counted, not loaded.
CREATABLE_REGIONS = ("india-chennai-01", "india-noida-01", "europe-01")
WORKLOADS = {"container": "container", "vm": "vm", None: "container-or-vm"}

PRICING_PAGE = "https://jarvislabs.ai/pricing"
STORAGE_USD_PER_GB_MONTH = 0.10  # pricing page, read 2026-09-20

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="Jarvislabs.ai", kind="gpu_cloud", billing_granularity_s=60, minimum_charge_s=None,
        billing_notes="Billed per minute of compute at the listed per-GPU-hour rates (pricing page); a minimum "
                      "charge is not stated. Spot is offered for GPU containers (up to 56% off, pricing page).",
        storage_persists_when_stopped=True,
        stopped_billing_notes="Pausing an instance stops compute billing; its storage is kept and billed at "
                              "0.10 USD per GB-month (SDK docs, pricing page).",
        access_ssh=True, access_docker=None, access_jupyter=True,
        interruptible_offer="Spot GPU containers at the row's spot_price (loaded as purchase option spot)",
        price_source="Jarvislabs backend GET backendn.jarvislabs.net/misc/server_meta (API key), the catalogue "
                     "of the official jarvislabs SDK; pricing page for storage and egress",
        source_urls=["https://docs.jarvislabs.ai/sdk", "https://github.com/jarvislabsai/jarvislabs", PRICING_PAGE]),
)


def _number(value: Any, what: str, *, required: bool = True) -> float | None:
    """A number the catalogue may send as text ("24", "8")."""
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ValueError(f"no {what}")
        return None
    return as_number(value, what, ValueError)


def _whole(value: Any, what: str) -> int | None:
    number = _number(value, what, required=False)
    if number is not None and (not math.isfinite(number) or number < 0 or number != int(number)):
        raise ValueError(f"{what} {value!r} is not a count")
    return None if number is None else int(number)


@dataclass
class _Listing:
    """One GPU x region x workload: the first row's price and specs, the free GPUs of every row."""

    row: dict[str, Any]
    price: float | None
    spot_price: float | None
    free_on_demand: int = 0
    free_spot: int = 0
    servers: int = 0
    max_gpus: int = 1


def listing_name(row: Any) -> str:
    """"H100-container", "L4-vm", "H200-container-or-vm": the GPU and the launch it is for."""
    if not isinstance(row, dict):
        return "?"
    return f"{row.get('gpu_type')}-{WORKLOADS.get(row.get('workload_type'), str(row.get('workload_type')))}"


@drift_guard("jarvislabs: server_meta")
def parse_server_meta(doc: Any, currency: str = "USD") -> Batch:
    """The catalogue -> 1-GPU offers per GPU x region x workload, plus storage and egress terms."""
    rows = dig(doc, "server_meta")
    if not isinstance(rows, list):
        raise SchemaDriftError("jarvislabs: server_meta answer lacks the 'server_meta' list")
    if not rows:
        raise SourceError("jarvislabs: server_meta returned no GPU rows")
    if not any(isinstance(r, dict) and "price_per_hour" in r for r in rows):
        raise SchemaDriftError("jarvislabs: no server_meta row has a 'price_per_hour': the answer changed shape")
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    listings: dict[tuple[str, str], _Listing] = {}
    for row in rows:
        _gather(batch, row, listings, skipped)
    for (region, name), listing in listings.items():
        _add_listing(batch, region, name, listing, currency)
    combos = dig(doc, "cpu_meta", "combinations")
    if isinstance(combos, list) and combos:
        skipped["CPU-only VM sizes (cpu_meta)"] += len(combos)
    for region in sorted({region for region, _ in listings}):
        batch.add("storage", f"{region}/instance-storage", {"source": PRICING_PAGE}, region=region,
                  storage_class="instance-storage", usd_per_gb_month=STORAGE_USD_PER_GB_MONTH,
                  description="instance storage, 0.10 USD per GB-month, kept and billed while paused "
                              "(pricing page, read 2026-09-20)")
        batch.add("egress", f"{region}/same_region", {"source": PRICING_PAGE}, region=region,
                  destination="same_region", tier_start_gb=0.0, usd_per_gb=0.0,
                  description="egress free in-region (pricing page, read 2026-09-20)")
    batch.notes.append("jarvislabs: internet egress is not priced on the pricing page (only 'free in-region'); "
                       "no internet egress record loaded")
    batch.note_skipped(f"jarvislabs: {len(rows)} GPU rows, {len(listings)} GPU x region x workload listings", skipped)
    return batch


def _gather(batch: Batch, row: Any, listings: dict[tuple[str, str], _Listing], skipped: Counter[str]) -> None:
    name = listing_name(row)
    if not isinstance(row, dict) or not row.get("gpu_type") or not row.get("region"):
        return batch.quarantine("offer", name, "schema: a server_meta row lacks 'gpu_type' or 'region'", row)
    region = str(row["region"])
    ref = f"{name}/{region}"
    if region not in CREATABLE_REGIONS:
        skipped[f"rows in regions the SDK cannot create in ({region})"] += 1
        return
    if row.get("workload_type") not in WORKLOADS:
        return batch.quarantine("offer", ref, f"{name}: workload_type {row.get('workload_type')!r} is not "
                                "container, vm or null", row)
    try:
        price = _number(row.get("price_per_hour"), "price_per_hour")
        spot = _number(row.get("spot_price"), "spot_price", required=False)
        free = _whole(row.get("num_free_devices"), "num_free_devices") or 0
        effective = _whole(row.get("effective_num_free_devices"), "effective_num_free_devices")
        max_gpus = _whole(row.get("num_gpus"), "num_gpus") or 1
        for what, value in (("price_per_hour", price), ("spot_price", spot)):
            # Checked here: a bad row must not become the listing the other servers' rows are held against.
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{what} {value} is not a positive finite number")
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", row)
    listing = listings.setdefault((region, name), _Listing(row=row, price=price, spot_price=spot))
    if not (_same(listing.price, price) and _same(listing.spot_price, spot)):
        return batch.quarantine("offer", ref, f"duplicate listing {ref} at another price ({price} against "
                                f"{listing.price}; spot {spot} against {listing.spot_price}): the first row kept, "
                                "this one refused", row)
    listing.free_on_demand += effective if effective is not None else free
    listing.free_spot += free
    listing.servers += 1
    listing.max_gpus = max(listing.max_gpus, max_gpus)


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b))


def _add_listing(batch: Batch, region: str, name: str, listing: _Listing, currency: str) -> None:
    row, ref = listing.row, f"{name}/{region}"
    if not batch.usd_only("offer", ref, currency, row):
        return
    try:
        vram = _number(row.get("vram"), "vram", required=False)
        vcpus = _number(row.get("cpus_per_gpu"), "cpus_per_gpu", required=False)
        ram = _number(row.get("ram_per_gpu"), "ram_per_gpu", required=False)
        model, exact = canonicalize(NAME, str(row["gpu_type"]), vram * 1024 if vram else None)
    except UnknownGPUError as err:
        return batch.quarantine("offer", ref, f"gpu: {err} ({ref})", row)
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{ref}: {err}", row)
    data = {"gpu_type": row["gpu_type"], "workload": WORKLOADS[row.get("workload_type")],
            "max_gpus_per_instance": listing.max_gpus, "servers": listing.servers, "arc": row.get("arc")}
    # both prices were checked positive and finite in _gather
    for option, price, free in (("on_demand", listing.price, listing.free_on_demand),
                                ("spot", listing.spot_price, listing.free_spot)):
        if price is not None:
            batch.offer(f"{ref}/{option}", row, purchase_option=option, price_per_hour=price, available=free > 0,
                        available_count=free, availability_level="free GPUs" if free else "none free",
                        spot_savings_pct=round(100 * (1 - price / listing.price), 2) if option == "spot" else None,
                        region=region, instance_type=name, gpu_model=model.gpu_model, gpu_variant_exact=exact,
                        gpu_name_reported=str(row["gpu_type"]), gpu_count=1, gpu_memory_gb=vram or None,
                        vcpus=vcpus or None, ram_gb=ram or None, provider_data=data)


def parse_currency(doc: Any) -> str:
    """The account's currency, read as the SDK reads it: INR when `misc/` says success, else USD."""
    if not isinstance(doc, dict):
        raise SchemaDriftError(f"jarvislabs: {CURRENCY_PATH} did not answer a JSON object")
    value = doc.get("success", doc.get("sucess"))
    inr = value.strip().lower() == "true" if isinstance(value, str) else bool(value)
    return "INR" if inr else "USD"


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, needs="the catalogue needs an API key") as client:
        currency = parse_currency(ctx.get_json(client, API_HOST, CURRENCY_PATH))
        return parse_server_meta(ctx.get_json(client, API_HOST, SERVER_META_PATH), currency)
