"""`gpuledger show-gpus`: one line per GPU model, from the current offers.

Registered on the main app by `register(app)` (flows/cli.py). Its filters are the Python API's
(warehouse/offer_filter.py), its output the `sql` command's (table, csv or json).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import duckdb
import typer

from gpuledger.flows.output import Format, chosen, emit, format_option, json_option
from gpuledger.warehouse.offer_filter import VRAM_SQL, FilterError, OfferFilter
from gpuledger.warehouse.records import PurchaseOption
from gpuledger.warehouse.settings import env_name
from gpuledger.warehouse.store import WarehouseError, open_reader

OPTIONS = tuple(p.value for p in PurchaseOption)
COLUMNS = ("gpu_model", "vram_gb", *(f"{o}_usd" for o in OPTIONS), "offers", "providers", "regions", "obtainable")


def gpu_summary(con: duckdb.DuckDBPyConnection, selection: OfferFilter) -> tuple[list[str], list[tuple[Any, ...]]]:
    """(columns, rows): per GPU model among the selected offers, its memory per GPU (the largest
    the filters read, see offer_filter), the cheapest USD per GPU-hour under each purchase
    option (NULL where it has none), the offer count, its providers (comma-separated) and the
    number of distinct regions, and the share of the availability observations of the last 7 days
    (view availability_obtainable) of its providers and regions that had capacity. Rows ordered by
    the cheapest price of any option."""
    where, params = selection.where()
    cheapest = ", ".join(f"round(min(o.price_per_gpu_hour) filter (where o.purchase_option = '{o}'), 4)"
                         for o in OPTIONS)
    rows = con.execute(
        f"""with o as (select * from offers o where {where}),
                 a as (select gpu_model, sum(obtainable_7d * observations_7d) / nullif(sum(observations_7d), 0) as s
                       from availability_obtainable semi join o using (gpu_model, provider, region) group by all)
            select o.gpu_model, max({VRAM_SQL}) as vram_gb, {cheapest}, count(*),
                   string_agg(distinct o.provider, ',' order by o.provider), count(distinct o.region),
                   round(any_value(a.s), 4)
            from o left join a using (gpu_model)
            group by o.gpu_model order by min(o.price_per_gpu_hour), o.gpu_model""", params).fetchall()
    return list(COLUMNS), rows


def show_gpus_command(
    gpu: Optional[str] = typer.Option(None, "--gpu", "-g", help="Only this GPU: a canonical model (H100-SXM) "
                                      "or a family (H100, every variant)."),
    min_vram_gb: Optional[float] = typer.Option(None, "--min-vram", help="Only GPUs with at least this many GB "
                                                "per GPU (the card's marketed memory)."),
    spot: Optional[bool] = typer.Option(None, "--spot/--on-demand", help="Only reclaimable offers (spot, "
                                        "low_priority, interruptible), or only on-demand ones [default: both]."),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    region: list[str] = typer.Option([], "--region", help="Only these regions (repeatable; `us-*` is a prefix)."),
    max_price: Optional[float] = typer.Option(None, "--max-price", help="Only offers at most this many USD "
                                              "per GPU-hour."),
    db: Optional[Path] = typer.Option(None, "--db", envvar=env_name("db"),
                                      help="Warehouse file [default: ./gpuledger.duckdb]."),
    fmt: Format = format_option(),
    as_json: bool = json_option(),
) -> None:
    """One line per GPU model: memory, cheapest USD per GPU-hour per purchase option, providers, regions.

    \b
    Examples:
      gpuledger show-gpus --min-vram 80
      gpuledger show-gpus --gpu H100 --on-demand --format csv
    """
    from gpuledger.flows.cli import _fail

    try:
        selection = OfferFilter(gpu=gpu, min_vram_gb=min_vram_gb, spot=spot, providers=tuple(provider),
                                regions=tuple(region), max_price=max_price)
        con = open_reader(db)
    except (FilterError, WarehouseError) as err:
        raise _fail(str(err), 2) from None
    try:
        columns, rows = gpu_summary(con, selection)
    finally:
        con.close()
    emit(columns, rows, chosen(fmt, as_json))


def register(app: typer.Typer) -> None:
    """Add `show-gpus` to the gpuledger command line."""
    app.command(name="show-gpus")(show_gpus_command)
