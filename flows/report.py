"""`gpuledger report OUT.html`: one self-contained page (per GPU, every offer, fine-tuning answers), inline
under a CSP that forbids fetching; the script renders the data with `textContent`, offers dictionary-encoded."""
from __future__ import annotations

import base64
import errno
import hashlib
import html
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np

from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.output import counted
from gpuledger.flows.plot import not_the_warehouse, utc_minute
from gpuledger.warehouse.freshness import (
    DEFAULT_MAX_AGE_HOURS, STATE_SHOWN, ProviderFreshness, provider_freshness,
)
from gpuledger.warehouse.offer_filter import VRAM_SQL
from gpuledger.warehouse.recommender import models_catalog
from gpuledger.warehouse.recommender.recommend import (
    DEFAULT_DATASET_TOKENS, DEFAULT_EPOCHS, HOURS_PER_MONTH, MAX_TOKENS, RecommendRequest, left_out_label,
    recommend, tiered_egress_cost,
)
from gpuledger.warehouse.store import open_reader

DEFAULT_EGRESS_GB = 140.0
Tiers = dict[str, dict[str, list[tuple[float, float | None, float]]]]  # provider -> region -> (start, end, USD/GB)

OFFER_SQL = """
with od as (
    select provider, region, instance_type, min(price_per_hour) as od_price
    from offers where purchase_option = 'on_demand' group by all)
select o.gpu_model, """ + VRAM_SQL + """ as vram_gb,  -- as show-gpus --min-vram and query() read it
       o.gpu_count, o.provider, o.region, o.zone, o.instance_type, o.purchase_option,
       o.price_per_gpu_hour, o.price_per_hour,
       coalesce(case when isfinite(o.spot_savings_pct) then o.spot_savings_pct end,  -- NaN: not a figure
                case when o.purchase_option <> 'on_demand' and od.od_price > 0
                     then round(100.0 * (1 - o.price_per_hour / od.od_price), 1) end) as spot_discount_pct,
       coalesce(o.billing_granularity_s, p.billing_granularity_s) as billing_granularity_s,
       coalesce(o.minimum_charge_s, p.minimum_charge_s) as minimum_charge_s,
       o.interruption_risk_level as interruption_risk, o.vcpus, o.ram_gb, o.available, o.available_count,
       o.availability_level,
       case when isfinite(o.reliability) then o.reliability end as reliability,  -- NaN: not a figure
       o.last_seen, a.obtainable_7d as obtainable
from offers o
left join providers p on p.provider = o.provider
left join availability_obtainable a on (a.gpu_model, a.provider, a.region) = (o.gpu_model, o.provider, o.region)
left join od on od.provider = o.provider and od.region = o.region and od.instance_type = o.instance_type
where o.term_months is null  -- the page compares what can be rented now; 1- and 3-year commitments stay in SQL
order by o.price_per_gpu_hour, o.provider, o.region, o.zone, o.instance_type, o.purchase_option
"""


@dataclass(frozen=True)
class ReportProvider(ProviderFreshness):
    """One row of the page's freshness table: a provider's freshness and its facts."""

    display_name: str = ""
    offers: int = 0
    billing_granularity_s: int | None = None
    minimum_charge_s: int | None = None


@dataclass
class Report:
    path: Path
    rows: list[dict[str, Any]]
    providers: list[ReportProvider]


def report_providers(con: duckdb.DuckDBPyConnection, now: datetime,
                     stale_after_hours: float = DEFAULT_MAX_AGE_HOURS) -> list[ReportProvider]:
    """Every provider with a scrape run and every registered source (never loaded: state `never`)."""
    facts = {r[0]: r[1:] for r in con.execute(
        "select provider, display_name, billing_granularity_s, minimum_charge_s from providers").fetchall()}
    offers = dict(con.execute("select provider, count(*) from offers where term_months is null "  # the page's offers
                              "group by provider").fetchall())
    out = []
    for f in provider_freshness(con, stale_after_hours, now, SOURCES):
        name, gran, minimum = facts.get(f.provider, (None, None, None))
        out.append(ReportProvider(**vars(f), display_name=name or f.provider, offers=offers.get(f.provider, 0),
                                  billing_granularity_s=gran, minimum_charge_s=minimum))
    return out


def egress_tiers(con: duckdb.DuckDBPyConnection) -> Tiers:
    out: Tiers = {}
    for provider, region, start, end, usd in con.execute(
            "select provider, region, tier_start_gb, tier_end_gb, usd_per_gb from egress_prices "
            "where destination = 'internet' order by provider, region, tier_start_gb").fetchall():
        out.setdefault(provider, {}).setdefault(region, []).append((start, end, usd))
    return out


def egress_cost(tiers: Tiers, provider: str, region: str, gb: float) -> tuple[float | None, str]:
    """USD to download `gb` to the internet from (provider, region) through the monthly tiers:
    the region's own tiers, else the provider's dearest region (never an underestimate), else unknown."""
    regions = tiers.get(provider) or {}
    if region in regions:
        return tiered_egress_cost(gb, regions[region]), "region"
    if regions:
        return max(tiered_egress_cost(gb, t) for t in regions.values()), "provider"
    return None, "none"


def report_rows(con: duckdb.DuckDBPyConnection, egress_gb: float = DEFAULT_EGRESS_GB,
                freshness: Sequence[ReportProvider] = ()) -> list[dict[str, Any]]:
    """Every current offer with what the page shows, cheapest per GPU-hour first."""
    rel = con.execute(OFFER_SQL)
    cols = [d[0] for d in rel.description]
    offers = rel.fetchall()  # before the next query on this connection replaces the result
    tiers = egress_tiers(con)
    fresh = {f.provider: f for f in freshness}
    rows = []
    for values in offers:
        row = dict(zip(cols, values))
        usd, row["egress_source"] = egress_cost(tiers, row["provider"], row["region"], egress_gb)
        row["egress_usd"] = None if usd is None else round(usd, 6)  # no float dust (3.5999999999999996)
        f = fresh.get(row["provider"])
        row["age_hours"] = f.age_hours if f else None
        row["freshness_state"] = f.state if f else "unknown"
        rows.append(row)
    return rows


# -- the page's data (pure) -----------------------------------------------------------------------

def _e(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _seconds(s: int | None) -> str:
    if s is None:
        return ""
    if s and s % 3600 == 0:
        return f"{s // 3600} h"
    if s and s % 60 == 0:
        return f"{s // 60} min"
    return f"{s} s"


def _billing(gran: int | None, minimum: int | None) -> str:
    text = _seconds(gran) or "?"
    if minimum and minimum != gran:
        text += f" (min {_seconds(minimum)})"
    return text


def _age(hours: float | None) -> str:
    if hours is None:
        return "never"
    if hours < 1:
        return f"{max(hours * 60, 0):.0f} min"
    if hours < 48:
        return f"{hours:.0f} h"
    return f"{hours / 24:.0f} d"


def _availability(r: dict[str, Any]) -> str | None:
    if r.get("available") is True:
        return "yes" + (f" ({r['available_count']})" if r.get("available_count") else "")
    if r.get("available") is False:
        return "no"
    return r.get("availability_level")


@dataclass(frozen=True)
class PageColumn:
    key: str
    label: str
    title: str  # the header's tooltip: what the column holds, with its unit
    fmt: str  # text | num | money | pct | share: how the browser formats the value
    width: int  # px
    wide: bool  # shown by default on a wide screen
    narrow: int = 0  # > 0: shown by default on a phone, this many px wide


# The default wide set fits 1,366 px; the phone set keeps the offer's name, purchase option and price in 390 px.
COLUMNS: tuple[PageColumn, ...] = (
    PageColumn("gpu", "GPU", "canonical GPU model", "text", 118, True, 72),
    PageColumn("vram", "VRAM", "memory per GPU, GB: the card's marketed memory (a slice: its own share)", "num",
               54, True),
    PageColumn("count", "GPUs", "GPUs per instance", "num", 48, True),
    PageColumn("provider", "provider", "provider", "text", 86, True, 64),
    PageColumn("region", "region", "region", "text", 118, True),
    PageColumn("zone", "zone", "availability zone", "text", 90, False),
    PageColumn("instance", "instance", "instance type (the offer's name)", "text", 170, True, 82),
    PageColumn("option", "purchase", "purchase option", "text", 96, True, 82),
    PageColumn("price", "$/GPU-h", "USD per GPU-hour", "money", 86, True, 64),
    PageColumn("hourly", "$/h", "USD per instance-hour", "money", 76, True),
    PageColumn("spot", "spot off", "spot discount against the same instance on demand", "pct", 64, True),
    PageColumn("risk", "interruption", "interruption risk on one scale across providers (none, low, medium, high, "
               "unknown), from what each provider publishes", "text", 96, False),
    PageColumn("vcpus", "vCPU", "vCPUs per instance", "num", 52, True),
    PageColumn("ram", "RAM", "instance memory, GiB", "num", 58, True),
    PageColumn("avail", "available", "capacity the source says can be had now (count)", "text", 86, False),
    PageColumn("obtainable", "obtainable", "share of the last 7 days' availability observations of this GPU, "
               "provider and region with capacity", "share", 76, True),
    PageColumn("reliability", "reliability", "marketplace host reliability", "share", 78, False),
    PageColumn("billing", "billing", "billing increment (minimum charge)", "text", 100, True),
    PageColumn("egress", "egress", "egress of the page's GB to the internet, USD", "money", 66, True),
    PageColumn("age", "age", "data age: since the provider's last successful scrape", "num", 60, True),
)


# The report_rows field behind each page column, where its name differs (avail and billing are computed below).
_FIELDS = {"gpu": "gpu_model", "vram": "vram_gb", "count": "gpu_count", "instance": "instance_type",
           "option": "purchase_option", "price": "price_per_gpu_hour", "hourly": "price_per_hour",
           "spot": "spot_discount_pct", "risk": "interruption_risk", "ram": "ram_gb", "egress": "egress_usd"}


def _column_values(rows: Sequence[dict[str, Any]], key: str) -> list[Any]:
    """One page column's values (before dictionary encoding), row by row."""
    if key == "avail":
        return [_availability(r) for r in rows]
    if key == "billing":  # one value per label: a minimum of none, 0 or the increment itself is not shown
        pairs = [(r["billing_granularity_s"], r["minimum_charge_s"]) for r in rows]
        return [None if gran is None and minimum is None
                else (gran, None if not minimum or minimum == gran else minimum) for gran, minimum in pairs]
    if key == "zone":  # '' is the warehouse's "no zone": a blank, sorted last as blanks are
        return [r["zone"] or None for r in rows]
    field = _FIELDS.get(key, key)
    return [r[field] for r in rows]


def encode_column(values: Sequence[Any], key: Any = None, label: Any = None) -> dict[str, list[Any]]:
    """{"dict": distinct values sorted (as `label` shows them), "codes": each value's index (its rank), -1: none}."""
    distinct = sorted({v for v in values if v is not None}, key=key)
    index = {v: i for i, v in enumerate(distinct)}
    return {"dict": [label(v) if label else v for v in distinct],
            "codes": [-1 if v is None else index[v] for v in values]}


def _clean_number(v: Any) -> Any:
    if isinstance(v, float) and math.isfinite(v):
        return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v  # 80 rather than 80.0
    return v


def offer_columns(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every offer, column by column, in the page's default order (on demand first, then price)."""
    ordered = sorted(rows, key=lambda r: (r["purchase_option"] != "on_demand", r["price_per_gpu_hour"],
                                          r["provider"], r["region"], r["zone"], r["instance_type"],
                                          r["purchase_option"]))
    numeric = {c.key for c in COLUMNS if c.fmt != "text"}
    cols: dict[str, Any] = {}
    for key in [c.key for c in COLUMNS if c.key != "age"] + ["egress_source"]:  # age: the browser's
        values = _column_values(ordered, key)
        if key == "billing":
            cols[key] = encode_column(values, lambda b: (math.inf if b[0] is None else b[0], b[1] or 0),
                                      lambda b: _billing(*b))
        elif key in numeric:
            cols[key] = encode_column(values, label=_clean_number)
        elif key == "avail":  # counts in their order: "yes (9)" before "yes (10)"
            cols[key] = encode_column(values, lambda v: ([int(t) if t.isdigit() else t.casefold()
                                                          for t in re.split(r"(\d+)", v)], v))
        else:
            cols[key] = encode_column(values, lambda v: (v.casefold(), v))
    return {"n": len(ordered), "cols": cols}


def gpu_facts(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    rel = con.execute("select gpu_model, family, memory_gb, memory_type, bf16, fp8 from gpu_models")
    return {g: {"family": fam, "memory_gb": m, "memory_type": t, "bf16": b, "fp8": f}
            for g, fam, m, t, b, f in rel.fetchall()}


def gpu_summary(rows: Sequence[dict[str, Any]], facts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per canonical GPU on offer: its facts, offer count and cheapest on-demand and spot price per GPU-hour,
    overall and per provider; families with the largest memory first, each family's variants together."""
    per_gpu: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        p = per_gpu.setdefault(r["gpu_model"], {}).setdefault(
            r["provider"], {"provider": r["provider"], "on_demand": None, "spot": None, "offers": 0})
        p["offers"] += 1
        slot = "on_demand" if r["purchase_option"] == "on_demand" else "spot"
        if p[slot] is None or r["price_per_gpu_hour"] < p[slot]:
            p[slot] = r["price_per_gpu_hour"]
    out = []
    for gpu, provs in per_gpu.items():
        f = facts.get(gpu, {})
        vram = f.get("memory_gb") or max((r["vram_gb"] or 0 for r in rows if r["gpu_model"] == gpu), default=None)
        providers = sorted(provs.values(), key=lambda p: (p["on_demand"] is None, p["on_demand"] or p["spot"] or 0,
                                                          p["provider"]))

        def cheapest(slot: str) -> dict[str, Any] | None:
            b = min((p for p in providers if p[slot] is not None), key=lambda p: (p[slot], p["provider"]), default=None)
            return b and {"price": b[slot], "provider": b["provider"]}

        out.append({"gpu": gpu, "family": f.get("family") or gpu, "vram_gb": _clean_number(vram) if vram else None,
                    "memory_type": f.get("memory_type"), "bf16": f.get("bf16"), "fp8": f.get("fp8"),
                    "offers": sum(p["offers"] for p in providers), "providers": providers,
                    "best_on_demand": cheapest("on_demand"), "best_spot": cheapest("spot")})
    family_vram = {f: max(g["vram_gb"] or 0 for g in out if g["family"] == f) for f in {g["family"] for g in out}}
    out.sort(key=lambda g: (-family_vram[g["family"]], g["family"], -(g["vram_gb"] or 0), g["gpu"]))
    return out


# -- the fine-tuning view: the recommender's answers, re-costed in the browser ------------------------

# Common fine-tuning bases of the built-in catalog, small to large.
COMMON_MODELS = ("llama-3-8b", "qwen3-8b", "mistral-7b", "gemma-3-12b", "qwen2.5-14b", "qwen3-32b",
                 "mixtral-8x7b", "llama-3-70b", "qwen2.5-72b")
METHODS = ("qlora", "lora", "full")
TUNE_RUNS = (1, 2, 3, 5, 10)  # the page's choices of runs
TUNE_SHOWN = 10  # rows the page ranks


def _tuning_row(c: Any) -> dict[str, Any]:
    """One candidate with what the browser needs to cost any job on it (recommend's arithmetic), and its flags."""
    train_h = c.uninterrupted_hours
    spot_factor = (c.hours_per_run - c.setup_hours) / train_h if train_h else 1.0
    return {
        "provider": c.provider, "region": c.region, "instance_type": c.instance_type,
        "purchase_option": c.purchase_option, "spot": c.interruptible,
        "gpus": f"{c.gpu_count:g} × {c.gpu_model}" + (f" × {c.nodes} nodes" if c.nodes > 1 else ""),
        "plan": ("sharded ×" if c.plan == "sharded" else "data-parallel ×" if c.plan == "data-parallel" else "")
        + (f"{c.gpus_used:g} over {c.link_kind}" if c.plan == "sharded" else f"{c.gpus_used:g}"
           if c.plan == "data-parallel" else "1 GPU" if c.gpus_used == 1 else "slice"),
        "price": c.price_per_hour * c.nodes, "tps": c.tokens_per_s, "tps_gpu": c.tokens_per_s_per_gpu,
        "need_gb": c.need_gb_per_gpu, "setup_h": c.setup_hours, "k": spot_factor,
        "tier": int(c.slow_path),
        "gran": c.cost.granularity_s, "min": c.cost.minimum_s, "result_gb": c.cost.egress_gb,
        "storage_h": c.cost.storage_billed_gb * c.cost.storage_usd_per_gb_month / HOURS_PER_MONTH,
        "egress": c.cost.egress_source, "flags": c.flags,
    }


def page_egress(tiers: Tiers, row: dict[str, Any], gb: float) -> float:
    """A pool entry's egress of `gb`, as the page's script reckons it."""
    if row["egress"] == "none":
        return 0.0
    usd, _ = egress_cost(tiers, row["provider"], row["region"] if row["egress"] == "region" else None, gb)
    return usd or 0.0


# The job sizes between which leading_pool bounds each candidate's cost: 0, then 1,000 tokens per run up
# to MAX_TOKENS (the most the page and the recommender cost) in steps of 5 %.
GRID_STEP = 1.05
COST_EPS = 2e-6  # the recommender ranks totals rounded to 6 decimals: a lead smaller than this may tie


def _job_costs(rows: list[dict[str, Any]], egress: Any, tokens: Any, runs: int) -> Any:
    """Each candidate's job cost (rows) at each size in `tokens` (columns), as the page's script reckons it."""
    col = {k: np.array([float(r[k]) for r in rows])[:, None] for k in ("tps", "k", "setup_h", "price", "storage_h")}
    gran = np.array([max(float(r["gran"]), 1.0) for r in rows])[:, None]
    least = np.ceil(np.round(np.array([float(r["min"]) for r in rows])[:, None] / gran, 9)) * gran
    hours = tokens[None, :] / col["tps"] / 3600 * col["k"] + col["setup_h"]
    billed = np.maximum(runs * np.ceil(np.round(hours * 3600 / gran, 9)) * gran, least)
    return col["price"] * billed / 3600 + col["storage_h"] * runs * hours + egress[:, None]


def _before(high: Any, low: Any) -> Any:
    """For each row of `low` and each column: how many rows of `high` are below it by more than COST_EPS."""
    ranked = np.sort(high, axis=0)
    return np.stack([np.searchsorted(ranked[:, j], low[:, j] - COST_EPS) for j in range(low.shape[1])], axis=1)


def leading_pool(rows: list[dict[str, Any]], tiers: Tiers) -> list[dict[str, Any]]:
    """The candidates the page can show for some job: at most MAX_TOKENS per run, TUNE_RUNS runs, with or
    without spot. A job's cost grows with its size, so between two sizes of a fine grid a candidate costs
    at least its cost at the smaller and at most its cost at the larger; an instance group (its row is its
    first candidate, in (tier, cost) order) that TUNE_SHOWN others beat there even at their dearest is not
    shown there, nor is a candidate dearer at its cheapest than its group's row can be."""
    if not rows:
        return []
    steps = int(math.ceil(math.log(MAX_TOKENS / 1e3) / math.log(GRID_STEP)))
    grid = np.r_[0.0, 1e3 * GRID_STEP ** np.arange(steps), MAX_TOKENS]
    codes = np.unique(np.array(["\0".join((r["provider"], r["instance_type"], r["purchase_option"])) for r in rows]),
                      return_inverse=True)[1].reshape(-1)
    tier, spot = np.array([r["tier"] for r in rows]), np.array([bool(r["spot"]) for r in rows])
    keep = np.zeros(len(rows), bool)
    known: dict[tuple[str, str, str, float], float] = {}

    def egress_of(r: dict[str, Any], gb: float) -> float:  # one reckoning per place and size
        key = (r["provider"], r["region"], r["egress"], gb)
        if key not in known:
            known[key] = page_egress(tiers, r, gb)
        return known[key]

    for runs in TUNE_RUNS:
        egress = np.array([egress_of(r, r["result_gb"] * runs) for r in rows])
        cost = _job_costs(rows, egress, grid, runs)
        for with_spot in (False, True):
            ids = np.nonzero(with_spot | ~spot)[0]
            if not len(ids):
                continue
            ids = ids[np.argsort(codes[ids], kind="stable")]  # each group's candidates together
            starts = np.r_[0, np.nonzero(np.diff(codes[ids]))[0] + 1]
            g = np.cumsum(np.r_[0, np.diff(codes[ids]) != 0])
            t = tier[ids]
            g_tier = np.minimum.reduceat(t, starts)
            top = (t == g_tier[g])[:, None]
            lo, hi = cost[ids, :-1], cost[ids, 1:]
            g_lo = np.minimum.reduceat(np.where(top, lo, np.inf), starts)  # the group's row costs at least this
            g_hi = np.minimum.reduceat(np.where(top, hi, np.inf), starts)  # and at most this
            ahead = np.zeros(g_lo.shape, int)
            for k in np.unique(g_tier):  # every group of a better tier is ahead, then those of its own that lead
                same = g_tier == k
                ahead[same] += (g_tier < k).sum() + _before(g_hi[same], g_lo[same])
            shown = ahead < TUNE_SHOWN
            first = top & (lo <= g_hi[g] + COST_EPS)
            keep[ids] |= (first & shown[g]).any(axis=1)
    return [r for r, k in zip(rows, keep) if k]


def recommendation_view(con: duckdb.DuckDBPyConnection, model: str, method: str, now: datetime,
                        stale_after_hours: float, flags: dict[str, int]) -> dict[str, Any]:
    """The recommender's answers for one model and method as a pool the browser ranks: every fitting offer
    with a speed estimate that is first of its instance group and among the first TUNE_SHOWN groups for
    some job (leading_pool), each carrying its cost arithmetic; its flags are the default job's (the
    page says so)."""
    answer = recommend(con, RecommendRequest(method=method, model=model, as_of=now,
                                             max_age_hours=stale_after_hours, top=1))  # what `recommend` answers
    every = recommend(con, RecommendRequest(method=method, model=model, as_of=now, spot=True, per_instance=False,
                                            max_age_hours=stale_after_hours, top=10 ** 9))
    pool = leading_pool([_tuning_row(c) for c in every.candidates if c.tokens_per_s is not None], egress_tiers(con))
    for r in pool:  # the page's flags are numbers into the list of every answer's flags
        r["flags"] = [flags.setdefault(f, len(flags)) for f in r["flags"]]
    label = left_out_label(answer.candidates)
    left = [f"{label}: {o['provider']} {o['instance_type']} ({o['gpu_count']:g} × {o['gpu_model']}, "
            f"${o['price_per_hour']:,.2f}/h): {o['reason']}" for o in answer.left_out]
    return {"need_gb": answer.estimate.per_gpu_gb, "model": answer.estimate.model_display,
            "sharded": {str(g): e.per_gpu_gb for g, e in answer.sharded_estimates.items()},
            "candidates": pool, "left_out": left, "stale": [p.provider for p in answer.stale_providers]}


def fine_tuning(con: duckdb.DuckDBPyConnection, now: datetime, stale_after_hours: float = DEFAULT_MAX_AGE_HOURS,
                models: Sequence[str] = COMMON_MODELS, methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """The answers for every (model, method), the egress tiers their costs need, and the default job; an
    unknown model is a ValueError naming the nearest."""
    try:
        chosen = list(dict.fromkeys(models_catalog.lookup(m).name for m in models))  # -m X -m x: one entry
    except models_catalog.UnknownModelError as e:  # `report` has no --params: not the recommender's hint
        raise ValueError(e.unknown) from None
    flags: dict[str, int] = {}
    answers = {f"{m}|{k}": recommendation_view(con, m, k, now, stale_after_hours, flags)
               for m in chosen for k in methods}
    used = {c["provider"] for a in answers.values() for c in a["candidates"]}
    return {"models": [{"value": m, "label": m} for m in chosen],
            "methods": [{"value": k, "label": k} for k in methods], "answers": answers,
            "flags": sorted(flags, key=flags.__getitem__),
            "tiers": {p: r for p, r in egress_tiers(con).items() if p in used},
            "default_tokens": DEFAULT_DATASET_TOKENS * DEFAULT_EPOCHS, "max_tokens": MAX_TOKENS, "shown": TUNE_SHOWN,
            "default_job": f"{DEFAULT_DATASET_TOKENS / 1e6:g}M tokens × {DEFAULT_EPOCHS:g} epochs"}


def page_data(rows: Sequence[dict[str, Any]], providers: Sequence[ReportProvider], generated_at: datetime,
              stale_after_hours: float = DEFAULT_MAX_AGE_HOURS, gpus: Sequence[dict[str, Any]] = (),
              tuning: dict[str, Any] | None = None) -> dict[str, Any]:
    def ms(t: datetime | None) -> int | None:
        return None if t is None else int(t.timestamp() * 1000)

    return {
        "generated_at_ms": ms(generated_at), "stale_after_hours": stale_after_hours,
        "columns": [c.__dict__ for c in COLUMNS],
        "providers": [{"provider": p.provider, "last_ok_ms": ms(p.last_ok),
                       "failed": p.last_state not in (None, "ok", "not_configured"),
                       "not_configured": p.last_state == "not_configured"} for p in providers],
        "offers": offer_columns(rows),
        "gpus": list(gpus),
        "tuning": tuning or {"models": [], "methods": [], "answers": {}, "flags": [], "tiers": {},
                             "default_tokens": 0, "default_job": "", "max_tokens": MAX_TOKENS, "shown": TUNE_SHOWN},
    }


def json_for_html(value: Any) -> str:
    """JSON that cannot end its <script> element or open a comment: <, >, & and JS line separators escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate({ord(ch): f"\\u{ord(ch):04x}" for ch in "<>&\u2028\u2029"})


# -- the page -----------------------------------------------------------------------------------------

ASSETS = Path(__file__).parent / "report_page"


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def _freshness_html(providers: Sequence[ReportProvider]) -> str:
    rows = []
    for p in providers:
        when = utc_minute(p.last_ok) if p.last_ok else "never"
        failed = p.last_error and p.last_state != "ok"
        err = f'<td class="err">{_e(p.last_error)}</td>' if failed else "<td></td>"
        rows.append(
            f'<tr class="f-{_e(p.state)}" data-provider="{_e(p.provider)}"><td>{_e(p.display_name)}</td>'
            f'<td class="state">{_e(STATE_SHOWN.get(p.state, p.state))}</td><td>{_e(when)}</td>'
            f'<td class="age">{_e(_age(p.age_hours))}</td><td>{p.offers}</td>'
            f"<td>{_e(_billing(p.billing_granularity_s, p.minimum_charge_s))}</td>{err}</tr>")
    return ('<div class="wrap"><table id="freshness"><thead><tr><th>provider</th><th>state</th>'
            "<th>last successful scrape</th><th>age</th><th>offers</th><th>billing</th><th>last error</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table></div>")


def _options(rows: Sequence[dict[str, Any]], field: str) -> str:
    """A filter's choices: any, then each value of `field` among the offers."""
    return '<option value="">any</option>' + "".join(
        f'<option value="{_e(v)}">{_e(v)}</option>' for v in sorted({r[field] for r in rows}))


def loaded_count(providers: Sequence[ReportProvider]) -> int:
    """Providers with offers on the page (not those never loaded, nor those whose every run failed or was
    not configured)."""
    return sum(p.offers > 0 for p in providers)


def render_report(rows: Sequence[dict[str, Any]], providers: Sequence[ReportProvider], generated_at: datetime,
                  egress_gb: float = DEFAULT_EGRESS_GB, stale_after_hours: float = DEFAULT_MAX_AGE_HOURS,
                  gpus: Sequence[dict[str, Any]] = (), tuning: dict[str, Any] | None = None) -> str:
    """The whole page (report_page/page.html filled in) as one string."""
    script = _asset("page.js")
    script_hash = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
           "img-src data:; form-action 'none'; base-uri 'none'")
    data = json_for_html(page_data(rows, providers, generated_at, stale_after_hours, gpus, tuning))
    return _asset("page.html").format(
        csp=_e(csp), css=_asset("page.css"), stamp=_e(utc_minute(generated_at)),
        count=len(rows), offers=counted(len(rows), "current offer"),
        providers=counted(loaded_count(providers), "provider"),
        egress_gb=egress_gb, gpu_options=_options(rows, "gpu_model"),
        provider_options=_options(rows, "provider"), purchase_options=_options(rows, "purchase_option"),
        freshness=_freshness_html(providers), data=data, script=script)


def write_report(db: str | os.PathLike[str] | None, out: str | os.PathLike[str],
                 egress_gb: float = DEFAULT_EGRESS_GB, stale_after_hours: float = DEFAULT_MAX_AGE_HOURS,
                 now: datetime | None = None, models: Sequence[str] = COMMON_MODELS) -> Report:
    """Read the warehouse and write the page to `out` (whole, then renamed), with `models`' fine-tuning answers."""
    now = now or datetime.now(timezone.utc)
    not_the_warehouse(db, out)
    if not Path(out).name:  # "." or "": a directory, said as for any other (not "PosixPath('.') has an empty name")
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(out))
    with open_reader(db) as con:
        providers = report_providers(con, now, stale_after_hours)
        rows = report_rows(con, egress_gb, providers)
        gpus = gpu_summary(rows, gpu_facts(con))
        tuning = fine_tuning(con, now, stale_after_hours, models) if models else None
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # the folder named is a file: not "File exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path.parent)) from None
    tmp = path.with_name(f".{path.name}.partial")
    page = render_report(rows, providers, now, egress_gb, stale_after_hours, gpus, tuning)
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # a report that could not be written leaves nothing behind
    return Report(path, rows, providers)

