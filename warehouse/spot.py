"""Spot price history (AWS DescribeSpotPriceHistory): the observations a source emits, their loading
(only those not held yet) and, per region, the newest stored one, where the next fetch starts."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuledger.warehouse.records import Batch

if TYPE_CHECKING:  # warehouse/schema.py takes the columns of spot_price_history from SpotPricePoint
    import duckdb
    import pyarrow as pa

# The `since` mark of a region's spot price history: the key a source reads from its context.
SINCE_KEY = "spot_price_history:{region}"
ALREADY_STORED = "already in the warehouse"
STORED_WITH_OTHER_PRICE = "already in the warehouse with another price (the stored one kept)"


class SpotPricePoint(BaseModel):
    """One published spot price: in effect from `observed_at` until the series' next one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    zone: str = Field(min_length=1)  # the availability zone
    instance_type: str = Field(min_length=1)
    product_description: str = Field(min_length=1)  # "Linux/UNIX"
    observed_at: datetime  # when the price took effect, as the provider stamps it
    spot_price_per_hour: float
    source_currency: str = Field(pattern=r"^[A-Z]{3}$")

    @field_validator("observed_at")
    @classmethod
    def _aware_utc(cls, v: datetime) -> datetime:
        if v.tzinfo is None:
            raise ValueError("observed_at has no time zone")
        return v.astimezone(timezone.utc)

    @field_validator("spot_price_per_hour")
    @classmethod
    def _positive(cls, v: float) -> float:
        if not math.isfinite(v) or v <= 0:
            raise ValueError(f"spot price must be a positive number, got {v}")
        return v


def add_spot_price(batch: Batch, ref: str, raw: Any, **fields: Any) -> bool:
    """Validate one observation into `batch.spot_prices`, or quarantine it (kind spot_price)."""
    return batch.add_row("spot_price", SpotPricePoint, batch.spot_prices, ref, raw, fields)


_KEY = tuple(SpotPricePoint.model_fields)[:6]


def load_spot_history(con: duckdb.DuckDBPyConnection, rows: pa.Table, run_id: str,
                      now: datetime) -> tuple[int, Counter[str]]:
    """Append the observations (SpotPricePoint's fields) the warehouse does not hold (inside the caller's
    transaction); return (stored, counts of the others by reason)."""
    from gpuledger.warehouse.store import registered

    on = " and ".join(f"h.{c} = n.{c}" for c in _KEY)
    with registered(con, _spot_new=rows):
        stored_same, stored_other = con.execute(
            f"""select count(*) filter (where h.spot_price_per_hour = n.spot_price_per_hour),
                       count(*) filter (where h.spot_price_per_hour <> n.spot_price_per_hour)
                from _spot_new n join spot_price_history h on {on}""").fetchall()[0]
        con.execute(
            f"""insert into spot_price_history ({', '.join(SpotPricePoint.model_fields)}, run_id, loaded_at)
                select n.*, $run, $now from _spot_new n
                where not exists (select 1 from spot_price_history h where {on})""",
            {"run": run_id, "now": now})
    skipped = Counter({ALREADY_STORED: stored_same, STORED_WITH_OTHER_PRICE: stored_other})
    return rows.num_rows - stored_same - stored_other, +skipped


def history_since(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, str]]:
    """provider -> {SINCE_KEY of each region: its newest stored observation, ISO 8601 UTC}."""
    if not con.execute("select count(*) from information_schema.tables "
                       "where table_name = 'spot_price_history'").fetchall()[0][0]:
        return {}
    out: dict[str, dict[str, str]] = {}
    for provider, region, newest in con.execute(
            "select provider, region, max(observed_at) from spot_price_history group by all order by all").fetchall():
        out.setdefault(provider, {})[SINCE_KEY.format(region=region)] = newest.astimezone(timezone.utc).isoformat()
    return out


def read_since(db: str | Path | None) -> dict[str, dict[str, str]]:
    """history_since of the warehouse at `db`; empty when it does not exist yet (a first run)."""
    from gpuledger.warehouse.store import db_path, open_reader

    if not db_path(db).exists():
        return {}
    with open_reader(db) as con:
        return history_since(con)
