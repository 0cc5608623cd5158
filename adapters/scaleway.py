"""Scaleway: GPU Instance prices from the public Product Catalog, stock from the Instance API.

`GET https://api.scaleway.com/product-catalog/v2alpha1/public-catalog/products?product_types=instance` (no
key) and `/instance/v1/zones/{zone}/products/servers/availability` (X-Auth-Token), both paged.
The catalogue states each price's currency and unit (the Instance API's bare `hourly_price` has held
per-minute figures); EUR is converted at the setting `scaleway_usd_per_eur`, else quarantined.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, as_number, dig, drift_guard
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, ProviderFacts, not_usd
from gpuledger.warehouse.settings import env_name

NAME = "scaleway"
API_HOST = "api.scaleway.com"
CATALOG_PATH = "/product-catalog/v2alpha1/public-catalog/products"
AVAILABILITY_PATH = "/instance/v1/zones/{zone}/products/servers/availability"
SECRET_KEY_ENV = "SCW_SECRET_KEY"
RATE_SETTING = "scaleway_usd_per_eur"  # USD per EUR; None: EUR prices are quarantined
PAGE_SIZE = 100
HOURS_PER_UNIT = {"hour": 1.0, "minute": 1 / 60, "second": 1 / 3600}
# The Instance API's stock levels; "scarce" can still be had, "shortage" cannot.
DEPLOYABLE = {"available": True, "scarce": True, "shortage": False}

PROVIDER = ProviderSpec(
    name=NAME, source_kind="api", secret_env_vars=(SECRET_KEY_ENV,), credentials_required=False,
    facts=ProviderFacts(
        display_name="Scaleway", kind="gpu_cloud", billing_granularity_s=60,
        billing_notes="GPU Instances are billed per minute of uptime, standby included (RENDER-S per hour); "
                      "prices are in EUR before tax and converted at the configured rate.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="Block volumes and flexible IPs keep billing while the Instance is powered off; "
                              "local scratch NVMe is erased on a full stop.",
        access_ssh=True,
        price_source="Scaleway Product Catalog API (public, no key); stock from the Instance API "
                     "products/servers/availability (SCW_SECRET_KEY)",
        source_urls=["https://www.scaleway.com/en/developers/api/product-catalog/public-catalog/",
                     "https://www.scaleway.com/en/developers/api/instance/", "https://www.scaleway.com/en/pricing/gpu/",
                     "https://www.scaleway.com/en/docs/instances/faq/"]),
)

# "H100-SXM-8-80G", "L40S-1-48G", "B300-SXM-8-288G": <family>-<GPU count>-<memory per GPU>G.
_OFFER_ID = re.compile(r"^(?P<family>.+?)-(?P<count>\d+)-(?P<mem>\d+)G$")


def _integral(value: Any, what: str) -> int:
    number = as_number(value, what, ValueError)
    if not math.isfinite(number):
        raise ValueError(f"{what} {value!r} is not a finite number")
    if number != int(number):
        raise ValueError(f"{what} {value!r} is not a whole number")
    return int(number)


def money(price: Any) -> tuple[str, float]:
    """A Scaleway Money {currency_code, units, nanos} -> (currency, amount)."""
    if not isinstance(price, dict):
        raise ValueError("schema: lacks 'price.retail_price'")
    if lacking := [key for key in ("currency_code", "units", "nanos") if key not in price]:
        raise ValueError(f"schema: retail_price lacks {lacking[0]!r}")
    units, nanos = _integral(price["units"], "units"), _integral(price["nanos"], "nanos")
    if (units > 0 and nanos < 0) or (units < 0 and nanos > 0):
        raise ValueError(f"retail_price units {units} and nanos {nanos} disagree in sign (a negative part)")
    return str(price["currency_code"]).strip().upper(), round(units + nanos / 1e9, 9)


def hourly(amount: float, unit: Any) -> float:
    """An amount per `unit_of_measure` -> per hour."""
    if not isinstance(unit, dict) or unit.get("unit") not in HOURS_PER_UNIT:
        got = unit.get("unit") if isinstance(unit, dict) else unit
        raise ValueError(f"unit of measure {got!r} is not per hour, minute or second")
    size = unit.get("size", 1)
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"unit of measure size {size!r} is not a positive whole number")
    return amount / (size * HOURS_PER_UNIT[unit["unit"]])


def _size(size_bytes: Any, unit: float) -> float | None:
    ok = isinstance(size_bytes, (int, float)) and not isinstance(size_bytes, bool) and size_bytes > 0
    return round(size_bytes / unit, 3) if ok else None


def parse_availability(pages: list[Any], zone: str) -> dict[str, str]:
    """The availability answers of one zone -> {instance type: stock level}."""
    out: dict[str, str] = {}
    for doc in pages:
        servers = dig(doc, "servers")
        if not isinstance(servers, dict):
            raise SchemaDriftError(f"scaleway: the {zone} availability answer lacks the 'servers' object")
        out.update((name, e["availability"]) for name, e in servers.items()
                   if isinstance(e, dict) and isinstance(e.get("availability"), str))
    return out


@drift_guard("scaleway: product catalog")
def parse_catalog(pages: list[Any], usd_per_eur: float | None,
                  stock: dict[str, dict[str, str]] | None) -> Batch:
    """Catalogue pages (+ stock per zone, None when not fetched) -> one offer per GPU product."""
    products: list[Any] = []
    for doc in pages:
        if not isinstance(dig(doc, "products"), list):
            raise SchemaDriftError("scaleway: the product catalog answer lacks the 'products' list")
        products += doc["products"]
    if not products:
        raise SourceError("scaleway: the product catalog returned no instance products")
    batch = PROVIDER.batch()
    cpu_only = 0
    seen: set[str] = set()
    placed: set[tuple[str, str]] = set()
    for item in products:
        sku = dig(item, "sku")
        if not isinstance(sku, str) or not sku:
            batch.quarantine("offer", "?", "schema: a product lacks 'sku'", item)
            continue
        if batch.listed_again(seen, sku, f"sku {sku}", item):
            continue
        if not dig(item, "properties", "hardware", "gpu", "count"):
            cpu_only += 1
            continue
        try:
            fields = _offer(sku, item, usd_per_eur, stock)
        except ValueError as err:
            batch.quarantine("offer", sku, f"{sku}: {err}", item)
            continue
        where = (fields["instance_type"], fields["zone"])
        if where in placed:
            batch.quarantine("offer", sku, f"duplicate product {where[0]} in {where[1]} under another sku", item)
            continue
        placed.add(where)
        batch.offer(f"{where[0]}/{where[1]}", item, **fields)
    zones = sorted({o.zone for o in batch.offers})
    batch.notes.append(f"scaleway: {len(products)} instance products, {len(batch.offers)} GPU offers in "
                       f"{len(zones)} zones ({', '.join(zones)})"
                       + (f"; {cpu_only} CPU-only instance products skipped" if cpu_only else ""))
    batch.notes.append(f"scaleway: EUR prices converted at {usd_per_eur:g} USD per EUR (scaleway_usd_per_eur)"
                       if usd_per_eur else "scaleway: no scaleway_usd_per_eur rate is set, so every EUR price "
                                           "was quarantined")
    if stock is None:
        batch.notes.append(f"scaleway: stock not read ({SECRET_KEY_ENV} is not set); offers carry no availability")
    return batch


def _offer(sku: str, item: dict[str, Any], usd_per_eur: float | None,
           stock: dict[str, dict[str, str]] | None) -> dict[str, Any]:
    offer_id, zone = dig(item, "properties", "instance", "offer_id"), dig(item, "locality", "zone")
    if not isinstance(offer_id, str) or not offer_id:
        raise ValueError("schema: lacks 'properties.instance.offer_id'")
    if not isinstance(zone, str) or not zone:
        raise ValueError("schema: lacks 'locality.zone'")
    gpu = dig(item, "properties", "hardware", "gpu")
    count = _integral(gpu.get("count"), "gpu count")
    # Older types' ids (RENDER-S) do not state the memory: their GPU is the hardware's gpu fields alone.
    m = _OFFER_ID.match(offer_id)
    if m and int(m.group("count")) != count:
        raise ValueError(f"gpu: offer id {offer_id} says {m.group('count')} GPUs, hardware says {count}")
    memory_gb = float(m.group("mem")) if m else None
    name = gpu.get("type") or gpu.get("description")
    if not isinstance(name, str) or not name:
        raise ValueError("schema: lacks 'properties.hardware.gpu.type'")
    try:
        model, exact = canonicalize(NAME, name, memory_gb * 1024 if m else None)
    except UnknownGPUError as err:
        raise ValueError(f"gpu: {err}") from None
    retail = dig(item, "price", "retail_price")
    currency, amount = money(retail)
    per_hour = hourly(amount, item.get("unit_of_measure"))
    if currency not in ("USD", "EUR") or (currency == "EUR" and not usd_per_eur):
        raise ValueError(not_usd(currency)
                         + (f" (set {env_name(RATE_SETTING)})" if currency == "EUR" else ""))
    level = dig(stock, zone, offer_id)
    data = {"sku": sku, "status": item.get("status"), "variant": item.get("variant"),
            "gpu_description": gpu.get("description"), "unit_of_measure": item.get("unit_of_measure"),
            "retail_price": retail, "usd_per_eur": usd_per_eur if currency == "EUR" else None}
    return dict(
        region=zone.rsplit("-", 1)[0] if re.search(r"-\d+$", zone) else zone, zone=zone, instance_type=offer_id,
        purchase_option="on_demand", gpu_model=model.gpu_model, gpu_variant_exact=exact, gpu_name_reported=name,
        gpu_count=count, gpu_memory_gb=memory_gb,
        vcpus=dig(item, "properties", "hardware", "cpu", "virtual", "count") or None,
        ram_gb=_size(dig(item, "properties", "hardware", "ram", "size"), 1024 ** 3),
        # local scratch storage: Scaleway states it in decimal units ("1.6 TB")
        local_disk_gb=_size(dig(item, "properties", "hardware", "storage", "total"), 1e9),
        price_per_hour=per_hour * usd_per_eur if currency == "EUR" else per_hour, source_currency=currency,
        source_price_per_hour=per_hour, available=None if level is None else DEPLOYABLE.get(level),
        availability_level=level, provider_data=data)


def _next_page(key: str, size_param: str) -> Any:
    """Pages until one comes back short (records can go between pages) or `total_count` items have come."""
    def following(doc: Any, items: list[Any], request: dict[str, Any]) -> dict[str, Any] | None:
        got, total = dig(doc, key), dig(doc, "total_count")
        page, size = int(request["params"]["page"]), int(request["params"][size_param])
        if not got or len(got) < size or (isinstance(total, int) and page * size >= total):
            return None
        return {**request, "params": {**request["params"], "page": page + 1}}
    return following


def fetch(ctx: SourceContext) -> Batch:
    key = ctx.api_key(SECRET_KEY_ENV)
    usd_per_eur = ctx.usd_per_eur(RATE_SETTING)
    with ctx.http_client(headers={"Accept": "application/json"}) as client:
        pages = list(ctx.paginate(client, API_HOST, CATALOG_PATH, lambda doc: [doc],
                                  _next_page("products", "page_size"),
                                  params={"product_types": "instance", "page": 1, "page_size": PAGE_SIZE},
                                  what="the product catalog"))
        stock: dict[str, dict[str, str]] | None = None
        if key or not ctx.reaches_provider:
            if key:
                client.headers["X-Auth-Token"] = key
            zones = sorted({dig(i, "locality", "zone") for doc in pages for i in dig(doc, "products") or []
                            if dig(i, "properties", "hardware", "gpu", "count")
                            and isinstance(dig(i, "locality", "zone"), str)})
            stock = {zone: parse_availability(list(ctx.paginate(
                client, API_HOST, AVAILABILITY_PATH.format(zone=zone), lambda doc: [doc],
                _next_page("servers", "per_page"), params={"per_page": PAGE_SIZE, "page": 1},
                what=f"the {zone} availability")), zone) for zone in zones}
    return parse_catalog(pages, usd_per_eur, stock)
