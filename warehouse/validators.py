"""What proved each source's answers current at its last complete load (ETag, Last-Modified, a price list
version: SourceContext.new_validators): handed back to its next fetch, which skips what they prove unchanged."""

from __future__ import annotations

from datetime import datetime
from itertools import groupby
from operator import itemgetter
from pathlib import Path

import duckdb


def read_validators(db: str | Path | None) -> dict[str, dict[str, str]]:
    """provider -> {key: validator} of the warehouse at `db`; empty before its first refresh."""
    from gpuledger.warehouse.store import db_path, open_reader

    if not db_path(db).exists():
        return {}
    with open_reader(db) as con:
        if not con.execute("select count(*) from information_schema.tables where table_name = 'fetch_validators'"
                           ).fetchall()[0][0]:
            return {}
        rows = con.execute("select provider, key, validator from fetch_validators order by all").fetchall()
    return {provider: {key: validator for _, key, validator in group}
            for provider, group in groupby(rows, itemgetter(0))}


def keep_validators(con: duckdb.DuckDBPyConnection, provider: str, validators: dict[str, str], run_id: str,
                    now: datetime) -> None:
    """The provider's validators become `validators` (inside the caller's transaction)."""
    con.execute("delete from fetch_validators where provider = ?", [provider])
    if validators:
        con.executemany("insert into fetch_validators values (?, ?, ?, ?, ?)",
                        [(provider, k, v, run_id, now) for k, v in sorted(validators.items())])
