"""DigitalOcean adapter: the real httpx client against the replayed sizes API, and the parser's rules.

Prices checked by hand on https://docs.digitalocean.com/products/droplets/details/pricing/
("Validated on 28 May 2026", GPU Droplet Pricing), read 2026-12-01: NVIDIA H100 $3.39 per hour,
H100 (8x) $23.92, L40s $1.57, AMD MI300X $1.99, MI300X (8x) $15.92; transfer beyond the pooled
allowance $0.01 per GiB. Volumes $0.10 per GiB-month as third parties quote
docs.digitalocean.com/products/volumes/details/pricing/ (adapters/recordings/digitalocean/README.md).
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from gpuledger.adapters import digitalocean
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

RECORDING = BUNDLED_RECORDINGS / "digitalocean" / "sizes-page-1.json"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(autouse=True)
def no_real_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(digitalocean.TOKEN_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def size(doc: dict[str, Any], slug: str) -> dict[str, Any]:
    return next(s for s in doc["sizes"] if s["slug"] == slug)


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.region): o for o in batch.offers}


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx_gives_a_row_per_region_and_one_unavailable_row_when_sold_out(replay: Any) -> None:
    server = replay("digitalocean")
    batch = digitalocean.fetch(replay_context(server, "digitalocean"))
    assert batch.counts() == {"offers": 8, "egress": 1, "storage": 1, "quarantined": 0}
    got = rows(batch)
    assert len(got) == 8

    # The pricing page's figures (module docstring)
    assert got[("gpu-h100x1-80gb", "tor1")].price_per_hour == 3.39
    h100x8 = got[("gpu-h100x8-640gb", "nyc2")]
    assert h100x8.price_per_hour == 23.92 and math.isclose(h100x8.price_per_gpu_hour, 2.99)
    assert got[("gpu-l40sx1-48gb", "global")].price_per_hour == 1.57
    assert got[("gpu-mi300x1-192gb", "atl1")].price_per_hour == 1.99
    assert got[("gpu-mi300x8-1536gb", "atl1")].price_per_hour == 15.92

    # 640 GiB of VRAM is the size's total: 80 per GPU
    assert (h100x8.gpu_model, h100x8.gpu_variant_exact, h100x8.gpu_count, h100x8.gpu_memory_gb,
            h100x8.total_gpu_memory_gb) == ("H100-SXM", False, 8, 80, 640)
    assert (h100x8.vcpus, h100x8.ram_gb, h100x8.local_disk_gb) == (160, 1920, 2046)
    assert (h100x8.billing_granularity_s, h100x8.minimum_charge_s, h100x8.source_currency, h100x8.zone,
            h100x8.purchase_option) == (1, 60, "USD", "", "on_demand")
    data = json.loads(h100x8.provider_data)
    assert (data["transfer_tb_per_month"], data["scratch_disk_gib"], data["gpu_model_reported"]) == (
        60.0, 40960, "nvidia_h100")

    # Availability: the regions that offer the size now; none, one "global" row not available
    assert sorted(r for s, r in got if s == "gpu-h100x1-80gb") == ["nyc2", "tor1"]
    assert all(o.available and o.availability_level == "region offers the size"
               for o in batch.offers if o.region != "global")
    l40s = got[("gpu-l40sx1-48gb", "global")]
    assert (l40s.available, l40s.available_count, l40s.availability_level) == (
        False, 0, "no region offers the size now")

    [storage] = batch.storage
    assert (storage.region, storage.storage_class) == ("global", "volume")
    assert math.isclose(storage.usd_per_gb_month, 0.10 * 1e9 / 2**30, abs_tol=1e-6)  # 0.10 per GiB
    [egress] = batch.egress
    assert (egress.destination, egress.tier_start_gb, egress.tier_end_gb) == ("internet", 0.0, None)
    assert math.isclose(egress.usd_per_gb, 0.01 * 1e9 / 2**30, abs_tol=1e-6)  # 0.01 per GiB
    assert batch.notes == ["digitalocean: 9 sizes listed, 7 GPU sizes; skipped: 2 CPU-only sizes"]

    [(host, req)] = server.requests
    assert (host, req.method, req.path, req.params) == ("api.digitalocean.com", "GET", "/v2/sizes",
                                                        {"page": "1", "per_page": "200"})
    assert "authorization" not in req.headers  # replay needs no token, none is invented


@pytest.mark.parametrize(
    "slug, model, exact",
    [
        ("gpu-4000adax1-20gb", "RTX-4000-Ada", True),
        ("gpu-6000adax1-48gb", "RTX-6000-Ada", True),
        ("gpu-h100x1-80gb", "H100-SXM", False),  # "nvidia_h100": SXM or PCIe is not stated
        ("gpu-l40sx1-48gb", "L40S", True),
        ("gpu-mi300x8-1536gb", "MI300X", True),
    ],
)
def test_digitalocean_models_map_to_canonical_gpus(slug: str, model: str, exact: bool) -> None:
    found = [o for o in digitalocean.parse_sizes([body()]).offers if o.instance_type == slug]
    assert found and {(o.gpu_model, o.gpu_variant_exact) for o in found} == {(model, exact)}


def test_a_size_not_available_for_new_droplets_is_loaded_as_not_available() -> None:
    doc = body()
    size(doc, "gpu-h100x1-80gb")["available"] = False
    got = rows(digitalocean.parse_sizes([doc]))
    for region in ("nyc2", "tor1"):
        row = got[("gpu-h100x1-80gb", region)]
        assert (row.available, row.available_count) == (False, 0)
        assert row.availability_level == "region listed, but the size is not available for new Droplets"


def test_bad_gpu_sizes_are_quarantined_with_their_reason_and_the_rest_load() -> None:
    doc = body()
    size(doc, "gpu-h100x1-80gb")["price_hourly"] = -3.39
    size(doc, "gpu-6000adax1-48gb")["price_hourly"] = float("nan")
    size(doc, "gpu-mi300x1-192gb")["gpu_info"]["model"] = "amd_mi999x"
    del size(doc, "gpu-mi300x8-1536gb")["price_hourly"]
    size(doc, "gpu-l40sx1-48gb")["gpu_info"]["vram"]["unit"] = "gb"
    size(doc, "gpu-h100x8-640gb")["price_hourly"] = "23,92"
    doc["sizes"].append(dict(copy.deepcopy(size(doc, "gpu-4000adax1-20gb")), price_hourly=0.95))
    batch = digitalocean.parse_sizes([doc])
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert "price_per_hour" in reasons["gpu-h100x1-80gb/nyc2"] and "positive" in reasons["gpu-h100x1-80gb/nyc2"]
    assert "finite" in reasons["gpu-6000adax1-48gb/tor1"]
    assert reasons["gpu-mi300x1-192gb"].startswith("gpu-mi300x1-192gb: gpu: unknown GPU name 'amd_mi999x'")
    assert reasons["gpu-mi300x8-1536gb"] == "gpu-mi300x8-1536gb: lacks 'price_hourly'"
    assert reasons["gpu-l40sx1-48gb"] == "gpu-l40sx1-48gb: gpu_info vram unit 'gb' is not 'gib'"
    assert reasons["gpu-h100x8-640gb"] == "gpu-h100x8-640gb: price_hourly '23,92' is not a number"
    assert reasons["gpu-4000adax1-20gb"].startswith("duplicate size slug gpu-4000adax1-20gb")
    assert len(batch.quarantined) == 8  # the H100 in two regions
    assert [(o.instance_type, o.price_per_hour) for o in batch.offers] == [("gpu-4000adax1-20gb", 0.76)]


def test_answers_without_sizes_or_prices_are_schema_drift_and_an_empty_list_is_an_error() -> None:
    with pytest.raises(SchemaDriftError, match="digitalocean: /v2/sizes answer lacks the 'sizes' list"):
        digitalocean.parse_sizes([{"id": "unauthorized", "message": "Unable to authenticate you."}])
    drifted = body()
    for s in drifted["sizes"]:
        s["price_per_hour"] = s.pop("price_hourly")
    with pytest.raises(SchemaDriftError, match="digitalocean: every size in /v2/sizes lacks 'price_hourly'"):
        digitalocean.parse_sizes([drifted])
    with pytest.raises(SourceError, match="digitalocean: /v2/sizes returned no sizes"):
        digitalocean.parse_sizes([{"sizes": [], "links": {}, "meta": {"total": 0}}])


# -- the client: token, paging, errors ------------------------------------------------

def test_missing_token_in_live_mode_raises_before_any_request() -> None:
    ctx = SourceContext(provider="digitalocean", mode="live")
    with pytest.raises(MissingCredentialsError, match="digitalocean: DIGITALOCEAN_TOKEN is not set"):
        digitalocean.fetch(ctx)
    assert ctx.requests_made == 0


def test_token_is_sent_as_bearer_and_never_appears_in_errors(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(digitalocean.TOKEN_ENV, "dop_v1_secret456")
    unauthorized = json.dumps({"id": "unauthorized", "message": "Unable to authenticate you."}).encode()
    server = replay("digitalocean", hook=lambda host, req, ex: (401, JSON, unauthorized))
    with pytest.raises(SourceError) as err:
        digitalocean.fetch(replay_context(server, "digitalocean"))
    assert "digitalocean: HTTP 401" in str(err.value) and "Unable to authenticate you" in str(err.value)
    assert "dop_v1_secret456" not in str(err.value)
    assert server.requests[0][1].headers["authorization"] == "Bearer dop_v1_secret456"
    assert len(server.requests) == 1  # a 401 is not retried


def test_links_pages_next_is_followed(replay: Any) -> None:
    doc = body()
    first = {"sizes": doc["sizes"][:4], "meta": {"total": 9},
             "links": {"pages": {"next": "https://api.digitalocean.com/v2/sizes?page=2&per_page=200",
                                 "last": "https://api.digitalocean.com/v2/sizes?page=2&per_page=200"}}}
    second = {"sizes": doc["sizes"][4:], "meta": {"total": 9},
              "links": {"pages": {"first": "https://api.digitalocean.com/v2/sizes?page=1&per_page=200",
                                  "prev": "https://api.digitalocean.com/v2/sizes?page=1&per_page=200"}}}

    def pages(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 200, JSON, json.dumps(second if req.params.get("page") == "2" else first).encode()

    server = replay("digitalocean", hook=pages)
    batch = digitalocean.fetch(replay_context(server, "digitalocean"))
    assert len(batch.offers) == 8
    assert [r.params for _, r in server.requests] == [{"page": "1", "per_page": "200"},
                                                      {"page": "2", "per_page": "200"}]


@pytest.mark.parametrize("nxt, message", [
    ("https://elsewhere.example/v2/sizes?page=2", "the next-page link points outside api.digitalocean.com"),
    ("https://api.digitalocean.com/v2/droplets?page=2", "digitalocean: the sizes' next page is another path"),
    # the first page again: read twice at most, then refused as a loop
    ("https://api.digitalocean.com/v2/sizes?page=1&per_page=200",
     "digitalocean: /v2/sizes: the next page asked for is one already read"),
])
def test_a_next_link_that_leads_elsewhere_or_back_is_refused(replay: Any, nxt: str, message: str) -> None:
    page = dict(body(), links={"pages": {"next": nxt}})
    server = replay("digitalocean", hook=lambda host, req, ex: (200, JSON, json.dumps(page).encode()))
    with pytest.raises(SourceError, match=message):
        digitalocean.fetch(replay_context(server, "digitalocean"))
    assert len(server.requests) <= 2


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("digitalocean", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="digitalocean: api.digitalocean.com/v2/sizes failed after 2 attempts"):
        digitalocean.fetch(replay_context(server, "digitalocean"))
    assert len(server.requests) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    server = replay("digitalocean", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>x</html>"))
    with pytest.raises(SourceError, match="digitalocean: .* did not answer JSON"):
        digitalocean.fetch(replay_context(server, "digitalocean"))


def test_provider_declaration() -> None:
    spec = digitalocean.PROVIDER
    assert spec.name == digitalocean.NAME == "digitalocean"
    assert spec.secret_env_vars == ("DIGITALOCEAN_TOKEN",) and spec.credentials_required
    assert (spec.facts.billing_granularity_s, spec.facts.minimum_charge_s) == (1, 60)
    assert spec.anomaly.min_row_ratio == 0.2
