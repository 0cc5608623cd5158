"""TensorDock adapter: the real client against the replayed v2 locations answer.

Prices checked by hand. The per-GPU rates of the cheapest listings in the recording are
TensorDock's published "from" prices (tensordock.com and marketplace.tensordock.com/deploy, as
transcribed on 2026-05-25 in api-evangelist/tensordock plans/tensordock-plans-pricing.yml):
H100 SXM5 2.25, A100 SXM4 80GB 0.87, L40S 0.49, RTX 4090 0.32, RTX 3090 0.17 USD per GPU-hour.
The machine prices add 2 vCPUs, 4 GB RAM and 100 GB disk at the location's rates, worked out by
hand below from locations.json (see adapters/recordings/tensordock/README.md).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import tensordock
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from gpuledger.warehouse.records import Batch
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "tensordock" / "locations.json"
JSON = {"Content-Type": "application/json"}
# 2 vCPU x 0.003 + 4 GB x 0.002 + 100 GB x 0.00005 at the documented standard rates
BASE_STD = 0.006 + 0.008 + 0.005


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(tensordock.API_KEY_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def batch_of(doc: dict[str, Any]) -> Batch:
    return tensordock.build_batch(tensordock.parse_locations(doc))


def rows(batch: Batch) -> dict[tuple[str, str], Any]:
    return {(o.region, o.instance_type): o for o in batch.offers}


def location(doc: dict[str, Any], city: str) -> dict[str, Any]:
    return next(loc for loc in doc["data"]["locations"] if loc["city"] == city)


def listing(doc: dict[str, Any], city: str, v0: str) -> dict[str, Any]:
    return next(g for g in location(doc, city)["gpus"] if g["v0Name"] == v0)


# -- the replayed answer ----------------------------------------------------------------

def test_replayed_locations_give_whole_machine_prices_at_the_published_from_rates(replay: Any) -> None:
    server = replay("tensordock")
    batch = tensordock.fetch(replay_context(server, "tensordock"))
    r = rows(batch)
    assert len(batch.offers) == 63
    # RTX 3060 12GB at 0.08 (listed in one US location, two at most)
    assert math.isclose(r[("US", "1x RTX-3060")].price_per_hour, 0.08 + BASE_STD)
    assert math.isclose(r[("US", "2x RTX-3060")].price_per_hour, 2 * 0.08 + BASE_STD)
    # H100 SXM5 from 2.25 (Austin): 1 GPU + the smallest machine
    h100 = r[("US", "1x H100-SXM")]
    assert json.loads(h100.provider_data)["cheapest_location"]["usd_per_gpu_hour"] == 2.25
    assert math.isclose(h100.price_per_hour, 2.25 + BASE_STD)
    assert math.isclose(r[("US", "8x H100-SXM")].price_per_hour, 8 * 2.25 + BASE_STD)  # 18.019
    # A100 SXM4 80GB from 0.87 (Chicago)
    assert math.isclose(r[("US", "1x A100-SXM4-80")].price_per_hour, 0.87 + BASE_STD)  # 0.889
    # RTX 4090 from 0.32 (Orlando): cheaper than Austin's 0.35 for one and two GPUs ...
    assert math.isclose(r[("US", "1x RTX-4090")].price_per_hour, 0.32 + BASE_STD)  # 0.339
    assert math.isclose(r[("US", "2x RTX-4090")].price_per_hour, 2 * 0.32 + BASE_STD)
    # ... but Orlando takes two at most, so four come from Austin at 0.35
    assert math.isclose(r[("US", "4x RTX-4090")].price_per_hour, 4 * 0.35 + BASE_STD)  # 1.419
    # L40S from 0.49 (Montreal), RTX 3090 from 0.17 (Winnipeg)
    assert math.isclose(r[("CA", "1x L40S")].price_per_hour, 0.49 + BASE_STD)
    assert math.isclose(r[("CA", "1x RTX-3090")].price_per_hour, 0.17 + BASE_STD)
    [(host, req)] = server.requests  # one request, no paging documented
    assert (host, req.method, req.path) == ("dashboard.tensordock.com", "GET", "/api/v2/locations")


def test_a_location_with_its_own_rates_prices_the_machine_with_them() -> None:
    r = rows(batch_of(body()))
    # Frankfurt: H100 2.40 per GPU, 0.004 per vCPU, 0.0025 per GB RAM, 0.00006 per GB disk
    assert math.isclose(r[("DE", "1x H100-SXM")].price_per_hour, 2.40 + 2 * 0.004 + 4 * 0.0025 + 100 * 0.00006)
    # Amsterdam: RTX 5090 0.56; 0.0035, 0.0022, 0.00005
    assert math.isclose(r[("NL", "8x RTX-5090")].price_per_hour, 8 * 0.56 + 2 * 0.0035 + 4 * 0.0022 + 0.005)


def test_the_group_keeps_the_spread_the_included_resources_and_the_cheapest_location() -> None:
    us4090 = rows(batch_of(body()))[("US", "1x RTX-4090")]
    data = json.loads(us4090.provider_data)
    assert data["location_count"] == 2  # Austin 0.35, Orlando 0.32
    assert data["price_per_gpu_hour"] == {"min": 0.32, "median": 0.335, "max": 0.35}
    assert data["included"] == {"vcpus": 2, "ram_gb": 4, "storage_gb": 100}
    assert data["cheapest_location"]["city"] == "Orlando" and data["cheapest_location"]["tier"] == 2
    assert (us4090.vcpus, us4090.ram_gb, us4090.local_disk_gb) == (2.0, 4.0, 100.0)
    assert (us4090.gpu_memory_gb, us4090.total_gpu_memory_gb, us4090.gpu_memory_gb_nominal) == (24.0, 24.0, 24)
    assert (us4090.purchase_option, us4090.zone, us4090.source_currency) == ("on_demand", "", "USD")


def test_available_gpus_are_counted_over_the_locations_that_can_take_the_machine() -> None:
    r = rows(batch_of(body()))
    one, four = r[("US", "1x RTX-4090")], r[("US", "4x RTX-4090")]
    assert (one.available, one.available_count, one.availability_level) == (True, 6, "offered")  # 4 + 2
    assert four.available_count == 4  # Orlando's 2 cannot make a 4-GPU machine
    assert json.loads(four.provider_data)["gpus_available_by_location"] == {
        "3f1c2a7e-0b1d-4c55-9a0e-1d2b3c4d5e01": 4}
    assert r[("US", "1x H100-SXM")].available_count == 16  # Austin 8 + Dallas 8
    assert ("US", "2x L4") not in r  # Kansas City has one L4


@pytest.mark.parametrize(
    "key, model, exact",
    [(("US", "1x H100-SXM"), "H100-SXM", True), (("US", "1x A100-SXM4-80"), "A100-SXM4-80", True),
     (("DE", "1x A100-PCIe-80"), "A100-PCIe-80", True), (("CA", "1x RTX-6000-Ada"), "RTX-6000-Ada", True),
     (("US", "1x RTX-A6000"), "RTX-A6000", True), (("CA", "1x RTX-A4000"), "RTX-A4000", True),
     (("NL", "1x RTX-5090"), "RTX-5090", True), (("JP", "1x L4"), "L4", True),
     (("SE", "1x V100-SXM2-16"), "V100-SXM2-16", True)],
)
def test_v0_names_map_to_canonical_gpus(key: tuple[str, str], model: str, exact: bool) -> None:
    row = rows(batch_of(body()))[key]
    assert (row.gpu_model, row.gpu_variant_exact) == (model, exact)


def test_a_display_name_the_aliases_know_maps_when_the_v0_name_is_new() -> None:
    doc = body()
    listing(doc, "Austin", "h100-sxm5-80gb")["v0Name"] = "h100-sxm5-80gb-v2"  # displayName "H100 SXM5 80GB"
    row = rows(batch_of(doc))[("US", "8x H100-SXM")]
    assert row.gpu_model == "H100-SXM"


def test_what_is_not_loaded_is_quarantined_or_counted_with_its_reason() -> None:
    batch = batch_of(body())
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert set(reasons) == {"gpu/v100-sxm3-32gb"}  # SXM3 (DGX-2) is not in the canon
    assert reasons["gpu/v100-sxm3-32gb"].startswith("gpu: unknown GPU name 'v100-sxm3-32gb'")
    assert reasons["gpu/v100-sxm3-32gb"].endswith("(1 listings)")
    assert batch.notes[0] == ("tensordock: 12 locations, 24 priced GPU listings; skipped: 1 GPU listings with "
                              "no capacity (max_count 0)")  # Stockholm's RTX 5090


def test_bad_listings_are_quarantined_and_the_rest_still_load() -> None:
    doc = body()
    listing(doc, "Chicago", "a100-sxm4-80gb")["price_per_hr"] = -0.87
    listing(doc, "Dallas", "h100-sxm5-80gb")["price_per_hr"] = math.nan
    listing(doc, "Montreal", "l40s-pcie-48gb")["price_per_hr"] = "0.49"
    del listing(doc, "Frankfurt", "a100-pcie-80gb")["pricing"]
    listing(doc, "Tokyo", "l4-pcie-24gb")["currency"] = "JPY"
    twin = copy.deepcopy(listing(doc, "Austin", "h100-sxm5-80gb"))
    twin["price_per_hr"] = 1.99
    location(doc, "Austin")["gpus"].append(twin)
    doc["data"]["locations"].append(copy.deepcopy(location(doc, "Winnipeg")))
    batch = batch_of(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    ids = {loc["city"]: loc["id"] for loc in doc["data"]["locations"]}
    assert reasons[f"{ids['Chicago']}/a100-sxm4-80gb"].endswith("price_per_hr -0.87 is not a positive price")
    assert reasons[f"{ids['Dallas']}/h100-sxm5-80gb"].endswith("price_per_hr nan is not a finite number")
    assert reasons[f"{ids['Montreal']}/l40s-pcie-48gb"].endswith("price_per_hr '0.49' is not a number")
    assert "lacks the 'pricing' object" in reasons[f"{ids['Frankfurt']}/a100-pcie-80gb"]
    assert reasons[f"{ids['Tokyo']}/l4-pcie-24gb"] == "price in JPY, not USD; no conversion is configured"
    assert reasons[f"{ids['Austin']}/h100-sxm5-80gb"].startswith("duplicate GPU listing h100-sxm5-80gb")
    assert reasons[ids["Winnipeg"]].startswith("duplicate location id")
    r = rows(batch)
    assert math.isclose(r[("US", "1x H100-SXM")].price_per_hour, 2.25 + BASE_STD)  # the first listing kept
    assert ("US", "1x A100-SXM4-80") not in r and ("DE", "1x A100-PCIe-80") not in r
    assert json.loads(r[("US", "1x H100-SXM")].provider_data)["location_count"] == 1  # Dallas refused


def test_a_listing_too_small_for_the_smallest_machine_is_quarantined() -> None:
    doc = body()
    listing(doc, "Kansas City", "l4-pcie-24gb")["resources"]["max_storage_gb"] = 50
    reasons = {q.source_ref: q.reason for q in batch_of(doc).quarantined}
    assert reasons["3f1c2a7e-0b1d-4c55-9a0e-1d2b3c4d5e05/l4-pcie-24gb"].endswith(
        "resources.max_storage_gb 50 is below the 100 the smallest machine needs")


def test_disk_rates_per_country_and_free_bandwidth() -> None:
    batch = batch_of(body())
    storage = {s.region: s.usd_per_gb_month for s in batch.storage}
    assert storage["US"] == pytest.approx(0.00005 * 730) and storage["JP"] == pytest.approx(0.0001 * 730)
    [egress] = batch.egress
    assert (egress.region, egress.usd_per_gb, egress.tier_end_gb) == ("global", 0.0, None)


@pytest.mark.parametrize("country, code", [("United States", "US"), ("Germany", "DE"), ("SE", "SE"),
                                           ("Isle of Man", "isle-of-man"), (None, "unknown"), ("", "unknown")])
def test_country_codes(country: Any, code: str) -> None:
    assert tensordock.country_code(country) == code


def test_a_country_without_an_iso_code_is_named_in_the_notes() -> None:
    doc = body()
    location(doc, "Stockholm")["country"] = "Isle of Man"
    batch = batch_of(doc)
    assert ("isle-of-man", "1x V100-SXM2-16") in rows(batch)
    assert batch.notes[1] == ("tensordock: countries without an ISO code in COUNTRY_CODES (region is their slug): "
                              "Isle of Man")


def test_a_changed_answer_is_schema_drift_and_an_empty_one_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'data.locations' list"):
        tensordock.parse_locations({"data": {"hostnodes": []}})
    doc = body()
    for loc in doc["data"]["locations"]:
        for g in loc["gpus"]:
            g["price"] = g.pop("price_per_hr")
    with pytest.raises(SchemaDriftError, match="no GPU listing of any location has 'price_per_hr'"):
        tensordock.parse_locations(doc)
    with pytest.raises(SourceError, match="returned no locations"):
        tensordock.parse_locations({"data": {"locations": []}})


# -- the client: auth, errors ------------------------------------------------------------

def test_the_key_is_sent_as_a_bearer_token(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tensordock.API_KEY_ENV, "td-test-key")
    server = replay("tensordock")
    tensordock.fetch(replay_context(server, "tensordock"))
    [(_, req)] = server.requests
    assert req.headers["authorization"] == "Bearer td-test-key"


def test_live_without_a_key_is_missing_credentials() -> None:
    with pytest.raises(MissingCredentialsError, match="TENSORDOCK_API_KEY is not set"):
        tensordock.fetch(SourceContext(provider="tensordock", mode="live"))


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("tensordock", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="tensordock: dashboard.tensordock.com/api/v2/locations failed after 2"):
        tensordock.fetch(replay_context(server, "tensordock"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    def html(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"

    server = replay("tensordock", hook=html)
    with pytest.raises(SourceError, match="tensordock: .* did not answer JSON"):
        tensordock.fetch(replay_context(server, "tensordock"))


def test_provider_declaration() -> None:
    spec = tensordock.PROVIDER
    assert spec.name == tensordock.NAME == "tensordock"
    assert spec.secret_env_vars == ("TENSORDOCK_API_KEY",) and spec.credentials_required
    assert (spec.source_kind, spec.facts.kind) == ("api", "marketplace")
