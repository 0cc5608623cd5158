"""Storage billed as providers bill volumes: the published minimum size and size tiers of each
class (warehouse/data/storage_volume_sizes.csv), on a small warehouse built with real merges.

The hand-checked sizes come from the providers' pages the CSV cites: Azure maps a managed
disk's provisioned size, rounded up, to the nearest offered size (P4/E4 = 32 GiB, E15 =
256 GiB, "a 200 GiB Standard SSD maps to E15"); GCP's balanced persistent disk is at least
10 GB; Vast.ai publishes no minimum for a host's disk. Storage prices here are round figures
chosen for the arithmetic, not quotes.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.memory import TrainingSetup, estimate
from gpuledger.warehouse.recommender.recommend import Candidate, RecommendRequest, recommend
from gpuledger.warehouse.recommender.volumes import billed_gb_for, billed_volume_gb, volume_sizings
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import load_outcome, open_reader, open_writer
from tests.builders import scraped

T0 = datetime(2026, 11, 2, 3, 0, tzinfo=timezone.utc)
MODEL = "llama-3.2-1b"
BASE_GB = estimate(TrainingSetup("qlora", model=MODEL)).base_weights_gb
AZURE_TIERS = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32767)


def l4(b: Batch, region: str, price: float) -> None:
    assert b.offer(f"{region}/l4", {}, region=region, instance_type="l4.1", purchase_option="on_demand",
                   gpu_model="L4", gpu_name_reported="L4", gpu_vendor="NVIDIA", gpu_count=1, gpu_memory_gb=22.35,
                   price_per_hour=price, source_currency="USD", source_price_per_hour=price,
                   billing_granularity_s=1, minimum_charge_s=60), b.quarantined


def storage(b: Batch, region: str, cls: str, usd: float) -> None:
    assert b.add("storage", f"{region}/{cls}", {}, region=region, storage_class=cls, usd_per_gb_month=usd,
                 source_currency="USD", source_usd_per_gb_month=usd), b.quarantined


def azure() -> Batch:
    b = Batch("azure")
    l4(b, "eastus", 1.0)
    storage(b, "eastus", "premium-ssd-lrs", 0.15)
    storage(b, "eastus", "standard-ssd-lrs", 0.075)
    l4(b, "westus", 1.0)  # a tier-billed class dearer than a per-GiB one only for the sizes it bills
    storage(b, "westus", "standard-ssd-lrs", 0.075)
    storage(b, "westus", "premium-ssd-v2-lrs", 0.1)
    return b


def gcp() -> Batch:
    b = Batch("gcp")
    l4(b, "us-central1", 1.0)
    storage(b, "us-central1", "pd-balanced", 0.1)
    storage(b, "us-central1", "pd-standard", 0.04)  # cold HDD: never the working volume
    return b


def vastai() -> Batch:
    b = Batch("vastai")
    l4(b, "US", 0.5)
    storage(b, "US", "host-disk", 0.2)
    return b


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    db: Path = tmp_path_factory.mktemp("volumes") / "ledger.duckdb"
    w = open_writer(db)
    for batch in (azure(), gcp(), vastai()):
        outcome = scraped(batch.provider, "replay", T0 - timedelta(minutes=5), T0, batch=batch)
        assert load_outcome(w, outcome, f"refresh-{batch.provider}", now=T0).state == "ok"
    w.close()
    c = open_reader(db)
    install_macros(c)
    yield c
    c.close()


def ask(con: duckdb.DuckDBPyConnection, working_set_gb: float) -> dict[tuple[str, str], Candidate]:
    """Candidates by (provider, region) for a 6-hour QLoRA run whose working set is working_set_gb."""
    request = RecommendRequest(method="qlora", model=MODEL, hours=6, checkpoints_kept=0,
                               dataset_gb=working_set_gb - BASE_GB, as_of=T0 + timedelta(hours=1), top=100,
                               per_instance=False)
    return {(c.provider, c.region): c for c in recommend(con, request).candidates}


def test_a_20_gb_job_on_an_azure_premium_disk_is_billed_at_the_32_gib_tier(con: duckdb.DuckDBPyConnection) -> None:
    c = ask(con, 20.0)[("azure", "eastus")]
    assert c.cost.storage_gb == pytest.approx(20.0)
    # Premium SSD at $0.15 bills P4 = 32 GiB (4.80 a month); Standard SSD at $0.075 bills E4 = 32 GiB (2.40).
    assert (c.cost.storage_class, c.cost.storage_billed_gb, c.cost.storage_size_known) == \
        ("standard-ssd-lrs", 32.0, True)
    assert c.cost.storage_usd == pytest.approx(32 * 0.075 * 6 / 730)
    assert any("32 GiB standard-ssd-lrs volume" in f and "needs 20.0 GiB" in f for f in c.flags)


def test_azure_s_own_example_200_gib_standard_ssd_is_billed_as_e15(con: duckdb.DuckDBPyConnection) -> None:
    assert ask(con, 200.0)[("azure", "eastus")].cost.storage_billed_gb == 256.0
    assert billed_volume_gb(33, 4, 0, AZURE_TIERS) == 64  # PSRule's "33 GiB is billed as 64 GiB"


def test_the_class_is_chosen_for_the_size_billed_not_the_price_per_gib(con: duckdb.DuckDBPyConnection) -> None:
    # 20 GiB: Standard SSD bills 32 x 0.075 = 2.40 a month, Premium SSD v2 (per GiB) 20 x 0.10 = 2.00.
    small = ask(con, 20.0)[("azure", "westus")].cost
    assert (small.storage_class, small.storage_billed_gb) == ("premium-ssd-v2-lrs", 20.0)
    # 30 GiB: 32 x 0.075 = 2.40 against 30 x 0.10 = 3.00: the tiered disk wins.
    big = ask(con, 30.0)[("azure", "westus")].cost
    assert (big.storage_class, big.storage_billed_gb) == ("standard-ssd-lrs", 32.0)
    assert big.storage_usd == pytest.approx(32 * 0.075 * 6 / 730)


def test_a_5_gb_job_on_gcp_is_billed_the_10_gb_minimum_of_a_balanced_disk(con: duckdb.DuckDBPyConnection) -> None:
    c = ask(con, 5.0)[("gcp", "us-central1")]
    assert (c.cost.storage_class, c.cost.storage_billed_gb) == ("pd-balanced", 10.0)
    assert c.cost.storage_usd == pytest.approx(10 * 0.1 * 6 / 730)
    assert any("10 GiB pd-balanced volume" in f for f in c.flags)
    # 12.3 GiB: above the minimum, whole GiB (the 1 GB increment), no flag for the rounding.
    c = ask(con, 12.3)[("gcp", "us-central1")]
    assert c.cost.storage_billed_gb == 13.0
    assert not any("volume" in f for f in c.flags)


def test_a_class_without_a_published_minimum_bills_the_size_needed_and_says_so(con: duckdb.DuckDBPyConnection) -> None:
    c = ask(con, 5.0)[("vastai", "US")]
    assert ("vastai", "host-disk") not in volume_sizings()
    assert (c.cost.storage_class, c.cost.storage_billed_gb, c.cost.storage_size_known) == \
        ("host-disk", pytest.approx(5.0), False)
    assert c.cost.storage_usd == pytest.approx(5.0 * 0.2 * 6 / 730)
    assert any(f.startswith("no published minimum volume size for vastai host-disk") for f in c.flags)


def test_the_sql_macro_bills_as_the_python_reference(con: duckdb.DuckDBPyConnection) -> None:
    cases = [(20.0, 4, 0, AZURE_TIERS), (5.0, 10, 1, ()), (12.3, 10, 1, ()), (0.4, 1, 1, ()), (2.3, 0, 0, ()),
             (40000.0, 4, 0, AZURE_TIERS), (7.5, None, None, None)]
    for need, low, inc, tiers in cases:
        got = con.execute("select billed_volume_gb(?, ?, ?, ?::double[])",
                          [need, low, inc, list(tiers) if tiers is not None else None]).fetchone()[0]
        assert got == billed_volume_gb(need, low, inc, tiers), (need, low, inc, tiers)
    assert billed_volume_gb(40000.0, 4, 0, AZURE_TIERS) == 2 * 32767  # past P80: two of the largest disks
    assert billed_gb_for("runpod", "network-volume", 0.4) == 1  # RunPod: 1-4000 GB
    assert billed_gb_for("lambda", "filesystem", 2.3) == 2.3  # Lambda: per GiB used


def test_every_sizing_row_cites_a_source_and_a_date(con: duckdb.DuckDBPyConnection) -> None:
    for (provider, cls), s in volume_sizings().items():
        assert s.source.startswith("https://"), (provider, cls)
        assert datetime.strptime(s.checked, "%Y-%m-%d")
        assert s.min_gb >= 0 and s.increment_gb >= 0 and list(s.tiers_gb) == sorted(s.tiers_gb)
