"""GCP: pure parsing of real Catalog/Compute samples, and fetch() through the real google-cloud
clients against the loopback replay of adapters/recordings/gcp (see its README for provenance).

Expected prices are worked out by hand from the SKUs named in each test.
"""

from __future__ import annotations

import copy
import gzip
import json
from datetime import datetime, timedelta, timezone
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import gcp
from gpuledger.adapters.base import MissingCredentialsError, SchemaDriftError, SourceContext, SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from tests.conftest import FIXTURES, replay_context

GCP_FIXTURES = FIXTURES / "gcp"
RECORDING = BUNDLED_RECORDINGS / "gcp"


def load(name: str) -> Any:
    return json.loads((GCP_FIXTURES / name).read_text())


def recorded(pattern: str) -> list[dict[str, Any]]:
    pages = []
    for path in sorted(RECORDING.glob(pattern)):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        pages.append(json.loads(data))
    return pages


def recorded_inputs() -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    zones = gcp.parse_zones(recorded("compute/zones.*.json*"))
    shapes = gcp.parse_machine_types(recorded("compute/machineTypes.*.json*"))
    accels = gcp.parse_accelerator_types(recorded("compute/acceleratorTypes.*.json*"))
    skus = [s for page in recorded("billing/skus.*.json*") for s in page["skus"]]
    return zones, shapes, accels, skus


def only(batch, zone: str, itype: str, option: str = "on_demand"):
    found = [o for o in batch.offers if (o.zone, o.instance_type, o.purchase_option) == (zone, itype, option)]
    assert len(found) == 1, (zone, itype, option, len(found))
    return found[0]


def test_provider_declaration() -> None:
    facts = gcp.PROVIDER.facts
    assert facts.minimum_charge_s == 60 and facts.billing_granularity_s == 1
    assert facts.access_jupyter is False
    assert "30-second" in facts.interruptible_offer
    assert all(u.startswith("https://cloud.google.com/") for u in facts.source_urls)
    # the workflow passes a service-account key for ADC, not the API key the redaction covers
    assert gcp.PROVIDER.workflow_secrets == ("GCP_SA_KEY", "GOOGLE_CLOUD_PROJECT")
    assert gcp.PROVIDER.secret_env_vars == ("GOOGLE_API_KEY", "GPULEDGER_GCP_API_KEY")


# -- real samples, pure parsing ------------------------------------------------------------

def a2_offer_batch(skus: list[dict[str, Any]]):
    """a2-highgpu-1g (the slurm-gcp machineType sample) in us-central1-a, priced from `skus`."""
    a2 = gcp.machine_shape(load("compute_machineTypes_items_slurm-gcp.json")[0])
    zones = {"us-central1-a": gcp.ZoneInfo("us-central1-a", "us-central1", "UP")}
    return gcp.build_batch(zones, {"us-central1-a": {a2.name: a2}}, {}, skus, ["us-central1", "asia-southeast1"])


def test_a2_highgpu_1g_is_composed_from_the_real_opencost_skus() -> None:
    batch = a2_offer_batch(load("cloudbilling_skus_opencost.json")["skus"])
    offer = only(batch, "us-central1-a", "a2-highgpu-1g")
    # 12 x A2 core 0.031611 + 85 GiB x A2 RAM 0.004237 + 1 x A100 2.933908 (SKUs 2922-40C5-B19F,
    # 2390-DCAF-DA38, 039F-D0DA-4055) = 0.379332 + 0.360145 + 2.933908: the list price, 2025-03.
    assert offer.price_per_hour == pytest.approx(3.673385, abs=1e-9)
    assert (offer.gpu_model, offer.gpu_count, offer.vcpus, offer.ram_gb) == ("A100-SXM4-40", 1, 12, 85)
    assert (offer.gpu_name_reported, offer.gpu_memory_gb_nominal, offer.source_currency) == (
        "nvidia-tesla-a100", 40, "USD")
    parts = json.loads(offer.provider_data)["components"]
    assert [(p["part"], p["sku"], p["quantity"], p["unit_price_usd"]) for p in parts] == [
        ("vcpu", "2922-40C5-B19F", 12, 0.031611), ("ram", "2390-DCAF-DA38", 85, 0.004237),
        ("gpu", "039F-D0DA-4055", 1, 2.933908)]
    assert offer.price_observed_at == datetime(2023, 3, 24, 10, 52, 50, 681000, tzinfo=timezone.utc)  # "…50.681Z"
    # The sample has no Spot SKUs: no Spot offer, and that is not an error.
    assert [o.purchase_option for o in batch.offers] == ["on_demand"] and batch.quarantined == []


def test_idr_prices_are_converted_with_the_documented_rate_never_read_as_usd() -> None:
    batch = gcp.Batch("gcp")
    catalog = gcp.parse_compute_skus(batch, load("cloudbilling_skus_opencost.json")["skus"],
                                     ["us-central1", "asia-southeast1"])
    # USD x currencyConversionRate = IDR, so IDR / 14999.999925 is USD: the E2 amounts become the public
    # E2 list prices (vCPU 0.021811, GiB 0.002923), T2D Singapore RAM 68.205 IDR -> 0.004547 USD.
    e2_core = catalog.prices[gcp.ComponentKey("us-central1", "core", "e2", "on_demand")]
    assert (e2_core.currency, e2_core.source_amount) == ("IDR", pytest.approx(327.173848364))
    assert e2_core.usd == pytest.approx(0.02181159, abs=1e-8)
    assert catalog.prices[gcp.ComponentKey("us-central1", "ram", "e2", "on_demand")].usd == pytest.approx(
        0.00292353, abs=1e-8)
    t2d_ram = catalog.prices[gcp.ComponentKey("asia-southeast1", "ram", "t2damd", "on_demand")]
    assert t2d_ram.usd == pytest.approx(0.004547, abs=1e-8)


def test_non_usd_price_without_a_conversion_rate_is_quarantined() -> None:
    skus = copy.deepcopy(load("cloudbilling_skus_opencost.json")["skus"])
    core = next(s for s in skus if s["skuId"] == "2922-40C5-B19F")
    core["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] = {
        "currencyCode": "IDR", "units": "474", "nanos": 165000000}
    core["pricingInfo"][0]["currencyConversionRate"] = 1  # the API default: no conversion happened
    batch = a2_offer_batch(skus)
    assert batch.offers == []
    [q] = batch.quarantined
    assert (q.kind, q.source_ref) == ("offer", "us-central1-a/a2-highgpu-1g/on_demand")
    assert "2922-40C5-B19F" in q.reason and "IDR without a currency conversion rate" in q.reason

    # An IDR answer with its rate is converted: each amount / 15000 is the USD list price again.
    for sku_id, units, nanos in (("2922-40C5-B19F", "474", 165000000), ("2390-DCAF-DA38", "63", 555000000),
                                 ("039F-D0DA-4055", "44008", 620000000)):
        sku = next(s for s in skus if s["skuId"] == sku_id)
        sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] = {
            "currencyCode": "IDR", "units": units, "nanos": nanos}
        sku["pricingInfo"][0]["currencyConversionRate"] = 15000
    batch = a2_offer_batch(skus)
    assert batch.quarantined == []
    offer = only(batch, "us-central1-a", "a2-highgpu-1g")
    assert offer.price_per_hour == pytest.approx(3.673385, abs=1e-9)
    assert (offer.source_currency, offer.source_price_per_hour) == ("IDR", pytest.approx(3.673385 * 15000))
    # One VM priced in two currencies is not summed.
    next(s for s in skus if s["skuId"] == "039F-D0DA-4055")["pricingInfo"][0]["pricingExpression"][
        "tieredRates"][0]["unitPrice"] = {"currencyCode": "USD", "units": "2", "nanos": 933908000}
    [q] = a2_offer_batch(skus).quarantined
    assert "several currencies ['IDR', 'USD']" in q.reason


def test_a_zero_gpu_price_is_quarantined() -> None:
    skus = copy.deepcopy(load("cloudbilling_skus_opencost.json")["skus"])
    gpu = next(s for s in skus if s["skuId"] == "039F-D0DA-4055")
    gpu["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] = {
        "currencyCode": "USD", "units": "0", "nanos": 0}
    [q] = a2_offer_batch(skus).quarantined
    assert "gpu:" in q.reason and "is not positive" in q.reason  # a free GPU would understate the VM


@pytest.mark.parametrize("description, expected", [
    ("Nvidia Tesla A100 GPU running in Americas", "nvidia-tesla-a100"),
    ("Nvidia Tesla A100 80GB GPU running in Americas", "nvidia-a100-80gb"),
    ("Nvidia A100 80GB GPU running in APAC", "nvidia-a100-80gb"),
    ("Nvidia H100 80GB GPU running in Americas", "nvidia-h100-80gb"),
    ("Nvidia H100 80GB Plus GPU running in Americas", "nvidia-h100-mega-80gb"),
    ("Nvidia H100 80GB Mega GPU attached to Spot Preemptible VMs running in Tokyo", "nvidia-h100-mega-80gb"),
    ("H200 141GB GPU running in Belgium", "nvidia-h200-141gb"),
    ("A4 Nvidia B200 (1 gpu slice) running in Americas", "nvidia-b200"),
    ("Nvidia L4 GPU running in Netherlands", "nvidia-l4"),
    ("Nvidia Tesla T4 GPU running in Americas", "nvidia-tesla-t4"),
    ("Nvidia Tesla V100 GPU attached to Spot Preemptible VMs running in Americas", "nvidia-tesla-v100"),
    ("RTX 6000 96GB running in Oregon", "nvidia-rtx-pro-6000"),
    ("Nvidia L40 GPU running in Netherlands", None),  # not an L4
    ("Nvidia GB300 GPU running in Americas", None),
])
def test_gpu_sku_descriptions_map_to_accelerator_types(description: str, expected: str | None) -> None:
    assert gcp.gpu_type_of(description) == expected


def test_purchase_option_rules() -> None:
    assert gcp.purchase_option("OnDemand", "Nvidia L4 GPU running in Americas") == "on_demand"
    assert gcp.purchase_option("Preemptible", "Nvidia L4 GPU attached to Spot Preemptible VMs running in X") == "spot"
    # Google tags this Spot SKU OnDemand; the description decides.
    assert gcp.purchase_option("OnDemand", "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas") == "spot"
    # committed-use SKUs are their own purchase options, one per term
    assert gcp.purchase_option("Commit1Yr", "Commitment v1: A2 Cpu in Americas for 1 Year") == \
        "committed_use_1y_no_upfront"
    assert gcp.purchase_option("Commit3Yr", "Commitment v1: Nvidia Tesla A100 GPU in Americas for 3 Year") == \
        "committed_use_3y_no_upfront"


def test_compute_samples_parse() -> None:
    a2, t2d = (gcp.machine_shape(m) for m in load("compute_machineTypes_items_slurm-gcp.json"))
    assert (a2.zone, a2.vcpus, a2.memory_gib, a2.accelerators) == ("us-central1-a", 12, 85.0,
                                                                   (("nvidia-tesla-a100", 1),))
    assert (t2d.zone, t2d.accelerators, gcp.series_of(t2d.name)) == ("europe-north2-b", (), "t2d-standard")
    assert gcp.series_of("a3-edgegpu-8g-nolssd") == "a3-edgegpu"
    k80 = load("compute_acceleratorTypes_get_k80_libcloud.json")
    assert gcp.parse_accelerator_types([{"items": {"zones/us-central1-a": {"acceleratorTypes": [k80]}}}]) == {
        "us-central1-a": {"nvidia-tesla-k80": gcp.AcceleratorInfo("nvidia-tesla-k80", "NVIDIA Tesla K80", 8)}}


def test_storage_and_egress_from_the_real_cromwell_skus() -> None:
    skus = load("cloudbilling_skus_cromwell-monitor_disk_mix.json")
    batch = gcp.Batch("gcp")
    gcp.build_storage(batch, skus, ["us-central1"])
    gcp.build_egress(batch, skus, ["us-central1"])
    # Storage pools and the Confidential-mode throughput SKU (unit "mo") are other dimensions: left out.
    assert {s.storage_class: s.usd_per_gb_month for s in batch.storage} == {
        "pd-standard": 0.04, "pd-ssd": 0.17, "pd-balanced-regional": 0.2, "hyperdisk-ml": 0.08,
        "hyperdisk-balanced-ha": 0.16}
    pd = next(s for s in batch.storage if s.storage_class == "pd-standard")
    assert "first 30 GiB-month free" in pd.description and "D973-5D65-BAB2" in pd.description
    # "Network Inter Region Data Transfer Out from Americas to Melbourne": first GiB free, then 0.10.
    assert [(e.destination, e.tier_start_gb, e.tier_end_gb, e.usd_per_gb) for e in batch.egress] == [
        ("inter_region", 0, 1, 0.0), ("inter_region", 1, None, 0.1)]
    assert batch.quarantined == []


# -- the bundled recording, through the real clients --------------------------------------

@pytest.fixture(scope="module")
def replayed():
    with ReplayServer(BUNDLED_RECORDINGS, providers=["gcp"]) as server:
        ctx = replay_context(server, "gcp")
        batch = gcp.fetch(ctx)
        yield batch, server, ctx


def test_replay_counts(replayed) -> None:
    batch, _, _ = replayed
    gpus = [o for o in batch.offers if o.gpu_vendor != "Google"]
    assert Counter(o.purchase_option for o in gpus) == {
        "on_demand": 852, "spot": 847, "committed_use_1y_no_upfront": 48, "committed_use_3y_no_upfront": 48}
    assert (len(batch.egress), len(batch.storage)) == (177, 124)
    # v6e-1/4/8 of asia-east1-c and southamerica-east1-c: listed by the TPU API, no v6e SKU in their areas.
    assert sorted(q.source_ref for q in batch.quarantined) == [
        f"{z}/v6e-{n}/on_demand" for z in ("asia-east1-c", "southamerica-east1-c") for n in (1, 4, 8)]
    # One on-demand offer per (zone, machine type): zones x shapes of each family in the recording,
    # e.g. g2 41 zones x 8 shapes, a3-highgpu 23 x 4, g4 6 x 4; N1 + T4 46 zones x 1/2/4 cards,
    # V100 11 x 1/2/4/8.
    family = Counter(o.instance_type.split("+")[1].split("x", 1)[1] if "+" in o.instance_type
                     else gcp.series_of(o.instance_type) for o in gpus if o.purchase_option == "on_demand")
    assert family == {"g2-standard": 328, "nvidia-tesla-t4": 138, "a3-highgpu": 92, "a2-highgpu": 72,
                      "nvidia-tesla-v100": 44, "nvidia-tesla-p4": 48, "nvidia-tesla-p100": 36, "a2-ultragpu": 28,
                      "a3-megagpu": 16, "a2-megagpu": 7, "a4-highgpu": 7, "a3-ultragpu": 9, "a4x-highgpu": 3,
                      "g4-standard": 24}
    assert len({o.key for o in batch.offers}) == len(batch.offers)
    # A4 Spot is not sold outside the Americas/Virginia SKUs: five pairs without a Spot offer; and the
    # six unpriced v6e types.
    assert "11 zone/machine-type pairs have no Spot GPU/TPU SKU in their region" in batch.notes
    # Committed-use GPU SKUs are recorded for the A100 and H100 of the Americas only: (852 - 48) x 2 terms.
    assert "1608 zone/machine-type/term triples have no committed-use GPU SKU in their region" in batch.notes


def test_every_region_with_gpu_machine_types(replayed) -> None:
    batch, _, _ = replayed
    zones = gcp.parse_zones(recorded("compute/zones.*.json*"))
    regions = {o.region for o in batch.offers}
    assert regions == {z.region for z in zones.values()} and len(regions) >= 25
    assert {"us-south1", "asia-south2", "europe-west9", "southamerica-east1", "me-west1"} <= regions
    assert len({o.zone for o in batch.offers if o.gpu_vendor != "Google"}) == 70


def test_nothing_left_out_silently(replayed) -> None:
    """Each kind of row not turned into an offer is counted by reason in the notes."""
    batch, _, _ = replayed
    # n1-standard-{8,16,32,64} in each of the 88 zones: hosts, priced only with GPUs attached.
    assert "352 CPU-only N1 host machine types (priced only with attached GPUs)" in batch.notes
    # 8 cards of T4 (46 zones), P4 (16), P100 (12): above their zones' maximumCardsPerInstance of 4.
    assert "74 N1 pairings not priced: GPU count above the zone's maximumCardsPerInstance" in batch.notes
    # -vws types of T4 (46 zones), P4 (16), P100 (12) and L4 (41): a license bundle, not priced.
    assert "115 N1 pairings not priced: virtual-workstation GPU types (a GRID license on top)" in batch.notes
    assert ("2 SKUs left out: GPU SKU not a plain on-demand/Spot GPU-hour (virtual workstation, sole tenancy, "
            "DWS...)") in batch.notes
    # TPU types per zone (adapters/recordings/gcp/build_recording.py TPU_ZONES, TPU_TYPES): the slices
    # beyond one host of v5e (19 zones x 16-256 chips), v5p (11 x 16-128 cores) and v6e (18 x 16-256);
    # v2-8 in 5 zones and v3-8 in 4.
    assert "229 TPU slices of several host VMs (multi-host) not priced as one offer" in batch.notes
    assert "9 TPU types of generations not priced per chip in the Compute Engine Catalog (v2-v4)" in batch.notes
    assert not [n for n in batch.notes if "no vCPU/RAM/GPU" in n]


def test_region_setting_narrows_the_result() -> None:
    with ReplayServer(BUNDLED_RECORDINGS, providers=["gcp"]) as server:
        batch = gcp.fetch(replay_context(server, "gcp", settings={"gcp_regions": "us-south1,asia-south2"}))
    assert {o.region for o in batch.offers} == {"us-south1", "asia-south2"}
    assert {s.region for s in batch.storage} == {"us-south1", "asia-south2"}
    assert any("zone machine types outside the selected regions" in n for n in batch.notes)


def test_new_machine_families_hand_checked(replayed) -> None:
    batch, _, _ = replayed
    # A3 Ultra: vCPU + RAM are SkyPilot's a3-ultragpu-8g host prices (catalogs/v7/gcp/vms.csv:
    # us-central1 12.266 on-demand / 2.82111 Spot; us-south1 14.47387; asia-south2 14.73269); the
    # H200 SKU (8.9025) is synthetic; 32 x 375 GiB Local SSD at 0.08 / 730 h.
    for zone, host in (("us-central1-b", 12.266), ("us-south1-b", 14.47387), ("asia-south2-c", 14.73269)):
        a3u = only(batch, zone, "a3-ultragpu-8g")
        parts = json.loads(a3u.provider_data)["components"]
        assert sum(p["usd_per_hour"] for p in parts if p["part"] in ("vcpu", "ram")) == pytest.approx(host, abs=1e-5)
    a3u = only(batch, "us-central1-b", "a3-ultragpu-8g")
    assert a3u.price_per_hour == pytest.approx(12.266 + 8 * 8.9025 + 12000 * 0.08 / 730, abs=1e-5)
    assert (a3u.gpu_model, a3u.gpu_count, a3u.total_gpu_memory_gb, a3u.vcpus, a3u.ram_gb) == \
        ("H200-SXM", 8, 141 * 8, 224, 2952)
    assert (a3u.network_gbps, a3u.multinode_fabric) == (3200, "GPUDirect RDMA (RoCE)")
    spot = only(batch, "us-central1-b", "a3-ultragpu-8g", "spot")
    spot_parts = json.loads(spot.provider_data)["components"]
    assert sum(p["usd_per_hour"] for p in spot_parts if p["part"] in ("vcpu", "ram")) == pytest.approx(2.82111, abs=1e-5)
    # A4X: billed per GB200 slice like A4 (synthetic 18.0 per slice) plus its Local SSD.
    a4x = only(batch, "us-central1-a", "a4x-highgpu-4g")
    assert a4x.price_per_hour == pytest.approx(4 * 18.0 + 12000 * 0.08 / 730, abs=1e-9)
    assert (a4x.gpu_model, a4x.gpu_count, a4x.interconnect) == ("GB200", 4, "NVLink (NVL72 domain)")
    assert [p["part"] for p in json.loads(a4x.provider_data)["components"]] == ["gpu_slice", "local_ssd"]
    # G4: vCPU, RAM, RTX PRO 6000 and Local SSD SKUs (all synthetic values).
    g4 = only(batch, "us-central1-b", "g4-standard-48")
    assert g4.price_per_hour == pytest.approx(48 * 0.0255 + 180 * 0.003 + 3.0 + 1500 * 0.08 / 730, abs=1e-9)
    assert (g4.gpu_model, g4.gpu_count, g4.gpu_memory_gb, g4.interconnect) == ("RTX-PRO-6000-S", 1, 96, None)
    assert only(batch, "us-central1-b", "g4-standard-384").gpu_count == 8


def test_replay_paginates_every_list(replayed) -> None:
    _, server, ctx = replayed
    seen = Counter((host, req.path.rsplit("/", 1)[-1]) for host, req in server.requests)
    assert seen == {(gcp.COMPUTE_HOST, "zones"): 1, (gcp.COMPUTE_HOST, "machineTypes"): 5,
                    (gcp.COMPUTE_HOST, "acceleratorTypes"): 2, (gcp.BILLING_HOST, "skus"): 10,
                    (gcp.TPU_HOST, "locations"): 2, (gcp.TPU_HOST, "acceleratorTypes"): 33}
    assert ctx.requests_made == 53
    # the TPU types of each TPU zone of a selected region (us-central2-b's region is none), us-central1-a's in 2 pages
    tpu = [req for host, req in server.requests if host == gcp.TPU_HOST and req.path.endswith("/acceleratorTypes")]
    assert len({r.path for r in tpu}) == 32 and not [r for r in tpu if "us-central2" in r.path]
    skus = [req for host, req in server.requests if host == gcp.BILLING_HOST]
    assert sum("pageToken" in r.params for r in skus) == 9
    assert all((r.params["currencyCode"], r.params["pageSize"]) == ("USD", "5000") for r in skus)
    types = [req for _, req in server.requests if req.path.endswith("/machineTypes")]
    assert all(r.params["filter"] == gcp.MACHINE_TYPE_FILTER for r in types)
    assert sum("pageToken" in r.params for r in types) == 4


def test_replay_accelerator_optimized_prices(replayed) -> None:
    batch, _, _ = replayed
    a2 = only(batch, "us-central1-a", "a2-highgpu-1g")
    assert a2.price_per_hour == pytest.approx(3.673385, abs=1e-9)
    # Spot: 12 x 0.012643 + 85 x 0.0016946 + 0.997598 = 1.293355 (the 2025-03 list price).
    a2_spot = only(batch, "us-central1-a", "a2-highgpu-1g", "spot")
    assert (a2_spot.price_per_hour, a2_spot.spot_savings_pct) == (pytest.approx(1.293355, abs=1e-9), 64.8)
    # a3-highgpu-8g: 208 vCPU + 1872 GiB + 8 H100 + 6000 GiB bundled Local SSD x 0.08 / 730 h.
    a3 = only(batch, "us-central1-a", "a3-highgpu-8g")
    assert a3.price_per_hour == pytest.approx(88.49, abs=1e-6)
    assert only(batch, "us-central1-a", "a3-highgpu-8g", "spot").price_per_hour == pytest.approx(35.39575, abs=1e-5)
    assert (a3.gpu_model, a3.gpu_count, a3.local_disk_gb, a3.interconnect) == ("H100-SXM", 8, 6000, "NVSwitch")
    assert (a3.network_gbps, a3.multinode_fabric) == (1000, "GPUDirect-TCPX")
    lssd = [p for p in json.loads(a3.provider_data)["components"] if p["part"] == "local_ssd"]
    assert lssd[0]["quantity"] == pytest.approx(6000 / 730) and lssd[0]["unit_price_usd"] == 0.08
    # A4 is billed per GPU slice (vCPU and RAM inside): 8 x 16.11 + 12000 GiB x 0.08 / 730.
    a4 = only(batch, "us-central1-b", "a4-highgpu-8g")
    assert (a4.price_per_hour, a4.gpu_model, a4.gpu_memory_gb_nominal) == (
        pytest.approx(128.88 + 12000 * 0.08 / 730, abs=1e-9), "B200", 180)
    assert [p["part"] for p in json.loads(a4.provider_data)["components"]] == ["gpu_slice", "local_ssd"]
    # The Spot slice SKU is tagged usageType OnDemand by Google; it still prices the Spot offer.
    a4_spot = only(batch, "us-central1-b", "a4-highgpu-8g", "spot")
    assert a4_spot.price_per_hour == pytest.approx(8 * 4.9542 + 12000 * 0.048 / 730, abs=1e-9)
    assert not [o for o in batch.offers if o.zone == "asia-northeast1-b" and o.instance_type == "a4-highgpu-8g"
                and o.purchase_option == "spot"]
    # A3 Mega's GPU SKU is "H100 80GB Plus" in us-east4 and "H100 80GB Mega" in europe-west4.
    mega = only(batch, "us-east4-a", "a3-megagpu-8g")
    assert mega.price_per_hour == pytest.approx(92.9375881512, abs=1e-6)
    assert "Nvidia H100 80GB Plus GPU running in Virginia" in mega.provider_data
    assert "Nvidia H100 80GB Mega GPU running in Netherlands" in only(batch, "europe-west4-b",
                                                                       "a3-megagpu-8g").provider_data
    g2 = only(batch, "us-central1-a", "g2-standard-4")  # 4 x 0.024988 + 16 x 0.002927 + 0.56004
    assert (g2.price_per_hour, g2.gpu_model) == (pytest.approx(0.706824, abs=1e-9), "L4")


def test_replay_n1_with_attached_gpus(replayed) -> None:
    batch, _, _ = replayed
    t4 = only(batch, "us-central1-a", "n1-standard-8+1xnvidia-tesla-t4")
    # n1-standard-8 (8 vCPU, 30 GiB) x N1 0.031611 / 0.004237 + T4 0.35.
    assert (t4.price_per_hour, t4.vcpus, t4.ram_gb, t4.gpu_model) == (pytest.approx(0.729998, abs=1e-9), 8, 30, "T4")
    spot = only(batch, "us-central1-a", "n1-standard-8+1xnvidia-tesla-t4", "spot")
    assert spot.price_per_hour == pytest.approx(8 * 0.00698 + 30 * 0.000936 + 0.14, abs=1e-9)
    assert json.loads(t4.provider_data)["host_machine_type"] == "n1-standard-8"
    v100 = only(batch, "us-central1-a", "n1-standard-64+8xnvidia-tesla-v100")
    assert (v100.gpu_model, v100.gpu_count, v100.interconnect) == ("V100-SXM2-16", 8, "NVLink")
    n1 = {o.instance_type for o in batch.offers if o.zone == "us-central1-a" and o.instance_type.startswith("n1-")}
    # T4 and P4 allow 4 cards, V100 8; virtual-workstation (-vws) accelerator types are not priced.
    assert n1 == {f"n1-standard-{8 * n}+{n}x{g}" for g, counts in
                  (("nvidia-tesla-t4", (1, 2, 4)), ("nvidia-tesla-p4", (1, 2, 4)),
                   ("nvidia-tesla-v100", (1, 2, 4, 8))) for n in counts}


def test_replay_availability_storage_and_egress(replayed) -> None:
    batch, _, _ = replayed
    down = only(batch, "europe-west1-c", "a3-highgpu-8g")
    assert (down.available, down.availability_level) == (False, "listed in zone (zone DOWN)")
    assert only(batch, "europe-west1-b", "a3-highgpu-8g").available is True
    storage = {(s.region, s.storage_class): s.usd_per_gb_month for s in batch.storage}
    assert storage[("us-central1", "pd-ssd")] == 0.17 and storage[("asia-northeast1", "pd-ssd")] == 0.221
    assert storage[("us-east4", "pd-balanced")] == 0.11 and storage[("us-central1", "local-ssd")] == 0.08
    internet = [(e.tier_start_gb, e.tier_end_gb, e.usd_per_gb) for e in batch.egress
                if (e.region, e.destination) == ("us-central1", "internet")]
    assert internet == [(0, 1, 0.0), (1, 1024, 0.12), (1024, 10240, 0.11), (10240, None, 0.08)]
    same = [e for e in batch.egress if (e.region, e.destination) == ("europe-west4", "same_region")]
    assert [(e.tier_start_gb, e.usd_per_gb) for e in same] == [(0, 0.01)]


def test_replay_tpu_offers_hand_checked(replayed) -> None:
    """A TPU slice is its chips x the generation's chip-hour SKU of the zone's area (the recording's
    README: SkyPilot's catalog per zone; the public price page's v5e 1.20 in us-central1, v5p 4.20 in
    us-east5 and Trillium's 2.70 per chip-hour)."""
    batch, _, _ = replayed
    tpus = [o for o in batch.offers if o.gpu_vendor == "Google"]
    assert Counter((o.gpu_model, o.purchase_option) for o in tpus) == {
        ("TPU-v5e", "on_demand"): 57, ("TPU-v5e", "spot"): 57, ("TPU-v5p", "on_demand"): 11, ("TPU-v5p", "spot"): 11,
        ("TPU-v6e", "on_demand"): 48, ("TPU-v6e", "spot"): 48}
    both = {o.zone for o in tpus if o.purchase_option == "spot"} & {o.zone for o in tpus if o.purchase_option == "on_demand"}
    assert len(both) == 30
    v5e = only(batch, "us-central1-a", "v5litepod-4")
    assert (v5e.price_per_hour, v5e.price_per_gpu_hour, v5e.gpu_model, v5e.gpu_name_reported) == (
        pytest.approx(4.8), pytest.approx(1.2), "TPU-v5e", "v5litepod")
    assert (v5e.gpu_count, v5e.gpu_memory_gb, v5e.total_gpu_memory_gb, v5e.interconnect, v5e.vcpus, v5e.ram_gb) == \
        (4, 16, 64, "ICI", None, None)
    assert only(batch, "us-central1-a", "v5litepod-4", "spot").price_per_hour == pytest.approx(4 * 0.21298)
    # v5p-8 is 4 chips (topology 2x2x1); SkyPilot's tpu-v5p-8 row in us-east5: 16.8 / 6.24036
    v5p = only(batch, "us-east5-a", "v5p-8")
    assert (v5p.gpu_count, v5p.gpu_memory_gb, v5p.price_per_hour) == (4, 95, pytest.approx(16.8))
    assert only(batch, "us-east5-a", "v5p-8", "spot").price_per_hour == pytest.approx(6.24036)
    v6e = only(batch, "europe-west4-a", "v6e-8")  # SkyPilot: 23.76 on demand
    assert (v6e.gpu_count, v6e.gpu_memory_gb, v6e.price_per_hour) == (8, 32, pytest.approx(23.76))
    assert json.loads(v6e.provider_data)["topology"] == "2x4"
    assert only(batch, "europe-west4-a", "v6e-8", "spot").price_per_hour == pytest.approx(8 * 0.71316)
    single = only(batch, "us-south1-a", "v6e-1")
    assert (single.price_per_hour, single.interconnect) == (pytest.approx(2.7), None)
    [part] = json.loads(single.provider_data)["components"]
    assert (part["description"], part["part"], part["quantity"], part["unit"], part["unit_price_usd"]) == (
        "TpuV6e running in Dallas", "tpu", 1, "h", 2.7)


def test_tpu_sku_descriptions() -> None:
    batch = gcp.Batch("gcp")

    def tpu(description: str, usage: str = "OnDemand") -> Any:
        return gcp.classify_compute_sku(batch, {"skuId": "SKU-1", "description": description, "category": {
            "resourceFamily": "Compute", "resourceGroup": "TPU", "usageType": usage}})

    assert tpu("TpuV5e running in Americas") == ("tpu", "v5litepod")
    assert tpu("TpuV6e attached to Spot Preemptible VMs running in Dallas", "Preemptible") == ("tpu", "v6e")
    assert tpu("TpuV5p") == ("tpu", "v5p")
    assert tpu("Reserved V5e TPU running in Americas").startswith("TPU SKU not a plain on-demand/Spot chip-hour")
    assert tpu("DWS Defined Duration V5e running in Americas").startswith("TPU SKU not a plain")
    assert tpu("TPU7x running in Americas") == "TPU SKU of an unknown generation (quarantined)"
    [q] = batch.quarantined
    assert (q.kind, q.source_ref) == ("gpu", "SKU-1") and "TPU7x" in q.reason


def test_replay_carries_the_recorded_zone_history(replayed) -> None:
    """The 15 earlier zones.list answers of the bundled recording (made up: README) become one
    observation a day of every offer's machine and zone; the zones DOWN are build_recording.py's."""
    batch, _, _ = replayed
    days = sorted({o.observed_at for o in batch.availability})
    assert days == [datetime(2026, 11, 15, 3, 12, 45, tzinfo=timezone.utc) + timedelta(days=n) for n in range(15)]
    places = {(o.region, o.zone, o.instance_type, o.gpu_model) for o in batch.offers}
    assert len(batch.availability) == 15 * len(places) == 15 * 968
    down = {(o.zone, o.observed_at.day) for o in batch.availability if o.available is False}
    assert {d for z, d in down if z == "us-east5-b"} == {18, 19}
    assert {d for z, d in down if z == "europe-west1-c"} == {25, 26, 27, 28, 29}
    assert {z for z, _ in down} == {"us-east5-b", "europe-west4-a", "us-central1-a", "us-south1-a", "asia-southeast1-b",
                                    "europe-west1-c"}
    v6e = [o for o in batch.availability if (o.zone, o.instance_type) == ("us-east5-b", "v6e-8")]
    assert [(o.observed_at.day, o.available, o.availability_level) for o in v6e][3:5] == [
        (18, False, "listed in zone (zone DOWN)"), (19, False, "listed in zone (zone DOWN)")]


# -- failure paths through the real clients ----------------------------------------------

def rewrite_json(edit):
    """A ResponseHook that serves the recorded body after `edit(path, params, doc)` changed it."""

    def hook(host: str, req, exchange):
        if exchange is None:
            return None
        doc = json.loads(exchange.body())
        edit(req.path, req.params, doc)
        return 200, dict(exchange.headers), json.dumps(doc).encode()

    return hook


def test_unknown_gpu_machine_type_and_sku_are_quarantined(replay) -> None:
    def edit(path: str, params: dict, doc: dict) -> None:
        if path.endswith("/machineTypes") and "pageToken" not in params:
            doc["items"]["zones/us-central1-b"].setdefault("machineTypes", []).extend([
                {"name": "a4x-highgpu-4g", "guestCpus": 140, "memoryMb": 905216, "zone": "us-central1-b",
                 "accelerators": [{"guestAcceleratorType": "nvidia-gb300", "guestAcceleratorCount": 4}]},
                {"name": "a4x-maxgpu-4g-metal", "guestCpus": 144, "memoryMb": 983040, "zone": "us-central1-b",
                 "accelerators": [{"guestAcceleratorType": "nvidia-gb300", "guestAcceleratorCount": 4}]}])
        if path.endswith("/skus") and "pageToken" not in params:
            new = copy.deepcopy(doc["skus"][0])
            new.update(skuId="AAAA-BBBB-CCCC", description="Nvidia Z9000 GPU running in Americas")
            new["category"].update(resourceFamily="Compute", resourceGroup="GPU", usageType="OnDemand")
            doc["skus"].append(new)

    server = replay("gcp", hook=rewrite_json(edit))
    batch = gcp.fetch(replay_context(server, "gcp"))
    reasons = {(q.kind, q.source_ref): q.reason for q in batch.quarantined}
    assert "unknown GPU name 'nvidia-gb300'" in reasons[("offer", "us-central1-b/a4x-highgpu-4g")]
    assert "Nvidia Z9000 GPU" in reasons[("gpu", "AAAA-BBBB-CCCC")]
    # A GPU series with no billing rule is not guessed either.
    assert "unknown GPU machine series 'a4x-maxgpu'" in reasons[("offer", "us-central1-b/a4x-maxgpu-4g-metal")]
    assert len(batch.quarantined) == 3 + 6 and len(batch.offers) == 1795 + 232  # the rest is unaffected


def test_idr_answer_is_converted_or_quarantined(replay) -> None:
    def edit(path: str, params: dict, doc: dict) -> None:
        for sku in doc.get("skus", []):
            info = sku["pricingInfo"][0]
            rate = info["pricingExpression"]["tieredRates"][0]["unitPrice"]
            if sku["skuId"] == "2922-40C5-B19F":  # A2 core Americas, with its rate: converted
                rate.update(currencyCode="IDR", units="474", nanos=165000000)
                info["currencyConversionRate"] = 15000
            if sku["skuId"] == "2390-DCAF-DA38":  # A2 RAM Americas, no rate: must not be read as USD
                rate.update(currencyCode="IDR", units="63", nanos=555000000)
                info.pop("currencyConversionRate")

    server = replay("gcp", hook=rewrite_json(edit))
    batch = gcp.fetch(replay_context(server, "gcp"))
    americas = [q for q in batch.quarantined if q.source_ref.split("-")[0] == "us" and "IDR" in q.reason]
    # Every on-demand A2 offer of the Americas SKUs' regions: a2-highgpu-{1,2,4,8}g in 6 zones (24),
    # a2-megagpu-16g in 4 us-central1 zones (4), a2-ultragpu-{1,2,4,8}g in 2 (8).
    assert len(americas) == len(batch.quarantined) - 6 == 36  # and the 6 unpriced v6e types
    assert ("42 on_demand zone/machine types described by Compute Engine or Cloud TPU but not priced by the "
            "Catalog (quarantined with the missing part)") in batch.notes
    assert all("2390-DCAF-DA38" in q.reason for q in americas)
    assert not [o for o in batch.offers if o.region == "us-central1" and o.instance_type.startswith("a2-")
                and o.purchase_option == "on_demand"]
    assert only(batch, "us-central1-a", "a2-highgpu-1g", "spot").price_per_hour == pytest.approx(1.293355, abs=1e-9)


def test_a_failing_page_raises_source_error_after_retries(replay) -> None:
    calls = []

    def hook(host: str, req, exchange):
        if host == gcp.BILLING_HOST and "pageToken" in req.params:
            calls.append(req.params["pageToken"])
            return 500, {"Content-Type": "application/json"}, b'{"error": {"code": 500, "message": "backend"}}'
        return None

    server = replay("gcp", hook=hook)
    with pytest.raises(SourceError, match=r"^gcp: services\.skus\.list \(page 2\) failed after 2 attempts"):
        gcp.fetch(replay_context(server, "gcp"))
    assert len(calls) == 2  # http_attempts=2 in replay_context


@pytest.mark.parametrize("answer, reason", [
    ((404, {"Content-Type": "application/json"}, b'{"error": {"code": 404, "message": "gone"}}'),
     "gcp: zones.list (page 1) failed: HTTP 404"),
    ((200, {"Content-Type": "application/json"}, b'{"items": [{"name": "us-central1-a", "status": "UP"}]}'),
     "gcp: zones.list item lacks name/region"),
    # valid, but empty: not "no zone is UP", which would clear every offer's `available`
    ((200, {"Content-Type": "application/json"}, b'{"kind": "compute#zoneList", "items": []}'),
     "gcp: zones.list answered no zones"),
])
def test_a_failing_zones_list_costs_only_the_zone_status(replay, replayed, answer, reason: str) -> None:
    clean, _, _ = replayed
    server = replay("gcp", hook=lambda host, req, ex: answer if req.path.endswith("/zones") else None)
    ctx = replay_context(server, "gcp")
    batch = gcp.fetch(ctx)
    assert list(ctx.degraded) == ["zone status"] and ctx.degraded["zone status"].startswith(reason)
    # Every offer and its price as the clean run has them (a zone's region from its name), every
    # storage and egress row; only the zones' status is unknown, left to the warehouse.
    assert {o.key: o.price_per_hour for o in batch.offers} == {o.key: o.price_per_hour for o in clean.offers}
    assert (batch.storage, batch.egress, batch.quarantined) == (clean.storage, clean.egress, clean.quarantined)
    down = only(batch, "europe-west1-c", "a3-highgpu-8g")  # zone DOWN in the clean run
    assert (down.available, down.availability_level) == (None, "listed in zone")
    enrichment = gcp.PROVIDER.enrichment("zone status")
    assert (enrichment.name, enrichment.columns, enrichment.options) == (
        "zone status", ("available", "availability_level"), ())


def test_live_without_credentials_raises_missing_credentials(monkeypatch, tmp_path: Path) -> None:
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_API_KEY", "GPULEDGER_GCP_API_KEY",
                "GOOGLE_CLOUD_PROJECT", "GPULEDGER_GCP_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))  # no gcloud ADC file
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # and no metadata-server probe
    ctx = SourceContext(provider="gcp", mode="live")
    with pytest.raises(MissingCredentialsError, match=r"^gcp: no credentials: neither Application Default"):
        gcp.fetch(ctx)
    monkeypatch.setenv("GOOGLE_API_KEY", "not-a-real-key")
    with pytest.raises(MissingCredentialsError) as err:
        gcp.fetch(ctx)
    assert "API key reaches only the Billing Catalog" in str(err.value)
    assert "not-a-real-key" not in str(err.value)
    assert ctx.requests_made == 0


def test_record_mode_round_trip(replayed, tmp_path: Path) -> None:
    """`gpuledger record` path: the clients go through the recording proxy; the result replays the same."""
    from gpuledger.adapters.replay import Recorder, RecordingProxy

    batch, _, _ = replayed
    with ReplayServer(BUNDLED_RECORDINGS, providers=["gcp"]) as upstream:
        recorder = Recorder(tmp_path / "gcp", "gcp")
        ctx = SourceContext(provider="gcp", mode="record", replay_urls=upstream.endpoints(),
                            settings=dict(upstream.settings["gcp"]), recorder=recorder, http_attempts=2,
                            retry_wait_max_s=0.05)
        ctx.proxy = RecordingProxy(recorder, ctx.upstream_url)
        try:
            recorded_batch = gcp.fetch(ctx)
        finally:
            ctx.proxy.close()
        recorder.write_manifest(upstream.settings["gcp"], "2026-11-30T03:00:00")
    assert len(recorder.exchanges) == 53
    with ReplayServer(tmp_path, providers=["gcp"]) as again:
        replayed_batch = gcp.fetch(replay_context(again, "gcp"))
    assert recorded_batch.counts() == replayed_batch.counts() == batch.counts()
    # the earlier zone answers are the bundled replay's only: none when recording
    assert recorded_batch.availability == [] and len(replayed_batch.availability) == len(batch.availability)
    assert {o.key: o.price_per_hour for o in replayed_batch.offers} == {o.key: o.price_per_hour for o in batch.offers}


def test_recorded_bodies_are_exact_wire_format() -> None:
    """Every recorded body parses with the APIs' own message types, rejecting unknown fields."""
    from google.cloud import billing_v1, compute_v1, tpu_v2
    from google.cloud.location import locations_pb2
    from google.protobuf.json_format import Parse

    manifest = json.loads((RECORDING / "manifest.json").read_text())
    kinds = {"zones": compute_v1.ZoneList, "machineTypes": compute_v1.MachineTypeAggregatedList,
             "acceleratorTypes": compute_v1.AcceleratorTypeAggregatedList, "skus": billing_v1.ListSkusResponse,
             "tpu/acceleratorTypes": tpu_v2.ListAcceleratorTypesResponse}
    tokens: dict[str, list] = {}
    for ex in manifest["exchanges"]:
        path = RECORDING / ex["response"]["body_file"]
        text = (gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()).decode()
        kind = ex["path"].rsplit("/", 1)[-1]
        if ex["host"] == gcp.TPU_HOST and kind == "locations":  # a protobuf mixin, not a proto-plus message
            message = Parse(text, locations_pb2.ListLocationsResponse(), ignore_unknown_fields=False)
        else:
            kind = ("tpu/" if ex["host"] == gcp.TPU_HOST else "") + kind
            message = kinds[kind].from_json(text, ignore_unknown_fields=False)
        kind += ex["path"] if kind == "tpu/acceleratorTypes" else ""  # one chain per zone
        tokens.setdefault(kind, []).append((ex["match"]["params"].get("pageToken"), message.next_page_token))
    # Each page's nextPageToken is what the next exchange matches on; the last page has none.
    for kind, chain in tokens.items():
        asked = [t for t, _ in chain]
        given = [t for _, t in chain]
        assert asked == [None] + given[:-1] and given[-1] == "", kind


def test_every_in_scope_sku_an_offer_does_not_use_is_counted_by_reason(replayed) -> None:
    batch, _, _ = replayed
    # Read by hand from adapters/recordings/gcp: the plain vCPU/RAM SKUs of families without GPU
    # machine types in the selected regions are "E2 Instance Core/Ram running in Americas",
    # "Spot Preemptible H3 Instance Ram running in Americas" and "Spot Preemptible E2 Custom
    # Instance Core running in Paris" (T2D's are for Singapore, a region not selected).
    assert "4 SKUs not used: vCPU/RAM SKU of a machine family without GPU machine types" in batch.notes
    unused = [n for n in batch.notes if " SKUs not used: " in n]
    assert all(int(n.split()[0]) > 0 for n in unused) and len(unused) == len({n.split(": ")[1] for n in unused})


SERVICE_DISABLED = json.dumps({"error": {
    "code": 403, "status": "PERMISSION_DENIED",
    "message": "Cloud TPU API has not been used in project gpuledger-replay before or it is disabled.",
    "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                 "domain": "googleapis.com", "metadata": {"service": "tpu.googleapis.com"}}]}}).encode()


@pytest.mark.parametrize("answer, reason", [
    ((403, {"Content-Type": "application/json"}, SERVICE_DISABLED), "gcp: tpu locations.list (page 1) failed: HTTP 403"),
    ((200, {"Content-Type": "application/json"}, b'{"locations": []}'),
     "gcp: tpu locations.list returned no locations"),
])
def test_a_project_without_the_tpu_api_keeps_its_tpu_offers_and_loads_the_rest(
        replay, replayed, tmp_path: Path, answer, reason: str) -> None:
    # A project without the Cloud TPU API enabled (most) failed all of GCP every night; an empty answer would
    # close the 232 TPU offers, 12% of GCP's, below the anomaly guard's 25%.
    from tests.builders import T0, load, outcome

    clean, _, _ = replayed
    server = replay("gcp", hook=lambda host, req, ex: answer if host == gcp.TPU_HOST else None)
    ctx = replay_context(server, "gcp")
    batch = gcp.fetch(ctx)
    assert list(ctx.degraded) == ["TPU types"] and ctx.degraded["TPU types"].startswith(reason)
    assert not [o for o in batch.offers if o.gpu_model.startswith("TPU-")]
    gpus = {o.key: o.price_per_hour for o in clean.offers if not o.gpu_model.startswith("TPU-")}
    assert {o.key: o.price_per_hour for o in batch.offers} == gpus
    db = tmp_path / "w.duckdb"
    load(db, [outcome(clean, "gcp")], "refresh-1")
    degraded = gcp.PROVIDER.degraded(ctx)
    [report] = load(db, [outcome(batch, "gcp", when=T0 + timedelta(days=1), degraded=degraded)], "refresh-2")
    assert (report.state, report.new, report.changed, report.closed) == ("ok", 0, 0, 0)
    assert report.degraded.startswith(f"TPU types ({reason}")
