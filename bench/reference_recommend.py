"""The recommender's ranking as it was before the per-connection offer facts (commit 82b62a9):
one SQL statement per request that calls `fits()` once per plan, costs every fitting offer,
collapses per instance with `arg_min` and joins the wide columns back for the top N. Frozen
here as the baseline `python -m bench` measures recommend() against, in the same run, and
checks it returns the same candidates.
"""

from __future__ import annotations

from typing import Any

import duckdb

from gpuledger.warehouse.recommender.memory import MemoryEstimate, TrainingSetup, estimate
from gpuledger.warehouse.recommender.recommend import HOURS_PER_MONTH, RecommendRequest, _egress_gb, _storage_gb, sharded_plans
from gpuledger.warehouse.recommender.recommend import _filters as region_and_provider_filters


def ranked_previous(con: duckdb.DuckDBPyConnection, request: RecommendRequest) -> list[dict[str, Any]]:
    """What the previous recommend() read from the warehouse: plans, freshness, the ranked rows."""
    _, plans = _plans(con, request, request.setup())
    _freshness(con, request)
    return _ranked(con, request, plans)


def _freshness(con: duckdb.DuckDBPyConnection, request: RecommendRequest
               ) -> tuple[list[tuple], list[tuple]]:
    rows = con.execute(
        """with runs as (
               select provider,
                      max(finished_at) filter (where state = 'ok') as last_ok,
                      max(finished_at) as last_attempt,
                      arg_max(state, finished_at) as last_state
               from scrape_runs group by provider),
           counts as (select provider, count(*) as n from offers group by provider),
           known as (select provider from runs union select provider from counts)
           select k.provider, r.last_ok, r.last_attempt, r.last_state,
                  f.provider is not null as fresh, f.age_hours,
                  date_diff('second', r.last_ok, coalesce(?::timestamptz, now())) / 3600.0 as age,
                  coalesce(c.n, 0) as n
           from known k
           left join runs r on r.provider = k.provider
           left join counts c on c.provider = k.provider
           left join fresh_providers(max_age_hours := ?, as_of := ?) f on f.provider = k.provider
           order by k.provider""",
        [request.as_of, request.max_age_hours, request.as_of]).fetchall()
    fresh, stale = [], []
    for provider, last_ok, last_attempt, last_state, is_fresh, _, age, n in rows:
        if request.providers and provider not in request.providers:
            continue
        p = (provider, last_ok, last_attempt, last_state, age, n)
        (fresh if is_fresh else stale).append(p)
    return fresh, stale


def _filters(request: RecommendRequest) -> tuple[str, dict[str, Any]]:
    """The request's region/provider limits (the recommender's own _filters) and its GPU-count
    limit, as a WHERE clause over `fits` rows."""
    where, args = region_and_provider_filters(request)
    return f"gpu_count * nodes <= $max_gpus and {where}", dict(args, max_gpus=request.max_gpus)


def _fits_call(request: RecommendRequest, i: int) -> str:
    """One `fits` call for plan i; its need, GPU and node counts are parameters $need_i, $gpus_i,
    $nodes_i, the request's own ones come from _fits_params."""
    return (f"fits($need_{i}, gpus := $gpus_{i}, spot := $spot, max_age_hours := $max_age, headroom := $headroom, "
            f"train_precision := $precision, nodes := $nodes_{i}, as_of := $as_of)")


def _fits_params(request: RecommendRequest) -> dict[str, Any]:
    return {"spot": request.spot, "max_age": request.max_age_hours, "headroom": request.headroom,
            "precision": request.precision, "as_of": request.as_of}


_NARROW = ("plan_idx, provider, region, zone, instance_type, purchase_option, nodes, price_per_hour, "
           "granularity_s, minimum_s, precision_supported, gpu_vendor")
# What a Candidate shows beyond the ranking's columns, read for the top N only.
_WIDE = ", ".join(f"h.{c}" for c in (
    "interruptible", "interruption_risk", "reliability", "gpu_model", "gpu_count", "gpu_variant_exact",
    "gpu_architecture", "plan", "gpus_used", "memory_gb_per_gpu", "memory_source", "usable_gb_per_gpu",
    "interconnect", "price_per_gpu_hour", "available", "billing_source"))
_KEY = "provider, region, zone, instance_type, purchase_option"
_ORDER = "tier, sort_total, price_per_hour, provider, region, zone, instance_type, purchase_option"
_COSTED_SQL = """
with plans(plan_idx, need_gb, storage_gb, egress_gb) as (values {plan_values}),
hits as not materialized ({hits}),
chosen as (select {narrow} from hits {first_plan_only}),
storage_region as (
    select provider, region, min(usd_per_gb_month) as usd,
           arg_min(storage_class, (usd_per_gb_month, storage_class)) as storage_class
    from storage_prices group by all),
storage_provider as (
    select provider, min(usd) as usd, arg_min(storage_class, (usd, storage_class)) as storage_class
    from storage_region group by all),
egress_region as (
    select p.plan_idx, e.provider, e.region,
           sum(greatest(least(p.egress_gb, coalesce(e.tier_end_gb, p.egress_gb)) - e.tier_start_gb, 0)
               * e.usd_per_gb) as usd
    from egress_prices e cross join plans p
    where e.destination = 'internet'
    group by all),
egress_provider as (
    select plan_idx, provider, max(usd) as usd from egress_region group by all),
costed as (
    select c.*, p.need_gb, p.storage_gb, p.egress_gb,
           billed_seconds($hours * 3600.0, c.granularity_s, c.minimum_s) as billed_s,
           coalesce(sr.storage_class, sp.storage_class) as storage_class,
           coalesce(sr.usd, sp.usd, 0.0) as storage_usd_per_gb_month,
           case when sr.usd is not null then 'region' when sp.usd is not null then 'provider'
                else 'none' end as storage_source,
           coalesce(er.usd, ep.usd, 0.0) as egress_usd,
           case when er.usd is not null then 'region' when ep.usd is not null then 'provider'
                else 'none' end as egress_source,
           case when not c.precision_supported
                     or ($method = 'qlora' and coalesce(c.gpu_vendor, '') <> 'NVIDIA') then 1
                else 0 end as tier
    from chosen c
    join plans p on p.plan_idx = c.plan_idx
    left join storage_region sr on sr.provider = c.provider and sr.region = c.region
    left join storage_provider sp on sp.provider = c.provider
    left join egress_region er on er.plan_idx = c.plan_idx and er.provider = c.provider and er.region = c.region
    left join egress_provider ep on ep.plan_idx = c.plan_idx and ep.provider = c.provider),
totals as (
    select *, round(compute_usd + storage_usd + egress_usd, 6) as sort_total
    from (select *,
                 $runs * nodes * price_per_hour * billed_s / 3600.0 as compute_usd,
                 storage_gb * storage_usd_per_gb_month * $storage_hours / {hours_per_month} as storage_usd
          from costed)),
{best}
select best.*, {wide}
from best join hits h using (plan_idx, {key})
order by {best_order}
"""
# An offer fits several plans: it keeps the first (single-GPU, then fewest nodes).
_FIRST_PLAN_ONLY = f"qualify row_number() over (partition by {_KEY} order by plan_idx) = 1"
# Every place of an instance type and purchase option: the cheapest stands for them all.
_BEST_PER_INSTANCE = """grouped as (
    select arg_min(t, (t.tier, t.sort_total, t.price_per_hour, t.region, t.zone)) as pick,
           count(*) - 1 as other_locations,
           sum(count(*)) over () as considered
    from totals t
    group by t.provider, t.instance_type, t.purchase_option),
best as (
    select unnest(pick), other_locations, considered from grouped
    order by pick.tier, pick.sort_total, pick.price_per_hour, pick.provider, pick.region, pick.zone,
             pick.instance_type, pick.purchase_option
    limit $top)"""
_BEST_EVERYWHERE = f"""best as (
    select *, 0 as other_locations, count(*) over () as considered from totals
    order by {_ORDER}
    limit $top)"""


def _ranked(con: duckdb.DuckDBPyConnection, request: RecommendRequest,
            plans: list[tuple[int, int, MemoryEstimate]]) -> list[dict[str, Any]]:
    """The top candidates as dicts (columns of `fits` plus the cost columns), best first."""
    where, args = _filters(request)
    hits, values = [], []
    for i, (gpus, nodes, est) in enumerate(plans):
        hits.append(f"select {i} as plan_idx, * from {_fits_call(request, i)} where {where}")
        values.append(f"({i}, $need_{i}, $storage_gb_{i}, $egress_gb_{i})")
        args.update({f"need_{i}": est.per_gpu_gb, f"gpus_{i}": gpus, f"nodes_{i}": nodes,
                     f"storage_gb_{i}": _storage_gb(request, est), f"egress_gb_{i}": _egress_gb(request, est)})
    args.update(_fits_params(request), hours=request.hours, runs=request.runs,
                storage_hours=request.hours * request.runs, method=request.method, top=request.top)
    sql = _COSTED_SQL.format(
        plan_values=", ".join(values), hits=" union all by name ".join(hits), narrow=_NARROW, key=_KEY, wide=_WIDE,
        first_plan_only=_FIRST_PLAN_ONLY if len(plans) > 1 else "",
        hours_per_month=repr(HOURS_PER_MONTH),
        best=_BEST_PER_INSTANCE if request.per_instance else _BEST_EVERYWHERE,
        best_order=", ".join(f"best.{c.strip()}" for c in _ORDER.split(",")))
    rel = con.execute(sql, args)
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, r)) for r in rel.fetchall()]


def _plans(con: duckdb.DuckDBPyConnection, request: RecommendRequest, setup: TrainingSetup
           ) -> tuple[MemoryEstimate, list[tuple[int, int, MemoryEstimate]]]:
    single = estimate(setup, 1)
    plans: list[tuple[int, int, MemoryEstimate]] = [(1, 1, single)]
    if setup.method == "full" or request.shard_lora:
        plans += sharded_plans(request, setup, [c for (c,) in con.execute(
            "select distinct gpu_count from offers where gpu_count >= 1 and gpu_count = floor(gpu_count)"
        ).fetchall()])
    return single, plans
