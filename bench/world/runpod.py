"""RunPod at catalogue size: every GPU type of RunPod's list in the `gpuTypes` answers.

The adapter asks two GraphQL queries (prices, then stock) whose `gpuTypes` is not paged and prices
each type per cloud (Secure, Community), not per data center, so an answer's size is the number of
GPU types.
The 38 variants of the runpod-sdk crate's `GpuTypeId`
(https://docs.rs/runpod-sdk/0.2.0/runpod_sdk/model/enum.GpuTypeId.html; the ids as spelt in
https://docs.runpod.io/references/gpu-types) plus the three the bundled recording has beyond them
(B300, both RTX PRO 6000 editions) make 41 types; the bundled recording holds 27. The world answer is the
bundled one plus the 14 missing types, each written like the bundled type of the nearest card
(stock blocks and clouds copied, prices scaled by the factor given below: made up).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpuledger.adapters import runpod
from gpuledger.adapters.replay import BUNDLED_RECORDINGS

from bench.world.writer import ProviderRecording

# (id, displayName, memoryInGb, the bundled type it is modelled on, price factor)
MISSING_TYPES = [
    ("NVIDIA RTX A4500", "RTX A4500", 20, "NVIDIA RTX A5000", 0.9),
    ("NVIDIA RTX A2000", "RTX A2000", 6, "NVIDIA RTX A4000", 0.6),
    ("NVIDIA GeForce RTX 3070", "RTX 3070", 8, "NVIDIA GeForce RTX 3090", 0.5),
    ("NVIDIA GeForce RTX 3080", "RTX 3080", 10, "NVIDIA GeForce RTX 3090", 0.6),
    ("NVIDIA GeForce RTX 3080 Ti", "RTX 3080 Ti", 12, "NVIDIA GeForce RTX 3090", 0.7),
    ("NVIDIA GeForce RTX 3090 Ti", "RTX 3090 Ti", 24, "NVIDIA GeForce RTX 3090", 1.1),
    ("NVIDIA GeForce RTX 4070 Ti", "RTX 4070 Ti", 12, "NVIDIA GeForce RTX 4090", 0.5),
    ("NVIDIA GeForce RTX 4080", "RTX 4080", 16, "NVIDIA GeForce RTX 4090", 0.7),
    ("NVIDIA GeForce RTX 4080 SUPER", "RTX 4080 SUPER", 16, "NVIDIA GeForce RTX 4090", 0.75),
    ("NVIDIA GeForce RTX 5080", "RTX 5080", 16, "NVIDIA GeForce RTX 5090", 0.7),
    ("NVIDIA RTX 4000 SFF Ada Generation", "RTX 4000 Ada SFF", 20, "NVIDIA RTX 4000 Ada Generation", 0.95),
    ("NVIDIA RTX 5000 Ada Generation", "RTX 5000 Ada", 32, "NVIDIA RTX 6000 Ada Generation", 0.75),
    ("Tesla V100-PCIE-16GB", "Tesla V100", 16, "Tesla V100-SXM2-16GB", 0.9),
    ("Tesla V100-SXM2-32GB", "V100 SXM2 32GB", 32, "Tesla V100-SXM2-16GB", 1.3),
]
PRICE_FIELDS = ("securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice")
STOCK_PRICE_FIELDS = ("minimumBidPrice", "uninterruptablePrice")


def scaled(template: dict[str, Any], gpu_id: str, display: str, memory: int, factor: float) -> dict[str, Any]:
    out = copy.deepcopy(template)
    out.update(id=gpu_id, displayName=display, memoryInGb=memory)
    for field in PRICE_FIELDS:
        if out.get(field):
            out[field] = round(out[field] * factor, 2)
    for stock in ("secureStock", "communityStock"):
        for field in STOCK_PRICE_FIELDS:
            if (out.get(stock) or {}).get(field):
                out[stock][field] = round(out[stock][field] * factor, 2)
    return out


def gpu_types(scale: str) -> list[dict[str, Any]]:
    """Every type with its prices and its stock blocks (as the adapter joins the two answers)."""
    bundled = json.loads((BUNDLED_RECORDINGS / "runpod" / "graphql-gpuTypes.json").read_text())["data"]["gpuTypes"]
    stock = runpod.parse_stock(json.loads((BUNDLED_RECORDINGS / "runpod" / "graphql-gpuStock.json").read_text()))
    bundled = [{**t, **stock[t["id"]]} for t in bundled]
    by_id = {t["id"]: t for t in bundled}
    missing = MISSING_TYPES if scale == "world" else MISSING_TYPES[:3]
    added = [scaled(by_id[model], gpu_id, display, memory, factor)
             for gpu_id, display, memory, model, factor in missing]
    return sorted(bundled + added, key=lambda t: t["id"])


def generate(root: Path, scale: str) -> dict[str, Any]:
    rec = ProviderRecording(root, runpod.NAME, recorded_at="2026-12-02T00:00:00Z")
    types = gpu_types(scale)
    aliases = [f"{cloud}Stock" for cloud in runpod.CLOUDS.values()]
    prices = [{k: v for k, v in t.items() if k not in aliases} for t in types]
    stock = [{"id": t["id"], **{a: t[a] for a in aliases}} for t in types]
    for operation, body_file, answer in ((runpod.OPERATION, "graphql-gpuTypes.json", prices),
                                         (runpod.STOCK_OPERATION, "graphql-gpuStock.json", stock)):
        rec.add(runpod.API_HOST, runpod.GRAPHQL_PATH, json.dumps({"data": {"gpuTypes": answer}}, indent=1),
                method="POST", body_file=body_file, match={"json": {"operationName": operation}},
                headers={"Content-Type": "application/json"})
    return rec.close()
