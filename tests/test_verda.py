"""Verda (formerly DataCrunch) adapter: the real client against the replayed recording.

Hand-checked prices: Verda's pricing page https://verda.com/pricing as published on 2026-08-22
(its schema.org Offer list, sliced byte for byte from the page in getcomputable/gpu-index,
tests/fixtures/observatory/verda/pricing_jsonld.html; see adapters/recordings/verda/README.md).
The page prices one GPU per hour; an 8-GPU type costs eight times that.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpuledger.adapters import verda
from gpuledger.adapters.base import MissingCredentialsError, SourceContext, SourceError, redact
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Request
from tests.conftest import replay_context

RECORDINGS = BUNDLED_RECORDINGS / "verda"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    monkeypatch.setenv(verda.CLIENT_ID_ENV, "client-id-abc123")
    monkeypatch.setenv(verda.CLIENT_SECRET_ENV, "client-secret-def456")
    return "client-id-abc123", "client-secret-def456"


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(verda.CLIENT_ID_ENV, raising=False)
    monkeypatch.delenv(verda.CLIENT_SECRET_ENV, raising=False)


def body(name: str) -> Any:
    return json.loads((RECORDINGS / name).read_text())


def availability() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    return (verda.parse_availability(body("availability-on-demand.json"), "on-demand"),
            verda.parse_availability(body("availability-spot.json"), "spot"))


def parse(types: Any) -> Any:
    return verda.parse_instance_types(types, *availability(), body("volume-types.json"))


def rows(batch: Any) -> dict[tuple[str, str, str], Any]:
    return {(o.instance_type, o.region, o.purchase_option): o for o in batch.offers}


# -- through the real client against the replay server ------------------------------

def test_fetch_authenticates_then_prices_every_gpu_type_per_location_and_option(
        replay: Any, creds: tuple[str, str]) -> None:
    server = replay("verda")
    batch = verda.fetch(replay_context(server, "verda"))
    # 15 GPU types x 4 locations x (on-demand, spot)
    assert batch.counts() == {"offers": 120, "egress": 0, "storage": 2, "quarantined": 0}
    got = rows(batch)

    # verda.com/pricing, 2026-08-22, per GPU-hour: H100 SXM5 3.25 (spot 1.625), H200 SXM5 4.00,
    # B200 SXM6 spot 3.055, A100 SXM4 80GB 1.79, L40S 1.37, Tesla V100 0.17.
    assert got["1H100.80S.30V", "FIN-01", "on_demand"].price_per_hour == 3.25
    assert got["1H100.80S.30V", "FIN-01", "spot"].price_per_hour == 1.625
    assert got["8H100.80S.176V", "FIN-01", "on_demand"].price_per_hour == 26.0  # 8 x 3.25
    assert got["8H100.80S.176V", "FIN-01", "on_demand"].price_per_gpu_hour == 3.25
    assert got["1H200.141S.44V", "FIN-02", "on_demand"].price_per_hour == 4.0
    assert got["1B200.31V", "FIN-02", "spot"].price_per_hour == 3.055
    assert got["1A100.22V", "FIN-01", "on_demand"].price_per_hour == 1.79
    assert got["1L40S.20V", "FIN-02", "on_demand"].price_per_hour == 1.37
    assert got["1V100.6V", "FIN-01", "on_demand"].price_per_hour == 0.17

    h100 = got["8H100.80S.176V", "FIN-01", "on_demand"]
    assert (h100.gpu_model, h100.gpu_count, h100.gpu_memory_gb, h100.total_gpu_memory_gb) == ("H100-SXM", 8, 80, 640)
    assert (h100.vcpus, h100.ram_gb, h100.interconnect, h100.source_currency) == (176, 1480, "NVLink", "USD")
    assert h100.billing_granularity_s == 600
    assert json.loads(h100.provider_data)["p2p"] == "900GB/s"
    assert got["1V100.6V", "FIN-01", "on_demand"].local_disk_gb == 225

    [(_, token_req), *reads] = server.requests
    assert (token_req.method, token_req.path) == ("POST", "/v1/oauth2/token")
    assert token_req.json_body() == {"grant_type": "client_credentials", "client_id": creds[0],
                                     "client_secret": creds[1]}
    assert [(r.path, r.params) for _, r in reads] == [
        ("/v1/instance-types", {"currency": "usd"}),
        ("/v1/instance-availability", {"isSpot": "false"}),
        ("/v1/instance-availability", {"isSpot": "true"}),
        ("/v1/volume-types", {}),
    ]
    assert {r.headers["authorization"] for _, r in reads} == {"Bearer replay-access-token-not-a-secret"}


def test_the_access_token_handed_back_is_redacted_from_messages(replay: Any, creds: tuple[str, str]) -> None:
    verda.fetch(replay_context(replay("verda"), "verda"))
    assert redact("token replay-access-token-not-a-secret", patterns=False) == "token [redacted]"
    assert redact("refresh replay-refresh-token-not-a-secret", patterns=False) == "refresh [redacted]"


def test_availability_says_where_each_type_can_be_deployed_now(creds: tuple[str, str]) -> None:
    got = rows(parse(body("instance-types-usd.json")))
    assert {o.region for o in got.values()} == {"FIN-01", "FIN-02", "FIN-03", "ICE-01"}
    # 1H100.80S.30V is listed on demand in FIN-01 and FIN-03, spot only in FIN-01
    on_demand = {r for (t, r, p), o in got.items() if t == "1H100.80S.30V" and p == "on_demand" and o.available}
    spot = {r for (t, r, p), o in got.items() if t == "1H100.80S.30V" and p == "spot" and o.available}
    assert (on_demand, spot) == ({"FIN-01", "FIN-03"}, {"FIN-01"})
    off = got["1H100.80S.30V", "ICE-01", "on_demand"]
    assert (off.available, off.availability_level) == (False, "not deployable now")
    assert got["1B300.30V", "FIN-03", "spot"].availability_level == "deployable now"
    # the GPU types listed: on demand 7 + 5 + 3 + 1, spot 4 + 3 + 1 + 0
    assert sum(o.available for o in got.values() if o.purchase_option == "on_demand") == 16
    assert sum(o.available for o in got.values() if o.purchase_option == "spot") == 8


@pytest.mark.parametrize(
    "itype, model, exact",
    [
        ("1H100.80S.30V", "H100-SXM", True),
        ("1H200.141S.44V", "H200-SXM", True),
        ("1B200.31V", "B200", True),
        ("1B300.30V", "B300", True),
        ("1A100.22V", "A100-SXM4-80", True),
        ("1A100.40S.22V", "A100-SXM4-40", True),
        ("1V100.6V", "V100-SXM2-16", False),  # "Tesla V100 16GB": SXM2 or PCIe is not stated
        ("1L40S.20V", "L40S", True),
        ("1RTX6000ADA.10V", "RTX-6000-Ada", True),
        ("2A6000.20V", "RTX-A6000", True),
        ("1RTXPRO6000.30V", "RTX-PRO-6000-S", False),  # "RTX PRO 6000": the edition is not stated
    ],
)
def test_gpu_descriptions_map_to_canonical_models(itype: str, model: str, exact: bool) -> None:
    offer = rows(parse(body("instance-types-usd.json")))[itype, "FIN-01", "on_demand"]
    assert (offer.gpu_model, offer.gpu_variant_exact) == (model, exact)


def test_gpu_description_is_split_into_count_name_and_memory() -> None:
    desc = verda.parse_gpu_description("8x B200 SXM6 180GB")
    assert (desc.count, desc.name, desc.memory_gb) == (8, "B200 SXM6", 180.0)
    with pytest.raises(ValueError, match="not '<n>x <name> <memory>GB'"):
        verda.parse_gpu_description("B200")


def test_cpu_types_are_counted_and_unknown_gpus_quarantined() -> None:
    types = body("instance-types-usd.json")
    gb300 = next(t for t in types if t["instance_type"] == "1GB300.36V")
    gb300["gpu"]["description"] = "1x Mystery X1 288GB"  # a GPU nobody can identify
    gb300["name"] = gb300["model"] = "Mystery X1"
    batch = parse(types)
    [note] = batch.notes
    assert note == ("verda: 17 instance types in 4 locations (FIN-01, FIN-02, FIN-03, ICE-01); "
                    "2 CPU-only instance types skipped")
    [q] = batch.quarantined
    assert q.source_ref == "1GB300.36V" and q.reason.startswith("1GB300.36V: gpu: unknown GPU name 'Mystery X1'")
    assert not {o.instance_type for o in batch.offers} & {"CPU.4V.16G", "CPU.8V.32G", "1GB300.36V"}


def test_storage_comes_from_the_volume_types() -> None:
    batch = parse(body("instance-types-usd.json"))
    assert {(s.storage_class, s.usd_per_gb_month, s.region) for s in batch.storage} == {
        ("NVMe", 0.2, "global"), ("NVMe_Shared", 0.2, "global")}


# -- bad records: each quarantined whole, with its reason ---------------------------

def test_bad_types_are_quarantined_whole_and_the_rest_still_load() -> None:
    types = body("instance-types-usd.json")
    by_name = {t["instance_type"]: t for t in types}
    by_name["1H100.80S.30V"]["price_per_hour"] = "-3.25"
    by_name["1H200.141S.44V"]["spot_price"] = "NaN"
    by_name["1B200.31V"]["currency"] = "eur"
    by_name["1L40S.20V"]["gpu"]["number_of_gpus"] = 2  # disagrees with "1x L40S 48GB"
    del by_name["1A100.22V"]["price_per_hour"], by_name["1A100.22V"]["spot_price"]  # no price at all
    twin = copy.deepcopy(by_name["1V100.6V"])
    twin["price_per_hour"] = "0.99"
    types.append(twin)
    batch = parse(types)
    reasons = {q.source_ref: q.reason for q in batch.quarantined}
    assert reasons["1H100.80S.30V"] == "1H100.80S.30V: price_per_hour '-3.25' must be positive"
    assert reasons["1H200.141S.44V"] == "1H200.141S.44V: spot_price 'NaN' is not a finite number"
    assert reasons["1B200.31V"] == "1B200.31V: price in EUR, not USD; no conversion is configured"
    assert reasons["1L40S.20V"] == "1L40S.20V: gpu: description says 1 GPUs, number_of_gpus says 2"
    assert reasons["1A100.22V"] == "1A100.22V: price_per_hour None is not a number"
    assert reasons["1V100.6V"].startswith("duplicate instance_type 1V100.6V")
    loaded = {o.instance_type for o in batch.offers}
    assert not loaded & {"1H100.80S.30V", "1H200.141S.44V", "1B200.31V", "1L40S.20V", "1A100.22V"}
    assert {o.price_per_hour for o in batch.offers if o.instance_type == "1V100.6V"} == {0.17, 0.085}
    assert len(batch.offers) == 120 - 5 * 8


@pytest.mark.parametrize("no_price", ["0.00", None, "absent"])
def test_a_spot_only_type_keeps_its_spot_offers(no_price: Any) -> None:
    """A type priced for spot alone: its on-demand price empty or zero (the SDK reads the field as a
    number, so "0.00" is how one would come), its spot price valid."""
    types = body("instance-types-usd.json")
    b200 = next(t for t in types if t["instance_type"] == "1B200.31V")
    if no_price == "absent":
        del b200["price_per_hour"]
    else:
        b200["price_per_hour"] = no_price
    batch = parse(types)
    assert not batch.quarantined
    got = {(r, p): o for (t, r, p), o in rows(batch).items() if t == "1B200.31V"}
    assert {p for _, p in got} == {"spot"} and len(got) == 4  # one per location, on spot
    assert got["FIN-02", "spot"].price_per_hour == 3.055  # verda.com/pricing: B200 SXM6 spot 3.055
    assert len(batch.offers) == 120 - 4
    assert batch.notes[0].endswith("2 CPU-only instance types skipped, 1 GPU types without an on-demand price "
                                   "(spot only)")


def test_a_changed_answer_shape_is_schema_drift() -> None:
    with pytest.raises(SourceError, match="verda: the instance-types answer is not a list"):
        verda.parse_instance_types({"data": []}, {}, {})
    with pytest.raises(SourceError, match="availability entry lacks 'location_code'"):
        verda.parse_availability([{"code": "FIN-01"}], "spot")
    with pytest.raises(SourceError, match="returned no instance types"):
        verda.parse_instance_types([], {}, {})
    # a renamed on-demand price is a changed answer, never every type turned spot-only
    renamed = [{("price" if k == "price_per_hour" else k): v for k, v in t.items()}
               for t in body("instance-types-usd.json")]
    with pytest.raises(SourceError, match="no instance type has a 'price_per_hour'"):
        parse(renamed)


# -- credentials ---------------------------------------------------------------------

def test_missing_credentials_in_live_mode_raise_before_any_request() -> None:
    ctx = SourceContext(provider="verda", mode="live")
    with pytest.raises(MissingCredentialsError,
                       match="verda: VERDA_CLIENT_ID and VERDA_CLIENT_SECRET not set"):
        verda.fetch(ctx)
    assert ctx.requests_made == 0


def test_a_rejected_token_request_names_the_status_and_holds_no_secret(
        replay: Any, creds: tuple[str, str]) -> None:
    def reject(host: str, req: Request, ex: Exchange | None) -> tuple[int, dict[str, str], bytes]:
        quoted = {"code": "unauthorized_request", "message": f"bad client {req.body.decode()}"}
        return 401, JSON, json.dumps(quoted).encode()

    server = replay("verda", hook=reject)
    with pytest.raises(SourceError) as err:
        verda.fetch(replay_context(server, "verda"))
    assert "verda: HTTP 401 from api.verda.com/v1/oauth2/token" in str(err.value)
    assert creds[1] not in str(err.value) and creds[0] not in str(err.value)
    assert len(server.requests) == 1  # a 401 is not retried


def test_replay_without_credentials_skips_the_token(replay: Any) -> None:
    server = replay("verda")
    batch = verda.fetch(replay_context(server, "verda"))
    assert len(batch.offers) == 120
    assert [r.path for _, r in server.requests][0] == "/v1/instance-types"
    assert all("authorization" not in r.headers for _, r in server.requests)
