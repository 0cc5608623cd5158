"""The world generator (bench/world) on its small scale: each generated provider's recording
replays through the provider's real fetch, every page of a paged walk is asked for, the CLI
prints its tally, and two runs write the same bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.world import __main__ as world_cli
from bench.world import generate, generator
from gpuledger.adapters import digitalocean, oci, runpod, scaleway, shadeform, tensordock, vastai, vultr
from tests.conftest import replay_context

GENERATED = ["digitalocean", "oci", "runpod", "scaleway", "shadeform", "tensordock", "vastai", "vultr"]


@pytest.fixture(scope="module")
def small_world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("world-small")
    generate(root, "small", GENERATED + ["lambda"])
    return root


def fetch_through_replay(replay: Any, root: Path, module: Any) -> tuple[Any, Any]:
    server = replay(module.NAME, recordings=root)
    return module.fetch(replay_context(server, module.NAME)), server


def every_exchange_answered_once(server: Any) -> bool:
    exchanges = [ex for group in server.exchanges.values() for ex in group]
    answered = [server.find(host, req) for host, req in server.requests]
    return len(answered) == len(exchanges) and {id(ex) for ex in answered} == {id(ex) for ex in exchanges}


def test_generated_providers_have_generators_and_bundled_ones_do_not() -> None:
    assert all(generator(p) is not None for p in GENERATED)
    assert generator("lambda") is None


def test_vastai_small_walks_every_page_and_gives_the_offer_count_of_its_grid(replay: Any,
                                                                             small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, vastai)
    # 400 listings, 100 a page: 4 full pages and the empty page that ends the walk.
    assert len(server.requests) == 5 and every_exchange_answered_once(server)
    # Small scale covers 2 countries (US, DE). The bundled GPU table's 29 entries offer these
    # distinct (canonical model, GPU count) pairs: 16 entries with counts 1/2/4/8 (64), 6 with
    # 1/2/4 (18), 4 with 1/2 (8; A100X's 1/2 fall in A100 PCIE 80 GB's pairs), H200 1/8 (2),
    # B200 8 (1) = 93 per country; x 2 countries x 2 purchase options = 372 groups.
    assert len(batch.offers) == 372
    options = [str(getattr(o.purchase_option, "value", o.purchase_option)) for o in batch.offers]
    assert options.count("on_demand") == options.count("interruptible") == 186
    # The three bad listings: a zero price (both options), a negative bid, a 9999 USD/h price.
    assert len(batch.quarantined) == 4
    assert {o.region for o in batch.offers} == {"US", "DE"}


def test_shadeform_small_lists_every_region_of_each_type(replay: Any, small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, shadeform)
    assert every_exchange_answered_once(server)
    # massedcompute: 23 types (A6000 3 counts, 5 GPUs x 4 counts) in 2 regions = 46 rows, less the
    # 4 bare-RTXPro6000 types (8 rows, one quarantine entry per type); lambdalabs' 6 types x 5
    # regions are skipped (Lambda is loaded directly).
    assert len(batch.offers) == 38
    assert len(batch.quarantined) == 4
    assert any("30 offers run by lambdalabs" in note for note in batch.notes)
    # Every seventh region entry is sold out. massedcompute's entries run A6000 1-6, L40 7-14,
    # L40S 15-22, H100 23-30, A100_80G 31-38, RTXPro6000 39-46: entries 7, 14, 21, 28, 35 are
    # loaded offers, 42 is quarantined.
    assert sum(not o.available for o in batch.offers) == 5


def test_runpod_small_answers_the_gpu_types_query(replay: Any, small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, runpod)
    assert every_exchange_answered_once(server)
    body = json.loads((small_world / "runpod" / "graphql-gpuTypes.json").read_text())
    # The bundled 27 types plus the first 3 of the missing list.
    assert len(body["data"]["gpuTypes"]) == 30
    assert {"NVIDIA RTX A4500", "NVIDIA RTX A2000", "NVIDIA GeForce RTX 3070"} <= {
        t["id"] for t in body["data"]["gpuTypes"]}
    # The bundled 85 offers, plus 4 for each added card (now in gpu_models.csv); the one
    # quarantined record is the bundled zero spot price of the L4.
    assert len(batch.offers) == 85 + 3 * 4
    assert sum(o.gpu_model in {"RTX-A4500", "RTX-A2000", "RTX-3070"} for o in batch.offers) == 12
    assert len(batch.quarantined) == 1


def test_oci_small_answers_the_whole_list_in_one_body(replay: Any, small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, oci)
    assert every_exchange_answered_once(server)
    # 80 parts at small scale: the bundled 50 (its 18 offers, 3 quarantined parts) and 30 fillers.
    assert len(batch.offers) == 18 and len(batch.quarantined) == 3
    assert any(note.startswith("oci: 80 parts listed") for note in batch.notes)


def test_scaleway_small_pages_the_catalogue_and_asks_each_gpu_zone(replay: Any, small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, scaleway)
    assert every_exchange_answered_once(server)
    # The bundled 15 products and DEV1's 4 and GP1's 5 sizes in fr-par-2 and pl-waw-2 (18): 33,
    # one catalogue page; stock from the 3 zones with a GPU product. The bundled 14 offers stay.
    assert len(server.requests) == 4
    assert len(batch.offers) == 14
    assert any("33 instance products" in note for note in batch.notes)


def test_plan_lists_keep_their_gpu_offers_at_their_small_length(replay: Any, small_world: Path) -> None:
    do_batch, do_server = fetch_through_replay(replay, small_world, digitalocean)
    vultr_batch, vultr_server = fetch_through_replay(replay, small_world, vultr)
    assert every_exchange_answered_once(do_server) and every_exchange_answered_once(vultr_server)
    assert len(do_batch.offers) == 8 and any("20 sizes listed" in n for n in do_batch.notes)
    assert len(vultr_batch.offers) == 14
    assert any("20 instance plans and 5 bare-metal plans listed" in n for n in vultr_batch.notes)


def test_tensordock_small_offers_one_row_per_gpu_count_and_country(replay: Any, small_world: Path) -> None:
    batch, server = fetch_through_replay(replay, small_world, tensordock)
    assert every_exchange_answered_once(server)
    # Austin (H100 x8, RTX 4090 x4), Dallas (H100 x8, RTX 6000 Ada x2) and their copies Phoenix,
    # Mexico City, Atlanta, Sao Paulo. Counts 1/2/4/8 up to max_count: US H100 4 + 4090 3 +
    # 6000 Ada 2 = 9; MX H100 4 + 4090 3 = 7; BR H100 4 + 6000 Ada 2 = 6; 22 in all.
    assert len(batch.offers) == 22
    assert {o.region for o in batch.offers} == {"US", "MX", "BR"}


def test_bundled_provider_is_copied_with_its_tally(small_world: Path) -> None:
    assert (small_world / "lambda" / "manifest.json").exists()
    assert not list((small_world / "lambda").glob("*.py"))


def test_cli_prints_source_requests_and_megabytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert world_cli.main([str(tmp_path), "--scale", "small", "-p", "vastai", "-p", "lambda"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines["vastai"][1:3] == ["generated", "5"]
    assert lines["lambda"][1:3] == ["bundled", "1"]


def test_generation_is_byte_identical_twice(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    generate(first, "small", ["vastai"])
    generate(second, "small", ["vastai"])
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert len(files) == 6  # manifest + 5 pages
    assert all((first / f).read_bytes() == (second / f).read_bytes() for f in files)
