"""The summary matrix: provider x fault -> survived / lost / n/a."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.faults.providers import FAULTS

# A test's verdict rides on its report (user_properties), so the process that prints the matrix
# gets it whether the test ran there or in a pytest-xdist worker.
VERDICT_PROPERTY = "fault_verdict"


def keep(node: pytest.Item, verdict: Any) -> None:
    node.user_properties.append((VERDICT_PROPERTY, dataclasses.asdict(verdict)))

SHORT = {
    "refused": "refused", "timeout": "timeout", "reset": "reset", "http_429": "429", "http_500": "500",
    "http_503_once": "503x1", "truncated": "trunc", "schema_drift": "drift", "empty": "empty",
    "rows_90pct_gone": "-90%", "price_x100": "x100", "price_negative": "neg", "price_nan": "NaN",
    "currency": "EUR", "duplicates": "dups", "layout": "layout",
    # tests/faults/test_text_faults.py: from the wire to every output path, one source's cells
    "hostile_text": "text", "secret_in_data": "secret",
}
TEXT_FAULTS = ("hostile_text", "secret_in_data")


def render(matrix: dict[tuple[str, str], Any]) -> list[str]:
    providers = sorted({p for p, _ in matrix})
    faults = [f for f in (*FAULTS, *TEXT_FAULTS) if any((p, f) in matrix for p in providers)]
    width = max(len(SHORT[f]) for f in faults)
    name_width = max([len("provider"), *map(len, providers)]) + 1
    lines = ["provider".ljust(name_width) + " " + " ".join(SHORT[f].rjust(width) for f in faults)]
    tried = survived = lost_rows = 0
    for p in providers:
        cells = []
        for f in faults:
            v = matrix.get((p, f))
            if v is None:
                mark = "."  # not run in this session
            elif v.expected == "n/a":
                mark = "n/a"
            else:
                tried += 1
                survived += v.survived
                lost_rows += v.rows_lost
                mark = "ok" if v.survived else "LOST"
            cells.append(mark.rjust(width))
        lines.append(p.ljust(name_width) + " " + " ".join(cells))
    lines.append(f"faults tried: {tried}, survived: {survived}, lost: {tried - survived}, "
                 f"providers: {len(providers)}, rows lost or wrong: {lost_rows}")
    lines.append("ok = survived (failed cleanly with rows byte for byte, or loaded with only the bad records "
                 "quarantined, or recovered by a retry); n/a = no such thing in this provider's format")
    for p in providers:
        for f in faults:
            v = matrix.get((p, f))
            if v is not None and v.expected != "n/a" and not v.survived:
                lines.append(f"LOST {p} {f}: " + "; ".join(v.problems)[:600])
    return lines
