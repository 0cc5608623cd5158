"""CUDO Compute adapter: the real client against the replayed machine-types listing.

Hand-checked prices (adapters/recordings/cudo/README.md): SkyPilot's catalog generated from this
endpoint (skypilot-catalog catalogs/v8/cudo/vms.csv) prices 1 GPU + 2 vCPU + 4 GiB of
sapphire-rapids-h100 at 2.5354 USD/h in ca-montreal-3 and 1.8214 in no-kristiansand-1, of
epyc-genoa-a100-pcie at 1.5294 and of ice-lake-rtx-a6000 at 0.4698 in se-stockholm-1: the shape
of the adapter's one-GPU VM, so its prices must be the same.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuledger.adapters import cudo
from gpuledger.adapters.base import SchemaDriftError, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.conftest import replay_context

BODY = BUNDLED_RECORDINGS / "cudo" / "machine-types-2.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cudo.API_KEY_ENV, raising=False)


def body() -> dict[str, Any]:
    return json.loads(BODY.read_text())


def machine(doc: dict[str, Any], name: str, dc: str) -> dict[str, Any]:
    return next(m for m in doc["machineTypes"] if (m["machineType"], m["dataCenterId"]) == (name, dc))


def rows(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.instance_type, o.region): o for o in batch.offers}


def test_replayed_machine_types_price_a_one_gpu_vm_as_the_catalog_does(replay: Any) -> None:
    server = replay("cudo")
    batch = cudo.fetch(replay_context(server, "cudo"))
    r = rows(batch)
    assert batch.counts() == {"offers": 7, "egress": 0, "storage": 0, "quarantined": 1}
    assert r[("sapphire-rapids-h100", "ca-montreal-3")].price_per_hour == 2.5354
    assert r[("sapphire-rapids-h100", "no-kristiansand-1")].price_per_hour == 1.8214
    assert r[("epyc-genoa-a100-pcie", "no-kristiansand-1")].price_per_hour == 1.5294
    assert r[("ice-lake-rtx-a6000", "se-stockholm-1")].price_per_hour == 0.4698
    [(host, req)] = server.requests
    assert (host, req.method, req.path) == ("rest.compute.cudo.org", "GET", "/v1/vms/machine-types-2")
    assert "authorization" not in req.headers  # the listing needs no key


def test_the_vm_is_one_gpu_with_the_fewest_vcpus_and_least_ram_allowed() -> None:
    r = rows(cudo.parse_machine_types(body()))
    h100 = r[("sapphire-rapids-h100", "ca-montreal-3")]
    assert (h100.gpu_count, h100.vcpus, h100.ram_gb, h100.gpu_model, h100.gpu_variant_exact) == (
        1, 2, 4, "H100-SXM", True)
    assert (h100.available, h100.available_count, json.loads(h100.provider_data)["gpu_price_hr"]) == (True, 4, 2.5)
    assert (h100.billing_granularity_s, h100.minimum_charge_s) == (None, None)  # not documented
    l40s = r[("epyc-genoa-l40s-graphics", "no-kristiansand-1")]
    assert (l40s.gpu_model, l40s.available, l40s.available_count) == ("L40S", False, 0)
    assert r[("ice-lake-a40-compute", "ca-montreal-3")].gpu_model == "A40"
    # a type asking 4 vCPUs per GPU and 1 GiB per vCPU at most: 4 vCPUs and 4 GiB beside the GPU
    doc = body()
    machine(doc, "ice-lake-rtx-a6000", "se-stockholm-1").update(minVcpuPerGpu=4, maxVcpuPerMemoryGib=1)
    a6000 = rows(cudo.parse_machine_types(doc))[("ice-lake-rtx-a6000", "se-stockholm-1")]
    assert (a6000.vcpus, a6000.ram_gb, a6000.price_per_hour) == (4, 4, round(0.45 + 4 * 0.0025 + 4 * 0.0037, 6))


def test_what_is_not_loaded_is_quarantined_or_counted() -> None:
    doc = body()
    machine(doc, "sapphire-rapids-h100", "ca-montreal-3")["gpuPriceHr"]["value"] = "-2.500000"
    del machine(doc, "ice-lake-a40-compute", "ca-montreal-3")["vcpuPriceHr"]
    machine(doc, "epyc-genoa-a100-pcie", "no-kristiansand-1")["gpuPriceHr"]["value"] = "NaN"
    doc["machineTypes"].append(copy.deepcopy(machine(doc, "ice-lake-rtx-a6000", "se-stockholm-1")))
    batch = cudo.parse_machine_types(doc)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["intel-ice-lake-a800-pci/us-carlsbad-1"].startswith("gpu: unknown GPU name 'A800 80GB PCIe'")
    assert reasons["sapphire-rapids-h100/ca-montreal-3"] == "gpuPriceHr.value -2.5 is not a positive price"
    assert reasons["epyc-genoa-a100-pcie/no-kristiansand-1"] == "gpuPriceHr.value nan is not a positive price"
    assert reasons["ice-lake-a40-compute/ca-montreal-3"] == "schema: lacks 'vcpuPriceHr'"
    assert reasons["ice-lake-rtx-a6000/se-stockholm-1"].startswith("duplicate machine type ice-lake-rtx-a6000")
    assert batch.notes == ["1 machine types without a GPU skipped"]
    assert len(batch.offers) == 7 - 3


def test_a_changed_or_empty_answer_fails(replay: Any) -> None:
    with pytest.raises(SchemaDriftError, match="cudo: .*'machineTypes'"):
        cudo.parse_machine_types({"machine_types": []})
    with pytest.raises(SourceError, match="cudo: the machine-types answer returned no machine types"):
        cudo.parse_machine_types({"machineTypes": []})
    server = replay("cudo", hook=lambda host, req, ex: (500, {}, b"upstream error"))
    with pytest.raises(SourceError, match="cudo: rest.compute.cudo.org/v1/vms/machine-types-2 failed after 2"):
        cudo.fetch(replay_context(server, "cudo"))


def test_the_key_is_sent_as_a_bearer_token_when_set(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cudo.API_KEY_ENV, "cudo-test-key-456")
    server = replay("cudo")
    assert len(cudo.fetch(replay_context(server, "cudo")).offers) == 7
    assert server.requests[0][1].headers["authorization"] == "Bearer cudo-test-key-456"


def test_provider_declaration() -> None:
    spec = cudo.PROVIDER
    assert (spec.name, spec.source_kind, spec.facts.kind, spec.credentials_required) == ("cudo", "api", "gpu_cloud",
                                                                                         False)
    assert spec.secret_env_vars == ("CUDO_API_KEY",)
