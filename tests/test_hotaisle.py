"""Hot Aisle adapter: the team API through httpx against the replay server.

Hand-checked prices: https://www.hotaisle.xyz/pricing/ and Hot Aisle's post "Why We Raised Our
MI300X Price" (2026-07-14), read 2026-12-01: MI300X VMs 2.99 USD per GPU-hour (1, 2 and 4 GPUs),
8x MI300X bare metal 3.39 USD per GPU-hour. See adapters/recordings/hotaisle/README.md.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import hotaisle
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

FOLDER = BUNDLED_RECORDINGS / "hotaisle"
JSON = {"Content-Type": "application/json"}
VMS = "/api/teams/gpuledger-example/virtual_machines/available/"
BARE_METAL = "/api/teams/gpuledger-example/bare_metal/available/"


@pytest.fixture(autouse=True)
def _no_hotaisle_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HOTAISLE_API_KEY", raising=False)
    monkeypatch.delenv("HOTAISLE_TEAM_HANDLE", raising=False)


def vms() -> list[dict[str, Any]]:
    return json.loads((FOLDER / "vm-available.json").read_text())


def bare_metal() -> list[dict[str, Any]]:
    return json.loads((FOLDER / "bare-metal-available.json").read_text())


def by_type(batch: Any) -> dict[str, Any]:
    return {o.instance_type: o for o in batch.offers}


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx_prices_every_listed_type(replay: Any) -> None:
    server = replay("hotaisle")
    batch = hotaisle.fetch(replay_context(server, "hotaisle"))
    assert batch.counts() == {"offers": 5, "egress": 1, "storage": 0, "quarantined": 0}
    rows = by_type(batch)
    # Checked by hand against hotaisle.xyz/pricing (2026-12-01): 2.99 per GPU-hour for VMs, 3.39 for bare metal.
    small = rows["vm-1x-MI300X-13c-Xeon-Platinum-8470"]
    assert small.price_per_hour == 2.99
    assert rows["vm-2x-MI300X-26c-Xeon-Platinum-8470"].price_per_hour == 5.98  # 2 x 2.99
    assert rows["vm-4x-MI300X-52c-Xeon-Platinum-8470"].price_per_hour == 11.96  # 4 x 2.99
    metal = rows["bm-8x-MI300X-102c-Xeon-Platinum-8470"]
    assert (metal.price_per_hour, metal.price_per_gpu_hour) == (27.12, 3.39)  # 8 x 3.39

    assert {o.region for o in batch.offers} == {"us-michigan-1"}
    assert {o.purchase_option for o in batch.offers} == {"on_demand"}
    assert (small.vcpus, small.ram_gb, small.local_disk_gb) == (13, 224, 12288)  # bytes / 2^30
    assert (small.source_currency, small.source_price_per_hour, small.billing_granularity_s) == ("USD", 2.99, 60)
    assert (metal.interconnect, metal.network_gbps, metal.multinode_fabric) == (
        "Infinity Fabric", 3200, "RoCEv2 Ethernet 8x400G")
    assert small.interconnect is None and small.network_gbps is None
    assert json.loads(metal.provider_data)["on_demand_price_cents"] == 2712

    [egress] = batch.egress
    assert (egress.region, egress.destination, egress.usd_per_gb, egress.tier_end_gb) == (
        "us-michigan-1", "internet", 0.0, None)
    assert any("no volume product" in n for n in batch.notes)

    # The team is asked for when HOTAISLE_TEAM_HANDLE is unset, then both lists of that team.
    assert [(h, r.method, r.path) for h, r in server.requests] == [
        ("admin.hotaisle.app", "GET", "/api/teams/"),
        ("admin.hotaisle.app", "GET", VMS),
        ("admin.hotaisle.app", "GET", BARE_METAL),
    ]


def test_every_type_maps_to_the_mi300x_with_its_reference_memory(replay: Any) -> None:
    batch = hotaisle.fetch(replay_context(replay("hotaisle"), "hotaisle"))
    assert {(o.gpu_model, o.gpu_variant_exact, o.gpu_vendor, o.gpu_name_reported) for o in batch.offers} == {
        ("MI300X", True, "AMD", "MI300X")}
    # The API states no GPU memory: the MI300X's 192 GB per GPU comes from the GPU reference
    # (warehouse/data/gpu_models.csv), marked as such, and the total is that times the GPUs.
    assert {(o.gpu_count, o.gpu_memory_gb, o.gpu_memory_from_canon, o.gpu_memory_gb_nominal, o.total_gpu_memory_gb)
            for o in batch.offers} == {(1, 192, True, 192, 192), (2, 192, True, 192, 384), (4, 192, True, 192, 768),
                                       (8, 192, True, 192, 1536)}


def test_quantity_is_the_availability_and_the_minimum_reservation_the_minimum_charge(replay: Any) -> None:
    rows = by_type(hotaisle.fetch(replay_context(replay("hotaisle"), "hotaisle")))
    stock = {name: (o.available, o.available_count, o.availability_level) for name, o in rows.items()}
    assert stock == {
        "vm-1x-MI300X-8c-Xeon-Platinum-8462Y+": (True, 2, "in stock"),
        "vm-1x-MI300X-13c-Xeon-Platinum-8470": (False, 0, "sold out"),
        "vm-2x-MI300X-26c-Xeon-Platinum-8470": (True, 1, "in stock"),
        "vm-4x-MI300X-52c-Xeon-Platinum-8470": (False, 0, "sold out"),
        "bm-8x-MI300X-102c-Xeon-Platinum-8470": (True, 1, "in stock"),
    }
    assert rows["vm-2x-MI300X-26c-Xeon-Platinum-8470"].minimum_charge_s == 30 * 60
    assert rows["bm-8x-MI300X-102c-Xeon-Platinum-8470"].minimum_charge_s == 43200 * 60


# -- bad records: each counted, with its reason ------------------------------------

def test_bad_types_are_quarantined_and_the_rest_still_load() -> None:
    doc = vms()
    doc[0]["OnDemandPrice"] = -299  # negative
    doc[1]["OnDemandPrice"] = "two ninety-nine"  # not a number
    del doc[2]["Quantity"]  # no stock figure
    doc[3]["Specs"]["gpus"][0]["model"] = "MI999Z"  # a GPU nobody knows
    twin = copy.deepcopy(doc[0])
    twin["OnDemandPrice"] = 310
    cpu_only = copy.deepcopy(doc[1])
    cpu_only["Specs"]["gpus"] = []
    doc += [twin, cpu_only]
    batch = hotaisle.parse_available(doc, bare_metal())
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    negative = reasons["vm-1x-MI300X-8c-Xeon-Platinum-8462Y+/us-michigan-1"]
    assert "price_per_hour" in negative and "positive" in negative
    assert reasons["vm-1x-MI300X-13c-Xeon-Platinum-8470"] == (
        "vm-1x-MI300X-13c-Xeon-Platinum-8470: OnDemandPrice 'two ninety-nine' is not a number")
    assert reasons["vm-2x-MI300X-26c-Xeon-Platinum-8470"] == (
        "vm-2x-MI300X-26c-Xeon-Platinum-8470: Quantity None is not a whole number")
    assert reasons["vm-4x-MI999Z-52c-Xeon-Platinum-8470"].startswith("gpu: unknown GPU name 'MI999Z'")
    assert reasons["vm-1x-MI300X-8c-Xeon-Platinum-8462Y+"].startswith(
        "duplicate type vm-1x-MI300X-8c-Xeon-Platinum-8462Y+: listed again")
    assert len(batch.quarantined) == 5
    assert list(by_type(batch)) == ["bm-8x-MI300X-102c-Xeon-Platinum-8470"]
    assert batch.notes[-1] == "hotaisle: 6 VM types and 1 bare-metal types listed; skipped: 1 CPU-only types"


def test_a_nan_price_is_quarantined_by_the_record_contract() -> None:
    doc = vms()
    doc[2]["OnDemandPrice"] = math.nan
    batch = hotaisle.parse_available(doc, bare_metal())
    [bad] = batch.quarantined
    assert bad.source_ref == "vm-2x-MI300X-26c-Xeon-Platinum-8470/us-michigan-1" and "finite" in bad.reason
    assert len(batch.offers) == 4


def test_a_changed_answer_is_schema_drift_and_an_empty_vm_list_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="virtual_machines/available did not answer a JSON array"):
        hotaisle.parse_available({"detail": "not found"}, [])
    renamed = [{("Price" if k == "OnDemandPrice" else k): v for k, v in t.items()} for t in vms()]
    with pytest.raises(SchemaDriftError, match="no VM type has an 'OnDemandPrice'"):
        hotaisle.parse_available(renamed, bare_metal())
    with pytest.raises(SourceError, match="virtual_machines/available returned no types"):
        hotaisle.parse_available([], bare_metal())
    assert len(hotaisle.parse_available(vms(), []).offers) == 4  # no bare metal offered: the VMs still load


# -- the client: auth, the team, errors ------------------------------------------------

def test_the_key_is_sent_as_a_token_and_a_configured_team_skips_the_lookup(
        replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOTAISLE_API_KEY", "ha_test_key_0123456789")
    monkeypatch.setenv("HOTAISLE_TEAM_HANDLE", "gpuledger-example")
    server = replay("hotaisle")
    batch = hotaisle.fetch(replay_context(server, "hotaisle"))
    assert len(batch.offers) == 5
    assert [r.path for _, r in server.requests] == [VMS, BARE_METAL]
    assert {r.headers.get("authorization") for _, r in server.requests} == {"Token ha_test_key_0123456789"}


def test_live_without_a_key_is_missing_credentials() -> None:
    with pytest.raises(MissingCredentialsError, match="HOTAISLE_API_KEY is not set"):
        hotaisle.fetch(SourceContext(provider="hotaisle", mode="live"))


def test_a_key_of_several_teams_must_name_one() -> None:
    teams = [{"handle": "alpha", "name": "A", "roles": ["owner"], "effective_roles": ["user"]},
             {"handle": "beta", "name": "B", "roles": ["user"], "effective_roles": ["user"]},
             {"handle": "gamma", "name": "G", "roles": ["user"], "effective_roles": ["user"], "invitation": True}]
    with pytest.raises(SourceError, match=r"belongs to 2 teams \(alpha, beta\); set HOTAISLE_TEAM_HANDLE"):
        hotaisle.parse_team(teams)
    assert hotaisle.parse_team(teams[:1] + teams[2:]) == "alpha"  # an invitation not accepted does not count
    with pytest.raises(SourceError, match="belongs to no team"):
        hotaisle.parse_team([])


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("hotaisle", hook=lambda host, req, ex: (500, {}, b"Internal Server Error"))
    with pytest.raises(SourceError, match="hotaisle: admin.hotaisle.app/api/teams/ failed after 2"):
        hotaisle.fetch(replay_context(server, "hotaisle"))
    assert len(server.requests) == 2


def test_a_rejected_key_is_a_source_error_naming_the_status(replay: Any) -> None:
    def unauthorized(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 401, {"Content-Type": "text/plain"}, b"Unauthorized"

    server = replay("hotaisle", hook=unauthorized)
    with pytest.raises(SourceError, match="HTTP 401 from admin.hotaisle.app/api/teams/"):
        hotaisle.fetch(replay_context(server, "hotaisle"))


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    def html(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        if req.path == VMS:
            return 200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"
        return None  # every other request: its recorded answer

    server = replay("hotaisle", hook=html)
    with pytest.raises(SourceError, match="hotaisle: .*virtual_machines/available/ did not answer JSON"):
        hotaisle.fetch(replay_context(server, "hotaisle"))


def test_provider_declaration() -> None:
    spec = hotaisle.PROVIDER
    assert spec.name == hotaisle.NAME == "hotaisle" and spec.source_kind == "api"
    assert spec.secret_env_vars == ("HOTAISLE_API_KEY",) and spec.credentials_required
    assert spec.workflow_secrets == ("HOTAISLE_API_KEY", "HOTAISLE_TEAM_HANDLE")
    assert (spec.facts.billing_granularity_s, spec.facts.access_ssh) == (60, True)
