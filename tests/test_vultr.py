"""Vultr adapter: the real httpx client against the replayed plan lists, and the parser's rules.

Prices checked by hand (adapters/recordings/vultr/README.md): Vultr's pricing page could not be
read from this machine, so the figures are the plan list's own as public sources reproduce them,
read on 2026-12-01: gpuhunt's abridged plan answers (dstackai/gpuhunt,
src/tests/providers/test_vultr.py, 2025-01-08) give vbm-112c-2048gb-8-h100-gpu 23.92/h
(preemptible 18.40), vbm-256c-2048gb-8-mi300x-gpu 17.52/h and vcg-a100-12c-120g-80vram 2.397/h
(1750/month over 730 h); two public captures give vcg-a16-2c-8g-2vram 0.059/h (43/month).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import vultr
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

RECORDING = BUNDLED_RECORDINGS / "vultr"
JSON = {"Content-Type": "application/json"}


def plans() -> dict[str, Any]:
    return json.loads((RECORDING / "plans.json").read_text())


def metal() -> dict[str, Any]:
    return json.loads((RECORDING / "plans-metal.json").read_text())


def plan(doc: dict[str, Any], plan_id: str) -> dict[str, Any]:
    key = "plans" if "plans" in doc else "plans_metal"
    return next(p for p in doc[key] if p["id"] == plan_id)


def rows(batch: Any) -> dict[tuple[str, str, str], Any]:
    return {(o.instance_type, o.region, o.purchase_option): o for o in batch.offers}


def serve(plan_doc: dict[str, Any], metal_doc: dict[str, Any] | None = None):
    metal_doc = metal() if metal_doc is None else metal_doc

    def hook(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        doc = metal_doc if req.path == vultr.METAL_PATH else plan_doc
        return 200, JSON, json.dumps(doc).encode()

    return hook


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx_loads_gpu_plans_per_location(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VULTR_API_KEY", "not-sent-anywhere-123")  # the plan lists need no key
    server = replay("vultr")
    batch = vultr.fetch(replay_context(server, "vultr"))
    assert batch.counts() == {"offers": 14, "egress": 1, "storage": 0, "quarantined": 0}
    got = rows(batch)
    assert len(got) == 14

    # Prices as the cited sources give them (module docstring): bare metal and one Cloud GPU plan
    h100 = got[("vbm-112c-2048gb-8-h100-gpu", "sea", "on_demand")]
    assert h100.price_per_hour == 23.92 and math.isclose(h100.price_per_gpu_hour, 2.99)
    assert got[("vbm-112c-2048gb-8-h100-gpu", "sea", "spot")].price_per_hour == 18.4
    assert got[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "on_demand")].price_per_hour == 17.52
    assert got[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "spot")].price_per_hour == 14.72
    a100 = got[("vcg-a100-12c-120g-80vram", "ewr", "on_demand")]
    assert a100.price_per_hour == 2.397
    assert got[("vcg-a16-2c-8g-2vram", "ewr", "on_demand")].price_per_hour == 0.059

    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == ("H100-SXM", 8, 80, 640)
    assert (h100.vcpus, h100.ram_gb, h100.local_disk_gb) == (224, 2048, 1920)  # 2 x 960 GB disks
    assert (a100.gpu_model, a100.gpu_variant_exact, a100.gpu_count, a100.vcpus, a100.ram_gb) == (
        "A100-SXM4-80", False, 1, 12, 120)
    assert (a100.billing_granularity_s, a100.minimum_charge_s, a100.source_currency, a100.zone) == (3600, 3600,
                                                                                                     "USD", "")
    data = json.loads(a100.provider_data)
    assert (data["monthly_cost"], data["bandwidth_gb_per_month"], data["fractional_gpu"]) == (1750, 10240, False)

    # The region signal: one row per listed location; a plan listed nowhere is one unavailable row
    assert sorted(r for t, r, _ in got if t == "vcg-a16-2c-8g-2vram") == [
        "blr", "ewr", "fra", "lhr", "nrt", "ord", "sjc"]
    assert all(o.available and o.availability_level == "listed in the plan's locations"
               for o in batch.offers if o.region != "global")
    nowhere = got[("vcg-a100-6c-60g-40vram", "global", "on_demand")]
    assert (nowhere.available, nowhere.available_count, nowhere.availability_level) == (
        False, 0, "the plan lists no location")
    assert not any(t == "vcg-a100-6c-60g-40vram" and r != "global" for t, r, _ in got)

    [egress] = batch.egress
    assert (egress.region, egress.destination, egress.tier_start_gb, egress.usd_per_gb) == ("global", "internet",
                                                                                             0.0, 0.01)
    assert batch.notes[0] == ("vultr: 6 instance plans and 3 bare-metal plans listed, 6 GPU plans loaded; skipped: "
                              "1 CPU-only bare-metal, 1 CPU-only vc2, 1 CPU-only vhf")

    assert [(h, r.method, r.path, r.params) for h, r in server.requests] == [
        ("api.vultr.com", "GET", "/v2/plans", {"per_page": "500"}),
        ("api.vultr.com", "GET", "/v2/plans-metal", {"per_page": "500"})]
    assert all("authorization" not in r.headers for _, r in server.requests)


def test_a_fractional_plan_is_a_fraction_of_one_gpu_never_a_whole_card(replay: Any) -> None:
    batch = vultr.fetch(replay_context(replay("vultr"), "vultr"))
    got = rows(batch)
    a16 = got[("vcg-a16-2c-8g-2vram", "ewr", "on_demand")]
    # 2 GB of a 16 GB A16: an eighth of the card, its own memory, the card's nominal size beside it
    assert (a16.gpu_model, a16.gpu_count, a16.gpu_memory_gb, a16.total_gpu_memory_gb,
            a16.gpu_memory_gb_nominal) == ("A16", 0.125, 2, 2, 16)
    assert math.isclose(a16.price_per_gpu_hour, 0.472)  # 0.059 / 0.125: what a whole card would cost
    data = json.loads(a16.provider_data)
    assert (data["fractional_gpu"], data["gpu_fraction"], data["gpu_count_reported"], data["gpu_vram_gb"]) == (
        True, "1/8", "1/8", 2)
    slice20 = got[("vcg-a100-1c-6g-4vram", "ewr", "on_demand")]
    assert (slice20.gpu_count, slice20.gpu_memory_gb, slice20.gpu_model) == (0.05, 4, "A100-SXM4-80")
    assert json.loads(slice20.provider_data)["gpu_fraction"] == "1/20"


def test_cursor_paging_is_followed_until_next_is_empty(replay: Any) -> None:
    doc = plans()
    first = {"plans": doc["plans"][:3], "meta": {"total": 6, "links": {"next": "bmV4dF9fdmNnLWExMDA=", "prev": ""}}}
    second = {"plans": doc["plans"][3:], "meta": {"total": 6, "links": {"next": "", "prev": "cHJldg=="}}}

    def pages(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        if req.path != vultr.PLANS_PATH:
            return None
        page = second if req.params.get("cursor") == "bmV4dF9fdmNnLWExMDA=" else first
        return 200, JSON, json.dumps(page).encode()

    server = replay("vultr", hook=pages)
    batch = vultr.fetch(replay_context(server, "vultr"))
    assert len(batch.offers) == 14
    assert [r.params for _, r in server.requests] == [
        {"per_page": "500"}, {"per_page": "500", "cursor": "bmV4dF9fdmNnLWExMDA="}, {"per_page": "500"}]


def test_a_cursor_that_repeats_is_an_error_not_a_loop(replay: Any) -> None:
    page = dict(plans(), meta={"total": 6, "links": {"next": "c2FtZQ==", "prev": ""}})
    server = replay("vultr", hook=serve(page))
    with pytest.raises(SourceError, match="vultr: /v2/plans: the next page asked for is one already read"):
        vultr.fetch(replay_context(server, "vultr"))
    assert len(server.requests) == 2


# -- the parser's rules ---------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [("1", 1), ("8", 8), ("1/8", 0.125), ("1/20", 0.05), (2, 2)])
def test_gpu_count_text_is_read_as_whole_or_fraction(text: Any, expected: float) -> None:
    assert float(vultr.parse_gpu_count(text)) == expected


@pytest.mark.parametrize("text", ["", "one", "0", "-1", "1/0", True, None])
def test_gpu_count_that_is_no_count_is_refused(text: Any) -> None:
    with pytest.raises(vultr._BadRecord):
        vultr.parse_gpu_count(text)


@pytest.mark.parametrize(
    "gpu_type, vram, count, model, exact",
    [
        ("NVIDIA_L40S", 48, "1", "L40S", True),
        ("NVIDIA_A40", 12, "1/4", "A40", True),
        ("NVIDIA_A16", 16, "1", "A16", True),
        ("NVIDIA_A100", 40, "1/2", "A100-SXM4-80", False),  # the card is 80 GB; SXM or PCIe not stated
        ("NVIDIA_H100", 640, "8", "H100-SXM", False),
        ("NVIDIA_B200", 1536, "8", "B200", True),
        ("NVIDIA_GH200", 96, "1", "GH200-96", False),
        ("AMD_MI325X", 1536, "6", "MI325X", True),
        ("AMD_MI355X", 2304, "8", "MI355X", True),
    ],
)
def test_vultr_card_names_map_to_canonical_gpus(gpu_type: str, vram: int, count: str, model: str,
                                                exact: bool) -> None:
    gpus = vultr.cloud_gpus({"gpu_type": gpu_type, "gpu_vram_gb": vram, "gpu_count": count})
    assert (gpus.model.gpu_model, gpus.exact) == (model, exact)


def test_without_gpu_count_the_count_is_derived_from_vram_and_said_so() -> None:
    quarter = vultr.cloud_gpus({"gpu_type": "NVIDIA_A40", "gpu_vram_gb": 12})
    assert (quarter.count, quarter.memory_gb, quarter.data["fractional_gpu"], quarter.data["gpu_fraction"]) == (
        0.25, 12, True, "1/4")
    assert quarter.data["gpu_count_derived"] == "gpu_vram_gb 12 / A40 memory 48 GB"
    pair = vultr.cloud_gpus({"gpu_type": "NVIDIA_L40S", "gpu_vram_gb": 96})
    assert (pair.count, pair.memory_gb, pair.total_memory_gb, pair.data["fractional_gpu"]) == (2, 48, 96, False)
    # An A100 slice without a count: a twentieth of Vultr's 80 GB card, never a card of its own
    twentieth = vultr.cloud_gpus({"gpu_type": "NVIDIA_A100", "gpu_vram_gb": 4})
    assert (twentieth.model.gpu_model, twentieth.count, twentieth.memory_gb, twentieth.data["gpu_fraction"]) == (
        "A100-SXM4-80", 0.05, 4, "1/20")
    # A card whose whole size Vultr's pricing page does not give: nothing is guessed
    with pytest.raises(vultr._BadRecord, match="no gpu_count, and the memory of a whole NVIDIA_MI355X card"):
        vultr.cloud_gpus({"gpu_type": "NVIDIA_MI355X", "gpu_vram_gb": 144})


# The older plan lists, as gpuhunt's tests abridge live answers (dstackai/gpuhunt,
# src/tests/providers/test_vultr.py at 3b38957, read 2026-12-05): Cloud GPU plans without gpu_count,
# bare-metal plans without deploy_* flags but with their preemptible prices.
OLDER_PLANS = {"plans": [
    {"id": "vcg-a100-1c-6g-4vram", "vcpu_count": 1, "ram": 6144, "disk": 70, "disk_count": 1, "bandwidth": 1024,
     "monthly_cost": 90, "hourly_cost": 0.123, "type": "vcg", "locations": ["ewr"], "gpu_vram_gb": 4,
     "gpu_type": "NVIDIA_A100"},
    {"id": "vcg-a100-12c-120g-80vram", "vcpu_count": 12, "ram": 122880, "disk": 1400, "disk_count": 1,
     "bandwidth": 10240, "monthly_cost": 1750, "hourly_cost": 2.397, "type": "vcg", "locations": ["ewr"],
     "gpu_vram_gb": 80, "gpu_type": "NVIDIA_A100"},
    {"id": "vcg-a100-6c-60g-40vram", "vcpu_count": 12, "ram": 61440, "disk": 1400, "disk_count": 1,
     "bandwidth": 10240, "monthly_cost": 800, "hourly_cost": 1.397, "type": "vcg", "locations": ["ewr"],
     "gpu_vram_gb": 40, "gpu_type": "NVIDIA_A100"}]}
OLDER_METAL = {"plans_metal": [
    {"id": "vbm-256c-2048gb-8-mi300x-gpu", "physical_cpus": 2, "cpu_count": 128, "cpu_cores": 128, "cpu_threads": 256,
     "cpu_model": "EPYC 9534", "cpu_mhz": 2450, "ram": 2321924, "disk": 3576, "disk_count": 8, "bandwidth": 10240,
     "monthly_cost": 11773.44, "hourly_cost": 17.52, "monthly_cost_preemptible": 9891.84,
     "hourly_cost_preemptible": 14.72, "type": "NVMe", "locations": ["ord"]},
    {"id": "vbm-112c-2048gb-8-h100-gpu", "physical_cpus": 2, "cpu_count": 112, "cpu_cores": 112, "cpu_threads": 224,
     "cpu_model": "Platinum 8480+", "cpu_mhz": 2000, "ram": 2097152, "disk": 960, "disk_count": 2, "bandwidth": 15360,
     "monthly_cost": 16074.24, "hourly_cost": 23.92, "monthly_cost_preemptible": 12364.8,
     "hourly_cost_preemptible": 18.4, "type": "NVMe", "locations": ["sea"]}]}


def test_older_plan_lists_give_slices_as_fractions_and_keep_preemptible_prices(replay: Any) -> None:
    server = replay("vultr", hook=serve(OLDER_PLANS, OLDER_METAL))
    batch = vultr.fetch(replay_context(server, "vultr"))
    got = rows(batch)
    # 40 GB of an A100 is half of Vultr's 80 GB card (its pricing page: 1/2 = 40 GB), at 1.397 for the half
    half = got[("vcg-a100-6c-60g-40vram", "ewr", "on_demand")]
    assert (half.gpu_model, half.gpu_count, half.gpu_memory_gb, half.total_gpu_memory_gb) == (
        "A100-SXM4-80", 0.5, 40, 40)
    assert math.isclose(half.price_per_gpu_hour, 2.794)  # 1.397 / 0.5
    assert json.loads(half.provider_data)["gpu_fraction"] == "1/2"
    assert got[("vcg-a100-1c-6g-4vram", "ewr", "on_demand")].gpu_count == 0.05  # 4 of 80 GB
    whole = got[("vcg-a100-12c-120g-80vram", "ewr", "on_demand")]
    assert (whole.gpu_model, whole.gpu_count, whole.gpu_memory_gb) == ("A100-SXM4-80", 1, 80)
    # No deploy_* flags: on demand, and preemptible at the plan's own preemptible price
    assert got[("vbm-112c-2048gb-8-h100-gpu", "sea", "spot")].price_per_hour == 18.4
    assert got[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "spot")].price_per_hour == 14.72
    assert got[("vbm-256c-2048gb-8-mi300x-gpu", "ord", "on_demand")].price_per_hour == 17.52
    assert len(batch.offers) == 3 + 2 * 2 and not batch.quarantined
    assert batch.notes[0] == ("vultr: 3 instance plans and 2 bare-metal plans listed, 5 GPU plans loaded; "
                              "skipped: none")


def test_a_preemptible_price_not_deployable_preemptible_is_counted() -> None:
    metal = copy.deepcopy(OLDER_METAL)
    metal["plans_metal"][1]["deploy_preemptible"] = False
    batch = vultr.parse_plans([OLDER_PLANS], [metal])
    assert ("vbm-112c-2048gb-8-h100-gpu", "sea", "spot") not in rows(batch)
    assert batch.notes[0].endswith("skipped: 1 preemptible prices of GPU plans not deployable preemptible")


def test_a_location_price_overrides_the_plan_price_there_only() -> None:
    doc = plans()
    plan(doc, "vcg-a16-2c-8g-2vram")["location_cost"] = {"blr": {"hourly_cost": 0.064, "monthly_cost": 47}}
    got = rows(vultr.parse_plans([doc], [metal()]))
    blr = got[("vcg-a16-2c-8g-2vram", "blr", "on_demand")]
    assert blr.price_per_hour == 0.064
    assert json.loads(blr.provider_data)["location_price"] is True
    assert got[("vcg-a16-2c-8g-2vram", "ewr", "on_demand")].price_per_hour == 0.059


def test_a_plan_not_deployable_on_demand_has_no_on_demand_row() -> None:
    doc = metal()
    plan(doc, "vbm-112c-2048gb-8-h100-gpu")["deploy_ondemand"] = False
    got = rows(vultr.parse_plans([plans()], [doc]))
    assert ("vbm-112c-2048gb-8-h100-gpu", "sea", "spot") in got
    assert ("vbm-112c-2048gb-8-h100-gpu", "sea", "on_demand") not in got


def test_bad_gpu_plans_are_quarantined_with_their_reason_and_the_rest_load() -> None:
    doc = plans()
    plan(doc, "vcg-a100-12c-120g-80vram")["hourly_cost"] = -2.397
    plan(doc, "vcg-a100-1c-6g-4vram")["hourly_cost"] = float("nan")
    plan(doc, "vcg-a16-2c-8g-2vram")["gpu_type"] = "NVIDIA_Z9000"
    del plan(doc, "vcg-a100-6c-60g-40vram")["gpu_type"]
    twin = copy.deepcopy(plan(doc, "vcg-a16-2c-8g-2vram"))
    twin["gpu_type"], twin["hourly_cost"] = "NVIDIA_A16", 0.07
    doc["plans"] += [
        twin, copy.deepcopy(twin),  # listed twice: the first is loaded, the second refused
        {"id": "vcg-a40-24c-120g-48vram", "type": "vdm", "gpu_brand": "NVIDIA", "vcpu_count": 24, "ram": 122880,
         "hourly_cost": 1.5, "locations": ["lhr"]},
        {"id": "vcg-l40s-16c-180g-48vram", "type": "vcg", "gpu_type": "NVIDIA_L40S", "gpu_vram_gb": 48,
         "gpu_count": "1", "hourly_cost": 1.67, "locations": "ewr"},
    ]
    bm = metal()
    bm["plans_metal"].append({"id": "vbm-248c-2826gb-8-b200-gpu", "cpu_threads": 248, "ram": 2893824,
                              "hourly_cost": 40.0, "type": "NVMe", "locations": ["atl"]})
    batch = vultr.parse_plans([doc], [bm])
    reasons = {q.source_ref: q.reason for q in batch.quarantined if not q.reason.startswith("duplicate")}
    assert "price_per_hour" in reasons["vcg-a100-12c-120g-80vram/ewr"] and "positive" in reasons[
        "vcg-a100-12c-120g-80vram/ewr"]
    assert "finite" in reasons["vcg-a100-1c-6g-4vram/ewr"]
    assert reasons["vcg-a16-2c-8g-2vram"].startswith("vcg-a16-2c-8g-2vram: gpu: unknown GPU name 'z9000'")
    assert reasons["vcg-a100-6c-60g-40vram"] == ("vcg-a100-6c-60g-40vram: Cloud GPU plan without 'gpu_type': "
                                                 "its card is not stated")
    assert reasons["vcg-a40-24c-120g-48vram"] == ("vcg-a40-24c-120g-48vram: Dedicated Metal GPU plan: the plan "
                                                  "list names no GPU model or count for it")
    assert reasons["vcg-l40s-16c-180g-48vram"] == "vcg-l40s-16c-180g-48vram: schema: 'locations' is not a list"
    assert reasons["vbm-248c-2826gb-8-b200-gpu"].startswith("vbm-248c-2826gb-8-b200-gpu: bare-metal GPU plan: the "
                                                            "API names no GPU")
    # The twin was loaded where the original's unknown card was refused; its copy is the duplicate
    dup = [q for q in batch.quarantined if q.reason.startswith("duplicate plan id")]
    assert [q.source_ref for q in dup] == ["vcg-a16-2c-8g-2vram"]
    assert len(batch.quarantined) == 8
    got = rows(batch)
    assert got[("vcg-a16-2c-8g-2vram", "ewr", "on_demand")].price_per_hour == 0.07
    assert ("vbm-112c-2048gb-8-h100-gpu", "sea", "on_demand") in got
    assert not any(t.startswith("vcg-a100") for t, _, _ in got)


def test_answers_without_their_list_or_price_field_are_schema_drift_and_an_empty_list_is_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="vultr: /v2/plans answer lacks the 'plans' list"):
        vultr.parse_plans([{"error": "Invalid API token.", "status": 401}], [metal()])
    with pytest.raises(SchemaDriftError, match="vultr: /v2/plans-metal answer lacks the 'plans_metal' list"):
        vultr.parse_plans([plans()], [{"plans": metal()["plans_metal"]}])
    drifted = plans()
    for p in drifted["plans"]:
        p["hourly_price"] = p.pop("hourly_cost")
    with pytest.raises(SchemaDriftError, match="vultr: every plan in /v2/plans lacks 'hourly_cost'"):
        vultr.parse_plans([drifted], [metal()])
    with pytest.raises(SourceError, match="vultr: /v2/plans returned no plans"):
        vultr.parse_plans([{"plans": [], "meta": {"total": 0, "links": {"next": "", "prev": ""}}}], [metal()])


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("vultr", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="vultr: api.vultr.com/v2/plans failed after 2 attempts"):
        vultr.fetch(replay_context(server, "vultr"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    server = replay("vultr", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>down</html>"))
    with pytest.raises(SourceError, match="vultr: api.vultr.com/v2/plans did not answer JSON"):
        vultr.fetch(replay_context(server, "vultr"))


def test_provider_declaration() -> None:
    assert vultr.PROVIDER.name == vultr.NAME == "vultr"
    assert vultr.PROVIDER.secret_env_vars == () and not vultr.PROVIDER.credentials_required  # public plan list
    assert (vultr.PROVIDER.facts.billing_granularity_s, vultr.PROVIDER.facts.minimum_charge_s) == (3600, 3600)
    assert vultr.PROVIDER.facts.storage_persists_when_stopped is True
