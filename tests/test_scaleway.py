"""Scaleway adapter: the public catalogue and the Instance API stock, through the real client.

Hand-checked prices: https://www.scaleway.com/en/pricing/gpu/ as read on 2026-09-26 (the exact
figures of the page's embedded catalogue data, transcribed that day; see
adapters/recordings/scaleway/README.md), in EUR per instance-hour before tax: L4-1-24G 0.7875,
L40S-1-48G 1.4699, H100-1-80G 2.8665, H100-SXM-8-80G 25.3308, B300-SXM-8-288G 60.00. The USD
figures use the recording's rate, 1.1403 USD per EUR (ECB reference rate of 2026-09-25).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import scaleway
from gpuledger.adapters.base import MissingCredentialsError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

RECORDINGS = BUNDLED_RECORDINGS / "scaleway"
RATE = 1.1403


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(scaleway.SECRET_KEY_ENV, raising=False)
    monkeypatch.delenv("GPULEDGER_SCALEWAY_USD_PER_EUR", raising=False)


def pages() -> list[Any]:
    return [json.loads((RECORDINGS / "catalog-instance.json").read_text())]


def stock() -> dict[str, dict[str, str]]:
    def read(name: str) -> Any:
        return json.loads((RECORDINGS / name).read_text())

    return {"fr-par-1": scaleway.parse_availability([read("availability-fr-par-1.json")], "fr-par-1"),
            "fr-par-2": scaleway.parse_availability([read("availability-fr-par-2.json")], "fr-par-2"),
            "pl-waw-2": scaleway.parse_availability([read("availability-pl-waw-2.json")], "pl-waw-2")}


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.zone): o for o in batch.offers}


def product(docs: list[Any], sku: str) -> dict[str, Any]:
    return next(p for doc in docs for p in doc["products"] if p["sku"] == sku)


# -- through the real client against the replay server ------------------------------

def test_fetch_pages_the_catalogue_and_reads_stock_per_gpu_zone(replay: Any) -> None:
    server = replay("scaleway")
    batch = scaleway.fetch(replay_context(server, "scaleway"))
    assert batch.counts() == {"offers": 14, "egress": 0, "storage": 0, "quarantined": 0}
    got = rows(batch)

    # scaleway.com/en/pricing/gpu/, 2026-09-26, EUR per instance-hour
    eur = {("L4-1-24G", "fr-par-2"): 0.7875, ("L40S-1-48G", "fr-par-2"): 1.4699,
           ("H100-1-80G", "fr-par-2"): 2.8665, ("H100-SXM-8-80G", "fr-par-2"): 25.3308,
           ("B300-SXM-8-288G", "fr-par-2"): 60.0}
    for key, price in eur.items():
        offer = got[key]
        assert (offer.source_currency, offer.source_price_per_hour) == ("EUR", price), key
        assert math.isclose(offer.price_per_hour, price * RATE, rel_tol=1e-9), key
    assert math.isclose(got["H100-SXM-8-80G", "fr-par-2"].price_per_gpu_hour, 25.3308 / 8 * RATE)

    h100 = got["H100-SXM-8-80G", "fr-par-2"]
    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == ("H100-SXM", 8, 80, 640)
    assert (h100.region, h100.zone, h100.vcpus, h100.ram_gb, h100.local_disk_gb) == (
        "fr-par", "fr-par-2", 128, 960, 12800)
    assert (h100.purchase_option, h100.billing_granularity_s) == ("on_demand", 60)
    data = json.loads(h100.provider_data)
    assert (data["usd_per_eur"], data["sku"]) == (RATE, "/compute/h100_sxm_8_80g/run_fr-par-2")
    assert batch.notes == [
        "scaleway: 15 instance products, 14 GPU offers in 3 zones (fr-par-1, fr-par-2, pl-waw-2); "
        "1 CPU-only instance products skipped",
        "scaleway: EUR prices converted at 1.1403 USD per EUR (scaleway_usd_per_eur)",
    ]

    seen = [(r.path, r.params) for _, r in server.requests]
    assert [p for path, p in seen if path == scaleway.CATALOG_PATH] == [
        {"product_types": "instance", "page": "1", "page_size": "100"}]
    stocked = [(path.split("/")[4], p) for path, p in seen if path.endswith("/availability")]
    assert stocked == [(z, {"per_page": "100", "page": "1"}) for z in ("fr-par-1", "fr-par-2", "pl-waw-2")]


def test_pages_are_followed_until_total_count(replay: Any,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded answers cut into pages of 4, the way the API serves a page_size/per_page of 4."""
    monkeypatch.setattr(scaleway, "PAGE_SIZE", 4)
    catalog = pages()[0]
    zone_stock = json.loads((RECORDINGS / "availability-fr-par-2.json").read_text())["servers"]

    def paged(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        page = int(req.params["page"])
        if req.path == scaleway.CATALOG_PATH:
            size = int(req.params["page_size"])
            part = catalog["products"][(page - 1) * size: page * size]
            return 200, {"Content-Type": "application/json"}, json.dumps(
                {"products": part, "total_count": catalog["total_count"]}).encode()
        if req.path.endswith("/fr-par-2/products/servers/availability"):
            size = int(req.params["per_page"])
            part = dict(list(zone_stock.items())[(page - 1) * size: page * size])
            # the total in the body (as Scaleway's SDK reads it) and in the X-Total-Count header
            return 200, {"Content-Type": "application/json", "X-Total-Count": str(len(zone_stock))}, json.dumps(
                {"servers": part, "total_count": len(zone_stock)}).encode()
        return None

    server = replay("scaleway", hook=paged)
    batch = scaleway.fetch(replay_context(server, "scaleway"))
    assert len(batch.offers) == 14  # the same offers as from one page
    seen = [(r.path, r.params["page"]) for _, r in server.requests]
    # 15 products in pages of 4: 4 + 4 + 4 + 3, the short fourth is the last
    assert [page for path, page in seen if path == scaleway.CATALOG_PATH] == ["1", "2", "3", "4"]
    # 12 types in fr-par-2 and total_count 12: three full pages, then the total is reached
    assert [page for path, page in seen if "/fr-par-2/" in path] == ["1", "2", "3"]
    assert rows(batch)["B300-SXM-8-288G", "fr-par-2"].availability_level == "shortage"  # from page 3


def test_without_a_total_a_full_page_is_followed_by_the_next(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer that states no total_count: full pages are followed until one comes back short or empty."""
    monkeypatch.setattr(scaleway, "PAGE_SIZE", 4)
    zone_stock = json.loads((RECORDINGS / "availability-fr-par-2.json").read_text())["servers"]

    catalog = pages()[0]

    def paged(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        page = int(req.params["page"])
        if req.path == scaleway.CATALOG_PATH:
            doc = {"products": catalog["products"][(page - 1) * 4: page * 4], "total_count": catalog["total_count"]}
        elif req.path.endswith("/fr-par-2/products/servers/availability"):
            doc = {"servers": dict(list(zone_stock.items())[(page - 1) * 4: page * 4])}
        else:
            return None
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    server = replay("scaleway", hook=paged)
    batch = scaleway.fetch(replay_context(server, "scaleway"))
    # 12 types: three full pages and an empty fourth
    assert [r.params["page"] for _, r in server.requests if "/fr-par-2/" in r.path] == ["1", "2", "3", "4"]
    assert rows(batch)["B300-SXM-8-288G", "fr-par-2"].availability_level == "shortage"  # from page 3


def test_the_stock_level_becomes_the_availability_signal() -> None:
    got = rows(scaleway.parse_catalog(pages(), RATE, stock()))
    levels = {key: (o.available, o.availability_level) for key, o in got.items()}
    assert levels["L4-1-24G", "fr-par-2"] == (True, "available")
    assert levels["L40S-1-48G", "fr-par-2"] == (True, "scarce")
    assert levels["H100-SXM-8-80G", "fr-par-2"] == (False, "shortage")
    assert levels["H100-1-80G", "pl-waw-2"] == (False, "shortage")
    assert levels["L4-1-24G", "fr-par-1"] == (False, "shortage")


def test_the_key_is_sent_as_x_auth_token(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(scaleway.SECRET_KEY_ENV, "scw-secret-0a1b2c3d")
    server = replay("scaleway")
    scaleway.fetch(replay_context(server, "scaleway"))
    sent = {(r.path.endswith("/availability"), r.headers.get("x-auth-token")) for _, r in server.requests}
    # the Instance API gets the key; the public catalogue, which needs none, does not
    assert sent == {(True, "scw-secret-0a1b2c3d"), (False, None)}


def test_live_without_a_key_loads_prices_without_stock(replay: Any) -> None:
    server = replay("scaleway")

    class LoopbackLive(SourceContext):
        def upstream_url(self, host: str) -> str:
            return self.replay_urls[host]

    ctx = LoopbackLive(provider="scaleway", mode="live", replay_urls=server.endpoints(),
                       settings={"scaleway_usd_per_eur": RATE}, http_attempts=1)
    batch = scaleway.fetch(ctx)
    assert len(batch.offers) == 14 and {o.available for o in batch.offers} == {None}
    assert batch.notes[-1] == "scaleway: stock not read (SCW_SECRET_KEY is not set); offers carry no availability"
    assert not [r for _, r in server.requests if r.path.endswith("/availability")]


def test_a_rejected_key_names_the_status_and_holds_no_secret(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(scaleway.SECRET_KEY_ENV, "scw-secret-0a1b2c3d")

    def reject(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        if req.path.endswith("/availability"):
            body = {"type": "denied_authentication", "message": f"bad token {req.headers.get('x-auth-token')}"}
            return 401, {"Content-Type": "application/json"}, json.dumps(body).encode()
        return None

    with pytest.raises(SourceError) as err:
        scaleway.fetch(replay_context(replay("scaleway", hook=reject), "scaleway"))
    assert "scaleway: HTTP 401 from api.scaleway.com/instance/v1/zones/fr-par-1" in str(err.value)
    assert "scw-secret-0a1b2c3d" not in str(err.value)


# -- currency: converted at a configured rate, or quarantined -------------------------

def test_without_a_rate_every_eur_price_is_quarantined_never_stored_as_usd() -> None:
    batch = scaleway.parse_catalog(pages(), None, stock())
    assert batch.offers == [] and len(batch.quarantined) == 14
    assert {q.reason.split(": ", 1)[1] for q in batch.quarantined} == {
        "price in EUR, not USD; no conversion is configured (set GPULEDGER_SCALEWAY_USD_PER_EUR)"}
    assert batch.notes[1] == "scaleway: no scaleway_usd_per_eur rate is set, so every EUR price was quarantined"


def test_live_without_a_rate_is_not_configured_and_asks_nothing(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # Scaleway needs no key, so without its rate it ran every night, quarantined all 14 prices and failed.
    monkeypatch.delenv("GPULEDGER_SCALEWAY_USD_PER_EUR", raising=False)
    server = replay("scaleway")

    class LoopbackLive(SourceContext):
        def upstream_url(self, host: str) -> str:
            return self.replay_urls[host]

    with pytest.raises(MissingCredentialsError) as err:
        scaleway.fetch(LoopbackLive(provider="scaleway", mode="live", replay_urls=server.endpoints(), http_attempts=1))
    assert str(err.value) == ("scaleway: GPULEDGER_SCALEWAY_USD_PER_EUR is not set; its prices are in EUR and are "
                              "converted at that USD per EUR rate")
    assert server.requests == []


def test_the_rate_setting_is_read_from_the_environment(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_SCALEWAY_USD_PER_EUR", "1.25")
    batch = scaleway.fetch(replay_context(replay("scaleway"), "scaleway"))
    assert rows(batch)["B300-SXM-8-288G", "fr-par-2"].price_per_hour == 75.0  # 60.00 EUR x 1.25


# -- GPU names, units and bad records -------------------------------------------------

@pytest.mark.parametrize(
    "offer, model, exact",
    [("L4-1-24G", "L4", True), ("L40S-8-48G", "L40S", True), ("H100-2-80G", "H100-PCIe", True),
     ("H100-SXM-4-80G", "H100-SXM", True), ("B300-SXM-8-288G", "B300", True)],
)
def test_gpu_types_map_to_canonical_models(offer: str, model: str, exact: bool) -> None:
    got = rows(scaleway.parse_catalog(pages(), RATE, None))[offer, "fr-par-2"]
    assert (got.gpu_model, got.gpu_variant_exact) == (model, exact)


def test_a_per_minute_price_is_turned_hourly() -> None:
    docs = pages()
    item = product(docs, "/compute/l40s_1_48g/run_fr-par-2")
    item["price"]["retail_price"] = {"currency_code": "EUR", "units": 0, "nanos": 24498333}
    item["unit_of_measure"] = {"unit": "minute", "size": 1}
    offer = rows(scaleway.parse_catalog(docs, RATE, None))["L40S-1-48G", "fr-par-2"]
    assert math.isclose(offer.source_price_per_hour, 1.46989998)  # 0.024498333 EUR a minute x 60


def test_bad_products_are_quarantined_and_the_rest_still_load() -> None:
    docs = pages()
    product(docs, "/compute/l4_8_24g/run_fr-par-2")["price"]["retail_price"]["nanos"] = -300000000
    product(docs, "/compute/h100_2_80g/run_fr-par-2")["price"]["retail_price"]["nanos"] = float("nan")
    product(docs, "/compute/h100_sxm_2_80g/run_fr-par-2")["unit_of_measure"]["unit"] = "month"
    product(docs, "/compute/l40s_8_48g/run_fr-par-2")["properties"]["hardware"]["gpu"]["type"] = "X9000"
    del product(docs, "/compute/h100_sxm_4_80g/run_fr-par-2")["price"]["retail_price"]["nanos"]
    product(docs, "/compute/l4_1_24g/run_fr-par-1")["price"]["retail_price"]["currency_code"] = "GBP"
    twin = copy.deepcopy(product(docs, "/compute/b300_sxm_8_288g/run_fr-par-2"))
    docs[0]["products"].append(twin)
    batch = scaleway.parse_catalog(docs, RATE, stock())
    reasons = {q.source_ref: q.reason.split(": ", 1)[1] for q in batch.quarantined}
    assert reasons == {
        "/compute/l4_8_24g/run_fr-par-2": "retail_price units 6 and nanos -300000000 disagree in sign "
                                          "(a negative part)",
        "/compute/h100_2_80g/run_fr-par-2": "nanos nan is not a finite number",
        "/compute/h100_sxm_2_80g/run_fr-par-2": "unit of measure 'month' is not per hour, minute or second",
        "/compute/l40s_8_48g/run_fr-par-2": "gpu: unknown GPU name 'X9000' with 49152 MiB from scaleway: "
                                            "add it to warehouse/data/gpu_aliases.csv",
        "/compute/h100_sxm_4_80g/run_fr-par-2": "schema: retail_price lacks 'nanos'",
        "/compute/l4_1_24g/run_fr-par-1": "price in GBP, not USD; no conversion is configured",
        "/compute/b300_sxm_8_288g/run_fr-par-2": "listed again (first listing kept, this one refused)",
    }
    assert len(batch.offers) == 14 - 6
    assert rows(batch)["B300-SXM-8-288G", "fr-par-2"].source_price_per_hour == 60.0


# RENDER-S, Scaleway's older P100 type, as a catalogue product: the fields of the recorded products
# (the SDK's PublicCatalogProduct), filled from the Instance API's live answer of 2026-08-22 for fr-par-2
# (getcomputable/gpu-index, tests/fixtures/observatory/scaleway/servers_page2.json, read 2026-12-05:
# 10 vCPUs, 45097156608 bytes of RAM, one GPU named "P100" with 16 GiB, 1.221 EUR per hour). Its id does
# not follow <family>-<count>-<memory>G. See adapters/recordings/scaleway/README.md.
RENDER_S = {
    "sku": "/compute/render_s/run_fr-par-2", "service_category": "Compute", "product_category": "Instance",
    "product": "RENDER-S Instance", "variant": "GPU RENDER-S Instance - fr-par-2",
    "description": "GPU RENDER-S Instance - fr-par-2 (1.221\u20ac per hour)", "status": "general_availability",
    "badges": [], "locality": {"zone": "fr-par-2"},
    "price": {"retail_price": {"currency_code": "EUR", "units": 1, "nanos": 221000000}},
    "properties": {"instance": {"range": "GPU", "offer_id": "RENDER-S", "recommended_replacement_offer_ids": []},
                   "hardware": {"cpu": {"description": "vCPUs: 10", "arch": "x64", "type": "", "virtual": {"count": 10},
                                        "threads": 10, "shared": False},
                                "ram": {"description": "42 GiB", "size": 45097156608, "type": ""},
                                "storage": {"description": "Block", "total": 0},
                                "gpu": {"description": "1 x P100", "count": 1, "type": "P100"}}},
    "unit_of_measure": {"unit": "hour", "size": 1}}


def test_an_older_type_whose_id_names_no_memory_is_mapped_by_its_gpu_fields(replay: Any) -> None:
    cpu = next(p for p in pages()[0]["products"] if not p["properties"]["hardware"].get("gpu"))
    only_render = json.dumps({"products": [RENDER_S, cpu], "total_count": 2}).encode()

    def catalogue(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        return (200, {"Content-Type": "application/json"}, only_render) if req.path == scaleway.CATALOG_PATH else None

    batch = scaleway.fetch(replay_context(replay("scaleway", hook=catalogue), "scaleway"))
    assert not batch.quarantined
    [offer] = batch.offers  # a catalogue of only such a type still loads
    assert (offer.instance_type, offer.zone, offer.gpu_model, offer.gpu_variant_exact, offer.gpu_count) == (
        "RENDER-S", "fr-par-2", "P100", True, 1)
    # The catalogue states no GPU memory for it: never read from the id, the P100's from the canon, marked
    assert (offer.gpu_memory_gb, offer.gpu_memory_from_canon, offer.gpu_memory_gb_nominal) == (16, True, 16)
    assert (offer.source_currency, offer.source_price_per_hour, offer.vcpus, offer.ram_gb) == ("EUR", 1.221, 10, 42)
    assert math.isclose(offer.price_per_hour, 1.221 * RATE)


def test_a_changed_answer_shape_or_an_empty_catalogue_fails_loudly() -> None:
    with pytest.raises(SourceError, match="lacks the 'products' list"):
        scaleway.parse_catalog([{"items": []}], RATE, None)
    with pytest.raises(SourceError, match="returned no instance products"):
        scaleway.parse_catalog([{"products": [], "total_count": 0}], RATE, None)
    with pytest.raises(SourceError, match="fr-par-2 availability answer lacks the 'servers' object"):
        scaleway.parse_availability([{"types": {}}], "fr-par-2")
