"""Vast.ai at marketplace size: 10,000 search listings, keyset-paged as the adapter pages them.

The listings are built by the bundled recording's own generator (adapters/recordings/vastai/
_generate_offers.py): its GPU table (names, nvidia-smi memory, price ranges, GPU counts,
weights), its places and its `make_offer` field set. Two passes make the offer count follow from
the parameters alone: the first lists every cell (GPU entry x GPU count x country) once, so
every group the adapter forms exists; the second draws the rest by the table's weights, so the
market keeps its shape (many RTX 4090s, few B200s) without adding a group.

The walk is the adapter's: `POST /api/v0/bundles/` ordered by id, `limit` = the live page size,
each next page `id > <last id>`, an empty page ending it.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path
from typing import Any

from gpuledger.adapters import vastai
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.warehouse.settings import Settings

from bench.world.writer import ProviderRecording

SEED = 20261202
FIRST_ID = 20_000_000
# Listings, page size (the adapter's live default at world scale), countries (None: all).
SCALES: dict[str, tuple[int, int, tuple[str, ...] | None]] = {
    "world": (10_000, Settings.model_fields["vastai_page_size"].default, None),
    "small": (400, 100, ("US", "DE")),
}


def bundled_generator() -> Any:
    """The bundled recording's generator module (tables and `make_offer`), loaded from its file."""
    path = BUNDLED_RECORDINGS / "vastai" / "_generate_offers.py"
    spec = importlib.util.spec_from_file_location("vastai_bundled_generator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def places_by_country(places: list[tuple[str | None, int]], countries: tuple[str, ...] | None
                      ) -> dict[str, list[tuple[str | None, int]]]:
    out: dict[str, list[tuple[str | None, int]]] = {}
    for place, weight in places:
        country = vastai.country_code(place)
        if countries is None or country in countries:
            out.setdefault(country, []).append((place, weight))
    return out


def seat(gen: Any, rng: random.Random, offer: dict[str, Any], gpu: tuple, num_gpus: int,
         place: str | None) -> dict[str, Any]:
    """Put a generated listing on a given GPU entry, GPU count and place, keeping its field set:
    the GPU-dependent fields and the prices are recomputed from the GPU table as make_offer does."""
    name, ram, (lo, median, hi), _counts, _w, cc, tflops, bw = gpu
    host_gpus = rng.choice([g for g in (1, 2, 4, 8, 10) if g >= num_gpus])
    frac = num_gpus / host_gpus
    per_gpu = gen.around_median(rng, lo, median, hi) * (0.97 if num_gpus >= 4 else 1.0)
    dph_base = round(per_gpu * num_gpus, 4)
    dph_total = round(dph_base + offer["storage_total_cost"], 6)
    offer.update({
        "gpu_name": name, "num_gpus": num_gpus, "gpu_ram": ram, "gpu_total_ram": ram * num_gpus,
        "gpu_frac": round(frac, 4), "gpu_mem_bw": float(bw), "compute_cap": cc,
        "total_flops": round(tflops * num_gpus, 2),
        "cpu_cores_effective": round(offer["cpu_cores"] * frac, 1),
        "bw_nvlink": offer["bw_nvlink"] if num_gpus > 1 else 0.0,
        "dph_base": dph_base, "dph_total": dph_total, "min_bid": round(dph_total * rng.uniform(0.35, 0.75), 4),
        "dlperf": round(tflops * num_gpus * rng.uniform(0.8, 1.2), 2),
        "dlperf_per_dphtotal": round(tflops * num_gpus / dph_total, 2),
        "flops_per_dphtotal": round(tflops * num_gpus / dph_total, 2),
        "geolocation": place, "geolocode": offer["geolocode"] if place else None,
    })
    if place and offer["geolocode"] is None:
        offer["geolocode"] = rng.randint(100_000, 9_999_999)
    return offer


def listings(scale: str) -> list[dict[str, Any]]:
    """Every listing of the scale, ids ascending (the order the search returns with order id asc)."""
    count, _page, countries = SCALES[scale]
    gen = bundled_generator()
    rng = random.Random(SEED)
    by_country = places_by_country(gen.PLACES, countries)
    cells = [(gpu, n, country) for gpu in gen.GPUS for n in sorted(set(gpu[3])) for country in sorted(by_country)]
    if count < len(cells):
        raise ValueError(f"vastai world: {count} listings cannot cover {len(cells)} cells")
    all_places = [p for country in sorted(by_country) for p in by_country[country]]
    gpu_weights = [g[4] for g in gen.GPUS]
    offers, oid = [], FIRST_ID
    for i in range(count):
        oid += rng.randint(1, 400)
        offer = gen.make_offer(rng, oid)
        if i < len(cells):
            gpu, n, country = cells[i]
            place = rng.choices(by_country[country], weights=[w for _, w in by_country[country]])[0][0]
        else:
            gpu = rng.choices(gen.GPUS, weights=gpu_weights)[0]
            n = rng.choice(gpu[3])
            place = rng.choices(all_places, weights=[w for _, w in all_places])[0][0]
        offers.append(seat(gen, rng, offer, gpu, n, place))
    # The marketplace's bad listings, on second-pass offers so no group loses its only listing.
    offers[len(cells) + 17].update(dph_total=0.0, dph_base=0.0, min_bid=0.0)
    offers[len(cells) + 23]["min_bid"] = -0.01
    offers[len(cells) + 31].update(dph_total=9999.0, dph_base=9999.0)
    return offers


def generate(root: Path, scale: str) -> dict[str, Any]:
    _count, page_size, _countries = SCALES[scale]
    offers = listings(scale)
    rec = ProviderRecording(root, vastai.NAME, recorded_at="2026-12-02T00:00:00Z",
                            settings={"vastai_page_size": page_size})
    pages = [offers[i:i + page_size] for i in range(0, len(offers), page_size)] + [[]]
    cursor = None
    for n, page in enumerate(pages, 1):
        match = {"json": {"type": "on-demand", "order": [["id", "asc"]], "limit": page_size,
                          "id": {"gt": cursor} if cursor is not None else None}}
        rec.add(vastai.API_HOST, vastai.BUNDLES_PATH, json.dumps({"offers": page}), method="POST",
                body_file=f"search/page-{n}.json", match=match, headers={"Content-Type": "application/json"},
                compress=True)
        if page:
            cursor = page[-1]["id"]
    return rec.close()
