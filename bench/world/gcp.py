"""GCP at world scale: every region and zone, and the Compute Engine Catalog at its real size.

The bundled recording's builder (adapters/recordings/gcp/build_recording.py) holds the GPU
regions' zones, machine types, accelerator types and every SKU the adapter prices, with their
real values and wire format. The world replay is that builder run as a private copy with:

- every public region's zones in `zones.list` and in the aggregated lists' scopes (regions with
  no GPU machine type answer their scope with the API's NO_RESULTS_ON_PAGE warning);
- the Billing Catalog at the size of the real Compute Engine service: the builder's SKUs among
  the CPU families' core and RAM SKUs (on-demand, Spot, 1- and 3-year commitments, sole
  tenancy) of every price area, and OS licence SKUs, all paged at the adapter's pageSize 5000.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from bench.world.writer import ProviderRecording
from gpuledger.adapters.gcp import COMPUTE_ENGINE_SERVICE, PAGE_SIZE_BILLING, PAGE_SIZE_COMPUTE
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

PROVIDER = "gcp"
BUILDER_PATH = BUNDLED_RECORDINGS / PROVIDER / "build_recording.py"
JSON_TYPE = "application/json; charset=UTF-8"

# Public regions with no GPU machine type in the bundle (Google's regions-and-zones page), with
# their zone letters and the city their SKUs say ("running in <City>").
OTHER_REGIONS = {
    "africa-south1": ("abc", "Johannesburg"), "asia-east2": ("abc", "Hong Kong"),
    "asia-northeast2": ("abc", "Osaka"), "australia-southeast2": ("abc", "Melbourne"),
    "europe-central2": ("abc", "Warsaw"), "europe-north2": ("abc", "Stockholm"),
    "europe-southwest1": ("abc", "Madrid"), "europe-west10": ("abc", "Berlin"),
    "europe-west12": ("abc", "Turin"), "me-central1": ("abc", "Doha"), "me-central2": ("abc", "Dammam"),
    "northamerica-south1": ("abc", "Queretaro"), "southamerica-west1": ("abc", "Santiago"),
}
# CPU machine families priced by core and RAM SKUs; the GPU families the adapter composes (N1,
# A2, A3, A4, A4X, G2, G4) are the builder's own SKUs and are not repeated here.
CPU_FAMILIES = ["N2", "N2D", "N4", "C2", "C2D", "C3", "C3D", "C4", "C4A", "C4D", "E2", "T2D", "T2A", "M1",
                "M2", "M3", "M4", "H3", "Z3", "X4", "N4D", "C4N", "H4D"]
USAGES = [("OnDemand", "{f} Instance {r} running in {a}"),
          ("Preemptible", "Spot Preemptible {f} Instance {r} running in {a}"),
          ("Commit1Yr", "Commitment v1: {f} {r} in {a} for 1 Year"),
          ("Commit3Yr", "Commitment v1: {f} {r} in {a} for 3 Year"),
          ("OnDemand", "{f} Sole Tenancy Instance {r} running in {a}"),
          ("Preemptible", "Spot Preemptible {f} Sole Tenancy Instance {r} running in {a}"),
          ("Commit1Yr", "Commitment v1: {f} Sole Tenancy {r} in {a} for 1 Year"),
          ("Commit3Yr", "Commitment v1: {f} Sole Tenancy {r} in {a} for 3 Year"),
          ("OnDemand", "{f} Custom Instance {r} running in {a}"),
          ("Preemptible", "Spot Preemptible {f} Custom Instance {r} running in {a}"),
          ("OnDemand", "{f} Custom Extended Instance {r} running in {a}"),
          ("Preemptible", "Spot Preemptible {f} Custom Extended Instance {r} running in {a}")]
# OS licence SKUs: one per image family, edition and billing dimension (global SKUs).
LICENSES = ["Windows Server 2016", "Windows Server 2019", "Windows Server 2022", "Windows Server 2025",
            "RHEL 7", "RHEL 8", "RHEL 9", "RHEL 8 for SAP", "RHEL 9 for SAP", "SLES 12", "SLES 15",
            "SLES 15 for SAP", "SQL Server 2017", "SQL Server 2019", "SQL Server 2022", "Ubuntu Pro"]
LICENSE_EDITIONS = ["Standard", "Enterprise", "Web", "Datacenter"]
LICENSE_DIMENSIONS = ["CPU cost", "RAM cost", "GPU cost", "f1-micro", "g1-small", "per core 1-4",
                      "per core 5+", "shared core"]
# The Compute Engine service's SKU count (ESTIMATE, README.md): families x core/RAM x usage x area.
SCALE_SKUS = {"world": None, "small": 300}
# SKUs per Catalog page: the adapter's pageSize (the Catalog's maximum) at "world"; fewer at
# "small" (the API may answer fewer than pageSize) so its SKUs still span several pages.
SKUS_PER_PAGE = {"world": PAGE_SIZE_BILLING, "small": 300}


# Regions at "small": GPU regions of every family kind and two without GPUs.
SMALL_REGIONS = {"us-central1", "us-east4", "europe-west4", "asia-southeast1", "africa-south1", "europe-west12"}


def builder(scale: str):
    spec = importlib.util.spec_from_file_location(f"bench_world_gcp_builder_{scale}", BUILDER_PATH)
    b = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b)
    for region, (letters, _) in OTHER_REGIONS.items():
        b.ZONES.setdefault(region, letters)
    if scale == "small":
        b.ZONES = {r: z for r, z in b.ZONES.items() if r in SMALL_REGIONS}

        def kept(zones: str) -> str:
            return zones if zones == "*" else " ".join(z for z in zones.split() if b.region_of(z) in SMALL_REGIONS)
        b.FAMILY_ZONES = {f: kept(z) for f, z in b.FAMILY_ZONES.items()}
        b.ATTACHABLE = {k: kept(z) for k, z in b.ATTACHABLE.items()}
    return b


def areas(b) -> dict[str, list[str]]:
    """Price area -> its regions: the builder's GPU areas and the other regions' cities."""
    return {**b.AREAS, **{city: [region] for region, (_, city) in OTHER_REGIONS.items()}}


def filler_skus(b) -> list[dict[str, Any]]:
    """The Catalog's SKUs the adapter has no use for, priced at a stable made-up rate."""
    out = []
    for area, regions in sorted(areas(b).items()):
        for fam in CPU_FAMILIES:
            for resource, unit, base in (("Core", "h", 0.03), ("Ram", "GiBy.h", 0.004)):
                for usage, pattern in USAGES:
                    desc = pattern.format(f=fam, r=resource, a=area)
                    price = base * (0.3 if usage == "Preemptible" else 0.63 if usage == "Commit1Yr"
                                    else 0.45 if usage == "Commit3Yr" else 1.0)
                    price *= 1 + (int(b.sku_id(desc)[:4], 16) % 40) / 100
                    group = "CPU" if resource == "Core" else "RAM"
                    out.append(b.sku(desc, "Compute", group, usage, unit, [(0, b.r9(price))], regions))
    every_region = sorted({r for rs in areas(b).values() for r in rs})
    for lic in LICENSES:
        for edition in LICENSE_EDITIONS:
            for dim in LICENSE_DIMENSIONS:
                desc = f"Licensing Fee for {lic} {edition} ({dim})"
                price = 0.01 + (int(b.sku_id(desc)[:4], 16) % 500) / 1000
                out.append(b.sku(desc, "License", "Misc", "OnDemand", "h", [(0, price)], every_region))
    return out


def generate(root: Path, scale: str) -> dict[str, Any]:
    b = builder(scale)
    bundled = json.loads((BUNDLED_RECORDINGS / PROVIDER / "manifest.json").read_text())
    rec = ProviderRecording(root, PROVIDER, bundled["recorded_at"], dict(bundled.get("settings", {})))
    base = f"/compute/v1/projects/{b.PROJECT}"
    page = str(PAGE_SIZE_COMPUTE)

    def ex(host: str, path: str, params: dict, body_file: str, doc: dict) -> None:
        text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
        rec.add(host, path, text, body_file=body_file, match={"params": params},
                headers={"Content-Type": JSON_TYPE}, compress=len(text) > 40_000)

    zones = b.zones_page()
    ex(b.COMPUTE, f"{base}/zones", {"maxResults": page, "pageToken": None}, "compute/zones.1.json", zones)
    counts: dict[str, Any] = {"zones": len(zones["items"]), "regions": len(b.ZONES)}
    for kind, key, per_zone, extra in (
            ("machineType", "machineTypes", b.zone_machine_types(), {"filter": b.FILTER}),
            ("acceleratorType", "acceleratorTypes", b.zone_accelerators(), {})):
        prev = None
        pages = b.aggregated_pages(kind, key, per_zone)
        for n, doc in enumerate(pages, 1):
            ex(b.COMPUTE, f"{base}/aggregated/{key}", {**extra, "maxResults": page, "pageToken": prev},
               f"compute/{key}.{n}.json", doc)
            prev = doc.get("nextPageToken")
        counts[key] = sum(len(v) for v in per_zone.values())

    for path, params, name, doc in b.tpu_pages():  # the Cloud TPU API as the bundle answers it
        ex(b.TPU, path, params, name, doc)
    cromwell = json.loads((BUILDER_PATH.parent / "samples" / "cloudbilling_skus_cromwell-monitor_disk_mix.json")
                          .read_text())
    for s in cromwell:
        s["pricingInfo"][0]["effectiveTime"] = b.STAMP
    noise = [s for s in cromwell if s["category"]["resourceFamily"] == "Compute"]
    priced = b.compute_skus() + noise + b.storage_skus(cromwell) + b.network_skus(cromwell)
    filler = filler_skus(b)
    if SCALE_SKUS[scale] is not None:
        filler = filler[::max(1, len(filler) // SCALE_SKUS[scale])]
    skus = sorted(priced + filler, key=lambda s: s["skuId"])  # the Catalog's id order mixes kinds
    prev = None
    for n, doc in enumerate(b.billing_pages(skus, SKUS_PER_PAGE[scale]), 1):
        ex(b.BILLING, f"/v1/{COMPUTE_ENGINE_SERVICE}/skus",
           {"currencyCode": "USD", "pageSize": str(PAGE_SIZE_BILLING), "pageToken": prev},
           f"billing/skus.{n}.json", doc)
        prev = doc.get("nextPageToken") or None
    counts["skus"] = len(skus)
    counts["priced_skus"] = len(priced)
    return {**rec.close(), **counts}
