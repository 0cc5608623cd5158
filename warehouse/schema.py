"""Warehouse schema and its migrations.

Each migration is applied once, in order, inside a transaction, and recorded
in `schema_migrations`; a warehouse made by an older gpuledger upgrades in
place when opened for writing. Migrations only ever add or reshape: history
is never dropped. Column lists for loads and exports are derived from the
`TableSpec`s below, the one place a table's columns are named in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

# Columns of `offers`, in order; the key first. Everything a recommender needs
# to judge an offer without joining is here (dlt's "frozen" contract: a new
# source field goes to provider_data or into a new migration, never ad hoc).
OFFER_KEY = ("provider", "region", "zone", "instance_type", "purchase_option")
OFFER_ATTRS = (
    "gpu_model", "gpu_variant_exact", "gpu_name_reported", "gpu_vendor", "gpu_count",
    "gpu_memory_gb", "gpu_memory_gb_nominal", "total_gpu_memory_gb",
    "vcpus", "ram_gb", "local_disk_gb", "interconnect", "network_gbps", "multinode_fabric",
    "price_per_hour", "price_per_gpu_hour", "source_currency", "source_price_per_hour",
    "price_observed_at", "billing_granularity_s", "minimum_charge_s",
    "available", "available_count", "availability_level", "interruption_risk",
    "spot_savings_pct", "reliability", "provider_data",
)
EGRESS_KEY = ("provider", "region", "destination", "tier_start_gb")
EGRESS_ATTRS = ("tier_end_gb", "usd_per_gb", "source_currency", "source_usd_per_gb", "description")
STORAGE_KEY = ("provider", "region", "storage_class")
STORAGE_ATTRS = ("usd_per_gb_month", "source_currency", "source_usd_per_gb_month", "description")

# Attributes whose change is *not* a new version of an offer: the spot feed
# restamps an unchanged price every few minutes.
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


OFFERS = TableSpec("offer", "offers", "offer_history", OFFER_KEY, OFFER_ATTRS)
EGRESS = TableSpec("egress", "egress_prices", "egress_price_history", EGRESS_KEY, EGRESS_ATTRS)
STORAGE = TableSpec("storage", "storage_prices", "storage_price_history", STORAGE_KEY, STORAGE_ATTRS)
SPECS = (OFFERS, EGRESS, STORAGE)

_OFFER_COLUMNS_SQL = """
    provider            VARCHAR NOT NULL,
    region              VARCHAR NOT NULL,
    zone                VARCHAR NOT NULL DEFAULT '',
    instance_type       VARCHAR NOT NULL,
    purchase_option     VARCHAR NOT NULL,
    gpu_model           VARCHAR NOT NULL,
    gpu_variant_exact   BOOLEAN NOT NULL,
    gpu_name_reported   VARCHAR NOT NULL,
    gpu_vendor          VARCHAR NOT NULL,
    gpu_count           DOUBLE NOT NULL CHECK (gpu_count > 0),
    gpu_memory_gb       DOUBLE,
    gpu_memory_gb_nominal DOUBLE,
    total_gpu_memory_gb DOUBLE,
    vcpus               DOUBLE,
    ram_gb              DOUBLE,
    local_disk_gb       DOUBLE,
    interconnect        VARCHAR,
    network_gbps        DOUBLE,
    multinode_fabric    VARCHAR,
    price_per_hour      DOUBLE NOT NULL CHECK (price_per_hour > 0 AND isfinite(price_per_hour)),
    price_per_gpu_hour  DOUBLE NOT NULL CHECK (price_per_gpu_hour > 0),
    source_currency     VARCHAR NOT NULL,
    source_price_per_hour DOUBLE NOT NULL,
    price_observed_at   VARCHAR,
    billing_granularity_s INTEGER,
    minimum_charge_s    INTEGER,
    available           BOOLEAN,
    available_count     INTEGER,
    availability_level  VARCHAR,
    interruption_risk   VARCHAR,
    spot_savings_pct    DOUBLE,
    reliability         DOUBLE,
    provider_data       VARCHAR NOT NULL DEFAULT '{}',
    content_hash        VARCHAR NOT NULL,
"""

_EGRESS_COLUMNS_SQL = """
    provider            VARCHAR NOT NULL,
    region              VARCHAR NOT NULL,
    destination         VARCHAR NOT NULL,
    tier_start_gb       DOUBLE NOT NULL,
    tier_end_gb         DOUBLE,
    usd_per_gb          DOUBLE NOT NULL CHECK (usd_per_gb >= 0),
    source_currency     VARCHAR NOT NULL,
    source_usd_per_gb   DOUBLE NOT NULL,
    description         VARCHAR NOT NULL DEFAULT '',
    content_hash        VARCHAR NOT NULL,
"""

_STORAGE_COLUMNS_SQL = """
    provider            VARCHAR NOT NULL,
    region              VARCHAR NOT NULL,
    storage_class       VARCHAR NOT NULL,
    usd_per_gb_month    DOUBLE NOT NULL CHECK (usd_per_gb_month > 0),
    source_currency     VARCHAR NOT NULL,
    source_usd_per_gb_month DOUBLE NOT NULL,
    description         VARCHAR NOT NULL DEFAULT '',
    content_hash        VARCHAR NOT NULL,
"""


def _current_and_history(table: str, history: str, columns_sql: str) -> str:
    return f"""
CREATE TABLE {table} ({columns_sql}
    first_seen          TIMESTAMPTZ NOT NULL,
    last_seen           TIMESTAMPTZ NOT NULL,
    run_id              VARCHAR NOT NULL
);
CREATE TABLE {history} ({columns_sql}
    valid_from          TIMESTAMPTZ NOT NULL,
    valid_to            TIMESTAMPTZ,            -- NULL: this version is current
    run_id              VARCHAR NOT NULL,       -- the scrape that first saw this version
    closed_by_run_id    VARCHAR                 -- the scrape that saw it change or vanish
);
"""


MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "initial schema: offers, history, runs, quarantine, providers, GPU reference",
        _current_and_history("offers", "offer_history", _OFFER_COLUMNS_SQL)
        + _current_and_history("egress_prices", "egress_price_history", _EGRESS_COLUMNS_SQL)
        + _current_and_history("storage_prices", "storage_price_history", _STORAGE_COLUMNS_SQL)
        + """
CREATE TABLE scrape_runs (
    run_id              VARCHAR PRIMARY KEY,
    refresh_id          VARCHAR NOT NULL,
    provider            VARCHAR NOT NULL,
    mode                VARCHAR NOT NULL,        -- live | replay | record
    started_at          TIMESTAMPTZ NOT NULL,
    finished_at         TIMESTAMPTZ,
    state               VARCHAR NOT NULL,        -- ok | failed
    rows_parsed         INTEGER NOT NULL DEFAULT 0,
    rows_loaded         INTEGER NOT NULL DEFAULT 0,
    rows_quarantined    INTEGER NOT NULL DEFAULT 0,
    egress_rows         INTEGER NOT NULL DEFAULT 0,
    storage_rows        INTEGER NOT NULL DEFAULT 0,
    offers_new          INTEGER NOT NULL DEFAULT 0,
    offers_changed      INTEGER NOT NULL DEFAULT 0,
    offers_closed       INTEGER NOT NULL DEFAULT 0,
    requests            INTEGER NOT NULL DEFAULT 0,
    duration_s          DOUBLE,
    error               VARCHAR,
    notes               VARCHAR
);
CREATE TABLE quarantine (
    run_id              VARCHAR NOT NULL,
    provider            VARCHAR NOT NULL,
    kind                VARCHAR NOT NULL,
    source_ref          VARCHAR NOT NULL,
    reason              VARCHAR NOT NULL,
    raw                 VARCHAR NOT NULL,
    quarantined_at      TIMESTAMPTZ NOT NULL
);
CREATE TABLE providers (
    provider            VARCHAR PRIMARY KEY,
    display_name        VARCHAR NOT NULL,
    kind                VARCHAR NOT NULL,        -- hyperscaler | gpu_cloud | marketplace
    billing_granularity_s INTEGER,
    minimum_charge_s    INTEGER,
    billing_notes       VARCHAR,
    storage_persists_when_stopped BOOLEAN,
    stopped_billing_notes VARCHAR,
    access_ssh          BOOLEAN,
    access_docker       BOOLEAN,
    access_jupyter      BOOLEAN,
    multinode_interconnect VARCHAR,
    interruptible_offer VARCHAR,
    price_source        VARCHAR,
    source_urls         VARCHAR,
    updated_at          TIMESTAMPTZ NOT NULL
);
CREATE TABLE gpu_models (
    gpu_model           VARCHAR PRIMARY KEY,
    vendor              VARCHAR NOT NULL,
    family              VARCHAR NOT NULL,        -- the bare name a source may give: "H100"
    memory_gb           DOUBLE NOT NULL,
    memory_type         VARCHAR NOT NULL,
    memory_bandwidth_tbs DOUBLE,
    architecture        VARCHAR NOT NULL,
    bf16                BOOLEAN NOT NULL,
    fp8                 BOOLEAN NOT NULL,
    fp4                 BOOLEAN NOT NULL,
    int8                BOOLEAN NOT NULL,
    nvlink              VARCHAR,
    form_factor         VARCHAR,
    segment             VARCHAR NOT NULL,        -- datacenter | workstation | consumer
    source              VARCHAR
);
CREATE TABLE gpu_aliases (
    provider            VARCHAR NOT NULL,        -- '*' for names every source uses
    alias               VARCHAR NOT NULL,        -- normalized: lower case, single spaces
    memory_mib_min      INTEGER,
    memory_mib_max      INTEGER,
    gpu_model           VARCHAR NOT NULL,
    variant_exact       BOOLEAN NOT NULL
);
""",
    ),
]

SCHEMA_VERSION = MIGRATIONS[-1][0]


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    exists = con.execute(
        "select count(*) from information_schema.tables where table_name = 'schema_migrations'"
    ).fetchall()[0][0]
    if not exists:
        return 0
    return con.execute("select coalesce(max(version), 0) from schema_migrations").fetchall()[0][0]


def migrate(con: duckdb.DuckDBPyConnection, migrations: list[tuple[int, str, str]] | None = None) -> list[int]:
    """Apply every migration newer than the warehouse; return the versions applied."""
    steps = MIGRATIONS if migrations is None else migrations
    con.execute(
        "create table if not exists schema_migrations ("
        " version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    )
    have = current_version(con)
    applied = []
    for version, description, sql in steps:
        if version <= have:
            continue
        con.execute("begin transaction")
        try:
            con.execute(sql)
            con.execute(
                "insert into schema_migrations values (?, ?, now())", [version, description]
            )
            con.execute("commit")
        except Exception:
            con.execute("rollback")
            raise
        applied.append(version)
    return applied
