"""AWS's price lists into PriceRows: the public bulk offer files (CSV of hundreds of MB, parsed as
they stream by pyarrow, the rows not kept counted by reason) and the Pricing API's GetProducts.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any, Callable, Iterable, Iterator

from gpuledger.adapters.base import (
    RepeatedKey, SchemaDriftError, SourceContext, SourceError, drift_guard, parse_json, scrubbed,
)
from gpuledger.warehouse.settings import Settings, env_name

PRICING_BULK_HOST = "pricing.us-east-1.amazonaws.com"
PRICING_API_HOST = "api.pricing.us-east-1.amazonaws.com"
EC2_REGION_INDEX = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
DATA_TRANSFER_REGION_INDEX = "/offers/v1.0/aws/AWSDataTransfer/current/region_index.json"

# Instance families that carry GPUs and their GPU's name (used without EC2's GpuInfo).
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
DEFAULT_MAX_PAGES: int = Settings.model_fields["max_pages"].default
COMPUTE_FAMILIES = ("Compute Instance", "Compute Instance (bare metal)")

SKIP_TERM = "reserved-term rows of instance families without GPUs"
SKIP_VARIANT = "instance rows for another OS, tenancy, licence, software or capacity reservation"
SKIP_CPU_ONLY = "CPU-only instance rows"
SKIP_OTHER_PRODUCT = "rows of other products (snapshots, IOPS, IP addresses, other transfer)"
SKIP_STORAGE_DIMENSION = "EBS price dimensions not per GB-month (IOPS, throughput)"
SKIP_OTHER_REGION = "data-transfer rows of another region"


def capped(pages: Iterable[dict[str, Any]], what: str, max_pages: int) -> Iterator[dict[str, Any]]:
    """botocore's pages of one listing, ended by a SourceError naming `what` when a NextToken comes again or
    the listing runs past `max_pages` (botocore itself stops only at the same token twice in a row)."""
    seen: set[str] = set()
    for n, page in enumerate(pages, 1):
        yield page
        if not (token := page.get("NextToken")):
            return
        if token in seen:
            raise SourceError(f"{what}: page token {token[:40]!r} came again (a paging loop)")
        if n >= max_pages:
            raise SourceError(f"{what}: paging did not end within {max_pages} pages ({env_name('max_pages')})")
        seen.add(token)


def page_items(pages: Iterable[dict[str, Any]], key: str, action: str) -> Iterator[Any]:
    """The `key` items of every page of an `action` answer; a page without them is SchemaDriftError."""
    for page in pages:
        if key not in page:
            raise SchemaDriftError(f"aws: {action} page lacks {key}")
        yield from page[key]


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


@dataclass(frozen=True)
class PriceRow:
    kind: str  # instance | reserved | storage | egress
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
    # Reserved terms only: an hourly row plus, unless No Upfront, a fee row under the same term code.
    term_code: str = ""
    lease: str = ""  # "1yr" | "3yr"
    payment: str = ""  # "No Upfront" | "Partial Upfront" | "All Upfront"
    offering_class: str = ""  # "standard" | "convertible"


# The PriceRow fields copied as text from the row of the same key (the Reserved-term ones for reserved rows only).
_ROW_TEXT = tuple(f.name for f in fields(PriceRow) if f.name not in ("kind", "price"))
_RESERVED_TEXT = ("term_code", "lease", "payment", "offering_class")

# Bulk CSV columns read, by header name -> the row key `price_row` reads.
CSV_COLUMNS = {
    "SKU": "sku", "TermType": "term", "PriceDescription": "description", "StartingRange": "tier_start",
    "EndingRange": "tier_end", "Unit": "unit", "PricePerUnit": "price", "Currency": "currency",
    "Product Family": "family", "Instance Family": "instance_family", "Instance Type": "instance_type",
    "vCPU": "vcpu", "Memory": "memory", "Storage": "storage", "Network Performance": "network",
    "Tenancy": "tenancy", "Operating System": "os", "License Model": "license", "Pre Installed S/W": "sw",
    "CapacityStatus": "capacity", "GPU": "gpu", "GPU Memory": "gpu_memory", "Region Code": "region",
    "Volume API Name": "volume_api_name", "Transfer Type": "transfer_type", "To Location": "to_location",
    "From Region Code": "from_region", "To Region Code": "to_region", "MarketOption": "market",
    "OfferTermCode": "term_code", "LeaseContractLength": "lease", "PurchaseOption": "payment",
    "OfferingClass": "offering_class",
}
REQUIRED_COLUMNS = ("SKU", "TermType", "PricePerUnit", "Product Family")


def _positive(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


# The instance variant priced (row key -> the values it may have): Linux, shared, no licence or software, on-demand.
WANTED_VARIANT = {"os": ("Linux",), "tenancy": ("Shared",), "sw": ("NA",), "capacity": ("Used",),
                  "license": ("No License required", ""), "market": ("OnDemand", "")}
_MISSING = {"license": "No License required", "market": "OnDemand"}  # a row's missing column, as read


def price_row(r: dict[str, str], region: str, skipped: Counter[str] | None = None) -> PriceRow | None:
    """The row as a PriceRow, or None (counted by reason in `skipped`) for a row not kept."""
    def skip(reason: str) -> None:
        if skipped is not None:
            skipped[reason] += 1

    term, family = r.get("term"), r.get("family", "")
    if term not in ("OnDemand", "Reserved"):
        return skip(SKIP_TERM)
    if family in COMPUTE_FAMILIES:
        if any(r.get(key, _MISSING.get(key, "")) not in values for key, values in WANTED_VARIANT.items()):
            return skip(SKIP_VARIANT)
        if family_of(r.get("instance_type", "")) not in GPU_FAMILIES and not _positive(r.get("gpu", "")):
            return skip(SKIP_TERM if term == "Reserved" else SKIP_CPU_ONLY)
        kind = "instance" if term == "OnDemand" else "reserved"
    elif term == "Reserved":
        return skip(SKIP_OTHER_PRODUCT)
    elif family == "Storage" and r.get("volume_api_name"):
        kind = "storage"
    elif family == "Data Transfer" and r.get("transfer_type") in ("AWS Outbound", "InterRegion Outbound"):
        kind = "egress"
    else:
        return skip(SKIP_OTHER_PRODUCT)
    try:
        price = float(r["price"])
    except (KeyError, ValueError):
        raise SchemaDriftError(f"aws: price list row {r.get('sku')!r} has no numeric PricePerUnit") from None
    text = {name: r.get(name) or "" for name in _ROW_TEXT if kind == "reserved" or name not in _RESERVED_TEXT}
    return PriceRow(kind=kind, region=text.pop("region") or r.get("from_region") or region, price=price, **text)


_HEAD_LINES = 20  # the header is within these lines (AWS writes 5 metadata lines before it)
_BLOCK_BYTES = 1 << 20  # read and parsed at once; larger blocks cost memory and save no CPU


class _Chunks(io.RawIOBase):
    """Body chunks of any sizes as a readable stream."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self.chunks, self.rest = iter(chunks), memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            if (chunk := next(self.chunks, None)) is None:
                return 0
            self.rest = memoryview(chunk)
        n = min(len(buffer), len(self.rest))
        buffer[:n], self.rest = self.rest[:n], self.rest[n:]
        return n


def _row_verdicts(col: Callable[[str], Any]) -> tuple[Any, Any, Any]:
    """Per row of a batch: its term is kept; it is another variant than the one priced; `price_row` is to see it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    term = col("term")
    term_kept = pc.or_(pc.equal(term, "OnDemand"),
                       pc.and_(pc.equal(term, "Reserved"), pc.equal(col("instance_family"), "GPU instance")))
    compute = pc.is_in(col("family"), pa.array(COMPUTE_FAMILIES))
    wanted = functools.reduce(pc.and_, (pc.is_in(col(key), pa.array(values)) for key, values in WANTED_VARIANT.items()))
    variant = pc.and_(term_kept, pc.and_(compute, pc.invert(wanted)))
    other = pc.is_in(col("family"), pa.array(["Storage", "Data Transfer"]))
    return term_kept, variant, pc.and_(term_kept, pc.or_(pc.and_(compute, wanted), other))


def parse_offer_chunks(chunks: Iterable[bytes], region: str, meta: dict[str, str] | None = None,
                       skipped: Counter[str] | None = None) -> list[PriceRow]:
    """A bulk offer file read as it arrives -> its PriceRows; `meta` gets the metadata lines, `skipped`
    the rows not kept by reason. A malformed or truncated file is SchemaDriftError."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    stream = io.BufferedReader(_Chunks(chunks), _BLOCK_BYTES)
    meta = {} if meta is None else meta
    skipped = Counter() if skipped is None else skipped
    for _ in range(_HEAD_LINES):
        header = next(csv.reader([stream.readline().decode("utf-8", "replace")]), [])
        if header[:1] == ["SKU"]:
            break
        if len(header) >= 2:
            meta[header[0]] = header[1]
    else:
        raise SchemaDriftError(f"aws: offer file for {region} has no header row (metadata: {sorted(meta)})")
    if missing := [c for c in REQUIRED_COLUMNS if c not in header]:
        raise SchemaDriftError(f"aws: offer file for {region} lacks columns {missing}")
    at = {name: f"c{header.index(col)}" for col, name in CSV_COLUMNS.items() if col in header}
    rows: list[dict[str, str]] = []
    if not stream.peek(1):  # a file without rows (pyarrow's reader refuses one)
        return []
    try:  # the reader parses its first block when it opens
        reader = pacsv.open_csv(stream, read_options=pacsv.ReadOptions(
            column_names=[f"c{i}" for i in range(len(header))], block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(newlines_in_values=False), convert_options=pacsv.ConvertOptions(
                include_columns=list(at.values()), column_types=dict.fromkeys(at.values(), pa.string()),
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        for batch in reader:
            def col(name: str) -> Any:
                return batch.column(at[name]) if name in at else pa.array([_MISSING.get(name, "")] * batch.num_rows)

            term_kept, variant, kept = _row_verdicts(col)
            n_term, n_variant, n_kept = (batch.num_rows - (pc.sum(term_kept).as_py() or 0),
                                         pc.sum(variant).as_py() or 0, pc.sum(kept).as_py() or 0)
            skipped.update(+Counter({SKIP_TERM: n_term, SKIP_VARIANT: n_variant,
                                     SKIP_OTHER_PRODUCT: batch.num_rows - n_term - n_variant - n_kept}))
            if n_kept:
                columns = batch.filter(kept).select(list(at.values())).rename_columns(list(at)).to_pydict()
                rows.extend(dict(zip(columns, values)) for values in zip(*columns.values()))
    except pa.ArrowInvalid as err:  # "CSV parse error: Expected 91 columns, got 52: <the row>"
        raise SchemaDriftError(f"aws: offer file for {region} is not valid CSV "
                               f"({str(err).removeprefix('CSV parse error: ')[:160]})") from None
    return [p for r in rows if (p := price_row(r, region, skipped)) is not None]


def parse_region_index(doc: Any, what: str) -> dict[str, str]:
    """region code -> path of its current offer file in CSV form."""
    try:
        return {code: entry["currentVersionUrl"].replace("/index.json", "/index.csv")
                for code, entry in doc["regions"].items()}
    except (KeyError, TypeError, AttributeError) as err:
        raise SchemaDriftError(f"aws: {what} region index lacks regions/currentVersionUrl ({err!r})") from None


def price_list_versions(regions: Iterable[str], *indexes: dict[str, str] | None) -> str:
    """One validator of every region's versioned offer file paths in `indexes` (None: not read)."""
    files = [[r, *(None if i is None else i.get(r) for i in indexes)] for r in sorted(regions)]
    return hashlib.sha256(json.dumps(files).encode()).hexdigest()


def fetch_prices_bulk(ctx: SourceContext, client: Any, region: str, ec2_index: dict[str, str],
                      dt_index: dict[str, str], skipped: Counter[str] | None = None
                      ) -> tuple[list[PriceRow], str | None]:
    """A region's EC2 and data-transfer offer files, side by side -> the rows and the publication date."""
    if region not in ec2_index:
        raise SourceError(f"aws: the price list has no EC2 offer file for region {region}")
    meta: dict[str, str] = {}
    dt_skipped: Counter[str] = Counter()  # filled in the other thread

    def read(index: dict[str, str], counts: Counter[str] | None, into: dict[str, str] | None = None) -> list[PriceRow]:
        if region not in index:
            return []
        return parse_offer_chunks(ctx.stream_bytes(client, PRICING_BULK_HOST, index[region]), region, into, counts)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"aws-bulk-{region}") as pool:
        transfer = pool.submit(read, dt_index, dt_skipped)
        rows = read(ec2_index, skipped, meta)
        for r in transfer.result():
            if r.kind == "egress" and r.region == region:
                rows.append(r)
            else:
                dt_skipped[SKIP_OTHER_REGION if r.kind == "egress" else SKIP_OTHER_PRODUCT] += 1
    if skipped is not None:
        skipped.update(dt_skipped)
    return rows, meta.get("Publication Date")


_API_ATTRIBUTES = {  # row key -> GetProducts attribute
    "instance_type": "instanceType", "vcpu": "vcpu", "memory": "memory", "storage": "storage",
    "network": "networkPerformance", "tenancy": "tenancy", "os": "operatingSystem", "license": "licenseModel",
    "sw": "preInstalledSw", "capacity": "capacitystatus", "gpu": "gpu", "gpu_memory": "gpuMemory",
    "volume_api_name": "volumeApiName", "transfer_type": "transferType", "to_location": "toLocation",
    "from_region": "fromRegionCode", "to_region": "toRegionCode", "market": "marketoption",
}


@drift_guard("aws: GetProducts item")
def parse_price_list_item(item: str | dict[str, Any], region: str, skipped: Counter[str] | None = None,
                          repeated: list[RepeatedKey] | None = None) -> list[PriceRow]:
    """One Pricing API PriceList element (a JSON string) -> on-demand and reserved-term price rows."""
    doc = parse_json(item, f"{PRICING_API_HOST} GetProducts", [] if repeated is None else repeated) \
        if isinstance(item, str) else item
    try:
        product, attrs, terms = doc["product"], doc["product"]["attributes"], doc.get("terms", {})
    except (KeyError, TypeError) as err:
        raise SchemaDriftError(f"aws: GetProducts item lacks product/attributes ({err!r})") from None
    base = {key: attrs.get(name, "") for key, name in _API_ATTRIBUTES.items()}
    base.update(sku=product.get("sku", ""), family=product.get("productFamily", ""), term="OnDemand",
                region=attrs.get("regionCode") or attrs.get("fromRegionCode") or region)
    rows = []
    for kind in ("OnDemand", "Reserved"):
        for code, term in terms.get(kind, {}).items():
            extra: dict[str, Any] = {"term": kind}
            if kind == "Reserved":
                attrs_ = term.get("termAttributes", {})
                extra.update(term_code=term.get("offerTermCode", code.rsplit(".", 1)[-1]),
                             lease=attrs_.get("LeaseContractLength", ""), payment=attrs_.get("PurchaseOption", ""),
                             offering_class=attrs_.get("OfferingClass", ""))
            for dim in term.get("priceDimensions", {}).values():
                currency, amount = next(iter(dim.get("pricePerUnit", {}).items()), ("", ""))
                rows.append(dict(base, **extra, description=dim.get("description", ""), unit=dim.get("unit", ""),
                                 price=amount, currency=currency))
                if kind == "OnDemand":
                    rows[-1].update(tier_start=dim.get("beginRange", ""), tier_end=dim.get("endRange", ""))
    return [parsed for row in rows if (parsed := price_row(row, region, skipped)) is not None]


def fetch_prices_api(ctx: SourceContext, region: str, client_kwargs: dict[str, Any],
                     skipped: Counter[str] | None = None) -> list[PriceRow]:
    from botocore.exceptions import BotoCoreError, ClientError

    pricing = ctx.boto_client("pricing", "us-east-1", PRICING_API_HOST, **client_kwargs)
    queries = [
        ("AmazonEC2", [("regionCode", region), ("instanceFamily", "GPU instance"), ("operatingSystem", "Linux"),
                       ("tenancy", "Shared"), ("preInstalledSw", "NA"), ("capacitystatus", "Used")]),
        ("AmazonEC2", [("regionCode", region), ("productFamily", "Storage")]),
        ("AWSDataTransfer", [("fromRegionCode", region)]),
    ]
    rows: list[PriceRow] = []
    try:
        for service, filters in queries:
            pages = capped(pricing.get_paginator("get_products").paginate(
                ServiceCode=service, FormatVersion="aws_v1",
                Filters=[{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in filters]),
                f"aws: Pricing API for {region} ({service})", ctx.config.max_pages)
            for item in page_items(pages, "PriceList", "GetProducts"):
                rows.extend(parse_price_list_item(item, region, skipped, ctx.repeated_keys))
    except (BotoCoreError, ClientError) as err:
        raise SourceError(f"aws: Pricing API for {region} failed: {err}") from scrubbed(err)
    return rows
