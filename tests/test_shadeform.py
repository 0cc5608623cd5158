"""Shadeform adapter: the real client against the replayed recording, the clouds it resells said
in operated_by, and no offer of a cloud that gpuledger loads from the cloud's own source.

Hand-checked prices (checked 2026-12-01; adapters/recordings/shadeform/README.md): Shadeform's
Quickstart response example (docs.shadeform.ai/getting-started/quickstart, 2026-01-28:
massedcompute A6000 "hourly_price": 57 in kansascity-usa-1) and SkyPilot's catalogue of
Shadeform's API (skypilot-org/skypilot-catalog catalogs/v8/shadeform/vms.csv, commit 002363d:
denvr_A100-sxm4x8 11.2 calgary-canada-1, excesssupply_H200x8 32.0 tokyo-japan-5,
scaleway_H100 3.3 paris-france-1, crusoe_L40Sx8 12.0 culpeper-usa-1).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import registry, shadeform
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from gpuledger.warehouse.store import close_writer, load_outcome, open_writer
from tests.builders import scraped
from tests.conftest import replay_context

RECORDING = BUNDLED_RECORDINGS / "shadeform" / "instance-types.json"
# The registry as these tests assume it: the sources registered when this adapter was written.
# Pinned, so the expectations do not move when another cloud's own source is registered.
SOURCES = {name: registry.SOURCES[name] for name in (
    "aws", "azure", "coreweave", "gcp", "hyperstack", "lambda", "oci", "runpod", "shadeform", "vastai")}


@pytest.fixture(autouse=True)
def pinned_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(shadeform.API_KEY_ENV, raising=False)
    monkeypatch.setattr(registry, "SOURCES", dict(SOURCES))
    # The redaction caches the registry's secret variables: what it learns from the pinned
    # registry must not outlive the test.
    monkeypatch.setattr(registry, "_secret_env_vars", None)


def body() -> dict[str, Any]:
    return json.loads(RECORDING.read_text())


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.region): o for o in batch.offers}


def serve(replay: Any, doc: dict[str, Any]) -> Any:
    raw = json.dumps(doc).encode()
    return replay("shadeform", hook=lambda host, req, ex: (200, {"Content-Type": "application/json"}, raw))


# -- through the real client against the replay server ------------------------------

def test_fetch_gives_one_offer_per_region_at_the_published_prices(replay: Any) -> None:
    server = replay("shadeform")
    batch = shadeform.fetch(replay_context(server, "shadeform"))
    assert batch.counts() == {"offers": 20, "egress": 0, "storage": 0, "quarantined": 1}
    got = rows(batch)
    assert len(got) == 20  # (instance type, region) is unique

    # Quickstart example: "hourly_price": 57 (cents) for massedcompute A6000 in kansascity-usa-1
    a6000 = got[("massedcompute/A6000", "kansascity-usa-1")]
    assert (a6000.price_per_hour, a6000.source_currency, a6000.source_price_per_hour) == (0.57, "USD", 0.57)
    assert (a6000.gpu_model, a6000.gpu_count, a6000.vcpus, a6000.ram_gb, a6000.local_disk_gb) == (
        "RTX-A6000", 1, 6, 48, 256)
    # SkyPilot's catalogue: denvr_A100-sxm4x8 11.2, excesssupply_H200x8 32.0, scaleway_H100 3.3
    denvr = got[("denvr/A100_sxm4x8", "calgary-canada-1")]
    assert (denvr.price_per_hour, denvr.price_per_gpu_hour) == (11.2, 1.4)
    h200 = got[("excesssupply/H200x8", "tokyo-japan-5")]
    assert (h200.price_per_hour, h200.price_per_gpu_hour, h200.total_gpu_memory_gb) == (32.0, 4.0, 1128)
    assert got[("scaleway/H100", "paris-france-1")].price_per_hour == 3.3
    assert got[("crusoe/L40Sx8", "culpeper-usa-1")].price_per_hour == 12.0

    assert {o.purchase_option for o in batch.offers} == {"on_demand"}
    [(host, req)] = server.requests  # one answer holds every instance type: nothing to page through
    assert (host, req.method, req.path) == ("api.shadeform.ai", "GET", "/v1/instances/types")
    assert "x-api-key" not in req.headers  # replay needs no key, none is invented


def test_every_offer_names_the_cloud_that_runs_it(replay: Any) -> None:
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    assert {o.provider for o in batch.offers} == {"shadeform"}
    assert {o.operated_by for o in batch.offers} == {
        "massedcompute", "denvr", "paperspace", "excesssupply", "crusoe", "scaleway", "vultr"}
    for o in batch.offers:
        assert o.instance_type.startswith(o.operated_by + "/")
        assert json.loads(o.provider_data)["cloud"] == o.operated_by
    assert json.loads(rows(batch)[("massedcompute/A6000", "kansascity-usa-1")].provider_data) == {
        "cloud": "massedcompute", "shade_instance_type": "A6000", "cloud_instance_type": "gpu_1x_a6000",
        "hourly_price_cents": 57, "interconnect": "pcie", "nvlink": False, "deployment_type": "vm",
        "boot_time": {"min_boot_in_sec": 300, "max_boot_in_sec": 600},
        "region_display_name": "US, Kansas City, KS"}


def test_clouds_loaded_from_their_own_sources_are_skipped_and_counted(replay: Any) -> None:
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    # lambdalabs: 3 types in 2 regions each; hyperstack: 2 types in 1; runpod: 1 type in "any"
    assert batch.notes == [
        "2 offers run by hyperstack: skipped, hyperstack is loaded from its own source",
        "6 offers run by lambdalabs (lambda): skipped, lambda is loaded from its own source",
        "1 offer run by runpod: skipped, runpod is loaded from its own source",
    ]
    assert not {o.operated_by for o in batch.offers} & {"lambdalabs", "hyperstack", "runpod"}
    assert ("hyperstack/A6000", "montreal-canada-2") not in rows(batch)


def test_a_cloud_is_skipped_from_the_day_its_own_source_is_registered(replay: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # the names are what count here; any importable module stands in for the sources to come
    monkeypatch.setattr(registry, "SOURCES", dict(SOURCES, crusoe=SOURCES["lambda"], verda=SOURCES["lambda"]))
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    assert "crusoe" not in {o.operated_by for o in batch.offers}
    assert "3 offers run by crusoe: skipped, crusoe is loaded from its own source" in batch.notes
    assert len(batch.offers) == 17


def test_a_cloud_whose_own_source_is_not_registered_is_kept_as_shadeform(replay: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "SOURCES", {k: v for k, v in SOURCES.items() if k != "lambda"})
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    h100 = rows(batch)[("lambdalabs/H100_sxm5x8", "saltlakecity-usa-1")]
    assert (h100.provider, h100.operated_by, h100.price_per_hour) == ("shadeform", "lambdalabs", 31.92)
    assert (h100.gpu_model, h100.gpu_variant_exact, h100.interconnect) == ("H100-SXM", True, "NVSwitch")
    assert not any("lambdalabs" in n for n in batch.notes)
    assert len(batch.offers) == 26


@pytest.mark.parametrize("cloud, sources, expected", [
    ("lambdalabs", {"lambda"}, "lambda"),
    ("lambdalabs", {"lambdalabs"}, None),  # the table says which name loads Lambda
    ("datacrunch", {"verda"}, "verda"),
    ("verda", {"datacrunch"}, "datacrunch"),
    ("nebius", {"nebius"}, "nebius"),
    ("genesiscloud", {"genesiscloud"}, "genesiscloud"),  # not in the table: its own name
    ("massedcompute", set(SOURCES), None),
])
def test_shadeform_cloud_names_map_to_registry_names(cloud: str, sources: set[str], expected: str | None) -> None:
    assert shadeform.registered_source(cloud, sources) == expected


def test_the_availability_per_region_is_the_availability_signal(replay: Any) -> None:
    got = rows(shadeform.fetch(replay_context(replay("shadeform"), "shadeform")))
    assert got[("massedcompute/H100x2", "desmoines-usa-1")].available is True
    assert got[("massedcompute/H100x2", "kansascity-usa-1")].available is False  # listed, not available
    assert got[("crusoe/L40Sx8", "houston-usa-2")].available is False
    assert {(o.available_count, o.availability_level) for o in got.values()} == {(None, None)}  # a flag only


@pytest.mark.parametrize("itype, model, exact, interconnect", [
    ("massedcompute/A6000", "RTX-A6000", True, None),
    ("massedcompute/H100x2", "H100-PCIe", True, "PCIe"),  # "H100" over "pcie"
    ("massedcompute/A100_80G", "A100-PCIe-80", True, None),  # "A100_80G" over "pcie", 80 GB
    ("paperspace/A100_sxm4_80G", "A100-SXM4-80", True, None),  # "A100_80G" over "sxm4"
    ("denvr/A100_sxm4x8", "A100-SXM4-40", True, "NVSwitch"),  # "A100" over "sxm4", 40 GB
    ("excesssupply/H200x8", "H200-SXM", True, "NVSwitch"),
    ("crusoe/L40Sx8", "L40S", True, "PCIe"),
    ("scaleway/L4", "L4", True, None),
    ("vultr/A16x2", "A16", True, "PCIe"),
])
def test_gpu_names_map_to_canonical_models(replay: Any, itype: str, model: str, exact: bool,
                                           interconnect: str | None) -> None:
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    found = {(o.gpu_model, o.gpu_variant_exact, o.interconnect) for o in batch.offers if o.instance_type == itype}
    assert found == {(model, exact, interconnect)}


def test_an_ambiguous_gpu_is_quarantined_not_guessed(replay: Any) -> None:
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    [q] = batch.quarantined
    assert q.source_ref == "massedcompute/RTXPro6000"
    assert q.reason.startswith("gpu: unknown GPU name 'RTXPro6000'")
    assert json.loads(q.raw)["hourly_price"] == 219


def test_bad_records_are_quarantined_or_counted(replay: Any) -> None:
    doc = body()
    good = doc["instance_types"][0]

    def variant(**changes: Any) -> dict[str, Any]:
        record = json.loads(json.dumps(good))
        for key, value in changes.items():
            if key.startswith("config_"):
                record["configuration"][key[len("config_"):]] = value
            elif value is None:
                del record[key]
            else:
                record[key] = value
        return record

    doc["instance_types"] = [
        variant(shade_instance_type="NoPrice", hourly_price=None),
        variant(shade_instance_type="TextPrice", hourly_price="57"),
        variant(shade_instance_type="Negative", hourly_price=-57),
        variant(shade_instance_type="Euro", hourly_price=57, currency="EUR"),
        variant(shade_instance_type="CPU", config_num_gpus=0, config_gpu_type=""),
        variant(shade_instance_type="Nowhere", availability=[]),
        variant(cloud=None),
        good,
    ]
    batch = shadeform.fetch(replay_context(serve(replay, doc), "shadeform"))
    assert [(o.instance_type, o.region) for o in batch.offers] == [
        ("massedcompute/A6000", "kansascity-usa-1"), ("massedcompute/A6000", "desmoines-usa-1")]
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["massedcompute/NoPrice"] == "schema: massedcompute/NoPrice lacks 'hourly_price'"
    assert reasons["massedcompute/TextPrice"] == "hourly_price '57' is not a number"
    assert "must be positive" in reasons["massedcompute/Negative/kansascity-usa-1"]
    assert reasons["massedcompute/Euro"] == "price in EUR, not USD cents; no conversion is configured"
    assert reasons["?"] == "schema: an instance type lacks 'cloud'"
    assert len(batch.quarantined) == 6  # the negative price: one per region
    assert batch.notes == ["1 CPU-only instance types skipped", "1 instance types listing no region skipped"]


def test_an_empty_answer_fails_and_a_changed_one_is_schema_drift(replay: Any) -> None:
    with pytest.raises(SourceError, match="shadeform: instances/types returned no instance types"):
        shadeform.fetch(replay_context(serve(replay, {"instance_types": []}), "shadeform"))
    with pytest.raises(SchemaDriftError, match="shadeform: .*'instance_types'"):
        shadeform.fetch(replay_context(serve(replay, {"types": []}), "shadeform"))


def test_missing_key_in_live_mode_raises_before_any_request() -> None:
    ctx = SourceContext(provider="shadeform", mode="live")
    with pytest.raises(MissingCredentialsError, match="shadeform: SHADEFORM_API_KEY is not set"):
        shadeform.fetch(ctx)
    assert ctx.requests_made == 0


def test_key_is_sent_as_x_api_key_and_never_appears_in_errors(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shadeform.API_KEY_ENV, "sf_secret_abc123")
    server = replay("shadeform")
    assert len(shadeform.fetch(replay_context(server, "shadeform")).offers) == 20
    assert server.requests[0][1].headers["x-api-key"] == "sf_secret_abc123"

    def reject(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 401, {"Content-Type": "application/json"}, b'{"error": "Invalid API key sf_secret_abc123"}'

    server = replay("shadeform", hook=reject)
    with pytest.raises(SourceError) as err:
        shadeform.fetch(replay_context(server, "shadeform"))
    assert "shadeform: HTTP 401" in str(err.value) and "sf_secret_abc123" not in str(err.value)
    assert len(server.requests) == 1  # a 401 is not retried


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    server = replay("shadeform", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>login</html>"))
    with pytest.raises(SourceError, match="shadeform: .* did not answer JSON"):
        shadeform.fetch(replay_context(server, "shadeform"))


def test_the_warehouse_keeps_who_runs_each_offer(replay: Any, tmp_path: Path) -> None:
    batch = shadeform.fetch(replay_context(replay("shadeform"), "shadeform"))
    now = datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc)
    con = open_writer(tmp_path / "w.duckdb")
    try:
        report = load_outcome(con, scraped("shadeform", "replay", now, now, batch=batch), "r1", now=now)
        assert report.ok and report.rows_loaded == 20
        assert con.execute("select operated_by, count(*) from offers where provider = 'shadeform' "
                           "group by all order by 1").fetchall() == [
            ("crusoe", 3), ("denvr", 1), ("excesssupply", 1), ("massedcompute", 8), ("paperspace", 2),
            ("scaleway", 4), ("vultr", 1)]
        assert "6 offers run by lambdalabs (lambda): skipped" in con.execute(
            "select notes from scrape_runs where provider = 'shadeform'").fetchall()[0][0]
    finally:
        close_writer(con)


def test_provider_declaration() -> None:
    spec = shadeform.PROVIDER
    assert spec.name == shadeform.NAME == "shadeform" and spec.facts.kind == "aggregator"
    assert spec.secret_env_vars == ("SHADEFORM_API_KEY",) and spec.credentials_required
    assert spec.facts.billing_granularity_s == 3600 and spec.facts.minimum_charge_s is None
