"""Availability over time: each merge appends every offer's signal to `availability_history` (one row per
key, UTC day and signal); `availability_obtainable_at(as_of)` gives the 7- and 30-day share with capacity."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from gpuledger.warehouse.records import Batch

if TYPE_CHECKING:  # a fetch process, which makes Observations, loads no DuckDB
    import duckdb

    from gpuledger.warehouse.pending import ScrapeOutcome

# The windows are hours, 7 x 24 and 30 x 24: DuckDB counts a day interval in the session's time zone, where a
# window across a DST change is an hour longer or shorter (a DuckDB CLI or pandas session is in local time).
SIGNAL = ("available", "available_count", "availability_level")
_KEY = ("provider", "region", "zone", "instance_type", "gpu_model")

SQL = """
create or replace macro availability_obtainable_at(as_of) as table
select gpu_model, provider, region,
       n_7d as observations_7d, round(c_7d / nullif(n_7d, 0), 4) as obtainable_7d,
       n_30d as observations_30d, round(c_30d / n_30d, 4) as obtainable_30d, last_observed
from (select gpu_model, provider, region,
             count(capacity) filter (where observed_at > as_of - to_hours(7 * 24)) as n_7d,
             count(*) filter (where capacity and observed_at > as_of - to_hours(7 * 24)) as c_7d,
             count(capacity) as n_30d, count(*) filter (where capacity) as c_30d, max(observed_at) as last_observed
      from (select *, coalesce(available, available_count > 0) as capacity from availability_history
            where observed_at > as_of - to_hours(30 * 24) and observed_at <= as_of)
      group by all)
where n_30d > 0;
create or replace view availability_obtainable as select * from availability_obtainable_at(now());
"""


class Observation(BaseModel):
    """One availability signal of one offer at one time, as the source stated it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    zone: str = ""
    instance_type: str = Field(min_length=1)
    gpu_model: str = Field(min_length=1)
    observed_at: AwareDatetime
    available: bool | None = None
    available_count: int | None = Field(default=None, ge=0)
    availability_level: str | None = None


def add_observation(batch: Batch, ref: str, raw: Any, **fields: Any) -> bool:
    """Validate one earlier observation into `batch.availability`, or quarantine it (kind availability)."""
    return batch.add_row("availability", Observation, batch.availability, ref, raw, fields)


def record(con: duckdb.DuckDBPyConnection, outcome: ScrapeOutcome, run_id: str, notes: list[str]) -> None:
    """Append a merged scrape's signals (its offers' at its start, and earlier observations it handed over);
    counts go to `notes`. Not the offers' when a signal enrichment failed: nobody observed those values now."""
    import pyarrow.compute as pc

    from gpuledger.warehouse.pending import records_table

    failed = [d for d in outcome.degraded if set(d.get("columns", ())) & set(SIGNAL)]
    # an enrichment that failed in some regions only leaves the others' signals fresh: those are recorded
    everywhere = any(not d.get("regions") for d in failed)
    stale = sorted({r for d in failed for r in d.get("regions") or ()})
    observed = not (outcome.side_tables_only or everywhere) and outcome.count("offers")
    offers = outcome.table("offers") if observed else records_table("offers", [])
    if stale and observed:
        offers = offers.filter(~pc.field("region").isin(stale))
    earlier = outcome.table("availability") if outcome.count("availability") else records_table("availability", [])
    _store(con, offers, earlier, outcome.started_at, run_id, notes)
    if failed:
        names = ", ".join(d["name"] for d in failed)
        notes.append(f"availability history: the offers' signals not recorded ({names} failed)" if everywhere else
                     f"availability history: the offers' signals in {', '.join(stale)} not recorded "
                     f"({names} failed there)")


def record_unchanged(con: duckdb.DuckDBPyConnection, provider: str, at: datetime, run_id: str,
                     notes: list[str]) -> None:
    """An answer proven unchanged (HTTP 304) still observes: the provider's current offers, which are all that
    answer's (validators are kept only then), say again at `at` what they said."""
    from gpuledger.warehouse.pending import records_table

    offers = con.sql("select * from offers where provider = $p", params={"p": provider}).to_arrow_table()
    _store(con, offers, records_table("availability", []), at, run_id, notes)


def _store(con: duckdb.DuckDBPyConnection, offers: Any, earlier: Any, at: datetime, run_id: str,
           notes: list[str]) -> None:
    from gpuledger.warehouse.store import registered  # the store imports this module

    key, signal = ", ".join(_KEY), ", ".join(SIGNAL)
    nothing = " and ".join(f"{c} is null" for c in SIGNAL)
    # one row per key, UTC day and signal: the day's first observation of it
    signals = f"""select {key}, min(observed_at) as observed_at, {signal}
                  from (select {key}, $at as observed_at, {signal} from _avail_offers
                        union all select {key}, observed_at, {signal} from _avail_earlier)
                  where not ({nothing}) group by {key}, {signal}, {_day('')}"""
    same = " and ".join([f"h.{c} = n.{c}" for c in _KEY] + [f"h.{c} is not distinct from n.{c}" for c in SIGNAL])
    at_param = {"at": at}
    with registered(con, _avail_offers=offers, _avail_earlier=earlier):
        silent = con.execute(f"select count(*) from _avail_offers where {nothing}").fetchall()[0][0]
        received = con.execute(f"select count(*) from ({signals})", at_param).fetchall()[0][0]
        stored = con.execute(
            f"""insert into availability_history ({key}, observed_at, {signal}, run_id)
                select {key}, observed_at, {signal}, $run from ({signals}) n
                where not exists (select 1 from availability_history h where {same}
                                  and {_day('h.')} = {_day('n.')})""", at_param | {"run": run_id}).fetchall()[0][0]
    if received:  # a source that publishes no availability at all gets no note
        notes.append(f"availability history: {stored} of {received} signals stored"
                     + (f" ({received - stored} already stored for their day)" if received > stored else "")
                     + (f"; {silent} offers carry no availability signal" if silent else ""))


def _day(alias: str) -> str:
    return f"({alias}observed_at at time zone 'UTC')::date"


def obtainable(con: duckdb.DuckDBPyConnection, as_of: datetime | None = None,
               keys: Iterable[tuple[str, str, str]] | None = None
               ) -> dict[tuple[str, str, str], tuple[float | None, float | None]]:
    """(gpu_model, provider, region) -> (share with capacity over 7 days, over 30 days) as of
    `as_of` (default: now), for `keys` (default: all); {} on a warehouse without the history."""
    import duckdb

    where, params = "", {"at": as_of}
    if keys is not None:  # only what is asked: filters the history before the aggregation
        asked = list(keys)
        params.update(g=[k[0] for k in asked], p=[k[1] for k in asked], r=[k[2] for k in asked])
        where = "where list_contains($g, gpu_model) and list_contains($p, provider) and list_contains($r, region)"
    try:
        rows = con.execute("select gpu_model, provider, region, obtainable_7d, obtainable_30d "
                           f"from availability_obtainable_at(coalesce($at, now())) {where}", params).fetchall()
    except duckdb.CatalogException:  # a warehouse older than the history
        return {}
    return {(g, p, r): (s7, s30) for g, p, r, s7, s30 in rows}
