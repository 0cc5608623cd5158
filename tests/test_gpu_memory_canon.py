"""The memory a card is assumed to have when its source states none, on a replayed warehouse.

CUDO, Hot Aisle and Nebius state no GPU memory (their recordings name the card only), so their offers
carry the canonical model's marketed size; Novita and DigitalOcean state it. NVIDIA's and AMD's HBM
sizes are GiB: AWS reports the H100 and A100 80GB as 81920 MiB = 80 GiB and the H200 as 144384 MiB
= 141 GiB; DigitalOcean's API gives the MI300X's 192 with the unit "gib". GDDR sizes are decimal GB:
AWS reports the L40S's 48 GB as 45776 MiB = 48e9 / 2^30 = 44.70 GiB. The B300's 288 GB are not GiB
either: Verda reports 268 for it, 288e9 / 2^30 = 268.22.

before: an unreported H100 at CUDO was read as 80e9 / 2^30 = 74.51 GiB (70.8 usable) while Novita's
reported H100 had 80, so for a job needing 72.6 GiB CUDO's H100 vanished from the ranking.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.recommend import RecommendRequest, recommend
from gpuledger.warehouse.store import open_reader
from tests.builders import replayed_warehouse

GIB_PER_GB = 1e9 / 2**30


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    db: Path = tmp_path_factory.mktemp("memory_canon") / "ledger.duckdb"
    replayed_warehouse(db, ["cudo", "novita", "hotaisle", "digitalocean", "nebius"])
    c = open_reader(db)
    install_macros(c)
    yield c
    c.close()


def memory(con: duckdb.DuckDBPyConnection, provider: str, gpu_model: str) -> set[tuple[float, str]]:
    rows = con.execute("select distinct round(memory_gb_per_gpu, 2), memory_source from offer_facts() "
                       "where provider = ? and gpu_model = ? and gpu_count >= 1", [provider, gpu_model]).fetchall()
    assert rows, (provider, gpu_model)
    return set(rows)


def test_an_unreported_hbm_card_has_its_marketed_gib_as_a_reporting_source_says(con) -> None:
    assert memory(con, "novita", "H100-SXM") == {(80.0, "reported")}
    assert memory(con, "cudo", "H100-SXM") == {(80.0, "nominal")}  # before: 74.51
    assert memory(con, "nebius", "H100-SXM") == {(80.0, "nominal")}
    assert memory(con, "cudo", "A100-PCIe-80") == {(80.0, "nominal")}  # before: 74.51
    assert memory(con, "nebius", "H200-SXM") == {(141.0, "nominal")}  # before: 131.32
    assert memory(con, "digitalocean", "MI300X") == {(192.0, "reported")}
    assert memory(con, "hotaisle", "MI300X") == {(192.0, "nominal")}  # before: 178.81


def test_gddr_cards_and_the_b300_stay_at_their_decimal_size(con) -> None:
    assert memory(con, "cudo", "L40S") == {(round(48 * GIB_PER_GB, 2), "nominal")}  # 44.70, as AWS's 45776 MiB
    assert memory(con, "nebius", "B300") == {(round(288 * GIB_PER_GB, 2), "nominal")}  # 268.22, Verda's 268


def test_cudo_s_h100_fits_the_job_novita_s_h100_fits(con) -> None:
    request = RecommendRequest(method="qlora", model="llama-3-70b", seq_len=11776, providers=("cudo", "novita"),
                               include_unavailable=True, top=50)
    rows = {(c.provider, c.instance_type): c for c in recommend(con, request).candidates}
    cudo, novita = rows[("cudo", "sapphire-rapids-h100")], rows[("novita", "h100sxm-80g")]
    assert cudo.usable_gb_per_gpu == pytest.approx(80 * 0.95) == novita.usable_gb_per_gpu
    assert rows[("cudo", "intel-ice-lake-a100-pci")].usable_gb_per_gpu == pytest.approx(76.0)  # before: 70.8
