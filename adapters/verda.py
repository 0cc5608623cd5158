"""Verda (formerly DataCrunch): GPU instance types, on-demand and spot prices, where each deploys now.

`https://api.verda.com/v1`, OAuth2 client credentials (VERDA_CLIENT_ID, VERDA_CLIENT_SECRET); no paging:
POST /v1/oauth2/token, GET /v1/instance-types?currency=usd (prices as decimal text, the GPU as
"1x H100 SXM5 80GB"), /v1/instance-availability?isSpot=false|true and /v1/volume-types.
A price holds in every location: one offer per location x option priced, `available` if listed there now.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from typing import Any, NamedTuple

from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError, as_number
from gpuledger.adapters.base import dig, drift_guard, register_secret, stated_currency
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, not_usd, tally

NAME = "verda"
API_HOST = "api.verda.com"
TOKEN_PATH = "/v1/oauth2/token"
INSTANCE_TYPES_PATH = "/v1/instance-types"
AVAILABILITY_PATH = "/v1/instance-availability"
VOLUME_TYPES_PATH = "/v1/volume-types"
CLIENT_ID_ENV = "VERDA_CLIENT_ID"
CLIENT_SECRET_ENV = "VERDA_CLIENT_SECRET"
CURRENCY = "USD"
GLOBAL_REGION = "global"  # used only when the availability answers name no location at all

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(CLIENT_ID_ENV, CLIENT_SECRET_ENV), credentials_required=True,
    facts=ProviderFacts(
        display_name="Verda (formerly DataCrunch)", kind="gpu_cloud", billing_granularity_s=600,
        billing_notes="On-demand and spot instances are billed in 10-minute increments (a third-party guide "
                      "states it; not verified on Verda's own pages). Prices exclude VAT.",
        stopped_billing_notes="Block volumes (NVMe, 0.20 USD per GiB-month on the pricing page) bill until "
                              "deleted; whether a shut-down instance keeps billing was not verified.",
        access_ssh=True,
        multinode_interconnect="Instant clusters with InfiniBand (bandwidth not verified; not loaded)",
        interruptible_offer="Spot instances at a fixed, lower price; Verda may reclaim them at any time "
                            "(loaded as purchase option spot)",
        price_source="Verda API GET /v1/instance-types, /v1/instance-availability and /v1/volume-types "
                     "(OAuth2 client credentials)",
        source_urls=["https://api.verda.com/v1/docs", "https://github.com/verda-cloud/sdk-python",
                     "https://verda.com/pricing", "https://docs.verda.com/welcome-to-verda/pricing-and-billing"]),
)

# "1x H100 SXM5 80GB", "8x B200 SXM6 180GB", "1x Tesla V100 16GB", "2x RTX A6000 48GB".
_GPU_DESCRIPTION = re.compile(r"^\s*(?P<count>\d+)\s*x\s+(?P<name>.+?)\s+(?P<mem>\d+(?:\.\d+)?)\s*GB\s*$", re.I)
_SXM = re.compile(r"\bSXM\d?\b", re.I)


class GpuDescription(NamedTuple):
    count: int
    name: str  # "H100 SXM5": looked up in gpu_aliases
    memory_gb: float  # per GPU, as Verda states it


def parse_gpu_description(text: Any) -> GpuDescription:
    m = _GPU_DESCRIPTION.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"gpu description {text!r} is not '<n>x <name> <memory>GB'")
    return GpuDescription(int(m.group("count")), m.group("name"), float(m.group("mem")))


def _price(value: Any, what: str) -> float:
    """A price as Verda sends it (a decimal string; a number is taken too)."""
    price = as_number(value, what, ValueError)
    if not math.isfinite(price):
        raise ValueError(f"{what} {value!r} is not a finite number")
    if price <= 0:
        raise ValueError(f"{what} {value!r} must be positive")
    return price


def _priced(value: Any) -> bool:
    """False for a price field that says "none": absent, empty or zero (the SDK reads every one as a number)."""
    try:
        return value not in (None, "") and as_number(value, "", ValueError) != 0
    except ValueError:
        return True  # stated, but no number: _price says why it is refused


def _size(obj: Any, key: str = "size_in_gigabytes") -> float | None:
    value = dig(obj, key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def parse_availability(doc: Any, what: str) -> dict[str, set[str]]:
    """An instance-availability answer -> {location code: instance types deployable there now}."""
    if not isinstance(doc, list):
        raise SchemaDriftError(f"verda: the {what} availability answer is not a list of locations")
    out: dict[str, set[str]] = {}
    for entry in doc:
        if not isinstance(entry, dict) or not isinstance(entry.get("location_code"), str) \
                or not isinstance(entry.get("availabilities"), list):
            raise SchemaDriftError(f"verda: a {what} availability entry lacks 'location_code' or 'availabilities'")
        out.setdefault(entry["location_code"], set()).update(str(t) for t in entry["availabilities"])
    return out


@drift_guard("verda: instance types")
def parse_instance_types(doc: Any, on_demand: dict[str, set[str]], spot: dict[str, set[str]],
                         volume_types: Any = None) -> Batch:
    """The instance-types answer and both availability answers -> offers; volume types -> storage."""
    if not isinstance(doc, list):
        raise SchemaDriftError("verda: the instance-types answer is not a list")
    if not doc:
        raise SourceError("verda: the instance-types answer returned no instance types")
    if not any(isinstance(t, dict) and "price_per_hour" in t for t in doc):  # not every type sold as spot alone
        raise SchemaDriftError("verda: no instance type has a 'price_per_hour': the answer changed shape")
    batch = PROVIDER.batch()
    locations = sorted(set(on_demand) | set(spot)) or [GLOBAL_REGION]
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    for item in doc:
        name = dig(item, "instance_type")
        if not isinstance(name, str) or not name:
            batch.quarantine("offer", "?", "schema: an instance type lacks 'instance_type'", item)
            continue
        if batch.listed_again(seen, name, f"instance_type {name}", item):
            continue
        gpu = item.get("gpu")
        if not isinstance(gpu, dict) or not isinstance(gpu.get("number_of_gpus"), int):
            batch.quarantine("offer", name, "schema: lacks 'gpu.number_of_gpus'", item)
            continue
        if gpu["number_of_gpus"] == 0:
            skipped["CPU-only instance types skipped"] += 1
            continue
        try:
            options = _add_offers(batch, name, item, gpu, locations, {"on_demand": on_demand, "spot": spot})
        except ValueError as err:
            batch.quarantine("offer", name, f"{name}: {err}", item)
            continue
        skipped.update(why for option, why in (("spot", "GPU types without a spot price (on-demand only)"),
                                               ("on_demand", "GPU types without an on-demand price (spot only)"))
                       if option not in options)
    _add_volume_types(batch, volume_types)
    batch.notes.append(f"verda: {len(doc)} instance types in {len(locations)} locations ({', '.join(locations)}); "
                       + (tally(skipped) or "nothing skipped"))
    return batch


def _add_offers(batch: Batch, name: str, item: dict[str, Any], gpu: dict[str, Any], locations: list[str],
                deployable: dict[str, dict[str, set[str]]]) -> set[str]:
    """The type's offers per location and option priced (returned); ValueError, before any is added, refuses it."""
    currency = stated_currency(item)
    if currency != CURRENCY:
        raise ValueError(not_usd(currency))
    count = gpu["number_of_gpus"]
    try:
        desc = parse_gpu_description(gpu.get("description"))
        if desc.count != count:
            raise ValueError(f"description says {desc.count} GPUs, number_of_gpus says {count}")
        model, exact = canonicalize(NAME, desc.name, desc.memory_gb * 1024)
    except ValueError as err:  # an UnknownGPUError too
        raise ValueError(f"gpu: {err}") from None
    # A type may be sold as spot only: its on-demand price is then empty or zero, and its spot offers stand.
    on_demand, spot = item.get("price_per_hour"), item.get("spot_price")
    prices = {"on_demand": _price(on_demand, "price_per_hour")} if _priced(on_demand) or not _priced(spot) else {}
    if _priced(spot):
        prices["spot"] = _price(spot, "spot_price")
    common = dict(
        instance_type=name, gpu_model=model.gpu_model, gpu_variant_exact=exact,
        gpu_name_reported=gpu["description"], gpu_count=count, gpu_memory_gb=desc.memory_gb,
        total_gpu_memory_gb=_size(item.get("gpu_memory")) or desc.memory_gb * count,
        vcpus=_size(item.get("cpu"), "number_of_cores"), ram_gb=_size(item.get("memory")),
        local_disk_gb=_size(item.get("storage")),
        interconnect="NVLink" if count > 1 and _SXM.search(desc.name) else None,
        provider_data={"id": item.get("id"), "p2p": item.get("p2p"), "description": item.get("description"),
                       "price_per_hour": item.get("price_per_hour"), "spot_price": item.get("spot_price")})
    for option, price in prices.items():
        for location in locations:
            now = name in deployable[option].get(location, set()) if location != GLOBAL_REGION else None
            batch.offer(f"{name}/{location}/{option}", item, region=location, purchase_option=option,
                        price_per_hour=price, available=now,
                        availability_level=None if now is None else "deployable now" if now else "not deployable now",
                        **common)
    return set(prices)


def _add_volume_types(batch: Batch, doc: Any) -> None:
    """Block-volume prices per GB-month from /v1/volume-types (the pricing page says per GiB)."""
    if doc is None:
        return
    if not isinstance(doc, list):
        raise SchemaDriftError("verda: the volume-types answer is not a list")
    for item in doc:
        kind = dig(item, "type")
        price = dig(item, "price")
        if not isinstance(kind, str) or not isinstance(price, dict):
            batch.quarantine("storage", str(kind or "?"), "schema: a volume type lacks 'type' or 'price'", item)
            continue
        if not batch.usd_only("storage", kind, stated_currency(price), item):
            continue
        try:
            usd = _price(price.get("price_per_month_per_gb"), "price_per_month_per_gb")
        except ValueError as err:
            batch.quarantine("storage", kind, f"{kind}: {err}", item)
            continue
        batch.add("storage", f"{GLOBAL_REGION}/{kind}", item, region=GLOBAL_REGION, storage_class=kind,
                  usd_per_gb_month=usd,
                  description=f"Verda {kind} block volume, per GB-month (/v1/volume-types); same in every location")


def access_token(ctx: SourceContext, client: Any) -> str | None:
    """An OAuth2 access token for the client credentials, or None under replay without them."""
    client_id = os.environ.get(CLIENT_ID_ENV, "").strip()
    secret = os.environ.get(CLIENT_SECRET_ENV, "").strip()
    if not (client_id and secret):
        if ctx.reaches_provider:
            missing = [n for n, v in ((CLIENT_ID_ENV, client_id), (CLIENT_SECRET_ENV, secret)) if not v]
            raise MissingCredentialsError(f"verda: {' and '.join(missing)} not set; the API needs OAuth2 "
                                          "client credentials")
        return None
    doc = ctx.post_json(client, API_HOST, TOKEN_PATH,
                        json={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret})
    token = dig(doc, "access_token")
    if not isinstance(token, str) or not token:
        raise SourceError(f"verda: {API_HOST}{TOKEN_PATH} answered without an access_token")
    register_secret(token)
    if isinstance(doc.get("refresh_token"), str):
        register_secret(doc["refresh_token"])
    return token


def fetch(ctx: SourceContext) -> Batch:
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        token = access_token(ctx, client)
        if token:
            client.headers["Authorization"] = f"Bearer {token}"
        types = ctx.get_json(client, API_HOST, INSTANCE_TYPES_PATH, params={"currency": "usd"})
        on_demand, spot = (
            parse_availability(ctx.get_json(client, API_HOST, AVAILABILITY_PATH, params={"isSpot": flag}), what)
            for flag, what in (("false", "on-demand"), ("true", "spot")))
        volumes = ctx.get_json(client, API_HOST, VOLUME_TYPES_PATH)
    return parse_instance_types(types, on_demand, spot, volumes)
