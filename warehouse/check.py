"""Integrity check of a warehouse (`gpuledger check`): each check is a query returning offending rows.

Run after a crash (or any time) to prove the current tables and their history agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from gpuledger.warehouse.schema import SCHEMA_VERSION, SPECS, TableSpec, current_version


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str


def history_checks(spec: TableSpec, of_provider: bool = False) -> dict[str, str]:
    """The checks that `spec`'s current table and its history agree, each query's rows its offences;
    `of_provider`: those of the provider `$p` only (a pull checks what it loaded)."""
    key = ", ".join(spec.key)
    join = spec.key_join("h", "c")
    only_provider = "{}.provider = $p" if of_provider else "true"
    return {
        f"{spec.table}: every current row has exactly one open history version with its content":
            f"""select {', '.join('c.' + k for k in spec.key)}, count(h.content_hash) open_versions
                from {spec.table} c
                left join {spec.history} h on {join} and h.valid_to is null and h.content_hash = c.content_hash
                where {only_provider.format('c')} group by all having count(h.content_hash) <> 1""",
        f"{spec.history}: no open version without a current row":
            f"""select {', '.join('h.' + k for k in spec.key)} from {spec.history} h
                where {only_provider.format('h')} and h.valid_to is null
                  and not exists (select 1 from {spec.table} c where {join})""",
        f"{spec.history}: versions do not overlap and end after they start":
            f"""select {key} from (select {key}, valid_from, valid_to, lead(valid_from) over (partition by {key}
                    order by valid_from, valid_to nulls last) as next_from from {spec.history} h
                    where {only_provider.format('h')})
                where valid_to < valid_from or next_from is not null and (valid_to is null or next_from < valid_to)""",
    }


def run_checks(con: duckdb.DuckDBPyConnection) -> list[CheckResult]:
    version = current_version(con)
    results = [CheckResult("schema version", version == SCHEMA_VERSION,
                           f"warehouse at version {version}, this gpuledger expects {SCHEMA_VERSION}"
                           + (" (the next `gpuledger refresh` upgrades it in place)" if version < SCHEMA_VERSION
                              else ""))]
    queries = {}
    for spec in SPECS:
        key = ", ".join(spec.key)
        queries |= {
            f"{spec.table}: no duplicate current keys":
                f"select {key}, count(*) n from {spec.table} group by all having count(*) > 1",
            **history_checks(spec),
            # a refresh under a clock that was ahead dated them so (refresh notes say it when it happens)
            f"{spec.history}: no version dated after now":
                f"select {key}, valid_from, valid_to from {spec.history} where greatest(valid_from, valid_to) > now()",
        }
        if spec.table == "offers":
            queries["offers: prices positive and finite, GPU model known"] = (
                "select o.provider, o.region, o.instance_type, o.gpu_model, o.price_per_hour, o.price_per_gpu_hour "
                "from offers o left join gpu_models g using (gpu_model) "
                # DuckDB orders NaN above every number: NaN > 0 holds, isfinite does not
                "where not (o.price_per_hour > 0 and isfinite(o.price_per_hour) and o.price_per_gpu_hour > 0 "
                "and isfinite(o.price_per_gpu_hour)) or g.gpu_model is null")
            queries["offers: every provider's rows come from a successful run"] = (
                "select o.provider, o.run_id from offers o left join scrape_runs r using (run_id) "
                "where r.state is distinct from 'ok'")
    if con.execute("select count(*) from information_schema.tables where table_name = 'spot_price_history'"
                   ).fetchall()[0][0]:
        queries["spot_price_history: no observation stored twice"] = (
            "select provider, region, zone, instance_type, product_description, observed_at "
            "from spot_price_history group by all having count(*) > 1")
    for name, q in queries.items():  # the count, and the first offending row to say where to look
        rel = con.execute(f"select count(*) over () as offending, * from ({q}) limit 1")
        row = rel.fetchone()
        first = ", ".join(f"{d[0]}={v}" for d, v in zip(rel.description[1:], row[1:])) if row else ""
        results.append(CheckResult(name, row is None, f"{row[0]} offending rows, the first: {first}" if row else "ok"))
    return results
