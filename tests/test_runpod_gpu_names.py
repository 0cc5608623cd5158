"""RunPod's GPU types beyond the bundled recording (bench/world/runpod.py: the runpod-sdk
`GpuTypeId` list) map to cards of warehouse/data/gpu_models.csv; a name that is no card stays
quarantined.

Memory and bandwidth checked by hand against NVIDIA's product pages each row cites (RTX 4000 SFF
Ada: 20 GB GDDR6 on a 160-bit bus at 16 Gbps, 320 GB/s; RTX 5000 Ada: 32 GB GDDR6, 576 GB/s).
"""

from __future__ import annotations

import copy

from bench.world import runpod as world_runpod
from gpuledger.adapters import runpod
from gpuledger.warehouse.gpus import models

# RunPod id -> (canonical model, memory GB, memory bandwidth TB/s)
CARDS = {
    "NVIDIA RTX A4500": ("RTX-A4500", 20, 0.64),
    "NVIDIA RTX A2000": ("RTX-A2000", 6, 0.288),
    "NVIDIA GeForce RTX 3070": ("RTX-3070", 8, 0.448),
    "NVIDIA GeForce RTX 3080": ("RTX-3080", 10, 0.76),
    "NVIDIA GeForce RTX 3080 Ti": ("RTX-3080-Ti", 12, 0.912),
    "NVIDIA GeForce RTX 3090 Ti": ("RTX-3090-Ti", 24, 1.008),
    "NVIDIA GeForce RTX 4070 Ti": ("RTX-4070-Ti", 12, 0.504),
    "NVIDIA GeForce RTX 4080 SUPER": ("RTX-4080-SUPER", 16, 0.736),
    "NVIDIA GeForce RTX 5080": ("RTX-5080", 16, 0.96),
    "NVIDIA RTX 4000 SFF Ada Generation": ("RTX-4000-SFF-Ada", 20, 0.32),
    "NVIDIA RTX 5000 Ada Generation": ("RTX-5000-Ada", 32, 0.576),
}


def test_every_world_gpu_type_is_a_known_card_and_a_made_up_one_is_quarantined() -> None:
    types = world_runpod.gpu_types("world")
    assert CARDS.keys() <= {t["id"] for t in types}
    made_up = copy.deepcopy(next(t for t in types if t["id"] == "NVIDIA GeForce RTX 4090"))
    made_up.update(id="NVIDIA GeForce RTX 9090", displayName="RTX 9090")
    batch = runpod.parse_gpu_types({"data": {"gpuTypes": types + [made_up]}})
    unknown = [q for q in batch.quarantined if "unknown GPU name" in q.reason]
    assert [q.source_ref for q in unknown] == ["NVIDIA GeForce RTX 9090"]
    got = {o.gpu_name_reported: o.gpu_model for o in batch.offers}
    for gpu_id, (model, memory_gb, bandwidth) in CARDS.items():
        assert got[gpu_id] == model, gpu_id
        facts = models()[model]
        assert (facts.memory_gb, facts.memory_bandwidth_tbs) == (memory_gb, bandwidth), model


def test_a_3080_with_12_gb_is_not_taken_for_the_10_gb_card() -> None:
    types = world_runpod.gpu_types("world")
    other = copy.deepcopy(next(t for t in types if t["id"] == "NVIDIA GeForce RTX 3080"))
    other["memoryInGb"] = 12
    batch = runpod.parse_gpu_types({"data": {"gpuTypes": [other]}})
    assert not batch.offers and all("unknown GPU name" in q.reason for q in batch.quarantined)
