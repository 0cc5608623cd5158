"""`gpuledger check` (warehouse/check.py) on a warehouse with history: what it finds, what it lets pass."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.warehouse.store import close_writer, open_writer
from tests.test_warehouse import T0, load

OVERLAP = "offer_history: versions do not overlap and end after they start"


def check(db: Path) -> tuple[int, dict[str, str]]:
    result = CliRunner().invoke(app, ["check", "--db", str(db)])
    lines = [re.fullmatch(r"(ok|FAIL) +(.+?): (ok|\d+ offending rows, the first: .+|warehouse at .+)", line)
             for line in result.stdout.splitlines()]
    return result.exit_code, {m[2]: f"{m[1]} {m[3]}" for m in lines}


def test_overlapping_versions_of_one_offer_fail_the_overlap_check(db: Path) -> None:
    con = open_writer(db)
    try:
        # p4d: 21.96 from day 0 to day 1, then 19.5 from day 1 on (versions that touch, not overlap)
        load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 21.957642}, 0)
        load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 19.5}, 1)
    finally:
        close_writer(con)
    code, said = check(db)
    assert code == 0 and said[OVERLAP] == "ok ok"

    con = open_writer(db)
    try:  # a closed p5 version from day -1 to day 2 beside the open one from day 0: two prices at once
        con.execute("insert into offer_history select * replace ('other' as content_hash, $a as valid_from, "
                    "$b as valid_to) from offer_history where instance_type = 'p5.48xlarge'",
                    {"a": T0 - timedelta(days=1), "b": T0 + timedelta(days=2)})
    finally:
        close_writer(con)
    code, said = check(db)
    # before: "ok" (only a version ending before it starts, or two open ones, were looked for)
    assert code == 1 and said[OVERLAP] == ("FAIL 1 offending rows, the first: provider=aws, region=us-east-1, zone=, "
                                           "instance_type=p5.48xlarge, purchase_option=on_demand")
    assert [name for name, v in said.items() if not v.startswith("ok")] == [OVERLAP]


PRICES = "offers: prices positive and finite, GPU model known"


def test_a_nan_or_infinite_price_per_gpu_hour_fails_the_price_check(db: Path) -> None:
    con = open_writer(db)
    try:
        load(con, "aws", {"p5.48xlarge": 55.04, "p4d.24xlarge": 21.957642}, 0)
    finally:
        close_writer(con)
    assert check(db)[1][PRICES] == "ok ok"
    for bad in ("nan", "inf"):
        con = open_writer(db)
        try:  # the table's CHECK holds price_per_hour finite; price_per_gpu_hour > 0 lets NaN and inf in
            con.execute("update offers set price_per_gpu_hour = $bad::double where instance_type = 'p5.48xlarge'",
                        {"bad": bad})
        finally:
            close_writer(con)
        code, said = check(db)
        # before: "ok" (only price_per_hour was checked)
        assert code == 1 and said[PRICES] == (f"FAIL 1 offending rows, the first: provider=aws, region=us-east-1, "
                                              f"instance_type=p5.48xlarge, gpu_model=H100-SXM, price_per_hour=55.04, "
                                              f"price_per_gpu_hour={bad}")


FUTURE = "offer_history: no version dated after now"


def test_versions_dated_after_now_by_a_clock_that_was_ahead_fail_the_check(db: Path) -> None:
    from datetime import datetime, timezone

    ahead = (datetime.now(timezone.utc) - T0).days + 3  # a refresh under a clock three days ahead
    con = open_writer(db)
    try:
        load(con, "aws", {"p5.48xlarge": 55.04}, 0)
    finally:
        close_writer(con)
    assert check(db)[1][FUTURE] == "ok ok"
    con = open_writer(db)
    try:
        load(con, "aws", {"p5.48xlarge": 50.0}, ahead)
    finally:
        close_writer(con)
    code, said = check(db)
    # before: every check ok, the history dated three days ahead
    assert code == 1 and said[FUTURE].startswith(
        "FAIL 2 offending rows, the first: provider=aws, region=us-east-1, zone=, instance_type=p5.48xlarge")
    assert [name for name, v in said.items() if not v.startswith("ok")] == [FUTURE]


def test_a_warehouse_of_an_older_schema_is_told_the_next_refresh_upgrades_it(db: Path) -> None:
    import duckdb

    from gpuledger.warehouse.schema import SCHEMA_VERSION

    close_writer(open_writer(db))
    with duckdb.connect(str(db)) as con:  # as the gpuledger before this one left it
        con.execute("delete from schema_migrations where version = ?", [SCHEMA_VERSION])
    code, said = check(db)
    # before: "... this gpuledger expects N", and no word of what to do
    assert code == 1 and said["schema version"] == (
        f"FAIL warehouse at version {SCHEMA_VERSION - 1}, this gpuledger expects {SCHEMA_VERSION} "
        "(the next `gpuledger refresh` upgrades it in place)")
