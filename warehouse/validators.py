"""What proved each source's answers current when its rows were last loaded (an ETag, a Last-Modified
date, a price list version: adapters.base.SourceContext.new_validators), for its next fetch.

Only a complete load's are kept (no enrichment missing, no offer held back), so the warehouse holds
exactly what they validate; the next refresh hands them back and skips what they prove unchanged.
"""

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
