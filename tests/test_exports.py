"""Exports with history: `gpuledger export -t offer_history` (all, or `--since`), the egress and
storage history and the quarantine, a manifest with column types, row counts and checksums, the
same instants in CSV and Parquet, and `price_observed_at` loaded as a TIMESTAMPTZ.

The warehouse: two days of one provider merged by the refresh's own loader (tests/builders.py).
Day 0 (2026-11-01 03:00 UTC): p5.48xlarge at 55.04 (the source stamps it 02:00 UTC, as text) and
g6.xlarge at 0.805, egress 0.09 per GB. Day 1: p5.48xlarge at 50.0 (stamped "2026-11-02T04:00:00+01:00"),
g6.xlarge gone, egress 0.07, and one offer whose stamp has no UTC offset (quarantined). So
offer_history holds three versions: p5 day 0 -> day 1, p5 day 1 -> open, g6 day 0 -> day 1.
"""

from __future__ import annotations

import csv
import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.warehouse.export import EXPORT_TABLES
from gpuledger.warehouse.schema import SCHEMA_VERSION
from gpuledger.warehouse.store import AnomalyPolicy, close_writer, load_outcome, open_writer
from tests.builders import scraped, T0, batch, egress, offer

UTC = timezone.utc
DAY1 = T0 + timedelta(days=1)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("exports") / "w.duckdb"
    con = open_writer(db)
    try:
        day0 = batch("aws", [offer("p5.48xlarge", 55.04, price_observed_at="2026-11-01T02:00:00Z"),
                             offer("g6.xlarge", 0.805, gpu="L4", count=1)],
                     egress("us-east-1", [(0, None, 0.09)]))
        day1 = batch("aws", [offer("p5.48xlarge", 50.0, price_observed_at="2026-11-02T04:00:00+01:00")],
                     egress("us-east-1", [(0, None, 0.07)]))
        assert not day1.offer("naive", {}, **offer("p4d.24xlarge", 21.96, gpu="A100-SXM4-80",
                                                     price_observed_at="2026-11-02T03:00:00"))
        for now, b in ((T0, day0), (DAY1, day1)):
            report = load_outcome(con, scraped("aws", "replay", now, now, batch=b), f"refresh-{now:%d}",
                                  AnomalyPolicy(min_row_ratio=0), now=now)
            assert report.ok, report.error
    finally:
        close_writer(con)
    return db


def export(warehouse: Path, out: Path, *args: str) -> tuple[Path, dict]:
    result = CliRunner().invoke(app, ["export", str(out), "--db", str(warehouse), *args])
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.strip().splitlines()[-1])
    return folder, json.loads((folder / "manifest.json").read_text())


def table_rows(warehouse: Path, table: str, where: str = "true") -> list[tuple]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return sorted(con.execute(f"select {', '.join(EXPORT_TABLES[table])} from {table} where {where}").fetchall(),
                      key=repr)
    finally:
        con.close()


def file_rows(path: Path, columns: list[dict]) -> list[tuple]:
    """A file's rows read back by DuckDB, CSV cells read as the manifest's types."""
    if path.suffix == ".csv":
        types = ", ".join(f"'{c['name']}': '{c['type']}'" for c in columns)
        query = f"select * from read_csv('{path}', header = true, allow_quoted_nulls = false, columns = {{{types}}})"
    else:
        query = f"select * from '{path}'"
    return sorted(duckdb.sql(query).fetchall(), key=repr)


def test_price_observed_at_is_loaded_as_a_timestamptz(warehouse: Path) -> None:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        assert con.execute("select data_type from information_schema.columns where table_name = 'offers' "
                           "and column_name = 'price_observed_at'").fetchall() == [("TIMESTAMP WITH TIME ZONE",)]
        assert con.execute("select price_observed_at from offer_history where instance_type = 'p5.48xlarge' "
                           "order by valid_from").fetchall() == [
            (datetime(2026, 11, 1, 2, tzinfo=UTC),), (datetime(2026, 11, 2, 3, tzinfo=UTC),)]
        assert con.execute("select source_ref, reason from quarantine").fetchall() == [
            ("naive", "contract: price_observed_at: Value error, price_observed_at has no UTC offset")]
    finally:
        con.close()


def test_export_offer_history_rows_equal_the_table(warehouse: Path, tmp_path: Path) -> None:
    folder, manifest = export(warehouse, tmp_path, "-t", "offer_history")
    assert list(manifest["tables"]) == ["offer_history"]
    info = manifest["tables"]["offer_history"]
    expected = table_rows(warehouse, "offer_history")
    assert len(expected) == info["rows"] == 3
    types = {c["name"]: c["type"] for c in info["columns"]}
    assert [c["name"] for c in info["columns"]] == list(EXPORT_TABLES["offer_history"])
    assert (types["valid_from"], types["price_observed_at"], types["price_per_hour"], types["gpu_count"]) == (
        "TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE", "DOUBLE", "DOUBLE")
    assert [f["name"] for f in info["files"]] == ["offer_history.csv", "offer_history.parquet"]
    for f in info["files"]:
        path = folder / f["name"]
        assert f["rows"] == 3 and f["bytes"] == path.stat().st_size
        assert f["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert file_rows(path, info["columns"]) == expected, f["name"]


def test_csv_and_parquet_hold_the_same_instants(warehouse: Path, tmp_path: Path) -> None:
    folder, _ = export(warehouse, tmp_path, "-t", "offer_history", "-t", "offers")
    for table in ("offer_history", "offers"):
        with (folder / f"{table}.csv").open() as f:
            text = sorted(csv.DictReader(f), key=lambda r: (r["instance_type"], r.get("valid_from", "")))
        parquet = sorted(pq.read_table(folder / f"{table}.parquet").to_pylist(),
                         key=lambda r: (r["instance_type"], r.get("valid_from") or datetime.min.replace(tzinfo=UTC)))
        stamps = [c for c in ("valid_from", "valid_to", "first_seen", "last_seen", "price_observed_at") if c in text[0]]
        for t, p in zip(text, parquet, strict=True):
            for c in stamps:
                assert (datetime.fromisoformat(t[c]) if t[c] else None) == p[c], (table, c)
                assert not t[c] or t[c].endswith("Z")
    with (folder / "offer_history.csv").open() as f:
        p5 = [r for r in csv.DictReader(f) if r["instance_type"] == "p5.48xlarge"]
    assert sorted(r["price_observed_at"] for r in p5) == ["2026-11-01T02:00:00.000000Z", "2026-11-02T03:00:00.000000Z"]


def test_since_keeps_the_versions_in_force_from_then_on(warehouse: Path, tmp_path: Path) -> None:
    _, manifest = export(warehouse, tmp_path / "a", "-t", "offer_history", "-t", "quarantine",
                         "-t", "offers", "--since", "2026-11-01T12:00")
    assert manifest["since"] == "2026-11-01T12:00:00+00:00"
    rows = {t: info["rows"] for t, info in manifest["tables"].items()}
    assert rows == {"offer_history": 3, "quarantine": 1, "offers": 1}
    folder, manifest = export(warehouse, tmp_path / "b", "-t", "offer_history", "-t", "quarantine",
                              "-t", "scrape_runs", "--since", "2026-11-02T03:00:00+00:00", "-f", "parquet")
    assert {t: info["rows"] for t, info in manifest["tables"].items()} == {
        "offer_history": 1, "quarantine": 1, "scrape_runs": 1}
    (only,) = pq.read_table(folder / "offer_history.parquet").to_pylist()
    assert (only["instance_type"], only["price_per_hour"], only["valid_to"]) == ("p5.48xlarge", 50.0, None)
    _, manifest = export(warehouse, tmp_path / "c", "-t", "quarantine", "--since", "2026-11-03")
    assert manifest["tables"]["quarantine"]["rows"] == 0


def test_egress_and_storage_history_and_quarantine_are_exportable(warehouse: Path, tmp_path: Path) -> None:
    folder, manifest = export(warehouse, tmp_path, "-t", "egress_price_history", "-t", "storage_price_history",
                              "-t", "quarantine", "-f", "parquet")
    assert {t: info["rows"] for t, info in manifest["tables"].items()} == {
        "egress_price_history": 2, "storage_price_history": 0, "quarantine": 1}
    egress_rows = pq.read_table(folder / "egress_price_history.parquet").to_pylist()
    assert sorted((r["usd_per_gb"], r["valid_to"] is None) for r in egress_rows) == [(0.07, True), (0.09, False)]
    for table in manifest["tables"]:
        assert file_rows(folder / f"{table}.parquet", []) == table_rows(warehouse, table)


def test_bad_since_and_unknown_table_are_one_line(warehouse: Path, tmp_path: Path) -> None:
    bad = CliRunner().invoke(app, ["export", str(tmp_path), "--db", str(warehouse), "--since", "yesterday"])
    assert bad.exit_code == 2 and "--since 'yesterday' is not a date" in bad.output
    unknown = CliRunner().invoke(app, ["export", str(tmp_path), "--db", str(warehouse), "-t", "nope"])
    assert unknown.exit_code == 2 and "unknown table 'nope'; did you mean " in unknown.output  # a usage error
    assert "Traceback" not in unknown.output



@pytest.mark.parametrize("formats", ["", " , "])
def test_a_format_list_with_no_format_writes_both_formats(warehouse: Path, tmp_path: Path, formats: str) -> None:
    # before: an IndexError traceback, and a hidden .<stamp>.partial folder left in OUT_DIR
    folder, manifest = export(warehouse, tmp_path, "-t", "providers", "-f", formats)
    assert manifest["formats"] == ["csv", "parquet"]
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "providers.csv", "providers.parquet"]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_an_interrupted_export_leaves_no_partial_folder(warehouse: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.warehouse import export as export_module

    def interrupted(path: Path) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(export_module, "sha256_file", interrupted)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        with pytest.raises(KeyboardInterrupt):
            export_module.export_snapshot(con, tmp_path / "out", tables=["offers"])
    finally:
        con.close()
    # before: .<stamp>.partial with offers.csv in it; then the empty out/ the export had made
    assert not (tmp_path / "out").exists()


def test_the_same_rows_stored_in_another_order_export_in_the_same_order(tmp_path: Path) -> None:
    dbs = [tmp_path / "a.duckdb", tmp_path / "b.duckdb"]
    rows = [offer(t, p, option=o) for t, p in (("p5.48xlarge", 55.04), ("p4d.24xlarge", 21.96))
            for o in ("on_demand", "spot")]
    tiers = egress("us-east-1", [(0, 10240, 0.09), (10240, None, 0.085)])
    for db, order in zip(dbs, (1, -1)):  # the second warehouse is loaded in the reverse order
        con = open_writer(db)
        try:
            loaded = batch("aws", rows[::order], tiers[::order])
            report = load_outcome(con, scraped("aws", "replay", T0, T0, batch=loaded), "refresh-1",
                                  AnomalyPolicy(min_row_ratio=0), now=T0)
            assert report.ok, report.error
        finally:
            close_writer(con)
    folders = [export(db, tmp_path / f"out-{db.stem}", "-t", "offers", "-t", "egress_prices")[0] for db in dbs]


    def in_order(path: Path) -> list[dict]:  # the rows as the file has them, but for the random run_id
        rows = list(csv.DictReader(path.open())) if path.suffix == ".csv" else pq.read_table(path).to_pylist()
        return [{k: v for k, v in r.items() if k != "run_id"} for r in rows]

    # before: rows were ordered by provider, region and zone (egress: provider, region, destination) alone,
    # so the files, and their sha256 in the manifest, followed the order the rows happened to be stored in
    for name in ("offers.csv", "offers.parquet", "egress_prices.csv", "egress_prices.parquet"):
        assert in_order(folders[0] / name) == in_order(folders[1] / name), name
    assert [(r["instance_type"], r["purchase_option"]) for r in in_order(folders[1] / "offers.csv")] == [
        ("p4d.24xlarge", "on_demand"), ("p4d.24xlarge", "spot"), ("p5.48xlarge", "on_demand"), ("p5.48xlarge", "spot")]
    assert [r["tier_start_gb"] for r in in_order(folders[1] / "egress_prices.parquet")] == [0, 10240]


def test_a_warehouse_older_than_this_gpuledger_is_named_so(tmp_path: Path) -> None:
    from tests.test_schema import v1_warehouse

    v1_warehouse(tmp_path / "v1.duckdb")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "out"), "--db", str(tmp_path / "v1.duckdb")])
    # before: "... nothing written: Binder Error: Referenced column "operated_by" not found in FROM clause! ..."
    assert result.exit_code == 1 and result.output.replace("\n", " ").strip() == (
        f"error: export to {tmp_path / 'out'} failed, nothing written: the warehouse is at schema version 1, "
        "this gpuledger reads version 13: the next `gpuledger refresh` upgrades it in place")
    assert not (tmp_path / "out").exists()  # before: the empty out/ the export had made


def test_a_warehouse_newer_than_this_gpuledger_is_refused_not_cut(warehouse: Path, tmp_path: Path) -> None:
    db = tmp_path / "newer.duckdb"  # written by a later gpuledger: its next version gave offers a column
    db.write_bytes(warehouse.read_bytes())
    newer = SCHEMA_VERSION + 1
    with duckdb.connect(str(db)) as con:
        con.execute(f"insert into schema_migrations values ({newer}, 'offers: carbon_g_per_hour', now()); "
                    "alter table offers add column carbon_g_per_hour DOUBLE; update offers set carbon_g_per_hour = 1.5")
    result = CliRunner().invoke(app, ["export", str(tmp_path / "out"), "--db", str(db), "-t", "offers"])
    # before: exit 0, offers.csv and .parquet without carbon_g_per_hour, a manifest saying the older version
    assert (result.exit_code, result.output.replace("\n", " ").strip()) == (1, (
        f"error: the warehouse is at schema version {newer}, newer than this gpuledger's {SCHEMA_VERSION}: upgrade "
        "gpuledger to export it (nothing written)"))
    assert not (tmp_path / "out").exists()

# -- no path becomes SQL ------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "O'Brien snaps",
    "quote ' semicolon ; and\na newline",
    # Closes the path's literal early: before the fix, DuckDB wrote the offers to the file "x" beside
    # the folder, then failed on the injected COPY, and the command said "nothing written".
    "x' (format csv); copy (select 42 as pwned) to 'PWNED.csv",
])
def test_export_to_a_folder_with_quotes_semicolons_and_newlines_writes_exactly_its_files(
        warehouse: Path, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # where an injected relative COPY would land
    before = warehouse.read_bytes()
    out = tmp_path / name
    result = CliRunner().invoke(app, ["export", str(out), "--db", str(warehouse), "-t", "offers"])
    assert result.exit_code == 0, result.output
    folder = Path(result.stdout.strip().splitlines()[-1]) if "\n" not in name else next(out.iterdir())
    everything = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert everything == sorted([name, str(folder.relative_to(tmp_path)),
                                 *(str((folder / f).relative_to(tmp_path))
                                   for f in ("manifest.json", "offers.csv", "offers.parquet"))])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tables"]["offers"]["rows"] == 1
    assert warehouse.read_bytes() == before


# -- any CSV reader infers the manifest's types ---------------------------------------------------

# Type families: what each reader's inferred type must be for a column the manifest types so.
FAMILIES = {"BOOLEAN": "bool", "DOUBLE": "float", "INTEGER": "int", "BIGINT": "int"}


def family(reader_type: str) -> str:
    t = reader_type.lower()
    return ("bool" if "bool" in t else "float" if "float" in t or t == "double" else
            "int" if "int" in t else "other")


@pytest.fixture(scope="module")
def replayed_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The offers of AWS (21,706: more than one of pandas' read blocks), Azure, Vast.ai and Lambda,
    replayed with their real clients, exported as CSV: columns that are empty for the first
    thousands of rows (reliability, available) and booleans with NULLs among true and false."""
    from tests.builders import replayed_warehouse

    tmp = tmp_path_factory.mktemp("typed")
    db = tmp / "w.duckdb"
    replayed_warehouse(db, ["aws", "azure", "lambda", "vastai"])
    result = CliRunner().invoke(app, ["export", str(tmp / "out"), "--db", str(db), "-f", "csv"])
    assert result.exit_code == 0, result.output
    return Path(result.stdout.strip().splitlines()[-1])


def typed_columns(folder: Path, table: str) -> dict[str, str]:
    manifest = json.loads((folder / "manifest.json").read_text())
    return {c["name"]: FAMILIES[c["type"]] for c in manifest["tables"][table]["columns"] if c["type"] in FAMILIES}


@pytest.mark.parametrize("table", ["offers", "scrape_runs", "egress_prices", "storage_prices"])
def test_pandas_polars_and_duckdb_infer_the_manifests_types_without_a_warning(replayed_export: Path,
                                                                             table: str) -> None:
    import warnings

    import pandas as pd
    import polars as pl

    path = replayed_export / f"{table}.csv"
    expected = typed_columns(replayed_export, table)
    assert table != "offers" or {"available", "reliability", "price_per_hour", "term_months"} <= set(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a DtypeWarning (mixed types in a column) fails the test
        frame = pd.read_csv(path)
        polars_types = pl.read_csv(path).schema
    duck_types = dict(duckdb.sql(f"select column_name, column_type from (describe select * from "
                                 f"read_csv('{path}'))").fetchall())
    for column, want in expected.items():
        assert family(str(polars_types[column])) == want, (column, polars_types[column])
        assert family(duck_types[column]) == want, (column, duck_types[column])
        values = frame[column].dropna()
        if want == "bool":  # pandas has no nullable boolean by inference: bools, with NaN for NULL
            assert all(isinstance(v, (bool, np_bool())) for v in values), (column, frame[column].dtype)
        else:  # an integer column with NULLs is float64 in pandas
            assert frame[column].dtype.kind in ("f" if want == "float" else "if"), (column, frame[column].dtype)
    assert len(frame) == json.loads((replayed_export / "manifest.json").read_text())["tables"][table]["rows"]


def np_bool() -> type:
    import numpy as np

    return np.bool_
