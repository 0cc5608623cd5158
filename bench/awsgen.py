"""Synthetic AWS EC2 bulk offer file (CSV form) at any scale, for the ingest benchmark.

The format is the real one: the 5 metadata lines and the exact 91-column header of the real
sample (tests/fixtures/aws/AmazonEC2_index_csv_sample_20250912.csv), every non-empty field
quoted, empty fields bare, LF line endings. The mix follows the real all-region file (about
7.7 million rows, 5.7 GB): ~1,000 instance types of which ~80 carry GPUs, 36 regions, 12
operating-system/licence/software variants x 3 tenancies x 3 capacity statuses per type and
region, Reserved terms (12 offer terms, Partial/All Upfront with an Upfront Fee row) on the
Used, non-Host products, so ~18% of rows are OnDemand and ~82% Reserved, plus EBS, snapshot,
IOPS and IP-address products per region. Rows are in the real file's order: by SKU, then offer
term code, so the products of a region interleave and each product's rows are adjacent.

`write_offer_file(path, target_bytes)` keeps each product (region x type x variant) with
probability target/full so a small file has the same mix as a full one; output is
deterministic for a given target (seeded PRNG). Usable as a script:

    python -m bench.awsgen OUT.csv --gb 1
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path
from typing import Iterator

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "aws" / "AmazonEC2_index_csv_sample_20250912.csv"
FULL_SCALE_BYTES = int(5.7e9)

META = [
    ("FormatVersion", "v1.0"),
    ("Disclaimer", "This pricing list is for informational purposes only. All prices are subject to the additional "
                   "terms included in the pricing pages on http://aws.amazon.com. All Free Tier prices are also "
                   "subject to the terms included at https://aws.amazon.com/free/"),
    ("Publication Date", "2026-11-25T17:30:12Z"),
    ("Version", "20261125173012"),
    ("OfferCode", "AmazonEC2"),
]


def header() -> list[str]:
    """The 91 column names of the real sample file's header line."""
    import csv

    with FIXTURE.open(newline="") as f:
        rows = list(csv.reader(f))
    head = rows[5]
    assert head[0] == "SKU" and len(head) == 91, "the real sample header changed"
    return head


# 36 regions: code, location name, usage-type prefix.
REGIONS = [
    ("us-east-1", "US East (N. Virginia)", ""), ("us-east-2", "US East (Ohio)", "USE2-"),
    ("us-west-1", "US West (N. California)", "USW1-"), ("us-west-2", "US West (Oregon)", "USW2-"),
    ("af-south-1", "Africa (Cape Town)", "AFS1-"), ("ap-east-1", "Asia Pacific (Hong Kong)", "APE1-"),
    ("ap-south-1", "Asia Pacific (Mumbai)", "APS3-"), ("ap-south-2", "Asia Pacific (Hyderabad)", "APS5-"),
    ("ap-northeast-1", "Asia Pacific (Tokyo)", "APN1-"), ("ap-northeast-2", "Asia Pacific (Seoul)", "APN2-"),
    ("ap-northeast-3", "Asia Pacific (Osaka)", "APN3-"), ("ap-southeast-1", "Asia Pacific (Singapore)", "APS1-"),
    ("ap-southeast-2", "Asia Pacific (Sydney)", "APS2-"), ("ap-southeast-3", "Asia Pacific (Jakarta)", "APS4-"),
    ("ap-southeast-4", "Asia Pacific (Melbourne)", "APS6-"), ("ap-southeast-5", "Asia Pacific (Malaysia)", "APS7-"),
    ("ca-central-1", "Canada (Central)", "CAN1-"), ("ca-west-1", "Canada West (Calgary)", "CAW1-"),
    ("eu-central-1", "EU (Frankfurt)", "EUC1-"), ("eu-central-2", "EU (Zurich)", "EUC2-"),
    ("eu-west-1", "EU (Ireland)", "EU-"), ("eu-west-2", "EU (London)", "EUW2-"),
    ("eu-west-3", "EU (Paris)", "EUW3-"), ("eu-north-1", "EU (Stockholm)", "EUN1-"),
    ("eu-south-1", "EU (Milan)", "EUS1-"), ("eu-south-2", "EU (Spain)", "EUS2-"),
    ("il-central-1", "Israel (Tel Aviv)", "ILC1-"), ("me-south-1", "Middle East (Bahrain)", "MES1-"),
    ("me-central-1", "Middle East (UAE)", "MEC1-"), ("sa-east-1", "South America (Sao Paulo)", "SAE1-"),
    ("mx-central-1", "Mexico (Central)", "MXC1-"), ("ap-east-2", "Asia Pacific (Taipei)", "APE2-"),
    ("ap-southeast-7", "Asia Pacific (Thailand)", "APS8-"), ("us-gov-west-1", "AWS GovCloud (US-West)", "UGW1-"),
    ("us-gov-east-1", "AWS GovCloud (US-East)", "UGE1-"), ("eu-isoe-west-1", "EU ISOE West", "EIW1-"),
]

# GPU families: (family, GPU name, GB per GPU, sizes as (size, vcpu, mem GiB, gpus)).
GPU_FAMILIES = [
    ("g4dn", 16, [("xlarge", 4, 16, 1), ("2xlarge", 8, 32, 1), ("4xlarge", 16, 64, 1), ("8xlarge", 32, 128, 1),
                  ("12xlarge", 48, 192, 4), ("16xlarge", 64, 256, 1), ("metal", 96, 384, 8)]),
    ("g4ad", 8, [("xlarge", 4, 16, 1), ("2xlarge", 8, 32, 1), ("4xlarge", 16, 64, 1), ("8xlarge", 32, 128, 2),
                 ("16xlarge", 64, 256, 4)]),
    ("g5", 24, [("xlarge", 4, 16, 1), ("2xlarge", 8, 32, 1), ("4xlarge", 16, 64, 1), ("8xlarge", 32, 128, 1),
                ("12xlarge", 48, 192, 4), ("16xlarge", 64, 256, 1), ("24xlarge", 96, 384, 4),
                ("48xlarge", 192, 768, 8)]),
    ("g5g", 16, [("xlarge", 4, 8, 1), ("2xlarge", 8, 16, 1), ("4xlarge", 16, 32, 1), ("8xlarge", 32, 64, 1),
                 ("16xlarge", 64, 128, 2), ("metal", 64, 128, 2)]),
    ("g6", 24, [("xlarge", 4, 16, 1), ("2xlarge", 8, 32, 1), ("4xlarge", 16, 64, 1), ("8xlarge", 32, 128, 1),
                ("12xlarge", 48, 192, 4), ("16xlarge", 64, 256, 1), ("24xlarge", 96, 384, 4),
                ("48xlarge", 192, 768, 8)]),
    ("gr6", 24, [("4xlarge", 16, 128, 1), ("8xlarge", 32, 256, 1)]),
    ("g6e", 48, [("xlarge", 4, 32, 1), ("2xlarge", 8, 64, 1), ("4xlarge", 16, 128, 1), ("8xlarge", 32, 256, 1),
                 ("12xlarge", 48, 384, 4), ("16xlarge", 64, 512, 1), ("24xlarge", 96, 768, 4),
                 ("48xlarge", 192, 1536, 8)]),
    ("g6f", 3, [("large", 2, 8, 0.125), ("xlarge", 4, 16, 0.125), ("2xlarge", 8, 32, 0.25),
                ("4xlarge", 16, 64, 0.5)]),
    ("gr6f", 6, [("4xlarge", 16, 128, 0.5)]),
    ("g7e", 96, [("2xlarge", 8, 64, 1), ("4xlarge", 16, 128, 1), ("8xlarge", 32, 256, 1),
                 ("12xlarge", 48, 512, 2), ("24xlarge", 96, 1024, 4), ("48xlarge", 192, 2048, 8)]),
    ("p3", 16, [("2xlarge", 8, 61, 1), ("8xlarge", 32, 244, 4), ("16xlarge", 64, 488, 8)]),
    ("p3dn", 32, [("24xlarge", 96, 768, 8)]),
    ("p4d", 40, [("24xlarge", 96, 1152, 8)]),
    ("p4de", 80, [("24xlarge", 96, 1152, 8)]),
    ("p5", 80, [("4xlarge", 16, 256, 1), ("48xlarge", 192, 2048, 8)]),
    ("p5e", 141, [("48xlarge", 192, 2048, 8)]),
    ("p5en", 141, [("48xlarge", 192, 2048, 8)]),
    ("p6-b200", 179, [("48xlarge", 192, 2048, 8)]),
    # Families the adapter does not list by name: kept only through a positive GPU column.
    ("g3", 8, [("4xlarge", 16, 122, 1), ("8xlarge", 32, 244, 2), ("16xlarge", 64, 488, 4)]),
    ("g3s", 8, [("xlarge", 4, 30.5, 1)]),
]
CPU_PREFIXES = ["m", "c", "r", "t", "i", "x", "z", "d", "h", "u", "im", "is", "hpc", "trn", "inf", "vt", "f", "mac"]
CPU_GENS = ["4", "5", "5a", "5ad", "5d", "5n", "5dn", "5zn", "6a", "6g", "6gd", "6i", "6id", "6in", "6idn",
            "7a", "7g", "7gd", "7i", "7i-flex", "8g", "8gd", "8i", "8a"]
CPU_SIZES = [("medium", 1, 4), ("large", 2, 8), ("xlarge", 4, 16), ("2xlarge", 8, 32), ("4xlarge", 16, 64),
             ("8xlarge", 32, 128), ("12xlarge", 48, 192), ("16xlarge", 64, 256), ("24xlarge", 96, 384),
             ("48xlarge", 192, 768), ("metal", 96, 384)]
N_TYPES = 1000

# (operating system, license model, pre-installed software, usage-op code, description words)
VARIANTS = [
    ("Linux", "No License required", "NA", "RunInstances", "Linux"),
    ("RHEL", "No License required", "NA", "RunInstances:0010", "RHEL"),
    ("SUSE", "No License required", "NA", "RunInstances:000g", "SUSE"),
    ("Windows", "No License required", "NA", "RunInstances:0002", "Windows"),
    ("Windows", "Bring your own license", "NA", "RunInstances:0800", "Windows BYOL"),
    ("Linux", "No License required", "SQL Std", "RunInstances:0004", "Linux with SQL Std"),
    ("Linux", "No License required", "SQL Web", "RunInstances:0200", "Linux with SQL Web"),
    ("Linux", "No License required", "SQL Ent", "RunInstances:0100", "Linux with SQL Ent"),
    ("Windows", "No License required", "SQL Std", "RunInstances:0006", "Windows with SQL Std"),
    ("Windows", "No License required", "SQL Web", "RunInstances:0202", "Windows with SQL Web"),
    ("Red Hat Enterprise Linux with HA", "No License required", "NA", "RunInstances:1010", "RHEL with HA"),
    ("Ubuntu Pro", "No License required", "NA", "RunInstances:0g00", "Ubuntu Pro"),
]
TENANCIES = [("Shared", "BoxUsage"), ("Dedicated", "DedicatedUsage"), ("Host", "HostBoxUsage")]
CAPACITY = [("Used", ""), ("UnusedCapacityReservation", "UnusedBox"), ("AllocatedCapacityReservation", "Reservation")]
RESERVED_TERMS = [
    ("4NA7Y494T4", "1yr", "No Upfront", "standard", 0.630), ("HU7G6KETJZ", "1yr", "Partial Upfront", "standard", 0.600),
    ("6QCMYABX3D", "1yr", "All Upfront", "standard", 0.588), ("7NE97W5U4E", "1yr", "No Upfront", "convertible", 0.720),
    ("CUZHX8X6JH", "1yr", "Partial Upfront", "convertible", 0.686),
    ("VJWZNREJX2", "1yr", "All Upfront", "convertible", 0.672), ("BPH4J8HBKS", "3yr", "No Upfront", "standard", 0.440),
    ("38NPMPTW36", "3yr", "Partial Upfront", "standard", 0.410), ("NQ3QZPMQV9", "3yr", "All Upfront", "standard", 0.395),
    ("Z2E3P23VKM", "3yr", "No Upfront", "convertible", 0.530),
    ("R5XV2EPZQZ", "3yr", "Partial Upfront", "convertible", 0.500),
    ("MZU6U2429S", "3yr", "All Upfront", "convertible", 0.480),
]
OD_TERM, RATE_HOURLY, RATE_UPFRONT = "JRTCKXETXF", "6YS6EN2CT7", "2TG2D8R56U"
PRESENCE = 0.36  # share of (type, region) pairs that exist: ~7.7M rows at full scale
_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def instance_types() -> list[dict]:
    """~1,000 instance types, ~80 with GPUs (named GPU families first)."""
    types = []
    for fam, gb, sizes in GPU_FAMILIES:
        for size, vcpu, mem, gpus in sizes:
            types.append(dict(name=f"{fam}.{size}", family="GPU instance", vcpu=vcpu, mem=mem,
                              gpu=f"{gpus:g}", gpu_mem=f"{round(gb * gpus * 1) if gpus >= 1 else round(gb)} GB"))
    rng = random.Random(7)
    families = [p + g for g in CPU_GENS for p in CPU_PREFIXES]
    rng.shuffle(families)
    kinds = {"m": "General purpose", "t": "General purpose", "c": "Compute optimized", "r": "Memory optimized",
             "x": "Memory optimized", "z": "Memory optimized", "u": "Memory optimized", "i": "Storage optimized",
             "d": "Storage optimized", "h": "Storage optimized", "im": "Storage optimized",
             "is": "Storage optimized", "hpc": "Compute optimized", "trn": "Machine Learning ASIC Instances",
             "inf": "Machine Learning ASIC Instances", "vt": "Accelerated computing", "f": "FPGA Instances",
             "mac": "General purpose"}
    for fam in families:
        prefix = next(p for p in sorted(CPU_PREFIXES, key=len, reverse=True) if fam.startswith(p))
        for size, vcpu, mem in CPU_SIZES:
            if len(types) >= N_TYPES:
                return types
            if rng.random() < 0.35:
                continue
            types.append(dict(name=f"{fam}.{size}", family=kinds[prefix], vcpu=vcpu, mem=mem, gpu="",
                              gpu_mem="NA"))
    return types


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def _code(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(n))


def _q(v: str) -> str:
    return '"' + v.replace('"', '""') + '"' if v != "" else ""


def _p10(x: float) -> str:
    return f"{x:.10f}"


class _Row:
    """Column positions of the header, and a row renderer."""

    def __init__(self, head: list[str]) -> None:
        self.head = head
        self.pos = {c: i for i, c in enumerate(head)}
        self.term_cols = head[:15]  # SKU .. OfferingClass: the part that differs per term

    def product_tail(self, values: dict[str, str]) -> str:
        """Columns 16..91 (Product Family onwards), rendered once per product."""
        unknown = set(values) - set(self.head)
        if unknown:
            raise KeyError(f"not in header: {unknown}")
        return ",".join(_q(values.get(c, "")) for c in self.head[15:])

    def line(self, term: dict[str, str], tail: str) -> str:
        return ",".join(_q(term.get(c, "")) for c in self.term_cols) + "," + tail + "\n"


def product_lines(row: "_Row", rng: random.Random, t: dict, region: str, location: str, prefix: str,
                  keep: float, stats: dict[str, int]) -> list[str]:
    """Every row of one instance type in one region (its 12 x 3 x 3 OnDemand products, each kept
    with probability `keep`, and the Reserved terms of the Used, non-Host ones), unshuffled."""
    lines: list[str] = []
    base_price = 0.0125 * t["vcpu"] * (1 + 0.1 * (_stable(t["name"]) % 5)) if not t["gpu"] else \
        0.6 * max(float(t["gpu"]), 0.125) * (1 + t["vcpu"] / 96)
    common = {
        "Product Family": "Compute Instance (bare metal)" if t["name"].endswith(".metal") else "Compute Instance",
        "serviceCode": "AmazonEC2", "Location": location, "Location Type": "AWS Region",
        "Instance Type": t["name"], "Current Generation": "Yes", "Instance Family": t["family"],
        "vCPU": str(t["vcpu"]), "Physical Processor": "Intel Xeon Platinum 8375C (Ice Lake)",
        "Clock Speed": "3.5 GHz", "Memory": f"{t['mem']:g} GiB",
        "Storage": "EBS only" if not t["gpu"] else "1 x 250 NVMe SSD",
        "Network Performance": "Up to 12500 Megabit", "Processor Architecture": "64-bit",
        "EBS Optimized": "Yes", "AvailabilityZone": "NA", "ClassicNetworkingSupport": "false",
        "Dedicated EBS Throughput": "Up to 10000 Mbps", "ECU": "NA", "Enhanced Networking Supported": "Yes",
        "GPU": t["gpu"], "GPU Memory": t["gpu_mem"], "Intel AVX2 Available": "Yes",
        "Intel AVX Available": "Yes", "Intel Turbo Available": "Yes", "MarketOption": "OnDemand",
        "Normalization Size Factor": str(max(1, t["vcpu"] // 2)),
        "Processor Features": "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo", "Region Code": region,
        "serviceName": "Amazon Elastic Compute Cloud", "VPCNetworkingSupport": "true",
    }
    for os_, lic, sw, op, words in VARIANTS:
        for tenancy, stem in TENANCIES:
            for capacity, cap_stem in CAPACITY:
                if rng.random() >= keep:
                    continue
                sku = _code(rng, 16)
                price = base_price * (1.1 if tenancy == "Dedicated" else 1.0) + \
                    (0.046 * t["vcpu"] if os_ == "Windows" and lic != "Bring your own license" else 0) + \
                    (0.12 * t["vcpu"] if sw != "NA" else 0)
                if tenancy == "Host" or capacity == "AllocatedCapacityReservation":
                    price = 0.0
                usage = f"{prefix}{cap_stem or stem}:{t['name']}"
                tail = row.product_tail(dict(common, **{
                    "Tenancy": tenancy, "Operating System": os_, "License Model": lic,
                    "usageType": usage, "operation": op, "CapacityStatus": capacity,
                    "Pre Installed S/W": sw,
                    "instanceSKU": _code(rng, 16) if capacity != "Used" else "",
                }))
                if tenancy == "Host":
                    desc = f"${price:.3f} per {os_} {t['name']} Dedicated Host Instance hour"
                else:
                    desc = f"${price:.3f} per On Demand {words} {t['name']} Instance Hour"
                stats["on_demand"] += 1
                lines.append(row.line({
                    "SKU": sku, "OfferTermCode": OD_TERM, "RateCode": f"{sku}.{OD_TERM}.{RATE_HOURLY}",
                    "TermType": "OnDemand", "PriceDescription": desc, "EffectiveDate": "2026-11-01",
                    "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs", "PricePerUnit": _p10(price),
                    "Currency": "USD"}, tail))
                if capacity != "Used" or tenancy == "Host":
                    continue
                applied = f"{'Windows' if os_ == 'Windows' else 'Linux/UNIX'} (Amazon VPC), {t['name']} reserved instance applied"
                for term, lease, option, klass, rate in RESERVED_TERMS:
                    hours = 8760 if lease == "1yr" else 26280
                    eff = price * rate
                    hourly = eff if option == "No Upfront" else (eff / 2 if option == "Partial Upfront" else 0.0)
                    common_term = {"SKU": sku, "OfferTermCode": term, "TermType": "Reserved",
                                   "EffectiveDate": "2026-11-25", "Currency": "USD",
                                   "LeaseContractLength": lease, "PurchaseOption": option,
                                   "OfferingClass": klass}
                    lines.append(row.line(dict(common_term, **{
                        "RateCode": f"{sku}.{term}.{RATE_HOURLY}",
                        "PriceDescription": f"USD 0.0 per {applied}" if option == "All Upfront" else applied,
                        "StartingRange": "0", "EndingRange": "Inf", "Unit": "Hrs",
                        "PricePerUnit": _p10(hourly)}), tail))
                    if option != "No Upfront":
                        upfront = round(eff * hours * (0.5 if option == "Partial Upfront" else 1))
                        lines.append(row.line(dict(common_term, **{
                            "RateCode": f"{sku}.{term}.{RATE_UPFRONT}", "PriceDescription": "Upfront Fee",
                            "Unit": "Quantity", "PricePerUnit": str(upfront)}), tail))
    return lines


GENERATOR_VERSION = 2  # a file written by another version is written again


def _file_order(line: str) -> list[str]:
    """The real file's row order: SKU, then OfferTermCode (the first two fields)."""
    return line.split(",", 2)[:2]


def generate(target_bytes: int, seed: int = 1, stats: dict[str, int] | None = None) -> Iterator[str]:
    """Chunks of lines of a synthetic offer file of about target_bytes; `stats` (if given) receives
    the counts of data rows ("rows") and OnDemand rows ("on_demand")."""
    stats = {} if stats is None else stats
    stats.update(rows=0, on_demand=0)
    head = header()
    row = _Row(head)
    rng = random.Random(seed)
    keep = min(1.0, target_bytes / FULL_SCALE_BYTES)
    yield "".join(",".join(_q(x) for x in m) + "\n" for m in META) + ",".join(_q(c) for c in head) + "\n"
    written = 0
    types = instance_types()
    for region, location, prefix in REGIONS:
        present = [t for t in types if random.Random(f"{region}|{t['name']}").random() < PRESENCE]
        lines = []
        for t in present:
            lines.extend(product_lines(row, rng, t, region, location, prefix, keep, stats))
            if len(lines) >= 20000:
                stats["rows"] += len(lines)
                lines.sort(key=_file_order)
                chunk = "".join(lines)
                lines = []
                written += len(chunk)
                yield chunk
                if written >= target_bytes:
                    return
        extra = _storage_lines(row, rng, region, location, prefix)
        stats["on_demand"] += len(extra)
        lines.extend(extra)
        stats["rows"] += len(lines)
        lines.sort(key=_file_order)
        chunk = "".join(lines)
        written += len(chunk)
        yield chunk
        if written >= target_bytes:
            return


EBS = [("gp3", 0.08, "General Purpose", "SSD-backed"), ("gp2", 0.10, "General Purpose", "SSD-backed"),
       ("io2", 0.125, "Provisioned IOPS", "SSD-backed"), ("io1", 0.125, "Provisioned IOPS", "SSD-backed"),
       ("st1", 0.045, "Throughput Optimized HDD", "HDD-backed"), ("sc1", 0.015, "Cold HDD", "HDD-backed"),
       ("standard", 0.05, "Magnetic", "HDD-backed")]


def _storage_lines(row: _Row, rng: random.Random, region: str, location: str, prefix: str) -> list[str]:
    base = {"serviceCode": "AmazonEC2", "Location": location, "Location Type": "AWS Region", "Region Code": region,
            "serviceName": "Amazon Elastic Compute Cloud"}
    out = []
    for api, price, vtype, media in EBS:
        sku = _code(rng, 16)
        tail = row.product_tail(dict(base, **{"Product Family": "Storage", "Storage Media": media,
                                              "Volume Type": vtype, "Max Volume Size": "16 TiB",
                                              "usageType": f"{prefix}EBS:VolumeUsage.{api}", "Volume API Name": api}))
        out.append(row.line({"SKU": sku, "OfferTermCode": OD_TERM, "RateCode": f"{sku}.{OD_TERM}.{RATE_HOURLY}",
                             "TermType": "OnDemand", "PriceDescription": f"${price} per GB-month of {vtype} "
                             f"provisioned storage - {location}", "EffectiveDate": "2026-11-01",
                             "StartingRange": "0", "EndingRange": "Inf", "Unit": "GB-Mo",
                             "PricePerUnit": _p10(price), "Currency": "USD"}, tail))
    for fam, usage, unit in (("Storage Snapshot", "EBS:SnapshotUsage", "GB-Mo"),
                             ("System Operation", "EBS:VolumeP-IOPS.gp3", "IOPS-Mo"),
                             ("IP Address", "PublicIPv4:InUseAddress", "Hrs")):
        sku = _code(rng, 16)
        tail = row.product_tail(dict(base, **{"Product Family": fam, "usageType": f"{prefix}{usage}"}))
        out.append(row.line({"SKU": sku, "OfferTermCode": OD_TERM, "RateCode": f"{sku}.{OD_TERM}.{RATE_HOURLY}",
                             "TermType": "OnDemand", "PriceDescription": f"$0.005 per {usage} - {location}",
                             "EffectiveDate": "2026-11-01", "StartingRange": "0", "EndingRange": "Inf",
                             "Unit": unit, "PricePerUnit": _p10(0.005), "Currency": "USD"}, tail))
    return out


def write_offer_file(path: str | Path, target_bytes: int, seed: int = 1) -> dict[str, int]:
    """Write a synthetic offer file; returns {"bytes": .., "rows": .., "on_demand": ..} (data rows)
    and the generator's version."""
    path = Path(path)
    stats: dict[str, int] = {}
    n = 0
    with path.open("wb") as f:
        for chunk in generate(target_bytes, seed, stats):
            data = chunk.encode()
            f.write(data)
            n += len(data)
    return {"bytes": n, **stats, "version": GENERATOR_VERSION}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--gb", type=float, default=1.0, help="target size in GB (10^9 bytes); 5.7 = full scale")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    info = write_offer_file(args.out, int(args.gb * 1e9), args.seed)
    print(info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
