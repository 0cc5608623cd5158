"""Fast correctness checks of the benchmark generators and of the optimized code paths.

No timings here (those live in `python -m bench`): the synthetic data must have the real
format and mix, the AWS offer-file parse (DuckDB's CSV reader) must return exactly what the
straightforward line-based one returns, and the set-based merge must leave a warehouse that
passes its integrity checks.
"""

from __future__ import annotations

import csv
import gzip
import io
import threading
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gpuledger.adapters.aws import pricelist
from gpuledger.adapters.base import SchemaDriftError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.builders import scraped
from bench import awsgen
from bench.reference_aws import parse_offer_csv_lines, parse_prefilter_dictreader, skip_counts
from tests.conftest import replay_context

SAMPLE = Path(__file__).parent / "fixtures" / "aws" / "AmazonEC2_index_csv_sample_20250912.csv"
BULK = sorted((BUNDLED_RECORDINGS / "aws" / "bulk").glob("*/*/index.csv.gz"))


def chunked(data: bytes, size: int):
    return (data[i:i + size] for i in range(0, len(data), size))


@pytest.fixture(scope="module")
def synthetic() -> bytes:
    return b"".join(chunk.encode() for chunk in awsgen.generate(3_000_000, seed=3))


def test_generator_has_the_real_header_metadata_and_quoting(synthetic: bytes) -> None:
    lines = synthetic.decode().split("\n")
    real = SAMPLE.read_text().split("\n")
    assert [next(csv.reader([ln]))[0] for ln in lines[:5]] == [next(csv.reader([ln]))[0] for ln in real[:5]]
    assert lines[5] == real[5]  # the 91-column header, byte for byte
    rows = list(csv.reader(lines[6:-1]))
    assert lines[-1] == "" and len(rows) > 3000
    assert {len(r) for r in rows} == {91}
    for ln, row in zip(lines[6:], rows):  # every non-empty field quoted, empty ones bare
        assert ",".join('"' + f.replace('"', '""') + '"' if f else "" for f in row) == ln


def test_generator_writes_rows_in_the_real_files_order(synthetic: bytes) -> None:
    # The real file is sorted by SKU, then OfferTermCode (the sample's first 21 rows are one SKU,
    # its OnDemand row 12th among them): each product's rows are adjacent.
    rows = list(csv.reader(synthetic.decode().split("\n")[6:-1]))
    skus = [r[0] for r in rows]
    runs = [sku for i, sku in enumerate(skus) if i == 0 or skus[i - 1] != sku]
    assert len(runs) == len(set(skus)) < len(skus) / 3  # one block per SKU, many rows each
    for sku in list(set(skus))[:200]:
        block = [r[1] for r in rows if r[0] == sku]
        assert block == sorted(block)
    real = list(csv.reader(SAMPLE.read_text().split("\n")[6:-1]))
    assert [r[0] for r in real[:21]] == [real[0][0]] * 21 and real[11][3] == "OnDemand"


def test_generator_mix_is_realistic(synthetic: bytes) -> None:
    lines = synthetic.decode().split("\n")
    head = next(csv.reader([lines[5]]))
    rows = [dict(zip(head, r)) for r in csv.reader(lines[6:-1])]
    assert {r["TermType"] for r in rows} == {"OnDemand", "Reserved"}
    compute = [r for r in rows if r["Product Family"].startswith("Compute Instance")]
    # ~18% OnDemand (a small file has proportionally more of the per-region EBS/IP rows, all OnDemand)
    assert 0.15 < sum(r["TermType"] == "OnDemand" for r in compute) / len(compute) < 0.21
    assert len({r["Operating System"] for r in compute}) >= 4
    assert {r["Tenancy"] for r in compute} == {"Shared", "Dedicated", "Host"}
    assert {r["CapacityStatus"] for r in compute} == {"Used", "UnusedCapacityReservation",
                                                       "AllocatedCapacityReservation"}
    assert len({r["Region Code"] for r in rows}) >= 30
    gpu_types = {r["Instance Type"] for r in compute if r["GPU"]}
    assert 0 < len(gpu_types) <= 90
    assert len(awsgen.instance_types()) == 1000
    assert sum(1 for t in awsgen.instance_types() if t["gpu"]) in range(70, 91)


@pytest.mark.parametrize("path", BULK, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_the_parse_equals_the_straightforward_one_on_the_recording(path: Path) -> None:
    data = gzip.decompress(path.read_bytes())
    region = path.parent.name
    want_meta: dict[str, str] = {}
    want = list(parse_offer_csv_lines(data.decode().splitlines(), region, want_meta))
    assert want  # every bundled file has rows we keep
    for size in (97, len(data)):
        meta: dict[str, str] = {}
        assert pricelist.parse_offer_chunks(chunked(data, size), region, meta) == want
        assert meta == want_meta


def test_the_parse_equals_the_baselines_on_a_generated_file(synthetic: bytes) -> None:
    want = list(parse_offer_csv_lines(synthetic.decode().splitlines(), "us-east-1"))
    got = list(pricelist.parse_offer_chunks(chunked(synthetic, 1 << 16), "us-east-1"))
    assert got == want
    assert list(parse_prefilter_dictreader(io.StringIO(synthetic.decode(), newline=""), "us-east-1")) == want
    kinds = Counter(r.kind for r in got)
    assert kinds["instance"] > 0 and kinds["storage"] > 0
    assert all(r.currency == "USD" and r.unit for r in got)


def test_rows_of_one_sku_scattered_through_the_file_give_what_the_reference_gives(synthetic: bytes) -> None:
    # The rows out of the file's SKU order: the kept rows keep their order, the counts the reference's.
    import random

    lines = synthetic.split(b"\n")
    rows = lines[6:-1]
    random.Random(5).shuffle(rows)
    shuffled = b"\n".join(lines[:6] + rows) + b"\n"
    want = list(parse_offer_csv_lines(shuffled.decode().splitlines(), "us-east-1"))
    assert sum(1 for r in want if r.kind == "reserved") > 10
    for size in (4093, len(shuffled)):
        skipped: Counter[str] = Counter()
        assert list(pricelist.parse_offer_chunks(chunked(shuffled, size), "us-east-1", skipped=skipped)) == want
        assert skipped == skip_counts(shuffled.decode().splitlines(), "us-east-1")


def test_skipped_counts_by_reason_equal_the_csv_module_parse_of_every_row(synthetic: bytes) -> None:
    want = skip_counts(synthetic.decode().splitlines(), "us-east-1")
    assert want[pricelist.SKIP_VARIANT] > 0 and want[pricelist.SKIP_CPU_ONLY] > 0 and want[pricelist.SKIP_TERM] > 0
    for size in (4093, len(synthetic)):
        skipped: Counter[str] = Counter()
        list(pricelist.parse_offer_chunks(chunked(synthetic, size), "us-east-1", skipped=skipped))
        assert skipped == want
    for path in [p for p in BULK if p.parent.parent.name == "AmazonEC2"][:1]:  # a real recording too
        data = gzip.decompress(path.read_bytes())
        skipped = Counter()
        list(pricelist.parse_offer_chunks(chunked(data, 65536), path.parent.name, skipped=skipped))
        assert skipped == skip_counts(data.decode().splitlines(), path.parent.name)


def test_a_crlf_file_gives_the_same_rows(synthetic: bytes) -> None:
    want = list(pricelist.parse_offer_chunks([synthetic], "us-east-1"))
    crlf = synthetic.replace(b"\n", b"\r\n")
    assert list(pricelist.parse_offer_chunks(chunked(crlf, 4096), "us-east-1")) == want


def test_malformed_and_truncated_files_are_schema_drift(synthetic: bytes) -> None:
    lines = synthetic.split(b"\n")
    kept = {r.sku for r in pricelist.parse_offer_chunks([synthetic], "x") if r.kind == "instance"}
    od = next(i for i, ln in enumerate(lines) if i > 5 and ln[1:17].decode() in kept)
    rsv = next(i for i, ln in enumerate(lines) if i > 5 and b'"Reserved"' in ln.split(b",", 4)[3]
               and b',"GPU instance",' not in ln)

    def both(data: bytes) -> tuple[object, object]:
        out = []
        for fn in (lambda: list(parse_offer_csv_lines(data.decode().splitlines(), "x")),
                   lambda: pricelist.parse_offer_chunks(chunked(data, 1 << 16), "x")):
            try:
                out.append(fn())
            except SchemaDriftError as err:
                out.append(f"SchemaDriftError: {err}")
        return out[0], out[1]

    extra = list(lines)
    extra[od] = extra[od] + b',"surplus"'  # a kept OnDemand row with a 92nd field
    old, new = both(b"\n".join(extra))
    assert "a row has 92 fields, the header 91" in str(old)
    assert str(new).startswith(f"SchemaDriftError: aws: offer file for x is not valid CSV (Expected 91 columns, got "
                               f"92: {lines[od][:40].decode()}")
    bad_reserved = list(lines)
    bad_reserved[rsv] = bad_reserved[rsv] + b',"surplus"'  # a CPU-only Reserved row: never a price
    old, new = both(b"\n".join(bad_reserved))
    # the line-based parser never read it; the CSV reader reads every row and trusts no malformed file
    assert isinstance(old, list) and f"Expected 91 columns, got 92: {lines[rsv][:40].decode()}" in str(new)
    cut = synthetic[: len(synthetic) // 2]
    cut = cut[: cut.rfind(b"\n") + 40]  # cut mid-row
    old, new = both(cut)
    assert "partial row" in str(old) and "not valid CSV" in str(new)
    # a kept row whose price is not a number
    head = next(csv.reader([lines[5].decode()]))
    fields = next(csv.reader([lines[od].decode()]))
    fields[head.index("PricePerUnit")] = "n/a"
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(fields)
    priced = list(lines)
    priced[od] = buf.getvalue().encode()
    old, new = both(b"\n".join(priced))
    assert old == new and "no numeric PricePerUnit" in str(new)


def test_fetch_prices_bulk_streams_the_same_rows_as_the_reference(replay) -> None:
    server = replay("aws")
    ctx = replay_context(server, "aws")
    index = {p.parent.name: p for p in BULK if p.parent.parent.name == "AmazonEC2"}
    dt = {p.parent.name: p for p in BULK if p.parent.parent.name == "AWSDataTransfer"}
    ec2_paths = pricelist.parse_region_index(__import__("json").loads(
        (BUNDLED_RECORDINGS / "aws" / "bulk" / "AmazonEC2" / "region_index.json").read_text()), "AmazonEC2")
    dt_paths = pricelist.parse_region_index(__import__("json").loads(
        (BUNDLED_RECORDINGS / "aws" / "bulk" / "AWSDataTransfer" / "region_index.json").read_text()), "AWSDataTransfer")
    with ctx.http_client() as client:
        rows, publication = pricelist.fetch_prices_bulk(ctx, client, "us-east-1", ec2_paths, dt_paths)
    want = list(parse_offer_csv_lines(gzip.decompress(index["us-east-1"].read_bytes()).decode().splitlines(),
                                      "us-east-1"))
    want += [r for r in parse_offer_csv_lines(gzip.decompress(dt["us-east-1"].read_bytes()).decode().splitlines(),
                                              "us-east-1") if r.kind == "egress" and r.region == "us-east-1"]
    assert rows == want
    assert publication == "2026-11-25T17:30:12Z"
    assert ctx.requests_made == 2


def test_year_warehouse_and_set_based_merge_keep_the_invariants(tmp_path: Path) -> None:
    from bench.warehouse_gen import PROVIDERS, build, current_offers, next_night
    from gpuledger.warehouse.check import run_checks
    from gpuledger.warehouse.records import Batch
    from gpuledger.warehouse.store import AnomalyPolicy, load_outcome, open_writer

    info = build(tmp_path / "w.duckdb", offers=1600, nights=12)
    assert info["offers"] == 1600 and 1600 + 11 * 1600 * 0.2 < info["offer_history"] < 1600 + 11 * 1600 * 0.34
    con = open_writer(tmp_path / "w.duckdb")
    try:
        assert [c.name for c in run_checks(con) if not c.ok] == []
        now = datetime.now(timezone.utc)  # after the generated year, which ends when build() ran
        before = {p: {o.key: o for o in current_offers(con, p)} for p in PROVIDERS}
        history_before = con.execute("select count(*) from offer_history").fetchall()[0][0]
        for p in PROVIDERS:
            b = Batch(p)
            b.offers = next_night(list(before[p].values()), 12)
            new_keys = {o.key for o in b.offers}
            changed = sum(1 for o in b.offers if o.key in before[p] and o != before[p][o.key])
            report = load_outcome(con, scraped(p, "live", now, now, batch=b), "r", AnomalyPolicy(), now)
            assert report.ok, report.error
            assert report.new == len(new_keys - before[p].keys())
            assert report.closed == len(before[p].keys() - new_keys)
            assert report.changed == changed
            history_before += report.new + report.changed
            assert {o.key: o for o in current_offers(con, p)} == {o.key: o for o in b.offers}
        assert con.execute("select count(*) from offer_history").fetchall()[0][0] == history_before
        assert [c.name for c in run_checks(con) if not c.ok] == []
        # first_seen kept for rows seen before, last_seen and run restamped on all
        assert con.execute("select count(*) from offers where last_seen <> ?", [now]).fetchall()[0][0] == 0
        assert con.execute("select count(distinct first_seen) from offers").fetchall()[0][0] == 2
    finally:
        con.close()


def test_every_benchmark_module_can_be_run() -> None:
    """`python -m bench` calls each module's run(quick=..., ...): a module that lost it crashes the run."""
    import importlib
    import inspect

    from bench.__main__ import BENCHES

    for number, (name, module) in BENCHES.items():
        run = getattr(importlib.import_module(module), "run", None)
        assert callable(run), f"benchmark {number} ({name}): {module} has no run()"
        assert "quick" in inspect.signature(run).parameters, module
