"""Shadeform at aggregator size: every cloud's GPU types in every region it lists them.

`GET /v1/instances/types` with no filter returns every instance type of every cloud Shadeform
resells, one record per (cloud, type) with its regions in `availability`; one body, no paging.
The clouds, their regions and their per-GPU prices are those of SkyPilot's catalogue of this
API (skypilot-org/skypilot-catalog `catalogs/v8/shadeform/vms.csv`, commit 8e50954, one row
per available region, price in dollars) or of the bundled recording, which quotes the same
catalogue; the record layout is the bundled recording's (adapters/recordings/shadeform/README.md). Each type is listed in every region of its cloud,
and every seventh region entry is written sold out (`"available": false`), since the catalogue
shows only available rows while the API lists both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuledger.adapters import shadeform

from bench.world.writer import ProviderRecording

# cloud -> (regions, [(gpu_type, vram GB, interconnect, USD per GPU-hour, GPU counts)])
CLOUDS: dict[str, tuple[tuple[str, ...], list[tuple[str, int, str, float, tuple[int, ...]]]]] = {
    "imwt": (("kansascity-usa-2",), [("A6000", 48, "pcie", 0.49, (1, 2, 4, 8))]),
    "massedcompute": (("kansascity-usa-1", "desmoines-usa-1"), [
        ("A6000", 48, "pcie", 0.57, (1, 2, 8)), ("L40", 48, "pcie", 0.99, (1, 2, 4, 8)),
        ("L40S", 48, "pcie", 0.88, (1, 2, 4, 8)), ("H100", 80, "pcie", 2.73, (1, 2, 4, 8)),
        ("A100_80G", 80, "pcie", 1.35, (1, 2, 4, 8)), ("RTXPro6000", 96, "pcie", 2.19, (1, 2, 4, 8))]),
    "cudo": (("stockholm-sweden-2", "montreal-canada-4", "kristiansand-norway-2"), [
        ("A6000", 48, "pcie", 0.59, (1, 2, 4)), ("A40", 48, "pcie", 0.53, (1, 2, 4, 8)),
        ("A5000", 24, "pcie", 0.49, (1, 2, 8)), ("A100_80G", 80, "pcie", 1.83, (1, 2, 4)),
        ("H100", 80, "pcie", 3.17, (1, 2))]),
    "latitude": (("dallas-usa-1",), [("H100", 80, "pcie", 1.99, (1, 4, 8))]),
    "hyperstack": (("montreal-canada-2", "oslo-norway-1", "houston-usa-3"), [
        ("A6000", 48, "pcie", 0.50, (1, 2, 4, 8)), ("A100_80G", 80, "pcie", 1.35, (1, 2, 4, 8)),
        ("H100", 80, "pcie", 1.90, (1, 2, 4, 8)), ("H100_sxm5", 80, "sxm5", 2.40, (8,)),
        ("A4000", 16, "pcie", 0.15, (10,)), ("L40", 48, "pcie", 1.00, (1, 2, 4, 8))]),
    "denvr": (("houston-usa-1", "calgary-canada-1"), [
        ("H100_sxm5", 80, "sxm5", 2.20, (8,)), ("A100_sxm4", 40, "sxm4", 1.25, (8,))]),
    "horizon": (("blonduos-iceland-2",), [("H100", 80, "pcie", 1.95, (2, 4, 8))]),
    "digitalocean": (("newyork-usa-2", "toronto-canada-1", "amsterdam-netherlands-2"), [
        ("H100_sxm5", 80, "sxm5", 3.34, (1,)), ("H100_sxm5", 80, "sxm5", 2.99, (8,))]),
    "boostrun": (("raleigh-usa-1",), [("L40S", 48, "pcie", 0.83, (8,))]),
    "excesssupply": (("tokyo-japan-5",), [("H200", 141, "sxm5", 4.00, (8,))]),
    "crusoe": (("culpeper-usa-1", "houston-usa-2"), [
        ("A100_80G", 80, "pcie", 1.65, (1, 2, 4)), ("L40S", 48, "pcie", 1.45, (1, 8)),
        ("A100_80G_sxm4", 80, "sxm4", 2.30, (8,))]),
    "lambdalabs": (("dulles-usa-1", "phoenix-usa-2", "mumbai-india-1", "austin-usa-1", "dallas-usa-3"), [
        ("A100_sxm4", 40, "sxm4", 1.29, (1,)), ("H100_sxm5", 80, "sxm5", 3.29, (1, 2, 4, 8)),
        ("A10", 24, "pcie", 1.29, (1,))]),
    "nebius": (("helsinki-finland-3", "paris-france-2", "kansascity-usa-3"), [
        ("H200_sxm5", 141, "sxm5", 3.65, (1, 8)), ("H100_sxm5", 80, "sxm5", 3.06, (1, 8))]),
    "scaleway": (("paris-france-1", "paris-france-5", "warsaw-poland-1"), [
        ("L4", 24, "pcie", 0.90, (1, 2, 4, 8)), ("H100", 80, "pcie", 3.08, (1, 2)),
        ("L40S", 48, "pcie", 1.61, (1, 2, 4, 8))]),
    "paperspace": (("newyork-usa-1",), [
        ("A100_80G_sxm4", 80, "sxm4", 3.22, (1, 8)), ("H100", 80, "pcie", 5.99, (1, 8)),
        ("A5000", 24, "pcie", 1.42, (1, 2, 4)), ("A4000", 16, "pcie", 0.80, (1, 2, 4)),
        ("A6000", 48, "pcie", 1.93, (1, 2, 4)), ("V100", 32, "pcie", 2.34, (1,))]),
    "vultr": (("bangalore-india-1",), [("A16", 16, "pcie", 0.51, (1, 2, 4))]),
}
SMALL_CLOUDS = ("massedcompute", "lambdalabs")
SOLD_OUT_EVERY = 7


def display_name(region: str) -> str:
    place, country, _n = region.rsplit("-", 2)
    return f"{country.upper() if country == 'usa' else country.title()}, {place.title()}"


def instance_types(scale: str) -> list[dict[str, Any]]:
    clouds = CLOUDS if scale == "world" else {c: CLOUDS[c] for c in SMALL_CLOUDS}
    records, entry = [], 0
    for cloud, (regions, gpus) in clouds.items():
        for gpu_type, vram, link, per_gpu, counts in gpus:
            for n in counts:
                shade = gpu_type if n == 1 else f"{gpu_type}x{n}"
                vcpus, memory = 8 * n, 64 * n if vram < 80 else 120 * n
                config = {"memory_in_gb": memory, "storage_in_gb": 256 * n, "vcpus": vcpus, "num_gpus": n,
                          "gpu_type": gpu_type.split("_sxm")[0] if "_sxm" in gpu_type else gpu_type,
                          "interconnect": link, "nvlink": link != "pcie",
                          "os_options": ["ubuntu22.04_cuda12.6_shade_os"], "vram_per_gpu_in_gb": vram,
                          "gpu_manufacturer": "nvidia"}
                availability = []
                for region in regions:
                    entry += 1
                    availability.append({"region": region, "available": entry % SOLD_OUT_EVERY != 0,
                                         "display_name": display_name(region)})
                records.append({
                    "cloud": cloud, "shade_instance_type": shade,
                    "cloud_instance_type": f"{cloud[:3]}-{gpu_type.lower()}-{n}x",
                    "configuration": config, **{k: v for k, v in config.items() if k not in
                                                ("os_options", "vram_per_gpu_in_gb", "gpu_manufacturer")},
                    "hourly_price": round(per_gpu * n * 100), "availability": availability,
                    "boot_time": {"min_boot_in_sec": 300, "max_boot_in_sec": 600}, "deployment_type": "vm"})
    return records


def generate(root: Path, scale: str) -> dict[str, Any]:
    rec = ProviderRecording(root, shadeform.NAME, recorded_at="2026-12-02T00:00:00Z")
    rec.add(shadeform.API_HOST, shadeform.INSTANCE_TYPES_PATH,
            json.dumps({"instance_types": instance_types(scale)}, indent=1),
            body_file="instance-types.json", headers={"Content-Type": "application/json"})
    return rec.close()
