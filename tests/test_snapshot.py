"""Readers and the writer never block each other (warehouse/snapshot.py): a refresh writes a
working copy and publishes it with one atomic rename; a reader keeps the snapshot it opened."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from gpuledger.warehouse.check import run_checks
from gpuledger.warehouse.records import Batch
from gpuledger.warehouse.store import AnomalyPolicy, utcnow
from tests.builders import load, scraped, shared_prefect_server

# What a notebook does: one read-only connection, opened the way docs/queries.md says, kept open.
# Each line on stdin is answered with one JSON line; "reconnect" closes and opens again first.
NOTEBOOK = """
import json, sys, duckdb
path = sys.argv[1]
con = duckdb.connect(path, read_only=True)
for line in sys.stdin:
    if line.strip() == "reconnect":
        con.close()
        con = duckdb.connect(path, read_only=True)
    a10 = con.execute("select distinct price_per_hour from offers where instance_type = 'gpu_1x_a10'").fetchall()
    versions = con.execute("select count(*) from offer_history where instance_type = 'gpu_1x_a10'").fetchall()
    runs = con.execute("select count(*) from scrape_runs where provider = 'lambda'").fetchall()
    print(json.dumps([[r[0] for r in a10], versions[0][0], runs[0][0]]), flush=True)
"""


class Notebook:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", NOTEBOOK, str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read(self, reconnect: bool = False) -> list:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write("reconnect\n" if reconnect else "read\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else "the notebook ended"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


def lambda_recordings(root: Path, a10_cents: int) -> Path:
    """The bundled Lambda recording with gpu_1x_a10 (listed in 2 regions there) at `a10_cents`."""
    rec = root / "recordings"
    if not rec.exists():
        shutil.copytree(BUNDLED_RECORDINGS / "lambda", rec / "lambda")
    body = rec / "lambda" / "instance-types.json"
    doc = json.loads(body.read_text())
    doc["data"]["gpu_1x_a10"]["instance_type"]["price_cents_per_hour"] = a10_cents
    body.write_text(json.dumps(doc))
    return rec


@pytest.mark.prefect
def test_refreshes_in_a_row_succeed_while_a_notebook_holds_the_warehouse(api_url: str, tmp_path: Path) -> None:
    from gpuledger.flows.refresh import nightly_refresh

    db = tmp_path / "w.duckdb"

    def refresh(cents: int) -> dict:
        rec = lambda_recordings(tmp_path, cents)
        return nightly_refresh(db=str(db), providers=["lambda"], replay=True, recordings=str(rec))

    assert refresh(129)["ok"]  # the recorded price, $1.29
    notebook = Notebook(db)
    try:
        assert notebook.read() == [[1.29], 2, 1]  # 2 regions, one version each, one run
        for i in range(1, 5):  # two full turns of any alternation between snapshot files
            t0 = time.monotonic()
            summary = refresh(129 + i)
            took = time.monotonic() - t0
            assert summary["ok"], summary
            assert summary["providers"][0]["changed"] == 2
            assert took < 30, took  # no wait for the reader's lock (it used to fail after ~74 s)
            # The connection opened before this refresh still reads its own snapshot, whole ...
            assert notebook.read() == [[round(1.29 + (i - 1) / 100, 2)], 2 * i, i]
            # ... and a new connection reads the refresh's: one more version per region, one more run.
            assert notebook.read(reconnect=True) == [[round(1.29 + i / 100, 2)], 2 * (i + 1), i + 1]
    finally:
        notebook.close()
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert all(r.ok for r in run_checks(con))
    finally:
        con.close()
    assert not Path(str(db) + ".refresh-work").exists()


# -- kill -9 during publish ---------------------------------------------------------------------

# A write window (warehouse.store.merge_pending) of one provider at `price`, held at `point` of the
# publish step: "before-rename" (the working copy flushed, the path still the old file) or
# "after-rename" (renamed, the folder not yet flushed). It writes FOLDER/held there and sleeps.
WINDOW = """
import sys, time
from pathlib import Path
from gpuledger.warehouse import snapshot
from tests.test_snapshot import load_window

db, price, point, folder = sys.argv[1], float(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
real_fsync = snapshot._fsync
def hold():
    (folder / "held").write_text(point)
    time.sleep(120)
def fsync(path, directory=False):
    if (point, directory) in (("before-rename", False), ("after-rename", True)):
        hold()
    real_fsync(path, directory)
snapshot._fsync = fsync
load_window(db, price)
"""


def load_window(db: Path | str, price: float) -> None:
    """One write window (warehouse.store.merge_pending): 200 AWS offers, all at `price`."""
    b = Batch("aws")
    for i in range(200):
        assert b.offer(str(i), {}, region="us-east-1", instance_type=f"t{i}", purchase_option="on_demand",
                       gpu_model="L4", gpu_name_reported="L4", gpu_vendor="NVIDIA", gpu_count=1,
                       price_per_hour=price, source_currency="USD", source_price_per_hour=price)
    now = utcnow()
    assert load(db, [scraped("aws", "replay", now, now, batch=b)], f"r{price}")[-1].ok


def window(db: Path, price: float, point: str, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WINDOW, str(db), str(price), point, str(folder)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=Path(__file__).parent.parent)


def prices(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("select distinct price_per_hour from offers").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("point, expected", [("before-rename", 1.0), ("after-rename", 2.0)])
def test_kill_9_during_publish_leaves_the_old_or_the_new_snapshot(tmp_path: Path, point: str,
                                                                   expected: float) -> None:
    db = tmp_path / "w.duckdb"
    load_window(db, 1.0)
    old_digest = hashlib.sha256(db.read_bytes()).hexdigest()
    proc = window(db, 2.0, point, tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "held").exists():
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert prices(db) == [(expected,)]
    if point == "before-rename":
        assert hashlib.sha256(db.read_bytes()).hexdigest() == old_digest  # never touched
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert all(r.ok for r in run_checks(con))
    finally:
        con.close()
    # The next window discards the working copy the killed one left, and publishes its own.
    load_window(db, 3.0)
    assert prices(db) == [(3.0,)]
    assert not Path(str(db) + ".refresh-work").exists()
