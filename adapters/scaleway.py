"""Scaleway: GPU Instance prices from the public Product Catalog, stock from the Instance API.

Prices and hardware: Scaleway's Product Catalog API, which needs no key:

    GET https://api.scaleway.com/product-catalog/v2alpha1/public-catalog/products
        ?product_types=instance&page=1&page_size=100
      -> {"products": [{"sku": "/compute/h100_1_80g/run_fr-par-2", "product": "H100-1-80G Instance",
                        "locality": {"zone": "fr-par-2"}, "status": "general_availability",
                        "price": {"retail_price": {"currency_code": "EUR", "units": 2, "nanos": 866500000}},
                        "unit_of_measure": {"unit": "hour", "size": 1},
                        "properties": {"instance": {"offer_id": "H100-1-80G", "range": "GPU"},
                                       "hardware": {"gpu": {"count": 1, "type": "H100-PCIe", ...},
                                                    "cpu": {"virtual": {"count": 24}, ...},
                                                    "ram": {"size": <bytes>}, ...}}}],
          "total_count": 123}

It is preferred to the Instance API's `products/servers` list for prices because it states the
currency and the unit of measure of every price: `products/servers` has a bare `hourly_price`
"in Euro" that, for per-minute-billed GPU types, has been seen holding the per-minute figure
(a third-party guide, 2026-04); read as hourly it would be 60 times too low. Pages are followed
until `total_count` products have come (or a page comes back short).

Stock: the Instance API, with the account's secret key (SCW_SECRET_KEY, Scaleway's standard
variable) in the `X-Auth-Token` header, for every zone the catalogue lists a GPU product in:

    GET https://api.scaleway.com/instance/v1/zones/{zone}/products/servers/availability
        ?per_page=100&page=1
      -> {"servers": {"H100-1-80G": {"availability": "available"|"scarce"|"shortage"}}}
         with the total in the X-Total-Count header; pages followed until it is reached (or a
         page comes back short).

Prices are public, so the key only adds stock: live without it, offers carry no availability and
the notes say why. Without a key, the stock is read under replay all the same.

Currency. Scaleway prices in EUR and gpuledger stores USD. The rate is a setting,
`scaleway_usd_per_eur` (its environment variable is in README's settings table): the EUR price is kept as
`source_price_per_hour` and the rate on every row; with no rate set every EUR price is
quarantined with the reason, never stored as USD.

Row shape: one on-demand offer per GPU product (instance type x zone). Nothing is dropped
silently: CPU-only products are counted in the notes; a GPU product that cannot be priced or
named (unknown GPU, bad Money, unknown unit, listed twice) is quarantined with the reason.

`fetch_*` does the I/O; `parse_*` functions are pure.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts
from gpuledger.warehouse.settings import env_name

NAME = "scaleway"
API_HOST = "api.scaleway.com"
CATALOG_PATH = "/product-catalog/v2alpha1/public-catalog/products"
AVAILABILITY_PATH = "/instance/v1/zones/{zone}/products/servers/availability"
SECRET_KEY_ENV = "SCW_SECRET_KEY"
RATE_SETTING = "scaleway_usd_per_eur"  # USD per EUR; None: EUR prices are quarantined
PAGE_SIZE = 100
MAX_PAGES = 50  # a runaway page chain must still end
HOURS_PER_UNIT = {"hour": 1.0, "minute": 1 / 60, "second": 1 / 3600}
# The Instance API's stock levels; "scarce" can still be had, "shortage" cannot.
DEPLOYABLE = {"available": True, "scarce": True, "shortage": False}

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=(SECRET_KEY_ENV,),
    credentials_required=False,
    facts=ProviderFacts(
        display_name="Scaleway",
        kind="gpu_cloud",
        billing_granularity_s=60,
        billing_notes="GPU Instances are billed per minute of uptime, standby included (RENDER-S per hour); "
                      "prices are in EUR before tax and converted at the configured rate.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="Block volumes and flexible IPs keep billing while the Instance is powered off; "
                              "local scratch NVMe is erased on a full stop.",
        access_ssh=True,
        multinode_interconnect=None,
        interruptible_offer=None,
        price_source="Scaleway Product Catalog API (public, no key); stock from the Instance API "
                     "products/servers/availability (SCW_SECRET_KEY)",
        source_urls=[
            "https://www.scaleway.com/en/developers/api/product-catalog/public-catalog/",
            "https://www.scaleway.com/en/developers/api/instance/",
            "https://www.scaleway.com/en/pricing/gpu/",
            "https://www.scaleway.com/en/docs/instances/faq/",
        ],
    ),
)

# "H100-SXM-8-80G", "L40S-1-48G", "B300-SXM-8-288G": <family>-<GPU count>-<memory per GPU>G.
_OFFER_ID = re.compile(r"^(?P<family>.+?)-(?P<count>\d+)-(?P<mem>\d+)G$")


class _BadRecord(Exception):
    """One product that cannot become a row: its reason goes to quarantine."""


def _integral(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _BadRecord(f"{what} {value!r} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise _BadRecord(f"{what} {value!r} is not a number") from None
    if not math.isfinite(number):
        raise _BadRecord(f"{what} {value!r} is not a finite number")
    if number != int(number):
        raise _BadRecord(f"{what} {value!r} is not a whole number")
    return int(number)


def money(price: Any) -> tuple[str, float]:
    """A Scaleway Money {currency_code, units, nanos} -> (currency, amount)."""
    if not isinstance(price, dict):
        raise _BadRecord("schema: lacks 'price.retail_price'")
    for key in ("currency_code", "units", "nanos"):
        if key not in price:
            raise _BadRecord(f"schema: retail_price lacks {key!r}")
    units, nanos = _integral(price["units"], "units"), _integral(price["nanos"], "nanos")
    if (units > 0 and nanos < 0) or (units < 0 and nanos > 0):
        raise _BadRecord(f"retail_price units {units} and nanos {nanos} disagree in sign (a negative part)")
    return str(price["currency_code"]).strip().upper(), round(units + nanos / 1e9, 9)


def hourly(amount: float, unit: Any) -> float:
    """An amount per `unit_of_measure` -> per hour."""
    if not isinstance(unit, dict) or unit.get("unit") not in HOURS_PER_UNIT:
        got = unit.get("unit") if isinstance(unit, dict) else unit
        raise _BadRecord(f"unit of measure {got!r} is not per hour, minute or second")
    size = unit.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise _BadRecord(f"unit of measure size {size!r} is not a positive whole number")
    return amount / (size * HOURS_PER_UNIT[unit["unit"]])


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _gib(size_bytes: Any) -> float | None:
    if isinstance(size_bytes, (int, float)) and not isinstance(size_bytes, bool) and size_bytes > 0:
        return round(size_bytes / 1024 ** 3, 3)
    return None


def _gb(size_bytes: Any) -> float | None:
    """Local scratch storage: Scaleway states it in decimal units ("1.6 TB")."""
    if isinstance(size_bytes, (int, float)) and not isinstance(size_bytes, bool) and size_bytes > 0:
        return round(size_bytes / 1e9, 3)
    return None


def region_of(zone: str) -> str:
    """"fr-par-2" -> "fr-par"."""
    return zone.rsplit("-", 1)[0] if re.search(r"-\d+$", zone) else zone


def parse_availability(pages: list[Any], zone: str) -> dict[str, str]:
    """The availability answers of one zone -> {instance type: stock level}."""
    out: dict[str, str] = {}
    for doc in pages:
        servers = doc.get("servers") if isinstance(doc, dict) else None
        if not isinstance(servers, dict):
            raise SchemaDriftError(f"scaleway: the {zone} availability answer lacks the 'servers' object")
        for name, entry in servers.items():
            level = entry.get("availability") if isinstance(entry, dict) else None
            if isinstance(level, str):
                out[name] = level
    return out


@drift_guard("scaleway: product catalog")
def parse_catalog(pages: list[Any], usd_per_eur: float | None,
                  stock: dict[str, dict[str, str]] | None) -> Batch:
    """Catalogue pages (+ stock per zone, None when not fetched) -> one offer per GPU product."""
    products: list[Any] = []
    for doc in pages:
        if not isinstance(doc, dict) or not isinstance(doc.get("products"), list):
            raise SchemaDriftError("scaleway: the product catalog answer lacks the 'products' list")
        products += doc["products"]
    if not products:
        raise SourceError("scaleway: the product catalog returned no instance products")
    batch = Batch(NAME)
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    placed: set[tuple[str, str]] = set()
    for item in products:
        sku = item.get("sku") if isinstance(item, dict) else None
        if not isinstance(sku, str) or not sku:
            batch.quarantine("offer", "?", "schema: a product lacks 'sku'", item)
            continue
        if batch.listed_again(seen, sku, f"sku {sku}", item):
            continue
        gpus = _get(item, "properties", "hardware", "gpu", "count")
        if not gpus:
            skipped["CPU-only instance products skipped"] += 1
            continue
        try:
            ref, fields = _offer(sku, item, usd_per_eur, stock)
        except _BadRecord as err:
            batch.quarantine("offer", sku, f"{sku}: {err}", item)
            continue
        where = (fields["instance_type"], fields["zone"])
        if where in placed:
            batch.quarantine("offer", sku, f"duplicate product {where[0]} in {where[1]} under another sku", item)
            continue
        placed.add(where)
        batch.offer(ref, item, **fields)
    zones = sorted({o.zone for o in batch.offers})
    summary = f"scaleway: {len(products)} instance products, {len(batch.offers)} GPU offers in " \
              f"{len(zones)} zones ({', '.join(zones)})"
    if skipped:
        summary += "; " + ", ".join(f"{n} {why}" for why, n in sorted(skipped.items()))
    batch.notes.append(summary)
    batch.notes.append(f"scaleway: EUR prices converted at {usd_per_eur:g} USD per EUR (scaleway_usd_per_eur)"
                       if usd_per_eur else "scaleway: no scaleway_usd_per_eur rate is set, so every EUR price "
                                           "was quarantined")
    if stock is None:
        batch.notes.append(f"scaleway: stock not read ({SECRET_KEY_ENV} is not set); offers carry no availability")
    return batch


def _offer(sku: str, item: dict[str, Any], usd_per_eur: float | None,
           stock: dict[str, dict[str, str]] | None) -> tuple[str, dict[str, Any]]:
    offer_id = _get(item, "properties", "instance", "offer_id")
    zone = _get(item, "locality", "zone")
    if not isinstance(offer_id, str) or not offer_id:
        raise _BadRecord("schema: lacks 'properties.instance.offer_id'")
    if not isinstance(zone, str) or not zone:
        raise _BadRecord("schema: lacks 'locality.zone'")
    gpu = _get(item, "properties", "hardware", "gpu")
    count = _integral(gpu.get("count"), "gpu count")
    m = _OFFER_ID.match(offer_id)
    if not m:
        raise _BadRecord(f"gpu: offer id {offer_id!r} is not '<family>-<count>-<memory>G'; memory unknown")
    if int(m.group("count")) != count:
        raise _BadRecord(f"gpu: offer id {offer_id} says {m.group('count')} GPUs, hardware says {count}")
    memory_gb = float(m.group("mem"))
    name = gpu.get("type") or gpu.get("description")
    if not isinstance(name, str) or not name:
        raise _BadRecord("schema: lacks 'properties.hardware.gpu.type'")
    try:
        model, exact = canonicalize(NAME, name, memory_gb * 1024)
    except UnknownGPUError as err:
        raise _BadRecord(f"gpu: {err}") from None
    currency, amount = money(_get(item, "price", "retail_price"))
    per_hour = hourly(amount, item.get("unit_of_measure"))
    if currency == "USD":
        usd = per_hour
    elif currency == "EUR" and usd_per_eur:
        usd = per_hour * usd_per_eur
    else:
        raise _BadRecord(f"price in {currency or 'no currency'}, not USD; no conversion is configured"
                         + (f" (set {env_name(RATE_SETTING)})" if currency == "EUR" else ""))
    level = None if stock is None else stock.get(zone, {}).get(offer_id)
    data = {"sku": sku, "status": item.get("status"), "variant": item.get("variant"),
            "gpu_description": gpu.get("description"), "unit_of_measure": item.get("unit_of_measure"),
            "retail_price": _get(item, "price", "retail_price"),
            "usd_per_eur": usd_per_eur if currency == "EUR" else None}
    return f"{offer_id}/{zone}", dict(
        region=region_of(zone), zone=zone, instance_type=offer_id, purchase_option="on_demand",
        gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=name, gpu_vendor=model.vendor,
        gpu_count=count, gpu_memory_gb=memory_gb, gpu_memory_gb_nominal=model.memory_gb,
        total_gpu_memory_gb=memory_gb * count,
        vcpus=_get(item, "properties", "hardware", "cpu", "virtual", "count") or None,
        ram_gb=_gib(_get(item, "properties", "hardware", "ram", "size")),
        local_disk_gb=_gb(_get(item, "properties", "hardware", "storage", "total")),
        price_per_hour=usd, source_currency=currency, source_price_per_hour=per_hour,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        available=None if level is None else DEPLOYABLE.get(level),
        availability_level=level,
        provider_data=json.dumps(data, sort_keys=True),
    )


# -- fetching ---------------------------------------------------------------------

def fetch_catalog(ctx: SourceContext, client: Any) -> list[Any]:
    """Every page of the instance products, until total_count have come."""
    pages: list[Any] = []
    got = 0
    for page in range(1, MAX_PAGES + 1):
        doc = ctx.get_json(client, API_HOST, CATALOG_PATH,
                           params={"product_types": "instance", "page": page, "page_size": PAGE_SIZE})
        pages.append(doc)
        products = doc.get("products") if isinstance(doc, dict) else None
        total = doc.get("total_count") if isinstance(doc, dict) else None
        if not isinstance(products, list) or not products:
            return pages
        got += len(products)
        # A short page is the last one, whatever total_count says (records can go between pages).
        if len(products) < PAGE_SIZE or not isinstance(total, int) or got >= total:
            return pages
    raise SourceError(f"scaleway: the product catalog still had pages after {MAX_PAGES}")


def fetch_stock(ctx: SourceContext, client: Any, zone: str) -> list[Any]:
    """Every page of one zone's availability, until the X-Total-Count header is reached."""
    path = AVAILABILITY_PATH.format(zone=zone)
    pages: list[Any] = []
    got = 0
    for page in range(1, MAX_PAGES + 1):
        resp = ctx.get(client, API_HOST, path, params={"per_page": PAGE_SIZE, "page": page})
        doc = ctx.json_of(resp, API_HOST, path)
        pages.append(doc)
        servers = doc.get("servers") if isinstance(doc, dict) else None
        if not isinstance(servers, dict) or not servers:
            return pages
        got += len(servers)
        header = resp.headers.get("X-Total-Count")
        total = int(header) if header and header.strip().isdigit() else doc.get("total_count")
        if len(servers) < PAGE_SIZE or not isinstance(total, int) or got >= total:
            return pages
    raise SourceError(f"scaleway: {zone} availability still had pages after {MAX_PAGES}")


def _gpu_zones(pages: list[Any]) -> list[str]:
    zones = set()
    for doc in pages:
        for item in doc.get("products") or [] if isinstance(doc, dict) else []:
            zone = _get(item, "locality", "zone")
            if _get(item, "properties", "hardware", "gpu", "count") and isinstance(zone, str):
                zones.add(zone)
    return sorted(zones)


def fetch(ctx: SourceContext) -> Batch:
    """The catalogue's pages, then (with a key, or under replay) each GPU zone's stock."""
    key = os.environ.get(SECRET_KEY_ENV, "").strip()
    reaches_scaleway = ctx.mode == "live" or (ctx.mode == "record" and not ctx.replay_urls)
    read_stock = bool(key) or not reaches_scaleway
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        pages = fetch_catalog(ctx, client)
        stock: dict[str, dict[str, str]] | None = None
        if read_stock:
            if key:
                client.headers["X-Auth-Token"] = key
            stock = {zone: parse_availability(fetch_stock(ctx, client, zone), zone) for zone in _gpu_zones(pages)}
    return parse_catalog(pages, getattr(ctx.config, RATE_SETTING), stock)
