"""The recommender's SQL macros (sql/recommend.sql and warehouse.freshness's), installed as TEMP macros
on the connection that uses them: the store never installs them, `gpuledger macros` prints them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from gpuledger.warehouse.freshness import MACROS_SQL as FRESHNESS_MACROS_SQL

SQL_PATH = Path(__file__).parent / "sql" / "recommend.sql"
MACROS_SQL = FRESHNESS_MACROS_SQL + SQL_PATH.read_text()
# Installed with the macros: a connection that has this very version skips the reinstall.
MACROS_VERSION = hashlib.sha256(MACROS_SQL.encode()).hexdigest()[:16]


def macros_sql() -> str:
    """Every macro and gpuledger_macros_version() as TEMP macros: fine on a read-only connection,
    gone with it, never written to the file."""
    sql = MACROS_SQL + f"\ncreate or replace macro gpuledger_macros_version() as '{MACROS_VERSION}';\n"
    return sql.replace("create or replace macro", "create or replace temp macro")


def install_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) the recommender's macros on `con`, as TEMP macros."""
    con.execute(macros_sql())


def macros_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when `con` sees this code's version of the macros (persisted or temporary)."""
    try:
        return con.execute("select gpuledger_macros_version()").fetchall()[0][0] == MACROS_VERSION
    except duckdb.Error:  # not installed, or installed by an older gpuledger
        return False
