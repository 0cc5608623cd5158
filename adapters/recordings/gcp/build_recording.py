"""Builds the GCP replay recording (manifest + bodies) in this folder.

Run from the repository root: `python adapters/recordings/gcp/build_recording.py`.
The output is deterministic. Where every value comes from is in README.md
beside this file; the short form is in the comments below. Not used at run time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).parent
PROJECT = "gpuledger-replay"
COMPUTE = "compute.googleapis.com"
BILLING = "cloudbilling.googleapis.com"
TPU = "tpu.googleapis.com"
API = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}"
PAGE = 200  # maxResults the adapter sends to Compute (adapters/gcp.py PAGE_SIZE_COMPUTE)
FILTER = 'name eq "(a2|a3|a4|a4x|g2|g4)-.*|n1-standard-(8|16|32|64)"'
STAMP = "2026-11-30T03:12:45.402917Z"  # the Catalog stamps every SKU with the request time
CREATED = "1969-12-31T16:00:00.000-08:00"  # what Compute reports for built-in machine/accelerator types

# -- places -----------------------------------------------------------------------------

ZONES = {  # region -> zone suffixes (real zone names)
    "us-central1": "abcf", "us-east1": "bcd", "us-east4": "abc", "us-west1": "abc", "us-west4": "abc",
    "europe-west4": "abc", "europe-west1": "bcd", "asia-northeast1": "abc", "asia-southeast1": "abc",
    "europe-west3": "abc", "australia-southeast1": "abc",
}
# Every other region with GPU machine types (Google's GPU regions and zones page; the zones each
# family is in are below): area name as the region's "running in <place>" SKUs say it, and the
# on-demand and Spot price level vs. us-central1 used for the synthetic SKU prices of that area:
# the real ratio of the region's c2-standard-16 price (n2d-384-224-tpu host where the region has no
# C2), from SkyPilot's GCP catalog (skypilot-org/skypilot-catalog catalogs/v7/gcp/vms.csv).
NEW_AREAS = {  # area -> (region, on-demand factor, Spot factor)
    "Columbus": ("us-east5", 1.0, 0.2907), "Dallas": ("us-south1", 1.18, 0.8327),
    "Los Angeles": ("us-west2", 1.2011, 1.0273), "Salt Lake City": ("us-west3", 1.2011, 1.1748),
    "Montreal": ("northamerica-northeast1", 1.1009, 0.7155), "Toronto": ("northamerica-northeast2", 1.1009, 1.1563),
    "Sao Paulo": ("southamerica-east1", 1.5873, 0.5607), "London": ("europe-west2", 1.2883, 0.9671),
    "Frankfurt": ("europe-west3", 1.2883, 0.9448), "Zurich": ("europe-west6", 1.31, 1.4222),
    "Finland": ("europe-north1", 1.101, 1.3676), "Milan": ("europe-west8", 1.16, 0.695),
    "Paris": ("europe-west9", 1.16, 1.31), "Israel": ("me-west1", 1.1, 0.3194),
    "Taiwan": ("asia-east1", 1.1579, 0.8919), "Seoul": ("asia-northeast3", 1.2828, 1.0835),
    "Mumbai": ("asia-south1", 1.2011, 1.4556), "Delhi": ("asia-south2", 1.2011, 0.6502),
    "Jakarta": ("asia-southeast2", 1.3447, 1.5516), "Sydney": ("australia-southeast1", 1.4189, 1.8288),
}
for _area, (_region, _, _) in NEW_AREAS.items():
    ZONES.setdefault(_region, "abc")
DOWN_ZONES = {"europe-west1-c"}  # synthetic: one zone reported DOWN, to exercise `available`
# The Catalog's price areas: "Americas" SKUs cover us-central1/us-east1/us-west1 (as the
# real opencost sample shows), other regions have their own "running in <City>" SKUs.
AREAS = {
    "Americas": ["us-central1", "us-east1", "us-west1"],
    "Virginia": ["us-east4"], "Las Vegas": ["us-west4"], "Netherlands": ["europe-west4"],
    "Belgium": ["europe-west1"], "Tokyo": ["asia-northeast1"], "Singapore": ["asia-southeast1"],
    **{area: [region] for area, (region, _, _) in NEW_AREAS.items()},
}
# On-demand and Spot price level of each area relative to us-central1, from the public
# a2-highgpu-1g prices per region (Cyclenerd/google-cloud-pricing-cost-calculator
# pricing.yml, generated 2025-03-06): on-demand 3.673385 and spot 1.293355 in us-central1.
A2_1G = {  # area -> (on-demand, spot) USD/h of a2-highgpu-1g
    "Americas": (3.673385, 1.293355), "Virginia": (3.934354926, 1.2132324), "Las Vegas": (3.934354926, 1.57366),
    "Netherlands": (3.747972, 1.44587), "Belgium": (3.747369, 1.3954431), "Tokyo": (4.049590926, 1.271375),
    "Singapore": (4.013757926, 1.60545),
}
# a3-highgpu-8g and a3-megagpu-8g (on-demand, spot) USD/h per area, same source and date.
A3_8G = {
    "Americas": (88.4899999025753, 35.3957496986301), "Virginia": (88.5557561512329, 35.639037369863),
    "Las Vegas": (99.6489544392329, 39.8592350684931), "Netherlands": (112.540479175233, 31.7592050410959),
    "Belgium": (97.3698465985753, 38.9480696986301), "Tokyo": (126.643390632548, 89.0604788642192),
    "Singapore": (114.278292967233, 32.301805369863),
}
A3_MEGA_8G = {
    "Virginia": (92.9375881512329, 37.391837369863), "Las Vegas": (104.584234439233, 41.8336350684932),
    "Netherlands": (118.236831175233, 46.2640050410959), "Belgium": (102.194646598575, 40.8776696986301),
    "Tokyo": (119.276366632548, 38.6663908642192), "Singapore": (119.974644967233, 33.897005369863),
}


# a3-ultragpu-8g host part (224 vCPU + 2952 GiB, without GPUs and Local SSD), (on-demand, Spot)
# USD/h per area: SkyPilot's GCP catalog (catalogs/v7/gcp/vms.csv rows a3-ultragpu-8g), which
# prices a GPU machine type's vCPU and memory SKUs only. REAL ratios; the GPU SKU is synthetic.
A3U_HOST = {
    "Americas": (12.266, 2.82111), "Virginia": (12.266, 2.20896), "Belgium": (13.50609, 2.43008),
    "Netherlands": (12.8793, 2.31952), "Columbus": (13.81519, 2.48648), "Dallas": (14.47387, 10.20849),
    "Mumbai": (12.75664, 2.29651), "Delhi": (14.73269, 10.39103),
}


def factors(area: str) -> tuple[float, float]:
    if area in NEW_AREAS:
        return NEW_AREAS[area][1], NEW_AREAS[area][2]
    od, spot = A2_1G[area]
    return od / A2_1G["Americas"][0], spot / A2_1G["Americas"][1]


# -- machine types (real names and shapes, cloud.google.com/compute/docs/gpus) ---------------

def mt(name, vcpus, gib, accel=None, count=0, lssd=0, desc=None):
    return dict(name=name, vcpus=vcpus, gib=gib, accel=accel, count=count, lssd=lssd, desc=desc)


A100, A100_80, H100, H100_MEGA, B200, L4 = ("nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb",
                                           "nvidia-h100-mega-80gb", "nvidia-b200", "nvidia-l4")
H200, GB200, RTX6000 = "nvidia-h200-141gb", "nvidia-gb200", "nvidia-rtx-pro-6000"
FAMILIES = {
    "a2-highgpu": [mt(f"a2-highgpu-{n}g", 12 * n, 85 * n, A100, n) for n in (1, 2, 4, 8)],
    "a2-megagpu": [mt("a2-megagpu-16g", 96, 1360, A100, 16)],
    "a2-ultragpu": [mt(f"a2-ultragpu-{n}g", 12 * n, 170 * n, A100_80, n, n) for n in (1, 2, 4, 8)],
    "a3-highgpu": [mt(f"a3-highgpu-{n}g", 26 * n, 234 * n, H100, n, 2 * n) for n in (1, 2, 4, 8)],
    "a3-megagpu": [mt("a3-megagpu-8g", 208, 1872, H100_MEGA, 8, 16)],
    "a3-ultragpu": [mt("a3-ultragpu-8g", 224, 2952, H200, 8, 32)],
    "a4-highgpu": [mt("a4-highgpu-8g", 224, 3968, B200, 8, 32)],
    "a4x-highgpu": [mt("a4x-highgpu-4g", 140, 884, GB200, 4, 32)],
    "g4-standard": [mt(f"g4-standard-{v}", v, 3.75 * v, RTX6000, g, 4 * g) for v, g in
                    ((48, 1), (96, 2), (192, 4), (384, 8))],
    "g2-standard": [mt(f"g2-standard-{v}", v, 4 * v, L4, g) for v, g in
                    ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8))],
    "n1-standard": [mt(f"n1-standard-{v}", v, 3.75 * v) for v in (8, 16, 32, 64)],
}
# Zones per family: SkyPilot's GCP catalog (skypilot-org/skypilot-catalog catalogs/v7/gcp/vms.csv)
# for A2/A3/A4/G2, Cyclenerd pricing.yml for the A3 Mega regions.
FAMILY_ZONES = {
    "a2-highgpu": "us-central1-a us-central1-b us-central1-c us-central1-f us-east1-b us-west1-b us-west4-b "
                  "europe-west4-a europe-west4-b asia-northeast1-a asia-northeast1-c asia-southeast1-b "
                  "asia-southeast1-c asia-northeast3-a asia-northeast3-b me-west1-a me-west1-c us-west3-b",
    "a2-megagpu": "us-central1-a us-central1-b us-central1-c us-central1-f europe-west4-a europe-west4-b "
                  "asia-southeast1-c",
    "a2-ultragpu": "us-central1-a us-central1-c us-east4-c europe-west4-a asia-southeast1-c us-east5-a us-east5-b",
    "a3-highgpu": "us-central1-a us-central1-b us-central1-c us-east4-a us-east4-b us-east4-c us-west1-a "
                  "us-west1-b us-west4-a europe-west4-b europe-west4-c europe-west1-b europe-west1-c "
                  "asia-northeast1-b asia-southeast1-b asia-southeast1-c asia-east1-c asia-south1-c "
                  "australia-southeast1-c europe-north1-c europe-west3-c europe-west8-c us-east5-a",
    "a3-megagpu": "us-east4-a us-east4-b us-east4-c us-west4-a europe-west4-b europe-west4-c europe-west1-b "
                  "europe-west1-c asia-northeast1-b asia-southeast1-b asia-southeast1-c asia-east1-c "
                  "australia-southeast1-c europe-north1-c europe-west3-c us-east5-a",
    "a3-ultragpu": "asia-south1-b asia-south2-c europe-west1-b europe-west4-a us-central1-b us-east4-b us-east5-a "
                   "us-south1-b us-west1-c",
    "a4-highgpu": "us-central1-b us-east4-b asia-northeast1-b asia-southeast1-b europe-west4-b us-south1-b "
                  "us-west2-c",
    "a4x-highgpu": "us-central1-a us-east4-b us-south1-a",
    "g4-standard": "us-central1-b us-east1-b us-east4-c europe-west4-a asia-southeast1-b us-south1-a",
    "g2-standard": "us-central1-a us-central1-b us-central1-c us-east1-b us-east1-c us-east1-d us-east4-a "
                   "us-east4-c us-west1-a us-west1-b us-west1-c us-west4-a us-west4-c europe-west4-a "
                   "europe-west4-b europe-west4-c europe-west1-b europe-west1-c asia-northeast1-a "
                   "asia-northeast1-c asia-southeast1-a asia-southeast1-b asia-southeast1-c asia-east1-a "
                   "asia-east1-c asia-northeast3-a asia-northeast3-b asia-south1-a asia-south1-b asia-southeast2-a "
                   "europe-west2-a europe-west2-b europe-west3-a europe-west3-b europe-west6-b europe-west9-a "
                   "europe-west9-b northamerica-northeast2-a northamerica-northeast2-b us-east5-a us-west3-a",
    "n1-standard": "*",
}
# Attachable N1 GPUs per zone (same SkyPilot catalog) and maximumCardsPerInstance.
ATTACHABLE = {
    ("nvidia-tesla-t4", "NVIDIA T4", 4): "us-central1-a us-central1-b us-central1-c us-central1-f us-east1-c "
        "us-east1-d us-east4-a us-east4-b us-east4-c us-west1-a us-west1-b us-west4-a us-west4-b europe-west4-a "
        "europe-west4-b europe-west4-c europe-west1-b europe-west1-c europe-west1-d asia-northeast1-a "
        "asia-northeast1-c asia-southeast1-a asia-southeast1-b asia-southeast1-c asia-east1-a asia-east1-c "
        "asia-northeast3-b asia-northeast3-c asia-south1-a asia-south1-b asia-southeast2-a asia-southeast2-b "
        "australia-southeast1-a australia-southeast1-c europe-west2-a europe-west2-b europe-west3-b europe-west6-b "
        "northamerica-northeast1-a northamerica-northeast1-c southamerica-east1-a southamerica-east1-c us-west2-b "
        "us-west2-c us-west3-b me-west1-b",
    ("nvidia-tesla-v100", "NVIDIA V100", 8): "us-central1-a us-central1-b us-central1-c us-central1-f us-east1-c "
        "us-west1-a us-west1-b europe-west4-a europe-west4-b europe-west4-c asia-east1-c",
    ("nvidia-tesla-p100", "NVIDIA Tesla P100", 4): "us-central1-c us-central1-f us-east1-b us-east1-c us-west1-a "
        "us-west1-b europe-west1-b europe-west1-d europe-west4-a asia-east1-a asia-east1-c australia-southeast1-c",
    ("nvidia-tesla-p4", "NVIDIA Tesla P4", 4): "us-central1-a us-central1-c us-east4-a us-east4-b us-east4-c "
        "europe-west4-b europe-west4-c asia-southeast1-b asia-southeast1-c northamerica-northeast1-a "
        "northamerica-northeast1-b northamerica-northeast1-c us-west2-b us-west2-c australia-southeast1-a "
        "australia-southeast1-b",
}
VWS = {"nvidia-tesla-t4": ("nvidia-tesla-t4-vws", "NVIDIA T4 Virtual Workstation"),
       "nvidia-tesla-p4": ("nvidia-tesla-p4-vws", "NVIDIA Tesla P4 Virtual Workstation"),
       "nvidia-tesla-p100": ("nvidia-tesla-p100-vws", "NVIDIA Tesla P100 Virtual Workstation"),
       "nvidia-l4": ("nvidia-l4-vws", "NVIDIA L4 Virtual Workstation")}
FAMILY_ACCEL = {  # accelerator types the accelerator-optimized families bring into a zone
    "a2-highgpu": (A100, "NVIDIA A100 40GB", 16), "a2-megagpu": (A100, "NVIDIA A100 40GB", 16),
    "a2-ultragpu": (A100_80, "NVIDIA A100 80GB", 8), "a3-highgpu": (H100, "NVIDIA H100 80GB", 8),
    "a3-megagpu": (H100_MEGA, "NVIDIA H100 80GB MEGA", 8), "a4-highgpu": (B200, "NVIDIA B200", 8),
    "g2-standard": (L4, "NVIDIA L4", 8), "a3-ultragpu": (H200, "NVIDIA H200 141GB", 8),
    "a4x-highgpu": (GB200, "NVIDIA GB200", 4), "g4-standard": (RTX6000, "NVIDIA RTX PRO 6000", 8),
}


def all_zones() -> list[str]:
    return [f"{r}-{s}" for r, suf in ZONES.items() for s in suf]


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def stable_id(*parts: object, digits: int = 16) -> str:
    return str(int(hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest(), 16))[:digits]


def machine_type(zone: str, m: dict) -> dict:
    d = {
        "kind": "compute#machineType", "id": stable_id("mt", m["name"], digits=7), "creationTimestamp": CREATED,
        "name": m["name"],
        "description": (f"Accelerator Optimized: {m['count']} NVIDIA GPU{'s' if m['count'] > 1 else ''}, "
                        f"{m['vcpus']} vCPUs, {m['gib']:g}GB RAM") if m["accel"] else
                       f"{m['vcpus']} vCPUs, {m['gib']:g} GB RAM",
        "guestCpus": m["vcpus"], "memoryMb": int(m["gib"] * 1024), "imageSpaceGb": 0,
        "maximumPersistentDisks": 128, "maximumPersistentDisksSizeGb": "263168", "zone": zone,
        "selfLink": f"{API}/zones/{zone}/machineTypes/{m['name']}", "isSharedCpu": False,
        "architecture": "X86_64",
    }
    if m["accel"]:
        d["accelerators"] = [{"guestAcceleratorType": m["accel"], "guestAcceleratorCount": m["count"]}]
    if m["lssd"]:
        d["bundledLocalSsds"] = {"defaultInterface": "NVME", "partitionCount": m["lssd"]}
    return d


def zone_machine_types() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {z: [] for z in all_zones()}
    for family, zones in FAMILY_ZONES.items():
        targets = [z for z in all_zones() if region_of(z) in AREAS_BY_REGION] if zones == "*" else zones.split()
        for z in targets:
            out[z].extend(machine_type(z, m) for m in FAMILIES[family])
    return {z: sorted(v, key=lambda d: d["name"]) for z, v in out.items()}


def zone_accelerators() -> dict[str, list[dict]]:
    out: dict[str, dict[str, tuple[str, int]]] = {z: {} for z in all_zones()}
    for (name, desc, cards), zones in ATTACHABLE.items():
        for z in zones.split():
            out[z][name] = (desc, cards)
            if name in VWS:
                out[z][VWS[name][0]] = (VWS[name][1], cards)
    for family, zones in FAMILY_ZONES.items():
        if family in FAMILY_ACCEL:
            name, desc, cards = FAMILY_ACCEL[family]
            for z in zones.split():
                out[z][name] = (desc, cards)
                if name in VWS:
                    out[z][VWS[name][0]] = (VWS[name][1], cards)
    return {z: [{"kind": "compute#acceleratorType", "id": stable_id("acc", n, digits=5), "creationTimestamp": CREATED,
                 "name": n, "description": d, "zone": f"{API}/zones/{z}",
                 "selfLink": f"{API}/zones/{z}/acceleratorTypes/{n}", "maximumCardsPerInstance": c}
                for n, (d, c) in sorted(v.items())] for z, v in out.items()}


AREAS_BY_REGION = {r: a for a, rs in AREAS.items() for r in rs}


def aggregated_pages(kind: str, key: str, per_zone: dict[str, list[dict]]) -> list[dict]:
    """Split an aggregated list into pages of PAGE items; scopes empty on a page carry a warning."""
    flat = [(z, item) for z in sorted(per_zone) for item in per_zone[z]]
    chunks = [flat[i:i + PAGE] for i in range(0, len(flat), PAGE)] or [[]]
    pages = []
    for n, chunk in enumerate(chunks, 1):
        items: dict[str, dict] = {}
        for z in sorted(per_zone):
            these = [item for zz, item in chunk if zz == z]
            items[f"zones/{z}"] = {key: these} if these else {"warning": {
                "code": "NO_RESULTS_ON_PAGE",
                "message": f"There are no results for scope 'zones/{z}' on this page.",
                "data": [{"key": "scope", "value": f"zones/{z}"}]}}
        page = {"kind": f"compute#{kind}AggregatedList", "id": f"projects/{PROJECT}/aggregated/{key}",
                "items": items, "selfLink": f"{API}/aggregated/{key}"}
        if n < len(chunks):
            page["nextPageToken"] = token(kind, n)
        pages.append(page)
    return pages


def token(*parts: object) -> str:
    """An opaque page token, shaped like the real ones."""
    h = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return "Cp" + h[:40] + "EAA"


def zones_page(down: set[str] = DOWN_ZONES) -> dict:
    items = []
    for i, z in enumerate(sorted(all_zones())):
        items.append({"kind": "compute#zone", "id": stable_id("zone", z, digits=4), "creationTimestamp": CREATED,
                      "name": z, "description": z, "status": "DOWN" if z in down else "UP",
                      "region": f"{API}/regions/{region_of(z)}", "selfLink": f"{API}/zones/{z}",
                      "availableCpuPlatforms": ["Intel Cascade Lake", "Intel Ice Lake", "AMD Milan"],
                      "supportsPzs": False})
    return {"kind": "compute#zoneList", "id": f"projects/{PROJECT}/zones", "items": items,
            "selfLink": f"{API}/zones"}


# -- SKUs -----------------------------------------------------------------------------------------

def sku_id(desc: str) -> str:
    h = hashlib.sha1(desc.encode()).hexdigest().upper()
    return f"{h[0:4]}-{h[4:8]}-{h[8:12]}"


def unit_price(usd: float, currency: str = "USD") -> dict:
    units = int(usd)
    nanos = int(round((usd - units) * 1e9))
    if nanos == 1_000_000_000:
        units, nanos = units + 1, 0
    return {"currencyCode": currency, "units": str(units), "nanos": nanos}


UNITS = {
    "h": ("hour", "s", "second", 3600),
    "GiBy.h": ("gibibyte hour", "By.s", "byte second", 3865470566400),
    "GiBy.mo": ("gibibyte month", "By.s", "byte second", 2783138807808000.0),
    "GiBy": ("gibibyte", "By", "byte", 1073741824),
}


def sku(desc: str, family: str, group: str, usage: str, unit: str, tiers: list[tuple[float, float]],
        regions: list[str], sid: str | None = None) -> dict:
    udesc, base, bdesc, factor = UNITS[unit]
    info = {"summary": "", "pricingExpression": {
        "usageUnit": unit, "displayQuantity": 1,
        "tieredRates": [{"startUsageAmount": s, "unitPrice": unit_price(p)} for s, p in tiers],
        "usageUnitDescription": udesc, "baseUnit": base, "baseUnitDescription": bdesc,
        "baseUnitConversionFactor": factor},
        "currencyConversionRate": 1, "effectiveTime": STAMP}
    if unit == "GiBy":
        info["aggregationInfo"] = {"aggregationLevel": "ACCOUNT", "aggregationInterval": "MONTHLY",
                                   "aggregationCount": 1}
    sid = sid or sku_id(desc)
    return {"name": f"services/6F81-5844-456A/skus/{sid}", "skuId": sid, "description": desc,
            "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": family, "resourceGroup": group,
                         "usageType": usage},
            "serviceRegions": regions, "pricingInfo": [info], "serviceProviderName": "Google",
            "geoTaxonomy": {"type": "MULTI_REGIONAL" if len(regions) > 1 else "REGIONAL",
                            "regions": sorted(regions)}}


def r9(x: float) -> float:
    return round(x, 9)


# Real SKUs from the opencost sample (pkg/cloud/gcp/test/skus.json), USD, unchanged ids and prices.
REAL_IDS = {"Nvidia Tesla A100 GPU running in Americas": "039F-D0DA-4055",
            "A2 Instance Ram running in Americas": "2390-DCAF-DA38",
            "A2 Instance Core running in Americas": "2922-40C5-B19F"}

# us-central1 ("Americas") component prices; see README for each value's origin.
BASE_OD = {"a2_core": 0.031611, "a2_ram": 0.004237, "a100": 2.933908,  # real SKUs (opencost)
           "a100_80": 3.928312,  # a2-ultragpu-1g list 5.06903 minus its vCPU/RAM/Local SSD
           "a3_core": 0.0295, "a3_ram": 0.00177,  # split of the A3 host part (synthetic split)
           "g2_core": 0.024988, "g2_ram": 0.002927, "l4": 0.56004,  # g2-standard-4 = 0.706824
           "n1_core": 0.031611, "n1_ram": 0.004237,  # n1-standard-4 = 0.189999
           "lssd": 0.08, "b200_slice": 16.11,
           # synthetic (no public figure at hand): the H200, GB200 slice, RTX PRO 6000 GPU SKUs and G4 vCPU/RAM
           "h200": 8.9025, "gb200_slice": 18.0, "rtx6000": 3.0, "g4_core": 0.0255, "g4_ram": 0.003}
BASE_SPOT = {"a2_core": 0.012643, "a2_ram": 0.0016946, "a100": 0.997598,  # sums to 1.293355 (a2-highgpu-1g)
             "a100_80": 1.5712, "a3_core": 0.0118, "a3_ram": 0.000708, "g2_core": 0.009995, "g2_ram": 0.001171,
             "l4": 0.2231, "n1_core": 0.00698, "n1_ram": 0.000936, "lssd": 0.048, "b200_slice": 4.9542,
             "h200": 3.561, "gb200_slice": 7.2, "rtx6000": 1.2, "g4_core": 0.0102, "g4_ram": 0.0012}
# Per-area GPU prices from SkyPilot's GCP catalog where it has them: (on-demand, spot).
GPU_AREA = {
    "t4": {"Americas": (0.35, 0.14), "Virginia": (0.37, 0.1123), "Las Vegas": (0.37, 0.1258),
           "Netherlands": (0.3675, 0.14), "Belgium": (0.35, 0.14), "Tokyo": (0.37, 0.1342),
           "Singapore": (0.37, 0.1195)},
    "p100": {"Americas": (1.46, 0.584), "Belgium": (1.6, 0.371), "Netherlands": (1.533, 0.3265)},
    "p4": {"Americas": (0.6, 0.24), "Virginia": (0.6, 0.1734), "Netherlands": (0.63, 0.0822),
           "Singapore": (0.65, 0.0662)},
    "v100": {"Americas": (2.48, 0.992), "Netherlands": (2.55, 1.02)},
    "l4": {"Americas": (0.56004, 0.2231), "Virginia": (0.55820625, 0.2233), "Las Vegas": (0.63077375, 0.1774)},
    "a100_80": {"Americas": (None, 1.5712), "Virginia": (None, 1.7697), "Netherlands": (None, 1.5771),
                "Singapore": (None, 1.6476)},
}
FAMILY_TOKEN = {"a2-highgpu": "a2", "a2-megagpu": "a2", "a2-ultragpu": "a2u", "a3-highgpu": "a3",
                "a3-megagpu": "a3m", "a3-ultragpu": "a3u", "a4-highgpu": "a4", "a4x-highgpu": "a4x",
                "g2-standard": "g2", "g4-standard": "g4"}


def area_families() -> dict[str, set[str]]:
    """Which priced families exist in each area, from FAMILY_ZONES (N1 everywhere)."""
    out: dict[str, set[str]] = {area: {"n1"} for area in AREAS}
    for family, zones in FAMILY_ZONES.items():
        if family in FAMILY_TOKEN:
            for z in zones.split():
                out[AREAS_BY_REGION[region_of(z)]].add(FAMILY_TOKEN[family])
    return out


AREA_FAMILIES = area_families()
# The H100 GPU SKU of us-central1, solved from a3-highgpu-8g's total (see compute_skus); the H100
# SKU of an added area is it times the area's factor (synthetic).
H100_AMERICAS = ((A3_8G["Americas"][0] - 208 * 0.0295 - 1872 * 0.00177 - 6000 * 0.08 / 730) / 8,
                 (A3_8G["Americas"][1] - 208 * 0.0118 - 1872 * 0.000708 - 6000 * 0.048 / 730) / 8)


def compute_skus() -> list[dict]:
    out = []
    for area, regions in AREAS.items():
        f_od, f_spot = factors(area)
        fams = AREA_FAMILIES[area]
        od = {k: r9(v * f_od) for k, v in BASE_OD.items()}
        sp = {k: r9(v * f_spot) for k, v in BASE_SPOT.items()}
        for g, table in GPU_AREA.items():
            if area in table:
                o, s = table[area]
                if o is not None:
                    od[g] = o
                sp[g] = s
        where = f"running in {area}"

        def add(desc, group, usage, unit, price, family="Compute"):
            out.append(sku(desc, family, group, usage, unit, [(0, price)], regions, REAL_IDS.get(desc)))

        def family_parts(token, core, ram):
            add(f"{token} Instance Core {where}", "CPU", "OnDemand", "h", od[core])
            add(f"{token} Instance Ram {where}", "RAM", "OnDemand", "GiBy.h", od[ram])
            add(f"Spot Preemptible {token} Instance Core {where}", "CPU", "Preemptible", "h", sp[core])
            add(f"Spot Preemptible {token} Instance Ram {where}", "RAM", "Preemptible", "GiBy.h", sp[ram])

        def gpu(name, o, s):
            if o is not None:
                add(f"{name} GPU {where}", "GPU", "OnDemand", "h", o)
            if s is not None:
                add(f"{name} GPU attached to Spot Preemptible VMs {where}", "GPU", "Preemptible", "h", s)

        if fams & {"a2", "a2u"}:
            family_parts("A2", "a2_core", "a2_ram")
        if "a2" in fams:
            gpu("Nvidia Tesla A100", od["a100"], sp["a100"])
        if "a2u" in fams:
            gpu("Nvidia Tesla A100 80GB", od["a100_80"], sp["a100_80"])
        lssd_od, lssd_spot = od["lssd"], sp["lssd"]
        if "a3" in fams or "a3m" in fams:
            family_parts("A3", "a3_core", "a3_ram")
        if "a3" in fams:
            if area in A3_8G:
                total_od, total_spot = A3_8G[area]
                h_od = (total_od - 208 * od["a3_core"] - 1872 * od["a3_ram"] - 6000 * lssd_od / 730) / 8
                h_sp = (total_spot - 208 * sp["a3_core"] - 1872 * sp["a3_ram"] - 6000 * lssd_spot / 730) / 8
            else:  # an added area: the us-central1 H100 SKU at the area's level (synthetic)
                h_od, h_sp = H100_AMERICAS[0] * f_od, H100_AMERICAS[1] * f_spot
            gpu("Nvidia H100 80GB", r9(h_od), r9(h_sp))
        if "a3m" in fams:
            family_parts("A3Plus", "a3_core", "a3_ram")
            if area in A3_MEGA_8G:
                total_od, total_spot = A3_MEGA_8G[area]
                m_od = (total_od - 208 * od["a3_core"] - 1872 * od["a3_ram"] - 6000 * lssd_od / 730) / 8
                m_sp = (total_spot - 208 * sp["a3_core"] - 1872 * sp["a3_ram"] - 6000 * lssd_spot / 730) / 8
            else:  # synthetic: 7 % above the area's H100 SKU, about the Virginia Mega/High ratio
                m_od, m_sp = H100_AMERICAS[0] * f_od * 1.07, H100_AMERICAS[1] * f_spot * 1.07
            # Both names are in the real catalog for the A3 Mega GPU.
            gpu("Nvidia H100 80GB Plus" if area in ("Virginia", "Las Vegas") else "Nvidia H100 80GB Mega",
                r9(m_od), r9(m_sp))
        if "a4" in fams:
            add(f"A4 Nvidia B200 (1 gpu slice) {where}", "GPU", "OnDemand", "h", od["b200_slice"])
            if area in ("Americas", "Virginia"):
                # Real quirk: Google tags this Spot SKU usageType OnDemand; only its description says Spot.
                add(f"Spot Preemptible A4 Nvidia B200 (1 gpu slice) {where}", "GPU", "OnDemand", "h",
                    sp["b200_slice"])
        if "a3u" in fams:
            # The host part (vCPU + RAM) is the real SkyPilot figure where it has one, split in A3's
            # vCPU:RAM proportion (the split is synthetic, the sum is what the figure fixes).
            host_od, host_sp = A3U_HOST.get(area, (A3U_HOST["Americas"][0] * f_od, A3U_HOST["Americas"][1] * f_spot))
            k_od = host_od / (224 * BASE_OD["a3_core"] + 2952 * BASE_OD["a3_ram"])
            k_sp = host_sp / (224 * BASE_SPOT["a3_core"] + 2952 * BASE_SPOT["a3_ram"])
            od["a3u_core"], od["a3u_ram"] = r9(BASE_OD["a3_core"] * k_od), r9(BASE_OD["a3_ram"] * k_od)
            sp["a3u_core"], sp["a3u_ram"] = r9(BASE_SPOT["a3_core"] * k_sp), r9(BASE_SPOT["a3_ram"] * k_sp)
            family_parts("A3Ultra", "a3u_core", "a3u_ram")
            gpu("Nvidia H200 141GB", od["h200"], sp["h200"])
        if "a4x" in fams:
            add(f"A4X Nvidia GB200 (1 gpu slice) {where}", "GPU", "OnDemand", "h", od["gb200_slice"])
            add(f"Spot Preemptible A4X Nvidia GB200 (1 gpu slice) {where}", "GPU", "Preemptible", "h",
                sp["gb200_slice"])
        if "g4" in fams:
            family_parts("G4", "g4_core", "g4_ram")
            gpu("Nvidia RTX 6000 96GB", od["rtx6000"], sp["rtx6000"])
        if "g2" in fams:
            family_parts("G2", "g2_core", "g2_ram")
            gpu("Nvidia L4", od["l4"], sp["l4"])
        if "n1" in fams:
            add(f"N1 Predefined Instance Core {where}", "N1Standard", "OnDemand", "h", od["n1_core"])
            add(f"N1 Predefined Instance Ram {where}", "N1Standard", "OnDemand", "GiBy.h", od["n1_ram"])
            add(f"Spot Preemptible N1 Predefined Instance Core {where}", "N1Standard", "Preemptible", "h",
                sp["n1_core"])
            add(f"Spot Preemptible N1 Predefined Instance Ram {where}", "N1Standard", "Preemptible", "GiBy.h",
                sp["n1_ram"])
            for g, name in (("t4", "Nvidia Tesla T4"), ("p100", "Nvidia Tesla P100"), ("p4", "Nvidia Tesla P4"),
                            ("v100", "Nvidia Tesla V100")):
                if area in GPU_AREA[g]:
                    o, s = GPU_AREA[g][area]
                    gpu(name, o, s)
                elif area in NEW_AREAS:  # an added area: the us-central1 SKU at the area's level (synthetic)
                    o, s = GPU_AREA[g]["Americas"]
                    gpu(name, r9(o * f_od), r9(s * f_spot))
        loc = "" if area == "Americas" else f" in {area}"
        add(f"SSD backed Local Storage{loc}", "LocalSSD", "OnDemand", "GiBy.mo", lssd_od, family="Storage")
        add(f"SSD backed Local Storage attached to Spot Preemptible VMs{loc}", "LocalSSD", "Preemptible",
            "GiBy.mo", lssd_spot, family="Storage")
    americas = AREAS["Americas"]
    out += commitment_skus(americas) + tpu_skus()
    # Out-of-scope SKUs of the same kinds, as the real catalog has them next to the ones we use.
    out += [
        sku("Nvidia Tesla T4 Virtual Workstation GPU running in Americas", "Compute", "GPU", "OnDemand", "h",
            [(0, 0.55)], americas),
        sku("Nvidia Tesla T4 GPU attached to Sole Tenancy VMs running in Americas", "Compute", "GPU", "OnDemand",
            "h", [(0, 0.35)], americas),
        sku("E2 Instance Core running in Americas", "Compute", "CPU", "OnDemand", "h", [(0, 0.021811590)], americas,
            "CF4E-A0C7-E3BF"),
        sku("E2 Instance Ram running in Americas", "Compute", "RAM", "OnDemand", "GiBy.h", [(0, 0.002923530)],
            americas, "F449-33EC-A5EF"),
        sku("Licensing Fee for Windows Server 2019 Datacenter Edition (CPU cost)", "License", "Google", "OnDemand",
            "h", [(0, 0.046)], list(AREAS_BY_REGION)),
    ]
    return out


# Committed-use totals per hour in us-central1, us-east1 and us-west1 (pricing.yml, generated
# 2025-03-06: month_1y / month_3y over its 730-hour month): a2-highgpu-1g 1689.3711392 / 938.56707798,
# a3-highgpu-8g 44810.08066464 / 28370.99821392. On-demand: 3.673385 and 88.4899999025753.
A2_1G_COMMIT = {1: 1689.3711392 / 730, 3: 938.56707798 / 730}
A3_8G_COMMIT = {1: 44810.08066464 / 730, 3: 28370.99821392 / 730}


def commitment_skus(regions: list[str]) -> list[dict]:
    """Commit1Yr/Commit3Yr SKUs of the Americas for the A2 and A3 High parts. Each part is its
    on-demand SKU at the machine's real committed/on-demand ratio, so a2-highgpu-1g and
    a3-highgpu-8g sum to the real committed totals; the split over the parts is synthetic."""
    out = []
    for years, usage in ((1, "Commit1Yr"), (3, "Commit3Yr")):
        a2 = A2_1G_COMMIT[years] / A2_1G["Americas"][0]
        a3 = A3_8G_COMMIT[years] / A3_8G["Americas"][0]
        core, ram, lssd = r9(BASE_OD["a3_core"] * a3), r9(BASE_OD["a3_ram"] * a3), r9(BASE_OD["lssd"] * a3)
        h100 = r9((A3_8G_COMMIT[years] - 208 * core - 1872 * ram - 6000 * lssd / 730) / 8)
        a2_core, a2_ram = r9(BASE_OD["a2_core"] * a2), r9(BASE_OD["a2_ram"] * a2)
        a100 = r9(A2_1G_COMMIT[years] - 12 * a2_core - 85 * a2_ram)
        term = f"for {years} Year"
        out += [
            sku(f"Commitment v1: A2 Cpu in Americas {term}", "Compute", "CPU", usage, "h", [(0, a2_core)], regions),
            sku(f"Commitment v1: A2 Ram in Americas {term}", "Compute", "RAM", usage, "GiBy.h", [(0, a2_ram)],
                regions),
            sku(f"Commitment v1: Nvidia Tesla A100 GPU in Americas {term}", "Compute", "GPU", usage, "h",
                [(0, a100)], regions),
            sku(f"Commitment v1: A3 Cpu in Americas {term}", "Compute", "CPU", usage, "h", [(0, core)], regions),
            sku(f"Commitment v1: A3 Ram in Americas {term}", "Compute", "RAM", usage, "GiBy.h", [(0, ram)], regions),
            sku(f"Commitment v1: Nvidia H100 80GB GPU running in Americas {term}", "Compute", "GPU", usage, "h",
                [(0, h100)], regions),
            sku(f"Commitment v1: Local SSD In Americas {term}", "Storage", "LocalSSD", usage, "GiBy.mo",
                [(0, lssd)], regions),
        ]
    return out


def storage_skus(real: list[dict]) -> list[dict]:
    """Persistent disk capacity per area: the real cromwell-monitor SKUs plus per-area SKUs."""
    out = [s for s in real if s["category"]["resourceFamily"] == "Storage"]
    disks = {  # area -> (pd-standard, pd-balanced, pd-ssd) USD per GiB-month (public disk price list)
        "Virginia": (0.044, 0.11, 0.187), "Las Vegas": (0.044, 0.11, 0.187), "Netherlands": (0.044, 0.11, 0.187),
        "Tokyo": (0.052, 0.13, 0.221), "Singapore": (0.048, 0.12, 0.204),
        # added areas: the us-east4 figures at the area's level (synthetic)
        **{area: tuple(round(v * f, 3) for v in (0.044, 0.11, 0.187)) for area, (_, f, _) in NEW_AREAS.items()},
    }
    for area, (std, bal, ssd) in disks.items():
        regions = AREAS[area]
        out.append(sku(f"Storage PD Capacity in {area}", "Storage", "PDStandard", "OnDemand", "GiBy.mo",
                       [(0, std)], regions))
        out.append(sku(f"Balanced PD Capacity in {area}", "Storage", "SSD", "OnDemand", "GiBy.mo",
                       [(0, bal)], regions))
        out.append(sku(f"SSD backed PD Capacity in {area}", "Storage", "SSD", "OnDemand", "GiBy.mo",
                       [(0, ssd)], regions))
    multi = ["us-central1", "us-east1", "us-west1", "asia-east1", "europe-west1"]  # as the real PD SKUs list
    out.append(sku("Balanced PD Capacity", "Storage", "SSD", "OnDemand", "GiBy.mo", [(0, 0.1)], multi))
    out.append(sku("Hyperdisk Balanced Capacity in Iowa", "Storage", "SSD", "OnDemand", "GiBy.mo", [(0, 0.08)],
                   ["us-central1"]))
    out.append(sku("Storage PD Snapshot in Iowa", "Storage", "PDSnapshot", "OnDemand", "GiBy.mo", [(0, 0.05)],
                   ["us-central1"]))
    return out


def network_skus(real: list[dict]) -> list[dict]:
    out = [s for s in real if s["category"]["resourceFamily"] == "Network"]
    continents = {"Americas": ["us-central1", "us-east1", "us-east4", "us-west1", "us-west4"],
                  "EMEA": ["europe-west1", "europe-west4"], "APAC": ["asia-northeast1", "asia-southeast1"]}
    for _, (region, _, _) in NEW_AREAS.items():  # added regions by continent (their rates: synthetic)
        cont = ("APAC" if region.startswith(("asia", "australia")) else
                "EMEA" if region.startswith(("europe", "me-")) else "Americas")
        continents[cont].append(region)
    internet = {  # source -> destination -> Premium Tier tiers (0-1 GiB free, <1 TiB, 1-10 TiB, >10 TiB)
        "Americas": {"Americas": (0.12, 0.11, 0.08), "EMEA": (0.12, 0.11, 0.08), "Asia Pacific": (0.12, 0.11, 0.08),
                     "Australia": (0.19, 0.18, 0.15), "China": (0.23, 0.22, 0.20)},
        "EMEA": {"Americas": (0.12, 0.11, 0.08), "EMEA": (0.12, 0.11, 0.08), "Asia Pacific": (0.12, 0.11, 0.08),
                 "Australia": (0.19, 0.18, 0.15), "China": (0.23, 0.22, 0.20)},
        "APAC": {"Americas": (0.14, 0.14, 0.12), "EMEA": (0.14, 0.14, 0.12), "Asia Pacific": (0.14, 0.14, 0.12),
                 "Australia": (0.19, 0.18, 0.15), "China": (0.23, 0.22, 0.20)},
    }
    for src, dests in internet.items():
        for dst, (a, b, c) in dests.items():
            out.append(sku(f"Network Internet Data Transfer Out from {src} to {dst}", "Network",
                           "PremiumInternetEgress", "OnDemand", "GiBy", [(0, 0), (1, a), (1024, b), (10240, c)],
                           continents[src]))
    inter = {"Americas": {"Americas": 0.02, "EMEA": 0.05, "Asia": 0.08},
             "EMEA": {"EMEA": 0.02, "Americas": 0.05, "Asia": 0.08},
             "APAC": {"Asia": 0.08, "Americas": 0.08, "EMEA": 0.08}}
    for src, dests in inter.items():
        for dst, p in dests.items():
            out.append(sku(f"Network Inter Region Data Transfer Out from {src} to {dst}", "Network",
                           "InterregionEgress", "OnDemand", "GiBy", [(0, p)], continents[src]))
    out.append(sku("Network Inter Zone Data Transfer Out", "Network", "InterzoneEgress", "OnDemand", "GiBy",
                   [(0, 0.01)], sorted(AREAS_BY_REGION)))
    out.append(sku("Network Standard Tier Data Transfer Out to Internet from Americas", "Network",
                   "StandardInternetEgress", "OnDemand", "GiBy", [(0, 0), (200, 0.085)], continents["Americas"]))
    return out


# -- Cloud TPU (README "Cloud TPU v5e, v5p, v6e") ------------------------------------------------------

# Chip-hour price (on-demand, Spot) per Catalog area: SkyPilot's GCP catalog (skypilot-org/skypilot-catalog
# catalogs/v7/gcp/vms.csv, commit 017e2502fb63, read 2026-12-05), rows tpu-v5litepod-1, tpu-v5p-8 / 4 chips,
# tpu-v6e-1. The SKU descriptions are the Catalog's TPU SKU names with the "running in <area>" of its other SKUs.
TPU_PRICES = {
    "TpuV5e": {"Americas": (1.2, 0.21298), "Columbus": (1.2, 0.6), "Dallas": (1.416, 0.5664),
               "Las Vegas": (1.2, 0.4692), "Netherlands": (1.56, 0.44261), "Belgium": (1.32132, 0.66066),
               "Finland": (1.32132, 0.66066), "Singapore": (1.56, 0.78), "Taiwan": (1.38948, 0.69474)},
    "TpuV5p": {"Americas": (4.2, 1.68), "Columbus": (4.2, 1.56009), "Dallas": (4.779, 2.3954),
               "Netherlands": (4.2525, 1.34849), "Belgium": (4.459455, 1.7837825)},
    "TpuV6e": {"Americas": (2.7, 0.64833), "Virginia": (2.7, 0.85833), "Columbus": (2.7, 1.08), "Dallas": (2.7, 1.89),
               "Netherlands": (2.97, 0.71316), "Singapore": (2.97, 0.72958), "Tokyo": (3.24, 1.07681),
               "Mumbai": (3.24, 2.27)},
}
# Zones of each TPU type family, same file (v6e in asia-east1-c and southamerica-east1-c is listed
# there without a price: no SKU here either); v2-8/v3-8 and us-central2-b (v4) as the real API lists them.
TPU_ZONES = {
    "v5litepod": "asia-east1-a asia-east1-b asia-east1-c asia-southeast1-b europe-north1-a europe-west1-b "
                 "europe-west1-c europe-west4-a europe-west4-b us-central1-a us-east1-b us-east1-c us-east5-a "
                 "us-east5-b us-east5-c us-south1-a us-west1-c us-west4-a us-west4-b",
    "v5p": "europe-west1-b europe-west1-d europe-west4-b us-central1-a us-east1-d us-east5-a us-east5-b us-east5-c "
           "us-south1-a us-south1-b us-south1-c",
    "v6e": "asia-east1-c asia-northeast1-b asia-south1-b asia-south1-c asia-southeast1-b europe-west4-a "
           "southamerica-east1-c us-central1-b us-central1-c us-east1-d us-east4-a us-east4-b us-east5-a us-east5-b "
           "us-east5-c us-south1-a us-south1-c us-west1-c",
    "v2": "asia-east1-c europe-west4-a us-central1-b us-central1-c us-central1-f",
    "v3": "europe-west4-a us-central1-a us-central1-b us-central1-f",
}
# Type -> (AcceleratorConfig.Type as the REST answer encodes it, enum-encoding=int, topologies by size):
# https://cloud.google.com/tpu/docs/v5e, .../v5p, .../v6e (topology tables).
TPU_TYPES = {
    "v5litepod": (9, {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}),
    "v5p": (10, {8: "2x2x1", 16: "2x2x2", 32: "2x2x4", 64: "2x4x4", 128: "4x4x4"}),
    "v6e": (11, {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}),
    "v2": (2, {8: "2x2"}), "v3": (4, {8: "2x2"}),
}
# Earlier zones.list answers (history/): made-up zone outages, one answer a day for the 15 days
# before the recording (2026-11-15..29). Zone -> the November days it was DOWN.
HISTORY_DAYS = 15
HISTORY_DOWN = {"us-east5-b": (18, 19), "europe-west4-a": (20, 21, 22), "us-central1-a": (24,), "us-south1-a": (27,),
                "asia-southeast1-b": (28, 29), "europe-west1-c": (25, 26, 27, 28, 29)}


def tpu_skus() -> list[dict]:
    out = []
    for name, areas in TPU_PRICES.items():
        for area, (od, spot) in areas.items():
            out.append(sku(f"{name} running in {area}", "Compute", "TPU", "OnDemand", "h", [(0, od)], AREAS[area]))
            out.append(sku(f"{name} attached to Spot Preemptible VMs running in {area}", "Compute", "TPU",
                           "Preemptible", "h", [(0, spot)], AREAS[area]))
    return out


def tpu_zone_types() -> dict[str, list[dict]]:
    per_zone: dict[str, list[dict]] = {}
    for family, zones in TPU_ZONES.items():
        enum, sizes = TPU_TYPES[family]
        for zone in zones.split():
            per_zone.setdefault(zone, []).extend(
                {"name": f"projects/{PROJECT}/locations/{zone}/acceleratorTypes/{family}-{n}", "type": f"{family}-{n}",
                 "acceleratorConfigs": [{"type": enum, "topology": topology}]} for n, topology in sizes.items())
    return per_zone


def tpu_pages() -> list[tuple[str, dict, str, dict]]:
    """(path, params matched, body file, body) of the Cloud TPU API's answers: the zones in two pages,
    each zone's types in one (us-central1-a's in two)."""
    out: list[tuple[str, dict, str, dict]] = []
    tpu_types = tpu_zone_types()
    locations = [{"name": f"projects/{PROJECT}/locations/{z}", "locationId": z} for z in sorted(tpu_types)]
    locations.append({"name": f"projects/{PROJECT}/locations/us-central2-b", "locationId": "us-central2-b"})
    half = len(locations) // 2
    for n, (chunk, prev, nxt) in enumerate(((locations[:half], None, token("locations", 1)),
                                            (locations[half:], token("locations", 1), "")), 1):
        out.append((f"/v2/projects/{PROJECT}/locations", {"pageToken": prev}, f"tpu/locations.{n}.json",
                    {"locations": chunk, "nextPageToken": nxt}))
    for zone, types in sorted(tpu_types.items()):
        chunks = [types[:6], types[6:]] if zone == "us-central1-a" else [types]
        prev = None
        for n, chunk in enumerate(chunks, 1):
            nxt = token("acceleratorTypes", zone, n) if n < len(chunks) else ""
            out.append((f"/v2/projects/{PROJECT}/locations/{zone}/acceleratorTypes", {"pageToken": prev},
                        f"tpu/acceleratorTypes.{zone}.{n}.json", {"acceleratorTypes": chunk, "nextPageToken": nxt}))
            prev = nxt
    return out


def billing_pages(skus: list[dict], per_page: int) -> list[dict]:
    pages = []
    chunks = [skus[i:i + per_page] for i in range(0, len(skus), per_page)]
    for n, chunk in enumerate(chunks, 1):
        page = {"skus": chunk, "nextPageToken": token("skus", n) if n < len(chunks) else ""}
        pages.append(page)
    return pages


def write(rel: str, doc: dict) -> str:
    path = HERE / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    if rel.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text)
    return rel


def main() -> None:
    cromwell = json.loads((HERE / "samples" / "cloudbilling_skus_cromwell-monitor_disk_mix.json").read_text())
    for s in cromwell:  # the request time the Catalog stamps; the sample's own stamp is from its capture day
        s["pricingInfo"][0]["effectiveTime"] = STAMP
    # The sample's Compute SKUs (Spot H3 RAM, Spot E2 custom core) are out-of-scope neighbours.
    noise = [s for s in cromwell if s["category"]["resourceFamily"] == "Compute"]
    skus = compute_skus() + noise + storage_skus(cromwell) + network_skus(cromwell)
    # Interleave so every page holds a mix, as the Catalog's id order does.
    skus.sort(key=lambda s: s["skuId"])
    exchanges = []

    def ex(host: str, path: str, params: dict, body_file: str) -> None:
        exchanges.append({"host": host, "method": "GET", "path": path, "match": {"params": params},
                          "response": {"status": 200, "headers": {"Content-Type": "application/json; charset=UTF-8"},
                                       "body_file": body_file}})

    ex(COMPUTE, f"/compute/v1/projects/{PROJECT}/zones", {"maxResults": str(PAGE), "pageToken": None},
       write("compute/zones.1.json", zones_page()))
    prev = None
    for n, page in enumerate(aggregated_pages("machineType", "machineTypes", zone_machine_types()), 1):
        ex(COMPUTE, f"/compute/v1/projects/{PROJECT}/aggregated/machineTypes",
           {"filter": FILTER, "maxResults": str(PAGE), "pageToken": prev},
           write(f"compute/machineTypes.{n}.json.gz", page))
        prev = page.get("nextPageToken")
    prev = None
    for n, page in enumerate(aggregated_pages("acceleratorType", "acceleratorTypes", zone_accelerators()), 1):
        ex(COMPUTE, f"/compute/v1/projects/{PROJECT}/aggregated/acceleratorTypes",
           {"maxResults": str(PAGE), "pageToken": prev}, write(f"compute/acceleratorTypes.{n}.json.gz", page))
        prev = page.get("nextPageToken")
    for path, params, name, doc in tpu_pages():
        ex(TPU, path, params, write(name, doc))
    # Earlier zones.list answers, replayed as past availability (not served: no API returns them).
    for day in range(HISTORY_DAYS):
        at = datetime.strptime(STAMP[:19], "%Y-%m-%dT%H:%M:%S") - timedelta(days=HISTORY_DAYS - day)
        down = {z for z, days in HISTORY_DOWN.items() if at.day in days}
        write(f"history/zones.{at:%Y%m%dT%H%M%S}Z.json.gz", zones_page(down))
    prev = None
    for n, page in enumerate(billing_pages(skus, per_page=100), 1):
        ex(BILLING, "/v1/services/6F81-5844-456A/skus", {"currencyCode": "USD", "pageSize": "5000", "pageToken": prev},
           write(f"billing/skus.{n}.json.gz", page))
        prev = page.get("nextPageToken") or None
    manifest = {"provider": "gcp", "recorded_at": STAMP, "settings": {"gcp_project": PROJECT},
                "exchanges": exchanges}
    (HERE / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{len(exchanges)} exchanges, {len(skus)} SKUs")


if __name__ == "__main__":
    main()
