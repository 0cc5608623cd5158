"""What one refresh changed: the largest price moves, each an offer_history version a scrape of the refresh
closed and its successor opened by the same scrape at the same instant (vanished offers are no moves)."""

from __future__ import annotations

import os
import re
from typing import Any

import duckdb

from gpuledger.warehouse.schema import OFFERS
from gpuledger.warehouse.store import open_reader

MOVE_COLUMNS = ("provider", "region", "zone", "instance_type", "purchase_option", "gpu_model",
                "old_price_per_hour", "new_price_per_hour", "old_price_per_gpu_hour", "new_price_per_gpu_hour",
                "change_pct")


def largest_price_moves(con: duckdb.DuckDBPyConnection, refresh_id: str, top: int = 10) -> list[dict[str, Any]]:
    """The `top` offers whose instance price changed most (relative) in this refresh; change_pct -20.0 = 20% cheaper."""
    join = " and ".join(f"n.{k} = o.{k}" for k in OFFERS.key)
    rows = con.execute(
        f"""with runs as (select run_id from scrape_runs where refresh_id = $refresh and state = 'ok')
            select o.provider, o.region, o.zone, o.instance_type, o.purchase_option, n.gpu_model,
                   o.price_per_hour, n.price_per_hour, o.price_per_gpu_hour, n.price_per_gpu_hour,
                   100.0 * (n.price_per_hour - o.price_per_hour) / o.price_per_hour as change_pct
            from offer_history o
            join offer_history n
              on {join} and n.run_id = o.closed_by_run_id and n.valid_from = o.valid_to
            where o.closed_by_run_id in (select run_id from runs)
              and n.price_per_hour <> o.price_per_hour
            order by abs(change_pct) desc, o.provider, o.region, o.zone, o.instance_type, o.purchase_option
            limit $top""",
        {"refresh": refresh_id, "top": int(top)}).fetchall()
    return [dict(zip(MOVE_COLUMNS, r)) for r in rows]


def refresh_price_moves(db: str | os.PathLike[str] | None, refresh_id: str, top: int = 10) -> list[dict[str, Any]]:
    with open_reader(db) as con:
        return largest_price_moves(con, refresh_id, top)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def _md(text: Any) -> str:
    """A markdown table cell of scraped text, shown as it is: markdown's and HTML's characters escaped (a
    trailing backslash cannot escape the cell's closing pipe, a link or tag stays text), line breaks spaces."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ").replace("\r", " ")


def moves_markdown(moves: list[dict[str, Any]]) -> str:
    if not moves:
        return "No price changed in this refresh."
    # provider, purchase option and GPU model are gpuledger's own names; region, zone and type the source's
    lines = ["| provider | region | zone | instance | option | GPU | before $/h | after $/h | change |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m in moves:
        lines.append(
            f"| {m['provider']} | {_md(m['region'])} | {_md(m['zone'] or '-')} | {_md(m['instance_type'])} | "
            f"{m['purchase_option']} | {m['gpu_model']} | {m['old_price_per_hour']:.4f} | "
            f"{m['new_price_per_hour']:.4f} | {m['change_pct']:+.1f}% |")
    return "\n".join(lines)
