"""When a provider's data counts as fresh (latest successful scrape at most max_age_hours old): the one
rule, written once in SQL, behind status, the report, exports and the recommender. Judged at a reference
time from the runs finished by then: a run dated later (an as_of in the past, a clock that was ahead) says
nothing of that time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:  # a fetch process reads the schema (which names this rule) without DuckDB
    import duckdb

# Nightly refreshes plus a missed night's slack.
DEFAULT_MAX_AGE_HOURS = 36.0
MAX_AGE_HOURS = 1e9  # a limit past any scrape (over 100,000 years); DuckDB's intervals end near 2.5e9 h

NEVER = "never"  # state of a provider with no scrape run at all
STATE_SHOWN = {NEVER: "never loaded", "not_configured": "not configured"}  # the words status and the page show

_RULE = """
    with ref as (select coalesce({as_of}, now())::timestamptz as t0,
                        coalesce({max_age}, {default})::double as max_age),
    runs as (
        select provider,
               max(finished_at) filter (where state = 'ok') as last_ok,
               max(finished_at) as last_attempt,
               arg_max(state, finished_at) as last_state,
               arg_max_null(error, finished_at) as last_error
        from scrape_runs, ref where finished_at <= ref.t0 group by provider),
    judged as (
        select runs.*, (epoch(ref.t0) - epoch(runs.last_ok)) / 3600.0 as age_hours,
               coalesce(runs.last_ok >= ref.t0 - to_seconds(ref.max_age * 3600.0), false) as fresh
        from runs, ref)
    select provider, last_ok, last_attempt, last_state, last_error, age_hours, fresh,
           case when last_state = 'not_configured' then 'not_configured' when last_state <> 'ok' then 'failed'
                when not fresh then 'stale' else 'ok' end as state
    from judged"""

MACROS_SQL = f"""
-- Per provider with a scrape run finished by as_of (default now()): last_ok (latest successful scrape),
-- last_attempt, last_state, last_error, age_hours (since last_ok), fresh, state (ok | stale | failed |
-- not_configured).
-- warehouse/freshness.py.
--   select * from provider_freshness(max_age_hours := 24);
create or replace macro provider_freshness(max_age_hours := NULL, as_of := NULL) as table
{_RULE.format(as_of="as_of", max_age="max_age_hours", default=DEFAULT_MAX_AGE_HOURS)};

-- The fresh providers only: provider, last_ok, age_hours. Offers of the others are stale.
--   select * from fresh_providers(max_age_hours := 24);
create or replace macro fresh_providers(max_age_hours := NULL, as_of := NULL) as table
    select provider, last_ok, age_hours
    from provider_freshness(max_age_hours := max_age_hours, as_of := as_of) where fresh;
"""

# The rule at the default age, now: what the `offer_freshness` view (warehouse/schema.py) joins to offers.
RULE_NOW_SQL = _RULE.format(as_of="NULL", max_age="NULL", default=DEFAULT_MAX_AGE_HOURS)

_QUERY = _RULE.format(as_of="$as_of::timestamptz", max_age="$max_age::double", default=DEFAULT_MAX_AGE_HOURS)


@dataclass(frozen=True)
class ProviderFreshness:
    """One provider's freshness at a reference time."""

    provider: str
    last_ok: datetime | None  # latest successful scrape; None: none yet
    last_attempt: datetime | None
    last_state: str | None  # state of the latest attempt: ok | failed
    last_error: str | None  # error of the latest attempt
    age_hours: float | None  # since last_ok
    fresh: bool
    state: str  # ok | stale | failed | not_configured | never


def provider_freshness(con: duckdb.DuckDBPyConnection, max_age_hours: float = DEFAULT_MAX_AGE_HOURS,
                       as_of: datetime | None = None, providers: Iterable[str] = ()) -> list[ProviderFreshness]:
    """Every provider with a scrape run, plus each of `providers` without one (`never`), by name."""
    judged = {r[0]: ProviderFreshness(*r) for r in con.execute(f"select * from ({_QUERY}) order by provider",
                                                               {"max_age": max_age_hours, "as_of": as_of}).fetchall()}
    for name in providers:
        judged.setdefault(name, ProviderFreshness(name, None, None, None, None, None, False, NEVER))
    return [judged[name] for name in sorted(judged)]
