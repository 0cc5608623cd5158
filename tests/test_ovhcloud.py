"""OVHcloud adapter: the public order catalog through httpx against the replay server.

Hand-checked prices: https://www.ovhcloud.com/en/public-cloud/prices/ (USD, excl. VAT) as transcribed
in public sources (adapters/recordings/ovhcloud/README.md, read 2026-12-05): h100-380 2.99, a100-180
3.07, l40s-90 1.80, l4-90 1.00, h200-1920 49.56 USD per hour.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import ovhcloud
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "ovhcloud" / "catalog-cloud-WE.json"


def catalog() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def addon(doc: dict[str, Any], code: str) -> dict[str, Any]:
    return next(a for a in doc["addons"] if a["planCode"] == code)


def test_fetch_through_httpx_prices_each_hourly_gpu_flavor_per_region(replay: Any) -> None:
    server = replay("ovhcloud")
    batch = ovhcloud.fetch(replay_context(server, "ovhcloud"))
    assert batch.counts() == {"offers": 9, "egress": 0, "storage": 0, "quarantined": 0}
    rows = {(o.instance_type, o.region): o for o in batch.offers}
    # Checked against the price page (see the module docstring): micro-cents / 10^8.
    assert rows["h100-380", "GRA11"].price_per_hour == 2.99
    assert rows["a100-180", "GRA11"].price_per_hour == 3.07
    assert rows["l40s-90", "BHS5"].price_per_hour == 1.80
    assert rows["l4-90", "GRA11"].price_per_hour == 1.00
    h200 = rows["h200-1920", "GRA11"]
    assert (h200.price_per_hour, h200.gpu_count, h200.gpu_model, h200.price_per_gpu_hour) == (49.56, 8, "H200-SXM", 6.195)
    h100 = rows["h100-380", "BHS5"]
    assert (h100.gpu_model, h100.gpu_variant_exact, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == (
        "H100-SXM", False, 80, 80)  # the catalog says "H100": the family, not the form factor
    assert (h100.vcpus, h100.ram_gb, h100.local_disk_gb, h100.network_gbps) == (30, 380, 4040, 8.0)
    assert (h100.source_currency, h100.billing_granularity_s, h100.purchase_option) == ("USD", 3600, "on_demand")
    assert rows["h100-760", "GRA11"].price_per_hour == 5.98 and rows["h100-760", "GRA11"].gpu_count == 2
    # l40s-90's hourly plan lists no region: its monthly plan's regions are the flavor's
    assert sorted(r for t, r in rows if t == "l40s-90") == ["BHS5", "GRA11"]
    assert batch.notes == ["ovhcloud: 9 GPU plans in the WE catalog; skipped: 1 Windows flavors, 2 monthly plans"]
    assert [(r.path, r.params) for _, r in server.requests] == [
        ("/1.0/order/catalog/public/cloud", {"ovhSubsidiary": "WE"})]
    assert "authorization" not in server.requests[0][1].headers  # no key: the catalog is public


def test_no_key_is_needed_live() -> None:
    assert ovhcloud.PROVIDER.secret_env_vars == () and not ovhcloud.PROVIDER.credentials_required
    assert ovhcloud.PROVIDER.facts.kind == "gpu_cloud"


def test_bad_plans_are_quarantined_and_the_rest_still_load() -> None:
    doc = catalog()
    addon(doc, "h100-380.consumption")["pricings"][0]["price"] = -299000000
    addon(doc, "a100-180.consumption")["pricings"][0]["price"] = math.nan
    addon(doc, "l4-90.consumption")["pricings"][0]["intervalUnit"] = "minute"
    addon(doc, "h100-760.consumption")["blobs"]["technical"]["gpu"]["model"] = "Z9000"
    twin = copy.deepcopy(addon(doc, "l40s-90.consumption"))
    twin["pricings"][0]["price"] = 199000000
    doc["addons"].append(twin)
    batch = ovhcloud.parse_catalog(doc)
    reasons = {(q.source_ref, q.reason) for q in batch.quarantined}
    assert {ref for ref, _ in reasons} == {"h100-380/GRA11", "h100-380/BHS5", "a100-180/GRA11",
                                          "l4-90.consumption", "h100-760/GRA11", "l40s-90.consumption"}
    why = dict(reasons)
    assert "positive" in why["h100-380/GRA11"] and "finite" in why["a100-180/GRA11"]
    assert why["l4-90.consumption"] == "l4-90.consumption: consumption priced per 'minute', not per hour"
    assert why["h100-760/GRA11"].startswith("gpu: unknown GPU name 'Z9000'")
    assert why["l40s-90.consumption"].startswith("duplicate plan l40s-90.consumption: listed again")
    assert [(o.instance_type, o.price_per_hour) for o in batch.offers if o.instance_type == "l40s-90"] == [
        ("l40s-90", 1.8), ("l40s-90", 1.8)]  # the first listing kept
    assert len(batch.offers) == 3


def test_a_catalog_in_another_currency_is_quarantined_never_stored_as_usd() -> None:
    doc = catalog()
    doc["locale"]["currencyCode"] = "EUR"
    batch = ovhcloud.parse_catalog(doc)
    assert batch.offers == [] and len(batch.quarantined) == 6
    assert {q.reason for q in batch.quarantined} == {"price in EUR, not USD; no conversion is configured"}


def test_a_changed_answer_is_schema_drift_and_no_gpu_flavor_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="lacks the 'addons' list"):
        ovhcloud.parse_catalog({"message": "Invalid subsidiary"})
    doc = catalog()
    for a in doc["addons"]:
        for p in a["pricings"]:
            p["amount"] = p.pop("price")
    with pytest.raises(SchemaDriftError, match="no hourly GPU plan has a 'price'"):
        ovhcloud.parse_catalog(doc)
    doc = catalog()
    doc["addons"] = [a for a in doc["addons"] if "gpu" not in a["blobs"]["technical"]]
    with pytest.raises(SourceError, match="the catalog returned no GPU flavors"):
        ovhcloud.parse_catalog(doc)


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("ovhcloud", hook=lambda host, req, ex: (503, {}, b"Service Unavailable"))
    with pytest.raises(SourceError, match="ovhcloud: ca.api.ovh.com/1.0/order/catalog/public/cloud failed after 2"):
        ovhcloud.fetch(replay_context(server, "ovhcloud"))
    assert len(server.requests) == 2
