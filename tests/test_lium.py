"""Lium adapter: the public node feed through httpx against the replay server.

Hand-checked prices: the feed as gpuhunt recorded it on 2026-09-10 (adapters/recordings/lium/README.md):
8x H200 node f092246d 3.99 USD per GPU-hour (min 1 GPU, 5 free), 8x A100-SXM4-80GB node 6780e503 1.23
(whole node, 9.84 per node-hour), 8x RTX 5090 node ebdfdbe2 0.50 (whole node, 4.00), 1x RTX 5090 spot 0.50.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import lium
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "lium" / "nodes.json"


def feed() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def test_fetch_through_httpx_offers_each_node_at_its_smallest_rentable_unit(replay: Any) -> None:
    server = replay("lium")
    batch = lium.fetch(replay_context(server, "lium"))
    assert batch.counts() == {"offers": 7, "egress": 0, "storage": 0, "quarantined": 1}
    rows = {o.instance_type[:8]: o for o in batch.offers}
    h200 = rows["f092246d"]
    assert (h200.price_per_hour, h200.gpu_count, h200.gpu_model, h200.purchase_option) == (3.99, 1, "H200-SXM", "on_demand")
    assert (h200.available, h200.available_count, h200.region) == (True, 5, "us-ms")
    assert (h200.vcpus, h200.ram_gb, h200.local_disk_gb) == (24, 251.88, 446.88)  # an eighth of the node
    a100 = rows["6780e503"]
    assert (a100.price_per_hour, a100.price_per_gpu_hour, a100.gpu_count, a100.gpu_model) == (9.84, 1.23, 8, "A100-SXM4-80")
    assert (rows["ebdfdbe2"].price_per_hour, rows["ebdfdbe2"].gpu_count, rows["ebdfdbe2"].region) == (4.0, 8, "jp-13")
    spot = rows["45af0308"]
    assert (spot.price_per_hour, spot.purchase_option, spot.gpu_model) == (0.5, "interruptible", "RTX-5090")
    assert json.loads(spot.provider_data)["tier"] == "spot"
    [unknown] = batch.quarantined
    assert unknown.reason.startswith("gpu: unknown GPU name 'RTX 4090 D'")
    assert [r.path for _, r in server.requests] == ["/api/public/v1/nodes"]


def test_no_key_is_needed_and_rows_may_follow_the_market() -> None:
    assert lium.PROVIDER.secret_env_vars == () and lium.PROVIDER.facts.kind == "marketplace"
    assert lium.PROVIDER.anomaly.min_row_ratio == 0.2


def test_bad_nodes_are_quarantined_and_the_rest_still_load() -> None:
    doc = feed()
    nodes = doc["nodes"]
    nodes[0]["price_per_gpu_hour"] = -3.99
    nodes[1]["price_per_gpu_hour"] = math.nan
    nodes[2]["min_rentable_gpu_count"] = 4  # more than its one GPU
    del nodes[3]["gpu_count"]
    nodes.append(copy.deepcopy(nodes[4]))
    batch = lium.parse_nodes(doc)
    why = {q.source_ref[:8]: q.reason for q in batch.quarantined}
    assert "positive" in why["f092246d"] and "finite" in why["ebdfdbe2"]
    assert why["45af0308"].endswith("min_rentable_gpu_count 4 is outside 1..1")
    assert why["6780e503"] == "node 6780e503-6861-4dca-bdec-ca9dcf37e8d0: 'gpu_count'"
    assert why["0b3c9d61"].startswith("duplicate node 0b3c9d61")
    assert len(batch.offers) == 3


def test_a_changed_feed_is_schema_drift_and_an_empty_one_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'nodes' list"):
        lium.parse_nodes({"detail": "rate limited"})
    doc = feed()
    for node in doc["nodes"]:
        node["gpu_hour_price"] = node.pop("price_per_gpu_hour")
    with pytest.raises(SchemaDriftError, match="no node has a 'price_per_gpu_hour'"):
        lium.parse_nodes(doc)
    with pytest.raises(SourceError, match="the node feed returned no nodes"):
        lium.parse_nodes({"nodes": []})
