"""The schema is defined once (warehouse/schema.py from the record models), and a warehouse made
by an older gpuledger upgrades in place to exactly what a new one is."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.export import EXPORT_TABLES
from gpuledger.warehouse.records import Batch, EgressPrice, Offer, ProviderFacts, StoragePrice
from gpuledger.warehouse.schema import (
    EGRESS, INITIAL, OFFERS, SCHEMA_VERSION, STORAGE, TABLES, UPGRADES, column_names, create_sql, current_version,
    migrate,
)
from gpuledger.warehouse.store import close_writer, load_outcome, open_writer
from tests.builders import scraped

VERSIONS = [INITIAL[0], *(version for version, _, _ in UPGRADES)]  # every version, in order
V1_SQL = Path(__file__).parent / "fixtures" / "warehouse_v1.sql"
T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)


def layout(con: duckdb.DuckDBPyConnection) -> tuple[list[tuple], list[tuple]]:
    """Every table's columns (name, type, nullability, default) and constraints, in order."""
    columns = con.execute(
        "select table_name, column_index, column_name, data_type, is_nullable, column_default "
        "from duckdb_columns() where database_name = current_database() and schema_name = 'main' "
        "and not internal and table_name <> 'schema_migrations' "
        "order by table_name, column_index").fetchall()
    constraints = con.execute(
        "select table_name, constraint_type, expression, constraint_column_names::varchar from duckdb_constraints() "
        "where database_name = current_database() and schema_name = 'main' and table_name <> 'schema_migrations' "
        "order by all").fetchall()
    return columns, constraints


def v1_warehouse(path: Path) -> None:
    """A warehouse as the release before schema version 2 left it: the frozen v1 DDL, a day of
    offers and their history, and the recommender macros that release stored in the file."""
    con = duckdb.connect(str(path))
    con.execute("create table schema_migrations (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL)")
    con.execute(V1_SQL.read_text())
    con.execute("insert into schema_migrations values (1, 'initial schema', ?)", [T0])
    values = ("'aws', 'us-east-1', '', 'p5.48xlarge', 'on_demand', 'H100-SXM', true, 'H100', 'NVIDIA', 8, 80, 80, "
              "640, 192, 2048, 7600, 'NVSwitch', 3200, 'EFA', 55.04, 6.88, 'USD', 55.04, null, 1, 60, true, null, "
              "null, null, null, null, '{}', 'h1'")
    con.execute(f"insert into offers values ({values}, ?, ?, 'run-1')", [T0, T0])
    con.execute(f"insert into offer_history values ({values}, ?, null, 'run-1', null)", [T0])
    con.execute("insert into scrape_runs (run_id, refresh_id, provider, mode, started_at, finished_at, state, "
                "rows_parsed, rows_loaded) values ('run-1', 'refresh-1', 'aws', 'replay', ?, ?, 'ok', 1, 1)", [T0, T0])
    con.execute("create macro billed_seconds(d, g, m) as d")
    con.execute("create macro gpuledger_macros_version() as 'older'")
    con.execute("create macro fits(vram_gb, gpus := 1) as table select * from offers")
    con.execute("create macro offer_facts() as table select * from offers")
    con.close()


def test_the_tables_are_the_record_models() -> None:
    assert OFFERS.columns == tuple(Offer.model_fields)[:20] + ("price_per_gpu_hour",) + tuple(Offer.model_fields)[20:]
    assert OFFERS.columns[19:22] == ("price_per_hour", "price_per_gpu_hour", "source_currency")
    assert EGRESS.columns == tuple(EgressPrice.model_fields)
    assert STORAGE.columns == tuple(StoragePrice.model_fields)
    assert column_names("providers") == ("provider", *ProviderFacts.model_fields, "updated_at")
    assert OFFERS.key == ("provider", "region", "zone", "instance_type", "purchase_option")
    assert OFFERS.tracked == tuple(c for c in OFFERS.attrs if c != "price_observed_at")
    ddl = {c.name: c.ddl for c in TABLES["offers"]}
    assert ddl["zone"] == "zone VARCHAR NOT NULL DEFAULT ''"  # a text field's default
    assert ddl["gpu_variant_exact"] == "gpu_variant_exact BOOLEAN NOT NULL"
    assert ddl["gpu_memory_gb"] == "gpu_memory_gb DOUBLE"  # float | None
    assert ddl["available_count"] == "available_count INTEGER"
    assert ddl["price_per_gpu_hour"] == "price_per_gpu_hour DOUBLE NOT NULL CHECK (price_per_gpu_hour > 0)"
    assert ddl["purchase_option"] == "purchase_option VARCHAR NOT NULL"  # a str enum
    providers = {c.name: c.ddl for c in TABLES["providers"]}
    assert providers["source_urls"] == "source_urls VARCHAR"  # a JSON array
    assert providers["kind"] == "kind VARCHAR NOT NULL"


def test_export_columns_are_the_tables_without_the_row_fingerprint() -> None:
    assert EXPORT_TABLES["offers"] == OFFERS.columns + ("first_seen", "last_seen", "run_id")
    assert EXPORT_TABLES["providers"] == column_names("providers")
    assert EXPORT_TABLES["scrape_runs"][:3] == ("run_id", "refresh_id", "provider") and \
        len(EXPORT_TABLES["scrape_runs"]) == 21 and EXPORT_TABLES["scrape_runs"][-2:] == ("degraded", "bytes_fetched")


def test_a_new_warehouse_has_the_layout_of_version_1_plus_the_upgrades() -> None:
    new = duckdb.connect()
    assert migrate(new) == VERSIONS
    old = duckdb.connect()
    old.execute(V1_SQL.read_text())
    v1_offers = [c for c in layout(old)[0] if c[0] == "offers"]
    old.execute("create table schema_migrations (version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL)")
    old.execute("insert into schema_migrations values (1, 'initial schema', now())")
    assert migrate(old) == VERSIONS[1:]
    assert layout(new) == layout(old)
    # version 3 put operated_by after provider_data in both offer tables, and changed nothing else
    new_offers = [c for c in layout(new)[0] if c[0] == "offers"]
    # version 6 put the commitment terms after it, version 7 the interruption-risk scale, version 10
    # the mark of memory taken from the canon
    risk = ["interruption_risk_level", "interruption_rate_max_pct", "interruption_risk_source"]
    assert [c[2] for c in new_offers] == [c[2] for c in v1_offers[:33]] + ["operated_by"] + \
        ["term_months", "payment_option"] + risk + ["gpu_memory_from_canon"] + [c[2] for c in v1_offers[33:]]
    assert ("offers", 34, "operated_by", "VARCHAR", False, None) in layout(new)[0]
    assert ("offer_history", 34, "operated_by", "VARCHAR", False, None) in layout(new)[0]
    checks = [c for c in layout(new)[1] if c[0] == "offers" and c[1] in ("CHECK", "PRIMARY KEY")]
    assert checks == [("offers", "CHECK", "((price_per_hour > 0) AND isfinite(price_per_hour))",
                       "[price_per_hour, price_per_hour]"),
                      ("offers", "CHECK", "(gpu_count > 0)", "[gpu_count]"),
                      ("offers", "CHECK", "(price_per_gpu_hour > 0)", "[price_per_gpu_hour]")]
    assert ("providers", "PRIMARY KEY", None, "[provider]") in layout(new)[1]
    assert ("offers", 37, "interruption_risk_level", "VARCHAR", False, "'unknown'") in layout(new)[0]
    assert ("offer_history", 39, "interruption_risk_source", "VARCHAR", False, "'unpublished'") in layout(new)[0]
    # offers 40 + 4, history 40 + 5; egress 9 + 4 / + 5; storage 7 + 4 / + 5; runs, quarantine, providers, GPUs;
    # spot price history, capacity blocks; the views spot_price_intervals, spot_price_stats, offer_freshness;
    # availability history and the view availability_obtainable; fetch validators
    assert len(layout(new)[0]) == 44 + 45 + 13 + 14 + 11 + 12 + 21 + 7 + 16 + 18 + 6 + 10 + 20 + 9 + 21 + 10 + 10 + 8 \
        + 5 == 300
    plain = duckdb.connect()
    plain.execute(create_sql())
    assert layout(plain) == layout(new)


def test_a_version_1_warehouse_upgrades_in_place_keeping_history(tmp_path: Path) -> None:
    db = tmp_path / "v1.duckdb"
    v1_warehouse(db)
    con = open_writer(db)
    try:
        assert current_version(con) == SCHEMA_VERSION == VERSIONS[-1]
        assert [v for v, *_ in con.execute("select * from schema_migrations order by 1").fetchall()] == VERSIONS
        # the macros the old release stored are gone (the recommender installs its own); those the
        # schema defines (versions 5 and 11) are there
        assert con.execute("select function_name from duckdb_functions() where not internal and "
                           "function_type in ('macro', 'table_macro') order by 1").fetchall() == \
            [("availability_obtainable_at",), ("spot_price_stats_at",)]
        assert con.execute("select instance_type, price_per_hour, valid_to from offer_history").fetchall() == \
            [("p5.48xlarge", 55.04, None)]
        assert con.execute("select price_per_gpu_hour from offers").fetchall() == [(6.88,)]
        # the rows made before operated_by ran on their provider's own machines, history included
        assert con.execute("select operated_by, content_hash from offers").fetchall() == [("aws", "h1")]
        assert con.execute("select operated_by, content_hash from offer_history").fetchall() == [("aws", "h1")]
        # and were bought without a commitment: no term, no payment option, the checks still pass
        assert con.execute("select term_months, payment_option, run_id from offers union all "
                           "select term_months, payment_option, run_id from offer_history").fetchall() == \
            [(None, None, "run-1"), (None, None, "run-1")]
        # an on-demand row is not interruptible (version 7)
        assert con.execute("select interruption_risk_level, interruption_rate_max_pct, interruption_risk_source "
                           "from offers").fetchall() == [("none", None, "not_interruptible")]
        assert all(r.ok for r in run_checks(con)), [r for r in run_checks(con) if not r.ok]
        fresh = duckdb.connect()
        migrate(fresh)
        assert layout(con) == layout(fresh)
    finally:
        close_writer(con)
    con = open_writer(db)  # once only
    assert con.execute("select count(*) from schema_migrations").fetchall() == [(len(VERSIONS),)]
    close_writer(con)


def test_rows_upgraded_to_version_3_are_unchanged_when_their_source_sends_them_again(tmp_path: Path) -> None:
    """operated_by filled with the provider by the upgrade is what the record now says by default,
    so the first load after the upgrade opens no new version of an unchanged offer."""
    db = tmp_path / "v1.duckdb"
    v1_warehouse(db)
    batch = Batch("aws")
    assert batch.offer("p5", {}, region="us-east-1", instance_type="p5.48xlarge", purchase_option="on_demand",
                       gpu_model="H100-SXM", gpu_name_reported="H100", gpu_vendor="NVIDIA", gpu_count=8,
                       gpu_memory_gb=80, gpu_memory_gb_nominal=80, total_gpu_memory_gb=640, vcpus=192, ram_gb=2048,
                       local_disk_gb=7600, interconnect="NVSwitch", network_gbps=3200, multinode_fabric="EFA",
                       price_per_hour=55.04, source_currency="USD", source_price_per_hour=55.04,
                       billing_granularity_s=1, minimum_charge_s=60, available=True)
    assert batch.offers[0].operated_by == "aws"
    con = open_writer(db)
    try:
        now = T0 + timedelta(days=1)
        report = load_outcome(con, scraped("aws", "replay", now, now, batch=batch), "refresh-2", now=now)
        assert report.ok and (report.new, report.changed, report.closed) == (0, 0, 0)
        assert con.execute("select count(*), count(valid_to) from offer_history").fetchall() == [(1, 0)]
        assert all(r.ok for r in run_checks(con)), [r for r in run_checks(con) if not r.ok]
    finally:
        close_writer(con)


def test_a_warehouse_newer_than_this_gpuledger_is_left_alone(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    migrate(con)
    future = SCHEMA_VERSION + 1
    con.execute("insert into schema_migrations values (?, 'from the future', now())", [future])
    assert migrate(con) == []
    assert current_version(con) == future
    (version_check,) = [r for r in run_checks(con) if r.name == "schema version"]
    assert not version_check.ok and \
        version_check.detail == f"warehouse at version {future}, this gpuledger expects {SCHEMA_VERSION}"


def test_version_4_makes_price_observed_at_a_timestamptz_keeping_every_value(tmp_path: Path) -> None:
    db = tmp_path / "v1.duckdb"
    v1_warehouse(db)
    con = duckdb.connect(str(db))
    con.execute("update offers set price_observed_at = '2026-11-29T00:11:48.000Z'")
    con.execute("update offer_history set price_observed_at = '2026-11-29T00:11:48.000Z'")
    # an older, closed version stamped with an offset, one without any (read as UTC), one with none at all
    for stamp, valid_from in (("2026-10-01T02:00:00+02:00", T0 - timedelta(days=30)),
                              ("2026-09-01T12:30:00", T0 - timedelta(days=60)), (None, T0 - timedelta(days=90))):
        con.execute("insert into offer_history select * replace (?::varchar as price_observed_at, ? as valid_from, "
                    "? as valid_to, 'run-0' as closed_by_run_id) from offer_history where valid_to is null",
                    [stamp, valid_from, valid_from + timedelta(days=1)])
    con.close()
    con = open_writer(db)
    try:
        assert con.execute("select data_type from information_schema.columns where column_name = 'price_observed_at' "
                           "order by table_name").fetchall() == [("TIMESTAMP WITH TIME ZONE",)] * 2
        utc = timezone.utc
        assert con.execute("select price_observed_at from offers").fetchall() == [
            (datetime(2026, 11, 29, 0, 11, 48, tzinfo=utc),)]
        assert con.execute("select price_observed_at from offer_history order by valid_from").fetchall() == [
            (None,), (datetime(2026, 9, 1, 12, 30, tzinfo=utc),), (datetime(2026, 10, 1, 0, 0, tzinfo=utc),),
            (datetime(2026, 11, 29, 0, 11, 48, tzinfo=utc),)]
    finally:
        close_writer(con)


def test_version_13_replaces_the_spot_and_availability_windows_of_an_older_warehouse(tmp_path: Path) -> None:
    """A warehouse at version 12 holds the view and macros as version 11 made them (windows counted in the
    session's calendar); the upgrade replaces both, so an upgraded warehouse answers as a new one does."""
    db = tmp_path / "w.duckdb"
    close_writer(open_writer(db))
    with duckdb.connect(str(db)) as con:  # as version 12 left them, for what the upgrade must replace
        con.execute("delete from schema_migrations where version = 13; "
                    "create or replace macro availability_obtainable_at(as_of) as table select 'v11' as made_by; "
                    "create or replace view spot_price_intervals as select 'v5' as made_by")
    close_writer(open_writer(db))
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("select max(version) from schema_migrations").fetchall() == [(13,)]
        assert [d[0] for d in con.execute("select * from availability_obtainable_at(now())").description] == [
            "gpu_model", "provider", "region", "observations_7d", "obtainable_7d", "observations_30d",
            "obtainable_30d", "last_observed"]
        assert "valid_from" in [d[0] for d in con.execute("select * from spot_price_intervals").description]
