"""`gpuledger sql` limits that limit: --timeout covers fetching and printing, --max-memory sets
DuckDB's memory limit, and a --db that is no regular file is refused at once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuledger.warehouse.store import close_writer, open_writer

# 40 million rows of about 60 characters: DuckDB makes them in a second or two; fetching and
# printing them takes minutes and, held whole, gigabytes.
HUGE = "select range as n, repeat('x', 50) as pad from range(40000000)"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("sqllimits") / "ledger.duckdb"
    close_writer(open_writer(db))
    return db


def sql(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """Run `gpuledger sql ARGS` with its output read as fast as it comes; (result, seconds, peak
    RSS in bytes of the command, from its parent's rusage)."""
    probe = ("import resource, subprocess, sys, time; t = time.monotonic(); "
             "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
             "print(p.returncode, time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
             "sys.stderr.write(p.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "gpuledger.flows.cli", "sql", *args],
                          capture_output=True, text=True, timeout=timeout)
    code, seconds, rss_kb = done.stdout.split()
    return subprocess.CompletedProcess(args, int(code), "", done.stderr), float(seconds), int(rss_kb) * 1024


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
def test_the_timeout_covers_fetching_and_printing(warehouse: Path, fmt: str) -> None:
    result, seconds, rss = sql(HUGE, "--db", str(warehouse), "--format", fmt, "--timeout", "2")
    assert result.returncode == 124, result.stderr
    assert " ".join(result.stderr.split()) == "error: the query ran longer than 2 s (--timeout) and was stopped"
    assert seconds < 2 + 10 + 5, seconds  # the limit, DuckDB's unwinding bound, the interpreter's start
    assert rss < 250e6, rss  # written as fetched, a table's rows past --max-rows only counted (held whole: 440 MB)


def test_a_table_shows_max_rows_and_counts_the_others(warehouse: Path) -> None:
    def shown(*args: str) -> tuple[list[int], str]:
        done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql", "select range as n from range(100)",
                               "--db", str(warehouse), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return [int(n) for n in re.findall(r"^│\s*(\d+)\s*│$", done.stdout, re.M)], " ".join(done.stderr.split())

    assert shown() == (list(range(40)), "100 rows, the first 40 shown (--max-rows 0 shows all; --format csv or "
                                        "json writes all)")
    assert shown("--max-rows", "5")[0] == list(range(5))
    assert shown("--max-rows", "0") == (list(range(100)), "")


def test_max_memory_sets_duckdbs_limit_and_a_bad_size_is_refused(warehouse: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql", "select current_setting('memory_limit') m",
                         "--db", str(warehouse), "-f", "csv", "--max-memory", "300MB"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.splitlines() == ["m", "286.1 MiB"], ok.stderr  # 300 MB in MiB
    starved = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql",
                              "select count(distinct range::varchar || 'x') from range(30000000)",
                              "--db", str(warehouse), "--max-memory", "20MB"], capture_output=True, text=True)
    assert starved.returncode == 1 and "Out of Memory" in starved.stderr and "Traceback" not in starved.stderr
    bad = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", "sql", "select 1", "--db", str(warehouse),
                          "--max-memory", "lots"], capture_output=True, text=True)
    assert bad.returncode == 2 and " ".join(bad.stderr.split()) == \
        "error: --max-memory 'lots' is not a size (500MB, 2GB)"


@pytest.mark.parametrize("command", [["sql", "select 1"], ["status"], ["refresh", "--replay", "-p", "lambda"]])
def test_a_db_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "pipe.duckdb"
    os.mkfifo(fifo)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "gpuledger.flows.cli", *command, "--db", str(fifo)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert " ".join(done.stderr.split()) == f"error: {fifo} is not a regular file, not a warehouse file: pass the " \
                                            "file with --db"
    assert time.monotonic() - started < 30
