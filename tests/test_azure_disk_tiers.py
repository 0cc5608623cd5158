"""An Azure managed disk is billed as the size tier that holds it, at that tier's own monthly
price: the adapter records every tier of the Retail Prices API as a class of its own and the
recommender costs a volume on the tier that holds it.

Checked by hand against adapters/recordings/azure (README "Disks"): in eastus a P10 (128 GiB)
costs 19.71 USD a month, a P15 (256 GiB) 38.02, a P30 (1,024 GiB) 135.17; Azure's billing page
(learn.microsoft.com disks-types, "Billing") maps a 100 GiB disk to P10.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from gpuledger.adapters import azure
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.memory import TrainingSetup, estimate
from gpuledger.warehouse.recommender.recommend import RecommendRequest, recommend
from gpuledger.warehouse.recommender.volumes import holds
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import load_outcome, open_reader, open_writer, utcnow
from tests.builders import scraped
from tests.conftest import replay_context

MODEL = "llama-3.2-1b"
BASE_GB = estimate(TrainingSetup("qlora", model=MODEL)).base_weights_gb
HOURS = 6


@pytest.fixture(scope="module")
def eastus() -> Batch:
    """Azure's eastus offers and disks, fetched by the real client from the bundled recording."""
    with ReplayServer(BUNDLED_RECORDINGS, providers=["azure"]) as server:
        return azure.fetch(replay_context(server, "azure", settings={"azure_regions": "eastus"}))


@pytest.fixture(scope="module")
def premium_only(eastus: Batch, tmp_path_factory: pytest.TempPathFactory):
    """A warehouse holding those offers and only the Premium SSD tiers (so the recommender's
    cheapest class in eastus is a Premium SSD tier)."""
    batch = Batch("azure")
    batch.offers = list(eastus.offers)
    batch.storage = [s for s in eastus.storage if s.storage_class.startswith("premium-ssd-lrs-")]
    db: Path = tmp_path_factory.mktemp("tiers") / "ledger.duckdb"
    now = utcnow()
    w = open_writer(db)
    assert load_outcome(w, scraped("azure", "replay", now, now, batch=batch), "refresh-tiers", now=now).ok
    w.close()
    con = open_reader(db)
    install_macros(con)
    yield con, now
    con.close()


def test_every_premium_tier_has_its_own_price(eastus: Batch) -> None:
    got = {s.storage_class: s.usd_per_gb_month for s in eastus.storage}
    assert got["premium-ssd-lrs-p10"] == pytest.approx(19.71 / 128)
    assert got["premium-ssd-lrs-p15"] == pytest.approx(38.02 / 256)
    assert got["premium-ssd-lrs-p30"] == pytest.approx(135.17 / 1024)
    assert len([c for c in got if c.startswith("premium-ssd-lrs-")]) == 14  # P1 ... P80


def test_a_100_gib_premium_ssd_is_billed_as_p10_at_the_p10_price(premium_only) -> None:
    con, now = premium_only
    request = RecommendRequest(method="qlora", model=MODEL, hours=HOURS, checkpoints_kept=0,
                               dataset_gb=100.0 - BASE_GB, as_of=now + timedelta(minutes=5), top=5,
                               per_instance=False)
    (c, *_) = recommend(con, request).candidates
    assert c.region == "eastus" and c.cost.storage_gb == pytest.approx(100.0)
    assert (c.cost.storage_class, c.cost.storage_billed_gb) == ("premium-ssd-lrs-p10", 128.0)
    assert c.cost.storage_billed_gb * c.cost.storage_usd_per_gb_month == pytest.approx(19.71)  # one P10 a month
    assert c.cost.storage_usd == pytest.approx(19.71 * HOURS / 730)


def test_a_tier_holds_only_the_volumes_up_to_its_size() -> None:
    assert holds("azure", "premium-ssd-lrs-p10", 128) and not holds("azure", "premium-ssd-lrs-p10", 129)
    assert holds("azure", "premium-ssd-lrs-p80", 40000)  # past P80: several of the largest disks
    assert holds("gcp", "pd-balanced", 5000)

