"""Scaleway at catalogue size: every instance product of every zone, paged as the adapter pages.

The public catalogue lists each commercial type once per zone it is sold in, CPU types far
outnumbering GPU ones, in pages of `page_size` (100, the adapter's) with `total_count`; the
Instance API's availability answer of a zone lists every type of that zone. The bundled
recording keeps its 14 GPU products (prices, zones and stock as its README gives them) and one
CPU product; the world catalogue keeps those and adds CPU products of Scaleway's families in all
nine zones (names in Scaleway's pattern, prices made up), so the catalogue has its real length
and page chain, and each GPU zone's availability lists every type sold there.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuledger.adapters import scaleway
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

ZONES = ("fr-par-1", "fr-par-2", "fr-par-3", "nl-ams-1", "nl-ams-2", "nl-ams-3", "pl-waw-1", "pl-waw-2", "pl-waw-3")
# CPU families: (range, offer id stem, sizes as (vCPUs, GiB RAM), EUR per vCPU-hour)
CPU_FAMILIES = [
    ("Development", "DEV1", [(2, 2), (3, 4), (4, 8), (4, 12)], 0.0049),
    ("General-Purpose", "GP1", [(4, 16), (8, 32), (16, 64), (32, 128), (48, 256)], 0.021),
    ("Production-Optimized", "POP2", [(2, 8), (4, 16), (8, 32), (16, 64), (32, 128), (48, 192), (64, 256)], 0.0367),
    ("Production-Optimized", "POP2-HC", [(2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (48, 96), (64, 128)], 0.0266),
    ("Production-Optimized", "POP2-HM",
     [(2, 16), (4, 32), (8, 64), (16, 128), (32, 256), (48, 384), (64, 512)], 0.0515),
    ("Production-Optimized", "POP2-HN", [(2, 4), (4, 8), (10, 20)], 0.0364),
    ("Cost-Optimized", "PLAY2", [(1, 2), (2, 4), (4, 8)], 0.0108),
    ("Cost-Optimized", "PRO2", [(2, 8), (4, 16), (8, 32), (16, 64), (32, 128)], 0.0275),
    ("Production-Optimized", "ENT1",
     [(2, 8), (4, 16), (8, 32), (16, 64), (32, 128), (48, 192), (64, 256), (96, 384)], 0.0375),
    ("Arm", "COPARM1", [(2, 8), (4, 16), (8, 32), (16, 64), (32, 128)], 0.0229),
]
# Families not sold in every zone: the nine zones list these in their first N zones only.
ZONE_REACH = {"GP1": 4, "ENT1": 6, "COPARM1": 3, "POP2-HN": 5}
SMALL_ZONES = ("fr-par-2", "pl-waw-2")
SMALL_FAMILIES = 2


def bundled() -> dict[str, Any]:
    return json.loads((BUNDLED_RECORDINGS / "scaleway" / "catalog-instance.json").read_text())


def cpu_product(template: dict[str, Any], range_: str, offer_id: str, vcpus: int, ram_gib: int,
                zone: str, eur_per_hour: float) -> dict[str, Any]:
    product = copy.deepcopy(template)
    units, nanos = int(eur_per_hour), round((eur_per_hour - int(eur_per_hour)) * 1e9)
    product.update(sku=f"/compute/{offer_id.lower().replace('-', '_')}/run_{zone}", product=f"{offer_id} Instance",
                   variant=f"Compute {offer_id} Instance - {zone}",
                   description=f"Compute {offer_id} Instance - {zone} ({eur_per_hour:g}\u20ac per hour)",
                   locality={"zone": zone},
                   price={"retail_price": {"currency_code": "EUR", "units": units, "nanos": nanos}})
    product["properties"]["instance"].update(range=range_, offer_id=offer_id)
    cpu = product["properties"]["hardware"]["cpu"]
    cpu.update(description=f"{cpu['type']}, x64, vCPUs: {vcpus}", virtual={"count": vcpus}, threads=vcpus)
    product["properties"]["hardware"]["ram"].update(description=f"{ram_gib} GiB", size=ram_gib * 2**30)
    return product


def catalogue(scale: str) -> list[dict[str, Any]]:
    base = bundled()["products"]
    template = next(p for p in base if p["properties"]["instance"]["range"] != "GPU")
    zones = ZONES if scale == "world" else SMALL_ZONES
    families = CPU_FAMILIES if scale == "world" else CPU_FAMILIES[:SMALL_FAMILIES]
    seen = {p["sku"] for p in base}
    products = list(base)
    for zone_index, zone in enumerate(zones):
        for range_, stem, sizes, per_vcpu in families:
            if zone_index >= ZONE_REACH.get(stem, len(ZONES)):
                continue
            for vcpus, ram in sizes:
                offer_id = f"{stem}-{vcpus}C-{ram}G"
                product = cpu_product(template, range_, offer_id, vcpus, ram, zone, round(per_vcpu * vcpus, 4))
                if product["sku"] not in seen:
                    seen.add(product["sku"])
                    products.append(product)
    return products


def generate(root: Path, scale: str) -> dict[str, Any]:
    products = catalogue(scale)
    size = scaleway.PAGE_SIZE
    rec = ProviderRecording(root, scaleway.NAME, recorded_at="2026-12-02T00:00:00Z",
                            settings=json.loads((BUNDLED_RECORDINGS / "scaleway" / "manifest.json").read_text())
                            .get("settings", {}))
    json_headers = {"Content-Type": "application/json"}
    pages = [products[i:i + size] for i in range(0, len(products), size)]
    for n, page in enumerate(pages, 1):
        rec.add(scaleway.API_HOST, scaleway.CATALOG_PATH,
                json.dumps({"products": page, "total_count": len(products)}, indent=1),
                body_file=f"catalog-instance-{n}.json", match={"params": {"product_types": "instance", "page": str(n)}},
                headers=json_headers)
    stock = {}
    for name in ("fr-par-1", "fr-par-2", "pl-waw-2"):
        stock.update({(name, k): v for k, v in json.loads(
            (BUNDLED_RECORDINGS / "scaleway" / f"availability-{name}.json").read_text())["servers"].items()})
    gpu_zones = sorted({p["locality"]["zone"] for p in products if p["properties"]["instance"]["range"] == "GPU"})
    for zone in gpu_zones:
        servers = {p["properties"]["instance"]["offer_id"]: stock.get((zone, p["properties"]["instance"]["offer_id"]),
                                                                       {"availability": "available"})
                   for p in products if p["locality"]["zone"] == zone}
        rec.add(scaleway.API_HOST, scaleway.AVAILABILITY_PATH.format(zone=zone),
                json.dumps({"servers": servers}, indent=1), body_file=f"availability-{zone}.json",
                match={"params": {"page": "1"}}, headers={**json_headers, "X-Total-Count": str(len(servers))})
    return rec.close()
