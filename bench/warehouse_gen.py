"""A warehouse holding a year of nightly history, for the merge, query and export benchmarks.

`build(path, offers=100_000, nights=365)` makes a real gpuledger warehouse (open_writer:
schema, GPU reference tables) and fills it in SQL:

- `offers` keys: (provider, region, zone, instance_type, purchase_option), 8 providers,
  40 regions, 2,500 instance types, ~30% spot (per zone) and 70% on-demand; GPU models from
  warehouse/data/gpu_models.csv, 1-8 GPUs;
- `offer_history`: on each of `nights` nights every offer changes price with probability
  CHANGE_RATE (0.27), so ~1 + 364 x 0.27 = ~99 versions per offer: ~10 million rows for 100k
  offers. Rows land night by night as a nightly load writes them. Open versions carry the
  real content_hash (warehouse.store.content_hash_sql), closed ones a stand-in (never compared);
- `scrape_runs`: one ok run per provider per night, the last one an hour ago (so every
  provider is fresh for the recommender); `providers` from the sources' ProviderSpec facts;
  a few storage and egress prices per provider and region.

`next_night_batch(con, provider, night)` gives the Offer records of one provider's next scrape
(27% of prices changed, 0.5% offers gone, 0.5% new), for the merge benchmark.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

PROVIDERS = ["aws", "azure", "coreweave", "gcp", "hyperstack", "lambda", "runpod", "vastai"]
N_REGIONS = 40
N_TYPES = 2500
CHANGE_RATE = 0.27


def _h(expr: str, salt: int) -> str:
    """A stable pseudo-random integer in SQL (0 .. 2^31) from an integer expression."""
    return f"(hash(({expr}) * 1000003 + {salt}) % 2147483648)"


def build(path: str | Path, offers: int = 100_000, nights: int = 365, now: datetime | None = None) -> dict[str, Any]:
    from gpuledger.adapters.registry import source_module
    from gpuledger.warehouse.schema import OFFERS
    from gpuledger.warehouse.store import content_hash_sql, upsert_provider_facts, open_writer

    t0 = time.perf_counter()
    path = Path(path)
    for p in (path, Path(str(path) + ".wal")):
        p.unlink(missing_ok=True)
    now = now or datetime.now(timezone.utc).replace(microsecond=0)
    start = now - timedelta(days=nights - 1, hours=1)
    con = open_writer(path)
    con.execute("set preserve_insertion_order = true")
    regions = [f"{c}-{d}-{n}" for c in ("us", "eu", "ap", "sa", "ca") for d in ("east", "west", "north", "south")
               for n in (1, 2)][:N_REGIONS]
    con.execute("create temp table regions as select unnest($r) as region, generate_subscripts($r, 1) - 1 as r",
                {"r": regions})
    con.execute("create temp table provs as select unnest($p) as provider, generate_subscripts($p, 1) - 1 as p",
                {"p": PROVIDERS})
    con.execute("""create temp table gpus as
                   select gpu_model, vendor, memory_gb, row_number() over (order by gpu_model) - 1 as g
                   from gpu_models""")
    n_gpus = con.execute("select count(*) from gpus").fetchall()[0][0]
    # One row per offer: instance type t and region r make the key unique.
    con.execute(f"""
        create temp table keys as
        with k as (
            select i, i % {N_TYPES} as t, (i // {N_TYPES}) % {N_REGIONS} as r from range({offers}) s(i))
        select k.i, pv.provider, rg.region,
               case when {_h('k.t', 1)} % 10 < 3 then rg.region || chr(97 + ({_h('k.i', 2)} % 3)::int) else '' end as zone,
               'gx' || (k.t // 6) || '.' || ['xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '48xlarge'][k.t % 6 + 1]
                   as instance_type,
               case when {_h('k.t', 1)} % 10 < 3 then 'spot' else 'on_demand' end as purchase_option,
               g.gpu_model, g.vendor as gpu_vendor, g.memory_gb,
               [1, 1, 2, 4, 8, 8][k.t % 6 + 1]::double as gpu_count,
               0.2 + ({_h('k.i', 3)} % 4000) / 1000.0 as base_price
        from k
        join provs pv on pv.p = k.t % {len(PROVIDERS)}
        join regions rg on rg.r = k.r
        join gpus g on g.g = {_h('k.t', 4)} % {n_gpus}
    """)
    cols = """provider, region, zone, instance_type, purchase_option, gpu_model, true as gpu_variant_exact,
              gpu_model as gpu_name_reported, gpu_vendor, gpu_count, memory_gb as gpu_memory_gb,
              memory_gb as gpu_memory_gb_nominal, memory_gb * gpu_count as total_gpu_memory_gb,
              8 * gpu_count as vcpus, 64 * gpu_count as ram_gb, 250 * gpu_count as local_disk_gb,
              case when gpu_count >= 8 then 'NVSwitch' when gpu_count > 1 then 'PCIe' end as interconnect,
              25 * gpu_count as network_gbps, case when gpu_count >= 8 then 'EFA' end as multinode_fabric,
              price * gpu_count as price_per_hour, price as price_per_gpu_hour, 'USD' as source_currency,
              price * gpu_count as source_price_per_hour, null::timestamptz as price_observed_at,
              1 as billing_granularity_s, 60 as minimum_charge_s, true as available, 3 as available_count,
              'offered' as availability_level,
              case when purchase_option = 'spot' then '<5%' end as interruption_risk,
              case when purchase_option = 'spot' then 60.0 end as spot_savings_pct, null::double as reliability,
              '{}' as provider_data, provider as operated_by, null::integer as term_months,
              null::varchar as payment_option,
              case when purchase_option = 'spot' then 'low' else 'none' end as interruption_risk_level,
              case when purchase_option = 'spot' then 5.0 end as interruption_rate_max_pct,
              case when purchase_option = 'spot' then 'aws_spot_advisor' else 'not_interruptible' end
                  as interruption_risk_source, false as gpu_memory_from_canon"""
    # Versions: night 0 for every offer, then a change with probability CHANGE_RATE each night.
    con.execute(f"""
        create temp table versions as
        select k.*, n.d,
               round(k.base_price * (0.7 + ({_h('k.i * 1000 + n.d', 5)} % 600) / 1000.0), 4) as price
        from keys k, range({nights}) n(d)
        where n.d = 0 or {_h('k.i * 1000 + n.d', 6)} % 1000 < {int(CHANGE_RATE * 1000)}
    """)
    n_versions = con.execute("select count(*) from versions").fetchall()[0][0]
    last = nights - 1
    con.execute(f"""
        create temp table hist as
        select {cols}, d, i,
               lead(d) over (partition by i order by d) as next_d
        from versions
    """)
    spec_cols = ", ".join(OFFERS.columns)
    con.execute(f"""
        insert into offer_history ({spec_cols}, content_hash, valid_from, valid_to, run_id, closed_by_run_id)
        select {spec_cols},
               case when next_d is null then {content_hash_sql(OFFERS)} else md5(i::varchar || '/' || d::varchar) end,
               $start + to_days(d::int), $start + to_days(next_d::int),
               'run-' || provider || '-' || d, case when next_d is not null then 'run-' || provider || '-' || next_d end
        from hist order by d, i
    """, {"start": start})
    con.execute(f"""
        insert into offers ({spec_cols}, content_hash, first_seen, last_seen, run_id)
        select {', '.join('h.' + c for c in OFFERS.columns)}, h.content_hash, $start, $start + to_days({last}),
               h.run_id
        from offer_history h where h.valid_to is null
        order by h.provider, h.region, h.instance_type
    """, {"start": start})
    con.execute(f"""
        insert into scrape_runs (run_id, refresh_id, provider, mode, started_at, finished_at, state, rows_parsed,
                                 rows_loaded, requests, duration_s)
        select 'run-' || p.provider || '-' || n.d, 'refresh-' || n.d, p.provider, 'live',
               $start + to_days(n.d::int), $start + to_days(n.d::int) + to_minutes(5), 'ok',
               c.n, c.n, 100, 300
        from provs p, range({nights}) n(d), (select provider, count(*) n from offers group by provider) c
        where c.provider = p.provider
    """, {"start": start})
    con.execute("""
        insert into storage_prices (provider, region, storage_class, usd_per_gb_month, source_currency,
                                    source_usd_per_gb_month, description, content_hash, first_seen, last_seen, run_id)
        select p.provider, r.region, 'ssd', 0.08 + r.r / 1000.0, 'USD', 0.08 + r.r / 1000.0, '', md5(p.provider || r.region),
               $t, $t, 'run-' || p.provider || '-0' from provs p, regions r
    """, {"t": now})
    con.execute("""
        insert into egress_prices (provider, region, destination, tier_start_gb, tier_end_gb, usd_per_gb,
                                   source_currency, source_usd_per_gb, description, content_hash, first_seen,
                                   last_seen, run_id)
        select p.provider, r.region, 'internet', t.s, t.e, t.u, 'USD', t.u, '', md5(p.provider || r.region || t.s),
               $t, $t, 'run-' || p.provider || '-0'
        from provs p, regions r, (values (0.0, 10240.0, 0.09), (10240.0, null, 0.085)) t(s, e, u)
    """, {"t": now})
    for table, history in (("storage_prices", "storage_price_history"), ("egress_prices", "egress_price_history")):
        cols_ = [r[0] for r in con.execute(f"select column_name from information_schema.columns "
                                           f"where table_name = '{table}' and column_name not in "
                                           f"('first_seen', 'last_seen', 'run_id') order by ordinal_position").fetchall()]
        con.execute(f"""insert into {history} ({', '.join(cols_)}, valid_from, valid_to, run_id)
                        select {', '.join(cols_)}, first_seen, null, run_id from {table}""")
    for p in PROVIDERS:
        upsert_provider_facts(con, source_module(p).PROVIDER.facts_row(), now)
    for t in ("regions", "provs", "gpus", "keys", "versions", "hist"):
        con.execute(f"drop table {t}")
    con.execute("checkpoint")
    counts = {t: con.execute(f"select count(*) from {t}").fetchall()[0][0]
              for t in ("offers", "offer_history", "scrape_runs")}
    con.close()
    return {"path": str(path), "seconds": time.perf_counter() - t0, "versions": n_versions,
            "bytes": path.stat().st_size, "now": now.isoformat(), **counts}


def current_offers(con: Any, provider: str) -> list[Any]:
    """The provider's current rows as Offer records (validated, as a scrape would make them)."""
    from gpuledger.warehouse.records import Offer
    from gpuledger.warehouse.schema import OFFERS

    names = [c for c in OFFERS.columns if c != "price_per_gpu_hour"]
    rows = con.execute(f"select {', '.join(names)} from offers where provider = ? order by region, instance_type",
                       [provider]).fetchall()
    return [Offer(**dict(zip(names, r))) for r in rows]


def next_night(records: list[Any], night: int) -> list[Any]:
    """A next scrape of these offers: 27% new prices, 0.5% gone, 0.5% new offers."""
    import random

    rng = random.Random(night)
    out = []
    for r in records:
        x = rng.random()
        if x < 0.005:
            continue
        if x < CHANGE_RATE:
            price = round(r.price_per_gpu_hour * rng.uniform(0.8, 1.2), 4)
            r = r.model_copy(update={"price_per_hour": price * r.gpu_count, "source_price_per_hour": price * r.gpu_count})
        out.append(r)
        if x > 0.995:
            out.append(r.model_copy(update={"instance_type": r.instance_type + f"-n{night}"}))
    return out


def main() -> None:
    import argparse
    import json

    ap = argparse.ArgumentParser(description="build a one-year warehouse")
    ap.add_argument("path")
    ap.add_argument("--offers", type=int, default=100_000)
    ap.add_argument("--nights", type=int, default=365)
    args = ap.parse_args()
    print(json.dumps(build(args.path, args.offers, args.nights)))


if __name__ == "__main__":
    main()
