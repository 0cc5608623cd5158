"""Amazon EC2: GPU instance prices (on-demand per region, spot per AZ), EBS, egress.

Sources, all through real clients:
- prices: the public bulk price list (no credentials; region index, then each
  region's offer file in CSV form, parsed as a stream) or, with credentials,
  the Pricing API's GetProducts (boto3 `pricing`, paginated);
- GPU facts: EC2 DescribeInstanceTypes; where each type is offered:
  DescribeInstanceTypeOfferings per availability zone; spot prices:
  DescribeSpotPriceHistory (every change since the warehouse's newest stored one, or over the
  last 30 days on a first run; the latest per AZ is the spot offer) — these need credentials;
- Capacity Blocks for ML: DescribeCapacityBlockOfferings per type sold that way and duration
  (CAPACITY_BLOCK_HOURS), starts in the next 8 weeks (credentials needed);
- interruption frequency and savings: the public Spot Instance Advisor feed;
- egress: the AWSDataTransfer price list; EBS: storage rows of the EC2 list;
- Reserved Instances: the Reserved rows of the same price list (GPU families), one offer per
  term (lease, payment option, offering class) at its effective hourly rate;
- Savings Plans (Compute and EC2 Instance): the public Savings Plans price list, streamed
  (adapters/aws_savings_plans.py), each plan's rate joined to the on-demand offer by its SKU.

`fetch_*` functions do I/O and return payloads; `parse_*`/`build_*` are pure.
"""

from __future__ import annotations

import csv
import itertools
from collections import Counter
import json
import logging
import re
from datetime import datetime, timedelta, timezone
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator


from gpuledger.adapters import aws_savings_plans
from gpuledger.adapters.base import (
    RepeatedKey, SchemaDriftError, SourceContext, SourceError, drift_guard, parse_json, register_secret, scrubbed,
)
from gpuledger.adapters.contract import ProviderSpec
from gpuledger.warehouse import interruption
from gpuledger.warehouse.gpus import GpuFacts, UnknownGPUError, canonicalize
from gpuledger.warehouse.capacity_blocks import add_capacity_block
from gpuledger.warehouse.records import Batch, ProviderFacts, amortized_usd_per_hour, commitment_option
from gpuledger.warehouse.spot import SINCE_KEY, add_spot_price

log = logging.getLogger("gpuledger.adapters.aws")

NAME = "aws"
PRICING_BULK_HOST = "pricing.us-east-1.amazonaws.com"
PRICING_API_HOST = "api.pricing.us-east-1.amazonaws.com"
SPOT_ADVISOR_HOST = "spot-bid-advisor.s3.amazonaws.com"
SPOT_ADVISOR_PATH = "/spot-advisor-data.json"
EC2_REGION_INDEX = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
DATA_TRANSFER_REGION_INDEX = "/offers/v1.0/aws/AWSDataTransfer/current/region_index.json"

# A default live refresh covers every commercial region of the price list's region index
# (GovCloud and China are other partitions with their own accounts) that the account may use:
# with EC2 credentials, the regions DescribeRegions says are enabled (an opt-in region not
# opted into would refuse every EC2 call). The `aws_regions` setting ("all" or a comma list)
# overrides it.
_REGION_CODE = re.compile(r"[a-z]{2}-[a-z]+-\d+")
_OTHER_PARTITIONS = ("us-gov-", "cn-")
_ENABLED = ("opt-in-not-required", "opted-in")
# Instance families that carry GPUs, and the name EC2 gives their GPU. Used to
# select price rows and, without EC2 credentials, to name the GPU; with
# credentials DescribeInstanceTypes' own GpuInfo wins.
GPU_FAMILIES: dict[str, tuple[str, str]] = {
    "p3": ("NVIDIA", "V100"), "p3dn": ("NVIDIA", "V100"), "p4d": ("NVIDIA", "A100"),
    "p4de": ("NVIDIA", "A100"), "p5": ("NVIDIA", "H100"), "p5e": ("NVIDIA", "H200"),
    "p5en": ("NVIDIA", "H200"), "p6-b200": ("NVIDIA", "B200"), "p6-b300": ("NVIDIA", "B300"),
    "p6e-gb200": ("NVIDIA", "GB200"),
    "g4dn": ("NVIDIA", "T4"), "g4ad": ("AMD", "Radeon Pro V520"), "g5": ("NVIDIA", "A10G"),
    "g5g": ("NVIDIA", "T4g"), "g6": ("NVIDIA", "L4"), "gr6": ("NVIDIA", "L4"), "g6e": ("NVIDIA", "L40S"),
    "g6f": ("NVIDIA", "L4"), "gr6f": ("NVIDIA", "L4"), "g7": ("NVIDIA", "RTX PRO 4500"),
    "g7e": ("NVIDIA", "RTX PRO Server 6000"),
}
# Families that sell a slice of one card. The slice is reported as memory; the
# fraction is that memory over the full card's memory as EC2 reports it.
FRACTIONAL_FAMILIES = {"g6f": 22888, "gr6f": 22888}
# Intra-node GPU interconnect by family (AWS instance-type pages).
NVSWITCH_FAMILIES = {"p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200"}
NVLINK_FAMILIES = {"p3", "p3dn"}

PROVIDER = ProviderSpec(
    name=NAME,
    source_kind="api",
    secret_env_vars=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
    # A session token belongs to short-lived credentials, which a repository secret cannot be.
    nightly_secrets=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    facts=ProviderFacts(
        display_name="Amazon Web Services (EC2)",
        kind="hyperscaler",
        billing_granularity_s=1,
        minimum_charge_s=60,
        billing_notes="Linux on-demand and Spot are billed per second with a 60-second minimum.",
        storage_persists_when_stopped=True,
        stopped_billing_notes="A stopped instance stops compute billing; its EBS volumes keep billing.",
        access_ssh=True,
        access_docker=True,
        access_jupyter=False,
        multinode_interconnect="EFA (p4d 400 Gbps, p5 3200 Gbps)",
        interruptible_offer="Spot (2-minute interruption notice)",
        price_source="AWS Price List (bulk files or Pricing API), EC2 API, Spot Instance Advisor",
        source_urls=[
            "https://aws.amazon.com/ec2/pricing/on-demand/",
            "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-lifecycle.html",
            "https://aws.amazon.com/ec2/instance-types/p5/",
            "https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/price-changes.html",
        ],
    ),
)


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def default_regions(index_regions: Iterable[str], enabled: Iterable[str] | None) -> list[str]:
    """The commercial regions of the price list, narrowed to the account's enabled regions
    when EC2 told them."""
    out = [r for r in index_regions if _REGION_CODE.fullmatch(r) and not r.startswith(_OTHER_PARTITIONS)]
    if enabled is not None:
        allowed = set(enabled)
        out = [r for r in out if r in allowed]
    return sorted(out)


@drift_guard("aws: DescribeRegions")
def parse_enabled_regions(doc: dict[str, Any]) -> list[str]:
    """Region names DescribeRegions (AllRegions) lists as usable by the account."""
    if "Regions" not in doc:
        raise SchemaDriftError("aws: DescribeRegions answer lacks Regions")
    return sorted(r["RegionName"] for r in doc["Regions"] if r.get("OptInStatus", "opt-in-not-required") in _ENABLED)


# -- price rows: one shape for both the bulk CSV and the Pricing API ----------

@dataclass(frozen=True)
class PriceRow:
    kind: str  # instance | storage | egress
    sku: str
    region: str
    price: float
    currency: str
    unit: str
    description: str = ""
    instance_type: str = ""
    vcpu: str = ""
    memory: str = ""
    storage: str = ""
    network: str = ""
    gpu: str = ""
    gpu_memory: str = ""
    volume_api_name: str = ""
    transfer_type: str = ""
    to_location: str = ""
    to_region: str = ""
    tier_start: str = ""
    tier_end: str = ""
    # Reserved terms only: one term is an hourly row (Unit Hrs) plus, unless No Upfront, a fee row
    # (Unit Quantity) under the same SKU and offer term code.
    term_code: str = ""
    lease: str = ""  # "1yr" | "3yr"
    payment: str = ""  # "No Upfront" | "Partial Upfront" | "All Upfront"
    offering_class: str = ""  # "standard" | "convertible"


# Bulk CSV columns we read, by header name (positions are looked up from the header).
_CSV_COLUMNS = {
    "SKU": "sku", "TermType": "term", "PriceDescription": "description", "StartingRange": "tier_start",
    "EndingRange": "tier_end", "Unit": "unit", "PricePerUnit": "price", "Currency": "currency",
    "Product Family": "family", "Instance Type": "instance_type", "vCPU": "vcpu", "Memory": "memory",
    "Storage": "storage", "Network Performance": "network", "Tenancy": "tenancy",
    "Operating System": "os", "License Model": "license", "Pre Installed S/W": "sw",
    "CapacityStatus": "capacity", "GPU": "gpu", "GPU Memory": "gpu_memory", "Region Code": "region",
    "Volume API Name": "volume_api_name", "Transfer Type": "transfer_type", "To Location": "to_location",
    "From Region Code": "from_region", "To Region Code": "to_region", "MarketOption": "market",
    "OfferTermCode": "term_code", "LeaseContractLength": "lease", "PurchaseOption": "payment",
    "OfferingClass": "offering_class",
}


COMPUTE_FAMILIES = ("Compute Instance", "Compute Instance (bare metal)")

# Why a price-list row is not kept: the keys of the skip counts the refresh notes report.
SKIP_TERM = "reserved-term rows of instance families without GPUs"
SKIP_VARIANT = "instance rows for another OS, tenancy, licence, software or capacity reservation"
SKIP_CPU_ONLY = "CPU-only instance rows"
SKIP_OTHER_PRODUCT = "rows of other products (snapshots, IOPS, IP addresses, other transfer)"
SKIP_STORAGE_DIMENSION = "EBS price dimensions not per GB-month (IOPS, throughput)"
SKIP_OTHER_REGION = "data-transfer rows of another region"


def _is_wanted_variant(r: dict[str, str]) -> bool:
    """The one row per instance type we price: Linux, shared tenancy, no licence or software,
    plain on-demand capacity."""
    return (
        r.get("os") == "Linux"
        and r.get("tenancy") == "Shared"
        and r.get("sw") == "NA"
        and r.get("capacity") == "Used"
        and r.get("license", "No License required") in ("No License required", "")
        and r.get("market", "OnDemand") in ("OnDemand", "")
    )


def _has_gpu(r: dict[str, str]) -> bool:
    return family_of(r.get("instance_type", "")) in GPU_FAMILIES or _positive(r.get("gpu", ""))


def _is_wanted_instance(r: dict[str, str]) -> bool:
    return r.get("family") in COMPUTE_FAMILIES and _is_wanted_variant(r) and _has_gpu(r)


def _positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def _skip(skipped: Counter[str] | None, reason: str, n: int = 1) -> None:
    if skipped is not None and n:
        skipped[reason] += n


def _csv_row_to_price(r: dict[str, str], region: str, skipped: Counter[str] | None = None) -> PriceRow | None:
    """The row as a PriceRow, or None (counted by reason in `skipped`) for a row we do not keep."""
    term = r.get("term")
    if term not in ("OnDemand", "Reserved"):
        _skip(skipped, SKIP_TERM)
        return None
    family = r.get("family", "")
    if family in COMPUTE_FAMILIES:
        if not _is_wanted_variant(r):
            _skip(skipped, SKIP_VARIANT)
            return None
        if not _has_gpu(r):
            _skip(skipped, SKIP_TERM if term == "Reserved" else SKIP_CPU_ONLY)
            return None
        kind = "instance" if term == "OnDemand" else "reserved"
    elif term == "Reserved":
        _skip(skipped, SKIP_OTHER_PRODUCT)
        return None
    elif family == "Storage" and r.get("volume_api_name"):
        kind = "storage"
    elif family == "Data Transfer" and r.get("transfer_type") in ("AWS Outbound", "InterRegion Outbound"):
        kind = "egress"
    else:
        _skip(skipped, SKIP_OTHER_PRODUCT)
        return None
    try:
        price = float(r["price"])
    except (KeyError, ValueError):
        raise SchemaDriftError(f"aws: price list row {r.get('sku')!r} has no numeric PricePerUnit") from None
    return PriceRow(
        kind=kind, sku=r.get("sku", ""), region=r.get("region") or r.get("from_region") or region,
        price=price, currency=r.get("currency", ""), unit=r.get("unit", ""),
        description=r.get("description", ""), instance_type=r.get("instance_type", ""),
        vcpu=r.get("vcpu", ""), memory=r.get("memory", ""), storage=r.get("storage", ""),
        network=r.get("network", ""), gpu=r.get("gpu", ""), gpu_memory=r.get("gpu_memory", ""),
        volume_api_name=r.get("volume_api_name", ""), transfer_type=r.get("transfer_type", ""),
        to_location=r.get("to_location", ""), to_region=r.get("to_region", ""),
        tier_start=r.get("tier_start", ""), tier_end=r.get("tier_end", ""),
        **({"term_code": r.get("term_code", ""), "lease": r.get("lease", ""), "payment": r.get("payment", ""),
            "offering_class": r.get("offering_class", "")} if kind == "reserved" else {}),
    )


# Cheap test of the 4th field (TermType) before any CSV parsing: Reserved terms are ~80% of the
# file, nearly all of them for instance families without GPUs. SKU, OfferTermCode and RateCode
# never hold commas, so the 4th comma-separated piece is TermType. A line is kept when that piece
# is exactly "OnDemand" ("OnDemand" alone is no test: the MarketOption column says it on reserved
# rows too), or "Reserved" on a line holding the field "GPU instance" after it (every family of
# GPU_FAMILIES is filed under that Instance Family).
# Such a line of a compute product (it holds the field "Compute Instance" or "Compute Instance
# (bare metal)", values only Product Family takes) is kept only when it also holds the fields
# "Linux", "Shared" and "Used": without one of them its Operating System, Tenancy or
# CapacityStatus cannot be the one variant `_is_wanted_variant` prices, so `_csv_row_to_price`
# would skip it as SKIP_VARIANT, and it is counted so without being parsed (about 93% of the
# lines the TermType test keeps). Every field test looks after TermType only, and the values
# are quoted, as in every AWS offer file.
# `_KEPT_LINE` states the rule for one line; `_kept_lines` applies it to a window of many lines
# without making a bytes object per line.
_KEPT_LINE = re.compile(
    rb'[^,]*,[^,]*,[^,]*,(?:"OnDemand"(?=,)|"Reserved"(?=,.*?,"GPU instance",))'
    rb'(?!(?=.*,"Compute Instance(?: \(bare metal\))?",)(?!(?=.*,"Linux",)(?=.*,"Shared",)(?=.*,"Used",)))')
# TermType is found without a per-line search where the line has the layout of every real AWS
# file: SKU (16 characters), OfferTermCode (10) and RateCode (38), quoted, so the 3rd comma is
# byte 72 of the line. numpy takes the first 88 bytes of every line (one copy each), finds the
# commas of bytes 0-71 and compares bytes 72-83 with ',"OnDemand",' as 64-bit words: where
# bytes 0-71 hold commas at 18 and 31 only and byte 72 is one, the 4th piece starts at byte 73,
# so the comparison is the rule's TermType test, exactly. Lines of another layout, or
# shorter than 88 bytes, are matched one by one with `_ON_DEMAND_HEAD`. The same comparison with
# ',"Reserved",' finds the Reserved lines. AWS's files are sorted by SKU, and a SKU's lines hold
# the same product fields (the CSV repeats the product on each of its terms), so the lines of a
# run of one SKU get the same verdict and the first line of each run is tested for the family
# and variant fields, for the whole run: the Reserved lines of other families are never scanned.
_ON_DEMAND_HEAD = re.compile(rb'[^,]*+,[^,]*+,[^,]*+,"OnDemand",')
_COMPUTE_FIELDS = (b',"Compute Instance",', b',"Compute Instance (bare metal)",')  # the two compute families
_LINUX_FIELD, _SHARED_FIELD, _USED_FIELD = b',"Linux",', b',"Shared",', b',"Used",'
_RESERVED_HEAD = re.compile(rb'[^,]*,[^,]*,[^,]*,"Reserved",')
_GPU_FAMILY_FIELD = b',"GPU instance",'
_WINDOW_BYTES = 4 << 20  # body bytes scanned at once
_PARSE_AT_BYTES = 4 << 20  # kept bytes handed to the CSV parser at once
_HEAD_BYTES = 88  # bytes of each line compared as 11 words
_ITEM_BYTES = 4096  # the longest line part searched by numpy (see _LineItems)
_ITEMS_MAX_BYTES = 16 << 20  # the most bytes _LineItems copies for a window
_TERM_AT = 72  # the 3rd comma of the usual layout


def _word(text: bytes) -> int:
    return int.from_bytes(text.ljust(8, b"\0"), "little")  # as numpy's "<u8" reads it


# Bytes 0-71 of a line of the usual layout, 1 where a comma is (after the SKU and after the
# OfferTermCode), as the 9 words numpy reads them.
_USUAL_COMMAS = tuple(_word(bytes(int(i in (18, 31)) for i in range(at, at + 8))) for at in range(0, _TERM_AT, 8))
_ON_DEMAND_WORDS = (_word(b',"OnDema'), _word(b'nd",'))
_RESERVED_WORDS = (_word(b',"Reserv'), _word(b'ed",'))
_KEY_WORDS = 3  # a SKU is compared within the first 24 bytes of its line


@dataclass
class _TermLines:
    """The lines of one window, by TermType (see `_term_lines`)."""

    on_demand: Any  # numpy (n, 3): each OnDemand line's start, the comma after its TermType, its end; in order
    reserved_starts: Any  # numpy: the Reserved lines of the usual layout, in order
    reserved_ends: Any
    runs: Any  # numpy: where each run of one SKU begins in reserved_starts, then len(reserved_starts)
    others: list[tuple[int, int]]  # the lines of another layout that are not OnDemand: (start, end)
    lines: int  # how many lines are not empty


def _newline_offsets(window: bytes, start: int, end: int) -> Any:
    """The offsets of the b"\n" bytes of `window[start:end]`, in order, as numpy int64.

    np.flatnonzero over the byte comparison costs about 5 times the comparison itself (its count and
    fill walk every byte); here the comparison's bytes are read as 64-bit words, so those walks
    see an eighth as many items, and a word's newline is its lowest set byte. A line of under
    8 bytes can put two newlines in one word: those few words are looked at byte by byte."""
    import numpy as np

    is_newline = np.frombuffer(window, np.uint8, end - start, start) == 10
    whole = (end - start) // 8 * 8
    words = is_newline[:whole].view(np.uint64)
    at = np.flatnonzero(words != 0)
    found = words[at]
    one = np.uint64(1)
    lowest_byte = np.bitwise_count((found & (~found + one)) - one) >> np.uint8(3)  # trailing zero bits / 8
    offsets = at * 8 + lowest_byte.astype(np.int64)
    more = np.bitwise_count(found) > 1
    if more.any():
        crowded = [np.flatnonzero(is_newline[i:i + 8])[1:] + i for i in (at[more] * 8).tolist()]
        offsets = np.sort(np.concatenate([offsets, *crowded]))
    if whole < end - start:  # the last bytes, short of a word, come after every offset found so far
        offsets = np.concatenate([offsets, np.flatnonzero(is_newline[whole:]) + whole])
    return offsets + start


def _term_lines(window: bytes, start: int, end: int) -> _TermLines:
    """The lines of `window[start:end]` by TermType, found without a per-line search where a
    line has the usual layout. The Reserved lines come in runs of consecutive lines of one SKU:
    AWS's files are sorted by SKU, so a run is usually every Reserved line of one product."""
    import numpy as np

    newlines = _newline_offsets(window, start, end)
    starts, ends = newlines[:-1] + 1, newlines[1:]
    lengths = ends - starts
    lines = int(np.count_nonzero(lengths))
    size = len(window)
    usual = (lengths >= _HEAD_BYTES) if size >= _HEAD_BYTES else np.zeros(len(starts), bool)
    heads = starts[usual]
    on_demand = np.zeros((0, 3), np.int64)
    reserved_starts = reserved_ends = np.zeros(0, np.int64)
    runs = np.zeros(1, np.int64)  # no run: only the count of Reserved lines, 0
    tested = np.zeros(len(starts), bool)  # lines whose TermType the word comparison decided
    if len(heads):
        # Every byte offset as one 88-byte item: indexing copies each line's head in one memcpy.
        words = np.ndarray((size - _HEAD_BYTES + 1,), f"V{_HEAD_BYTES}", window, 0, (1,))[heads].view("<u8")
        words = words.reshape(len(heads), _HEAD_BYTES // 8)
        # bytes 72-79, and 80-83 (the rest of the word is the line's next bytes, masked off)
        term, after = words[:, _TERM_AT // 8], words[:, _TERM_AT // 8 + 1] & np.uint64(0xFFFFFFFF)
        fits = (term & np.uint64(0xFF)) == np.uint64(0x2C)
        commas = (words.view(np.uint8)[:, :_TERM_AT] == 0x2C).view(np.uint64)
        for i, expected in enumerate(_USUAL_COMMAS):
            fits &= commas[:, i] == np.uint64(expected)
        is_on_demand = fits & (term == np.uint64(_ON_DEMAND_WORDS[0])) & (after == np.uint64(_ON_DEMAND_WORDS[1]))
        is_reserved = fits & (term == np.uint64(_RESERVED_WORDS[0])) & (after == np.uint64(_RESERVED_WORDS[1]))
        usual_index = np.flatnonzero(usual)
        tested[usual_index[fits]] = True
        found = usual_index[is_on_demand]
        on_demand = np.stack([starts[found], starts[found] + (_TERM_AT + 11), ends[found]], axis=1)
        if is_reserved.any():
            found = usual_index[is_reserved]
            reserved_starts, reserved_ends = starts[found], ends[found]
            runs = _sku_runs(words[:, :_KEY_WORDS][is_reserved])
    others = np.flatnonzero(~tested & (lengths > 0))
    rest: list[tuple[int, int]] = []
    if len(others):
        head = _ON_DEMAND_HEAD.match
        more = []
        for a, b in zip(starts[others].tolist(), ends[others].tolist()):
            m = head(window, a, b)
            if m is None:
                rest.append((a, b))
            else:
                more.append((a, m.end() - 1, b))
        if more:
            on_demand = np.concatenate([on_demand, np.array(more, np.int64)])
            on_demand = on_demand[np.argsort(on_demand[:, 0], kind="stable")]
    return _TermLines(on_demand, reserved_starts, reserved_ends, runs, rest, lines)


def _sku_runs(words: Any) -> Any:
    """Where runs of consecutive lines of one SKU begin, from the lines' first 3 head words; then
    how many lines there are. The SKU is the first field, the bytes before the first comma. Two
    lines whose bytes 0-18 are equal, with byte 18 a comma, have the same first field (16
    characters, quoted, in every AWS file); a line whose byte 18 is not a comma is a run alone."""
    import numpy as np

    first, second = words[:, 0], words[:, 1]
    third = words[:, 2] & np.uint64(0xFFFFFF)  # bytes 16-18
    keyed = (third >> np.uint64(16)) == np.uint64(0x2C)
    new = np.ones(len(words), bool)
    new[1:] = (first[1:] != first[:-1]) | (second[1:] != second[:-1]) | (third[1:] != third[:-1])
    new[1:] |= ~keyed[1:] | ~keyed[:-1]
    return np.append(np.flatnonzero(new), len(words))


class _LineItems:
    """Byte ranges of a window (a part of each of its lines) as one numpy array of fixed-width
    items, one copy each, so that numpy's string search tests every range for a field in one
    call, where a `bytes.find` per line cost about 100 ns of call beside its search. numpy
    searches without the GIL, so the CSV parser's thread runs meanwhile. A range longer than the
    items (no line of a real AWS file is near _ITEM_BYTES) is searched by `bytes.find` instead."""

    def __init__(self, window: bytes, starts: Any, ends: Any) -> None:
        import numpy as np

        lengths = ends - starts
        # The longest range, within _ITEM_BYTES and _ITEMS_MAX_BYTES for all the items (many short
        # lines and one long one would otherwise copy the long one's width for each). It is at
        # most the window's size: a range lies in it.
        width = int(min(lengths.max(initial=1), _ITEM_BYTES, max(1, _ITEMS_MAX_BYTES // max(1, len(starts)))))
        self.long = np.flatnonzero(lengths > width)
        base = np.minimum(starts, len(window) - width)  # a range near the window's end ends before its item
        self.items = np.ndarray((len(window) - width + 1,), f"S{width}", window, 0, (1,))[base]
        self.start = starts - base
        self.end = self.start + lengths
        self.start[self.long] = self.end[self.long] = 0  # an empty range: never found by numpy
        self.window, self.starts, self.ends = window, starts, ends

    def has(self, field: bytes, among: Any = None) -> Any:
        """Whether each range holds `field`; with `among` (bool), only those ranges are searched
        (the others answer False)."""
        import numpy as np

        end = self.end if among is None else np.where(among, self.end, self.start)
        found = np.strings.find(self.items, field, self.start, end) >= 0
        for i in self.long.tolist():
            found[i] = (among is None or bool(among[i])) and self.window.find(
                field, int(self.starts[i]), int(self.ends[i])) >= 0
        return found


def _unwanted_variants(lines: _LineItems) -> Any:
    """Per range (from the comma after TermType to the end of the line): a compute product's line
    that lacks one of the fields "Linux", "Shared", "Used" (the variant rule of _KEPT_LINE)."""
    wanted = lines.has(_LINUX_FIELD)
    wanted &= lines.has(_SHARED_FIELD, wanted)
    wanted &= lines.has(_USED_FIELD, wanted)
    compute = lines.has(_COMPUTE_FIELDS[0], ~wanted)
    compute |= lines.has(_COMPUTE_FIELDS[1], ~wanted & ~compute)
    return compute & ~wanted


def _kept_lines(window: bytes, start: int, end: int) -> tuple[list[bytes], int, int]:
    """The lines of `window[start:end]` that `_KEPT_LINE` keeps, in order, how many of its
    lines are not empty, and how many of them the rule drops as an unwanted variant.
    `window[start:end]` is b"\n" then whole lines, each ending in b"\n"."""
    import numpy as np

    found = _term_lines(window, start, end)
    find = window.find
    on_demand = found.on_demand
    unwanted = _unwanted_variants(_LineItems(window, on_demand[:, 1], on_demand[:, 2]))
    variant = int(np.count_nonzero(unwanted))
    kept_starts, kept_ends = [on_demand[~unwanted, 0]], [on_demand[~unwanted, 2]]
    # One line of a run decides for the run: the lines of one SKU differ only in their term's
    # fields (code, description, dates, price, lease, payment, class), which never take the values
    # the rule looks for, so each line would get the same answer.
    starts, ends, bounds = found.reserved_starts, found.reserved_ends, found.runs
    if len(starts):
        firsts = bounds[:-1]
        rests, run_ends = starts[firsts] + (_TERM_AT + 11), ends[firsts]  # from the comma after TermType
        gpu = _LineItems(window, rests + 1, run_ends).has(_GPU_FAMILY_FIELD)
        dropped = np.zeros(len(firsts), bool)
        dropped[gpu] = _unwanted_variants(_LineItems(window, rests[gpu], run_ends[gpu]))
        sizes = np.diff(bounds)
        variant += int(sizes[dropped].sum())
        kept = np.repeat(gpu & ~dropped, sizes)
        kept_starts.append(starts[kept])
        kept_ends.append(ends[kept])
    for line_start, line_end in found.others:
        head = _RESERVED_HEAD.match(window, line_start, line_end)
        if head is not None and find(_GPU_FAMILY_FIELD, head.end(), line_end) >= 0:
            rest = np.array([head.end() - 1])
            if _unwanted_variants(_LineItems(window, rest, np.array([line_end])))[0]:
                variant += 1
            else:
                kept_starts.append(np.array([line_start]))
                kept_ends.append(np.array([line_end]))
    kept_at, kept_to = np.concatenate(kept_starts), np.concatenate(kept_ends)
    if len(kept_starts) > 1:
        order = np.argsort(kept_at, kind="stable")
        kept_at, kept_to = kept_at[order], kept_to[order]
    return [window[a:b] for a, b in zip(kept_at.tolist(), kept_to.tolist())], found.lines, variant


def _line_windows(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, int, int]]:
    """Raw body chunks (any sizes) -> (buffer, start, end) windows: `buffer[start:end]` is b"\n"
    then whole lines, each ending in b"\n". Chunks are gathered to _WINDOW_BYTES; a chunk that
    large is scanned in place (its first line, completing the carried-over partial line, goes
    in a small window of its own). A body cut mid-line yields that partial line last."""
    rest = b""  # the partial line carried over, without a b"\n"
    pending: list[bytes] = []
    size = 0
    for chunk in chunks:
        if not chunk:
            continue
        pending.append(chunk)
        size += len(chunk)
        if size < _WINDOW_BYTES:
            continue
        buf = pending[0] if len(pending) == 1 else b"".join(pending)
        pending, size = [], 0
        first = buf.find(b"\n")
        if first < 0:
            rest += buf
            continue
        last = buf.rfind(b"\n")
        head = b"\n" + rest + buf[:first + 1]
        yield head, 0, len(head)
        if last > first:
            yield buf, first, last + 1
        rest = buf[last + 1:]
    tail = rest + b"".join(pending)
    if tail:
        tail = b"\n" + tail + (b"" if tail.endswith(b"\n") else b"\n")
        yield tail, 0, len(tail)


# The values `_is_wanted_variant` accepts, by column, for pyarrow's pre-selection.
_VARIANT_VALUES = (("os", ["Linux"]), ("tenancy", ["Shared"]), ("capacity", ["Used"]), ("sw", ["NA"]),
                   ("license", ["No License required", ""]), ("market", ["OnDemand", ""]))


class _KeptRowParser:
    """CSV-parses batches of kept OnDemand lines into PriceRows.

    Fast path: pyarrow's CSV reader on the whole batch (only the pre-selection's columns),
    a vectorized pre-selection that is a superset of what `_csv_row_to_price` keeps
    (so every row it would keep, or raise on, still reaches it), then pyarrow again on
    those few lines (every column we read) and `_csv_row_to_price` on each. Any batch pyarrow rejects or that holds
    bytes where it and the csv module could disagree (CR, NUL) goes through the csv
    module instead, which raises the same SchemaDriftError as before on a row whose
    field count is not the header's.
    """

    def __init__(self, header: list[str], positions: dict[str, int], region: str,
                 skipped: Counter[str] | None = None) -> None:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        self.skipped = skipped
        self.width = len(header)
        self.positions = positions
        self.region = region
        names = [f"c{i}" for i in range(self.width)]
        self.col = {name: names[i] for name, i in positions.items()}
        used = sorted(set(self.col.values()) | {names[header.index("Product Family")]})
        self.read_options = pacsv.ReadOptions(column_names=names, use_threads=False, block_size=_PARSE_AT_BYTES * 2)
        self.parse_options = pacsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=True)
        self.convert_options = pacsv.ConvertOptions(include_columns=used, column_types={c: pa.string() for c in used},
                                                    strings_can_be_null=False, quoted_strings_can_be_null=False)
        # The pre-selection's columns alone: most kept lines are not candidates (another software
        # or licence), and converting 7 columns of them costs a fraction of converting all 28.
        narrow = sorted({names[header.index("Product Family")]}
                        | {self.col[n] for n, _ in _VARIANT_VALUES if n in self.col})
        self.narrow_options = pacsv.ConvertOptions(
            include_columns=narrow, column_types={c: pa.string() for c in narrow},
            strings_can_be_null=False, quoted_strings_can_be_null=False)

    def table(self, lines: list[bytes]) -> Any:
        """pyarrow's parse of the candidate lines and the counts of the others by reason, or
        None where the csv module must decide.

        The lines are parsed twice: the pre-selection's columns of every line, then every
        column the parser reads of the candidates only. Runs in a worker thread: pyarrow parses
        without holding the GIL, so the next window's prefilter goes on meanwhile.
        """
        data = b"\n".join(lines)
        if b"\r" in data or b"\0" in data:
            return None
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.csv as pacsv

        try:
            narrow = pacsv.read_csv(pa.py_buffer(data), read_options=self.read_options,
                                    parse_options=self.parse_options, convert_options=self.narrow_options)
            if narrow.num_rows != len(lines):
                return None
            family = narrow[self.col["family"]]
            any_compute = pc.is_in(family, value_set=pa.array(COMPUTE_FAMILIES))
            compute = any_compute
            for name, wanted in _VARIANT_VALUES:
                if name in self.col:  # (a missing column only widens the pre-selection)
                    compute = pc.and_(compute, pc.is_in(narrow[self.col[name]], value_set=pa.array(wanted)))
            other = pc.is_in(family, value_set=pa.array(["Storage", "Data Transfer"]))
            # The rows left out here are counted under the reason _csv_row_to_price would give them.
            n_any_compute, n_compute, n_other = (pc.sum(m).as_py() or 0 for m in (any_compute, compute, other))
            left_out = {SKIP_VARIANT: n_any_compute - n_compute,
                        SKIP_OTHER_PRODUCT: narrow.num_rows - n_any_compute - n_other}
            picked = [lines[i] for i in pc.indices_nonzero(pc.or_(compute, other)).to_pylist()]
            if not picked:
                return None, left_out
            table = pacsv.read_csv(pa.py_buffer(b"\n".join(picked)), read_options=self.read_options,
                                   parse_options=self.parse_options, convert_options=self.convert_options)
        except pa.ArrowInvalid:
            return None
        return (table, left_out) if table.num_rows == len(picked) else None

    def rows(self, lines: list[bytes], parsed: Any) -> Iterator[PriceRow]:
        if parsed is None:
            yield from self._rows_csv_module(lines)
            return
        table, left_out = parsed
        for reason, n in left_out.items():
            _skip(self.skipped, reason, n)
        if table is None:
            return
        columns = {name: table[c].to_pylist() for name, c in self.col.items()}
        names = list(columns)
        for values in zip(*columns.values()):
            price = _csv_row_to_price(dict(zip(names, values)), self.region, self.skipped)
            if price is not None:
                yield price

    def _rows_csv_module(self, lines: list[bytes]) -> Iterator[PriceRow]:
        for fields in csv.reader([ln.decode("utf-8", "replace") for ln in lines]):
            if len(fields) != self.width:
                raise SchemaDriftError(
                    f"aws: offer file for {self.region}: a row has {len(fields)} fields, the header {self.width} "
                    f"(truncated or malformed file; row starts {fields[:2]!r})")
            row = {name: fields[i] for name, i in self.positions.items()}
            price = _csv_row_to_price(row, self.region, self.skipped)
            if price is not None:
                yield price


def parse_offer_csv(lines: Iterable[str], region: str, meta: dict[str, str] | None = None,
                    skipped: Counter[str] | None = None) -> Iterator[PriceRow]:
    """Stream a bulk offer file (CSV form) given as text lines; see parse_offer_chunks."""
    def windows() -> Iterator[tuple[bytes, int, int]]:
        for batch in iter(lambda: list(itertools.islice(it, 4096)), []):
            window = b"\n" + b"\n".join(line.encode() for line in batch) + b"\n"
            yield window, 0, len(window)

    it = iter(lines)
    return _parse_offer_windows(windows(), region, meta, skipped)


def parse_offer_chunks(chunks: Iterable[bytes], region: str, meta: dict[str, str] | None = None,
                       skipped: Counter[str] | None = None) -> Iterator[PriceRow]:
    """Stream a bulk offer file (CSV form): 5 metadata lines, a header, then rows.

    `chunks` are the raw bytes of the body in any sizes (an HTTP response's
    iter_bytes, or a file read in blocks). Memory stays flat in file size: a few
    MB of lines at a time, only kept rows retained. `meta` (if given) receives the
    metadata lines, e.g. "Publication Date". Rows whose TermType is not OnDemand
    (~80% of the file), and instance rows of a variant never priced (see _KEPT_LINE),
    are dropped on bytes before any CSV parsing; the rows kept are CSV-parsed in
    batches (pyarrow, else the csv module) and every one must have the header's field count. `skipped` (if given) counts the rows not kept, by reason.
    """
    return _parse_offer_windows(_line_windows(chunks), region, meta, skipped)


def _parse_offer_windows(windows: Iterable[tuple[bytes, int, int]], region: str,
                         meta: dict[str, str] | None, skipped: Counter[str] | None = None) -> Iterator[PriceRow]:
    """The parse proper; the csv module's own error (e.g. a bare CR inside an unquoted field)
    becomes a SchemaDriftError naming the region, like every other malformed file."""
    try:
        yield from _parse_offer_rows(windows, region, meta, skipped)
    except csv.Error as err:
        raise SchemaDriftError(f"aws: offer file for {region} is not valid CSV: {err}") from None


def _parse_offer_rows(windows: Iterable[tuple[bytes, int, int]], region: str,
                      meta: dict[str, str] | None, skipped: Counter[str] | None) -> Iterator[PriceRow]:
    it = iter(windows)
    meta = {} if meta is None else meta
    header: list[str] | None = None
    first: tuple[bytes, int, int] = (b"", 0, 0)
    for window, start, end in it:
        pos = start + 1
        while pos < end:
            stop = window.find(b"\n", pos, end)
            fields = next(csv.reader([window[pos:stop].decode("utf-8", "replace")]), [])
            if fields and fields[0] == "SKU":
                header = fields
                first = (window, stop, end)
                break
            if len(fields) >= 2:
                meta[fields[0]] = fields[1]
            pos = stop + 1
        if header is not None:
            break
    if header is None:
        raise SchemaDriftError(f"aws: offer file for {region} has no header row (metadata: {sorted(meta)})")
    missing = [c for c in ("SKU", "TermType", "PricePerUnit", "Product Family") if c not in header]
    if missing:
        raise SchemaDriftError(f"aws: offer file for {region} lacks columns {missing}")
    positions = {name: header.index(col) for col, name in _CSV_COLUMNS.items() if col in header}
    width = len(header)
    parser = _KeptRowParser(header, positions, region, skipped)
    last = b""
    pending: list[bytes] = []
    pending_bytes = 0
    # One batch parses in the worker while the next is prefiltered; rows come out in file order.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aws-csv") as pool:
        inflight: tuple[list[bytes], Any] | None = None
        for window, start, end in itertools.chain([first], it):
            if end - start <= 1:
                continue
            last = window[window.rfind(b"\n", start, end - 1) + 1:end - 1]
            kept, lines, variant = _kept_lines(window, start, end)
            _skip(skipped, SKIP_VARIANT, variant)
            _skip(skipped, SKIP_TERM, lines - len(kept) - variant)
            if not kept:
                continue
            pending.extend(kept)
            pending_bytes += sum(map(len, kept))
            if pending_bytes >= _PARSE_AT_BYTES:
                job = (pending, pool.submit(parser.table, pending))
                if inflight is not None:
                    yield from parser.rows(inflight[0], inflight[1].result())
                inflight = job
                pending, pending_bytes = [], 0
        if inflight is not None:
            yield from parser.rows(inflight[0], inflight[1].result())
        if pending:
            yield from parser.rows(pending, parser.table(pending))
    # The file has no trailer: a body cut mid-row shows as a short last line,
    # even when that row is one the prefilter would have skipped.
    if last and len(next(csv.reader([last.decode("utf-8", "replace")]))) != width:
        raise SchemaDriftError(f"aws: offer file for {region} ends in a partial row (truncated download?)")


@drift_guard("aws: region index")
def parse_region_index(doc: Any, what: str) -> dict[str, str]:
    """region code -> path of its current offer file in CSV form."""
    try:
        regions = doc["regions"]
        return {code: entry["currentVersionUrl"].replace("/index.json", "/index.csv")
                for code, entry in regions.items()}
    except (KeyError, TypeError, AttributeError) as err:
        raise SchemaDriftError(f"aws: {what} region index lacks regions/currentVersionUrl ({err!r})") from None


@drift_guard("aws: GetProducts item")
def parse_price_list_item(item: str | dict[str, Any], region: str, skipped: Counter[str] | None = None,
                          repeated: list[RepeatedKey] | None = None) -> list[PriceRow]:
    """One Pricing API PriceList element (a JSON string) -> on-demand and reserved-term price rows.
    A key the element repeats keeps its first value; the later ones go to `repeated` (base.parse_json)."""
    doc = parse_json(item, f"{PRICING_API_HOST} GetProducts", [] if repeated is None else repeated) \
        if isinstance(item, str) else item
    try:
        product = doc["product"]
        attrs = product["attributes"]
        terms = doc.get("terms", {})
        on_demand = terms.get("OnDemand", {})
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: GetProducts item lacks product/attributes ({err!r})") from None
    family = product.get("productFamily", "")
    base = {
        "sku": product.get("sku", ""), "family": family, "instance_type": attrs.get("instanceType", ""),
        "vcpu": attrs.get("vcpu", ""), "memory": attrs.get("memory", ""), "storage": attrs.get("storage", ""),
        "network": attrs.get("networkPerformance", ""), "tenancy": attrs.get("tenancy", ""),
        "os": attrs.get("operatingSystem", ""), "license": attrs.get("licenseModel", ""),
        "sw": attrs.get("preInstalledSw", ""), "capacity": attrs.get("capacitystatus", ""),
        "gpu": attrs.get("gpu", ""), "gpu_memory": attrs.get("gpuMemory", ""),
        "region": attrs.get("regionCode") or attrs.get("fromRegionCode") or region,
        "volume_api_name": attrs.get("volumeApiName", ""), "transfer_type": attrs.get("transferType", ""),
        "to_location": attrs.get("toLocation", ""), "from_region": attrs.get("fromRegionCode", ""),
        "to_region": attrs.get("toRegionCode", ""), "market": attrs.get("marketoption", ""),
        "term": "OnDemand",
    }
    rows = []
    for term in on_demand.values():
        for dim in term.get("priceDimensions", {}).values():
            ppu = dim.get("pricePerUnit", {})
            currency, amount = next(iter(ppu.items()), ("", ""))
            row = dict(base, description=dim.get("description", ""), unit=dim.get("unit", ""),
                       price=amount, currency=currency, tier_start=dim.get("beginRange", ""),
                       tier_end=dim.get("endRange", ""))
            parsed = _csv_row_to_price(row, region, skipped)
            if parsed is not None:
                rows.append(parsed)
    for code, term in terms.get("Reserved", {}).items():
        attrs_ = term.get("termAttributes", {})
        for dim in term.get("priceDimensions", {}).values():
            ppu = dim.get("pricePerUnit", {})
            currency, amount = next(iter(ppu.items()), ("", ""))
            row = dict(base, term="Reserved", description=dim.get("description", ""), unit=dim.get("unit", ""),
                       price=amount, currency=currency, term_code=term.get("offerTermCode", code.rsplit(".", 1)[-1]),
                       lease=attrs_.get("LeaseContractLength", ""), payment=attrs_.get("PurchaseOption", ""),
                       offering_class=attrs_.get("OfferingClass", ""))
            parsed = _csv_row_to_price(row, region, skipped)
            if parsed is not None:
                rows.append(parsed)
    return rows


# -- EC2 API payloads ------------------------------------------------------------

@dataclass(frozen=True)
class InstanceSpecs:
    instance_type: str
    gpu_name: str
    gpu_vendor: str
    gpu_count_reported: int  # EC2's Count: 0 for slices (g6f) and, in places, for p5.4xlarge
    gpu_memory_mib: float  # per GPU, as reported
    total_gpu_memory_mib: float
    vcpus: float | None
    ram_gb: float | None
    local_disk_gb: float | None
    network_gbps: float | None
    efa: bool
    logical_gpu_count: int | None = None
    gpu_partition_size: float | None = None  # 0.125 = one eighth of a card
    capacity_block: bool = False  # SupportedUsageClasses lists capacity-block
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


def parse_network_gbps(text: str) -> float | None:
    """'3200 Gigabit' -> 3200; '4x 100 Gigabit' -> 400; 'Up to 25 Gigabit' -> 25."""
    m = re.search(r"(?:(\d+)x\s*)?(\d+(?:\.\d+)?)\s*Gigabit", text or "")
    if not m:
        return None
    return float(m.group(2)) * (int(m.group(1)) if m.group(1) else 1)


@drift_guard("aws: DescribeInstanceTypes")
def parse_instance_types(pages: Iterable[dict[str, Any]]) -> dict[str, InstanceSpecs]:
    out: dict[str, InstanceSpecs] = {}
    for page in pages:
        if "InstanceTypes" not in page:
            raise SchemaDriftError("aws: DescribeInstanceTypes page lacks InstanceTypes")
        for it in page["InstanceTypes"]:
            gpus = (it.get("GpuInfo") or {}).get("Gpus") or []
            if not gpus:
                continue
            g = gpus[0]
            net = it.get("NetworkInfo") or {}
            out[it["InstanceType"]] = InstanceSpecs(
                instance_type=it["InstanceType"],
                gpu_name=g.get("Name", ""),
                gpu_vendor=g.get("Manufacturer", ""),
                gpu_count_reported=int(g.get("Count", 0)),
                gpu_memory_mib=float((g.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
                total_gpu_memory_mib=float((it.get("GpuInfo") or {}).get("TotalGpuMemoryInMiB", 0)),
                vcpus=(it.get("VCpuInfo") or {}).get("DefaultVCpus"),
                ram_gb=((it.get("MemoryInfo") or {}).get("SizeInMiB") or 0) / 1024 or None,
                local_disk_gb=(it.get("InstanceStorageInfo") or {}).get("TotalSizeInGB"),
                network_gbps=parse_network_gbps(net.get("NetworkPerformance", "")),
                efa=bool(net.get("EfaSupported")),
                logical_gpu_count=g.get("LogicalGpuCount"),
                gpu_partition_size=g.get("GpuPartitionSize"),
                capacity_block="capacity-block" in (it.get("SupportedUsageClasses") or []),
                raw={"GpuInfo": it.get("GpuInfo"), "NetworkPerformance": net.get("NetworkPerformance")},
            )
    return out


@drift_guard("aws: DescribeInstanceTypeOfferings")
def parse_offerings(pages: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """instance type -> sorted availability zones that offer it."""
    out: dict[str, set[str]] = {}
    for page in pages:
        for o in page.get("InstanceTypeOfferings", []):
            out.setdefault(o["InstanceType"], set()).add(o["Location"])
    return {k: sorted(v) for k, v in out.items()}


@drift_guard("aws: DescribeSpotPriceHistory")
def parse_spot_history(pages: Iterable[dict[str, Any]]) -> dict[tuple[str, str], tuple[float, str]]:
    """(instance type, AZ) -> (latest Linux spot price USD/h, its UTC timestamp)."""
    latest: dict[tuple[str, str], tuple[float, str]] = {}
    for page in pages:
        for p in page.get("SpotPriceHistory", []):
            if p.get("ProductDescription") not in ("Linux/UNIX", "Linux/UNIX (Amazon VPC)"):
                continue
            ts = p["Timestamp"]
            # botocore hands back local-time datetimes: normalize to UTC.
            stamp = ts.astimezone(timezone.utc).isoformat() if isinstance(ts, datetime) else str(ts)
            key = (p["InstanceType"], p["AvailabilityZone"])
            if key not in latest or stamp > latest[key][1]:
                latest[key] = (float(p["SpotPrice"]), stamp)
    return latest


# The spot price history a first run backfills (AWS keeps 90 days), and the page size asked for.
SPOT_HISTORY_BACKFILL_DAYS = 30
SPOT_HISTORY_PAGE_SIZE = 1000
SPOT_PRODUCT = "Linux/UNIX"
SKIP_SPOT_OTHER_PRODUCT = "observations of another product description"
SKIP_SPOT_REPEATED = "observations the answer listed twice (first kept)"


@dataclass(frozen=True)
class SpotObservation:
    instance_type: str
    zone: str
    product_description: str
    price: str  # as the API wrote it
    observed_at: datetime


@drift_guard("aws: DescribeSpotPriceHistory")
def parse_spot_observations(pages: Iterable[dict[str, Any]], skipped: Counter[str] | None = None
                            ) -> list[SpotObservation]:
    """Every Linux/UNIX price change of the answer, oldest first; the others counted in `skipped`."""
    out: dict[tuple[str, str, datetime], SpotObservation] = {}
    for page in pages:
        if "SpotPriceHistory" not in page:
            raise SchemaDriftError("aws: DescribeSpotPriceHistory page lacks SpotPriceHistory")
        for p in page["SpotPriceHistory"]:
            if p.get("ProductDescription") != SPOT_PRODUCT:
                _skip(skipped, SKIP_SPOT_OTHER_PRODUCT)
                continue
            ts = p["Timestamp"]
            if not isinstance(ts, datetime):
                raise SchemaDriftError(f"aws: spot price Timestamp {ts!r} is not a timestamp")
            stamp = ts.astimezone(timezone.utc)
            key = (p["InstanceType"], p["AvailabilityZone"], stamp)
            if key in out:
                _skip(skipped, SKIP_SPOT_REPEATED)
                continue
            out[key] = SpotObservation(p["InstanceType"], p["AvailabilityZone"], SPOT_PRODUCT,
                                       str(p.get("SpotPrice", "")), stamp)
    return sorted(out.values(), key=lambda o: (o.instance_type, o.zone, o.observed_at))


def spot_history_start(since: dict[str, str], region: str, now: datetime) -> datetime:
    """Where a region's history fetch starts: its newest stored observation (AWS then answers the
    price in effect at that moment first, already stored, and every change after it), or on a
    first run SPOT_HISTORY_BACKFILL_DAYS before `now`."""
    mark = since.get(SINCE_KEY.format(region=region))
    if mark:
        return datetime.fromisoformat(mark).astimezone(timezone.utc)
    return now - timedelta(days=SPOT_HISTORY_BACKFILL_DAYS)


# Capacity Block durations asked for each type (1, 3, 7 and 14 days), and how far ahead a block
# can start (AWS sells them up to 8 weeks in advance).
CAPACITY_BLOCK_HOURS = (24, 72, 168, 336)
CAPACITY_BLOCK_AHEAD = timedelta(weeks=8)


def capacity_block_regions(setting: str, regions: Iterable[str]) -> set[str]:
    """The scraped regions whose Capacity Blocks are asked: every one ("auto"), none ("off"), or
    those of a comma list."""
    wanted = setting.strip().lower()
    if wanted == "auto":
        return set(regions)
    if wanted == "off":
        return set()
    return {r.strip() for r in setting.split(",") if r.strip()} & set(regions)


@drift_guard("aws: DescribeCapacityBlockOfferings")
def parse_capacity_block_pages(pages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for page in pages:
        if "CapacityBlockOfferings" not in page:
            raise SchemaDriftError("aws: DescribeCapacityBlockOfferings page lacks CapacityBlockOfferings")
        out.extend(page["CapacityBlockOfferings"])
    return out


def _add_capacity_block(batch: Batch, p: RegionPayload, o: dict[str, Any]) -> None:
    itype = o.get("InstanceType", "")
    ref = f"{p.region}/{o.get('AvailabilityZone')}/{itype}/{o.get('CapacityBlockOfferingId')}"
    raw = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in o.items()}
    specs = (p.specs or {}).get(itype)
    if specs is None:
        batch.quarantine("capacity_block", ref, "capacity block of a type EC2 did not describe", raw)
        return
    try:
        g = gpu_facts(itype, None, specs)
        fee = float(o["UpfrontFee"])
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("capacity_block", ref, f"{type(err).__name__}: {err}", raw)
        return
    except KeyError as err:
        batch.quarantine("capacity_block", ref, f"offering lacks {err}", raw)
        return
    add_capacity_block(
        batch, ref, raw, region=p.region, zone=o.get("AvailabilityZone") or "", instance_type=itype,
        offering_id=o.get("CapacityBlockOfferingId") or "", instance_count=o.get("InstanceCount"),
        start_at=o.get("StartDate"), end_at=o.get("EndDate"), duration_hours=o.get("CapacityBlockDurationHours"),
        upfront_fee=fee, source_currency=o.get("CurrencyCode") or "", gpu_model=g.gpu_model, gpu_count=g.count,
        tenancy=o.get("Tenancy"))


@drift_guard("aws: Spot Instance Advisor feed")
def parse_spot_advisor(doc: Any, region: str) -> dict[str, tuple[str, int]]:
    """instance type -> (interruption frequency bucket label, savings % over on-demand)."""
    try:
        labels = {r["index"]: r["label"] for r in doc["ranges"]}
        linux = doc["spot_advisor"].get(region, {}).get("Linux", {})
        return {t: (labels[v["r"]], int(v["s"])) for t, v in linux.items()}
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: Spot Advisor feed lacks ranges/spot_advisor ({err!r})") from None


# -- building records ---------------------------------------------------------------

def _gib(text: str) -> float | None:
    m = re.match(r"\s*([\d.,]+)\s*(GiB|GB)", text or "")
    return float(m.group(1).replace(",", "")) if m else None


def _local_disk_gb(text: str) -> float | None:
    """'2 x 3800 GB NVMe SSD' -> 7600; 'EBS only' -> None."""
    m = re.match(r"\s*(\d+)\s*x\s*([\d,.]+)\s*(GB|TB)", text or "")
    if not m:
        return None
    size = float(m.group(2).replace(",", "")) * (1000 if m.group(3) == "TB" else 1)
    return int(m.group(1)) * size


def gpu_facts(instance_type: str, row: PriceRow | None, specs: InstanceSpecs | None) -> GpuFacts:
    """GPU model, count and memory from EC2's GpuInfo, else from the price list + family table."""
    family = family_of(instance_type)
    if specs is not None:
        name, vendor = specs.gpu_name, specs.gpu_vendor
        per_gpu_mib = specs.gpu_memory_mib or None
        count = float(specs.gpu_count_reported)
        if count == 0 and specs.logical_gpu_count:
            # EC2 reports slices (and, seen in real data, p5.4xlarge) as Count 0;
            # LogicalGpuCount x GpuPartitionSize is the share of cards actually sold.
            count = specs.logical_gpu_count * (specs.gpu_partition_size or 1.0)
        total_mib = specs.total_gpu_memory_mib or None
    else:
        if family not in GPU_FAMILIES:
            raise UnknownGPUError(f"instance family {family!r} has GPUs but no known GPU name")
        vendor, name = GPU_FAMILIES[family]
        count = float(row.gpu) if row and _positive(row.gpu) else 0.0
        total_gb = _gib(row.gpu_memory) if row else None
        total_mib = total_gb * 1024 if total_gb else None
        per_gpu_mib = total_mib / count if total_mib and count else total_mib
    full_mib = FRACTIONAL_FAMILIES.get(family)
    if full_mib:
        # A slice of one card. EC2 gives the fraction (LogicalGpuCount x
        # GpuPartitionSize), the price list its "GPU" column (0.125); failing
        # both, derive it from the slice's memory over the full card's.
        slice_mib = total_mib or per_gpu_mib
        if not 0 < count < 1 and slice_mib:
            count = round(slice_mib / full_mib, 4)
        per_gpu_mib = slice_mib
        lookup_mib: float | None = full_mib  # a slice's memory says nothing about which card it is cut from
    else:
        lookup_mib = per_gpu_mib
    if count <= 0:
        raise ValueError(f"{instance_type}: GPU count {count:g} and no slice size to derive a fraction from")
    model, exact = canonicalize(NAME, name, lookup_mib)
    return GpuFacts(
        gpu_model=model.gpu_model, variant_exact=exact, name=name, vendor=vendor or model.vendor, count=count,
        memory_gb=round(per_gpu_mib / 1024, 3) if per_gpu_mib else None,
        memory_gb_nominal=model.memory_gb,
        total_memory_gb=round(total_mib / 1024, 3) if total_mib else None,
    )


def _interconnect(instance_type: str, gpu_count: float) -> str | None:
    family = family_of(instance_type)
    if family in NVSWITCH_FAMILIES and gpu_count > 1:
        return "NVSwitch"
    if family in NVLINK_FAMILIES and gpu_count > 1:
        return "NVLink"
    return "PCIe" if gpu_count > 1 else None


@dataclass
class RegionPayload:
    """Everything fetched for one region, ready for the pure builder."""

    region: str
    prices: list[PriceRow]
    specs: dict[str, InstanceSpecs] | None = None  # None: no EC2 credentials
    offerings: dict[str, list[str]] | None = None
    spot: dict[tuple[str, str], tuple[float, str]] | None = None
    spot_history: list[SpotObservation] = field(default_factory=list)
    capacity_blocks: list[dict[str, Any]] = field(default_factory=list)  # CapacityBlockOfferings items
    savings_plans: list[aws_savings_plans.SavingsPlanRate] = field(default_factory=list)
    savings_plan_publication: str | None = None
    advisor: dict[str, tuple[str, int]] = field(default_factory=dict)
    publication: str | None = None
    skipped: Counter[str] = field(default_factory=Counter)  # price-list rows not kept, by reason
    spot_skipped: Counter[str] = field(default_factory=Counter)  # spot observations not kept, by reason


def described_unpriced(p: RegionPayload) -> list[str]:
    """GPU types EC2 describes in the region that have no price-list row there (no on-demand offer)."""
    if p.specs is None:
        return []
    priced = {r.instance_type for r in p.prices if r.kind == "instance"}
    return sorted(set(p.specs) - priced)


def _families_phrase(pairs: list[tuple[str, str]]) -> str:
    """[(type, region)] -> 'g7 (6 types in us-east-1, us-west-2), p6-b300 (1 type in us-west-2)'."""
    by_family: dict[str, tuple[set[str], set[str]]] = {}
    for itype, region in pairs:
        types, regions = by_family.setdefault(family_of(itype), (set(), set()))
        types.add(itype)
        regions.add(region)
    parts = []
    for fam, (types, regions) in sorted(by_family.items()):
        where = ", ".join(sorted(regions)) if len(regions) <= 4 else f"{len(regions)} regions"
        parts.append(f"{fam} ({len(types)} type{'s' if len(types) > 1 else ''} in {where})")
    return ", ".join(parts)


def refresh_notes(payloads: list[RegionPayload]) -> list[str]:
    """What the region payloads held that became no row, by reason and count."""
    notes = []
    unpriced = [(t, p.region) for p in payloads for t in described_unpriced(p)]
    if unpriced:
        notes.append(f"{len(unpriced)} GPU type-region pairs described by EC2 but not in the price list "
                     f"(no on-demand offer made): {_families_phrase(unpriced)}")
    no_gpu = sorted(p.region for p in payloads if not any(r.kind == "instance" for r in p.prices))
    if no_gpu:
        notes.append(f"{len(no_gpu)} regions have no GPU instance type in the price list: {', '.join(no_gpu)}")
    skipped: Counter[str] = Counter()
    for p in payloads:
        skipped.update(p.skipped)
    if skipped:
        notes.append("price-list rows skipped: " + "; ".join(
            f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))))
    spot_skipped: Counter[str] = Counter()
    for p in payloads:
        spot_skipped.update(p.spot_skipped)
    if spot_skipped:
        notes.append("spot price observations skipped: " + "; ".join(
            f"{n} {reason}" for reason, n in sorted(spot_skipped.items())))
    return notes


@drift_guard("aws: a region's price list and EC2 answers")
def build_region(batch: Batch, p: RegionPayload) -> None:
    """Turn one region's payloads into offers and storage/egress prices."""
    on_demand: dict[str, float] = {}
    reserved: dict[tuple[str, str, str], list[PriceRow]] = {}
    for row in p.prices:
        if row.kind == "instance":
            _add_instance_offer(batch, p, row, on_demand)
        elif row.kind == "reserved":
            reserved.setdefault((row.instance_type, row.sku, row.term_code), []).append(row)
        elif row.kind == "storage":
            if row.unit != "GB-Mo":  # IOPS/throughput dimensions of io2/gp3 are not per-GB prices
                p.skipped[SKIP_STORAGE_DIMENSION] += 1
                continue
            if not batch.usd_only("storage", f"{p.region}/{row.volume_api_name}/{row.sku}", row.currency, row.__dict__):
                continue
            batch.add("storage", row.sku, row.__dict__, region=row.region, storage_class=row.volume_api_name,
                      usd_per_gb_month=row.price, source_currency=row.currency,
                      source_usd_per_gb_month=row.price, description=row.description)
    _add_egress(batch, p)
    fields: dict[str, dict[str, Any] | Exception] = {}  # per type: twelve terms share one description
    for rows in reserved.values():
        _add_reserved_offer(batch, p, rows, on_demand.get(rows[0].instance_type), fields)
    _add_savings_plan_offers(batch, p, on_demand, fields)
    if p.spot is not None and p.specs is not None:
        for (itype, az), (price, stamp) in sorted(p.spot.items()):
            _add_spot_offer(batch, p, itype, az, price, stamp, on_demand.get(itype))
    for block in p.capacity_blocks:
        _add_capacity_block(batch, p, block)
    for o in p.spot_history:
        raw = {"instance_type": o.instance_type, "availability_zone": o.zone, "spot_price": o.price,
               "timestamp": o.observed_at.isoformat()}
        try:
            price = float(o.price)
        except ValueError:
            batch.quarantine("spot_price", f"{p.region}/{o.zone}/{o.instance_type}/{o.observed_at.isoformat()}",
                             f"SpotPrice {o.price!r} is not a number", raw)
            continue
        add_spot_price(batch, f"{p.region}/{o.zone}/{o.instance_type}/{o.observed_at.isoformat()}", raw,
                       region=p.region, zone=o.zone, instance_type=o.instance_type,
                       product_description=o.product_description, observed_at=o.observed_at,
                       spot_price_per_hour=price, source_currency="USD")


def _instance_fields(p: RegionPayload, itype: str, row: PriceRow | None) -> dict[str, Any]:
    specs = p.specs.get(itype) if p.specs is not None else None
    g = gpu_facts(itype, row, specs)
    vcpus = specs.vcpus if specs and specs.vcpus else (float(row.vcpu) if row and row.vcpu else None)
    ram = specs.ram_gb if specs and specs.ram_gb else (_gib(row.memory) if row else None)
    disk = specs.local_disk_gb if specs and specs.local_disk_gb else (_local_disk_gb(row.storage) if row else None)
    net = specs.network_gbps if specs and specs.network_gbps else (parse_network_gbps(row.network) if row else None)
    return dict(
        instance_type=itype, gpu_model=g.gpu_model, gpu_variant_exact=g.variant_exact,
        gpu_name_reported=g.name, gpu_vendor=g.vendor, gpu_count=g.count, gpu_memory_gb=g.memory_gb,
        gpu_memory_gb_nominal=g.memory_gb_nominal, total_gpu_memory_gb=g.total_memory_gb,
        vcpus=vcpus, ram_gb=ram, local_disk_gb=disk or None, interconnect=_interconnect(itype, g.count),
        network_gbps=net, multinode_fabric="EFA" if specs and specs.efa else None,
        billing_granularity_s=PROVIDER.facts.billing_granularity_s,
        minimum_charge_s=PROVIDER.facts.minimum_charge_s,
    )


def _add_instance_offer(batch: Batch, p: RegionPayload, row: PriceRow, on_demand: dict[str, float]) -> None:
    itype = row.instance_type
    if row.unit != "Hrs":
        batch.quarantine("offer", f"{p.region}/{itype}/{row.sku}", f"unexpected price unit {row.unit!r}", row.__dict__)
        return
    if row.currency != "USD":
        batch.quarantine("offer", f"{p.region}/{itype}/{row.sku}",
                         f"price in {row.currency or 'no currency'}, not USD; no conversion is configured",
                         row.__dict__)
        return
    try:
        fields = _instance_fields(p, itype, row)
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", f"{p.region}/{itype}", f"gpu: {err}", row.__dict__)
        return
    zones = p.offerings.get(itype, []) if p.offerings is not None else None
    data = {"sku": row.sku, "availability_zones": zones}
    ok = batch.offer(
        f"{p.region}/{itype}/{row.sku}", row.__dict__, region=p.region, zone="", purchase_option="on_demand",
        price_per_hour=row.price, source_currency="USD", source_price_per_hour=row.price,
        price_observed_at=p.publication,
        available=(bool(zones) if zones is not None else None),
        available_count=(len(zones) if zones is not None else None),
        availability_level=("offered in %d AZs" % len(zones) if zones else ("not offered" if zones is not None else None)),
        interruption_risk=None, spot_savings_pct=None,
        provider_data=json.dumps(data, sort_keys=True), **fields,
    )
    if ok:
        # A second row for the same type (a duplicate) is quarantined by the loader, which keeps
        # the first: spot savings are computed against that same first price.
        on_demand.setdefault(itype, row.price)


LEASE_MONTHS = {"1yr": 12, "3yr": 36}
RESERVED_PAYMENT = {"No Upfront": "no_upfront", "Partial Upfront": "partial_upfront", "All Upfront": "all_upfront"}
RESERVED_CLASS = {"standard": "reserved", "convertible": "reserved_convertible"}


def reserved_term_price(rows: list[PriceRow]) -> tuple[float, float]:
    """(upfront fee USD, hourly USD) of one Reserved term from its rows: one hourly row (Unit Hrs)
    and, for Partial and All Upfront, one fee row (Unit Quantity). ValueError says what is wrong."""
    by_unit: dict[str, list[float]] = {}
    for r in rows:
        if r.currency != "USD":
            raise ValueError(f"price in {r.currency or 'no currency'}, not USD; no conversion is configured")
        by_unit.setdefault(r.unit, []).append(r.price)
    odd = sorted(set(by_unit) - {"Hrs", "Quantity"})
    if odd or len(by_unit.get("Hrs", [])) != 1 or len(by_unit.get("Quantity", [])) > 1:
        raise ValueError(f"a reserved term needs one hourly row and at most one upfront fee row, got units "
                         f"{sorted(r.unit for r in rows)}")
    return (by_unit.get("Quantity") or [0.0])[0], by_unit["Hrs"][0]


def _add_reserved_offer(batch: Batch, p: RegionPayload, rows: list[PriceRow], on_demand_price: float | None,
                        fields_of: dict[str, dict[str, Any] | Exception]) -> None:
    """One Reserved Instance term (lease, payment option, offering class) as its own purchase option,
    priced at its effective hourly rate: the upfront fee spread over the term plus the hourly rate."""
    first = rows[0]
    itype = first.instance_type
    ref = f"{p.region}/{itype}/{first.sku}.{first.term_code}"
    raw = [r.__dict__ for r in rows]
    months = LEASE_MONTHS.get(first.lease)
    payment = RESERVED_PAYMENT.get(first.payment)
    commitment = RESERVED_CLASS.get(first.offering_class)
    if months is None or payment is None or commitment is None:
        batch.quarantine("offer", ref, f"reserved term with unknown lease {first.lease!r}, payment {first.payment!r} "
                         f"or class {first.offering_class!r}", raw)
        return
    if itype not in fields_of:
        try:
            fields_of[itype] = _instance_fields(p, itype, first)
        except (UnknownGPUError, ValueError) as err:
            fields_of[itype] = err
    try:
        upfront, hourly = reserved_term_price(rows)
        fields = fields_of[itype]
        if isinstance(fields, Exception):
            raise fields
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", ref, f"reserved term: {err}", raw)
        return
    price = round(amortized_usd_per_hour(upfront, hourly, months), 10)
    zones = p.offerings.get(itype, []) if p.offerings is not None else None
    data = {"sku": first.sku, "offer_term_code": first.term_code, "offering_class": first.offering_class,
            "upfront_fee_usd": upfront, "hourly_usd": hourly, "availability_zones": zones,
            "saving_vs_on_demand_pct": round(100 * (1 - price / on_demand_price), 1) if on_demand_price else None}
    batch.offer(
        ref, raw, region=p.region, zone="", purchase_option=commitment_option(commitment, months, payment),
        term_months=months, payment_option=payment,
        price_per_hour=price, source_currency="USD", source_price_per_hour=price, price_observed_at=p.publication,
        available=(bool(zones) if zones is not None else None),
        available_count=(len(zones) if zones is not None else None),
        availability_level=("offered in %d AZs" % len(zones) if zones else ("not offered" if zones is not None else None)),
        interruption_risk=None, spot_savings_pct=None,
        provider_data=json.dumps(data, sort_keys=True), **fields,
    )


def _add_savings_plan_offers(batch: Batch, p: RegionPayload, on_demand_price: dict[str, float],
                             fields_of: dict[str, dict[str, Any] | Exception]) -> None:
    """Each Savings Plan rate of an on-demand offer of the region (joined by its price-list SKU) as
    its own purchase option, at the plan's hourly rate (already the effective rate). A rate of an
    on-demand row that became no offer (quarantined) makes none either."""
    on_demand = {r.sku: r for r in p.prices if r.kind == "instance" and on_demand_price.get(r.instance_type) == r.price}
    for rate in aws_savings_plans.join_on_demand(p.savings_plans, on_demand, p.skipped):
        row = on_demand[rate.discounted_sku]
        itype = row.instance_type
        ref = f"{p.region}/{itype}/{rate.rate_code or rate.plan_sku}"
        raw = rate.__dict__
        if itype not in fields_of:
            try:
                fields_of[itype] = _instance_fields(p, itype, row)
            except (UnknownGPUError, ValueError) as err:
                fields_of[itype] = err
        fields = fields_of[itype]
        if isinstance(fields, Exception):
            batch.quarantine("offer", ref, f"savings plan: {fields}", raw)
            continue
        if rate.currency != "USD":
            batch.quarantine("offer", ref, f"savings plan rate in {rate.currency or 'no currency'}, not USD; "
                             "no conversion is configured", raw)
            continue
        try:
            price = float(rate.rate)
        except ValueError:
            batch.quarantine("offer", ref, f"savings plan rate {rate.rate!r} is not a number", raw)
            continue
        od_price = on_demand_price.get(itype)
        zones = p.offerings.get(itype, []) if p.offerings is not None else None
        data = {"sku": row.sku, "savings_plan_sku": rate.plan_sku, "rate_code": rate.rate_code,
                "usage_type": rate.usage_type, "plan": rate.description, "availability_zones": zones,
                "saving_vs_on_demand_pct": round(100 * (1 - price / od_price), 1) if od_price else None}
        batch.offer(
            ref, raw, region=p.region, zone="",
            purchase_option=commitment_option(rate.commitment, rate.term_months, rate.payment_option),
            term_months=rate.term_months, payment_option=rate.payment_option,
            price_per_hour=price, source_currency="USD", source_price_per_hour=price,
            price_observed_at=p.savings_plan_publication or p.publication,
            available=(bool(zones) if zones is not None else None),
            available_count=(len(zones) if zones is not None else None),
            availability_level=("offered in %d AZs" % len(zones) if zones else ("not offered" if zones is not None else None)),
            interruption_risk=None, spot_savings_pct=None,
            provider_data=json.dumps(data, sort_keys=True), **fields,
        )


def fetch_savings_plans(ctx: SourceContext, client: Any, region: str, index: dict[str, str],
                        skipped: Counter[str]) -> list[aws_savings_plans.SavingsPlanRate]:
    """A region's Savings Plans file, streamed and parsed as it arrives (rates of GPU families only)."""
    if region not in index:
        return []
    return aws_savings_plans.parse_savings_plan_chunks(
        ctx.stream_bytes(client, PRICING_BULK_HOST, index[region]), region, GPU_FAMILIES, skipped)


def _add_spot_offer(batch: Batch, p: RegionPayload, itype: str, az: str, price: float, stamp: str,
                    on_demand_price: float | None) -> None:
    raw = {"instance_type": itype, "availability_zone": az, "spot_price": price, "timestamp": stamp}
    try:
        fields = _instance_fields(p, itype, None)
    except (UnknownGPUError, ValueError) as err:
        batch.quarantine("offer", f"{p.region}/{az}/{itype}/spot", f"gpu: {err}", raw)
        return
    except KeyError:
        batch.quarantine("offer", f"{p.region}/{az}/{itype}/spot", "spot price for a type EC2 did not describe", raw)
        return
    advisor = p.advisor.get(itype)
    saving = round(100 * (1 - price / on_demand_price), 1) if on_demand_price else None
    batch.offer(
        f"{p.region}/{az}/{itype}/spot", raw, region=p.region, zone=az, purchase_option="spot",
        price_per_hour=price, source_currency="USD", source_price_per_hour=price, price_observed_at=stamp,
        available=True, available_count=None, availability_level="spot price published",
        interruption_risk=advisor[0] if advisor else None,
        **interruption.from_rate_band(advisor[0] if advisor else None, interruption.AWS_SPOT_ADVISOR),
        spot_savings_pct=saving if saving is not None else (float(advisor[1]) if advisor else None),
        provider_data=json.dumps({"advisor_savings_pct": advisor[1] if advisor else None}, sort_keys=True),
        **fields,
    )


def _tier(text: str) -> float | None:
    if text in ("", "Inf"):
        return None
    return float(text)


def _add_egress(batch: Batch, p: RegionPayload) -> None:
    internet = [r for r in p.prices if r.kind == "egress" and r.transfer_type == "AWS Outbound"
                and r.to_location in ("External", "")]
    for r in internet:
        start = _tier(r.tier_start) or 0.0
        if not batch.usd_only("egress", f"{p.region}/internet/{r.sku}", r.currency, r.__dict__):
            continue
        batch.add("egress", f"{p.region}/internet/{r.sku}", r.__dict__, region=p.region, destination="internet",
                  tier_start_gb=start, tier_end_gb=_tier(r.tier_end), usd_per_gb=r.price,
                  source_currency=r.currency, source_usd_per_gb=r.price, description=r.description)
    # Inter-region rates differ by destination; the table keeps one rate per
    # tier: the highest, so a cost estimate never comes out too low.
    inter: dict[float, list[PriceRow]] = {}
    for r in p.prices:
        if r.kind == "egress" and r.transfer_type == "InterRegion Outbound" and \
                batch.usd_only("egress", f"{p.region}/inter_region/{r.sku}", r.currency, r.__dict__):
            inter.setdefault(_tier(r.tier_start) or 0.0, []).append(r)
    for start, rows in sorted(inter.items()):
        top = max(rows, key=lambda r: r.price)
        low = min(r.price for r in rows)
        batch.add("egress", f"{p.region}/inter_region/{top.sku}", top.__dict__, region=p.region,
                  destination="inter_region", tier_start_gb=start, tier_end_gb=_tier(top.tier_end),
                  usd_per_gb=top.price, source_currency=top.currency, source_usd_per_gb=top.price,
                  description=f"highest of {len(rows)} destination rates ({low:g} to {top.price:g} USD/GB)")


# -- fetching ---------------------------------------------------------------------

def _json_body(ctx: SourceContext, client: Any, host: str, path: str) -> Any:
    """GET a JSON document; a body that does not parse is schema drift, not a bare ValueError."""
    resp = ctx.get(client, host, path)
    try:
        return ctx.parse_json(resp.content, f"{host}{path}")
    except ValueError as err:
        raise SchemaDriftError(f"aws: {host}{path} did not answer valid JSON ({err}; starts "
                               f"{resp.text[:60]!r})") from None


def has_credentials(ctx: SourceContext) -> bool:
    if ctx.mode == "replay" or (ctx.mode == "record" and ctx.replay_urls):
        return True  # the loopback server does not check signatures
    import boto3

    creds = boto3.Session().get_credentials()
    if creds is None:
        return False
    # The chain may have read them from a file, SSO or the instance metadata service, not the
    # environment: known now, they are cut from every message and record like an env secret.
    frozen = creds.get_frozen_credentials()
    for value in (frozen.access_key, frozen.secret_key, frozen.token):
        register_secret(value)
    return True


def _client_kwargs(ctx: SourceContext) -> dict[str, Any]:
    if ctx.mode == "replay" or (ctx.mode == "record" and ctx.replay_urls):
        # Loopback replay: boto3 signs requests, so it needs some key; these
        # are not secrets and never reach a real endpoint.
        return {"aws_access_key_id": "replay", "aws_secret_access_key": "replay"}
    return {}


def _gpu_type_filters() -> list[dict[str, Any]]:
    return [{"Name": "instance-type", "Values": [f"{f}.*" for f in sorted(GPU_FAMILIES)]}]


def parse_api_timestamp(value: Any) -> datetime:
    """A timestamp of an AWS answer as a timezone-aware datetime: the ISO 8601 the EC2 API writes
    ('2026-11-30T03:00:00.000Z') by the standard library, anything else by botocore's own parser.
    botocore's default goes through dateutil and was the largest cost of a world-scale spot
    history (75,239 Timestamps): the same instants, several times faster."""
    if isinstance(value, str):
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            stamp = None
        if stamp is not None:
            return stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


def _fast_timestamps(client: Any) -> Any:
    """The client's answers parsed with parse_api_timestamp (botocore's ResponseParserFactory
    default, set on this client's own factory). A botocore without that hook keeps its parser."""
    from botocore.parsers import ResponseParserFactory

    endpoint = getattr(client, "_endpoint", None)
    if endpoint is not None and hasattr(endpoint, "_response_parser_factory"):
        factory = ResponseParserFactory()
        factory.set_parser_defaults(timestamp_parser=parse_api_timestamp)
        endpoint._response_parser_factory = factory
    return client


def ec2_client(ctx: SourceContext, region: str) -> Any:
    return _fast_timestamps(ctx.boto_client("ec2", region, f"ec2.{region}.amazonaws.com", **_client_kwargs(ctx)))


def fetch_ec2(ctx: SourceContext, region: str, skipped: Counter[str] | None = None, ec2: Any = None
              ) -> tuple[dict[str, InstanceSpecs], dict[str, list[str]], dict[tuple[str, str], tuple[float, str]],
                         list[SpotObservation]]:
    """DescribeInstanceTypes, the AZ offerings and the spot price history of one region (through
    `ec2`, the region's client, made here when not given); spot observations not kept are
    counted in `skipped`."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    ec2 = ec2 or ec2_client(ctx, region)
    # Three independent page chains: walked side by side (a boto3 client is thread-safe), so the
    # region costs its longest chain, not the sum of the three.
    spot_start = spot_history_start(ctx.since, region, datetime.now(timezone.utc))
    chains = {
        "types": lambda: parse_instance_types(
            ec2.get_paginator("describe_instance_types").paginate(Filters=_gpu_type_filters())),
        "offerings": lambda: parse_offerings(ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone", Filters=_gpu_type_filters())),
        "spot": lambda: list(ec2.get_paginator("describe_spot_price_history").paginate(
            ProductDescriptions=[SPOT_PRODUCT], StartTime=spot_start,
            Filters=_gpu_type_filters(), PaginationConfig={"PageSize": SPOT_HISTORY_PAGE_SIZE})),
    }
    try:
        with ThreadPoolExecutor(max_workers=len(chains), thread_name_prefix=f"aws-ec2-{region}") as pool:
            futures = {name: pool.submit(chain) for name, chain in chains.items()}
            types, offerings, spot_pages = (futures[n].result() for n in ("types", "offerings", "spot"))
    except (BotoCoreError, ClientError) as err:
        raise SourceError(f"aws: EC2 API in {region} failed: {err}") from scrubbed(err)
    except ResponseParserError as err:  # a cut or malformed XML answer (not a BotoCoreError)
        raise SchemaDriftError(f"aws: EC2 API in {region} answered XML botocore cannot parse: "
                               f"{str(err).splitlines()[0][:200]}") from scrubbed(err)
    return types, offerings, parse_spot_history(spot_pages), parse_spot_observations(spot_pages, skipped)


def fetch_capacity_blocks(ctx: SourceContext, region: str, specs: dict[str, InstanceSpecs],
                          notes: list[str], ec2: Any = None) -> list[dict[str, Any]]:
    """Every Capacity Block offering of one instance of each type sold that way, for each duration
    of CAPACITY_BLOCK_HOURS, starting from now to CAPACITY_BLOCK_AHEAD. A region that refuses
    the call (Capacity Blocks are sold in some regions only) says so in `notes`."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    types = sorted(t for t, s in specs.items() if s.capacity_block)
    if not types:
        return []
    ec2 = ec2 or ec2_client(ctx, region)
    now = datetime.now(timezone.utc)
    out: list[dict[str, Any]] = []
    try:
        for itype in types:
            for hours in CAPACITY_BLOCK_HOURS:
                out.extend(parse_capacity_block_pages(ec2.get_paginator("describe_capacity_block_offerings").paginate(
                    InstanceType=itype, InstanceCount=1, CapacityDurationHours=hours, StartDateRange=now,
                    EndDateRange=now + CAPACITY_BLOCK_AHEAD)))
    except ClientError as err:
        notes.append(f"capacity blocks in {region} not fetched: {scrubbed(err)}")
        return []
    except BotoCoreError as err:
        raise SourceError(f"aws: DescribeCapacityBlockOfferings in {region} failed: {err}") from scrubbed(err)
    except ResponseParserError as err:
        raise SchemaDriftError(f"aws: DescribeCapacityBlockOfferings in {region} answered XML botocore cannot "
                               f"parse: {str(err).splitlines()[0][:200]}") from scrubbed(err)
    return out


def fetch_enabled_regions(ctx: SourceContext) -> list[str]:
    """The regions the account may use (EC2 DescribeRegions, asked once in us-east-1)."""
    from botocore.exceptions import BotoCoreError, ClientError
    from botocore.parsers import ResponseParserError

    ec2 = ctx.boto_client("ec2", "us-east-1", "ec2.us-east-1.amazonaws.com", **_client_kwargs(ctx))
    try:
        return parse_enabled_regions(ec2.describe_regions(AllRegions=True))
    except (BotoCoreError, ClientError) as err:
        raise SourceError(f"aws: EC2 DescribeRegions failed: {err}") from scrubbed(err)
    except ResponseParserError as err:
        raise SchemaDriftError(f"aws: EC2 DescribeRegions answered XML botocore cannot parse: "
                               f"{str(err).splitlines()[0][:200]}") from scrubbed(err)


def fetch_prices_bulk(ctx: SourceContext, client: Any, region: str, ec2_index: dict[str, str],
                      dt_index: dict[str, str], skipped: Counter[str] | None = None
                      ) -> tuple[list[PriceRow], str | None]:
    """A region's EC2 offer file and (if listed) its AWSDataTransfer file, both streamed and
    parsed as they arrive; the two downloads run side by side. `skipped` receives the counts
    of rows not kept, by reason."""
    if region not in ec2_index:
        raise SourceError(f"aws: the price list has no EC2 offer file for region {region}")
    meta: dict[str, str] = {}
    ec2_skipped: Counter[str] = Counter()
    dt_skipped: Counter[str] = Counter()  # (filled in the other thread)

    def ec2_rows() -> list[PriceRow]:
        return list(parse_offer_chunks(ctx.stream_bytes(client, PRICING_BULK_HOST, ec2_index[region]), region, meta,
                                       ec2_skipped))

    def dt_rows() -> list[PriceRow]:
        if region not in dt_index:
            return []
        kept = []
        for r in parse_offer_chunks(ctx.stream_bytes(client, PRICING_BULK_HOST, dt_index[region]), region,
                                    skipped=dt_skipped):
            if r.kind == "egress" and r.region == region:
                kept.append(r)
            else:
                dt_skipped[SKIP_OTHER_REGION if r.kind == "egress" else SKIP_OTHER_PRODUCT] += 1
        return kept

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"aws-bulk-{region}") as pool:
        dt_future = pool.submit(dt_rows)
        rows = ec2_rows()
        rows.extend(dt_future.result())
    if skipped is not None:
        skipped.update(ec2_skipped)
        skipped.update(dt_skipped)
    return rows, meta.get("Publication Date")


def fetch_prices_api(ctx: SourceContext, region: str, skipped: Counter[str] | None = None) -> list[PriceRow]:
    from botocore.exceptions import BotoCoreError, ClientError

    pricing = ctx.boto_client("pricing", "us-east-1", PRICING_API_HOST, **_client_kwargs(ctx))
    queries = [
        ("AmazonEC2", [("regionCode", region), ("instanceFamily", "GPU instance"), ("operatingSystem", "Linux"),
                       ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used")]),
        ("AmazonEC2", [("regionCode", region), ("productFamily", "Storage")]),
        ("AWSDataTransfer", [("fromRegionCode", region)]),
    ]
    rows: list[PriceRow] = []
    try:
        for service, filters in queries:
            pages = pricing.get_paginator("get_products").paginate(
                ServiceCode=service, FormatVersion="aws_v1",
                Filters=[{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in filters])
            for page in pages:
                if "PriceList" not in page:
                    raise SchemaDriftError("aws: GetProducts page lacks PriceList")
                for item in page["PriceList"]:
                    rows.extend(parse_price_list_item(item, region, skipped, ctx.repeated_keys))
    except (BotoCoreError, ClientError) as err:
        raise SourceError(f"aws: Pricing API for {region} failed: {err}") from scrubbed(err)
    return rows


def fetch(ctx: SourceContext) -> Batch:
    """Scrape AWS: every selected region, concurrently, into one Batch."""
    batch = Batch(NAME)
    creds = has_credentials(ctx)
    config = ctx.config
    use_ec2 = creds and config.aws_ec2_api != "off"
    source = config.aws_price_source
    use_api = source == "api" or (source == "auto" and creds and ctx.mode == "live")
    if use_api and not creds:
        raise SourceError("aws: aws_price_source=api needs AWS credentials (none found in the standard chain)")
    with ctx.http_client() as client:
        ec2_index = parse_region_index(_json_body(ctx, client, PRICING_BULK_HOST, EC2_REGION_INDEX), "AmazonEC2")
        dt_index = {} if use_api else parse_region_index(
            _json_body(ctx, client, PRICING_BULK_HOST, DATA_TRANSFER_REGION_INDEX), "AWSDataTransfer")
        advisor_doc = _json_body(ctx, client, SPOT_ADVISOR_HOST, SPOT_ADVISOR_PATH)
        sp_doc = _json_body(ctx, client, PRICING_BULK_HOST, aws_savings_plans.SAVINGS_PLAN_REGION_INDEX)
        sp_index = aws_savings_plans.parse_savings_plan_index(sp_doc)
        enabled = fetch_enabled_regions(ctx) if use_ec2 and config.aws_regions is None else None
        regions = ctx.select_regions(ec2_index, default_regions(ec2_index, enabled), "the price list")
        block_regions = capacity_block_regions(config.aws_capacity_blocks, regions) if use_ec2 else set()
        block_notes: list[str] = []
        if not use_ec2:
            batch.notes.append("no AWS credentials (or aws_ec2_api=off): on-demand prices from the public "
                               "price list only; no EC2 facts, AZ offerings or spot prices")

        def one_region(region: str) -> RegionPayload:
            # The EC2 API answers (other hosts) are fetched while the price list streams.
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"aws-ec2-{region}") as side:
                spot_skipped: Counter[str] = Counter()
                sp_skipped: Counter[str] = Counter()
                plans = side.submit(fetch_savings_plans, ctx, client, region, sp_index, sp_skipped)

                def ec2_calls() -> tuple[Any, ...]:
                    ec2 = ec2_client(ctx, region)
                    specs, offerings, spot, history = fetch_ec2(ctx, region, spot_skipped, ec2)
                    blocks = (fetch_capacity_blocks(ctx, region, specs, block_notes, ec2)
                              if region in block_regions else [])
                    return specs, offerings, spot, history, blocks

                ec2 = side.submit(ec2_calls) if use_ec2 else None
                publication = None
                skipped: Counter[str] = Counter()
                if use_api:
                    prices = fetch_prices_api(ctx, region, skipped)
                else:
                    prices, publication = fetch_prices_bulk(ctx, client, region, ec2_index, dt_index, skipped)
                payload = RegionPayload(region=region, prices=prices, publication=publication,
                                        advisor=parse_spot_advisor(advisor_doc, region), skipped=skipped,
                                        spot_skipped=spot_skipped)
                payload.savings_plans = plans.result()
                payload.savings_plan_publication = sp_doc.get("publicationDate")
                payload.skipped.update(sp_skipped)
                if ec2 is not None:
                    (payload.specs, payload.offerings, payload.spot, payload.spot_history,
                     payload.capacity_blocks) = ec2.result()
            return payload

        workers = config.aws_concurrency
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="aws") as pool:
            payloads = list(pool.map(one_region, regions))
    for payload in payloads:
        build_region(batch, payload)
    batch.notes.extend(refresh_notes(payloads))
    batch.notes.extend(sorted(block_notes))
    no_plans = sorted(set(regions) - set(sp_index))
    if no_plans:
        batch.notes.append(f"{len(no_plans)} regions have no Savings Plans price file: {', '.join(no_plans)}")
    return batch
