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


# The `gpuledger` command itself (main(), not app) refreshing one provider, then reporting what
# its process holds: pyarrow converted the rows, and pyarrow would have imported pandas there.
REFRESH_CHILD = """
import json, sys
from gpuledger.flows.cli import main
sys.argv = ["gpuledger", "refresh", "--replay", "-p", "lambda"]
try:
    main()
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "pyarrow": "pyarrow.lib" in sys.modules,
                  "pandas": sys.modules.get("pandas") is not None}))
"""


def test_the_gpuledger_command_keeps_pandas_out_of_a_refresh(tmp_path: Path) -> None:
    import importlib.util

    assert importlib.util.find_spec("pandas") is not None, "the test extra installs pandas"
    db = tmp_path / "w.duckdb"
    out = subprocess.run([sys.executable, "-c", REFRESH_CHILD], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**os.environ, "GPULEDGER_DB": str(db), "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"code": 0, "pyarrow": True, "pandas": False}, out.stdout + out.stderr
    con = open_reader(db)
    try:
        assert con.execute("select count(*) from offers where provider = 'lambda'").fetchone()[0] > 0
    finally:
        con.close()


# pyarrow 26 reads sys.modules itself when it looks for pandas: a None entry there (what
# `sys.modules["pandas"] = None` would make) is taken for the module, and its first conversion
# raises AttributeError. Refused by gpuledger, the import fails as a missing module does.
REFUSED_CHILD = """
import json, sys
from gpuledger.pandas_refused import refuse_pandas
refuse_pandas()
import pyarrow as pa
table = pa.Table.from_pylist([{"gpu": "H100", "usd": 2.49}])
try:
    import pandas
    imported = True
except ModuleNotFoundError:
    imported = False
print(json.dumps({"rows": table.to_pylist(), "pandas imported": imported, "in sys.modules": "pandas" in sys.modules}))
"""


def test_refused_pandas_leaves_pyarrow_converting_from_its_first_call() -> None:
    out = subprocess.run([sys.executable, "-c", REFUSED_CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"rows": [{"gpu": "H100", "usd": 2.49}], "pandas imported": False,
                                      "in sys.modules": False}
