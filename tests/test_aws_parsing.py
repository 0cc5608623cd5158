"""AWS parsers against real AWS responses (tests/fixtures/aws/README.md), values checked by hand."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from gpuledger.adapters import aws
from gpuledger.adapters.base import SchemaDriftError
from gpuledger.warehouse.records import Batch

FIX = Path(__file__).parent / "fixtures" / "aws"


def moto_page() -> dict:
    data = json.loads((FIX / "moto_instance_types_gpu_older_families.json").read_text())
    return {"InstanceTypes": list(data.values())}


def test_instance_types_from_real_ec2_data() -> None:
    specs = aws.parse_instance_types([moto_page()])
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
    specs = aws.parse_instance_types([moto_page()])[itype]
    g = aws.gpu_facts(itype, None, specs)
    assert (g.gpu_model, g.variant_exact, g.memory_gb, g.memory_gb_nominal) == (model, exact, memory_gb, nominal)


def test_fractional_gpu_is_modelled_not_dropped() -> None:
    # g6f.large: EC2 reports the L4 slice as Count 0 with 2861 MiB (1/8 of 22888).
    slice_specs = aws.InstanceSpecs("g6f.large", "L4", "NVIDIA", 0, 2861, 2861, 2, 8.0, None, 10.0, False)
    g = aws.gpu_facts("g6f.large", None, slice_specs)
    assert g.gpu_model == "L4" and g.count == 0.125 and g.memory_gb == 2.794 and g.memory_gb_nominal == 24


def test_unknown_gpu_name_raises_for_quarantine() -> None:
    odd = aws.InstanceSpecs("g9.xlarge", "Z9000", "NVIDIA", 1, 4096, 4096, 4, 16.0, None, 10.0, False)
    with pytest.raises(ValueError, match="Z9000"):
        aws.gpu_facts("g9.xlarge", None, odd)


def test_bulk_csv_sample_keeps_only_linux_shared_on_demand_gpu_rows() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    meta: dict[str, str] = {}
    rows = list(aws.parse_offer_csv(lines, "ap-southeast-2", meta))
    # 44 rows: Windows/RHEL/SUSE and reserved terms, one GPU row that is SUSE, dedicated and
    # an unused capacity reservation. None of them is a rentable Linux GPU offer.
    assert rows == []
    assert meta["Publication Date"] == "2025-09-12T22:53:08Z"


def test_bulk_csv_rows_not_kept_are_counted_by_reason() -> None:
    from collections import Counter

    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    skipped: Counter[str] = Counter()
    assert list(aws.parse_offer_csv(lines, "ap-southeast-2", skipped=skipped)) == []
    # Counted by hand in the sample: 30 Reserved rows (20 c6i.large, 10 m6id.2xlarge); the 14
    # OnDemand rows are all Windows/RHEL/SUSE/Ubuntu Pro, Dedicated/Host or capacity reservations.
    assert skipped == {aws.SKIP_TERM: 30, aws.SKIP_VARIANT: 14}
    import csv
    import io

    names = next(csv.reader([lines[5]]))
    fields = next(csv.reader([next(ln for ln in lines if "c5d.2xlarge" in ln)]))
    for col, value in (("Operating System", "Linux"), ("Pre Installed S/W", "NA")):
        fields[names.index(col)] = value
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC).writerow(fields)
    skipped.clear()
    assert list(aws.parse_offer_csv(lines[:6] + [buf.getvalue().strip()], "ap-southeast-2", skipped=skipped)) == []
    assert skipped == {aws.SKIP_CPU_ONLY: 1}  # c5d has no GPU


def test_bulk_csv_row_shape_is_read_by_header_name() -> None:
    lines = (FIX / "AmazonEC2_index_csv_sample_20250912.csv").read_text().splitlines()
    # Turn the real SUSE/dedicated g5.48xlarge row into the row we want, field by field.
    header = lines[5]
    gpu_line = next(ln for ln in lines if "g5.48xlarge" in ln)
    import csv
    import io

    names = next(csv.reader([header]))
    fields = next(csv.reader([gpu_line]))
    fields[names.index("Operating System")] = "Linux"
    fields[names.index("Tenancy")] = "Shared"
    fields[names.index("CapacityStatus")] = "Used"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC).writerow(fields)
    rows = list(aws.parse_offer_csv(lines[:6] + [buf.getvalue().strip()], "ap-southeast-2"))
    assert len(rows) == 1
    r = rows[0]
    assert (r.instance_type, r.price, r.currency, r.unit) == ("g5.48xlarge", 21.30264, "USD", "Hrs")
    assert (r.vcpu, r.memory, r.gpu, r.gpu_memory, r.region) == ("192", "768 GiB", "8", "192 GB", "ap-southeast-2")
    # Without EC2 credentials the family table names the GPU and the list gives count/memory.
    g = aws.gpu_facts("g5.48xlarge", r, None)
    assert (g.gpu_model, g.count, g.memory_gb, g.total_memory_gb) == ("A10G", 8.0, 24.0, 192.0)


def test_truncated_csv_row_is_schema_drift() -> None:
    import csv
    import io

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
    with pytest.raises(SchemaDriftError, match="a row has 52 fields, the header 91"):
        list(aws.parse_offer_csv(lines[:6] + [cut], "x"))
    # A line the rule drops unparsed (Dedicated tenancy) is still caught as the file's last row.
    with pytest.raises(SchemaDriftError, match="ends in a partial row"):
        list(aws.parse_offer_csv(lines[:6] + [od[: len(od) // 2]], "x"))


def test_csv_without_header_is_schema_drift() -> None:
    with pytest.raises(SchemaDriftError, match="no header"):
        list(aws.parse_offer_csv(['"FormatVersion","v1.0"', '"x","y"'], "us-east-1"))


def test_get_products_storage_item_from_real_response() -> None:
    doc = json.loads((FIX / "awscli_example_get-products_ebs.json").read_text())
    rows = aws.parse_price_list_item(doc["PriceList"][0], "ap-southeast-1")
    # io1 in Singapore: $0.138 per GB-month, but the real item has no volumeApiName: not a volume we can name.
    assert rows == []
    item = json.loads(doc["PriceList"][0])
    item["product"]["attributes"]["volumeApiName"] = "io1"
    rows = aws.parse_price_list_item(item, "ap-southeast-1")
    assert [(r.kind, r.volume_api_name, r.price, r.unit) for r in rows] == [("storage", "io1", 0.138, "GB-Mo")]


def test_get_products_instance_item_shape() -> None:
    item = json.loads((FIX / "ec2-instance-selector_GetProducts_m5_large_priceitem.json").read_text())
    # m5.large has no GPU: the parser must not keep it.
    assert aws.parse_price_list_item(item, "us-east-1") == []


def test_spot_history_latest_per_az_in_utc() -> None:
    local = timezone(timedelta(hours=-5))
    pages = [{"SpotPriceHistory": [
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.4500", "Timestamp": datetime(2026, 11, 29, 20, 0, tzinfo=local)},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Linux/UNIX",
         "SpotPrice": "0.4100", "Timestamp": datetime(2026, 11, 29, 22, 0, tzinfo=local)},
        {"InstanceType": "g5.xlarge", "AvailabilityZone": "us-east-1a", "ProductDescription": "Windows",
         "SpotPrice": "0.9000", "Timestamp": datetime(2026, 11, 29, 23, 0, tzinfo=local)},
    ]}]
    assert aws.parse_spot_history(pages) == {
        ("g5.xlarge", "us-east-1a"): (0.41, "2026-11-30T03:00:00+00:00")}


def test_spot_advisor_real_feed() -> None:
    doc = json.loads((FIX / "spot-advisor-data_us-east-1_eu-west-1.json").read_text())
    adv = aws.parse_spot_advisor(doc, "us-east-1")
    assert adv["g5.xlarge"] == (">20%", 59)
    assert adv["p4d.24xlarge"] == ("10-15%", 67)
    assert adv["g5g.xlarge"] == ("<5%", 67)
    with pytest.raises(SchemaDriftError):
        aws.parse_spot_advisor({"spot_advisor": {}}, "us-east-1")


@pytest.mark.parametrize("text, gbps", [("3200 Gigabit", 3200), ("4x 100 Gigabit", 400),
                                         ("Up to 25 Gigabit", 25), ("Moderate", None)])
def test_network_performance(text: str, gbps: float | None) -> None:
    assert aws.parse_network_gbps(text) == gbps


def test_build_region_on_demand_spot_and_quarantine() -> None:
    specs = aws.parse_instance_types([moto_page()])
    prices = [
        aws.PriceRow("instance", "SKU1", "us-east-1", 1.006, "USD", "Hrs", instance_type="g5.xlarge"),
        aws.PriceRow("instance", "SKU2", "us-east-1", 21.957642, "USD", "Hrs", instance_type="p4d.24xlarge"),
        aws.PriceRow("instance", "SKU3", "us-east-1", 2.0, "CNY", "Hrs", instance_type="g5.2xlarge"),
        aws.PriceRow("storage", "SKU4", "us-east-1", 0.08, "USD", "GB-Mo", volume_api_name="gp3"),
        aws.PriceRow("egress", "SKU5", "us-east-1", 0.09, "USD", "GB", transfer_type="AWS Outbound",
                     to_location="External", tier_start="0", tier_end="10240"),
        aws.PriceRow("egress", "SKU6", "us-east-1", 0.02, "USD", "GB", transfer_type="InterRegion Outbound",
                     tier_start="0", tier_end="Inf"),
        aws.PriceRow("egress", "SKU7", "us-east-1", 0.01, "USD", "GB", transfer_type="InterRegion Outbound",
                     tier_start="0", tier_end="Inf"),
    ]
    payload = aws.RegionPayload(
        "us-east-1", prices, specs=specs, offerings={"g5.xlarge": ["us-east-1a", "us-east-1b"]},
        spot={("g5.xlarge", "us-east-1a"): (0.4024, "2026-11-30T02:00:00+00:00")},
        advisor={"g5.xlarge": (">20%", 59)})
    batch = Batch("aws")
    aws.build_region(batch, payload)
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


# Lines of the one-line rule's edge cases, each with its verdict worked out by hand from the rule
# (the 4th comma-separated piece is "OnDemand", or "Reserved" with the field "GPU instance" after it).
# SKU, OfferTermCode and RateCode as AWS writes them: 72 bytes, ending before the 3rd comma.
def _usual_head(sku: bytes, term_code: bytes = b"JRTCKXETXF") -> bytes:
    return b'"%s","%s","%s.%s.6YS6EN2CT7"' % (sku, term_code, sku, term_code)


_USUAL_HEAD = _usual_head(b"8FBD755MED6YVC8L")
assert len(_USUAL_HEAD) == 72

_EDGE_LINES = [
    (b'"no commas at all"', False),
    (b'"A","B","C","OnDemand","x"', True),
    (b'"one","comma"', False),  # fewer than 3 commas: the next line must still be tested alone
    (b'"A","B","C","OnDemand",', True),
    (b'', False),  # an empty line: neither kept nor counted
    (b'"A","B","C","Reserved","desc","GPU instance","p5"', True),
    (b'"A","B","C","Reserved","desc","Compute optimized","c5"', False),
    (b'"A","B","C","Reserved","GPU instance"', False),  # the family field needs a comma on both sides
    (b'"A","GPU instance","C","Reserved","x"', False),  # the family field occurs only before TermType
    (b'"A","B","C","OnDemandX","x"', False),
    (b'"A","B","C","Reserved",,"GPU instance",', True),
    (b'"A","B","C","OnDemand","GPU instance","x"\r', True),
    # OnDemand lines of compute products: kept only with the fields "Linux", "Shared" and "Used"
    (b'"A","B","C","OnDemand","d","Compute Instance","Linux","Shared","Used","z"', True),
    (b'"A","B","C","OnDemand","d","Compute Instance","Windows","Shared","Used","z"', False),
    (b'"A","B","C","OnDemand","d","Compute Instance (bare metal)","Linux","Dedicated","Used",', False),
    (b'"A","B","C","OnDemand","Compute Instance","Linux","Shared","Used",', True),  # fields right after TermType
    (b'"A","Linux","C","OnDemand","Compute Instance","Shared","Used",', False),  # "Linux" before TermType
    (b'"A","B","C","OnDemand","Compute Instance","Linux","Shared","Used"', False),  # "Used" not a field
    (b'"A","B","C","OnDemand","d","Compute Instances","Windows","z"', True),  # not a compute family
    (b'"A","B","C","OnDemand","d","Storage","x","Windows",', True),
    (b'"A","B","C","Reserved","d","Compute Instance","GPU instance","Linux","Shared","Used","z"', True),
    (b'"A","B","C","Reserved","d","Compute Instance","GPU instance","Linux","Shared","Unused","z"', False),
    (b'"one","comma"', False),  # the next line's 4th piece is "d": a match from here runs across
    (b'"B","C","OnDemand","d","Compute Instance","Windows",', False),
    # Lines of 88 bytes or more, where the 3rd comma of the usual layout (SKU, OfferTermCode,
    # RateCode of 16, 10 and 38 characters) is byte 72 and TermType is compared in place.
    (_USUAL_HEAD + b',"OnDemand","$1.00 per hour","Compute Instance","Linux","Shared","Used","p5"', True),
    (_USUAL_HEAD + b',"OnDemand","$1.00 per hour","Compute Instance","Windows","Shared","Used","p5"', False),
    (_USUAL_HEAD + b',"OnDemand"' + b' ' * 80, False),  # no comma after TermType
    (_USUAL_HEAD + b',"Reserved","1yr","GPU instance","Compute Instance","Linux","Shared","Used","p5"', True),
    # Reserved lines of one SKU in a row (one product: its fields after the term's are the same)
    (_usual_head(b"2EWCCDE55MHWXKVC", b"38NPMPTW36") + b',"Reserved","Upfront Fee","3yr","GPU instance",'
     b'"Compute Instance","Linux","Shared","Used","p5"', True),
    (_usual_head(b"2EWCCDE55MHWXKVC", b"4NA7Y494T4") + b',"Reserved","USD 1.2 per hour","1yr","GPU instance",'
     b'"Compute Instance","Linux","Shared","Used","p5"', True),
    # the next SKU differs from it in its last character only: tested on its own
    (_usual_head(b"2EWCCDE55MHWXKVD", b"38NPMPTW36") + b',"Reserved","Upfront Fee","3yr","Compute optimized",'
     b'"Compute Instance","Linux","Shared","Used","c5"', False),
    # two lines of a SKU of another variant: both counted as dropped variants
    (_usual_head(b"2EWCCDE55MHWXKVE", b"38NPMPTW36") + b',"Reserved","Upfront Fee","3yr","GPU instance",'
     b'"Compute Instance","Windows","Shared","Used","g5"', False),
    (_usual_head(b"2EWCCDE55MHWXKVE", b"4NA7Y494T4") + b',"Reserved","USD 1.9 per hour","1yr","GPU instance",'
     b'"Compute Instance","Windows","Shared","Used","g5"', False),
    # a comma inside the quoted SKU: the 4th piece is the RateCode, "OnDemand" the 5th
    (b'"SKUSKUS,SKUSKUSK"' + _USUAL_HEAD[18:] + b',"OnDemand","$1.00 per hour","Storage","gp3","x"', False),
    # SKU and OfferTermCode as one field: "OnDemand" at byte 73 is the 3rd piece, not TermType
    (b'"' + b'S' * 29 + b'"' + _USUAL_HEAD[30:] + b',"OnDemand","$1.00 per hour","Storage","gp3","x"', False),
    # a SKU of 15 characters and an OfferTermCode of 11: the 3rd comma is still byte 72, but the
    # others are not at 18 and 31, so the line is tested by the regex
    (b'"' + b'S' * 15 + b'","' + b'T' * 11 + b'"' + _USUAL_HEAD[31:] + b',"OnDemand","$1.00 per hour","Storage",', True),
    # short codes on a long line: TermType sits elsewhere and the line is tested by the regex
    (b'"A","B","C","OnDemand","' + b'd' * 80 + b'","Storage","gp3"', True),
    (b'"A","B","C","Reserved","' + b'd' * 80 + b'","OnDemand","OnDemand","OnDemand","x"', False),
]


def _term_kept(line: bytes) -> bool:
    """The TermType test alone: the 4th comma-separated piece is "OnDemand", or "Reserved" with
    the field "GPU instance" after it."""
    parts = line.split(b",", 4)
    return len(parts) == 5 and (parts[3] == b'"OnDemand"' or (parts[3] == b'"Reserved"'
                                                            and b',"GPU instance",' in parts[4]))


def _window_scan(body: bytes, chunk: int) -> tuple[list[bytes], int, int]:
    kept: list[bytes] = []
    lines = variant = 0
    for window, start, end in aws._line_windows(body[i:i + chunk] for i in range(0, len(body), chunk)):
        got, n, v = aws._kept_lines(window, start, end)
        kept += got
        lines += n
        variant += v
    return kept, lines, variant


# (the small item size makes most lines too long for numpy's search: bytes.find tests them)
@pytest.mark.parametrize(("window_bytes", "item_bytes"), [(64, 4096), (1 << 20, 4096), (1 << 20, 100)])
def test_window_prefilter_keeps_what_the_one_line_rule_keeps(window_bytes: int, item_bytes: int,
                                                              monkeypatch) -> None:
    import gzip

    monkeypatch.setattr(aws, "_WINDOW_BYTES", window_bytes)
    monkeypatch.setattr(aws, "_ITEM_BYTES", item_bytes)
    recording = Path(aws.__file__).parent / "recordings" / "aws" / "bulk" / "AmazonEC2" / "us-east-1" / "index.csv.gz"
    body = gzip.decompress(recording.read_bytes()).split(b"\n", 6)[6]  # the rows after the header
    real = body.rstrip(b"\n").split(b"\n")[:3000]
    edge = [line for line, _ in _EDGE_LINES]
    for lines in (real + edge, edge + real, edge):
        for chunk in (4093, 1 << 20):
            kept, counted, variant = _window_scan(b"\n".join(lines) + b"\n", chunk)
            assert kept == [line for line in lines if aws._KEPT_LINE.match(line)]
            assert counted == sum(1 for line in lines if line)
            assert variant == sum(1 for line in lines if _term_kept(line) and not aws._KEPT_LINE.match(line))
    assert [line for line, keep in _EDGE_LINES if keep] == [line for line in edge if aws._KEPT_LINE.match(line)]
    kept_real, _, _ = _window_scan(body, 1 << 20)
    assert len(kept_real) > 0 and any(b'"Reserved"' in line for line in kept_real)


def test_line_items_copy_at_most_their_budget(monkeypatch) -> None:
    """Many short lines and one long one: the items are not each as wide as the long line; the
    lines they cannot hold are searched by bytes.find, with the same answers."""
    monkeypatch.setattr(aws, "_ITEMS_MAX_BYTES", 64_000)
    short = [b'"A","B","C","OnDemand","' + b"d" * (i % 40) + b'","Linux",' for i in range(2000)]
    lines = [*short, b'"A","B","C","OnDemand","' + b"d" * 3000 + b'","Windows",']
    window = b"\n" + b"\n".join(lines) + b"\n"
    starts = np.array([window.index(line) for line in (lines[0], lines[1], lines[-1])])
    ends = starts + np.array([len(lines[0]), len(lines[1]), len(lines[-1])])
    few = aws._LineItems(window, starts, ends)
    assert few.items.dtype.itemsize == len(lines[-1])  # 3 ranges: all held by numpy's items
    assert few.has(b',"Linux",').tolist() == [True, True, False]
    offsets = np.flatnonzero(np.frombuffer(window, np.uint8) == 10)
    items = aws._LineItems(window, offsets[:-1] + 1, offsets[1:])
    assert items.items.nbytes <= 64_000 and len(items.long) > 0
    assert items.has(b',"Linux",').tolist() == [True] * 2000 + [False]
    assert items.has(b',"Windows",').tolist() == [False] * 2000 + [True]


@pytest.mark.parametrize("body, start, expected", [
    (b"\n", 0, [0]),
    (b"\nabcdefg\n", 0, [0, 8]),  # the second newline ends the first word
    (b"\nabcdefgh\n", 0, [0, 9]),  # ... and here starts the last, partial word
    (b"\n\n\n\n\n\n\n\n\n", 0, list(range(9))),  # every byte of a word a newline
    (b"x\na\nbb\n\nccc\n", 1, [1, 3, 6, 7, 11]),  # from an odd offset, several newlines per word
    (b"\n" + b"y" * 40 + b"\n" + b"z" * 7 + b"\n", 0, [0, 41, 49]),
])
def test_newline_offsets_finds_every_newline_in_order(body: bytes, start: int, expected: list[int]) -> None:
    assert aws._newline_offsets(body, start, len(body)).tolist() == expected


def test_newline_offsets_agrees_with_a_byte_by_byte_scan() -> None:
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=200).map(lambda b: b.replace(b"a", b"\n")), st.integers(0, 200), st.integers(0, 200))
    def check(body: bytes, start: int, end: int) -> None:
        start, end = min(start, len(body)), min(max(start, end), len(body))
        expected = [i for i in range(start, end) if body[i] == 10]
        assert aws._newline_offsets(body, start, end).tolist() == expected

    check()
