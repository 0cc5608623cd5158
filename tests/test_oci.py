"""OCI adapter: the price list parsed through httpx against the replay server.

Hand-checked values are Oracle's USD pay-as-you-go list prices per GPU-hour of the API answer of
2026-01-05 (the figures of https://www.oracle.com/cloud/price-list/, Compute - GPU), times the
GPU count of each shape in Oracle's Compute Shapes reference; see adapters/recordings/oci/README.md.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import datetime, timezone
from typing import Any

import pytest

from gpuledger.adapters import oci
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

RECORDING = BUNDLED_RECORDINGS / "oci" / "products-USD.json"
JSON = {"Content-Type": "application/json"}


def body() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def item(doc: dict[str, Any], part: str) -> dict[str, Any]:
    return next(i for i in doc["items"] if i["partNumber"] == part)


def by_shape(batch: Any) -> dict[str, Any]:
    return {o.instance_type: o for o in batch.offers}


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx_prices_every_documented_gpu_shape(replay: Any) -> None:
    server = replay("oci")
    batch = oci.fetch(replay_context(server, "oci"))
    assert batch.counts() == {"offers": 18, "egress": 2, "storage": 2, "quarantined": 3}
    rows = by_shape(batch)
    assert len(rows) == 18 and {o.region for o in batch.offers} == {"global"}

    # Per-GPU-hour list prices x GPU count, checked by hand against the price list:
    h100 = rows["BM.GPU.H100.8"]  # B98415: 10.00 per GPU-hour x 8
    assert (h100.price_per_hour, h100.price_per_gpu_hour) == (80.0, 10.0)
    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == ("H100-SXM", 8, 80, 640)
    assert (h100.vcpus, h100.ram_gb, h100.local_disk_gb, h100.interconnect) == (224, 2048, 61440, "NVSwitch")
    assert rows["BM.GPU.A100-v2.8"].price_per_hour == 32.0  # B95907: 4.00 x 8
    assert rows["BM.GPU.L40S.4"].price_per_hour == 14.0  # B109479: 3.50 x 4
    assert rows["BM.GPU.H200.8"].price_per_hour == 80.0  # B110519: 10.00 x 8
    assert rows["BM.GPU.B200.8"].price_per_hour == 112.0  # B110978: 14.00 x 8
    assert rows["BM.GPU.MI300X.8"].price_per_hour == 48.0  # B109485: 6.00 x 8
    assert rows["BM.GPU.GB300.4"].price_per_hour == 72.0  # B112140: 18.00 x 4
    # One A10 part prices three shapes: 2.00 per GPU-hour
    assert [rows[s].price_per_hour for s in ("VM.GPU.A10.1", "VM.GPU.A10.2", "BM.GPU.A10.4")] == [2.0, 4.0, 8.0]

    assert (h100.purchase_option, h100.zone, h100.source_currency, h100.source_price_per_hour) == (
        "on_demand", "", "USD", 80.0)
    assert (h100.billing_granularity_s, h100.minimum_charge_s) == (1, 60)
    assert h100.price_observed_at == datetime(2026, 1, 5, 13, 27, 33, 583000, tzinfo=timezone.utc)  # "…33.583Z"
    assert h100.gpu_name_reported == "Oracle Cloud Infrastructure - Compute - GPU - H100"
    assert json.loads(h100.provider_data) == {"part_number": "B98415", "usd_per_gpu_hour": 10,
                                              "metric": "GPU Per Hour", "service_category": "Compute - GPU"}

    [(host, req)] = server.requests
    assert (host, req.method, req.path, req.params) == (
        "apexapps.oracle.com", "GET", "/pls/apex/cetools/api/v1/products/", {"currencyCode": "USD"})


@pytest.mark.parametrize(
    "shape, model, exact",
    [
        ("BM.GPU.H100.8", "H100-SXM", True),
        ("BM.GPU.H200.8", "H200-SXM", True),
        ("BM.GPU.A100-v2.8", "A100-SXM4-80", True),
        ("BM.GPU4.8", "A100-SXM4-40", True),  # 40 GB A100 on the older host
        ("VM.GPU.A10.1", "A10", True),
        ("BM.GPU.L40S.4", "L40S", True),
        ("BM.GPU.B200.8", "B200", True),
        ("BM.GPU.GB200.4", "GB200", True),
        ("BM.GPU.GB300.4", "GB300", True),
        ("BM.GPU.MI300X.8", "MI300X", True),
        ("VM.GPU3.4", "V100-SXM2-16", False),  # "Tesla V100 16 GB": SXM2 or PCIe not stated
        ("VM.GPU2.1", "P100", True),
    ],
)
def test_oci_shapes_map_to_canonical_gpus(shape: str, model: str, exact: bool) -> None:
    batch = oci.parse_products([body()])
    row = by_shape(batch)[shape]
    assert (row.gpu_model, row.gpu_variant_exact) == (model, exact)


def test_what_is_not_a_gpu_offer_is_counted_or_quarantined_with_its_reason() -> None:
    batch = oci.parse_products([body()])
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert set(reasons) == {"B109480", "B93544", "B111758"}
    assert reasons["B109480"] == ("B109480 (OCI - Compute - GPU - H100T): priced per GPU-hour, but no OCI shape "
                                  "is documented for this part")
    assert "no OCI shape is documented" in reasons["B111758"]  # MI355X: no shape name verified
    [note] = batch.notes
    # 50 parts: 24 in a "Compute - GPU" category, 8 of them NVIDIA AI Enterprise licences; 26 other services
    assert note == ("oci: 50 parts listed, 16 GPU compute parts; skipped: 8 NVIDIA AI Enterprise licence "
                    "(software, not a GPU), 26 not GPU compute")


def test_storage_and_egress_come_from_their_parts() -> None:
    batch = oci.parse_products([body()])
    storage = {s.storage_class: s.usd_per_gb_month for s in batch.storage}
    assert storage == {"block-lower-cost": 0.0255, "block-balanced": 0.0425}  # 0.0255 + 10 x 0.0017
    tiers = sorted((e.tier_start_gb, e.tier_end_gb, e.usd_per_gb) for e in batch.egress)
    assert tiers == [(0.0, 10240.0, 0.0), (10240.0, None, 0.0085)]
    assert {e.region for e in batch.egress} | {s.region for s in batch.storage} == {"global"}


# -- bad records: each counted, with its reason ------------------------------------

def test_bad_gpu_parts_are_quarantined_and_the_rest_still_load() -> None:
    doc = body()
    item(doc, "B98415")["currencyCodeLocalizations"][0]["prices"][0]["value"] = -10  # H100 negative
    item(doc, "B109479")["currencyCodeLocalizations"][0]["currencyCode"] = "EUR"  # L40S in euros
    del item(doc, "B95907")["currencyCodeLocalizations"][0]["prices"][0]["value"]  # A100 v2 without a value
    item(doc, "B110519")["currencyCodeLocalizations"][0]["prices"][0]["value"] = "ten"  # H200 not a number
    twin = copy.deepcopy(item(doc, "B110978"))
    twin["currencyCodeLocalizations"][0]["prices"][0]["value"] = 17.5
    doc["items"].append(twin)  # B200 listed twice
    batch = oci.parse_products([doc])
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert "price_per_hour" in reasons["BM.GPU.H100.8/global"] and "positive" in reasons["BM.GPU.H100.8/global"]
    assert reasons["B109479"] == "B109479 (Compute - GPU - L40S): price in EUR, not USD; no conversion is configured"
    assert reasons["B95907"] == "B95907 (Compute - GPU - A100 - v2): schema: a PAY_AS_YOU_GO price lacks 'value'"
    assert reasons["B110519"] == "B110519 (OCI - Compute - GPU - H200): value 'ten' is not a number"
    assert reasons["B110978"].startswith("duplicate partNumber B110978")
    assert len(batch.quarantined) == 3 + 5  # the recording's own three, and these five
    rows = by_shape(batch)
    assert not {"BM.GPU.H100.8", "BM.GPU.L40S.4", "BM.GPU.A100-v2.8", "BM.GPU.H200.8"} & set(rows)
    assert rows["BM.GPU.B200.8"].price_per_hour == 112.0  # the first listing is kept, the second refused
    assert len(batch.offers) == 18 - 4


def test_nan_price_is_quarantined_by_the_record_contract() -> None:
    doc = body()
    item(doc, "B95909")["currencyCodeLocalizations"][0]["prices"][0]["value"] = math.nan
    batch = oci.parse_products([doc])
    refs = {q.source_ref for q in batch.quarantined}
    assert {"VM.GPU.A10.1/global", "VM.GPU.A10.2/global", "BM.GPU.A10.4/global"} <= refs


def test_answer_without_items_is_schema_drift_and_an_empty_list_is_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="oci: price list answer lacks the 'items' list"):
        oci.parse_products([{"code": "404", "message": "not found"}])
    with pytest.raises(SourceError, match="oci: the price list returned no items"):
        oci.parse_products([{"items": [], "lastUpdated": "2026-01-05T13:27:33.583Z"}])


# -- the client: paging, errors, retries ----------------------------------------------

def test_a_next_link_is_followed_on_the_same_host(replay: Any) -> None:
    doc = body()
    first = {"items": doc["items"][:25], "lastUpdated": doc["lastUpdated"],
             "links": [{"rel": "next", "href": "https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/"
                                               "?currencyCode=USD&offset=25"}]}
    second = {"items": doc["items"][25:], "lastUpdated": doc["lastUpdated"]}

    def pages(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        page = second if req.params.get("offset") == "25" else first
        return 200, JSON, json.dumps(page).encode()

    server = replay("oci", hook=pages)
    batch = oci.fetch(replay_context(server, "oci"))
    assert len(batch.offers) == 18
    assert [r.params for _, r in server.requests] == [{"currencyCode": "USD"}, {"currencyCode": "USD", "offset": "25"}]


def test_a_next_link_to_another_host_is_refused(replay: Any) -> None:
    page = {"items": body()["items"], "links": [{"rel": "next", "href": "https://elsewhere.example/products/"}]}
    server = replay("oci", hook=lambda host, req, ex: (200, JSON, json.dumps(page).encode()))
    with pytest.raises(SourceError, match="the next-page link points outside apexapps.oracle.com"):
        oci.fetch(replay_context(server, "oci"))
    assert len(server.requests) == 1  # never followed


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("oci", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="oci: apexapps.oracle.com/pls/apex/cetools/api/v1/products/ failed after 2"):
        oci.fetch(replay_context(server, "oci"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    server = replay("oci", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>maintenance</html>"))
    with pytest.raises(SourceError, match="oci: .* did not answer JSON"):
        oci.fetch(replay_context(server, "oci"))


def test_provider_declaration() -> None:
    assert oci.PROVIDER.name == oci.NAME == "oci"
    assert oci.PROVIDER.secret_env_vars == () and not oci.PROVIDER.credentials_required  # a public price list
    assert oci.PROVIDER.source_kind == "api"
    assert oci.PROVIDER.facts.kind == "hyperscaler"
