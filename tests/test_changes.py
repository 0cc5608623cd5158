"""Largest price moves of one refresh, read back from offer_history after real merges."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuledger.flows.changes import largest_price_moves, moves_markdown, refresh_price_moves
from gpuledger.flows.refresh import _artifact_markdown, summarize
from tests.builders import lambda_price_hook, load_day, offer, replayed_warehouse
from gpuledger.warehouse.store import open_writer


@pytest.fixture
def warehouse(db: Path) -> Path:
    con = open_writer(db)
    try:
        # day 0 (refresh-0): the starting prices
        load_day(con, "aws", [offer("a", 10.0), offer("b", 20.0), offer("c", 30.0), offer("d", 40.0),
                              offer("s", 3.0, option="spot", available=True)], 0, "refresh-0")
        load_day(con, "gcp", [offer("x", 100.0), offer("y", 50.0)], 0, "refresh-0")
        # day 1 (refresh-1): a +20 %, b -25 %, c same, d gone (closed, not a move), e new,
        # s only changes availability (a new version, same price: not a move); gcp x +50 %;
        # lambda fails (no scrape closes anything)
        load_day(con, "aws", [offer("a", 12.0), offer("b", 15.0), offer("c", 30.0), offer("e", 5.0),
                              offer("s", 3.0, option="spot", available=False)], 1, "refresh-1")
        load_day(con, "gcp", [offer("x", 150.0), offer("y", 50.0)], 1, "refresh-1")
        load_day(con, "lambda", None, 1, "refresh-1", error="lambda: HTTP 503")
        # day 2 (refresh-2): a moves again; it must not show up in refresh-1's moves
        load_day(con, "aws", [offer("a", 6.0), offer("b", 15.0), offer("c", 30.0), offer("e", 5.0),
                              offer("s", 3.0, option="spot", available=False)], 2, "refresh-2")
    finally:
        con.close()
    return db


def test_moves_of_one_refresh_ranked_by_relative_change(warehouse: Path) -> None:
    moves = refresh_price_moves(warehouse, "refresh-1", top=10)
    got = [(m["provider"], m["instance_type"], m["old_price_per_hour"], m["new_price_per_hour"],
            round(m["change_pct"], 6)) for m in moves]
    assert got == [("gcp", "x", 100.0, 150.0, 50.0), ("aws", "b", 20.0, 15.0, -25.0), ("aws", "a", 10.0, 12.0, 20.0)]
    # per GPU-hour too (8 GPUs per instance)
    assert (moves[0]["old_price_per_gpu_hour"], moves[0]["new_price_per_gpu_hour"]) == (12.5, 18.75)
    assert refresh_price_moves(warehouse, "refresh-1", top=2)[1]["instance_type"] == "b"
    later = refresh_price_moves(warehouse, "refresh-2")
    assert [(m["instance_type"], m["change_pct"]) for m in later] == [("a", -50.0)]
    assert refresh_price_moves(warehouse, "refresh-0") == []  # first load: everything new, nothing moved


def test_moves_in_the_artifact(warehouse: Path) -> None:
    con = open_writer(warehouse)
    try:
        moves = largest_price_moves(con, "refresh-1")
        reports = con.execute("select provider from scrape_runs where refresh_id = 'refresh-1' order by provider"
                              ).fetchall()
    finally:
        con.close()
    assert [r[0] for r in reports] == ["aws", "gcp", "lambda"]
    table = moves_markdown(moves)
    assert table.splitlines()[2] == "| gcp | us-east-1 | - | x | on_demand | H100-SXM | 100.0000 | 150.0000 | +50.0% |"
    assert table.splitlines()[3].endswith("| 20.0000 | 15.0000 | -25.0% |")
    assert moves_markdown([]) == "No price changed in this refresh."

    from gpuledger.warehouse.store import LoadReport
    summary = summarize("refresh-1", [LoadReport("aws", "r1", "ok", rows_loaded=5, new=1, changed=3, closed=1),
                                      LoadReport("lambda", "r2", "failed", error="lambda: HTTP 503\nretry")])
    summary["price_moves"] = moves
    md = _artifact_markdown(summary)
    assert "| aws | ok | 5 | 1 | 3 | 1 | 0 |  |" in md
    assert "## Largest price moves (top 10, by relative change)" in md
    assert table in md
    assert md.endswith("## Failures\n\n- **lambda**: HTTP 503 retry")  # named once


def test_a_sources_text_in_the_moves_table_stays_text() -> None:
    """A region, zone or type with markdown in it is shown as it is: a trailing backslash used to escape the
    cell's closing pipe (the row lost a column), a link rendered as a link and a tag as HTML."""
    move = {"provider": "vastai", "region": "[cheap](https://evil.example)", "zone": "z|1", "instance_type": "8x\\",
            "purchase_option": "on_demand", "gpu_model": "H100-SXM", "old_price_per_hour": 10.0,
            "new_price_per_hour": 12.0, "change_pct": 20.0}
    row = moves_markdown([move]).splitlines()[2]
    assert row == ("| vastai | \\[cheap\\](https://evil.example) | z\\|1 | 8x\\\\ | on_demand | H100-SXM | "
                   "10.0000 | 12.0000 | +20.0% |")
    # every cell boundary is an unescaped pipe: as many as the header's
    assert re.sub(r"\\.", "", row).count("|") == moves_markdown([move]).splitlines()[0].count("|") == 10
    assert moves_markdown([{**move, "region": "<img src=x onerror=alert(1)>", "zone": "",
                            "instance_type": "a & b"}]).splitlines()[2].startswith(
        "| vastai | \\<img src=x onerror=alert(1)\\> | - | a \\& b | on_demand |")


def test_moves_from_a_replayed_price_cut(db: Path) -> None:
    """Lambda's real client, replayed twice; the second time its 8x H100 costs $28.72 instead of $31.92."""
    replayed_warehouse(db, ["lambda", "runpod"], refresh_id="refresh-a")
    replayed_warehouse(db, ["lambda", "runpod"], hook=lambda_price_hook("gpu_8x_h100_sxm5", 2872),
                       refresh_id="refresh-b")
    moves = refresh_price_moves(db, "refresh-b")
    assert {(m["provider"], m["instance_type"], m["old_price_per_hour"], m["new_price_per_hour"],
             round(m["change_pct"], 4)) for m in moves} == {("lambda", "gpu_8x_h100_sxm5", 31.92, 28.72, -10.0251)}
    regions = sql_regions(db)
    assert len(moves) == len(regions) >= 1 and {m["region"] for m in moves} == regions
    assert refresh_price_moves(db, "refresh-a") == []


def sql_regions(db: Path) -> set[str]:
    con = open_writer(db)
    try:
        return {r[0] for r in con.execute(
            "select region from offers where provider = 'lambda' and instance_type = 'gpu_8x_h100_sxm5'").fetchall()}
    finally:
        con.close()
