"""`gpuledger show-gpus [GPU]`: the current offers per GPU model, or per provider for one GPU (filters as
warehouse/offer_filter.py's, no 1- or 3-year commitment unless --commitments)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import duckdb
import typer

from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.literal import literal
from gpuledger.flows.ops_cli import DbOption
from gpuledger.flows.output import Format, FormatOption, JsonOption, chosen, emit, err, fail, flagged
from gpuledger.warehouse.freshness import STATE_SHOWN, provider_freshness
from gpuledger.warehouse.offer_filter import RECLAIMABLE_SQL, VRAM_SQL, FilterError, OfferFilter
from gpuledger.warehouse.store import open_reader

# The summary's price columns: each the cheapest USD per GPU-hour under it, and its provider.
KINDS = {"on_demand": "o.purchase_option = 'on_demand'", "spot": RECLAIMABLE_SQL,
         "committed": "o.term_months is not null"}
LISTING = ("gpu_model", "provider", "purchase_option", "usd_per_gpu_hour", "usd_per_hour", "gpu_count",
           "instance_type", "region", "vram_gb", "offers", "obtainable")
# The share of the last 7 days' availability observations (view availability_obtainable) that had
# capacity, over the (GPU model, provider, region) groups of the selected offers.
OBTAINABLE = """a as (select gpu_model, sum(obtainable_7d * observations_7d) / nullif(sum(observations_7d), 0) as s
                       from availability_obtainable semi join o using (gpu_model, provider, region) group by all)"""


def gpu_summary(con: duckdb.DuckDBPyConnection, selection: OfferFilter) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(columns, rows): per GPU model, its memory, the cheapest USD per GPU-hour of each KIND with its provider
    (first by name on a tie), the offer count, providers, regions and the share obtainable; cheapest first."""
    where, params = selection.where()
    kinds = [k for k in KINDS if selection.commitments or k != "committed"]
    cheapest = ", ".join(f"round(min(o.price_per_gpu_hour) filter (where {KINDS[k]}), 4), "
                         f"arg_min(o.provider, (o.price_per_gpu_hour, o.provider)) filter (where {KINDS[k]})"
                         for k in kinds)
    rows = con.execute(
        f"""with o as (select * from offers o where {where}), {OBTAINABLE}
            select o.gpu_model, max({VRAM_SQL}) as vram_gb, {cheapest}, count(*),
                   string_agg(distinct o.provider, ', ' order by o.provider), count(distinct o.region),
                   round(any_value(a.s), 4)
            from o left join a using (gpu_model)
            group by o.gpu_model order by min(o.price_per_gpu_hour), o.gpu_model""", params).fetchall()
    return ["gpu_model", "vram_gb", *(f"{k}_{c}" for k in kinds for c in ("usd", "provider")), "offers",
            "providers", "regions", "obtainable"], rows


def provider_listing(con: duckdb.DuckDBPyConnection, selection: OfferFilter) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(columns, rows): per GPU model, provider and purchase option, its cheapest offer, how many it has and
    the obtainable share of its region; on demand first, then by price."""
    where, params = selection.where()
    rows = con.execute(
        f"""select o.gpu_model, o.provider, o.purchase_option, round(o.price_per_gpu_hour, 4),
                   round(o.price_per_hour, 4), o.gpu_count, o.instance_type, o.region, {VRAM_SQL}, count(*) over w,
                   round(a.obtainable_7d, 4)
            from offers o left join availability_obtainable a using (gpu_model, provider, region)
            where {where}
            window w as (partition by o.gpu_model, o.provider, o.purchase_option)
            qualify row_number() over (w order by o.price_per_gpu_hour, o.region, o.zone, o.instance_type) = 1
            order by o.gpu_model, o.purchase_option <> 'on_demand', o.term_months is not null,
                     o.price_per_gpu_hour, o.provider, o.purchase_option""", params).fetchall()
    return list(LISTING), rows


def show_gpus_command(
    listing_gpu: Optional[str] = typer.Argument(None, metavar="[GPU]", help="List this GPU (a model, or a "
                                                "family: every variant) per provider and purchase option."),
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="Only this GPU in the summary: a canonical model "
                                      "(H100-SXM) or a family (H100, every variant)."),
    min_vram_gb: Optional[float] = typer.Option(None, "--min-vram", help="Only GPUs with at least this many GB "
                                                "per GPU (the card's marketed memory; a GPU slice's own share)."),
    # two flags, not one --spot/--on-demand pair, where the last given wins: both given is refused
    spot: bool = typer.Option(False, "--spot", help="Only reclaimable offers (spot, low_priority, interruptible)."),
    on_demand: bool = typer.Option(False, "--on-demand", help="Only on-demand offers."),
    commitments: bool = typer.Option(False, "--commitments", help="Also 1- and 3-year commitments (reserved, "
                                     "savings plans, committed use): their own column, or their own rows."),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    region: list[str] = typer.Option([], "--region", help="Only these regions (repeatable; `us-*` is a prefix)."),
    max_price: Optional[float] = typer.Option(None, "--max-price", help="Only offers at most this many USD "
                                              "per GPU-hour."),
    db: Optional[Path] = DbOption,
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
) -> None:
    """Per GPU model: memory, cheapest on demand and spot; or one GPU's offers.

    Per GPU model: memory, the cheapest USD per GPU-hour on demand and spot
    with its provider, the offer count, providers and regions. With a GPU:
    its cheapest offer per provider and purchase option, with price,
    instance and region. Names match in any case; an unknown one exits 2
    naming the nearest.

    \b
    Examples:
      gpuledger show-gpus --min-vram 80
      gpuledger show-gpus H100
      gpuledger show-gpus --gpu H100 --on-demand --format csv
    """

    if spot and on_demand:
        raise fail("--spot and --on-demand exclude each other: give one, or neither for both", 2)
    if gpu and listing_gpu:
        raise fail("name the GPU once: `show-gpus H100` lists it per provider, `--gpu H100` filters the summary", 2)
    if "" in (gpu, listing_gpu):  # `show-gpus "$GPU"` with GPU unset: not the summary of every GPU
        raise fail("the GPU name is empty: name a model (H100-SXM) or a family (H100)", 2)
    try:
        selection = OfferFilter(gpu=gpu or listing_gpu, min_vram_gb=min_vram_gb,
                                spot=True if spot else False if on_demand else None, providers=tuple(provider),
                                regions=tuple(region), max_price=max_price, commitments=commitments)
    except FilterError as e:  # a bound below 0, named by the flag that set it
        raise fail(flagged(str(e), {"min_vram_gb": "--min-vram", "max_price": "--max-price"}), 2) from None
    with open_reader(db) as con:  # a WarehouseError or FilterError: one line, exit 2 (flows/cli.py)
        selection = selection.resolved(con, SOURCES)
        columns, rows = (provider_listing if listing_gpu else gpu_summary)(con, selection)
        # a provider named (a registered source, perhaps never loaded here) that holds no current offer
        holding = {p for (p,) in con.execute("select distinct provider from offers").fetchall()}
        absent = [p for p in selection.providers if p not in holding]
        empty = [f for f in provider_freshness(con, providers=absent) if f.provider in absent]
    if empty:
        err.print(literal("no current offer in this warehouse from " + ", ".join(
            f"{f.provider} ({STATE_SHOWN.get(f.state, f.state)})" for f in empty)
            + "; `gpuledger status` shows each provider's scrapes"), soft_wrap=True)  # one line, however long
    if not rows:
        err.print("no current offer passes these filters", highlight=False)
    emit(columns, rows, chosen(fmt, as_json), lists=("providers",))  # 31 names exceed a cell's 200 characters


def register(app: typer.Typer) -> None:
    app.command(name="show-gpus")(show_gpus_command)
