"""Time-weighted statistics of interruptible prices (SQL that warehouse/schema.py creates): each price held
as an interval (`spot_price_intervals`), weighed by the seconds it held in the 7, 30 and 90 days before as_of
(24-hour days: a window across a DST change of a session in local time is as long as in UTC)."""

from __future__ import annotations

# The product whose spot price an offer carries (the AWS adapter's offers are Linux).
SPOT_HISTORY_PRODUCT = "Linux/UNIX"
_KEY = "provider, region, zone, instance_type, purchase_option"
_BY_WINDOW = f"partition by {_KEY}, window_days"
_BY_SOURCE = f"partition by {_KEY}, source"


def _share_above(threshold: str) -> str:
    """Share of the covered time the price was above `threshold` x on-demand (NULL: no on-demand)."""
    return (f"case when any_value(on_demand_price_per_hour) is null then null else "
            f"coalesce(sum(held_s) filter (where price_per_hour > {threshold} * on_demand_price_per_hour), 0)"
            f" / any_value(covered_s) end")


SQL = f"""
create or replace view spot_price_intervals as
with versions as (
    select provider, region, zone, instance_type, 'spot' as purchase_option,
           'spot_price_history' as source, spot_price_per_hour as price_per_hour, observed_at as valid_from,
           lead(observed_at) over (partition by provider, region, zone, instance_type, product_description
                                   order by observed_at) as valid_to
    from spot_price_history
    where product_description = '{SPOT_HISTORY_PRODUCT}'
    union all
    select h.provider, h.region, h.zone, h.instance_type, h.purchase_option,
           'offer_history' as source, h.price_per_hour, h.valid_from, h.valid_to
    from offer_history h
    where h.purchase_option in ('spot', 'interruptible', 'low_priority')
      and not exists (select 1 from spot_price_history s
                      where s.provider = h.provider and s.region = h.region and s.zone = h.zone
                        and s.instance_type = h.instance_type and s.product_description = '{SPOT_HISTORY_PRODUCT}')),
-- a version that only restates the price before it (its availability changed) continues that price's interval
marked as (
    select *, coalesce(lag(price_per_hour) over w = price_per_hour and lag(valid_to) over w = valid_from,
                       false) as continues
    from versions window w as ({_BY_SOURCE} order by valid_from)),
numbered as (
    select *, count(*) filter (where not continues) over ({_BY_SOURCE} order by valid_from
                                                         rows between unbounded preceding and current row) as period
    from marked)
select provider, region, zone, instance_type, purchase_option, source, any_value(price_per_hour) as price_per_hour,
       min(valid_from) as valid_from, case when count(valid_to) = count(*) then max(valid_to) end as valid_to
from numbered
group by provider, region, zone, instance_type, purchase_option, source, period;

create or replace macro spot_price_stats_at(as_of, above_pct := 100) as table
with ref as (select as_of::timestamptz as t1, above_pct::double as pct),
clipped as (
    select i.provider, i.region, i.zone, i.instance_type, i.purchase_option, i.source, w.window_days,
           i.price_per_hour,
           greatest(i.valid_from, ref.t1 - to_hours(24 * w.window_days)) as held_from,
           least(coalesce(i.valid_to, ref.t1), ref.t1) as held_to
    from spot_price_intervals i, (select unnest([7, 30, 90]) as window_days) w, ref),
weighted as (
    select *, epoch(held_to) - epoch(held_from) as held_s from clipped where held_to > held_from),
on_demand as (
    select provider, region, instance_type, min(price_per_hour) as on_demand_price_per_hour
    from offers where purchase_option = 'on_demand' group by all),
ranked as (
    select w.*, od.on_demand_price_per_hour, ref.pct,
           sum(held_s) over ({_BY_WINDOW} order by price_per_hour
                             rows between unbounded preceding and current row) as held_at_or_below_s,
           sum(held_s) over ({_BY_WINDOW}) as covered_s,
           sum(held_s * price_per_hour) over ({_BY_WINDOW}) / sum(held_s) over ({_BY_WINDOW}) as mean_price
    from weighted w left join on_demand od using (provider, region, instance_type), ref)
select {_KEY}, window_days, any_value(source) as source, count(*) as price_periods,
       any_value(covered_s) / 3600.0 as hours_covered,
       min(price_per_hour) as min_price,
       min(price_per_hour) filter (where held_at_or_below_s >= 0.5 * covered_s) as p50_price,
       min(price_per_hour) filter (where held_at_or_below_s >= 0.95 * covered_s) as p95_price,
       max(price_per_hour) as max_price,
       any_value(mean_price) as mean_price,
       sqrt(sum(held_s * (price_per_hour - mean_price) ^ 2) / any_value(covered_s))
           / any_value(mean_price) as volatility_cv,
       any_value(on_demand_price_per_hour) as on_demand_price_per_hour,
       {_share_above("0.50")} as share_above_50_pct_on_demand,
       {_share_above("0.75")} as share_above_75_pct_on_demand,
       {_share_above("1.00")} as share_above_100_pct_on_demand,
       any_value(pct) as above_pct,
       {_share_above("pct / 100.0")} as share_above_pct_on_demand
from ranked group by all;

create or replace view spot_price_stats as select * from spot_price_stats_at(now());
"""
