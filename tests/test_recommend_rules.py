"""The recommender's fit rules that a source's flags alone must not decide: NVLink claims checked
against the card, offers without capacity, option hints checked against the offers, names."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.recommend import RecommendRequest, UnknownProviderError, recommend
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import open_reader, open_writer
from tests.test_recommend import NOW, T0, add, facts, load


def market() -> Batch:
    """A marketplace whose hosts set an NVLink field themselves (as Vast.ai's bw_nvlink is)."""
    b = Batch("market")
    bill = {"billing_granularity_s": 1, "minimum_charge_s": 0}
    add(b, "4090x8", "RTX-4090", 8, 23.99, 3.00, interconnect="NVLink", **bill)
    add(b, "5090x8", "RTX-5090", 8, 31.84, 4.00, interconnect="NVLink", **bill)
    add(b, "a6000x4", "RTX-A6000", 4, 47.99, 2.00, interconnect="NVLink", **bill)
    add(b, "a6000x2", "RTX-A6000", 2, 47.99, 1.00, interconnect="NVLink", **bill)
    add(b, "h100x8", "H100-SXM", 8, 80.0, 20.00, interconnect="NVLink", **bill)
    add(b, "h100x8pcie", "H100-SXM", 8, 80.0, 19.00, interconnect="PCIe", **bill)
    add(b, "l4.gone", "L4", 1, 22.35, 0.05, available=False, **bill)
    add(b, "l4.here", "L4", 1, 22.35, 0.60, available=True, **bill)
    add(b, "l4.here", "L4", 1, 22.35, 0.10, option="spot", **bill)  # no interruption risk published
    return b


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory):
    db: Path = tmp_path_factory.mktemp("rules") / "ledger.duckdb"
    w = open_writer(db)
    load(w, market(), "market", T0, facts("market", 1, 0))
    w.close()
    c = open_reader(db)
    install_macros(c)
    yield c
    c.close()


def req(**kw) -> RecommendRequest:
    kw.setdefault("as_of", NOW)
    return RecommendRequest(**kw)


def test_an_nvlink_claim_is_checked_against_the_card(con) -> None:
    rows = dict((r[0], r[1:]) for r in con.execute(
        "select instance_type, fast_interconnect, link_note from offer_facts()").fetchall())
    # GeForce RTX 4090/5090 have no NVLink connector at all (gpu_models: no nvlink).
    assert rows["4090x8"] == (False, "the source says NVLink; RTX-4090 has no NVLink: counted as PCIe")
    assert rows["5090x8"][0] is False
    # RTX A6000: an NVLink bridge joins two cards; four are two pairs over PCIe.
    assert rows["a6000x4"] == (False, "the source says NVLink; RTX-A6000 joins only pairs by an NVLink bridge: "
                                      "counted as PCIe between pairs")
    assert rows["a6000x2"] == (True, None)  # one bridged pair is all-to-all
    assert rows["h100x8"] == (True, None)  # SXM5 on an NVLink baseboard
    assert rows["h100x8pcie"] == (False, None)  # nothing claimed, nothing counted


def test_a_sharded_full_finetune_never_lands_on_geforce_or_bridged_pairs(con) -> None:
    rec = recommend(con, req(method="full", model="llama-3-8b", top=100))
    sharded = {c.instance_type for c in rec.candidates if c.plan == "sharded"}
    assert sharded == {"h100x8"}
    # The same offers still serve single-GPU jobs, with the source's claim and the card's limit shown.
    q = recommend(con, req(method="qlora", model="llama-3-8b", top=100))
    by_type = {c.instance_type: c for c in q.candidates}
    assert by_type["4090x8"].plan == "single"
    assert "the source says NVLink; RTX-4090 has no NVLink: counted as PCIe" in by_type["4090x8"].flags


def test_offers_without_capacity_are_left_out_unless_asked(con) -> None:
    rec = recommend(con, req(method="qlora", model="llama-3-8b", top=100))
    assert "l4.gone" not in {c.instance_type for c in rec.candidates}
    kept = recommend(con, req(method="qlora", model="llama-3-8b", top=100, include_unavailable=True))
    gone = next(c for c in kept.candidates if c.instance_type == "l4.gone")
    assert gone.available is False
    assert "the source reports no capacity right now (kept by --include-unavailable)" in gone.flags
    cnt = con.execute("select count(*) from fits(10, as_of := ?) where instance_type = 'l4.gone'", [NOW]).fetchone()
    assert cnt == (0,)


def test_nothing_fits_names_the_options_that_would_make_it_fit(con) -> None:
    # 405B QLoRA needs ~220 GiB on one GPU; within 2 GPUs nothing holds it. Sharded over the 8 x H100
    # NVLink node it fits; spot, a shorter sequence or offers without capacity would not help.
    rec = recommend(con, req(method="qlora", model="llama-3.1-405b", max_gpus=2))
    assert rec.nothing_fits
    assert rec.notes[-1].endswith(". It would fit with `--shard-lora --max-gpus 8`.")


def test_unknown_provider_is_refused_with_the_known_names(con) -> None:
    with pytest.raises(UnknownProviderError, match=r"^unknown provider AWS; known: market$"):
        recommend(con, req(method="qlora", model="llama-3-8b", providers=("AWS",)))


@pytest.mark.parametrize("kw, message", [
    ({"hours": 1e6}, "hours must be at most 8760"),
    ({"runs": 10**7}, "runs must be at most 10000"),
])
def test_absurd_job_sizes_are_refused(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        RecommendRequest(method="qlora", model="llama-3-8b", **kw)


def test_spot_without_a_published_risk_is_unknown_never_free_of_interruptions(con) -> None:
    rec = recommend(con, req(method="qlora", model="llama-3-8b", tokens=3e6, spot=True, top=100))
    spot = next(c for c in rec.candidates if c.interruptible)
    assert spot.interruption_rate_per_hour is None
    assert ("interruption risk unknown: cost shown without interruptions (a lower bound), ranked after offers "
            "whose expected cost is known") in spot.flags
    # It is the cheapest by its sticker, yet ranked after every offer whose expected cost is known.
    assert spot.rank == max(c.rank for c in rec.candidates if c.tokens_per_s is not None)
