"""The recommender's SQL macros (sql/recommend.sql, plus the freshness macros of
warehouse.freshness), installed on the connection that uses them.

The store never installs them: `recommend()` installs them as TEMP macros on its own
connection (read-only safe, nothing is written to the file), `gpuledger sql` does the same,
and `gpuledger macros` prints them for a plain DuckDB session to `.read`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from gpuledger.warehouse.freshness import MACROS_SQL as FRESHNESS_MACROS_SQL

SQL_PATH = Path(__file__).parent / "sql" / "recommend.sql"
MACROS_SQL = FRESHNESS_MACROS_SQL + SQL_PATH.read_text()
# Installed with the macros, so a connection that already has this very version skips the
# reinstall: recommend() runs per request.
MACROS_VERSION = hashlib.sha256(MACROS_SQL.encode()).hexdigest()[:16]


def macros_sql() -> str:
    """Every macro's definition, and gpuledger_macros_version(), as TEMP macros: they can be created
    on a read-only connection, live as long as it, and never change the warehouse file."""
    sql = MACROS_SQL + f"\ncreate or replace macro gpuledger_macros_version() as '{MACROS_VERSION}';\n"
    return sql.replace("create or replace macro", "create or replace temp macro")


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) the recommender's macros on `con`, as TEMP macros: provider_freshness,
    fresh_providers, billed_seconds, is_fast_interconnect, offer_facts, precision_ok, fit_ok, fits."""
    con.execute(macros_sql())


def macros_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when `con` sees this code's version of the macros (persisted or temporary)."""
    try:
        return con.execute("select gpuledger_macros_version()").fetchall()[0][0] == MACROS_VERSION
    except duckdb.Error:  # not installed, or installed by an older gpuledger
        return False
