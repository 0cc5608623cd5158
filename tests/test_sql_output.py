"""`gpuledger sql --format csv|json`: every value DuckDB answers is written, nested ones as JSON a strict reader
parses (a MAP keyed by dates, decimals or UUIDs; NaN inside a list or struct)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuledger.flows import output
from gpuledger.flows.cli import app
from gpuledger.warehouse.store import close_writer, open_writer

runner = CliRunner()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sqloutput") / "ledger.duckdb"
    close_writer(open_writer(db))
    return db


def sql(db: Path, query: str, fmt: str) -> str:
    result = runner.invoke(app, ["sql", query, "--db", str(db), "--format", fmt])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 0, result.output
    return result.output


# histogram() of a date or timestamp column (offers per day) is a MAP keyed by dates.
MAPS = ("select histogram(d) as per_day, map {1.5: 'x'} as by_decimal, "
        "map {uuid '00000000-0000-0000-0000-000000000001': 2} as by_uuid "
        "from (values (date '2026-12-01'), (date '2026-12-01'), (date '2026-12-02')) t(d)")
EXPECTED = {"per_day": {"2026-12-01": 2, "2026-12-02": 1}, "by_decimal": {"1.5": "x"},
            "by_uuid": {"00000000-0000-0000-0000-000000000001": 2}}


def test_a_map_keyed_by_dates_decimals_or_uuids_is_written_as_json(warehouse: Path) -> None:
    assert json.loads(sql(warehouse, MAPS, "json")) == [EXPECTED]
    rows = list(csv.DictReader(io.StringIO(sql(warehouse, MAPS, "csv"), newline="")))
    assert [{k: json.loads(v) for k, v in r.items()} for r in rows] == [EXPECTED]


def test_nan_inside_a_list_or_struct_is_json_null_in_csv_as_in_json(warehouse: Path) -> None:
    query = "select ['nan'::double, 2.5] as l, {'a': 'inf'::double, 'b': 1} as s"
    expected = {"l": [None, 2.5], "s": {"a": None, "b": 1}}
    assert json.loads(sql(warehouse, query, "json")) == [expected]
    rows = list(csv.DictReader(io.StringIO(sql(warehouse, query, "csv"), newline="")))
    # json.loads(..., parse_constant=...) refuses NaN and Infinity, which are no JSON
    strict = [{k: json.loads(v, parse_constant=lambda c: pytest.fail(f"{c} is no JSON")) for k, v in r.items()}
              for r in rows]
    assert strict == [expected]


def test_repeated_column_names_keep_every_value_in_json(warehouse: Path) -> None:
    # `select *` of a join (or x.b, y.b) names two columns alike: JSON had kept only the last one's value
    query = "select * from (select 1 as a, 2 as b, 5 as b_1) x join (select 1 as a, 3 as b) y on x.a = y.a"
    assert json.loads(sql(warehouse, query, "json")) == [{"a": 1, "b": 2, "b_1": 5, "a_1": 1, "b_2": 3}]
    # CSV and the table show DuckDB's own names, each column once
    assert sql(warehouse, query, "csv").splitlines() == ["a,b,b_1,a,b", "1,2,5,1,3"]


def test_a_decimal_is_a_json_number_where_a_double_holds_it_exactly(warehouse: Path) -> None:
    # SQL's 0.5 is a DECIMAL: JSON had the string "0.5", a reader a text column where a number was asked for
    query = ("select 0.5 as threshold, [1.25, 2.0] as steps, "
             "12345678901234567890.12::decimal(38, 2) as big")  # no double holds this one: every digit, as text
    assert json.loads(sql(warehouse, query, "json")) == [{"threshold": 0.5, "steps": [1.25, 2.0],
                                                          "big": "12345678901234567890.12"}]
    assert sql(warehouse, query, "csv").splitlines() == ["threshold,steps,big",
                                                         '0.5,"[1.25, 2.0]",12345678901234567890.12']


INTERVALS = ("select interval 1 month as m, interval 1 year as y, interval 3 day as d, interval 90 minute as mi, "
             "age(timestamp '2026-12-01', timestamp '2025-10-15') as span, [interval 2 month] as l")


def test_an_interval_keeps_its_months_in_every_format(warehouse: Path) -> None:
    # DuckDB's Python value of an interval is a timedelta, which has no months: 1 month was "30 days, 0:00:00",
    # 1 year "360 days, 0:00:00", age() of 1 year 1 month 17 days "407 days, 0:00:00"
    expected = {"m": "1 month", "y": "1 year", "d": "3 days", "mi": "01:30:00", "span": "1 year 1 month 17 days",
                "l": ["2 months"]}
    assert json.loads(sql(warehouse, INTERVALS, "json")) == [expected]
    assert sql(warehouse, INTERVALS, "csv").splitlines() == [
        "m,y,d,mi,span,l", '1 month,1 year,3 days,01:30:00,1 year 1 month 17 days,"[""2 months""]"']
    table = sql(warehouse, INTERVALS, "table")
    assert "│ 1 month │ 1 year │ 3 days │ 01:30:00 │ 1 year 1 month 17 days │ ['2 months'] │" in table


def test_an_interval_after_other_statements_keeps_its_months_names_and_order(warehouse: Path) -> None:
    # the statements before the last run first (a temp table); a repeated name, the order and a trailing
    # comment after the last semicolon are kept
    query = ("create temp table t as select x, interval (x) month as m from range(3) t(x);\n"
             "select m, x as m from t order by x desc; -- newest first")
    assert sql(warehouse, query, "csv").splitlines() == ["m,m", "2 months,2", "1 month,1", "00:00:00,0"]
    # a PIVOT whose columns come from the data (a statement of several to DuckDB) too
    query = "pivot (select 'x' as k, interval 2 month as v) on k using first(v)"
    assert sql(warehouse, query, "csv").splitlines() == ["x", "2 months"]


def test_a_nanosecond_timestamp_keeps_its_nanoseconds(warehouse: Path) -> None:
    # Python's datetime holds microseconds: '...00.123456789'::timestamp_ns was written '...00.123456'
    query = ("select '2026-01-01 00:00:00.123456789'::timestamp_ns as t, "
             "{'at': '2026-01-01 00:00:00.5'::timestamp_ns} as s")
    assert json.loads(sql(warehouse, query, "json")) == [{"t": "2026-01-01 00:00:00.123456789",
                                                          "s": {"at": "2026-01-01 00:00:00.5"}}]
    assert sql(warehouse, query, "csv").splitlines() == [
        "t,s", '2026-01-01 00:00:00.123456789,"{""at"": ""2026-01-01 00:00:00.5""}"']


def test_an_infinite_date_or_timestamp_is_written_as_infinity_not_as_a_date(warehouse: Path) -> None:
    # Python holds no infinite date: 'infinity'::timestamptz (a closed-or-open end, coalesce(valid_to, 'infinity'))
    # was written "9999-12-31 23:59:59.999999", without its time zone, and '-infinity'::date "0001-01-01"
    query = ("select 'infinity'::timestamptz as t, '-infinity'::timestamp as u, 'infinity'::date as d, "
             "'-infinity'::date as e, '2026-12-07 10:00:00+00'::timestamptz as real")
    assert json.loads(sql(warehouse, query, "json")) == [
        {"t": "infinity", "u": "-infinity", "d": "infinity", "e": "-infinity", "real": "2026-12-07 10:00:00+00:00"}]
    assert sql(warehouse, query, "csv").splitlines() == [
        "t,u,d,e,real", "infinity,-infinity,infinity,-infinity,2026-12-07 10:00:00+00:00"]
    assert "│ infinity │ -infinity │ infinity │ -infinity │ 2026-12-07 10:00:00+00:00 │" in sql(warehouse, query, "table")


@pytest.mark.parametrize("width, shown", [(120, 13), (200, 22)])
def test_a_table_wider_than_the_terminal_shows_the_columns_that_fit_and_names_the_rest(
        warehouse: Path, monkeypatch: pytest.MonkeyPatch, width: int, shown: int) -> None:
    # `select * from offers` (44 columns) on a 120-column terminal drew an empty grid: every column squeezed to
    # a character or none, not one header or value readable. Now the leftmost columns that fit at 6 characters
    # (and a border and padding) are shown whole, the others named on standard error.
    screen = io.StringIO()
    monkeypatch.setattr(output, "out", Console(file=screen, force_terminal=True, width=width, soft_wrap=True,
                                               color_system=None))
    query = "select " + ", ".join(f"'val-{i:02}' as c{i:02}" for i in range(1, 31))
    result = runner.invoke(app, ["sql", query, "--db", str(warehouse)])
    assert result.exit_code == 0, result.output
    table = screen.getvalue().splitlines()
    assert max(map(len, table)) <= width
    header = [c.strip() for c in table[1].split("┃")[1:-1]]
    values = [c.strip() for c in table[3].split("│")[1:-1]]
    assert header == [f"c{i:02}" for i in range(1, shown + 1)]
    assert values == [f"val-{i:02}" for i in range(1, shown + 1)]
    left_out = ", ".join(f"c{i:02}" for i in range(shown + 1, 31))
    assert f"30 columns, the first {shown} shown ({left_out} left out for the width; --format csv or json " \
        "writes all)" in " ".join(result.output.split())
