"""Azure adapter: real Retail Prices pages (tests/fixtures/azure) and the real httpx client
against the loopback replay of adapters/recordings/azure (README there says what is real).
Values asserted here were checked by hand against those files."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from gpuledger.adapters import azure
from gpuledger.adapters.base import SchemaDriftError, SourceContext, SourceError, next_link
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, Exchange, Recorder, RecordingProxy, ReplayServer, Request
from tests.conftest import replay_context
from gpuledger.warehouse.gpus import UnknownGPUError, canonicalize
from gpuledger.warehouse.records import Batch, Offer

FIX = Path(__file__).parent / "fixtures" / "azure"
RECORDING = BUNDLED_RECORDINGS / "azure"


def sample(name: str) -> dict[str, Any]:
    return json.loads((FIX / name).read_text())


def recorded_items(folder: str) -> list[dict[str, Any]]:
    return [i for p in sorted((RECORDING / folder).glob("page-*.json")) for i in json.loads(p.read_text())["Items"]]


def mi25_known() -> bool:
    """NVv4 offers need an MI25 row in gpu_models.csv and its alias; until then they are quarantined."""
    try:
        canonicalize("azure", "AMD Radeon Instinct MI25", 16384)
        return True
    except UnknownGPUError:
        return False


def offers_by_key(batch: Batch) -> dict[tuple[str, str, str], Offer]:
    return {(o.region, o.instance_type, str(o.purchase_option)): o for o in batch.offers}


@pytest.fixture(scope="module")
def fetched() -> tuple[Batch, ReplayServer]:
    server = ReplayServer(BUNDLED_RECORDINGS, providers=["azure"])
    server.start()
    try:
        return azure.fetch(replay_context(server, "azure")), server
    finally:
        server.close()


# -- the real sample pages ------------------------------------------------------------------

def test_real_pages_parse_and_windows_is_never_an_offer() -> None:
    page = azure.parse_page(sample("ace_retail_aks_availability-set.json"), "sample")
    assert page.count == 2 and len(page.items) == 2 and azure.next_page_link(sample(
        "ace_retail_aks_availability-set.json")) is None
    batch = Batch("azure")
    # westeurope D2s v3 *Windows* (0.212 USD/h) and a P10 disk: neither becomes an offer or a quarantine.
    skipped = azure.build_vm_offers(batch, page.items)
    assert batch.offers == [] and batch.quarantined == []
    assert skipped.counts == {"Windows meters": 1, "service Storage": 1}
    asr = azure.parse_page(sample("ace_retail_asr_inferred-3.json"), "sample").items
    # westus D2s v3 Linux is a non-primary meter; Azure Site Recovery is not a VM.
    skipped = azure.build_vm_offers(batch, asr)
    assert skipped.counts == {"non-primary meters": 1, "service Storage": 1, "service Azure Site Recovery": 1}
    linux_primary = dict(next(i for i in asr if i["meterName"] == "D2s v3"), isPrimaryMeterRegion=True)
    skipped = azure.build_vm_offers(batch, [linux_primary])  # a CPU size: out of scope, not quarantined
    assert skipped.counts == {"sizes outside the GPU families": 1}
    assert batch.offers == [] and batch.quarantined == []


def test_real_count_may_differ_from_items() -> None:
    # A real page says Count 4 and holds 3 items: that is not schema drift.
    page = azure.parse_page(sample("ace_retail_asr_inferred-3.json"), "sample")
    assert (page.count, len(page.items)) == (4, 3)


def test_real_p10_disk_is_converted_from_per_disk_to_per_gib_month() -> None:
    items = azure.parse_page(sample("ace_retail_aks_availability-set.json"), "s").items + \
        azure.parse_page(sample("ace_retail_asr_inferred-3.json"), "s").items
    batch = Batch("azure")
    azure.build_storage(batch, items)
    got = {(s.region, s.storage_class): s for s in batch.storage}
    assert set(got) == {("westeurope", "premium-ssd-lrs-p10"), ("westus", "premium-ssd-lrs-p10")}
    west_eu = got[("westeurope", "premium-ssd-lrs-p10")]
    assert west_eu.usd_per_gb_month == pytest.approx(21.68 / 128)  # P10 = 128 GiB
    assert "per disk per month / 128 GiB" in west_eu.description
    assert got[("westus", "premium-ssd-lrs-p10")].usd_per_gb_month == pytest.approx(19.71 / 128)


def test_reservations_and_savings_plans_are_their_own_options_devtest_is_excluded() -> None:
    vm = next(i for i in recorded_items("vm") if i["armSkuName"] == "Standard_NC24ads_A100_v4"
              and i["armRegionName"] == "eastus" and "savingsPlan" in i)
    reservation = dict(vm, type="Reservation", reservationTerm="1 Year", retailPrice=19166.0, unitPrice=19166.0)
    reservation.pop("savingsPlan")
    odd_term = dict(reservation, reservationTerm="5 Years", meterId="x")
    devtest = dict(vm, type="DevTestConsumption", retailPrice=1.0)
    batch = Batch("azure")
    skipped = azure.build_vm_offers(batch, [vm, reservation, odd_term, devtest])
    got = {o.purchase_option: (o.price_per_hour, o.term_months, o.payment_option) for o in batch.offers}
    assert got == {
        "on_demand": (3.673, None, None),  # pay-as-you-go, not a savings-plan rate
        # the reservation's price is the whole year's: 19166 / 8760 h = 2.18790 USD/h
        "reserved_1y_upfront_or_monthly": (pytest.approx(2.1878995434), 12, "upfront_or_monthly"),
        # the savingsPlan array's hourly rates (vm["savingsPlan"]: 2.3999 for 1 year, 1.6319 for 3)
        "savings_plan_1y_upfront_or_monthly": (2.3999, 12, "upfront_or_monthly"),
        "savings_plan_3y_upfront_or_monthly": (1.6319, 36, "upfront_or_monthly"),
    }
    assert "savingsPlan" not in batch.offers[0].provider_data
    assert [q.reason for q in batch.quarantined] == [
        "reservation with unknown reservationTerm '5 Years' (expected one of ['1 Year', '3 Years'])"]
    assert skipped.counts == {"type DevTestConsumption": 1}


@pytest.mark.parametrize("meter, option", [
    ("ND96isrH100v5", "on_demand"),
    ("ND96isrH100v5 Spot", "spot"),
    ("ND96isrH100v5 Low Priority", "low_priority"),
    ("NC24ads A100 v4 Spot", "spot"),
])
def test_purchase_option_from_meter_name(meter: str, option: str) -> None:
    assert azure.purchase_option({"meterName": meter, "skuName": meter}) == option


def test_non_usd_item_is_quarantined() -> None:
    vm = next(i for i in recorded_items("vm") if i["armSkuName"] == "Standard_NC24ads_A100_v4"
              and i["armRegionName"] == "eastus" and i["meterName"] == "NC24ads A100 v4" and "Windows" not in
              i["productName"])
    eur = dict(vm, currencyCode="EUR", retailPrice=3.39)
    batch = Batch("azure")
    azure.build_vm_offers(batch, [eur])
    assert batch.offers == []
    assert len(batch.quarantined) == 1 and "price in EUR, not USD" in batch.quarantined[0].reason


def test_item_without_price_is_schema_drift() -> None:
    vm = dict(recorded_items("vm")[0])
    del vm["retailPrice"]
    with pytest.raises(SchemaDriftError, match="retailPrice"):
        azure.build_vm_offers(Batch("azure"), [vm])


def test_next_page_link_keeps_path_and_query_only() -> None:
    following = next_link(azure.next_page_link, azure.PRICES_HOST)
    first = {"path": azure.PRICES_PATH, "params": azure.first_page_params(azure.VM_FILTER), "json": None}
    link = "https://prices.azure.com:443/api/retail/prices?currencyCode=%27USD%27&$filter=x%20eq%20%27y%27&$skip=1000"
    assert following({"NextPageLink": link}, [], first) == {
        "path": "/api/retail/prices?currencyCode=%27USD%27&$filter=x%20eq%20%27y%27&$skip=1000", "params": {},
        "json": None}
    assert following({"NextPageLink": None}, [], first) is None
    with pytest.raises(SourceError, match="outside prices.azure.com"):
        following({"NextPageLink": "https://example.test/api/retail/prices?$skip=1000"}, [], first)


def test_filters_are_narrow() -> None:
    f = azure.VM_FILTER
    assert f.startswith("serviceName eq 'Virtual Machines' and (priceType eq 'Consumption' or "
                        "priceType eq 'Reservation') and (")
    assert all(f"contains(armSkuName, '{p}')" in f for p in ("Standard_NC", "Standard_ND", "Standard_NG", "Standard_NV"))
    assert "Standard_NP" not in f  # FPGA family
    assert azure.first_page_params(f)["currencyCode"] == "'USD'"


def test_gpu_table_fractional_and_multi_gpu_facts(fetched: tuple[Batch, ReplayServer]) -> None:
    size = {o.instance_type: o for o in fetched[0].offers if o.purchase_option == "on_demand"}
    nv6 = size["Standard_NV6ads_A10_v5"]
    assert (nv6.gpu_model, nv6.gpu_count, nv6.gpu_memory_gb, nv6.total_gpu_memory_gb, nv6.gpu_memory_gb_nominal) == \
        ("A10", 0.1667, 4.0, 4.0, 24)
    nv72 = size["Standard_NV72ads_A10_v5"]
    assert (nv72.gpu_count, nv72.gpu_memory_gb, nv72.total_gpu_memory_gb) == (2.0, 24.0, 48.0)
    assert size["Standard_NC24ads_A100_v4"].gpu_model == "A100-PCIe-80"
    assert size["Standard_ND96asr_v4"].gpu_model == "A100-SXM4-40"
    assert size["Standard_ND96amsr_A100_v4"].gpu_model == "A100-SXM4-80"
    assert size["Standard_NC40ads_H100_v5"].gpu_model == "H100-NVL"
    assert size["Standard_ND96isr_H100_v5"].gpu_model == "H100-SXM"
    h200 = size["Standard_ND96isr_H200_v5"]
    assert (h200.gpu_model, h200.gpu_variant_exact, h200.gpu_name_reported) == ("H200-SXM", True, "NVIDIA H200")
    assert size["Standard_NC6s_v3"].gpu_model == "V100-PCIe-16"
    assert size["Standard_ND96isr_MI300X_v5"].total_gpu_memory_gb == 1536.0
    assert all(s.startswith(azure.GPU_SKU_PREFIXES) for s in azure.GPU_SIZES)


def test_provider_declaration() -> None:
    facts = azure.PROVIDER.facts
    assert azure.PROVIDER.secret_env_vars == ()  # the Retail Prices API needs no key
    assert facts.billing_granularity_s == 1 and facts.minimum_charge_s == 60
    assert facts.access_jupyter is False
    assert "InfiniBand NDR 8×400 Gb/s" in facts.multinode_interconnect


# -- the real client against the replay server ---------------------------------------------------

def test_every_page_fetched_and_counted(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, server = fetched
    vm_requests = [r for _, r in server.requests if r.params.get("$filter") == azure.VM_FILTER]
    assert [r.params.get("$skip") for r in vm_requests] == [None] + [str(100 * n) for n in range(1, 14)]
    assert all(r.params["currencyCode"] == "'USD'" and r.params["api-version"] == azure.API_VERSION
               for host, r in server.requests if host == azure.PRICES_HOST)
    # 14 VM pages, 3 storage, 3 bandwidth; then 2 Resource Graph pages of spot eviction rates
    assert [host for host, _ in server.requests] == [azure.PRICES_HOST] * 20 + ["management.azure.com"] * 2
    assert "azure: Virtual Machines: 14 pages, 1367 items (pages' Count total 1367)" in batch.notes
    assert len(recorded_items("vm")) == 1367  # 6 of them Reservation items


def test_recorded_pages_have_the_api_envelope() -> None:
    for page in sorted(p for folder in ("vm", "storage", "bandwidth") for p in RECORDING.glob(f"{folder}/page-*.json")):
        doc = json.loads(page.read_text())
        assert list(doc) == ["BillingCurrency", "CustomerEntityId", "CustomerEntityType", "Items", "NextPageLink",
                             "Count"], page  # no "Url": that key was added by a third-party tool
        assert doc["Count"] == len(doc["Items"]) and doc["BillingCurrency"] == "USD"
        link = doc["NextPageLink"]
        assert link is None or link.startswith("https://prices.azure.com:443/api/retail/prices?")


def test_counts_from_the_recording(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, _ = fetched
    by_option: dict[str, int] = {}
    for o in batch.offers:
        by_option[str(o.purchase_option)] = by_option.get(str(o.purchase_option), 0) + 1
    mi25 = mi25_known()
    nvv4 = 20  # NVv4 offers (5 regions x 4 sizes, on-demand; as many Spot): quarantined without MI25
    # Savings plans: one offer per term of every Linux pay-as-you-go item with a savingsPlan array;
    # reservations: the 3 sizes x 2 terms the recording holds (README).
    plans = {(i["armRegionName"], i["armSkuName"]) for i in recorded_items("vm") if "savingsPlan" in i
             and "Windows" not in i["productName"] and (mi25 or not i["armSkuName"].startswith("Standard_NV"))
             and i["armSkuName"] in azure.GPU_SIZES}
    assert by_option == {"on_demand": 470 + (nvv4 if mi25 else 0), "spot": 402 + (nvv4 if mi25 else 0),
                         "low_priority": 5, "reserved_1y_upfront_or_monthly": 3, "reserved_3y_upfront_or_monthly": 3,
                         "savings_plan_1y_upfront_or_monthly": len(plans),
                         "savings_plan_3y_upfront_or_monthly": len(plans)}
    # storage: 40 disk classes in 5 regions, P30, E30 and Premium SSD v2 in 31 (recording README)
    assert (len(batch.egress), len(batch.storage)) == (216, 5 * 40 + 31 * 3)
    assert len(batch.quarantined) == (2 if mi25 else 2 + 2 * nvv4)
    # Nothing silent: every Linux VM meter left out is counted by reason (the NDm legacy duplicate).
    assert ("azure: Virtual Machines: skipped 441 Windows meters, 1 meters superseded by a newer "
            "effectiveStartDate") in batch.notes
    linux = {(i["armRegionName"], i["armSkuName"], azure.purchase_option(i)) for i in recorded_items("vm")
             if "Windows" not in i["productName"] and i["armSkuName"] in azure.GPU_SIZES}
    assert len(batch.offers) == 2 * len(plans) + (len(linux) if mi25 else len(linux) - 2 * nvv4)
    keys = [o.key for o in batch.offers]
    assert len(keys) == len(set(keys))


def test_windows_rates_are_excluded(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, _ = fetched
    got = offers_by_key(batch)
    # Recording: Linux 98.32, Windows 102.736 under the same meterName "ND96isrH100v5".
    assert got[("eastus", "Standard_ND96isr_H100_v5", "on_demand")].price_per_hour == 98.32
    assert got[("westeurope", "Standard_ND96isr_H100_v5", "on_demand")].price_per_hour == 127.816
    assert all("Windows" not in json.loads(o.provider_data)["productName"] for o in batch.offers)


def test_spot_and_low_priority(fetched: tuple[Batch, ReplayServer]) -> None:
    got = offers_by_key(fetched[0])
    spot = got[("eastus", "Standard_ND96isr_H100_v5", "spot")]
    assert (spot.price_per_hour, spot.spot_savings_pct) == (18.169536, 81.5)
    low = got[("eastus", "Standard_ND96isr_H100_v5", "low_priority")]
    assert (low.price_per_hour, low.spot_savings_pct) == (39.328, 60.0)  # the Windows LP rate 41.094 is not it
    a100_spot = got[("eastus", "Standard_NC24ads_A100_v4", "spot")]
    assert (a100_spot.price_per_hour, a100_spot.spot_savings_pct) == (0.444433, 87.9)
    assert ("eastus", "Standard_NC40ads_H100_v5", "spot") not in got  # no Spot meter in the recording


def test_hand_checked_offers(fetched: tuple[Batch, ReplayServer]) -> None:
    got = offers_by_key(fetched[0])
    a100 = got[("eastus", "Standard_NC24ads_A100_v4", "on_demand")]
    assert (a100.price_per_hour, a100.gpu_model, a100.gpu_count, a100.vcpus, a100.ram_gb) == \
        (3.673, "A100-PCIe-80", 1.0, 24.0, 220.0)
    assert a100.price_observed_at == datetime(2022, 7, 1, tzinfo=timezone.utc)  # "2022-07-01T00:00:00Z"
    nd_a100 = got[("eastus", "Standard_ND96asr_v4", "on_demand")]
    assert (nd_a100.price_per_hour, nd_a100.price_per_gpu_hour) == (27.197, pytest.approx(3.399625))
    assert (nd_a100.interconnect, nd_a100.multinode_fabric) == ("NVSwitch", "InfiniBand HDR 8x200 Gb/s")
    h100 = got[("eastus", "Standard_ND96isr_H100_v5", "on_demand")]
    assert (h100.gpu_model, h100.total_gpu_memory_gb, h100.multinode_fabric) == \
        ("H100-SXM", 640.0, "InfiniBand NDR 8x400 Gb/s")
    assert (h100.billing_granularity_s, h100.minimum_charge_s, h100.zone) == (1, 60, "")
    nc_h100 = got[("southcentralus", "Standard_NC40ads_H100_v5", "on_demand")]
    assert (nc_h100.price_per_hour, nc_h100.gpu_model, nc_h100.gpu_memory_gb) == (8.38, "H100-NVL", 94.0)
    assert got[("eastus", "Standard_NC40ads_H100_v5", "on_demand")].price_per_hour == 6.98
    h200 = got[("swedencentral", "Standard_ND96isr_H200_v5", "on_demand")]
    assert (h200.price_per_hour, h200.gpu_model) == (110.24, "H200-SXM")
    t4 = got[("southcentralus", "Standard_NC4as_T4_v3", "spot")]
    assert (t4.price_per_hour, t4.gpu_model) == (0.06941, "T4")
    # The NDm rate is listed twice (legacy and current product name): one offer, the current one.
    ndm = got[("eastus", "Standard_ND96amsr_A100_v4", "on_demand")]
    assert json.loads(ndm.provider_data)["productName"] == "Virtual Machines NDamsr A100 v4 Series Linux"


def test_every_recorded_region_has_offers(fetched: tuple[Batch, ReplayServer]) -> None:
    regions = {o.region for o in fetched[0].offers}
    recorded = {i["armRegionName"] for i in recorded_items("vm")}
    assert regions == recorded and len(regions) >= 30
    assert {"uksouth", "australiaeast", "brazilsouth", "centralindia", "jioindiacentral"} <= regions


def test_fractional_nvads_a10_v5(fetched: tuple[Batch, ReplayServer]) -> None:
    got = offers_by_key(fetched[0])
    nv6 = got[("eastus", "Standard_NV6ads_A10_v5", "on_demand")]
    assert (nv6.gpu_model, nv6.gpu_count, nv6.gpu_memory_gb, nv6.gpu_memory_gb_nominal) == ("A10", 0.1667, 4.0, 24.0)
    assert nv6.price_per_hour == 0.454 and nv6.price_per_gpu_hour == pytest.approx(0.454 / 0.1667)
    nv18 = got[("eastus", "Standard_NV18ads_A10_v5", "on_demand")]
    assert (nv18.gpu_count, nv18.gpu_memory_gb, nv18.total_gpu_memory_gb) == (0.5, 12.0, 12.0)
    nv72 = got[("southcentralus", "Standard_NV72ads_A10_v5", "spot")]
    assert (nv72.price_per_hour, nv72.gpu_count, nv72.interconnect) == (1.956, 2.0, "PCIe")


def test_nc_a10_v4_is_half_one_two_a10(fetched: tuple[Batch, ReplayServer]) -> None:
    # Price ladder 1.1 / 2.2 / 4.4 (westus3, skypilot-catalog v6 azure vms.csv), vCPUs 8 / 16 / 32, and the
    # Resource SKUs' 2 GPUs for NC32ads: NC8ads is half an A10 (12 GiB), NC16ads one, NC32ads two.
    got = offers_by_key(fetched[0])
    nc8 = got[("westus3", "Standard_NC8ads_A10_v4", "on_demand")]
    assert (nc8.gpu_model, nc8.gpu_count, nc8.gpu_memory_gb, nc8.total_gpu_memory_gb, nc8.price_per_hour) == \
        ("A10", 0.5, 12.0, 12.0, 1.1)
    assert nc8.price_per_gpu_hour == pytest.approx(2.2)
    data = json.loads(nc8.provider_data)
    assert data["gpu_share"] == "1/2" and "rounds GPU partitions up to 1" in data["gpu_facts_note"]
    nc16 = got[("westus3", "Standard_NC16ads_A10_v4", "on_demand")]
    nc32 = got[("westus3", "Standard_NC32ads_A10_v4", "on_demand")]
    assert (nc16.gpu_count, nc16.gpu_memory_gb, nc32.gpu_count, nc32.total_gpu_memory_gb) == (1.0, 24.0, 2.0, 48.0)
    assert "gpu_share" not in json.loads(nc16.provider_data)
    # The same price per A10 at each size: the ladder the GPU share explains.
    assert nc8.price_per_gpu_hour == pytest.approx(nc16.price_per_gpu_hour) == pytest.approx(nc32.price_per_gpu_hour)


def test_rtx_pro_6000_sizes_hand_checked(fetched: tuple[Batch, ReplayServer]) -> None:
    # Linux pay-as-you-go rates in a public "Pricing Mismatch Report" generated from the Retail Prices
    # API on 2026-09-01 (recording README): NC32lds eastus2 1.243, NC64lds eastus 2.44, NC256lds westus2
    # 11.00, NC256ds eastus2 12.76 USD/h. GPU shares from the NC_RTXPRO6000BSE_v6 size page.
    got = offers_by_key(fetched[0])
    nc32 = got[("eastus2", "Standard_NC32lds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert (nc32.price_per_hour, nc32.gpu_model, nc32.gpu_count, nc32.gpu_memory_gb) == \
        (1.243, "RTX-PRO-6000-S", 0.25, 24.0)
    assert json.loads(nc32.provider_data)["gpu_share"] == "1/4"
    nc64 = got[("eastus", "Standard_NC64lds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert (nc64.price_per_hour, nc64.gpu_count, nc64.gpu_memory_gb, nc64.vcpus, nc64.ram_gb) == \
        (2.44, 0.5, 48.0, 64.0, 128.0)
    nc256l = got[("westus2", "Standard_NC256lds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert (nc256l.price_per_hour, nc256l.gpu_count, nc256l.total_gpu_memory_gb, nc256l.interconnect) == \
        (11.0, 2.0, 192.0, "PCIe")
    nc256 = got[("eastus2", "Standard_NC256ds_xl_RTXPRO6000BSE_v6", "on_demand")]
    assert (nc256.price_per_hour, nc256.ram_gb, nc256.network_gbps) == (12.76, 1024.0, 100.0)
    assert not any(o.instance_type.endswith("RTXPRO6000BSE_v6") and o.purchase_option == "spot"
                   for o in fetched[0].offers)  # no Spot meter for the preview series


def test_jio_india_prices_hand_checked(fetched: tuple[Batch, ReplayServer]) -> None:
    # Same report: jioindiacentral NC24ads_A100_v4 5.142, NV36ads_A10_v5 4.48, NC40ads_H100_v5 9.772,
    # all on-demand with no Spot meter.
    got = offers_by_key(fetched[0])
    assert got[("jioindiacentral", "Standard_NC24ads_A100_v4", "on_demand")].price_per_hour == 5.142
    assert got[("jioindiacentral", "Standard_NV36ads_A10_v5", "on_demand")].price_per_hour == 4.48
    assert got[("jioindiacentral", "Standard_NC40ads_H100_v5", "on_demand")].price_per_hour == 9.772
    assert not [k for k in got if k[0] == "jioindiacentral" and k[2] == "spot"]


UNDOCUMENTED_SIZES = ("Standard_NC132lds_xl_RTXPRO6000BSE_v6", "Standard_NC16lds_xl_RTXPRO6000BSE_v6")


def test_unknown_gpu_size_is_quarantined(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, _ = fetched
    for size in UNDOCUMENTED_SIZES:  # in the feed, on no current size page: no GPU share to model
        unknown = [q for q in batch.quarantined if size in q.source_ref]
        assert len(unknown) == 1  # eastus2, Linux on-demand (Windows meters are skipped first)
        assert f"unknown GPU size {size}" in unknown[0].reason
        assert not any(o.instance_type == size for o in batch.offers)


def test_nvv4_mi25_needs_a_reference_row(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, _ = fetched
    nvv4_offers = [o for o in batch.offers if o.instance_type.endswith("as_v4") and o.term_months is None]
    nvv4_quarantined = [q for q in batch.quarantined if "as_v4/" in q.source_ref]
    if mi25_known():
        assert len(nvv4_offers) == 40 and not nvv4_quarantined
        assert {o.gpu_count for o in nvv4_offers} == {0.125, 0.25, 0.5, 1.0}
    else:
        assert not nvv4_offers and len(nvv4_quarantined) == 40
        assert all("AMD Radeon Instinct MI25" in q.reason for q in nvv4_quarantined)


def test_egress_tiers_and_inter_region(fetched: tuple[Batch, ReplayServer]) -> None:
    batch, _ = fetched
    eastus = sorted((e for e in batch.egress if e.region == "eastus" and e.destination == "internet"),
                    key=lambda e: e.tier_start_gb)
    assert [(e.tier_start_gb, e.tier_end_gb, e.usd_per_gb) for e in eastus] == [
        (0.0, 100.0, 0.0), (100.0, 10340.0, 0.087), (10340.0, 51300.0, 0.083),
        (51300.0, 153700.0, 0.07), (153700.0, None, 0.05)]
    japan = next(e for e in batch.egress if e.region == "japaneast" and e.tier_start_gb == 100.0)
    assert japan.usd_per_gb == 0.12
    inter = next(e for e in batch.egress if e.region == "westeurope" and e.destination == "inter_region")
    assert inter.usd_per_gb == 0.05 and "0.02 to 0.05 USD/GB" in inter.description


def test_storage_per_gib_month(fetched: tuple[Batch, ReplayServer]) -> None:
    got = {(s.region, s.storage_class): s for s in fetched[0].storage}
    # Each tier at its own price (recording README "Disks"): P10 19.71 and P30 135.17 a disk-month.
    assert got[("eastus", "premium-ssd-lrs-p10")].usd_per_gb_month == pytest.approx(19.71 / 128)
    assert got[("eastus", "premium-ssd-lrs-p30")].usd_per_gb_month == pytest.approx(135.17 / 1024)
    assert got[("eastus", "standard-ssd-lrs-e30")].usd_per_gb_month == 0.075  # 76.80 / 1024
    assert got[("eastus", "premium-ssd-v2-lrs")].usd_per_gb_month == pytest.approx(0.0803)  # 0.00011 x 730
    assert "priced per disk, not per GiB" in got[("westeurope", "premium-ssd-lrs-p30")].description
    # Every tier where the recording has them all (P1-P80, E1-E80, S4-S80); P30 and E30 elsewhere.
    assert sum(r == "eastus" and c.startswith(("premium-ssd-lrs-", "standard-ssd-lrs-", "standard-hdd-lrs-"))
               for r, c in got) == 14 + 14 + 11
    assert {c for r, c in got if r == "northeurope"} == {"premium-ssd-lrs-p30", "standard-ssd-lrs-e30",
                                                           "premium-ssd-v2-lrs"}


def test_region_setting_narrows_the_result_not_the_query() -> None:
    with ReplayServer(BUNDLED_RECORDINGS, providers=["azure"]) as server:
        batch = azure.fetch(replay_context(server, "azure", settings={"azure_regions": "eastus,westeurope"}))
        assert len(server.requests) == 20 + 2  # price pages, Resource Graph pages
    assert {o.region for o in batch.offers} == {"eastus", "westeurope"}
    assert {e.region for e in batch.egress} == {"eastus", "westeurope"}


# -- failures: nothing partial comes back ---------------------------------------------------------

def _on_page(skip: str, answer: Any):
    def hook(host: str, req: Request, ex: Exchange | None) -> Any:
        if req.params.get("$filter") == azure.VM_FILTER and req.params.get("$skip") == skip:
            return answer(ex)
        return None
    return hook


def test_a_500_on_page_2_fails_the_whole_scrape(replay: Any) -> None:
    server = replay("azure", hook=_on_page("100", lambda ex: (500, {"Content-Type": "text/plain"}, b"upstream timeout")))
    with pytest.raises(SourceError, match=r"^azure: prices.azure.com/api/retail/prices \(Virtual Machines page 2\) "
                       r"failed after 2 attempts: HTTP 500 from prices.azure.com/api/retail/prices: upstream timeout$"):
        azure.fetch(replay_context(server, "azure"))
    skips = [r.params.get("$skip") for _, r in server.requests]
    assert skips == [None, "100", "100"]  # retried once, then no further page and no other query


def test_non_usd_page_is_quarantined_not_loaded(replay: Any) -> None:
    def to_eur(ex: Exchange | None) -> Any:
        assert ex is not None
        body = ex.body().replace(b'"currencyCode": "USD"', b'"currencyCode": "EUR"').replace(
            b'"BillingCurrency": "USD"', b'"BillingCurrency": "EUR"')
        return 200, {"Content-Type": "application/json"}, body

    batch = azure.fetch(replay_context(replay("azure", hook=_on_page("200", to_eur)), "azure"))
    eur = [q for q in batch.quarantined if "price in EUR, not USD" in q.reason]
    page3 = json.loads((RECORDING / "vm" / "page-03.json").read_text())["Items"]
    linux_gpu = [i for i in page3 if "Windows" not in i["productName"]
                 and i["armSkuName"] not in UNDOCUMENTED_SIZES]
    assert len(eur) == len(linux_gpu) and eur
    assert all(o.source_currency == "USD" for o in batch.offers)


def test_page_without_items_is_schema_drift(replay: Any) -> None:
    server = replay("azure", hook=_on_page("300", lambda ex: (200, {"Content-Type": "application/json"},
                                                              b'{"error": {"code": "Throttled"}}')))
    with pytest.raises(SchemaDriftError, match="Virtual Machines page lacks Items/NextPageLink"):
        azure.fetch(replay_context(server, "azure"))


def test_paging_loop_is_stopped(replay: Any) -> None:
    def loop(ex: Exchange | None) -> Any:
        assert ex is not None
        doc = json.loads(ex.body())
        doc["NextPageLink"] = doc["NextPageLink"].replace("$skip=300", "$skip=200")
        return 200, {"Content-Type": "application/json"}, json.dumps(doc).encode()

    with pytest.raises(SourceError, match="azure Virtual Machines: the next page asked for is one already read"):
        azure.fetch(replay_context(replay("azure", hook=_on_page("200", loop)), "azure"))


# -- enrichments: each one's failure costs only itself ---------------------------------------------

def _on_query(odata_filter: str, skip: str | None, answer: Any):
    def hook(host: str, req: Request, ex: Exchange | None) -> Any:
        if req.params.get("$filter") == odata_filter and req.params.get("$skip") == skip:
            return answer
        return None
    return hook


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("name, hook, reason", [
    ("managed disk prices", _on_query(azure.STORAGE_FILTER, "200", (404, {}, b"gone")),
     "azure: HTTP 404 from prices.azure.com/api/retail/prices (Storage page 3): gone"),
    # an item without its price: the pages read before it add nothing either
    ("managed disk prices", _on_query(azure.STORAGE_FILTER, "200", (200, JSON, json.dumps(
        {"Items": [{"armRegionName": "eastus"}], "NextPageLink": None, "Count": 1}).encode())),
     "azure: Storage item ? lacks"),
    ("bandwidth prices", _on_query(azure.BANDWIDTH_FILTER, None, (500, {}, b"upstream timeout")),
     "azure: prices.azure.com/api/retail/prices (Bandwidth page 1) failed after 2 attempts: HTTP 500"),
    ("bandwidth prices", _on_query(azure.BANDWIDTH_FILTER, "100", (200, JSON, b'{"error": {"code": "Throttled"}}')),
     "azure: Bandwidth page lacks Items/NextPageLink"),
])
def test_a_failing_disk_or_bandwidth_query_costs_only_its_own_rows(replay: Any, fetched: tuple[Batch, ReplayServer],
                                                                   name: str, hook: Any, reason: str) -> None:
    ctx = replay_context(replay("azure", hook=hook), "azure")
    batch = azure.fetch(ctx)
    assert list(ctx.degraded) == [name] and ctx.degraded[name].startswith(reason)
    clean = fetched[0]
    # The offers and the other query's rows load as recorded; the failed query's rows are left to
    # the warehouse (a run without storage or egress rows leaves those tables alone).
    assert sorted(o.key for o in batch.offers) == sorted(o.key for o in clean.offers)
    assert (batch.storage, batch.egress) == (([], clean.egress) if name == "managed disk prices" else
                                             (clean.storage, []))
    assert {e.name for e in azure.PROVIDER.enrichments} == {"managed disk prices", "bandwidth prices",
                                                            "spot eviction rates"}


@pytest.mark.parametrize("answer, reason", [
    ((500, {}, b"upstream timeout"),
     "azure: management.azure.com/providers/Microsoft.ResourceGraph/resources failed after 2 attempts: HTTP 500"),
    ((200, JSON, b'{"totalRecords": 0, "count": 0, "data": {"rows": []}}'),
     "azure: Resource Graph answer has no `data` row list"),
    # valid but empty: what an identity that can read no subscription gets, not "no size has a rate"
    ((200, JSON, b'{"totalRecords": 0, "count": 0, "data": [], "facets": [], "resultTruncated": "false"}'),
     "azure: Resource Graph answered no spot eviction rates"),
])
def test_a_failing_resource_graph_leaves_the_spot_risk_to_the_warehouse(replay: Any, answer: Any, reason: str) -> None:
    server = replay("azure", hook=lambda host, req, ex: answer if host == "management.azure.com" else None)
    ctx = replay_context(server, "azure")
    batch = azure.fetch(ctx)
    assert list(ctx.degraded) == ["spot eviction rates"] and ctx.degraded["spot eviction rates"].startswith(reason)
    spot = [o for o in batch.offers if o.purchase_option == "spot"]
    assert len(spot) == 422 and len(batch.offers) == 1813
    # eastus ND96isr H100 v5 Spot has rate "0-5" in resource-graph/page-01.json; not asked, it is unknown
    h100 = next(o for o in spot if (o.region, o.instance_type) == ("eastus", "Standard_ND96isr_H100_v5"))
    assert (h100.interruption_risk, h100.interruption_risk_level) == (None, "unknown")
    assert not any("spot eviction rates:" in n for n in batch.notes)
    [enrichment] = [e for e in azure.PROVIDER.enrichments if e.name == "spot eviction rates"]
    assert "interruption_risk_level" in enrichment.columns and not enrichment.options


# -- recording (the path a live recording takes): no credentials needed ---------------------------

def test_record_mode_follows_pages_through_the_proxy_without_credentials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID", "AZURE_SUBSCRIPTION_ID"):
        monkeypatch.delenv(var, raising=False)
    with ReplayServer(BUNDLED_RECORDINGS, providers=["azure"]) as upstream:
        recorder = Recorder(tmp_path / "azure", "azure")
        ctx = SourceContext(provider="azure", mode="record", replay_urls=upstream.endpoints(), recorder=recorder,
                            http_attempts=2, retry_wait_max_s=0.05, http_timeout_s=10)
        proxy = RecordingProxy(recorder, ctx.upstream_url)
        ctx.proxy = proxy
        try:
            recorded_batch = azure.fetch(ctx)
        finally:
            proxy.close()
        recorder.write_manifest({}, "2026-11-30T03:00:00Z")
    assert len(recorder.exchanges) == 20 + 2  # price pages, Resource Graph pages
    # The recording just made replays to the same result.
    with ReplayServer(tmp_path, providers=["azure"]) as again:
        replayed = azure.fetch(replay_context(again, "azure"))
    assert replayed.counts() == recorded_batch.counts()
    assert sorted(o.key for o in replayed.offers) == sorted(o.key for o in recorded_batch.offers)


def test_saved_pages_parse() -> None:
    pages = [json.loads(p.read_text()) for p in sorted((RECORDING / "vm").glob("page-*.json"))]
    assert sum(len(azure.parse_page(doc, "saved").items) for doc in pages) == 1367


def test_a_failing_later_page_is_named_by_query_and_page_not_by_its_whole_url(replay: Any) -> None:
    """A next-page link holds the whole OData filter: ~700 characters before the cause, which the degraded
    reason's 300 cut off entirely."""
    server = replay("azure", hook=_on_page("400", lambda ex: (500, JSON, b'{"Error": "Internal"}')))
    with pytest.raises(SourceError) as failed:
        azure.fetch(replay_context(server, "azure"))
    assert str(failed.value) == ('azure: prices.azure.com/api/retail/prices (Virtual Machines page 5) failed after 2 '
                                 'attempts: HTTP 500 from prices.azure.com/api/retail/prices: {"Error": "Internal"}')
    ctx = replay_context(replay("azure", hook=_on_query(azure.BANDWIDTH_FILTER, "100", (
        200, {"Content-Type": "text/html"}, b"<html>gateway</html>"))), "azure")
    batch = azure.fetch(ctx)
    assert ctx.degraded == {"bandwidth prices": "azure: prices.azure.com/api/retail/prices (Bandwidth page 2) did not "
                                                "answer JSON (starts '<html>gateway</html>')"}
    assert batch.egress == [] and len(batch.offers) == 1813
