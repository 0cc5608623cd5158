"""Lambda Cloud adapter: parsers on documented bodies, fetch through httpx against the replay server.

Hand-checked values come from Lambda's instances page as transcribed on 2026-09-20
(adapters/recordings/lambda/README.md) and Lambda's API reference example.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import lambdalabs
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

FIX = Path(__file__).parent / "fixtures" / "lambda"
RECORDING = BUNDLED_RECORDINGS / "lambda" / "instance-types.json"


@pytest.fixture(autouse=True)
def no_real_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(lambdalabs.API_KEY_ENV, raising=False)


def by_key(batch: Any) -> dict[tuple[str, str], Any]:
    return {(o.region, o.instance_type): o for o in batch.offers}


@pytest.mark.parametrize(
    "text, name, memory_gb, form",
    [
        ("H100 (80 GB SXM5)", "H100", 80.0, "SXM5"),
        ("A10 (24 GB PCIe)", "A10", 24.0, "PCIe"),
        ("Tesla V100 (16 GB)", "Tesla V100", 16.0, None),
        ("GH200 (96 GB)", "GH200", 96.0, None),
        ("RTX A6000 (48 GB)", "RTX A6000", 48.0, None),
        ("B200 (180 GB SXM6)", "B200", 180.0, "SXM6"),
    ],
)
def test_gpu_description_is_split_into_name_memory_and_form(text: str, name: str, memory_gb: float,
                                                             form: str | None) -> None:
    gpu = lambdalabs.parse_gpu_description(text)
    assert (gpu.name, gpu.memory_gb, gpu.form) == (name, memory_gb, form)


def test_gpu_description_without_memory_is_rejected() -> None:
    with pytest.raises(ValueError, match="Mystery"):
        lambdalabs.parse_gpu_description("Mystery accelerator")


@pytest.mark.parametrize(
    "itype, model, exact",
    [
        ("gpu_1x_a100", "A100-SXM4-40", False),  # "A100 (40 GB)": no form factor, so not exact
        ("gpu_1x_a100_sxm4", "A100-SXM4-40", True),
        ("gpu_8x_a100_80gb_sxm4", "A100-SXM4-80", True),
        ("gpu_1x_rtx6000", "Quadro-RTX-6000", True),  # 24 GB "RTX 6000" is the Turing Quadro
        ("gpu_1x_gh200", "GH200-96", True),
        ("gpu_8x_v100", "V100-SXM2-16", False),  # "Tesla V100 (16 GB)": SXM2 vs PCIe not stated
        ("gpu_8x_b200_sxm6", "B200", True),
        ("gpu_1x_h100_pcie", "H100-PCIe", True),
        ("gpu_1x_a6000", "RTX-A6000", True),
    ],
)
def test_lambda_names_map_to_canonical_gpus(itype: str, model: str, exact: bool) -> None:
    batch = lambdalabs.parse_instance_types(json.loads(RECORDING.read_text()))
    rows = [o for o in batch.offers if o.instance_type == itype]
    assert rows and {(o.gpu_model, o.gpu_variant_exact) for o in rows} == {(model, exact)}


def test_docs_example_gpu_is_quarantined_not_guessed() -> None:
    doc = json.loads((FIX / "docs_example_instance_types.json").read_text())
    batch = lambdalabs.parse_instance_types(doc)
    assert batch.offers == []
    [q] = batch.quarantined
    assert q.source_ref == "gpu_8x_example" and q.reason.startswith("gpu: unknown GPU name 'Example GPU SXM4'")
    assert json.loads(q.raw)["instance_type"]["price_cents_per_hour"] == 1592


def test_edge_cases_quarantine_bad_price_missing_field_and_odd_description() -> None:
    batch = lambdalabs.parse_instance_types(json.loads((FIX / "edge_cases.json").read_text()))
    assert batch.offers == []  # the CPU-only type is out of scope, the rest is quarantined
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert set(reasons) == {"gpu_1x_h100_sxm5/us-south-1", "gpu_1x_a10", "gpu_1x_mystery"}
    assert "price_per_hour" in reasons["gpu_1x_h100_sxm5/us-south-1"]
    assert reasons["gpu_1x_a10"] == "schema: gpu_1x_a10 lacks 'price_cents_per_hour'"
    assert reasons["gpu_1x_mystery"].startswith("gpu: gpu_description 'Mystery accelerator'")


def test_response_without_data_is_schema_drift() -> None:
    with pytest.raises(SchemaDriftError, match="lambda: .*'data'"):
        lambdalabs.parse_instance_types({"error": {"code": "global/unknown"}})


def test_recording_specs_agree_with_the_skypilot_catalog() -> None:
    """Where Lambda has not changed a type, the recording's specs equal the third-party catalog's."""
    with open(FIX / "lambda_v7_vms_gpu_3regions.csv", newline="") as f:
        catalog = {r["InstanceType"]: r for r in csv.DictReader(f)}
    data = json.loads(RECORDING.read_text())["data"]
    for itype in ("gpu_1x_rtx6000", "gpu_1x_a6000", "gpu_1x_gh200", "gpu_8x_a100_80gb_sxm4"):
        specs = data[itype]["instance_type"]["specs"]
        row = catalog[itype]
        assert (specs["vcpus"], specs["memory_gib"], specs["gpus"]) == (
            float(row["vCPUs"]), float(row["MemoryGiB"]), float(row["AcceleratorCount"]))


# -- through the real client against the replay server ------------------------------

def test_fetch_through_httpx_gives_per_region_rows_and_a_global_row_when_sold_out(replay: Any) -> None:
    server = replay("lambda")
    batch = lambdalabs.fetch(replay_context(server, "lambda"))
    assert batch.counts() == {"offers": 27, "egress": 1, "storage": 1, "quarantined": 0}
    rows = by_key(batch)
    assert len(rows) == 27  # (region, instance_type) is unique

    h100 = rows[("us-south-1", "gpu_8x_h100_sxm5")]
    assert h100.price_per_hour == 31.92 and h100.price_per_gpu_hour == 3.99  # 3192 cents; 3.99/GPU
    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == ("H100-SXM", 8, 80, 640)
    assert (h100.vcpus, h100.ram_gb, h100.local_disk_gb, h100.interconnect) == (208, 1800, 22528, "NVSwitch")
    assert (h100.available, h100.availability_level, h100.purchase_option, h100.zone) == (
        True, "capacity", "on_demand", "")
    assert (h100.billing_granularity_s, h100.minimum_charge_s, h100.source_currency) == (60, 60, "USD")
    assert json.loads(h100.provider_data) == {
        "price_cents_per_hour": 3192, "description": "8x H100 (80 GB SXM5)",
        "regions_with_capacity": ["us-midwest-1", "us-south-1"], "region_description": "Texas, USA"}
    assert ("us-midwest-1", "gpu_8x_h100_sxm5") in rows

    gh200 = rows[("global", "gpu_1x_gh200")]  # no region has capacity: one row, not available
    assert (gh200.price_per_hour, gh200.available, gh200.available_count) == (2.29, False, 0)
    assert gh200.availability_level == "no capacity in any region"
    assert not any(o.instance_type == "gpu_1x_gh200" and o.region != "global" for o in batch.offers)

    assert rows[("us-west-2", "gpu_1x_a100")].gpu_variant_exact is False
    assert rows[("us-south-1", "gpu_1x_rtx6000")].price_per_hour == 0.69
    assert sorted(r for r, t in rows if t == "gpu_1x_a6000") == ["europe-central-1", "us-east-1", "us-west-1"]
    assert sum(not o.available for o in batch.offers) == 6

    [storage] = batch.storage
    assert (storage.region, storage.storage_class, storage.usd_per_gb_month) == ("global", "filesystem", 0.20)
    [egress] = batch.egress
    assert (egress.destination, egress.tier_start_gb, egress.usd_per_gb) == ("internet", 0.0, 0.0)
    [(host, req)] = server.requests
    assert (host, req.method, req.path) == ("cloud.lambda.ai", "GET", "/api/v1/instance-types")
    assert "authorization" not in req.headers  # replay needs no key, none is invented


def test_unknown_gpu_reaches_quarantine_through_the_client(replay: Any) -> None:
    body = (FIX / "docs_example_instance_types.json").read_bytes()
    server = replay("lambda", hook=lambda host, req, ex: (200, {"Content-Type": "application/json"}, body))
    batch = lambdalabs.fetch(replay_context(server, "lambda"))
    assert batch.offers == [] and [q.source_ref for q in batch.quarantined] == ["gpu_8x_example"]


def test_missing_key_in_live_mode_raises_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = SourceContext(provider="lambda", mode="live")
    with pytest.raises(MissingCredentialsError, match="lambda: LAMBDA_API_KEY is not set"):
        lambdalabs.fetch(ctx)
    assert ctx.requests_made == 0


def test_key_is_sent_as_bearer_and_never_appears_in_errors(replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(lambdalabs.API_KEY_ENV, "secret_abc123")
    unauthorized = json.dumps({"error": {"code": "global/invalid-api-key",
                                         "message": "API key was invalid, expired, or deleted.",
                                         "suggestion": "Check your API key or create a new one, then try again."}})

    def reject(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        return 401, {"Content-Type": "application/json"}, unauthorized.encode()

    server = replay("lambda", hook=reject)
    with pytest.raises(SourceError) as err:
        lambdalabs.fetch(replay_context(server, "lambda"))
    assert "lambda: HTTP 401" in str(err.value) and "invalid-api-key" in str(err.value)
    assert "secret_abc123" not in str(err.value)
    assert server.requests[0][1].headers["authorization"] == "Bearer secret_abc123"
    assert len(server.requests) == 1  # a 401 is not retried


def test_server_errors_are_retried_then_raised(replay: Any) -> None:
    server = replay("lambda", hook=lambda host, req, ex: (500, {}, b"internal error"))
    with pytest.raises(SourceError, match="lambda: cloud.lambda.ai/api/v1/instance-types failed after 2 attempts"):
        lambdalabs.fetch(replay_context(server, "lambda"))
    assert len(server.requests) == 2


def test_one_503_then_success(replay: Any) -> None:
    calls: list[int] = []

    def flaky(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes] | None:
        calls.append(1)
        return (503, {"Retry-After": "0"}, b"busy") if len(calls) == 1 else None

    server = replay("lambda", hook=flaky)
    assert len(lambdalabs.fetch(replay_context(server, "lambda")).offers) == 27
    assert len(calls) == 2


def test_non_json_answer_is_a_source_error(replay: Any) -> None:
    server = replay("lambda", hook=lambda host, req, ex: (200, {"Content-Type": "text/html"}, b"<html>login</html>"))
    with pytest.raises(SourceError, match="lambda: .* did not answer JSON"):
        lambdalabs.fetch(replay_context(server, "lambda"))


def test_provider_declaration() -> None:
    assert lambdalabs.PROVIDER.name == lambdalabs.NAME == "lambda"
    assert lambdalabs.PROVIDER.secret_env_vars == ("LAMBDA_API_KEY",) and lambdalabs.PROVIDER.credentials_required
    assert (lambdalabs.PROVIDER.facts.billing_granularity_s, lambdalabs.PROVIDER.facts.minimum_charge_s) == (60, 60)
    assert lambdalabs.PROVIDER.facts.storage_persists_when_stopped is False  # instances cannot be stopped
