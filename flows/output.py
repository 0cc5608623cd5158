"""How every command prints what it found: one `--format table|csv|json` option (`--json` for scripts) and
one writer; tables go through `flows.literal` (provider text shown, never obeyed), CSV and JSON keep it whole
(a CSV cell a spreadsheet would run as a formula after a ', as `export` writes it)."""

from __future__ import annotations

import csv
import itertools
import json
import math
import re
import signal
import sys
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any, Collection, Iterable, Iterator, Sequence

import duckdb
import typer
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuledger.flows.literal import MESSAGE_LIMIT, cell, escaped, labelled, literal
from gpuledger.flows.stopping import handling


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


err = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


# Every command's output options, declared `fmt: Format = FormatOption, as_json: bool = JsonOption`.
FormatOption = typer.Option(Format.table, "--format", "-f", case_sensitive=False,
                            help="Output format: table, csv or json.")
JsonOption = typer.Option(False, "--json", help="JSON for scripts (the same as --format json).")


def counted(n: int, noun: str) -> str:
    """"1 provider", "3 providers"."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def fail(message: str, code: int = 1) -> typer.Exit:
    """`message` as one error line on standard error; the caller raises the Exit (code `code`) returned."""
    err.print(labelled("error:", "red", message), soft_wrap=True)  # one line, however long
    return typer.Exit(code)


def flagged(message: str, flags: dict[str, str]) -> str:
    """`message` of a Python API's check with each field it names (a key of `flags`) as the flag that sets it;
    quoted text (the value given) and a flag already named (--params) as they are."""
    return re.sub(r"'[^']*'|[\w-]+", lambda m: flags.get(m[0], m[0]), message)


@contextmanager
def on_ctrl_c(message: str) -> Iterator[None]:
    """Ctrl-C inside is `message`, exit 130: its KeyboardInterrupt, or the error a library made of it. DuckDB
    raises a RuntimeError for the query it stopped; pydantic-core a SchemaError when the interrupt came while it
    built a validator (a model class defined in an import), so a SIGINT is noted as it arrives."""
    pressed: list[int] = []

    def on_sigint(signum: int, frame: Any) -> None:
        pressed.append(signum)
        raise KeyboardInterrupt

    try:
        with handling((signal.SIGINT,), on_sigint):
            yield
    except KeyboardInterrupt:
        raise fail(message, 130) from None
    except Exception as err:
        stopped_query = isinstance(err, RuntimeError) and "interrupted" in str(err).lower()
        if isinstance(err, typer.Exit) or not (pressed or stopped_query):
            raise
        raise fail(message, 130) from None


def chosen(fmt: Format | str, as_json: bool = False) -> str:
    """The output format; `--json` beside `--format csv` asks for two, a usage error."""
    if as_json and Format(fmt) == Format.csv:
        raise fail("--json and --format csv ask for two formats: give one", 2)
    return "json" if as_json else Format(fmt).value


# DuckDB hands an infinite date or timestamp ('infinity', the open end `coalesce(valid_to, 'infinity')` writes)
# to Python as the largest or smallest value Python holds, 9999-12-31 23:59:59.999999 without its time zone.
_INFINITE = {datetime.max: "infinity", datetime.min: "-infinity", date.max: "infinity", date.min: "-infinity"}


def _finite(row: Sequence[Any]) -> list[Any]:
    return [_INFINITE.get(v, v) if isinstance(v, date) and getattr(v, "tzinfo", None) is None else v for v in row]


def _json_value(value: Any) -> Any:
    """`value` as JSON can hold it: NaN and infinities (no JSON numbers) become null, as JavaScript writes them;
    a MAP's key that JSON cannot hold (a date, a decimal, a UUID: histogram(valid_from::date)) becomes its text;
    a DECIMAL a number where a double holds it exactly (else its text, every digit kept)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Decimal):  # a DECIMAL (select 0.5, sum of decimals): a JSON number, not the text "0.5"
        number = float(value)
        return number if value.is_finite() and Decimal(repr(number)) == value else str(value)  # exactly, or text
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k if k is None or isinstance(k, (str, int, float)) else str(k): _json_value(v)
                for k, v in value.items()}
    return value


def _json_keys(columns: Sequence[str]) -> list[str]:
    """`columns` as the keys of a JSON object, which holds each once: a repeated name (`select x.b, y.b`, `select *`
    of a join) gets _1, _2 ... as DuckDB's .df() names it, so that no column's value is lost."""
    keys: list[str] = []
    for column in columns:
        key, n = column, 0
        while key in keys:
            n += 1
            key = f"{column}_{n}"
        keys.append(key)
    return keys


CSV_BATCH_ROWS = 10_000  # rows checked for formulas at a time, in one DuckDB call


def _no_formulas(con: duckdb.DuckDBPyConnection, rows: list[list[Any]]) -> list[list[Any]]:
    """`rows` with each text cell a spreadsheet would run as a formula (`export`'s FORMULA, by the same DuckDB
    regex) after a ' as export writes it; a number, a negative one included, stays a number."""
    from gpuledger.warehouse.export import FORMULA

    texts = list({v for r in rows for v in r if isinstance(v, str)})
    if not texts:
        return rows
    # a lone surrogate (no UTF-8 for DuckDB) is neither a blank nor a trigger: '?' in its place, the verdict alike
    found = con.execute(f"select [i for x, i in $texts if regexp_matches(x, '{FORMULA}')]",
                        {"texts": [t.encode("utf-8", "replace").decode() for t in texts]}).fetchone()[0]
    formulas = {texts[i - 1] for i in found}
    return [["'" + v if isinstance(v, str) and v in formulas else v for v in r] for r in rows] if formulas else rows


def emit(columns: Sequence[str], rows: Iterable[Sequence[Any]], fmt: str, title: str | None = None,
         lists: Collection[str] = ()) -> None:
    """`rows` under `columns` as a table on the terminal, or as CSV or JSON on standard output, where the rows
    are written as they come (JSON: json.dumps of the whole list, indent 2, one object at a time; CSV:
    CSV_BATCH_ROWS at a time). A column of `lists`
    (names joined by commas, each a cell's worth) is cut at MESSAGE_LIMIT on the terminal, not CELL_LIMIT."""
    if fmt != "csv":
        rows = map(_finite, rows)
    if fmt == "json":
        keys, sep = _json_keys(columns), "\n"
        sys.stdout.write("[")
        for r in rows:
            # ensure_ascii: a bidirectional control or any non-ASCII character travels as a \u escape,
            # the same value to a JSON reader and inert on a terminal.
            sys.stdout.write(sep + "  " + json.dumps(dict(zip(keys, map(_json_value, r))), default=str, indent=2,
                                                     ensure_ascii=True).replace("\n", "\n  "))
            sep = ",\n"
        sys.stdout.write("]\n" if sep == "\n" else "\n]\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        # On a terminal a provider's ESC or bidirectional control is written as its escape, never obeyed; into a
        # file or a pipe every value goes as it is, a formula's ' aside.
        shown = (lambda v: escaped(v) if isinstance(v, str) else v) if sys.stdout.isatty() else (lambda v: v)
        # the header too: a column name may be a formula (sql's `select 1 as "=x"`)
        rows = itertools.chain([columns], rows)
        with duckdb.connect() as con:
            for batch in iter(lambda: list(itertools.islice(rows, CSV_BATCH_ROWS)), []):
                # a list or a mapping in a cell as JSON text, which any reader parses (not Python's repr)
                batch = [[json.dumps(_json_value(v), default=str, ensure_ascii=False)
                          if isinstance(v, (list, dict)) else v for v in r] for r in batch]
                # '-infinity' is a date, not text: the formula check has seen the date
                writer.writerows([shown(v) for v in _finite(r)] for r in _no_formulas(con, batch))
    else:
        header = [cell(c) for c in columns]
        cells = [[literal(v, MESSAGE_LIMIT) if c in lists else cell(v) for c, v in zip(columns, r)] for r in rows]
        shown = _fitting_columns([header, *cells], out.width)
        table = Table(title=cell(title) if title else None, title_justify="left")
        for c in header[:shown]:
            table.add_column(c, overflow="fold")  # a narrow terminal wraps a value, never cuts it
        for r in cells:
            table.add_row(*r[:shown])
        out.print(table)
        if shown < len(columns):
            err.print(literal(f"{len(columns)} columns, the first {shown} shown ({', '.join(columns[shown:])} left "
                              "out for the width; --format csv or json writes all)"))


def widest_line(texts: Iterable[Text]) -> int:
    """How many terminal cells the widest line of `texts` takes."""
    return max(cell_len(line) for text in texts for line in text.plain.split("\n"))


FOLDED = 6  # a table column is folded down to no fewer characters than this; more columns than fit are left out


def _fitting_columns(lines: list[list[Text]], width: int) -> int:
    """How many columns of `lines` (the header, then the rows) a table `width` characters wide shows, the leftmost
    first, each folded to FOLDED characters at the least: a table of more squeezed every column to nothing."""
    used, shown = 1, 0
    for column in zip(*lines):
        used += min(widest_line(column), FOLDED) + 3
        if used > width and shown:
            break
        shown += 1
    return shown
