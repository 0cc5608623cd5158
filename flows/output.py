"""How every command prints what it found: one `--format table|csv|json` option (`--json` for scripts) and
one writer; tables go through `flows.literal` (provider text shown, never obeyed), CSV and JSON keep it whole."""

from __future__ import annotations

import csv
import json
import sys
from enum import Enum
from typing import Any, Sequence

import typer
from rich.console import Console
from rich.table import Table

from gpuledger.flows.literal import cell


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


err = Console(stderr=True, width=None if sys.stderr.isatty() else 120)
out = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def format_option() -> Any:
    """The `--format` of a command, declared `fmt: Format = format_option()`."""
    return typer.Option(Format.table, "--format", "-f", case_sensitive=False, help="Output format: table, csv or json.")


def json_option() -> Any:
    return typer.Option(False, "--json", help="JSON for scripts (the same as --format json).")


def chosen(fmt: Format | str, as_json: bool = False) -> str:
    return "json" if as_json else Format(fmt).value


def emit(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str, title: str | None = None) -> None:
    """`rows` under `columns` as a table on the terminal, or as CSV or JSON on standard output."""
    if fmt == "json":
        # ensure_ascii: a bidirectional control or any non-ASCII character travels as a \u escape,
        # the same value to a JSON reader and inert on a terminal.
        sys.stdout.write(json.dumps([dict(zip(columns, r)) for r in rows], default=str, indent=2,
                                    ensure_ascii=True) + "\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        table = Table(title=cell(title) if title else None, title_justify="left")
        for c in columns:
            table.add_column(cell(c), overflow="fold")  # a narrow terminal wraps a value, never cuts it
        for r in rows:
            table.add_row(*(cell(v) for v in r))
        out.print(table)
