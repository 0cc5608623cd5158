"""CloudRift adapter: the real client against the replayed instance-types listing.

Prices checked by hand. The recording's 1-GPU prices are CloudRift's published ones:
RTX 4090 0.39 and RTX 5090 0.60 USD/h on https://www.cloudrift.ai/pricing (as read on
2026-09-29 in a public provider comparison), V100 0.25 USD per GPU-hour for the 8x V100 SXM2
16 GB machine (CloudRift's console listing, as recorded in a public preflight note), and RTX
5090 0.65 / RTX PRO 6000 1.39 USD/h, the top of the ranges CloudRift's public listing showed on
2026-10-06 (RTX PRO 6000 is "upon request" on the pricing page). The API states them in US
cents per variant (see adapters/recordings/cloudrift/README.md).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import cloudrift
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from gpuledger.warehouse.records import Batch
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "cloudrift" / "instance-types-vm.json"
GIB = 1024 ** 3


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cloudrift.API_KEY_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def batch_of(doc: dict[str, Any]) -> Batch:
    return cloudrift.build_batch(cloudrift.parse_instance_types(doc))


def rows(batch: Batch) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.region): o for o in batch.offers}


def variant(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for t in doc["data"]["instance_types"] for v in t["variants"] if v["name"] == name)


def itype(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in doc["data"]["instance_types"] if t["name"] == name)


# -- the replayed answer ----------------------------------------------------------------

def test_replayed_listing_gives_the_published_prices_in_dollars(replay: Any) -> None:
    server = replay("cloudrift")
    batch = cloudrift.fetch(replay_context(server, "cloudrift"))
    r = rows(batch)
    assert len(batch.offers) == 19
    # cloudrift.ai/pricing: RTX 4090 0.39, RTX 5090 0.60 (cost_per_hour 39 and 60 cents)
    assert r[("rtx49-10c-kn.1", "usny01_a01")].price_per_hour == 0.39
    assert r[("rtx59-16c-nr.1", "ustx1a_a01")].price_per_hour == 0.60
    # console: 8x V100 at 0.25 per GPU-hour = 2.00 for the machine (200 cents)
    v100 = r[("v100-52c-sm.8", "usny01_a01")]
    assert (v100.price_per_hour, v100.price_per_gpu_hour, v100.gpu_count) == (2.0, 0.25, 8)
    # public listing 2026-10-06: RTX 5090 up to 0.65, RTX PRO 6000 up to 1.39
    assert r[("rtx59-32c-cs.1", "ap_northeast_kr_se_1")].price_per_hour == 0.65
    assert r[("rtxpro6000-24c-kn.1", "ustx1a_a01")].price_per_hour == 1.39
    [(host, req)] = server.requests  # one request, no paging
    assert (host, req.method, req.path) == ("api.cloudrift.ai", "POST", "/api/v1/instance-types/list")
    assert req.json_body() == {"version": "2026-09-08",
                               "data": {"selector": {"ByServiceAndLocation": {"services": ["vm"]}}}}
    assert "x-api-key" not in req.headers  # the listing needs no key


def test_specs_come_from_bytes() -> None:
    row = rows(batch_of(body()))[("rtx49-10c-kn.2", "usny01_a01")]
    assert (row.gpu_count, row.gpu_memory_gb, row.total_gpu_memory_gb) == (2, 24.0, 48.0)
    assert (row.vcpus, row.ram_gb, row.local_disk_gb) == (20.0, 92.0, 1800.0)
    assert (row.purchase_option, row.zone, row.source_currency, row.minimum_charge_s) == ("on_demand", "", "USD", 0)
    data = json.loads(row.provider_data)
    assert (data["instance_type"], data["cost_per_hour_cents"], data["nodes"]) == ("rtx49-10c-kn", 78.0, 3)


def test_free_nodes_per_datacenter_are_the_availability() -> None:
    r = rows(batch_of(body()))
    ny, it = r[("rtx49-10c-kn.1", "usny01_a01")], r[("rtx49-10c-kn.1", "eu-central-it-gv-1")]
    assert (ny.available, ny.available_count, ny.availability_level) == (True, 2, "free nodes")
    assert (it.available, it.available_count, it.availability_level) == (False, 0, "no free node")
    assert r[("v100-52c-sm.8", "eu-central-it-gv-1")].available_count == 1
    tw = json.loads(r[("rtx59-16c-nr.1", "ap-east-tw-kn-2")].provider_data)
    assert tw["ip_availability"] == {"public_ips": False}
    # listed in no datacenter: one row, nothing to rent now
    nowhere = r[("rtxpro6000-24c-kn.8", "global")]
    assert (nowhere.available, nowhere.available_count, nowhere.price_per_hour) == (False, 0, 11.12)
    assert not [k for k in r if k[0] == "rtxpro6000-24c-kn.8" and k[1] != "global"]


@pytest.mark.parametrize(
    "key, model, exact",
    [(("rtx49-10c-kn.1", "usny01_a01"), "RTX-4090", True), (("rtx59-16c-nr.1", "ustx1a_a01"), "RTX-5090", True),
     (("rtxpro6000-24c-kn.1", "ustx1a_a01"), "RTX-PRO-6000-S", False),  # edition not stated
     (("v100-52c-sm.8", "usny01_a01"), "V100-SXM2-16", False)],  # "V100" with 16 GiB: form factor not stated
)
def test_brands_map_to_canonical_gpus(key: tuple[str, str], model: str, exact: bool) -> None:
    row = rows(batch_of(body()))[key]
    assert (row.gpu_model, row.gpu_variant_exact) == (model, exact)


def test_what_is_not_loaded_is_quarantined_or_counted_with_its_reason() -> None:
    doc = body()
    cpu = copy.deepcopy(itype(doc, "v100-52c-sm"))
    cpu.update(name="epyc-64c", brand_short="AMD EPYC 9354")
    cpu["variants"][0].update(name="epyc-64c.1", gpu_count=0, vram=0, cost_per_hour=40.0)
    doc["data"]["instance_types"].append(cpu)
    batch = batch_of(doc)
    [unknown] = batch.quarantined
    assert unknown.source_ref == "gpu/MI350X"
    assert unknown.reason.startswith("gpu: unknown GPU name 'MI350X' with 294912 MiB")
    assert unknown.reason.endswith("(1 variants)")
    assert batch.notes == ["cloudrift: 7 instance types, 16 variants; skipped: 1 CPU-only variants",
                           "cloudrift: no volume type is listed in any datacenter; no storage price loaded"]


def test_bad_variants_are_quarantined_and_the_rest_still_load() -> None:
    doc = body()
    variant(doc, "rtx49-10c-kn.1")["cost_per_hour"] = -39.0
    variant(doc, "rtx49-10c-kn.2")["cost_per_hour"] = math.nan
    variant(doc, "rtx49-10c-kn.4")["cost_per_hour"] = "156"
    del variant(doc, "rtx59-16c-nr.4")["cost_per_hour"]
    variant(doc, "rtx59-32c-cs.1")["currency"] = "EUR"
    twin = copy.deepcopy(variant(doc, "v100-52c-sm.8"))
    twin["cost_per_hour"] = 150.0
    itype(doc, "v100-52c-sm")["variants"].append(twin)
    batch = batch_of(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["rtx49-10c-kn.1"] == "rtx49-10c-kn.1: cost_per_hour -39.0 is not a positive price"
    assert reasons["rtx49-10c-kn.2"] == "rtx49-10c-kn.2: cost_per_hour nan is not a finite number"
    assert reasons["rtx49-10c-kn.4"] == "rtx49-10c-kn.4: cost_per_hour '156' is not a number"
    assert reasons["rtx59-16c-nr.4"] == "rtx59-16c-nr.4: cost_per_hour is missing"
    assert reasons["rtx59-32c-cs.1"] == "rtx59-32c-cs.1: price in EUR, not USD cents; no conversion is configured"
    assert reasons["v100-52c-sm.8"].startswith("duplicate variant v100-52c-sm.8")
    r = rows(batch)
    assert r[("v100-52c-sm.8", "usny01_a01")].price_per_hour == 2.0  # the first listing kept
    assert not {k for k in r if k[0] in ("rtx49-10c-kn.1", "rtx49-10c-kn.2", "rtx49-10c-kn.4")}
    assert len(batch.offers) == 19 - 2 - 2 - 1 - 1 - 1


def test_volume_prices_are_loaded_in_dollars_when_listed() -> None:
    doc = body()
    variant(doc, "rtx49-10c-kn.1")["volume_types_per_dc"] = {
        "usny01_a01": [{"name": "ceph-ssd", "cost_per_gb_per_month": 8.0}]}
    variant(doc, "rtx49-10c-kn.2")["volume_types_per_dc"] = {
        "usny01_a01": [{"name": "ceph-ssd", "cost_per_gb_per_month": 8.0}]}  # the same type once
    batch = batch_of(doc)
    [storage] = batch.storage
    assert (storage.region, storage.storage_class, storage.usd_per_gb_month) == ("usny01_a01", "ceph-ssd", 0.08)
    assert not [n for n in batch.notes if "no volume type" in n]
    [egress] = batch.egress
    assert (egress.region, egress.usd_per_gb) == ("global", 0.0)


def test_a_changed_answer_is_schema_drift_and_an_empty_one_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'data.instance_types' list"):
        cloudrift.parse_instance_types({"version": "2025-01-29", "data": {"types": []}})
    doc = body()
    for t in doc["data"]["instance_types"]:
        for v in t["variants"]:
            v["price"] = v.pop("cost_per_hour")
    with pytest.raises(SchemaDriftError, match="no variant of any instance type has 'cost_per_hour'"):
        cloudrift.parse_instance_types(doc)
    with pytest.raises(SourceError, match="returned no instance types"):
        cloudrift.parse_instance_types({"version": "2025-01-29", "data": {"instance_types": []}})


# -- the client: auth, errors ------------------------------------------------------------

def test_the_key_is_sent_in_x_api_key_when_set(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cloudrift.API_KEY_ENV, "rift-test-key")
    server = replay("cloudrift")
    cloudrift.fetch(replay_context(server, "cloudrift"))
    [(_, req)] = server.requests
    assert req.headers["x-api-key"] == "rift-test-key" and "authorization" not in req.headers


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("cloudrift", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="cloudrift: api.cloudrift.ai/api/v1/instance-types/list failed after 2"):
        cloudrift.fetch(replay_context(server, "cloudrift"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    def html(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"

    server = replay("cloudrift", hook=html)
    with pytest.raises(SourceError, match="cloudrift: .* did not answer JSON"):
        cloudrift.fetch(replay_context(server, "cloudrift"))


def test_provider_declaration() -> None:
    spec = cloudrift.PROVIDER
    assert spec.name == cloudrift.NAME == "cloudrift"
    assert spec.secret_env_vars == ("CLOUDRIFT_API_KEY",) and not spec.credentials_required
    assert (spec.source_kind, spec.facts.kind) == ("api", "gpu_cloud")
