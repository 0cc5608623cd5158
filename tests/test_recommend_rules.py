"""The recommender's fit rules that a source's flags alone must not decide: NVLink claims checked
against the card, offers without capacity, option hints checked against the offers, names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuledger.warehouse import gpus as gpu_table
from gpuledger.warehouse.recommender.macros import install_macros
from gpuledger.warehouse.recommender.throughput import node_link, step_work, tokens_per_second
from gpuledger.warehouse.recommender.recommend import RecommendRequest, UnknownProviderError, recommend
from gpuledger.warehouse.offer_filter import FilterError
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
    add(b, "h100x8ram", "H100-SXM", 8, 80.0, 21.00, interconnect="NVSwitch", ram_gb=2048, **bill)
    add(b, "h100x8lowram", "H100-SXM", 8, 80.0, 20.50, interconnect="NVSwitch", ram_gb=512, **bill)
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
        "select instance_type, link_kind, link_gbs, link_note from offer_facts()").fetchall())
    # GeForce RTX 4090/5090 have no NVLink connector at all: PCIe 4.0 (Ada) and 5.0 (Blackwell).
    assert rows["4090x8"] == ("PCIe", 25.0, "the source says NVLink; RTX-4090 has no NVLink: counted as PCIe")
    assert rows["5090x8"][:2] == ("PCIe", 50.0)
    # RTX A6000: an NVLink bridge (112.5 GB/s both ways) joins two cards; four are two pairs over PCIe.
    assert rows["a6000x4"] == ("PCIe", 25.0, "the source says NVLink; RTX-A6000 joins only pairs by an NVLink "
                                             "bridge: counted as PCIe between pairs")
    assert rows["a6000x2"] == ("NVLink bridge", 56.25, None)
    # H100 SXM5 modules sit on an NVLink baseboard (900 GB/s both ways), whatever a host's field says.
    assert rows["h100x8"] == ("NVLink", 450.0, None)
    assert rows["h100x8pcie"] == ("NVLink", 450.0, None)
    for it, (kind, gbs, _) in rows.items():  # the SQL macro and the Python reference agree
        vendor, link, form, arch, count, claim = con.execute(
            "select gpu_vendor, gpu_nvlink, gpu_form_factor, gpu_architecture, gpu_count, interconnect "
            "from offer_facts() where instance_type = ?", [it]).fetchall()[0]
        assert node_link(vendor, link, form, arch, count, claim) == (kind, gbs), it


def test_a_sharded_full_finetune_runs_over_any_link_at_its_speed(con) -> None:
    rec = recommend(con, req(method="full", model="llama-3-8b", top=100))
    sharded = {c.instance_type: c for c in rec.candidates if c.plan == "sharded"}
    assert {"h100x8", "4090x8", "5090x8", "a6000x4"} <= set(sharded)
    # The same ZeRO-3 step moves the same bytes: over PCIe 4.0 it waits longer than over PCIe 5.0.
    assert sharded["4090x8"].link_gbs == 25.0 and sharded["5090x8"].link_gbs == 50.0
    assert sharded["4090x8"].tokens_per_s_per_gpu < sharded["5090x8"].tokens_per_s_per_gpu
    assert sharded["h100x8"].tokens_per_s_per_gpu > 4 * sharded["5090x8"].tokens_per_s_per_gpu
    # The same offers still serve single-GPU jobs, with the source's claim and the card's limit shown.
    q = recommend(con, req(method="qlora", model="llama-3-8b", top=100))
    by_type = {c.instance_type: c for c in q.candidates}
    assert (by_type["4090x8"].plan, by_type["4090x8"].gpus_used) == ("data-parallel", 8)
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
    with pytest.raises(UnknownProviderError, match=r"^unknown provider 'AWS'; did you mean market\?$"):
        recommend(con, req(method="qlora", model="llama-3-8b", providers=("AWS",)))
    # Names the caller knows besides the warehouse's (the CLI: the registered sources) are accepted, and
    # a provider never loaded is reported stale, not unknown.
    rec = recommend(con, req(method="qlora", model="llama-3-8b", providers=("AWS",)), known_providers=("aws",))
    assert rec.nothing_fits and rec.request.providers == ("aws",)
    assert [(p.provider, p.state, p.last_ok) for p in rec.stale_providers] == [("aws", "never", None)]
    assert rec.notes[-1].startswith("nothing fits: no provider has a successful scrape within 36 h")


def test_a_provider_named_in_a_warehouse_that_knows_none_says_so(tmp_path: Path) -> None:
    empty = open_writer(tmp_path / "empty.duckdb")
    with pytest.raises(UnknownProviderError, match=r"^unknown provider 'aws'; no provider is known yet$"):
        recommend(empty, req(method="qlora", model="llama-3-8b", providers=("aws",)))
    empty.close()


@pytest.mark.parametrize("kw, message", [
    ({"hours": 1e6}, "hours must be at most 8760"),
    ({"runs": 10**7}, "runs must be at most 10000"),
    ({"tokens": 5e7, "epochs": 3}, "epochs multiply dataset_tokens, examples or the default job, not tokens"),
    ({"hours": 2, "epochs": 3}, "epochs multiply dataset_tokens, examples or the default job, not tokens or hours"),
    ({"dataset_gb": float("inf")}, "dataset_gb must be a size in GB, got inf"),
    # --dataset-gb 1e308 printed numpy overflow warnings, a table of 300-digit storage costs and
    # Infinity in --json (no JSON number).
    ({"dataset_gb": 1e308}, r"^dataset_gb must be at most 1e\+06 \(a petabyte\), got 1e\+308$"),
    ({"max_age_hours": float("inf")}, "max_age_hours must be positive and at most 1e\\+09, got inf"),
    ({"max_age_hours": 1e12}, "max_age_hours must be positive and at most 1e\\+09, got 1000000000000.0"),
    # --method full --max-nodes 1e9 ran for minutes (every node count tried in turn): refused.
    ({"max_nodes": 10**9}, "^max_nodes must be at most 1024, got 1000000000$"),
    # a count of 331 digits (typed or pasted) overflowed the estimates' floats: OverflowError, a traceback
    ({"lora_rank": 10**330}, "^lora_rank must be at most 65,536, got a number of 331 digits$"),
    ({"seq_len": 10**330}, "^seq_len must be at most 10,000,000, got a number of 331 digits$"),
    ({"micro_batch": 65_537}, "^micro_batch must be at most 65,536, got 65537$"),
    ({"max_gpus": 10**330}, "^max_gpus must be at most 65,536, got a number of 331 digits$"),
    ({"examples": 10**330}, "^examples must be at most 15,000,000,000,000, got a number of 331 digits$"),
    ({"downloads": 10**330}, "^downloads must be at most 10,000, got a number of 331 digits$"),
])
def test_absurd_job_sizes_are_refused(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        RecommendRequest(method="qlora", model="llama-3-8b", **kw)


def test_a_small_job_is_said_in_tokens_and_by_is_read_in_any_case() -> None:
    job = {"method": "qlora", "model": "llama-3-8b"}
    # before: "1e-06M tokens", "0.05M tokens"; and by="TIME" was refused ("by must be cost or time")
    assert [RecommendRequest(**job, tokens=n).job_text() for n in (1, 50_000, 2e6)] == [
        "1 token", "50,000 tokens", "2M tokens"]
    assert RecommendRequest(**job, by=" TIME").by == "time"


def test_spot_without_a_published_rate_is_ranked_by_its_cost_without_interruptions(con) -> None:
    # before: the $0.10/h spot L4, whose source publishes no interruption rate, ranked after every offer
    # whose expected cost was known, on-demand ones at six times its price included, and --top hid it.
    rec = recommend(con, req(method="qlora", model="llama-3-8b", hours=2, spot=True, top=3))
    spot = rec.candidates[0]
    assert (spot.instance_type, spot.purchase_option, spot.interruption_rate_per_hour) == ("l4.here", "spot", None)
    # Its 2 h with a checkpoint every 30 min and no interruption: 4 checkpoints of Llama 3 8B's QLoRA adapters
    # (r 16 on all linear layers: 32 x 16 x 81,920 = 41,943,040 parameters) at 10 bytes each (bf16 + AdamW's 8),
    # 0.390625 GiB written at 125 MiB/s: 3.2 s each, 7,212.8 s, billed per second as 7,213 s at $0.10/h.
    assert spot.hours_per_run == pytest.approx(2 + 4 * 3.2 / 3600, rel=1e-12)
    assert spot.cost.total_usd == pytest.approx(7213 * 0.10 / 3600, rel=1e-12)
    assert "interruption rate unknown: cost assumes no interruption (checkpoints every 30 min counted): a lower " \
           "bound, ranked by it" in spot.flags
    # The 10 offers that fit: 8 nodes and the L4 on demand and spot (the L4 without capacity is left out).
    assert ("interruptible offers with no published interruption rate: 1 of the 10 that fit, each costed with its "
            "checkpoints and no interruption (a lower bound) and ranked by that cost") in rec.notes
    # Without --spot no interruptible offer is considered, and nothing is said of them.
    on_demand = recommend(con, req(method="qlora", model="llama-3-8b", hours=2, top=100))
    assert not any(c.interruptible for c in on_demand.candidates)
    assert not any(n.startswith("interruptible offers") for n in on_demand.notes)


def test_zero_offload_lets_70b_full_run_on_8x80gb_when_the_host_ram_holds_the_optimizer(con) -> None:
    plain = recommend(con, req(method="full", model="llama-3-70b"))
    assert plain.nothing_fits and "`--offload`" in plain.notes[-1]
    rec = recommend(con, req(method="full", model="llama-3-70b", offload=True, tokens=1e6, top=100))
    # 12 bytes per parameter (fp32 master + two AdamW moments) of 70.55B in host RAM: 788 GiB.
    assert rec.estimate.host_gb == pytest.approx(70.554e9 * 12 / 2**30, rel=1e-3)
    assert rec.sharded_estimates[8].per_gpu.optimizer_gb == 0
    assert {c.instance_type for c in rec.candidates} == {"h100x8ram"}  # 512 GiB is too little, no RAM figure too
    c = rec.candidates[0]
    # The PCIe traffic of the offload (2 x 2N/8 bytes per GPU per step over the H100's PCIe 5.0, 50 GB/s)
    # slows each step.
    work = step_work(rec.sharded_estimates[8], 8)
    assert work.offload_bytes == pytest.approx(2 * 2 * rec.estimate.params / 8)
    card = gpu_table.models()["H100-SXM"]
    args = dict(gpu_count=8, plan_gpus=8, nodes=1, fabric=12.5, pcie=50.0,
                link=node_link(card.vendor, card.nvlink, card.form_factor, card.architecture, 8, None)[1])
    with_offload = tokens_per_second(work, 989, card.memory_bandwidth_tbs, **args)
    assert c.tokens_per_s == pytest.approx(with_offload, rel=1e-9)
    assert with_offload < tokens_per_second(replace(work, offload_bytes=0.0), 989, card.memory_bandwidth_tbs, **args)


def test_hints_for_an_offload_job_that_fits_nowhere_drop_the_offload_with_the_method(con) -> None:
    # 405B with ZeRO-Offload wants 4,536 GiB of host RAM: no node here has it. Trying LoRA/QLoRA
    # with offload still set was refused ("offload applies to full fine-tuning only", a traceback).
    rec = recommend(con, req(method="full", model="llama-3.1-405b", offload=True))
    assert rec.nothing_fits
    assert rec.notes[-1].endswith(". It would fit with `no --offload, --method qlora --shard-lora`.")
    # The hint holds: QLoRA sharded over the 8 x H100 node (about 28 GiB per GPU) fits it.
    assert recommend(con, req(method="qlora", model="llama-3.1-405b", shard_lora=True)).candidates


def test_hints_leave_out_a_method_the_lora_targets_given_cannot_train(con) -> None:
    # Falcon 40B's MLP has no gate: full fine-tuning ignores --lora-targets gate, but trying LoRA for
    # a hint raised "Falcon 40B has no gate layer for LoRA to adapt" (a traceback).
    rec = recommend(con, req(method="full", model="falcon-40b", lora_targets="gate"))
    assert rec.nothing_fits  # 86.3 GiB per GPU sharded over the 8 x H100 (76 usable)
    assert rec.notes[-1].endswith(". It would fit with `--optimizer adamw8bit`, or `--offload`.")


def test_hints_respect_the_region_and_provider_filters(con) -> None:
    rec = recommend(con, req(method="qlora", model="llama-3.1-405b", max_gpus=2, providers=("market",),
                             region="us-"))
    assert rec.nothing_fits
    assert rec.notes[-1].endswith(". It would fit with `--shard-lora --max-gpus 8`.")
    with pytest.raises(FilterError, match=r"^unknown region 'eu-'; did you mean us-east-1\?$"):
        recommend(con, req(method="qlora", model="llama-3-8b", region="eu-"))  # no region starts with it


def test_a_region_where_nothing_fits_hints_that_another_would(tmp_path: Path) -> None:
    b = Batch("market")
    add(b, "l4", "L4", 1, 22.35, 0.60, region="eu-west-1", billing_granularity_s=1, minimum_charge_s=0)
    add(b, "h100", "H100-SXM", 1, 80.0, 2.50, region="us-east-1", billing_granularity_s=1, minimum_charge_s=0)
    w = open_writer(tmp_path / "ledger.duckdb")
    load(w, b, "market", T0, facts("market", 1, 0))
    w.close()
    con = open_reader(tmp_path / "ledger.duckdb")
    try:  # a 70B model in 4 bits needs about 46 GiB: more than the L4 in eu-west-1 has
        none = recommend(con, req(method="qlora", model="llama-3-70b", region="EU-"))
        assert none.nothing_fits and none.notes[-1].endswith(". It would fit with `no --region`.")
        assert [c.instance_type for c in recommend(con, req(method="qlora", model="llama-3-70b")).candidates] == [
            "h100"]
    finally:
        con.close()
