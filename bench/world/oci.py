"""OCI at price-list size: the whole `products` answer (602 parts), one body, no next link.

Oracle's list answers every part of every service in one body; the snapshot the bundled
recording is built from holds 602 parts (adapters/recordings/oci/README.md: `lastUpdated`
2026-01-05, `jasonwilbur/oci-pricing-mcp` `dist/data/pricing-data.json`). The bundled body keeps
50 of them, every GPU part among them, so the offers are already the real ones; the world body
adds 552 parts of the non-GPU services the bundled body shows (compute OCPU and memory, block
and object storage, networking, API gateway), whose numbers and prices are made up, so the
answer has the real length and the adapter parses and counts the real number of parts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuledger.adapters import oci
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

REAL_PARTS = 602
SMALL_PARTS = 80
# (serviceCategory, name stem, metricName, USD) of the non-GPU services in the bundled answer.
FILLER_SERVICES = [
    ("Compute - Virtual Machine", "Compute - Standard - OCPU", "OCPU Per Hour", 0.025),
    ("Compute - Virtual Machine", "Compute - Standard - Memory", "Gigabyte Per Hour", 0.0015),
    ("Storage - Block Volumes", "Storage - Block Volume - Storage", "Gigabyte Storage Capacity Per Month", 0.0255),
    ("Storage - Object Storage", "Object Storage - Storage", "Gigabyte Storage Capacity Per Month", 0.0255),
    ("Networking - Virtual Cloud Networks", "Networking - Gateway", "Gateway Per Hour", 0.0125),
    ("Application Development - API Management", "API Gateway - API Calls", "1,000,000 API Calls Per Month", 3.0),
]
FIRST_FILLER_PART = 700_000  # above every real part number seen, so none collides


def products(scale: str) -> dict[str, Any]:
    doc = json.loads((BUNDLED_RECORDINGS / "oci" / "products-USD.json").read_text())
    target = REAL_PARTS if scale == "world" else SMALL_PARTS
    for i in range(target - len(doc["items"])):
        category, stem, metric, price = FILLER_SERVICES[i % len(FILLER_SERVICES)]
        doc["items"].append({
            "partNumber": f"B{FIRST_FILLER_PART + i}", "displayName": f"{stem} - {i // len(FILLER_SERVICES) + 1}",
            "metricName": metric, "serviceCategory": category,
            "currencyCodeLocalizations": [{"currencyCode": "USD", "prices": [
                {"model": "PAY_AS_YOU_GO", "value": round(price * (1 + (i % 7) / 10), 6)}]}]})
    return doc


def generate(root: Path, scale: str) -> dict[str, Any]:
    rec = ProviderRecording(root, oci.NAME, recorded_at="2026-12-02T00:00:00Z")
    rec.add(oci.API_HOST, oci.PRODUCTS_PATH, json.dumps(products(scale), indent=1), body_file="products-USD.json",
            match={"params": {"currencyCode": "USD"}}, headers={"Content-Type": "application/json"})
    return rec.close()
