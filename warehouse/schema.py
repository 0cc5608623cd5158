"""Warehouse schema: every table defined once, and the upgrades of older warehouses.

The price tables' columns are the fields of the record models (warehouse/records.py), `providers`'
those of `ProviderFacts`; the other tables are listed here. A new warehouse is created at the current
version; an older one applies each newer UPGRADES step once, in order, in a transaction, recorded in
`schema_migrations`. Steps only add or reshape, never drop history; a changed definition needs its
step (tests/test_schema.py checks that an upgraded warehouse equals a new one).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterator

from pydantic import BaseModel

from gpuledger.warehouse import availability, spot_stats
from gpuledger.warehouse.capacity_blocks import CapacityBlockOffering
from gpuledger.warehouse.freshness import RULE_NOW_SQL
from gpuledger.warehouse.gpus import Alias, GPUModel
from gpuledger.warehouse.records import RECORD_TYPES, EgressPrice, Offer, ProviderFacts, StoragePrice
from gpuledger.warehouse.spot import SpotPricePoint

if TYPE_CHECKING:  # a fetch process writes Arrow tables in these types without loading DuckDB
    import duckdb
    import pyarrow as pa


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB type
    not_null: bool = False
    extra: str = ""  # DEFAULT, CHECK, PRIMARY KEY

    @property
    def ddl(self) -> str:
        return " ".join(part for part in (self.name, self.type, "NOT NULL" if self.not_null else "", self.extra)
                        if part)


# A str enum is stored as its value, a tuple as a JSON array.
_SQL_TYPES = {bool: "BOOLEAN", int: "INTEGER", float: "DOUBLE", str: "VARCHAR", datetime: "TIMESTAMPTZ",
              tuple: "VARCHAR"}


def _sql_type(annotation: Any) -> tuple[str, bool]:
    """(DuckDB type, nullable) of a field annotation such as `float | None`."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        (annotation,) = args
    base = typing.get_origin(annotation) or annotation
    if isinstance(base, type) and issubclass(base, enum.Enum):
        base = str
    if base not in _SQL_TYPES:
        raise TypeError(f"no warehouse column type for {annotation!r}")
    return _SQL_TYPES[base], nullable


def model_columns(model: type[BaseModel] | type, checks: dict[str, str] | None = None,
                  computed: dict[str, str] | None = None, nullable: frozenset[str] = frozenset()
                  ) -> tuple[Column, ...]:
    """The columns of a record model (or a dataclass of warehouse/gpus.py), in field order.

    checks: column -> CHECK or PRIMARY KEY clause. computed: property -> the column it follows (its type
    from the property's return annotation; it is never NULL). nullable: required fields whose column
    still accepts NULL."""
    checks, computed = checks or {}, computed or {}
    after = {anchor: prop for prop, anchor in computed.items()}
    if dataclasses.is_dataclass(model):
        hints = typing.get_type_hints(model)
        fields = {f.name: (hints[f.name], f.default) for f in dataclasses.fields(model)}
    else:
        fields = {name: (info.annotation, info.default) for name, info in model.model_fields.items()}
    out = []
    for name, (annotation, default) in fields.items():
        sql, is_nullable = _sql_type(annotation)
        quoted = "DEFAULT '" + default.replace("'", "''") + "'" if isinstance(default, str) else ""
        extra = " ".join(x for x in (quoted, checks.get(name, "")) if x)
        out.append(Column(name, sql, not (is_nullable or name in nullable), extra))
        if name in after:
            prop = after[name]
            sql, _ = _sql_type(typing.get_type_hints(getattr(model, prop).fget)["return"])
            out.append(Column(prop, sql, True, checks.get(prop, "")))
    return tuple(out)


OFFER_COLUMNS = model_columns(
    Offer,
    checks={"gpu_count": "CHECK (gpu_count > 0)",
            "price_per_hour": "CHECK (price_per_hour > 0 AND isfinite(price_per_hour))",
            "price_per_gpu_hour": "CHECK (price_per_gpu_hour > 0)"},
    computed={"price_per_gpu_hour": "price_per_hour"})
EGRESS_COLUMNS = model_columns(EgressPrice, checks={"usd_per_gb": "CHECK (usd_per_gb >= 0)"})
STORAGE_COLUMNS = model_columns(StoragePrice, checks={"usd_per_gb_month": "CHECK (usd_per_gb_month > 0)"})

# The facts of each provider, as its last successful load stored them. The required facts below
# accept NULL as they always have, so a new warehouse and an upgraded one have the same table.
_PROVIDER_FACTS = model_columns(
    ProviderFacts, nullable=frozenset({"billing_granularity_s", "price_source", "source_urls"}))
PROVIDER_FACT_COLUMNS = tuple(c.name for c in _PROVIDER_FACTS)
PROVIDER_COLUMNS = (
    (Column("provider", "VARCHAR", extra="PRIMARY KEY"),)
    + _PROVIDER_FACTS
    + (Column("updated_at", "TIMESTAMPTZ", True),))

CURRENT_ROW_COLUMNS = (
    Column("content_hash", "VARCHAR", True),
    Column("first_seen", "TIMESTAMPTZ", True),
    Column("last_seen", "TIMESTAMPTZ", True),
    Column("run_id", "VARCHAR", True),
)
HISTORY_ROW_COLUMNS = (
    Column("content_hash", "VARCHAR", True),
    Column("valid_from", "TIMESTAMPTZ", True),
    Column("valid_to", "TIMESTAMPTZ"),  # NULL: this version is current
    Column("run_id", "VARCHAR", True),  # the scrape that first saw this version
    Column("closed_by_run_id", "VARCHAR"),  # the scrape that saw it change or vanish
)

SCRAPE_RUN_COLUMNS = (
    Column("run_id", "VARCHAR", extra="PRIMARY KEY"),
    Column("refresh_id", "VARCHAR", True),
    Column("provider", "VARCHAR", True),
    Column("mode", "VARCHAR", True),  # live | replay | record
    Column("started_at", "TIMESTAMPTZ", True),
    Column("finished_at", "TIMESTAMPTZ"),
    Column("state", "VARCHAR", True),  # ok | failed | interrupted
    *(Column(c, "INTEGER", True, "DEFAULT 0") for c in (
        "rows_parsed", "rows_loaded", "rows_quarantined", "egress_rows", "storage_rows",
        "offers_new", "offers_changed", "offers_closed", "requests")),
    Column("duration_s", "DOUBLE"),
    Column("error", "VARCHAR"),
    Column("notes", "VARCHAR"),
    Column("degraded", "VARCHAR"),  # the enrichments that failed and why; the run is still ok
    Column("bytes_fetched", "BIGINT", True, "DEFAULT 0"),
)
QUARANTINE_COLUMNS = (
    *(Column(c, "VARCHAR", True) for c in ("run_id", "provider", "kind", "source_ref", "reason", "raw")),
    Column("quarantined_at", "TIMESTAMPTZ", True),
)
# The GPU reference tables: the rows of warehouse/data/gpu_models.csv and gpu_aliases.csv.
GPU_MODEL_COLUMNS = model_columns(GPUModel, checks={"gpu_model": "PRIMARY KEY"}, nullable=frozenset({"gpu_model"}))
GPU_ALIAS_COLUMNS = model_columns(Alias)

# AWS Spot price history: one row per published price change of one (region, AZ, instance type,
# product description), at its own timestamp. Rows are only ever added (warehouse.spot).
SPOT_PRICE_HISTORY_COLUMNS = model_columns(
    SpotPricePoint, checks={"spot_price_per_hour": "CHECK (spot_price_per_hour > 0 AND isfinite(spot_price_per_hour))"},
) + (
    Column("run_id", "VARCHAR", True),  # the scrape that first stored it
    Column("loaded_at", "TIMESTAMPTZ", True),
)
# AWS EC2 Capacity Blocks for ML: each offering (`instance_count` instances for `duration_hours` from
# `start_at`, one upfront fee) every scrape saw, kept per scrape: it is a moment's quote (warehouse.capacity_blocks).
CAPACITY_BLOCK_COLUMNS = (
    *(Column(c, "VARCHAR", True) for c in ("provider", "region", "zone", "instance_type")),
    Column("purchase_option", "VARCHAR", True, "DEFAULT 'capacity_block'"),
    Column("offering_id", "VARCHAR", True),
    Column("instance_count", "INTEGER", True, "CHECK (instance_count > 0)"),
    *(Column(c, "TIMESTAMPTZ", True) for c in ("start_at", "end_at")),
    Column("duration_hours", "INTEGER", True, "CHECK (duration_hours > 0)"),
    Column("upfront_fee", "DOUBLE", True, "CHECK (upfront_fee > 0 AND isfinite(upfront_fee))"),
    Column("source_currency", "VARCHAR", True),
    Column("upfront_fee_usd", "DOUBLE", True),
    Column("gpu_model", "VARCHAR", True),
    Column("gpu_count", "DOUBLE", True, "CHECK (gpu_count > 0)"),  # per instance
    Column("usd_per_hour", "DOUBLE", True),  # the whole block: fee / duration
    Column("usd_per_gpu_hour", "DOUBLE", True),  # fee / (duration x instances x GPUs per instance)
    Column("tenancy", "VARCHAR"),
    Column("observed_at", "TIMESTAMPTZ", True),  # when the scrape saw the offering
    Column("run_id", "VARCHAR", True),
)

# Every offer's availability signal as the refreshes saw it (warehouse.availability): rows are only
# ever added, one per offer, UTC day and signal.
AVAILABILITY_HISTORY_COLUMNS = (
    *(Column(c, "VARCHAR", True) for c in ("provider", "region", "zone", "instance_type", "gpu_model")),
    Column("observed_at", "TIMESTAMPTZ", True),
    Column("available", "BOOLEAN"),
    Column("available_count", "INTEGER"),
    Column("availability_level", "VARCHAR"),
    Column("run_id", "VARCHAR", True),
)

# What proved each source's last loaded answers current (an ETag, a Last-Modified date, a price list
# version): handed to the next fetch, which asks only for what changed (adapters/base.py, Unchanged).
FETCH_VALIDATOR_COLUMNS = (
    Column("provider", "VARCHAR", True),
    Column("key", "VARCHAR", True),  # what the source validates: a URL, a version index
    Column("validator", "VARCHAR", True),
    Column("run_id", "VARCHAR", True),  # the run whose load it belongs to
    Column("stored_at", "TIMESTAMPTZ", True),
)

# Table -> its columns, in creation order.
TABLES: dict[str, tuple[Column, ...]] = {
    "offers": OFFER_COLUMNS + CURRENT_ROW_COLUMNS,
    "offer_history": OFFER_COLUMNS + HISTORY_ROW_COLUMNS,
    "egress_prices": EGRESS_COLUMNS + CURRENT_ROW_COLUMNS,
    "egress_price_history": EGRESS_COLUMNS + HISTORY_ROW_COLUMNS,
    "storage_prices": STORAGE_COLUMNS + CURRENT_ROW_COLUMNS,
    "storage_price_history": STORAGE_COLUMNS + HISTORY_ROW_COLUMNS,
    "scrape_runs": SCRAPE_RUN_COLUMNS,
    "quarantine": QUARANTINE_COLUMNS,
    "providers": PROVIDER_COLUMNS,
    "gpu_models": GPU_MODEL_COLUMNS,
    "gpu_aliases": GPU_ALIAS_COLUMNS,
    "spot_price_history": SPOT_PRICE_HISTORY_COLUMNS,
    "capacity_block_offerings": CAPACITY_BLOCK_COLUMNS,
    "availability_history": AVAILABILITY_HISTORY_COLUMNS,
    "fetch_validators": FETCH_VALIDATOR_COLUMNS,
}


# The views. They hold no data: every upgrade remakes them all from these definitions, so a stored view
# never lags the definition of the version it belongs to.
# offer_freshness: every current offer with its provider's last successful scrape and whether it is stale
# under the one freshness rule (warehouse/freshness.py, at its default age, judged at query time).
VIEWS_SQL = f"""CREATE OR REPLACE VIEW offer_freshness AS
    select o.provider, o.region, o.zone, o.instance_type, o.purchase_option, o.last_seen,
           f.last_ok as provider_last_ok, f.age_hours as provider_age_hours,
           coalesce(f.state, 'never') as provider_state, coalesce(not f.fresh, true) as stale
    from offers o left join ({RULE_NOW_SQL}) f on f.provider = o.provider;
"""


# The columns a scrape hands over for the two append-only tables (the rest the merge adds).
SPOT_PRICE_FIELDS = tuple(SpotPricePoint.model_fields)
CAPACITY_BLOCK_FIELDS = (*CapacityBlockOffering.model_fields, *CapacityBlockOffering.model_computed_fields)
AVAILABILITY_FIELDS = tuple(c.name for c in AVAILABILITY_HISTORY_COLUMNS[:-1])


def arrow_schema(table: str, columns: tuple[str, ...] | None = None) -> pa.Schema:
    """The Arrow types of `table`'s columns (all, or `columns` in that order)."""
    import pyarrow as pa

    types = {"VARCHAR": pa.string(), "DOUBLE": pa.float64(), "INTEGER": pa.int32(), "BIGINT": pa.int64(),
             "BOOLEAN": pa.bool_(), "TIMESTAMPTZ": pa.timestamp("us", tz="UTC")}
    by_name = {c.name: c for c in TABLES[table]}
    return pa.schema([(n, types[by_name[n].type]) for n in columns or by_name])


def column_names(table: str) -> tuple[str, ...]:
    return tuple(c.name for c in TABLES[table])


def create_sql() -> str:
    """The DDL of every table, view and macro at the current version."""
    tables = (f"CREATE TABLE {table} (\n" + ",\n".join(f"    {c.ddl}" for c in columns) + "\n);\n"
              for table, columns in TABLES.items())
    return "".join(tables) + spot_stats.SQL + availability.SQL + VIEWS_SQL


# Attributes whose change is *not* a new version of an offer: the spot feed restamps an unchanged price.
UNTRACKED = frozenset({"price_observed_at"})


@dataclass(frozen=True)
class TableSpec:
    """A current table, its SCD2 history table, and how rows are identified."""

    kind: str  # offer | egress | storage (matches warehouse.records.RECORD_TYPES)
    table: str
    history: str
    key: tuple[str, ...]
    attrs: tuple[str, ...]

    @property
    def columns(self) -> tuple[str, ...]:
        return self.key + self.attrs

    @property
    def tracked(self) -> tuple[str, ...]:
        return tuple(c for c in self.attrs if c not in UNTRACKED)

    def key_join(self, a: str, b: str) -> str:
        """The SQL condition that rows `a` and `b` (aliases) have one key."""
        return " and ".join(f"{a}.{k} = {b}.{k}" for k in self.key)


def _spec(kind: str, table: str, history: str, columns: tuple[Column, ...]) -> TableSpec:
    names, key = tuple(c.name for c in columns), RECORD_TYPES[kind].KEY
    assert names[:len(key)] == key, f"{table}: the key columns come first"
    return TableSpec(kind, table, history, key, names[len(key):])


OFFERS = _spec("offer", "offers", "offer_history", OFFER_COLUMNS)
EGRESS = _spec("egress", "egress_prices", "egress_price_history", EGRESS_COLUMNS)
STORAGE = _spec("storage", "storage_prices", "storage_price_history", STORAGE_COLUMNS)
SPECS = (OFFERS, EGRESS, STORAGE)


# The two tables version 5 adds, frozen as it made them. Its views and macro are `create or replace`
# (spot_stats.SQL): a later step that changes them replaces them again.
_V5_TABLES = """
CREATE TABLE spot_price_history (
    provider VARCHAR NOT NULL, region VARCHAR NOT NULL, zone VARCHAR NOT NULL, instance_type VARCHAR NOT NULL,
    product_description VARCHAR NOT NULL, observed_at TIMESTAMPTZ NOT NULL,
    spot_price_per_hour DOUBLE NOT NULL CHECK (spot_price_per_hour > 0 AND isfinite(spot_price_per_hour)),
    source_currency VARCHAR NOT NULL, run_id VARCHAR NOT NULL, loaded_at TIMESTAMPTZ NOT NULL
);
CREATE TABLE capacity_block_offerings (
    provider VARCHAR NOT NULL, region VARCHAR NOT NULL, zone VARCHAR NOT NULL, instance_type VARCHAR NOT NULL,
    purchase_option VARCHAR NOT NULL DEFAULT 'capacity_block', offering_id VARCHAR NOT NULL,
    instance_count INTEGER NOT NULL CHECK (instance_count > 0), start_at TIMESTAMPTZ NOT NULL,
    end_at TIMESTAMPTZ NOT NULL, duration_hours INTEGER NOT NULL CHECK (duration_hours > 0),
    upfront_fee DOUBLE NOT NULL CHECK (upfront_fee > 0 AND isfinite(upfront_fee)), source_currency VARCHAR NOT NULL,
    upfront_fee_usd DOUBLE NOT NULL, gpu_model VARCHAR NOT NULL, gpu_count DOUBLE NOT NULL CHECK (gpu_count > 0),
    usd_per_hour DOUBLE NOT NULL, usd_per_gpu_hour DOUBLE NOT NULL, tenancy VARCHAR,
    observed_at TIMESTAMPTZ NOT NULL, run_id VARCHAR NOT NULL
);
"""

# The bookkeeping columns that follow the offer columns as of versions 3, 6 and 7 (frozen). A step that
# adds offer columns moves these behind them: drop-and-re-add keeps every other column where it is.
_ROW_COLUMNS_AFTER_OFFER = {
    "offers": (("content_hash", "VARCHAR", True), ("first_seen", "TIMESTAMPTZ", True),
               ("last_seen", "TIMESTAMPTZ", True), ("run_id", "VARCHAR", True)),
    "offer_history": (("content_hash", "VARCHAR", True), ("valid_from", "TIMESTAMPTZ", True),
                      ("valid_to", "TIMESTAMPTZ", False), ("run_id", "VARCHAR", True),
                      ("closed_by_run_id", "VARCHAR", False)),
}


def _append_offer_columns(table: str, columns: tuple[str, ...], fill: str = "") -> str:
    """Add `columns` (DDL) after the offer columns of `table`, run `fill` (an UPDATE giving the
    existing rows their values), then move the bookkeeping columns behind them."""
    sql = [f"alter table {table} add column {ddl};" for ddl in columns] + ([fill] if fill else [])
    for name, sql_type, not_null in _ROW_COLUMNS_AFTER_OFFER[table]:
        # NOT NULL comes with the new column (a placeholder default, dropped once the values are
        # copied): DuckDB cannot add the constraint later in a transaction that has updated rows.
        placeholder = {"VARCHAR": "''", "TIMESTAMPTZ": "'epoch'"}[sql_type]
        sql += [f"alter table {table} rename column {name} to {name}__moved;",
                f"alter table {table} add column {name} {sql_type}"
                + (f" not null default {placeholder};" if not_null else ";"),
                f"update {table} set {name} = {name}__moved;",
                f"alter table {table} drop column {name}__moved;"]
        if not_null:
            sql.append(f"alter table {table} alter column {name} drop default;")
    return "\n".join(sql) + "\n"


# Version 7: the interruption-risk scale; each existing row gets the level its source's signal gives it
# (warehouse/interruption.py as of version 7), so the next load finds unchanged offers unchanged.
_V7_RISK_COLUMNS = ("interruption_risk_level VARCHAR NOT NULL DEFAULT 'unknown'", "interruption_rate_max_pct DOUBLE",
                    "interruption_risk_source VARCHAR NOT NULL DEFAULT 'unpublished'")
_V7_RISK_SOURCE = """case
        when provider = 'vastai' and reliability is not null then 'vastai_host_reliability'
        when provider = 'vastai' then 'unpublished'
        when purchase_option = 'on_demand' or term_months is not null then 'not_interruptible'
        when provider = 'aws' and interruption_risk in ('<5%', '5-10%', '10-15%', '15-20%', '>20%')
            then 'aws_spot_advisor'
        when provider = 'runpod' and purchase_option = 'interruptible'
             and availability_level in ('high', 'medium', 'low', 'none') then 'runpod_stock_status'
        else 'unpublished' end"""
_V7_RISK_VALUES = """
    interruption_risk_level = case interruption_risk_source when 'not_interruptible' then 'none'
        when 'aws_spot_advisor' then case interruption_risk when '<5%' then 'low' when '5-10%' then 'medium'
                                       when '10-15%' then 'medium' else 'high' end
        when 'vastai_host_reliability' then case when reliability >= 0.95 and purchase_option <> 'interruptible'
                                               then 'low' when reliability >= 0.85 then 'medium' else 'high' end
        when 'runpod_stock_status' then case when availability_level in ('high', 'medium') then 'medium'
                                           else 'high' end
        else 'unknown' end,
    interruption_rate_max_pct = case when interruption_risk_source = 'aws_spot_advisor' then
        case interruption_risk when '<5%' then 5 when '5-10%' then 10 when '10-15%' then 15 when '15-20%' then 20
                               else 100 end end::DOUBLE"""


def _with_interruption_risk(table: str) -> str:
    return _append_offer_columns(table, _V7_RISK_COLUMNS,
                                 f"update {table} set interruption_risk_source = {_V7_RISK_SOURCE};\n"
                                 f"update {table} set {_V7_RISK_VALUES};")


def _observed_at_as_timestamptz(table: str) -> str:
    # Text without an offset is read as UTC, not in the upgrader's zone; text that is no timestamp fails
    # the step, which rolls back and leaves the warehouse at version 3 with its values.
    return f"""
alter table {table} alter price_observed_at type timestamptz using
    case when regexp_matches(price_observed_at, '([zZ]|[+-][0-9][0-9](:?[0-9][0-9])?)$')
         then price_observed_at::timestamptz
         else price_observed_at::timestamp at time zone 'UTC' end;
"""


# (version, description, SQL): what each version changed, for a warehouse made before it.
# Version 1 is the initial schema (tests/fixtures/warehouse_v1.sql).
INITIAL = (1, "initial schema: offers, history, runs, quarantine, providers, GPU reference")
UPGRADES: list[tuple[int, str, str]] = [
    # The recommender installs its macros on the connection that uses them; copies stored in the file
    # by earlier releases would go on answering a plain DuckDB session with an outdated definition.
    (2, "drop the recommender macros earlier releases stored in the warehouse",
     """
drop macro table if exists fits;
drop macro table if exists offer_facts;
drop macro table if exists fresh_providers;
drop macro if exists fit_ok;
drop macro if exists precision_ok;
drop macro if exists is_fast_interconnect;
drop macro if exists billed_seconds;
drop macro if exists gpuledger_macros_version;
"""),
    # operated_by is filled with the provider (no aggregator was loaded before); the rows keep their values
    # and content_hash, so the next load finds them unchanged.
    (3, "offers and offer_history: operated_by, the cloud that runs the machine (an aggregator's offers "
        "name the underlying cloud); existing rows get their provider",
     "".join(_append_offer_columns(t, ("operated_by VARCHAR NOT NULL DEFAULT ''",),
                                   f"update {t} set operated_by = provider;")
             + f"alter table {t} alter column operated_by drop default;\n" for t in ("offers", "offer_history"))),
    (4, "offers and offer_history: price_observed_at is a TIMESTAMPTZ (was the source's text); text "
        "without a UTC offset is read as UTC",
     _observed_at_as_timestamptz("offers") + _observed_at_as_timestamptz("offer_history")),
    (5, "spot_price_history (AWS Spot price changes) and capacity_block_offerings (EC2 Capacity Blocks); "
        "the view spot_price_intervals, the macro spot_price_stats_at and the view spot_price_stats",
     _V5_TABLES + spot_stats.SQL),
    (6, "offers and offer_history: term_months and payment_option of commitments (reserved, savings plan, "
        "committed use), each its own purchase option; existing rows are on-demand or interruptible (NULL)",
     _append_offer_columns("offers", ("term_months INTEGER", "payment_option VARCHAR"))
     + _append_offer_columns("offer_history", ("term_months INTEGER", "payment_option VARCHAR"))),
    # the view of version 7 is made with every other view once the steps are applied (migrate)
    (7, "offers and offer_history: interruption_risk_level, interruption_rate_max_pct, interruption_risk_source "
        "(one interruption-risk scale across providers); view offer_freshness",
     "drop view if exists offer_freshness;" + _with_interruption_risk("offers")
     + _with_interruption_risk("offer_history")),
    # Reference data: the next sync from data/gpu_models.csv fills them.
    (8, "gpu_models: dense BF16/FP16 tensor TFLOPS and their source, for the recommender's time model",
     "alter table gpu_models add column bf16_dense_tflops DOUBLE;\n"
     "alter table gpu_models add column fp16_dense_tflops DOUBLE;\n"
     "alter table gpu_models add column tensor_tflops_source VARCHAR;\n"),
    (9, "scrape_runs: degraded (the enrichments that failed, the run still ok) and bytes_fetched; "
        "state not_configured for a provider without credentials",
     "alter table scrape_runs add column degraded VARCHAR;\n"
     "alter table scrape_runs add column bytes_fetched BIGINT NOT NULL DEFAULT 0;\n"),
    (10, "offers and offer_history: gpu_memory_from_canon (gpu_memory_gb is the canonical model's where the "
         "source states none); existing rows keep what their source stated (false)",
     "".join(_append_offer_columns(t, ("gpu_memory_from_canon BOOLEAN NOT NULL DEFAULT false",))
             + f"alter table {t} alter column gpu_memory_from_canon drop default;\n"
             for t in ("offers", "offer_history"))),
    (11, "availability_history (every offer's availability signal, once per UTC day while it holds); the macro "
         "availability_obtainable_at and the view availability_obtainable",
     """
CREATE TABLE availability_history (
    provider VARCHAR NOT NULL, region VARCHAR NOT NULL, zone VARCHAR NOT NULL, instance_type VARCHAR NOT NULL,
    gpu_model VARCHAR NOT NULL, observed_at TIMESTAMPTZ NOT NULL, available BOOLEAN, available_count INTEGER,
    availability_level VARCHAR, run_id VARCHAR NOT NULL
);
""" + availability.SQL),
    # frozen as version 12 made it
    (12, "fetch_validators: what proved each source's last loaded answers current (ETag, Last-Modified, "
         "price list version), for a refresh that fetches only what changed",
     """
CREATE TABLE fetch_validators (
    provider VARCHAR NOT NULL, key VARCHAR NOT NULL, validator VARCHAR NOT NULL, run_id VARCHAR NOT NULL,
    stored_at TIMESTAMPTZ NOT NULL
);
"""),
    (13, "the view spot_price_intervals: a machine's consecutive versions at one price are one interval "
         "(spot_price_stats_at's price_periods counted a version whose availability alone changed); its windows "
         "and availability_obtainable_at's are whole 24-hour days in a session of any time zone",
     spot_stats.SQL + availability.SQL),
]
SCHEMA_VERSION = UPGRADES[-1][0]


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """0 for an empty `schema_migrations` (migrate creates it; open_reader refuses a file without it)."""
    return con.execute("select coalesce(max(version), 0) from schema_migrations").fetchall()[0][0]


def migrate(con: duckdb.DuckDBPyConnection, upgrades: list[tuple[int, str, str]] | None = None) -> list[int]:
    """Create the schema in an empty warehouse, or upgrade an older one; return the versions
    applied (a new warehouse gets every version at once)."""
    steps = UPGRADES if upgrades is None else upgrades
    con.execute("create table if not exists schema_migrations ("
                " version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)")
    have = current_version(con)
    if have == 0:
        versions = [INITIAL] + [(v, d) for v, d, _ in steps]
        _in_transaction(con, create_sql(), versions)
        return [v for v, _ in versions]
    applied = []
    for version, description, sql in steps:
        if version > have:
            _in_transaction(con, sql, [(version, description)])
            applied.append(version)
    if applied and upgrades is None:
        con.execute(VIEWS_SQL)
    return applied


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block in one transaction: committed at its end, rolled back if it raises."""
    con.execute("begin transaction")
    try:
        yield
        con.execute("commit")
    except Exception:
        con.execute("rollback")
        raise


def _in_transaction(con: duckdb.DuckDBPyConnection, sql: str, versions: list[tuple[int, str]]) -> None:
    with transaction(con):
        con.execute(sql)
        for version, description in versions:
            con.execute("insert into schema_migrations values (?, ?, now())", [version, description])
