"""The Python API (`gpuledger.query`) and `gpuledger show-gpus`, over a warehouse of two providers
loaded from their bundled recordings by the refresh's own fetch and merge (tests/builders.py).

Prices checked by hand against the recordings: Lambda's gpu_8x_h100_sxm5 is 3192 cents an hour
(3.99 USD per GPU-hour), RunPod's "NVIDIA H100 80GB HBM3" has communityPrice 2.69, securePrice
3.99, communitySpotPrice 1.5 and secureSpotPrice 1.75 (adapters/recordings/{lambda,runpod}/).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import gpuledger
from gpuledger.flows.cli import app
from gpuledger.warehouse.offer_filter import FilterError
from gpuledger.warehouse.store import WarehouseError
from tests.builders import replayed_warehouse


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("api")
    db = folder / "gpuledger.duckdb"  # the default name, for the one-liner run in this folder
    replayed_warehouse(db, ["lambda", "runpod"])
    return db


def test_query_filters_and_orders_by_price(warehouse: Path) -> None:
    offers = gpuledger.query(gpu="H100-SXM", min_vram_gb=80, spot=False, db=warehouse)
    assert {o.purchase_option for o in offers} == {"on_demand"}
    assert {o.gpu_model for o in offers} == {"H100-SXM"}
    cheapest = offers[0]
    assert (cheapest.provider, cheapest.region, cheapest.price_per_gpu_hour) == ("runpod", "community-cloud", 2.69)
    lambda_8x = [o for o in offers if o.instance_type == "gpu_8x_h100_sxm5"]
    assert {o.price_per_hour for o in lambda_8x} == {31.92}
    assert {o.price_per_gpu_hour for o in lambda_8x} == {3.99}
    prices = [o.price_per_gpu_hour for o in offers]
    assert prices == sorted(prices)


def test_query_spot_family_provider_and_price_filters(warehouse: Path) -> None:
    spot = gpuledger.query(gpu="h100-sxm", spot=True, db=warehouse)
    assert sorted((o.region, o.purchase_option, o.price_per_gpu_hour) for o in spot) == [
        ("community-cloud", "interruptible", 1.5), ("secure-cloud", "interruptible", 1.75)]
    family = gpuledger.query(gpu="H100", providers=["lambda"], db=warehouse)
    assert family and {o.provider for o in family} == {"lambda"}
    assert {o.gpu_model for o in family} >= {"H100-SXM", "H100-PCIe"}
    assert gpuledger.query(gpu="H100-SXM", max_price=2.0, db=warehouse) == spot
    assert gpuledger.query(gpu="H100-SXM", regions=["us-south-*"], spot=False, db=warehouse)
    assert {o.region for o in gpuledger.query(gpu="H100-SXM", regions=["us-south-*"], db=warehouse)} == {"us-south-1"}


def test_query_frames(warehouse: Path) -> None:
    offers = gpuledger.query(gpu="H100-SXM", spot=False, db=warehouse)
    df = offers.df()
    assert len(df) == len(offers) and df["price_per_gpu_hour"].iloc[0] == 2.69
    assert "content_hash" not in df.columns and "first_seen" in df.columns
    pl = offers.pl()
    assert pl.height == len(offers) and pl["provider"][0] == "runpod"


def test_query_reads_read_only_and_says_what_is_wrong(warehouse: Path, tmp_path: Path) -> None:
    before = warehouse.stat().st_mtime_ns
    gpuledger.query(db=warehouse)
    assert warehouse.stat().st_mtime_ns == before
    with pytest.raises(WarehouseError, match="no warehouse at"):
        gpuledger.query(db=tmp_path / "missing.duckdb")
    with pytest.raises(FilterError, match="min_vram_gb"):
        gpuledger.query(min_vram_gb=-1, db=warehouse)
    with pytest.raises(FilterError, match="lists of names"):
        gpuledger.query(providers="aws", db=warehouse)


def test_done_means_one_liner_uses_the_default_warehouse(warehouse: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPULEDGER_DB"}
    line = "import gpuledger; print(gpuledger.query(gpu='H100-SXM', spot=False)[:3])"
    done = subprocess.run([sys.executable, "-c", line], cwd=warehouse.parent, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[Offer(provider='runpod', instance_type='1x NVIDIA H100 80GB HBM3', "
                                  "region='community-cloud', zone='', purchase_option='on_demand', "
                                  "gpu_model='H100-SXM', gpu_count=1.0, price_per_gpu_hour=2.69, ...)")
    assert done.stdout.count("Offer(") == 3


def test_show_gpus_one_line_per_model(warehouse: Path) -> None:
    result = CliRunner().invoke(app, ["show-gpus", "--db", str(warehouse), "--format", "csv"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    models = [r["gpu_model"] for r in rows]
    assert len(models) == len(set(models))
    h100 = next(r for r in rows if r["gpu_model"] == "H100-SXM")
    assert (h100["vram_gb"], h100["on_demand_usd"], h100["interruptible_usd"], h100["spot_usd"]) == \
        ("80.0", "2.69", "1.5", "")
    assert h100["providers"] == "lambda,runpod"
    assert int(h100["offers"]) == len(gpuledger.query(gpu="H100-SXM", db=warehouse))


def test_show_gpus_filters_are_the_api_filters(warehouse: Path) -> None:
    result = CliRunner().invoke(app, ["show-gpus", "--db", str(warehouse), "--on-demand", "-p", "lambda",
                                      "--min-vram", "80", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    offers = gpuledger.query(spot=False, providers=["lambda"], min_vram_gb=80, db=warehouse)
    assert {r["gpu_model"] for r in rows} == {o.gpu_model for o in offers}
    assert all(r["interruptible_usd"] is None and r["providers"] == "lambda" for r in rows)
    h100 = next(r for r in rows if r["gpu_model"] == "H100-SXM")
    assert h100["on_demand_usd"] == 3.99


def test_show_gpus_bad_input_is_one_line(warehouse: Path, tmp_path: Path) -> None:
    bad = CliRunner().invoke(app, ["show-gpus", "--db", str(warehouse), "--format", "xml"])
    said = " ".join(bad.output.replace("│", " ").split())
    assert bad.exit_code == 2 and "Invalid value for '--format' / '-f'" in said and "'xml' is not one of 'table', 'csv', 'json'" \
        in said, said
    missing = CliRunner().invoke(app, ["show-gpus", "--db", str(tmp_path / "none.duckdb")])
    assert missing.exit_code == 2 and "no warehouse at" in missing.output and "Traceback" not in missing.output
