"""Load semantics: what "source of truth" means, tested on the real merge."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.export import export_snapshot
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.schema import SCHEMA_VERSION, UPGRADES, current_version, migrate
from tests.builders import scraped
from gpuledger.warehouse.store import (
    AnomalyPolicy, RefreshRunningError, WarehouseError, load_outcome, open_reader, open_writer,
    refresh_lock,
)

T0 = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)


def offers_batch(provider: str, prices: dict[str, float]) -> Batch:
    b = Batch(provider)
    for itype, price in prices.items():
        assert b.offer(itype, {}, region="us-east-1", instance_type=itype, purchase_option="on_demand",
                       gpu_model="H100-SXM", gpu_name_reported="H100", gpu_vendor="NVIDIA", gpu_count=8,
                       gpu_memory_gb=80, price_per_hour=price, source_currency="USD", source_price_per_hour=price)
    b.add("egress", "e", {}, region="us-east-1", destination="internet", tier_start_gb=0, tier_end_gb=10240,
          usd_per_gb=0.09, source_currency="USD", source_usd_per_gb=0.09)
    return b


def load(con: duckdb.DuckDBPyConnection, provider: str, prices: dict[str, float] | None, day: int,
         error: str | None = None, policy: AnomalyPolicy | None = None):
    now = T0 + timedelta(days=day)
    outcome = scraped(provider, "replay", now, now, batch=offers_batch(provider, prices) if prices else None,
                            error=error)
    return load_outcome(con, outcome, f"refresh-{day}", policy, now=now)


def current(con: duckdb.DuckDBPyConnection, provider: str = "aws") -> list[tuple]:
    return con.execute("select instance_type, price_per_hour from offers where provider = ? order by 1",
                       [provider]).fetchall()


@pytest.fixture
def con(db: Path):
    c = open_writer(db)
    yield c
    c.close()


def test_new_changed_closed_and_history(con) -> None:
    r1 = load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 21.957642, "g5.xlarge": 1.006}, 0)
    assert (r1.state, r1.new, r1.changed, r1.closed) == ("ok", 3, 0, 0)
    r2 = load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 19.5}, 1)
    assert (r2.new, r2.changed, r2.closed) == (0, 1, 1)
    assert current(con) == [("p4d.24xlarge", 19.5), ("p5.48xlarge", 55.04)]
    hist = con.execute(
        "select instance_type, price_per_hour, valid_from, valid_to from offer_history order by 1, 3").fetchall()
    day1 = T0 + timedelta(days=1)
    assert hist == [
        ("g5.xlarge", 1.006, T0, day1),            # closed: gone from a successful scrape
        ("p4d.24xlarge", 21.957642, T0, day1),     # superseded by the price cut
        ("p4d.24xlarge", 19.5, day1, None),
        ("p5.48xlarge", 55.04, T0, None),          # unchanged: still one version
    ]
    first_seen, last_seen = con.execute(
        "select first_seen, last_seen from offers where instance_type = 'p5.48xlarge'").fetchall()[0]
    assert (first_seen, last_seen) == (T0, day1)
    # "What did a p4d cost on day 0 at noon?" is one query.
    noon = T0 + timedelta(hours=9)
    assert con.execute(
        "select price_per_hour from offer_history where instance_type = 'p4d.24xlarge' "
        "and valid_from <= ? and (valid_to is null or valid_to > ?)", [noon, noon]).fetchall() == [(21.957642,)]
    assert all(r.ok for r in run_checks(con))


def test_an_offer_back_after_a_gap_keeps_its_first_seen(con) -> None:
    """g5 is listed on day 0, missing from day 1's successful scrape, the provider fails on day 2, and g5
    is back on day 3 at another price: its versions do not overlap, the gap stays a gap, and first_seen is
    still day 0, the first scrape that saw it (it was day 3, the return)."""
    day = [T0 + timedelta(days=d) for d in range(4)]
    load(con, "aws", {"p5.48xlarge": 55.04, "g5.xlarge": 1.006}, 0)
    assert (load(con, "aws", {"p5.48xlarge": 55.04}, 1).closed) == 1
    assert load(con, "aws", None, 2, error="timed out").state == "failed"
    r = load(con, "aws", {"p5.48xlarge": 55.04, "g5.xlarge": 1.1}, 3)
    assert (r.new, r.changed, r.closed) == (1, 0, 0)
    assert con.execute("select price_per_hour, valid_from, valid_to from offer_history "
                       "where instance_type = 'g5.xlarge' order by valid_from").fetchall() == [
        (1.006, day[0], day[1]), (1.1, day[3], None)]
    assert con.execute("select instance_type, first_seen, last_seen from offers order by 1").fetchall() == [
        ("g5.xlarge", day[0], day[3]), ("p5.48xlarge", day[0], day[3])]
    assert all(r.ok for r in run_checks(con))


def test_a_fingerprint_collision_cannot_hide_a_change(con, monkeypatch) -> None:
    """Change is decided by comparing columns, never fingerprints: with every new or changed row
    given the same content_hash, a price change still closes the old version and opens a new one."""
    import gpuledger.warehouse.store as store

    monkeypatch.setattr(store, "content_hash_sql", lambda spec, alias="": "'same-for-all'")
    load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 21.957642}, 0)
    r = load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 19.5}, 1)
    assert (r.new, r.changed, r.closed) == (0, 1, 0)
    assert current(con) == [("p4d.24xlarge", 19.5), ("p5.48xlarge", 55.04)]
    assert con.execute("select instance_type, price_per_hour, valid_to is null from offer_history "
                       "order by 1, 2").fetchall() == [
        ("p4d.24xlarge", 19.5, True), ("p4d.24xlarge", 21.957642, False), ("p5.48xlarge", 55.04, True)]
    assert all(r.ok for r in run_checks(con))


def test_rerun_is_idempotent(con) -> None:
    prices = {"p5.48xlarge": 55.04, "g5.xlarge": 1.006}
    load(con, "aws", prices, 0)
    before = con.execute("select count(*) from offer_history").fetchall()
    r = load(con, "aws", prices, 1)
    assert (r.new, r.changed, r.closed) == (0, 0, 0)
    assert con.execute("select count(*) from offer_history").fetchall() == before == [(2,)]
    assert con.execute("select count(*) from egress_price_history").fetchall() == [(1,)]


def test_failed_scrape_changes_nothing_and_is_recorded(con) -> None:
    load(con, "aws", {"p5.48xlarge": 55.04, "g5.xlarge": 1.006}, 0)
    load(con, "gcp", {"a3-highgpu-8g": 88.49}, 0)
    snapshot = con.execute("select * from offers order by all").fetchall()
    r = load(con, "aws", None, 1, error="aws: EC2 API in us-east-1 failed: HTTP 503")
    assert r.state == "failed"
    assert con.execute("select * from offers order by all").fetchall() == snapshot
    runs = con.execute("select provider, state, error from scrape_runs order by finished_at, provider").fetchall()
    assert runs[-1] == ("aws", "failed", "aws: EC2 API in us-east-1 failed: HTTP 503")


def test_empty_and_collapsed_scrapes_are_refused(con) -> None:
    load(con, "aws", {f"t{i}": 10.0 + i for i in range(10)}, 0)
    snapshot = current(con)
    empty = scraped("aws", "replay", T0, T0, batch=Batch("aws"))
    r = load_outcome(con, empty, "r-empty")
    assert r.state == "failed" and "no valid offers" in r.error
    r = load(con, "aws", {"t0": 10.0, "t1": 11.0, "t2": 12.0, "t3": 13.0}, 1)
    assert r.state == "failed" and "row count dropped from 10 to 4" in r.error
    assert "--accept-anomaly aws" in r.error
    assert current(con) == snapshot


def test_price_jump_is_refused_unless_accepted(con) -> None:
    load(con, "aws", {"a": 10.0, "b": 20.0, "c": 30.0}, 0)
    # x10, a unit slip still inside H100's plausible range (x100 would be quarantined record by record)
    r = load(con, "aws", {"a": 100.0, "b": 200.0, "c": 190.0}, 1)
    assert r.state == "failed" and "median price per GPU-hour moved from 2.5000 to 23.7500" in r.error
    assert current(con) == [("a", 10.0), ("b", 20.0), ("c", 30.0)]
    r = load(con, "aws", {"a": 100.0, "b": 200.0, "c": 190.0}, 2, policy=AnomalyPolicy(accept=frozenset({"aws"})))
    assert r.state == "ok" and r.notes and r.notes[0].startswith("anomaly accepted by override")


def test_bad_rows_are_quarantined_with_reason_and_duplicates_kept_once(con) -> None:
    b = offers_batch("aws", {"p5.48xlarge": 55.04, "g5.xlarge": 1.006})
    assert not b.offer("bad", {"instance": "g6.xlarge", "price": "-1"}, region="us-east-1",
                       instance_type="g6.xlarge", purchase_option="on_demand", gpu_model="L4",
                       gpu_name_reported="L4", gpu_vendor="NVIDIA", gpu_count=1, price_per_hour=-0.8,
                       source_currency="USD", source_price_per_hour=-0.8)
    b.offer("dup", {}, region="us-east-1", instance_type="g5.xlarge", purchase_option="on_demand",
            gpu_model="A10G", gpu_name_reported="A10G", gpu_vendor="NVIDIA", gpu_count=1,
            price_per_hour=1.5, source_currency="USD", source_price_per_hour=1.5)
    r = load_outcome(con, scraped("aws", "replay", T0, T0, batch=b), "r1")
    assert (r.state, r.rows_loaded, r.rows_quarantined) == ("ok", 2, 2)
    reasons = dict(con.execute("select source_ref, reason from quarantine order by 1").fetchall())
    assert reasons["bad"] == "contract: price_per_hour: Value error, price_per_hour must be positive, got -0.8; " \
                             "source_price_per_hour: Value error, source_price_per_hour must be positive, got -0.8"
    assert "duplicate key" in reasons["aws/us-east-1//g5.xlarge/on_demand"]
    assert current(con) == [("g5.xlarge", 1.006), ("p5.48xlarge", 55.04)]


@pytest.mark.parametrize("field, value", [("spot_savings_pct", float("nan")), ("spot_savings_pct", float("inf")),
                                          ("reliability", float("nan"))])
def test_a_figure_that_is_not_a_number_is_quarantined(field: str, value: float) -> None:
    # a NaN discount once passed the contract and failed the comparison page's JSON as a whole
    b = Batch("vastai")
    kept = b.offer("m1", {"dph": 1.2}, region="US", instance_type="1x RTX 4090", purchase_option="spot",
                   gpu_model="RTX-4090", gpu_name_reported="RTX 4090", gpu_vendor="NVIDIA", gpu_count=1,
                   price_per_hour=0.4, source_currency="USD", source_price_per_hour=0.4, **{field: value})
    assert not kept and not b.offers
    assert [(q.source_ref, q.reason) for q in b.quarantined] == [("m1", f"contract: {field}: Input should be a "
                                                                        "finite number")]
    assert b.offer("m2", {}, region="US", instance_type="1x RTX 4090", purchase_option="spot", gpu_model="RTX-4090",
                   gpu_name_reported="RTX 4090", gpu_vendor="NVIDIA", gpu_count=1, price_per_hour=0.4,
                   source_currency="USD", source_price_per_hour=0.4, spot_savings_pct=-3.5, reliability=0.98)


def test_migration_upgrades_in_place_without_losing_history(db: Path) -> None:
    con = duckdb.connect(str(db))
    assert migrate(con) == [1, *(version for version, _, _ in UPGRADES)]  # a new warehouse: at the current version
    con.close()
    con = open_writer(db)
    load(con, "aws", {"p5.48xlarge": 55.04}, 0)
    load(con, "aws", {"p5.48xlarge": 50.0}, 1)
    v2 = (SCHEMA_VERSION + 1, "test: offers gain a column",
          "alter table offers add column co2_kg_per_hour DOUBLE; "
          "alter table offer_history add column co2_kg_per_hour DOUBLE;")
    assert migrate(con, UPGRADES + [v2]) == [SCHEMA_VERSION + 1]
    assert current_version(con) == SCHEMA_VERSION + 1
    assert migrate(con, UPGRADES + [v2]) == []  # applied once only
    assert con.execute("select price_per_hour from offer_history order by valid_from").fetchall() == [(55.04,), (50.0,)]
    con.close()


def test_failed_migration_rolls_back(db: Path) -> None:
    con = duckdb.connect(str(db))
    migrate(con)
    bad = (SCHEMA_VERSION + 1, "broken", "alter table offers add column x INT; select * from no_such_table;")
    with pytest.raises(duckdb.Error):
        migrate(con, UPGRADES + [bad])
    assert current_version(con) == SCHEMA_VERSION
    assert "x" not in [r[0] for r in con.execute("describe offers").fetchall()]


def test_reader_is_read_only_and_cannot_touch_files(db: Path, tmp_path: Path) -> None:
    open_writer(db).close()
    con = open_reader(db)
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute("drop table offers")
    with pytest.raises(duckdb.Error):
        con.execute(f"copy (select 1) to '{tmp_path / 'x.csv'}'")
    with pytest.raises(duckdb.Error):
        con.execute(f"attach '{tmp_path / 'other.duckdb'}' as other")
    con.close()
    assert not (tmp_path / "x.csv").exists()


def test_second_refresh_is_turned_away(db: Path) -> None:
    with refresh_lock(db):
        with pytest.raises(RefreshRunningError, match="another refresh"):
            with refresh_lock(db):
                pass
    with refresh_lock(db):  # released: a later refresh proceeds
        pass


def test_export_snapshot_csv_parquet_manifest_and_formula_guard(con, tmp_path: Path) -> None:
    b = offers_batch("aws", {"=HYPERLINK(\"http://x\")": 3.5, "p5.48xlarge": 55.04})
    load_outcome(con, scraped("aws", "replay", T0, T0, batch=b), "r1")
    first = export_snapshot(con, tmp_path / "snaps")
    second = export_snapshot(con, tmp_path / "snaps", formats=["csv"], tables=["offers"])
    assert first != second and first.exists() and second.exists()
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["tables"]["offers"]["rows"] == 2
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["freshness"]["aws"]["last_state"] == "ok"
    text = (first / "offers.csv").read_text()
    assert "'=HYPERLINK" in text and "\n=HYPERLINK" not in text and ",=HYPERLINK" not in text
    assert ",55.04," in text  # numbers stay numbers
    pq = duckdb.sql(f"select instance_type, price_per_hour from '{first / 'offers.parquet'}' order by 2").fetchall()
    assert pq == [("=HYPERLINK(\"http://x\")", 3.5), ("p5.48xlarge", 55.04)]  # Parquet keeps the raw value


def test_export_to_unwritable_place_fails_clearly(con, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(WarehouseError, match="cannot create export directory"):
        export_snapshot(con, blocker / "sub")
