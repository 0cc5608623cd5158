"""AWS parsers against real AWS responses (tests/fixtures/aws/README.md), values checked by hand."""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from gpuledger.adapters.aws import ec2, offers, pricelist
from gpuledger.adapters.base import SchemaDriftError
from gpuledger.warehouse.records import Batch

FIX = Path(__file__).parent / "fixtures" / "aws"


def parse_lines(lines: list[str], region: str, meta: dict | None = None, skipped: Counter | None = None) -> list:
    """An offer file given as text lines, through the parser of the fetched files."""
    return pricelist.parse_offer_chunks([("\n".join(lines) + "\n").encode()], region, meta, skipped)


def moto_page() -> dict:
    data = json.loads((FIX / "moto_instance_types_gpu_older_families.json").read_text())
    return {"InstanceTypes": list(data.values())}


def test_instance_types_from_real_ec2_data() -> None:
    specs = ec2.parse_instance_types([moto_page()])
    g5 = specs["g5.xlarge"]
    assert (g5.gpu_name, g5.gpu_vendor, g5.gpu_count_reported, g5.gpu_memory_mib) == ("A10G", "NVIDIA", 1, 22888)
    assert (g5.vcpus, g5.ram_gb, g5.local_disk_gb) == (4, 16.0, 250)
    p4d = specs["p4d.24xlarge"]
    assert (p4d.gpu_count_reported, p4d.gpu_memory_mib, p4d.total_gpu_memory_mib) == (8, 40960, 327680)
    assert p4d.network_gbps == 400 and p4d.efa  # "4x 100 Gigabit"
    assert specs["g4ad.xlarge"].gpu_vendor == "AMD"
    assert len(specs) == 28


@pytest.mark.parametrize(
    "itype, model, exact, memory_gb, nominal",
    [
        ("g5.xlarge", "A10G", True, 22.352, 24),  # A10G reports 22888 MiB, sold as 24 GB
        ("p4d.24xlarge", "A100-SXM4-40", True, 40.0, 40),
        ("p3dn.24xlarge", "V100-SXM2-32", True, 32.0, 32),  # V100 32 GB told apart by memory
        ("g4dn.metal", "T4", True, 16.0, 16),
        ("g4ad.xlarge", "Radeon-Pro-V520", True, 8.0, 8),
        ("g5g.xlarge", "T4G", True, 16.0, 16),
    ],
)
def test_gpu_facts_canonical_names(itype: str, model: str, exact: bool, memory_gb: float, nominal: float) -> None:
    specs = ec2.parse_instance_types([moto_page()])[itype]
    g = offers.gpu_facts(itype, None, specs)
    assert (g.gpu_model, g.variant_exact, g.memory_gb, g.memory_gb_nominal) == (model, exact, memory_gb, nominal)


def test_fractional_gpu_is_modelled_not_dropped() -> None:
    # g6f.large: EC2 reports the L4 slice as Count 0 with 2861 MiB (1/8 of 22888).
    slice_specs = ec2.InstanceSpecs("g6f.large", "L4", "NVIDIA", 0, 2861, 2861, 2, 8.0, None, 10.0, False)
    g = offers.gpu_facts("g6f.large", None, slice_specs)
    assert g.gpu_model == "L4" and g.count == 0.125 and g.memory_gb == 2.794 and g.memory_gb_nominal == 24


def test_unknown_gpu_name_raises_for_quarantine() -> None:
    odd = ec2.InstanceSpecs("g9.xlarge", "Z9000", "NVIDIA", 1, 4096, 4096, 4, 16.0, None, 10.0, False)
    with pytest.raises(ValueError, match="Z9000"):
        offers.gpu_facts("g9.xlarge", None, odd)


def test_bulk_csv_sample_keeps_only_linux_shared_on_demand_gpu_rows() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    meta: dict[str, str] = {}
    rows = list(parse_lines(lines, "ap-southeast-2", meta))
    # 44 rows: Windows/RHEL/SUSE and reserved terms, one GPU row that is SUSE, dedicated and
    # an unused capacity reservation. None of them is a rentable Linux GPU offer.
    assert rows == []
    assert meta["Publication Date"] == "2025-09-12T22:53:08Z"


def test_bulk_csv_rows_not_kept_are_counted_by_reason() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    skipped: Counter[str] = Counter()
    assert list(parse_lines(lines, "ap-southeast-2", skipped=skipped)) == []
    # Counted by hand in the sample: 30 Reserved rows (20 c6i.large, 10 m6id.2xlarge); the 14
    # OnDemand rows are all Windows/RHEL/SUSE/Ubuntu Pro, Dedicated/Host or capacity reservations.
    assert skipped == {pricelist.SKIP_TERM: 30, pricelist.SKIP_VARIANT: 14}
    names = next(csv.reader([lines[5]]))
    fields = next(csv.reader([next(ln for ln in lines if "c5d.2xlarge" in ln)]))
    for col, value in (("Operating System", "Linux"), ("Pre Installed S/W", "NA")):
        fields[names.index(col)] = value
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC).writerow(fields)
    skipped.clear()
    assert list(parse_lines(lines[:6] + [buf.getvalue().strip()], "ap-southeast-2", skipped=skipped)) == []
    assert skipped == {pricelist.SKIP_CPU_ONLY: 1}  # c5d has no GPU


def test_bulk_csv_row_shape_is_read_by_header_name() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    # Turn the real SUSE/dedicated g5.48xlarge row into the row we want, field by field.
    header = lines[5]
    gpu_line = next(ln for ln in lines if "g5.48xlarge" in ln)
    names = next(csv.reader([header]))
    fields = next(csv.reader([gpu_line]))
    fields[names.index("Operating System")] = "Linux"
    fields[names.index("Tenancy")] = "Shared"
    fields[names.index("CapacityStatus")] = "Used"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC).writerow(fields)
    rows = list(parse_lines(lines[:6] + [buf.getvalue().strip()], "ap-southeast-2"))
    assert len(rows) == 1
    r = rows[0]
    assert (r.instance_type, r.price, r.currency, r.unit) == ("g5.48xlarge", 21.30264, "USD", "Hrs")
    assert (r.vcpu, r.memory, r.gpu, r.gpu_memory, r.region) == ("192", "768 GiB", "8", "192 GB", "ap-southeast-2")
    # Without EC2 credentials the family table names the GPU and the list gives count/memory.
    g = offers.gpu_facts("g5.48xlarge", r, None)
    assert (g.gpu_model, g.count, g.memory_gb, g.total_memory_gb) == ("A10G", 8.0, 24.0, 192.0)


def test_truncated_csv_row_is_schema_drift() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    header = next(csv.reader([lines[5]]))
    od = next(ln for ln in lines[6:] if ln.split(",", 4)[3] == '"OnDemand"')
    fields = next(csv.reader([od]))
    for column, value in (("Operating System", "Linux"), ("Tenancy", "Shared"), ("CapacityStatus", "Used")):
        fields[header.index(column)] = value  # the variant whose line the CSV parser reads
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(fields)
    wanted = buf.getvalue()
    cut = wanted[: wanted.index(',"Used",') + 8]  # cut after the comma that ends CapacityStatus (51st field): 52 fields
    with pytest.raises(SchemaDriftError, match=r'^aws: offer file for x is not valid CSV \(Expected 91 columns, got 52: '
                                               r'"2223B6PCG6QAUYY6","JRTCKXETXF",'):
        list(parse_lines(lines[:6] + [cut], "x"))
    # A row cut in a quoted field, of a variant never priced, is caught too.
    with pytest.raises(SchemaDriftError, match="not valid CSV"):
        list(parse_lines(lines[:6] + [od[: len(od) // 2]], "x"))


def test_csv_without_header_is_schema_drift() -> None:
    with pytest.raises(SchemaDriftError, match="no header"):
        list(parse_lines(['"FormatVersion","v1.0"', '"x","y"'], "us-east-1"))


def test_get_products_storage_item_from_real_response() -> None:
    doc = json.loads((FIX / "awscli_example_get-products_ebs.json").read_text())
    rows = pricelist.parse_price_list_item(doc["PriceList"][0], "ap-southeast-1")
    # io1 in Singapore: $0.138 per GB-month, but the real item has no volumeApiName: not a volume we can name.
    assert rows == []
    item = json.loads(doc["PriceList"][0])
    item["product"]["attributes"]["volumeApiName"] = "io1"
    rows = pricelist.parse_price_list_item(item, "ap-southeast-1")
    assert [(r.kind, r.volume_api_name, r.price, r.unit) for r in rows] == [("storage", "io1", 0.138, "GB-Mo")]


def test_get_products_instance_item_shape() -> None:
    item = json.loads((FIX / "ec2-instance-selector_GetProducts_m5_large_priceitem.json").read_text())
    # m5.large has no GPU: the parser must not keep it.
    assert pricelist.parse_price_list_item(item, "us-east-1") == []


def test_spot_history_latest_per_az_in_utc_is_the_spot_offer() -> None:
    local = timezone(timedelta(hours=-5))
    pages = [{"SpotPriceHistory": [
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.4500", "Timestamp": datetime(2026, 11, 29, 20, 0, tzinfo=local)},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.4100", "Timestamp": datetime(2026, 11, 29, 22, 0, tzinfo=local)},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Windows",
         "SpotPrice": "0.9000", "Timestamp": datetime(2026, 11, 29, 23, 0, tzinfo=local)},
    ]}]
    skipped: Counter[str] = Counter()
    history = ec2.parse_spot_observations(pages, skipped)
    assert [(o.price, o.observed_at.isoformat()) for o in history] == [
        ("0.4500", "2026-11-30T01:00:00+00:00"), ("0.4100", "2026-11-30T03:00:00+00:00")]
    assert skipped == {ec2.SKIP_SPOT_OTHER_PRODUCT: 1}
    batch = Batch("aws")
    offers.build_region(batch, offers.RegionPayload("us-east-1", [], specs=ec2.parse_instance_types([moto_page()]),
                                                    spot_history=history))
    [spot] = batch.offers
    assert (spot.purchase_option, spot.zone, spot.price_per_hour) == ("spot", "us-east-1a", 0.41)
    assert spot.price_observed_at == datetime(2026, 11, 30, 3, tzinfo=timezone.utc)
    assert len(batch.spot_prices) == 2


def test_spot_advisor_real_feed() -> None:
    doc = json.loads((FIX / "spot-advisor-data_us-east-1_eu-west-1.json").read_text())
    adv = ec2.parse_spot_advisor(doc, "us-east-1")
    assert adv["g5.xlarge"] == (">20%", 59)
    assert adv["p4d.24xlarge"] == ("10-15%", 67)
    assert adv["g5g.xlarge"] == ("<5%", 67)
    with pytest.raises(SchemaDriftError):
        ec2.parse_spot_advisor({"spot_advisor": {}}, "us-east-1")


@pytest.mark.parametrize("text, gbps", [("3200 Gigabit", 3200), ("4x 100 Gigabit", 400),
                                         ("Up to 25 Gigabit", 25), ("Moderate", None)])
def test_network_performance(text: str, gbps: float | None) -> None:
    assert ec2.parse_network_gbps(text) == gbps


def test_build_region_on_demand_spot_and_quarantine() -> None:
    specs = ec2.parse_instance_types([moto_page()])
    prices = [
        pricelist.PriceRow("instance", "SKU1", "us-east-1", 1.006, "USD", "Hrs", instance_type="g5.xlarge"),
        pricelist.PriceRow("instance", "SKU2", "us-east-1", 21.957642, "USD", "Hrs", instance_type="p4d.24xlarge"),
        pricelist.PriceRow("instance", "SKU3", "us-east-1", 2.0, "CNY", "Hrs", instance_type="g5.2xlarge"),
        pricelist.PriceRow("storage", "SKU4", "us-east-1", 0.08, "USD", "GB-Mo", volume_api_name="gp3"),
        pricelist.PriceRow("egress", "SKU5", "us-east-1", 0.09, "USD", "GB", transfer_type="AWS Outbound",
                     to_location="External", tier_start="0", tier_end="10240"),
        pricelist.PriceRow("egress", "SKU6", "us-east-1", 0.02, "USD", "GB", transfer_type="InterRegion Outbound",
                     tier_start="0", tier_end="Inf"),
        pricelist.PriceRow("egress", "SKU7", "us-east-1", 0.01, "USD", "GB", transfer_type="InterRegion Outbound",
                     tier_start="0", tier_end="Inf"),
    ]
    payload = offers.RegionPayload(
        "us-east-1", prices, specs=specs, offerings={"g5.xlarge": ["us-east-1a", "us-east-1b"]},
        spot_history=[ec2.SpotObservation("g5.xlarge", "us-east-1a", "Linux/UNIX", "0.4024",
                                          datetime(2026, 11, 30, 2, tzinfo=timezone.utc))],
        advisor={"g5.xlarge": (">20%", 59)})
    batch = Batch("aws")
    offers.build_region(batch, payload)
    by_key = {(o.instance_type, o.purchase_option, o.zone): o for o in batch.offers}
    od = by_key[("g5.xlarge", "on_demand", "")]
    assert (od.price_per_hour, od.gpu_model, od.available_count, od.interconnect) == (1.006, "A10G", 2, None)
    p4d = by_key[("p4d.24xlarge", "on_demand", "")]
    assert p4d.price_per_gpu_hour == pytest.approx(2.74470525)
    assert (p4d.interconnect, p4d.multinode_fabric, p4d.available) == ("NVSwitch", "EFA", False)
    spot = by_key[("g5.xlarge", "spot", "us-east-1a")]
    assert (spot.price_per_hour, spot.interruption_risk, spot.spot_savings_pct) == (0.4024, ">20%", 60.0)
    assert [q.reason for q in batch.quarantined] == [
        "price in CNY, not USD; no conversion is configured"]
    assert [(s.storage_class, s.usd_per_gb_month) for s in batch.storage] == [("gp3", 0.08)]
    egress = {(e.destination, e.tier_start_gb): e for e in batch.egress}
    assert egress[("internet", 0.0)].usd_per_gb == 0.09 and egress[("internet", 0.0)].tier_end_gb == 10240
    assert egress[("inter_region", 0.0)].usd_per_gb == 0.02  # the highest destination rate




# The rule a row of the offer file is kept by, stated on its raw text: its TermType (the 4th
# comma-separated piece: SKU, OfferTermCode and RateCode never hold commas) is "OnDemand", or
# "Reserved" with the field "GPU instance" after it; and the row of a compute product (a field
# "Compute Instance" or "Compute Instance (bare metal)", values only Product Family takes) is kept
# only with the fields "Linux", "Shared" and "Used" after TermType (the one variant priced).
KEPT_LINE = re.compile(
    r'[^,]*,[^,]*,[^,]*,(?:"OnDemand"(?=,)|"Reserved"(?=,.*?,"GPU instance",))'
    r'(?!(?=.*,"Compute Instance(?: \(bare metal\))?",)(?!(?=.*,"Linux",)(?=.*,"Shared",)(?=.*,"Used",)))')
TERM_PASSES = re.compile(r'[^,]*,[^,]*,[^,]*,(?:"OnDemand"(?=,)|"Reserved"(?=,.*?,"GPU instance",))')


def _variants() -> tuple[list[str], list[str]]:
    """The real g5.48xlarge row of the sample (a GPU family: never CPU-only) in every combination
    of the fields the rule reads, each with its own SKU; software, licence and market stay those
    of the variant priced, so the rule alone decides."""
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    names = next(csv.reader([lines[5]]))
    template = next(csv.reader([next(ln for ln in lines if "g5.48xlarge" in ln)]))
    out = []
    combos = [(t, i, f, o, n, c) for t in ("OnDemand", "Reserved", "Spot") for i in ("GPU instance", "General purpose")
              for f in (*pricelist.COMPUTE_FAMILIES, "Storage", "Data Transfer") for o in ("Linux", "Windows")
              for n in ("Shared", "Dedicated") for c in ("Used", "UnusedCapacityReservation")]
    for k, values in enumerate(combos):
        fields = list(template)
        fields[names.index("SKU")] = f"SKU{k:013d}"
        for column, value in zip(("TermType", "Instance Family", "Product Family", "Operating System", "Tenancy",
                                  "CapacityStatus"), values):
            fields[names.index(column)] = value
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="").writerow(fields)
        out.append(buf.getvalue())
    return lines[:6], out


def test_the_library_parse_keeps_what_the_one_line_rule_keeps() -> None:
    head, rows = _variants()
    assert len(rows) == 192
    skipped: Counter[str] = Counter()
    kept = parse_lines(head + rows, "ap-southeast-2", skipped=skipped)
    by_rule = [row for row in rows if KEPT_LINE.match(row)]
    compute = tuple(f',"{f}",' for f in pricelist.COMPUTE_FAMILIES)
    # Rows the rule keeps: a compute product's become price rows, the others (a storage product
    # without a volume, a transfer without a transfer type) are counted as other products.
    assert [r.sku for r in kept] == [next(csv.reader([row]))[0] for row in by_rule if any(c in row for c in compute)]
    # Linux, Shared, Used: OnDemand under either instance family, Reserved under "GPU instance" only,
    # each as both compute families
    assert [r.kind for r in kept] == ["instance"] * 4 + ["reserved"] * 2
    assert skipped[pricelist.SKIP_OTHER_PRODUCT] == sum(1 for row in by_rule if not any(c in row for c in compute))
    # Rows the rule drops: by TermType, or as another variant of a compute product.
    assert skipped[pricelist.SKIP_TERM] == sum(1 for row in rows if not TERM_PASSES.match(row))
    assert skipped[pricelist.SKIP_VARIANT] == sum(1 for row in rows if TERM_PASSES.match(row)
                                                  and not KEPT_LINE.match(row))
    assert sum(skipped.values()) + len(kept) == len(rows)


def test_the_one_line_rule_and_the_parse_agree_on_the_recorded_file() -> None:
    import gzip

    recording = Path(pricelist.__file__).parents[1] / "recordings" / "aws" / "bulk" / "AmazonEC2" / "us-east-1"
    lines = gzip.decompress((recording / "index.csv.gz").read_bytes()).decode().splitlines()
    skipped: Counter[str] = Counter()
    kept = parse_lines(lines, "us-east-1", skipped=skipped)
    rows = [ln for ln in lines[6:] if ln]
    by_rule = {next(csv.reader([row]))[0] for row in rows if KEPT_LINE.match(row)}
    assert {r.sku for r in kept} <= by_rule and len(kept) > 1000
    assert skipped[pricelist.SKIP_TERM] >= sum(1 for row in rows if not TERM_PASSES.match(row)) > 0
    assert skipped[pricelist.SKIP_VARIANT] >= sum(1 for row in rows if TERM_PASSES.match(row)
                                                  and not KEPT_LINE.match(row)) > 0
    assert sum(skipped.values()) + len(kept) == len(rows)
