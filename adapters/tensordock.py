"""TensorDock: the GPU marketplace's deployable locations, landed as whole-machine aggregates.

`GET https://dashboard.tensordock.com/api/v2/locations`, the key as a Bearer token (env TENSORDOCK_API_KEY):
per location its GPUs, each with a USD price per GPU-hour and per-vCPU, per-GB RAM and disk rates.
A row is n GPUs and the smallest machine around them (MIN_*) per GPU model, count and ISO country, at the
cheapest location's price.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from typing import Any, NamedTuple

from gpuledger.adapters.base import (
    SchemaDriftError, SourceContext, SourceError, dig, drift_guard, listed_price, spread, stated_currency,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import GPUModel, UnknownGPUError, canonicalize
from gpuledger.warehouse.records import MAX_PLAUSIBLE_PRICE_PER_HOUR_USD, Batch, ProviderFacts

NAME = "tensordock"
API_HOST = "dashboard.tensordock.com"
LOCATIONS_PATH = "/api/v2/locations"
API_KEY_ENV = "TENSORDOCK_API_KEY"

MIN_STORAGE_GB = 100  # "Minimum storage: 100GB" (Instance Creation, key requirements)
MIN_VCPUS = 2  # smallest vcpu_count in the reference's create examples; modify steps are 2
MIN_RAM_GB = 4  # smallest ram_gb in the reference's create examples
GPU_COUNTS = (1, 2, 4, 8)  # the machine sizes landed; a location may allow other counts too
HOURS_PER_MONTH = 730  # converts the per-GB-hour disk rate to the warehouse's GB-month

# Country names as TensorDock spells them -> ISO 3166 alpha-2.
COUNTRY_CODES = {
    "United States": "US", "United States of America": "US", "USA": "US", "Canada": "CA",
    "United Kingdom": "GB", "Germany": "DE", "France": "FR", "Netherlands": "NL", "Belgium": "BE",
    "Sweden": "SE", "Norway": "NO", "Finland": "FI", "Denmark": "DK", "Poland": "PL", "Czechia": "CZ",
    "Czech Republic": "CZ", "Spain": "ES", "Portugal": "PT", "Italy": "IT", "Switzerland": "CH",
    "Austria": "AT", "Ireland": "IE", "Iceland": "IS", "Romania": "RO", "Bulgaria": "BG", "Estonia": "EE",
    "Lithuania": "LT", "Latvia": "LV", "Ukraine": "UA", "Turkey": "TR", "Israel": "IL", "India": "IN",
    "Singapore": "SG", "Japan": "JP", "South Korea": "KR", "Taiwan": "TW", "Hong Kong": "HK",
    "Australia": "AU", "New Zealand": "NZ", "Brazil": "BR", "Mexico": "MX", "Chile": "CL",
    "South Africa": "ZA", "United Arab Emirates": "AE",
}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(API_KEY_ENV,), credentials_required=True,
    facts=ProviderFacts(
        display_name="TensorDock", kind="marketplace", billing_granularity_s=1, minimum_charge_s=None,
        billing_notes="Billing is pro-rated to the microsecond (tensordock.com, as transcribed 2026-05-25); "
                      "an account needs a balance of at least 1 USD to deploy, and VMs are stopped when it runs "
                      "out. Host-set prices per GPU, vCPU, GB of RAM and GB of disk.",
        stopped_billing_notes="Disk keeps billing at the standard rate while a spot VM is outbid (spot-instances "
                              "doc); what a stopped on-demand VM is charged is not documented in the sources read.",
        access_ssh=True, access_docker=True, access_jupyter=True,
        interruptible_offer="Spot instances (beta): a per-VM bid above the host's minimum (about half the "
                            "on-demand price); not in the locations answer, not loaded",
        price_source="TensorDock API v2 GET dashboard.tensordock.com/api/v2/locations (API key); per-GPU rate "
                     "x count + 2 vCPU + 4 GB RAM + 100 GB disk at the location's rates, aggregated per GPU "
                     "model x count x country",
        source_urls=["https://dashboard.tensordock.com/api/docs/fetch-hostnodes",
                     "https://dashboard.tensordock.com/api/docs/instance-creation",
                     "https://dashboard.tensordock.com/api/docs",
                     "https://docs.tensordock.com/virtual-machines/spot-instances", "https://www.tensordock.com"]),
)


def country_code(country: Any) -> str:
    """'United States' -> 'US'; a name missing from COUNTRY_CODES -> its slug; none -> 'unknown'."""
    name = country.strip() if isinstance(country, str) else ""
    if name in COUNTRY_CODES or re.fullmatch(r"[A-Z]{2}", name):
        return COUNTRY_CODES.get(name, name)
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unknown"


class Listing(NamedTuple):
    location: dict[str, Any]
    gpu: dict[str, Any]
    model: GPUModel
    exact: bool
    max_count: int
    gpu_rate: float  # USD per GPU-hour
    vcpu_rate: float  # USD per vCPU-hour
    ram_rate: float  # USD per GB-hour of RAM
    storage_rate: float  # USD per GB-hour of disk
    country: str

    def machine_price(self, gpus: int) -> float:
        base = MIN_VCPUS * self.vcpu_rate + MIN_RAM_GB * self.ram_rate + MIN_STORAGE_GB * self.storage_rate
        return round(gpus * self.gpu_rate + base, 6)


def _gpu_name(gpu: dict[str, Any]) -> str:
    return str(gpu.get("v0Name") or gpu.get("displayName") or "")


def _canonical(gpu: dict[str, Any]) -> tuple[GPUModel, bool]:
    """The v0Name through gpu_aliases, then the display name; UnknownGPUError names the v0Name."""
    first: UnknownGPUError | None = None
    for name in (gpu.get("v0Name"), gpu.get("displayName")):
        if isinstance(name, str) and name.strip():
            try:
                return canonicalize(NAME, name)
            except UnknownGPUError as err:
                first = first or err
    raise first or UnknownGPUError(f"a GPU listing names no GPU (no v0Name or displayName) from {NAME}")


@drift_guard("tensordock: locations")
def parse_locations(doc: Any) -> list[dict[str, Any]]:
    locations = dig(doc, "data", "locations")
    if not isinstance(locations, list):
        raise SchemaDriftError("tensordock: locations answer lacks the 'data.locations' list")
    if not locations:
        raise SourceError("tensordock: the locations answer returned no locations")
    gpus = [g for loc in locations if isinstance(loc, dict) for g in (loc.get("gpus") or []) if isinstance(g, dict)]
    for field in ("v0Name", "max_count", "price_per_hr"):
        if gpus and not any(field in g for g in gpus):
            raise SchemaDriftError(f"tensordock: no GPU listing of any location has {field!r}: the API changed shape")
    return locations


@drift_guard("tensordock: listings")
def build_batch(locations: list[dict[str, Any]]) -> Batch:
    batch = PROVIDER.batch()
    skipped: Counter[str] = Counter()
    seen_locations: set[str] = set()
    slugs: set[str] = set()
    listings: list[Listing] = []
    unknown: dict[str, tuple[str, list[str]]] = {}  # GPU name -> (why, its locations)
    for location in locations:
        if not isinstance(location, dict) or not location.get("id"):
            batch.quarantine("offer", "?", "schema: a location lacks 'id'", location)
            continue
        loc_id = str(location["id"])
        if batch.listed_again(seen_locations, loc_id, f"location id {loc_id}", location):
            continue
        country = country_code(location.get("country"))
        if country != "unknown" and not re.fullmatch(r"[A-Z]{2}", country):
            slugs.add(str(location.get("country")))
        if not isinstance(location.get("gpus"), list):
            batch.quarantine("offer", loc_id, f"location {loc_id}: lacks the 'gpus' list", location)
            continue
        if not location["gpus"]:
            skipped["locations listing no GPU"] += 1
        names_here: set[str] = set()
        for gpu in location["gpus"]:
            outcome = _listing(batch, location, gpu, country, names_here)
            if isinstance(outcome, Listing):
                listings.append(outcome)
            elif isinstance(outcome, UnknownGPUError):
                unknown.setdefault(_gpu_name(gpu), (str(outcome), []))[1].append(loc_id)
            elif outcome:
                skipped[outcome] += 1
    for name, (why, where) in sorted(unknown.items()):
        batch.quarantine("offer", f"gpu/{name}", f"gpu: {why} ({len(where)} listings)",
                         {"v0Name": name, "listing_count": len(where), "locations": sorted(where)[:50]})
    groups: dict[tuple[str, int, str], list[Listing]] = defaultdict(list)
    for listing in listings:
        for n in GPU_COUNTS:
            if listing.max_count >= n:
                groups[(listing.model.gpu_model, n, listing.country)].append(listing)
    for key in sorted(groups):
        _add_group(batch, key, groups[key])
    _add_disk_rates(batch, listings)
    batch.add("egress", "global/internet", {"source": "https://www.tensordock.com"}, region="global",
              destination="internet", tier_start_gb=0.0, usd_per_gb=0.0,
              description="no bandwidth charges (tensordock.com, as read 2026-09-29); the same at every location")
    batch.note_skipped(f"tensordock: {len(seen_locations)} locations, {len(listings)} priced GPU listings", skipped)
    if slugs:
        batch.notes.append("tensordock: countries without an ISO code in COUNTRY_CODES (region is their slug): "
                           + ", ".join(sorted(slugs)))
    return batch


def _listing(batch: Batch, location: dict[str, Any], gpu: Any, country: str, names_here: set[str]) -> Any:
    """One GPU listing priced, or what became of it: None (quarantined), an unknown GPU, a reason to count."""
    loc_id = str(location["id"])
    if not isinstance(gpu, dict):
        return batch.quarantine("offer", f"{loc_id}/?", f"location {loc_id}: a GPU listing is not an object", gpu)
    name = _gpu_name(gpu)
    ref = f"{loc_id}/{name or '?'}"
    if batch.listed_again(names_here, name, f"GPU listing {name} at location {loc_id}", gpu, ref=ref):
        return None
    currency = stated_currency(gpu) or stated_currency(location)
    if currency and not batch.usd_only("offer", ref, currency, gpu):
        return None
    if gpu.get("max_count") == 0:
        return "GPU listings with no capacity (max_count 0)"
    try:
        model, exact = _canonical(gpu)
        max_count = gpu.get("max_count")
        if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 0:
            raise ValueError(f"max_count {max_count!r} is not a whole count")
        gpu_rate = listed_price(gpu.get("price_per_hr"), "price_per_hr")
        pricing = gpu.get("pricing")
        if not isinstance(pricing, dict):
            raise ValueError("lacks the 'pricing' object (vCPU, RAM and storage rates), so no machine can be priced")
        rates = [listed_price(pricing.get(k), f"pricing.{k}", positive=False)
                 for k in ("per_vcpu_hr", "per_gb_ram_hr", "per_gb_storage_hr")]
        for key, need in (("max_vcpus", MIN_VCPUS), ("max_ram_gb", MIN_RAM_GB), ("max_storage_gb", MIN_STORAGE_GB)):
            have = dig(gpu, "resources", key)
            if isinstance(have, (int, float)) and not isinstance(have, bool) and have < need:
                raise ValueError(f"resources.{key} {have} is below the {need} the smallest machine needs")
        listing = Listing(location, gpu, model, exact, max_count, gpu_rate, *rates, country)
    except UnknownGPUError as err:
        return err
    except ValueError as err:
        return batch.quarantine("offer", ref, f"{name} at location {loc_id}: {err}", gpu)
    if listing.machine_price(1) > MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:
        return batch.quarantine("offer", ref, f"{name} at location {loc_id}: price_per_hr {listing.gpu_rate} USD "
                                f"exceeds the plausibility cap {MAX_PLAUSIBLE_PRICE_PER_HOUR_USD:g}", gpu)
    return listing


def _add_group(batch: Batch, key: tuple[str, int, str], listings: list[Listing]) -> None:
    model_name, n, country = key
    cheapest = min(listings, key=lambda x: (x.machine_price(n), str(x.location.get("id"))))
    loc, gpu = cheapest.location, cheapest.gpu
    # Per-GPU memory as the v0Name states it ("...-24gb"), else the card's nominal size.
    m = re.search(r"(\d+)gb$", str(gpu.get("v0Name") or "").lower())
    data = {
        "location_count": len(listings),
        "price_per_gpu_hour": spread([x.gpu_rate for x in listings]),
        "machine_price_per_hour": spread([x.machine_price(n) for x in listings]),
        "cheapest_location": {"id": loc.get("id"), "city": loc.get("city"), "stateprovince": loc.get("stateprovince"),
                              "tier": loc.get("tier"), "usd_per_gpu_hour": cheapest.gpu_rate,
                              "usd_per_vcpu_hour": cheapest.vcpu_rate, "usd_per_gb_ram_hour": cheapest.ram_rate,
                              "usd_per_gb_storage_hour": cheapest.storage_rate},
        "included": {"vcpus": MIN_VCPUS, "ram_gb": MIN_RAM_GB, "storage_gb": MIN_STORAGE_GB},
        "gpus_available_by_location": {str(x.location.get("id")): x.max_count for x in listings},
        "gpu_names": sorted({_gpu_name(x.gpu) for x in listings}),
    }
    raw = {"group": list(key), "cheapest_listing": gpu, "cheapest_location": loc.get("id")}
    batch.offer(
        f"{country}/{n}x {model_name}", raw, region=country, instance_type=f"{n}x {model_name}",
        purchase_option="on_demand", gpu_model=model_name, gpu_variant_exact=cheapest.exact,
        gpu_name_reported=_gpu_name(gpu), gpu_count=n,
        gpu_memory_gb=float(m.group(1)) if m else cheapest.model.memory_gb, vcpus=float(MIN_VCPUS),
        ram_gb=float(MIN_RAM_GB), local_disk_gb=float(MIN_STORAGE_GB), price_per_hour=cheapest.machine_price(n),
        available=True, available_count=sum(x.max_count for x in listings), availability_level="offered",
        provider_data=data)


def _add_disk_rates(batch: Batch, listings: list[Listing]) -> None:
    by_country: dict[str, list[float]] = defaultdict(list)
    for x in listings:
        if x.storage_rate > 0:
            by_country[x.country].append(x.storage_rate)
    for country, rates in sorted(by_country.items()):
        median = round(statistics.median(rates), 6)
        monthly = round(median * HOURS_PER_MONTH, 6)
        batch.add("storage", f"{country}/vm-disk", {"country": country, "per_gb_storage_hr": sorted(rates)},
                  region=country, storage_class="vm-disk", usd_per_gb_month=monthly,
                  description=f"VM disk: median host rate {median:g} USD per GB-hour x {HOURS_PER_MONTH} h "
                              f"({len(rates)} listings, {min(rates):g} to {max(rates):g})")


def fetch(ctx: SourceContext) -> Batch:
    with ctx.keyed_client(API_KEY_ENV, needs="the v2 API takes an API key as a Bearer token") as client:
        doc = ctx.get_json(client, API_HOST, LOCATIONS_PATH, conditional=True)
    return build_batch(parse_locations(doc))
