"""`gpuledger plot --gpu H100-SXM OUT.png`: per provider, a step line of the cheapest price per GPU-hour valid at
each instant (offer_history), or one bar per provider for one scrape; on matplotlib's Agg canvas (no pyplot)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

import duckdb

from gpuledger.warehouse.offer_filter import known_names, resolve_names
from gpuledger.warehouse.store import WarehouseError, db_path, open_reader

WIDTH_IN, HEIGHT_IN, DPI = 10.0, 5.5, 120  # 1200 x 660 pixels
# The purchase options each choice of --option covers (None: all).
OPTION_COVERS: dict[str, list[str] | None] = {
    "on_demand": ["on_demand"], "spot": ["spot", "low_priority", "interruptible"],
    "low_priority": ["low_priority"], "interruptible": ["interruptible"], "any": None}
LINE_STYLES = ("solid", "dashed", "dotted", "dashdot")
SNAPSHOT_SPAN = timedelta(hours=1)  # one point per provider, this close together: one refresh, not a history

HISTORY_SQL = """
with h as (
    select provider, valid_from, valid_to, price_per_gpu_hour from offer_history
    where gpu_model = $gpu and ($options is null or list_contains($options, purchase_option))
      and ($providers is null or list_contains($providers, provider))
      and isfinite(price_per_gpu_hour)),  -- a NaN or infinite price is none to draw: a gap, never a point
pts as (
    select provider, valid_from as t from h
    union select provider, valid_to from h where valid_to is not null)
select p.provider, p.t, min(h.price_per_gpu_hour)
from pts p
left join h on h.provider = p.provider and h.valid_from <= p.t and (h.valid_to is null or h.valid_to > p.t)
group by all
order by 1, 2
"""

LAST_SEEN_SQL = """
select provider, max(last_seen) from offers
where gpu_model = $gpu and ($options is null or list_contains($options, purchase_option))
  and ($providers is null or list_contains($providers, provider))
group by provider
"""


@dataclass
class PriceHistory:
    gpu: str
    purchase_option: str
    # provider -> [(instant, cheapest USD per GPU-hour then, or None for a gap)], ascending
    series: dict[str, list[tuple[datetime, float | None]]] = field(default_factory=dict)
    extended: set[str] = field(default_factory=set)  # providers whose last point only extends the line
    snapshot: datetime | None = None  # set when all points are one scrape: there is no history yet
    path: Path | None = None
    size_px: tuple[int, int] = (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))


def price_history(con: duckdb.DuckDBPyConnection, gpu: str, purchase_option: str = "on_demand",
                  providers: Sequence[str] | None = None) -> PriceHistory:
    """The step series the plot draws, straight from offer_history."""
    given, purchase_option = purchase_option, purchase_option.strip().lower().replace("-", "_")  # SPOT, on-demand
    if purchase_option not in OPTION_COVERS:
        raise WarehouseError(f"unknown purchase option {given!r}; use {', '.join(OPTION_COVERS)}")
    gpu = resolve_names("GPU", [gpu], known_names(con, "GPU"))[0]  # any case; unknown: the nearest named
    from gpuledger.adapters.registry import SOURCES

    # a registered source this warehouse never loaded is a provider without history, not an unknown name
    providers = resolve_names("provider", providers or (), {*known_names(con, "provider"), *SOURCES})
    params = {"gpu": gpu, "options": OPTION_COVERS[purchase_option],
              "providers": list(providers) if providers else None}
    rows = con.execute(HISTORY_SQL, params).fetchall()
    if not rows:
        known = [r[0] for r in con.execute("select distinct gpu_model from offer_history order by 1").fetchall()]
        variants = [r[0] for r in con.execute("select gpu_model from gpu_models where family = $gpu and gpu_model "
                                              "<> $gpu order by 1", {"gpu": gpu}).fetchall()]
        if variants and gpu not in known:  # a family (H100): one line is one model
            raise WarehouseError(f"{gpu} is a family; plot one of its models: "
                                 f"{', '.join(v for v in variants if v in known) or 'none with history'}")
        if gpu not in known:
            raise WarehouseError(f"no price history for GPU {gpu!r}; GPUs with history: {', '.join(known) or 'none'}")
        raise WarehouseError(f"no {purchase_option} price history for {gpu}"
                             + (f" from {', '.join(providers)}" if providers else ""))
    result = PriceHistory(gpu, purchase_option)
    for provider, t, price in rows:
        result.series.setdefault(provider, []).append((t, price))
    for provider, last_seen in con.execute(LAST_SEEN_SQL, params).fetchall():
        points = result.series.get(provider)
        if points and points[-1][1] is not None and last_seen is not None and last_seen > points[-1][0]:
            points.append((last_seen, points[-1][1]))  # still the price when last seen
            result.extended.add(provider)
    instants = [t for points in result.series.values() for t, _ in points]
    # Providers of one refresh are merged seconds or minutes apart; a provider with a second point was
    # scraped again (an hourly refresh is under an hour later), and that is history.
    if all(len(points) == 1 for points in result.series.values()) and max(instants) - min(instants) < SNAPSHOT_SPAN:
        result.snapshot = max(instants)
    return result


def utc_minute(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def figure(history: PriceHistory) -> Any:
    """The matplotlib Figure of `history`: step lines over time, or bars for a single snapshot."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    option = {"any": "any purchase option", "spot": "spot or interruptible"}.get(
        history.purchase_option, history.purchase_option.replace("_", "-"))
    if history.snapshot is not None:
        # each provider's last known price (providers whose offers all vanished are left out)
        prices = sorted(((provider, points[-1][1]) for provider, points in history.series.items()
                         if points[-1][1] is not None), key=lambda kv: (-kv[1], kv[0]))
        names = [p for p, _ in prices]
        bars = ax.barh(names, [v for _, v in prices], color="#4c72b0")
        labels = [f"${v:,.2f}" if v >= 1 else f"${v:.3f}" for _, v in prices]
        ax.bar_label(bars, labels=labels, padding=3, fontsize="small")
        ax.set_xlabel("USD per GPU-hour")
        ax.set_xlim(0, max(v for _, v in prices) * 1.15)
        when = utc_minute(history.snapshot)
        ax.set_title(f"{history.gpu}: cheapest {option} price per GPU-hour, one snapshot ({when})\n"
                     "a single refresh so far: no price history to draw yet", fontsize="medium")
        ax.grid(True, axis="x", alpha=0.3)
        return fig
    colours = len(matplotlib.rcParams["axes.prop_cycle"].by_key()["color"])
    for i, provider in enumerate(sorted(history.series)):
        points = history.series[provider]
        xs = [t for t, _ in points]
        ys = [math.nan if p is None else p for _, p in points]
        # past the colour cycle (10), colours repeat: a dash pattern of its own tells the providers apart
        style = LINE_STYLES[i // colours % len(LINE_STYLES)]
        (line,) = ax.step(xs, ys, where="post", label=provider, linewidth=1.8, linestyle=style)
        changes = len(xs) - 1 if provider in history.extended else len(xs)  # a marker at every real change
        ax.plot(xs[:changes], ys[:changes], "o", markersize=3.5, color=line.get_color())
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_title(f"{history.gpu}: cheapest {option} price per GPU-hour, per provider")
    ax.set_ylabel("USD per GPU-hour")
    ax.set_xlabel("time (UTC)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    # beside the axes, so it can never hide a line
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize="small")
    return fig


def not_the_warehouse(db: str | os.PathLike[str] | None, out: str | os.PathLike[str]) -> None:
    """WarehouseError when `out` is the warehouse file itself (`gpuledger report gpuledger.duckdb` replaced it)."""
    warehouse = db_path(db)
    if Path(out).exists() and warehouse.exists() and os.path.samefile(out, warehouse):
        raise WarehouseError(f"{out} is the warehouse: name another file to write")


def plot_price_history(db: str | os.PathLike[str] | None, gpu: str, out: str | os.PathLike[str],
                       purchase_option: str = "on_demand", providers: Sequence[str] | None = None) -> PriceHistory:
    """Read the history (read-only), draw it to the PNG `out`, and return what was plotted, its path set."""
    not_the_warehouse(db, out)
    with open_reader(db) as con:
        history = price_history(con, gpu, purchase_option, providers)
    history.path = Path(out)
    history.path.parent.mkdir(parents=True, exist_ok=True)
    figure(history).savefig(history.path, format="png", dpi=DPI)
    return history
