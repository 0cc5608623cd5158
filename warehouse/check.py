"""Integrity check of a warehouse (`gpuledger check`): each check is a query returning offending rows.

Run after a crash (or any time) to prove the current tables and their history agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from gpuledger.warehouse.schema import SCHEMA_VERSION, SPECS, current_version


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str


def run_checks(con: duckdb.DuckDBPyConnection) -> list[CheckResult]:
    version = current_version(con)
    results = [CheckResult("schema version", version == SCHEMA_VERSION,
                           f"warehouse at version {version}, this gpuledger expects {SCHEMA_VERSION}")]
    queries = {}
    for spec in SPECS:
        key = ", ".join(spec.key)
        join = " and ".join(f"h.{k} = c.{k}" for k in spec.key)
        queries |= {
            f"{spec.table}: no duplicate current keys":
                f"select {key}, count(*) n from {spec.table} group by all having count(*) > 1",
            f"{spec.table}: every current row has exactly one open history version with its content":
                f"""select c.{spec.key[0]}, count(h.content_hash) n from {spec.table} c
                    left join {spec.history} h on {join} and h.valid_to is null and h.content_hash = c.content_hash
                    group by c.{', c.'.join(spec.key)} having count(h.content_hash) <> 1""",
            f"{spec.history}: no open version without a current row":
                f"""select h.{spec.key[0]} from {spec.history} h where h.valid_to is null and not exists
                    (select 1 from {spec.table} c where {join})""",
            f"{spec.history}: versions do not overlap and end after they start":
                f"""select {key} from {spec.history} where valid_to is not null and valid_to < valid_from
                    union all
                    select {key} from (select {key}, valid_to, lead(valid_from) over (partition by {key}
                        order by valid_from, valid_to nulls last) as next_from from {spec.history})
                    where next_from is not null and (valid_to is null or next_from < valid_to)""",
        }
        if spec.table == "offers":
            queries["offers: prices positive and finite, GPU model known"] = (
                "select o.instance_type from offers o left join gpu_models g using (gpu_model) "
                "where not (o.price_per_hour > 0 and isfinite(o.price_per_hour)) or g.gpu_model is null")
            queries["offers: every provider's rows come from a successful run"] = (
                "select o.run_id from offers o left join scrape_runs r using (run_id) "
                "where r.state is distinct from 'ok'")
    if con.execute("select count(*) from information_schema.tables where table_name = 'spot_price_history'"
                   ).fetchall()[0][0]:
        queries["spot_price_history: no observation stored twice"] = (
            "select 1 from spot_price_history group by provider, region, zone, instance_type, "
            "product_description, observed_at having count(*) > 1")
    for name, q in queries.items():
        bad = con.execute(f"select count(*) from ({q})").fetchall()[0][0]
        results.append(CheckResult(name, bad == 0, f"{bad} offending rows" if bad else "ok"))
    return results
