"""DigitalOcean at size-list size: `GET /v2/sizes` with every Droplet size, one page of 200.

A real answer lists about 150 sizes (adapters/recordings/digitalocean/README.md; an estimate
from the API's size families, not a count), which fit one page at the documented maximum
`per_page=200`. The bundled page keeps the 7 GPU sizes of the pricing page, so its offers are
the real ones; the world page adds CPU sizes of DigitalOcean's families (Basic, General Purpose,
CPU-Optimized, Memory-Optimized, Storage-Optimized; slugs in DigitalOcean's pattern, prices made
up) up to that length, so the answer has its real size.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

REAL_SIZES = 150
SMALL_SIZES = 20
HOURS_PER_MONTH = 672  # DigitalOcean caps a month's billing at 672 hours
# (slug prefix, description, GiB of RAM per vCPU, USD per vCPU-month)
FAMILIES = [
    ("s", "Basic", 2, 6.0), ("s-intel", "Basic Intel", 2, 7.0), ("s-amd", "Basic AMD", 2, 7.0),
    ("g", "General Purpose", 4, 15.75), ("gd", "General Purpose (NVMe)", 4, 17.0),
    ("c", "CPU-Optimized", 2, 10.5), ("c2", "CPU-Optimized 2x SSD", 2, 11.75),
    ("m", "Memory-Optimized", 8, 21.0), ("m3", "Memory-Optimized 3x SSD", 8, 26.0),
    ("so", "Storage-Optimized", 8, 32.75), ("so1_5", "Storage-Optimized 1.5x SSD", 8, 39.0),
]
VCPUS = (1, 2, 4, 8, 16, 24, 32, 40, 48, 60, 64, 80, 96, 128)


def sizes(scale: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = BUNDLED_RECORDINGS / "digitalocean"
    doc = json.loads((folder / "sizes-page-1.json").read_text())
    template = doc["sizes"][-1]
    target = REAL_SIZES if scale == "world" else SMALL_SIZES
    slugs = {s["slug"] for s in doc["sizes"]}
    out = list(doc["sizes"])
    for vcpus in VCPUS:
        for prefix, description, ram_per_vcpu, per_vcpu_month in FAMILIES:
            if len(out) >= target:
                break
            memory_gb = vcpus * ram_per_vcpu
            slug = f"{prefix}-{vcpus}vcpu-{memory_gb}gb"
            if slug in slugs:
                continue
            size = copy.deepcopy(template)
            monthly = round(per_vcpu_month * vcpus, 2)
            size.update(slug=slug, memory=memory_gb * 1024, vcpus=vcpus, disk=25 * vcpus, transfer=float(vcpus),
                        price_monthly=monthly, price_hourly=round(monthly / HOURS_PER_MONTH, 5),
                        description=description, disk_info=[{"type": "local", "size": {"amount": 25 * vcpus,
                                                                                       "unit": "gib"}}])
            slugs.add(slug)
            out.append(size)
    doc["sizes"] = out
    doc["meta"] = {"total": len(out)}
    return doc, out


def generate(root: Path, scale: str) -> dict[str, Any]:
    bundled = json.loads((BUNDLED_RECORDINGS / "digitalocean" / "manifest.json").read_text())
    exchange = bundled["exchanges"][0]
    doc, _ = sizes(scale)
    rec = ProviderRecording(root, "digitalocean", recorded_at="2026-12-02T00:00:00Z", settings=bundled["settings"])
    rec.add(exchange["host"], exchange["path"], json.dumps(doc, indent=1), body_file="sizes-page-1.json",
            match=exchange["match"], headers=exchange["response"]["headers"])
    return rec.close()
