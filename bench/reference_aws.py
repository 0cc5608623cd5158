"""Reference AWS bulk-CSV parsers the adapter's (adapters/aws/pricelist.py) is measured and checked against.

- `parse_offer_csv_lines`: gpuledger's first line-based parser (adapters/aws.py at commit
  41a1b25): text lines, a `split(",", 4)` TermType prefilter, then `csv.reader`. The smoke test
  checks the adapter's parse returns exactly its PriceRows.
- `parse_prefilter_dictreader`: the straightforward approach of the best-known open GPU
  catalog (gpuhunt reads the file with `csv.DictReader` and tests each row dict), with a
  substring prefilter in front (skip lines holding a `"Reserved"` field, but for GPU instance families) — the issue's
  "substring prefilter + csv.DictReader" baseline. Same selection rules, same PriceRows.
- `parse_dictreader_all`: plain `csv.DictReader` over every row.
- `skip_counts`: the rows not kept, by reason, from the csv module's parse of every row: a
  Reserved row the TermType test drops is SKIP_TERM, every other row gets `_csv_row_to_price`'s
  reason. The smoke test checks the adapter's parse counts exactly these.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import IO, Iterable, Iterator

from gpuledger.adapters.aws.pricelist import CSV_COLUMNS, SKIP_TERM, PriceRow, price_row
from gpuledger.adapters.base import SchemaDriftError


def _is_on_demand_line(line: str) -> bool:
    """OnDemand rows, and the Reserved rows of GPU instance families (their commitment terms)."""
    parts = line.split(",", 4)
    return len(parts) > 4 and (parts[3] == '"OnDemand"' or (parts[3] == '"Reserved"' and ',"GPU instance",' in line))


def parse_offer_csv_lines(lines: Iterable[str], region: str, meta: dict[str, str] | None = None) -> Iterator[PriceRow]:
    it = iter(lines)
    meta = {} if meta is None else meta
    header: list[str] | None = None
    for line in it:
        fields = next(csv.reader([line]))
        if fields and fields[0] == "SKU":
            header = fields
            break
        if len(fields) >= 2:
            meta[fields[0]] = fields[1]
    if header is None:
        raise SchemaDriftError(f"aws: offer file for {region} has no header row (metadata: {sorted(meta)})")
    missing = [c for c in ("SKU", "TermType", "PricePerUnit", "Product Family") if c not in header]
    if missing:
        raise SchemaDriftError(f"aws: offer file for {region} lacks columns {missing}")
    positions = {name: header.index(col) for col, name in CSV_COLUMNS.items() if col in header}
    width = len(header)
    last = [""]

    def on_demand_lines() -> Iterator[str]:
        for ln in it:
            last[0] = ln
            if _is_on_demand_line(ln):
                yield ln

    for fields in csv.reader(on_demand_lines()):
        if len(fields) != width:
            raise SchemaDriftError(
                f"aws: offer file for {region}: a row has {len(fields)} fields, the header {width} "
                f"(truncated or malformed file; row starts {fields[:2]!r})")
        row = {name: fields[i] for name, i in positions.items()}
        price = price_row(row, region)
        if price is not None:
            yield price
    if last[0] and len(next(csv.reader([last[0]]))) != width:
        raise SchemaDriftError(f"aws: offer file for {region} ends in a partial row (truncated download?)")


def skip_counts(lines: Iterable[str], region: str) -> Counter[str]:
    """lines: the offer file's text lines, metadata and header included."""
    it = iter(lines)
    for line in it:
        if next(csv.reader([line]), [""])[0] == "SKU":
            header = next(csv.reader([line]))
            break
    positions = {name: header.index(col) for col, name in CSV_COLUMNS.items() if col in header}
    skipped: Counter[str] = Counter()
    for line in it:
        if not line:
            continue
        if not _is_on_demand_line(line):
            skipped[SKIP_TERM] += 1
            continue
        fields = next(csv.reader([line]))
        price_row({name: fields[i] for name, i in positions.items()}, region, skipped)
    return skipped


def _skip_metadata(f: IO[str]) -> None:
    for _ in range(5):
        f.readline()


def _rows_from_dicts(reader: Iterable[dict[str, str]], region: str) -> Iterator[PriceRow]:
    names = [(col, name) for col, name in CSV_COLUMNS.items()]
    for d in reader:
        row = {name: d[col] for col, name in names if col in d}
        price = price_row(row, region)
        if price is not None:
            yield price


def parse_prefilter_dictreader(f: IO[str], region: str) -> Iterator[PriceRow]:
    """f: the offer file opened in text mode with newline=''."""
    _skip_metadata(f)
    header = f.readline()
    lines = (ln for ln in f if ',"Reserved",' not in ln or ',"GPU instance",' in ln)
    reader = csv.DictReader(_chain(header, lines))
    return _rows_from_dicts(reader, region)


def parse_dictreader_all(f: IO[str], region: str) -> Iterator[PriceRow]:
    _skip_metadata(f)
    return _rows_from_dicts(csv.DictReader(f), region)


def _chain(first: str, rest: Iterable[str]) -> Iterator[str]:
    yield first
    yield from rest
