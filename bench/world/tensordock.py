"""TensorDock at an estimated marketplace size: 36 locations in one `/api/v2/locations` answer.

The v2 locations answer lists every location with the GPUs its hosts offer, in one body, not
paged. No count of TensorDock's locations was found in a public source, and the bundled
recording's 12 locations are themselves made up (its README), so the world size is an
estimate: three times the bundled body, each bundled location kept and written again in two
more cities (other countries where TensorDock's country table has them), the GPUs and rates of
the original with the GPU prices raised 4 % and 8 % (made up).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

# (city, state/province, country) for the two copies of each bundled location, in its order.
MORE_CITIES = [
    (("Phoenix", "Arizona", "United States"), ("Mexico City", "CDMX", "Mexico")),
    (("Atlanta", "Georgia", "United States"), ("Sao Paulo", "Sao Paulo", "Brazil")),
    (("New York", "New York", "United States"), ("Santiago", "Santiago", "Chile")),
    (("Miami", "Florida", "United States"), ("Toronto", "Ontario", "Canada")),
    (("Denver", "Colorado", "United States"), ("Vancouver", "British Columbia", "Canada")),
    (("Calgary", "Alberta", "Canada"), ("Reykjavik", "Capital Region", "Iceland")),
    (("Quebec City", "Quebec", "Canada"), ("Dublin", "Leinster", "Ireland")),
    (("Paris", "Ile-de-France", "France"), ("Warsaw", "Masovia", "Poland")),
    (("Brussels", "Brussels", "Belgium"), ("Prague", "Prague", "Czechia")),
    (("Manchester", "England", "United Kingdom"), ("Madrid", "Madrid", "Spain")),
    (("Oslo", "Oslo", "Norway"), ("Helsinki", "Uusimaa", "Finland")),
    (("Singapore", "Singapore", "Singapore"), ("Sydney", "New South Wales", "Australia")),
]
PRICE_STEPS = (1.04, 1.08)
SMALL_LOCATIONS = 2


def locations(scale: str) -> dict[str, Any]:
    doc = json.loads((BUNDLED_RECORDINGS / "tensordock" / "locations.json").read_text())
    bundled = doc["data"]["locations"]
    if scale != "world":
        bundled = bundled[:SMALL_LOCATIONS]
    out = list(bundled)
    for index, (location, cities) in enumerate(zip(bundled, MORE_CITIES)):
        for copy_no, ((city, state, country), step) in enumerate(zip(cities, PRICE_STEPS), 1):
            moved = copy.deepcopy(location)
            moved.update(id=f"{location['id'][:-4]}{index + 1:02d}{copy_no:02d}", city=city, stateprovince=state,
                         country=country)
            for gpu in moved["gpus"]:
                gpu["price_per_hr"] = round(gpu["price_per_hr"] * step, 2)
            out.append(moved)
    doc["data"]["locations"] = out
    return doc


def generate(root: Path, scale: str) -> dict[str, Any]:
    bundled = json.loads((BUNDLED_RECORDINGS / "tensordock" / "manifest.json").read_text())
    exchange = bundled["exchanges"][0]
    rec = ProviderRecording(root, "tensordock", recorded_at="2026-12-02T00:00:00Z", settings=bundled["settings"])
    rec.add(exchange["host"], exchange["path"], json.dumps(locations(scale), indent=1),
            body_file=exchange["response"]["body_file"], match=exchange.get("match") or None,
            headers=exchange["response"]["headers"])
    return rec.close()
