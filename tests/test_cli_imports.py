"""The reading commands start without pyarrow or numpy: importing them costs about a second of
CPU, paid by every `gpuledger` process (and the tests start hundreds). Only writing needs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuledger.warehouse.store import close_writer, open_reader, open_writer
from tests.builders import load_day, offer

# One child runs the three commands in turn, as `gpuledger` would, then reports which of the
# heavy modules it imported (a command's SystemExit is its normal end).
CHILD = """
import json, sys
from gpuledger.flows.cli import app
codes = []
for args in (["--help"], ["status"], ["sql", "select provider, instance_type from offers"]):
    try:
        app(args, prog_name="gpuledger")
    except SystemExit as done:
        codes.append(done.code)
print(json.dumps({"codes": codes, "heavy": sorted(m for m in ("pyarrow", "numpy", "pandas", "polars")
                                                    if m in sys.modules)}))
"""


def test_help_status_and_sql_import_neither_pyarrow_nor_numpy(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "lambda", [offer("gpu_8x_h100_sxm5", 23.92)], day=0)
    finally:
        close_writer(con)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "GPULEDGER_DB": str(db), "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    # --help ends with 0, status with 3 (the stored day is long stale), sql with 0: each ran to its end.
    assert report["codes"] == [0, 3, 0], out.stdout
    assert "gpu_8x_h100_sxm5" in out.stdout  # sql printed the stored row: the query really ran
    assert report["heavy"] == []
