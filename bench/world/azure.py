"""Azure at world scale: the Retail Prices feed of the adapter's three queries for every region.

The bundled recording's builder (adapters/recordings/azure/build_recording.py) holds the real
prices, names and wire format of 36 regions, paged at 100 items. The world feed is that builder
run on a wider table, loaded as a private copy of the module so the bundled build is untouched:

- 20 more public regions (56 in all, the Retail Prices API's GPU regions; README.md);
- every series in more regions: NCasT4_v3 and NVadsA10_v5 (the most widely deployed GPU series)
  in all of them, every other series in a stable share of them;
- Windows meters for every size that has them in every region (the bundle: its first ten);
- 1- and 3-year Reservation items for every pay-as-you-go Linux size and region (the bundle: 3);
- pages of 1,000 items (the live API's page size), `NextPageLink` with `$skip`, `Count`;
- Resource Graph eviction rates for every Spot size and region, 1,000 rows per page.
"""

from __future__ import annotations

import base64
import importlib.util
import json
from pathlib import Path
from typing import Any

from bench.world.writer import ProviderRecording
from gpuledger.adapters.azure import BANDWIDTH_FILTER, PRICES_HOST, PRICES_PATH, STORAGE_FILTER, VM_FILTER
from gpuledger.adapters.azure_eviction import (
    QUERY, RESOURCE_GRAPH_API_VERSION, RESOURCE_GRAPH_HOST, RESOURCE_GRAPH_PATH,
)
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

PROVIDER = "azure"
BUILDER_PATH = BUNDLED_RECORDINGS / PROVIDER / "build_recording.py"
PAGE_SIZE = 1000  # the live Retail Prices API's page size
EVICTION_PAGE_ROWS = 1000  # Resource Graph's largest $top, which the adapter asks
JSON_TYPE = "application/json; charset=utf-8"

# Public Azure regions beyond the bundled 36 (region name -> billing location). The names are
# Azure's region names; the billing locations follow the feed's "<country> <area>" pattern and
# the on-demand factor (vs. eastus) is SYNTHETIC, like the bundle's added regions.
EXTRA_REGIONS = {
    "australiacentral": ("AU Central", 1.3), "australiacentral2": ("AU Central 2", 1.3),
    "brazilsoutheast": ("BR Southeast", 2.0), "francesouth": ("FR South", 1.25),
    "germanynorth": ("DE North", 1.25), "norwaywest": ("NO West", 1.35),
    "switzerlandwest": ("CH West", 1.4), "southafricawest": ("ZA West", 1.4),
    "uaecentral": ("AE Central", 1.35), "westindia": ("IN West", 1.25),
    "koreasouth": ("KR South", 1.3), "jioindiawest": ("IN West Jio", 1.4),
    "swedensouth": ("SE South", 1.15), "israelcentral": ("IL Central", 1.3),
    "mexicocentral": ("MX Central", 1.2), "spaincentral": ("ES Central", 1.2),
    "newzealandnorth": ("NZ North", 1.35), "indonesiacentral": ("ID Central", 1.3),
    "malaysiawest": ("MY West", 1.3), "chilecentral": ("CL Central", 1.3),
}
# Shares of pay-as-you-go for Reservation items where the bundle has none (SYNTHETIC; the same
# shares as the bundle's RESERVATIONS).
RESERVATION_SHARES = {1: 0.63, 3: 0.40}
# Share of the regions each other series is sold in (ESTIMATE, tuned so the feed has the
# size the adapter's documentation states for the live query: ten to twenty pages of 1,000).
SERIES_SHARE = 0.6
# Regions at "small" scale: the bundle's first ten and three added ones (every page kind stays).
SMALL_REGIONS = 13


def builder(scale: str):
    """A private copy of the bundled builder with the world table in place."""
    spec = importlib.util.spec_from_file_location(f"bench_world_azure_builder_{scale}", BUILDER_PATH)
    b = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b)
    regions = {**b.REGIONS, **EXTRA_REGIONS}
    if scale == "small":
        regions = dict(list(b.REGIONS.items())[:10] + list(EXTRA_REGIONS.items())[:SMALL_REGIONS - 10])
    b.REGIONS = regions
    b.WHERE = {sku: [r for r in regions if r in where or _sold_in(b, sku, r)] for sku, where in b.WHERE.items()}
    b.FIRST_REGIONS = list(regions)
    b.RESERVATIONS = {**{(sku, r): RESERVATION_SHARES for sku, where in b.WHERE.items() for r in where},
                      **b.RESERVATIONS}
    return b


def _sold_in(b, sku: str, region: str) -> bool:
    """Whether the world table sells a size in a region beyond the bundle's table: the widest
    series everywhere, the others in a stable SERIES_SHARE of the regions (all sizes of a
    series together, as Azure deploys a series per region)."""
    if "_T4_" in sku or "_A10_v5" in sku:
        return True
    series = b.SIZES[sku][1]
    return int(b._h("world-series", series, region), 16) % 1000 < SERIES_SHARE * 1000


def _query(rec: ProviderRecording, b, folder: str, odata_filter: str, items: list[dict]) -> int:
    pages = [items[i:i + PAGE_SIZE] for i in range(0, len(items), PAGE_SIZE)] or [[]]
    for n, chunk in enumerate(pages):
        skip = n * PAGE_SIZE
        nxt = b.page_link(odata_filter, skip + PAGE_SIZE) if n + 1 < len(pages) else None
        body = b.dump_page(chunk, nxt)
        rec.add(PRICES_HOST, PRICES_PATH, body, body_file=f"{folder}/page-{n + 1:03d}.json",
                match={"params": b.params(odata_filter, skip if n else None)},
                headers={"Content-Type": JSON_TYPE}, compress=len(body) > 40_000)
    return len(pages)


def skip_token(rows_to_skip: int) -> str:
    """An opaque continuation token in Resource Graph's form (base64 of its paging state)."""
    state = json.dumps({"$id": "1", "MaxRows": EVICTION_PAGE_ROWS, "RowsToSkip": rows_to_skip},
                       separators=(",", ":"))
    return base64.b64encode(state.encode()).decode()


def eviction_rows(b, vm_items: list[dict]) -> list[dict[str, str]]:
    """One eviction-rate band per Spot size and region (SYNTHETIC bands, stable per pair)."""
    bands = ["0-5", "5-10", "10-15", "15-20", "20+"]
    pairs = sorted({(i["armSkuName"], i["armRegionName"]) for i in vm_items if i["meterName"].endswith(" Spot")})
    return [{"skuName": sku, "location": region,
             "evictionRate": b.EVICTION_RATES.get((sku, region)) or bands[int(b._h(sku, region), 16) % 5]}
            for sku, region in pairs]


def _eviction(rec: ProviderRecording, rows: list[dict[str, str]]) -> int:
    pages = [rows[i:i + EVICTION_PAGE_ROWS] for i in range(0, len(rows), EVICTION_PAGE_ROWS)] or [[]]
    for n, chunk in enumerate(pages):
        doc: dict[str, Any] = {"totalRecords": len(rows), "count": len(chunk), "data": chunk, "facets": [],
                               "resultTruncated": "false"}
        if n + 1 < len(pages):
            doc["$skipToken"] = skip_token((n + 1) * EVICTION_PAGE_ROWS)
        rec.add(RESOURCE_GRAPH_HOST, RESOURCE_GRAPH_PATH, json.dumps(doc, indent=1) + "\n",
                body_file=f"resource-graph/page-{n + 1:02d}.json", method="POST",
                match={"params": {"api-version": RESOURCE_GRAPH_API_VERSION},
                       "json": {"query": QUERY, "options": {"$skipToken": skip_token(n * EVICTION_PAGE_ROWS)
                                                            if n else None}}},
                headers={"Content-Type": JSON_TYPE})
    return len(pages)


def generate(root: Path, scale: str) -> dict[str, Any]:
    b = builder(scale)
    bundled = json.loads((BUNDLED_RECORDINGS / PROVIDER / "manifest.json").read_text())
    rec = ProviderRecording(root, PROVIDER, bundled["recorded_at"], dict(bundled.get("settings", {})))
    vms = b.vm_items()
    storage, bandwidth = b.storage_items(), b.bandwidth_items()
    pages = {"vm": _query(rec, b, "vm", VM_FILTER, vms),
             "storage": _query(rec, b, "storage", STORAGE_FILTER, storage),
             "bandwidth": _query(rec, b, "bandwidth", BANDWIDTH_FILTER, bandwidth)}
    rows = eviction_rows(b, vms)
    pages["resource-graph"] = _eviction(rec, rows)
    return {**rec.close(), "regions": len(b.REGIONS), "items": {"vm": len(vms), "storage": len(storage),
            "bandwidth": len(bandwidth), "eviction_rates": len(rows)}, "pages": pages}
