"""`gpuledger pull` of a catalog whose manifest or files lie: each is refused in one line naming what
is wrong, the other providers load and nothing of the refused one changes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuledger.warehouse.catalog import MANIFEST
from tests.test_catalog import cli, published, query  # noqa: F401 (a fixture)


def copied(published: tuple[Path, Path], tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / "catalog"
    shutil.copytree(published[1], folder)
    return folder, json.loads((folder / MANIFEST).read_text())


@pytest.mark.parametrize("field, value", [("bytes", "as text"), ("bytes", float("inf")), ("rows", float("inf")),
                                          ("rows", "as text"), ("bytes", True)])
def test_a_file_entry_whose_rows_or_bytes_are_no_whole_number_is_refused_in_one_line(
        published: tuple[Path, Path], tmp_path: Path, field: str, value: Any) -> None:
    folder, manifest = copied(published, tmp_path)
    [entry] = [f for f in manifest["providers"]["lambda"]["files"] if f["table"] == "offers"]
    entry[field] = str(entry[field]) if value == "as text" else value
    (folder / MANIFEST).write_text(json.dumps(manifest))  # inf as Infinity, which json reads back
    b = tmp_path / "b.duckdb"
    # before: bytes as text, a ValueError traceback ("Cannot specify ',' with 's'"); Infinity, an OverflowError
    # traceback; rows as text, "27 rows (0 of another provider), the manifest says 27"
    code, output = cli("pull", str(folder), "--db", str(b))
    assert code == 1 and "Traceback" not in output
    [line] = [line for line in output.splitlines() if ": refused:" in line]
    assert line.startswith(f"lambda: refused: the manifest's entry is malformed (file entry {{'name': '{entry['name']}'")
    assert query(b, "select distinct provider from offers order by 1") == [("aws",), ("runpod",)]
