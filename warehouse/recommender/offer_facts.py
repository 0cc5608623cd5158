"""The current offers as the recommender ranks them: one copy per read-only connection.

Why a copy: ranking 100,000 offers in one SQL statement cost 80-190 ms a request on two
cores, a third of it in DuckDB's binder and optimizer (the statement joins offers to five
reference tables and aggregates per instance), the rest in joins and an `arg_min` over
wide rows. What does not depend on the request (offer_facts(): memory per GPU, billing
increment, interconnect; ids for each place and each instance type; storage and egress
prices) is read once into a temp table and numpy arrays. A request then runs one small
query over the temp table, whose fit rule is the SQL macro `fit_ok` that `fits` uses too
(recommend.py), and ranks the fitting offers with numpy.

When the copy is kept: on a read-only connection nothing can change the warehouse while it
is open (DuckDB's file lock keeps every writer out), so it is built on the first request
and kept for the connection's life. On a writable connection it is built for each request
and dropped afterwards, so a request always sees the connection's own latest writes.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from collections.abc import Iterator, Sequence

import duckdb
import numpy as np
import pyarrow as pa

TABLE = "gpuledger_offer_facts"  # a TEMP table: it lives in the connection, never in the file

# What a Candidate shows, and what costing needs. KEY orders the offers: pos (an offer's index in
# every array) is its rank in that order, so ordering by pos breaks ties exactly as ordering by
# the key's text does.
_COLUMNS = (
    "provider", "region", "zone", "instance_type", "purchase_option", "price_per_hour", "price_per_gpu_hour",
    "gpu_model", "gpu_vendor", "gpu_count", "gpu_variant_exact", "gpu_bf16", "gpu_architecture",
    "memory_gb_per_gpu", "memory_source", "interconnect", "fast_interconnect", "multinode_fabric",
    "interruptible", "interruption_risk", "reliability", "available", "granularity_s", "minimum_s", "billing_source")
KEY = ("provider", "region", "zone", "instance_type", "purchase_option")

# pos: the offer's rank in KEY order; gid: one id per provider/instance type/purchase option (what
# the recommender collapses on); place: one id per provider/region (what storage and egress are
# priced by); provider_id: one per provider.
_BUILD_SQL = f"""
create or replace temp table {TABLE} as
with f as (select {', '.join(_COLUMNS)} from offer_facts()),
providers as (
    select provider, (row_number() over ())::integer - 1 as provider_id from (select distinct provider from f)),
groups as (
    select provider, instance_type, purchase_option, (row_number() over ())::integer - 1 as gid
    from (select distinct provider, instance_type, purchase_option from f)),
places as (
    select provider, region, (row_number() over ())::integer - 1 as place
    from (select distinct provider, region from f))
select (row_number() over (order by {', '.join(f'f.{k}' for k in KEY)}))::integer - 1 as pos,
       g.gid, p.place, v.provider_id, f.*
from f
join providers v on v.provider = f.provider
join groups g on g.provider = f.provider and g.instance_type = f.instance_type
              and g.purchase_option = f.purchase_option
join places p on p.provider = f.provider and p.region = f.region
"""


@dataclass
class OfferFacts:
    """Arrays are indexed by pos; place arrays by place id."""

    offers: pa.Table  # the temp table in pos order: every column of _COLUMNS, and the ids
    price_per_hour: np.ndarray
    granularity_s: np.ndarray
    minimum_s: np.ndarray
    nvidia: np.ndarray  # bool: gpu_vendor is NVIDIA (QLoRA's 4-bit kernels target CUDA)
    provider_id: np.ndarray  # index into provider_names
    provider_names: list[str]
    gid: np.ndarray
    place: np.ndarray
    group_count: int
    gpu_counts: list[float]  # the distinct GPU counts per node on offer
    places: list[tuple[str, str]]  # place id -> (provider, region)
    offers_per_provider: dict[str, int]
    storage_usd: np.ndarray  # place id -> USD per GB-month (0 when none is known)
    storage_class: list[str | None]
    storage_source: list[str]  # region | provider | none
    egress_tiers: dict[tuple[str, str], list[tuple[float, float | None, float]]]  # internet egress, per region

    def details(self, positions: Sequence[int]) -> list[dict[str, object]]:
        """Every column of a handful of offers (the top N), in the order given. (Slices, not
        Table.take: importing pyarrow.compute for it cost 0.3 s on a process's first request.)"""
        return [self.offers.slice(p, 1).to_pylist()[0] for p in positions]


def is_read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "select readonly from duckdb_databases() where database_name = current_database()").fetchall()
    return bool(rows and rows[0][0])


_KEPT: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, OfferFacts] = weakref.WeakKeyDictionary()


@contextmanager
def offer_facts(con: duckdb.DuckDBPyConnection) -> Iterator[OfferFacts]:
    """The facts of `con`'s current offers, with temp.gpuledger_offer_facts in place while in use."""
    kept = _KEPT.get(con)
    if kept is not None and con.execute(
            "select count(*) from duckdb_tables() where temporary and table_name = ?", [TABLE]).fetchall()[0][0]:
        yield kept
        return
    facts = _build(con)
    if is_read_only(con):
        _KEPT[con] = facts
        yield facts
        return
    try:
        yield facts
    finally:
        con.execute(f"drop table if exists temp.{TABLE}")


def _build(con: duckdb.DuckDBPyConnection) -> OfferFacts:
    con.execute(_BUILD_SQL)
    cols = con.execute(
        f"select pos, gid, place, provider_id, price_per_hour, granularity_s, minimum_s, "
        f"coalesce(gpu_vendor = 'NVIDIA', false) as nvidia from temp.{TABLE}").fetchnumpy()
    pos = np.asarray(cols["pos"])

    def by_pos(name: str, dtype: type) -> np.ndarray:
        out = np.empty(len(pos), dtype=dtype)
        out[pos] = np.asarray(cols[name], dtype=dtype)
        return out

    gid = by_pos("gid", np.int32)
    places = [(p, r) for _, p, r in sorted(con.execute(
        f"select distinct place, provider, region from temp.{TABLE}").fetchall())]
    storage_usd, storage_class, storage_source = _storage_by_place(con, places)
    egress: dict[tuple[str, str], list[tuple[float, float | None, float]]] = {}
    for provider, region, start, end, usd in con.execute(
            "select provider, region, tier_start_gb, tier_end_gb, usd_per_gb from egress_prices "
            "where destination = 'internet'").fetchall():
        egress.setdefault((provider, region), []).append((start, end, usd))
    counts = con.execute(
        f"select provider_id, provider, count(*) from temp.{TABLE} group by all order by provider_id").fetchall()
    return OfferFacts(
        offers=con.sql(f"select * from temp.{TABLE} order by pos").to_arrow_table(),
        price_per_hour=by_pos("price_per_hour", np.float64), granularity_s=by_pos("granularity_s", np.float64),
        minimum_s=by_pos("minimum_s", np.float64), nvidia=by_pos("nvidia", np.bool_),
        provider_id=by_pos("provider_id", np.int32), provider_names=[name for _, name, _ in counts],
        gid=gid, place=by_pos("place", np.int32), group_count=int(gid.max()) + 1 if len(pos) else 0,
        gpu_counts=[c for (c,) in con.execute(
            f"select distinct gpu_count from temp.{TABLE} order by 1").fetchall()],
        places=places, offers_per_provider={name: n for _, name, n in counts},
        storage_usd=storage_usd, storage_class=storage_class, storage_source=storage_source, egress_tiers=egress)


def _storage_by_place(con: duckdb.DuckDBPyConnection, places: list[tuple[str, str]]
                      ) -> tuple[np.ndarray, list[str | None], list[str]]:
    """Each place's storage price: the region's cheapest class, else the provider's cheapest
    anywhere, else none (0 USD, flagged). Ties go to the first class by name."""
    in_region: dict[tuple[str, str], tuple[float, str]] = {}
    anywhere: dict[str, tuple[float, str]] = {}
    for provider, region, cls, usd in con.execute(
            "select provider, region, storage_class, usd_per_gb_month from storage_prices").fetchall():
        in_region[(provider, region)] = min(in_region.get((provider, region), (usd, cls)), (usd, cls))
        anywhere[provider] = min(anywhere.get(provider, (usd, cls)), (usd, cls))
    usd_by_place, classes, sources = np.zeros(len(places)), [], []
    for i, (provider, region) in enumerate(places):
        if (provider, region) in in_region:
            (usd_by_place[i], cls), source = in_region[(provider, region)], "region"
        elif provider in anywhere:
            (usd_by_place[i], cls), source = anywhere[provider], "provider"
        else:
            cls, source = None, "none"
        classes.append(cls)
        sources.append(source)
    return usd_by_place, classes, sources
