"""The anomaly guard's thresholds: per source (ANOMALY_MIN_ROW_RATIO) and per purchase option.

A capacity crunch at Lambda is a real market state, not a broken scrape: every instance type
is still listed, in fewer regions. Its source threshold (0.2) lets it load where the default
(0.75) would refuse it; the same row drop at a catalogue source is refused, with the override
named: Azure losing 40 % of its offers without a word is held back. Through the real client and
the refresh's own fetch_source.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from pydantic import ValidationError

from gpuledger.adapters import lambdalabs, vastai
from gpuledger.adapters.contract import AnomalyThresholds
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer, Request
from gpuledger.flows.fetch import SourcePlan, fetch_source
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, utcnow
from tests.builders import load as merge
from tests.builders import scraped

REGIONS = [{"name": n, "description": n} for n in ("us-east-1", "us-west-1", "us-south-1", "europe-central-1")]


def lambda_answer(capacity: bool) -> bytes:
    """Lambda's answer with every GPU type in four regions, or sold out everywhere."""
    doc = json.loads((BUNDLED_RECORDINGS / "lambda" / "instance-types.json").read_text())
    for item in doc["data"].values():
        item["regions_with_capacity_available"] = REGIONS if capacity else []
    return json.dumps(doc).encode()


def lambda_fetch(capacity: bool) -> Any:
    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, lambda_answer(capacity)

    server = ReplayServer(BUNDLED_RECORDINGS, providers=["lambda"], hook=hook)
    server.start()
    try:
        return fetch_source(SourcePlan("lambda", "replay", server.endpoints(), http_attempts=1))
    finally:
        server.close()


def test_a_lambda_capacity_crunch_loads_under_its_own_threshold(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    full = lambda_fetch(capacity=True)
    assert full.min_row_ratio == lambdalabs.PROVIDER.anomaly.min_row_ratio == 0.2  # carried from the spec
    assert merge(db, [full], "r1")[0].ok
    crunch = lambda_fetch(capacity=False)
    rows_before, rows_now = full.count("offers"), crunch.count("offers")
    assert 0.2 <= rows_now / rows_before < 0.75  # 19 types sold out: one "global" row each, a quarter of before
    assert not any(crunch.table("offers").column("available").to_pylist())

    # With the default threshold the same market state would be refused...
    default = dataclasses.replace(crunch, min_row_ratio=None)
    db2 = tmp_path / "default.duckdb"
    assert merge(db2, [lambda_fetch(capacity=True)], "r1")[0].ok
    refused = merge(db2, [default], "r2")[0]
    assert refused.state == "failed"
    assert f"row count dropped from {rows_before} to {rows_now} (below 75% of the last good run)" in refused.error
    assert "--accept-anomaly lambda" in refused.error
    # ...while Lambda's own threshold loads it, and the warehouse says every type is sold out.
    report = merge(db, [crunch], "r2")[0]
    assert report.ok, report.error
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("select count(*), count(*) filter (where not available) from offers").fetchall() == \
        [(rows_now, rows_now)]
    con.close()


def test_source_thresholds_are_declared_and_checked() -> None:
    assert vastai.PROVIDER.anomaly.min_row_ratio == lambdalabs.PROVIDER.anomaly.min_row_ratio == 0.2
    assert AnomalyThresholds().min_row_ratio is None  # the warehouse's default applies
    for bad in (1.5, 0, -0.1):
        with pytest.raises(ValidationError, match="min_row_ratio"):
            AnomalyThresholds(min_row_ratio=bad)


def offers(provider: str, n: int, price: float, option: str, start: int = 0) -> Batch:
    b = Batch(provider)
    for i in range(start, start + n):
        assert b.offer(str(i), {}, region="us-east-1", zone="us-east-1a" if option == "spot" else "",
                       instance_type=f"g{i}.xlarge", purchase_option=option, gpu_model="L4",
                       gpu_name_reported="L4", gpu_vendor="NVIDIA", gpu_count=1, price_per_hour=price,
                       source_currency="USD", source_price_per_hour=price)
    return b


def both(od: int, od_price: float, spot: int, spot_price: float) -> Batch:
    b = offers("aws", od, od_price, "on_demand")
    b.offers += offers("aws", spot, spot_price, "spot", start=1000).offers
    return b


def load(db: Path, batch: Batch, policy: AnomalyPolicy | None = None) -> Any:
    return merge(db, [scraped("aws", "replay", utcnow(), utcnow(), batch=batch)], "r", policy)[0]


def test_one_purchase_option_collapsing_is_refused_even_when_the_total_looks_fine(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    assert load(db, both(40, 2.0, 100, 0.8)).ok
    # The price list came back empty; spot (from the EC2 API) still 100 rows: 71% of the total.
    r = load(db, both(0, 2.0, 100, 0.8))
    assert r.state == "failed" and "on_demand rows dropped from 40 to 0" in r.error
    # On-demand read ten times too high (x100, $200 for an L4, is past its plausible ceiling and each
    # record is quarantined): the overall median moves x1, on_demand's x10.
    r = load(db, both(40, 20.0, 100, 0.8))
    assert r.state == "failed" and "on_demand median price per GPU-hour moved from 2.0000 to 20.0000" in r.error
    assert "median price per GPU-hour moved from 0.8000" not in r.error  # the overall median did not move
    # A real market move is loaded with the override, and says so.
    r = load(db, both(40, 20.0, 100, 0.8), AnomalyPolicy(accept=frozenset({"aws"})))
    assert r.ok and r.notes[0].startswith("anomaly accepted by override: on_demand median price")
    # A small option (fewer than 10 rows) may come and go.
    db2 = tmp_path / "small.duckdb"
    assert load(db2, both(40, 2.0, 5, 0.8)).ok
    assert load(db2, both(40, 2.0, 0, 0.8)).ok


def azure_fetch(drop: bool) -> Any:
    """Azure's retail price pages, with two of every five price items gone when `drop`."""
    def hook(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes] | None:
        if not drop or ex is None or not req.path.endswith("/retail/prices"):
            return None
        doc = json.loads(ex.body())
        doc["Items"] = [item for i, item in enumerate(doc["Items"]) if i % 5 >= 2]
        return ex.status, dict(ex.headers), json.dumps(doc).encode()

    server = ReplayServer(BUNDLED_RECORDINGS, providers=["azure"], hook=hook)
    server.start()
    try:
        return fetch_source(SourcePlan("azure", "replay", server.endpoints(), dict(server.settings["azure"]),
                                       http_attempts=1))
    finally:
        server.close()


def test_a_silent_drop_of_forty_percent_of_a_catalogues_offers_is_held_back(tmp_path: Path) -> None:
    db = tmp_path / "ledger.duckdb"
    full = azure_fetch(drop=False)
    assert full.min_row_ratio is None and merge(db, [full], "r1")[0].ok  # Azure declares no share of its own
    thinner = azure_fetch(drop=True)
    before, now = full.count("offers"), thinner.count("offers")
    assert 0.5 < now / before < 0.7 and thinner.state == "ok"  # a scrape that says nothing is wrong
    refused = merge(db, [thinner], "r2")[0]
    assert refused.state == "failed"
    assert f"row count dropped from {before} to {now} (below 75% of the last good run)" in refused.error
    assert "--accept-anomaly azure" in refused.error
    accepted = merge(db, [azure_fetch(drop=True)], "r3", AnomalyPolicy(accept=frozenset({"azure"})))[0]
    assert accepted.ok and any(n.startswith("anomaly accepted by override: row count dropped") for n in accepted.notes)
