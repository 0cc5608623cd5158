"""gpuledger inside the whole range of its dependencies: what the oldest allowed version of one meets."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.warehouse.store import WarehouseError, check_warehouse_file, close_writer, open_writer

HEADER_BYTES = 4096  # DuckDB's main header block: its checksum (8 bytes), b"DUCK", the storage version (uint64)
FUTURE_STORAGE_VERSION = 100_000


def from_a_newer_duckdb(path: Path) -> None:
    """Rewrite the header of the warehouse at `path` as a DuckDB newer than any released would write it: a storage
    version beyond every reader's, its checksum made again (DuckDB's: 5381 xor each later uint64 times a constant),
    so that it is refused for its version, as DuckDB 1.5 refuses a warehouse DuckDB 2.0 wrote."""
    with path.open("r+b") as f:
        block = bytearray(f.read(HEADER_BYTES))
        assert block[8:12] == b"DUCK"
        block[12:20] = struct.pack("<Q", FUTURE_STORAGE_VERSION)
        checksum = 5381
        for (word,) in struct.iter_unpack("<Q", bytes(block[8:])):
            checksum ^= (word * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        block[:8] = struct.pack("<Q", checksum)
        f.seek(0)
        f.write(block)


@pytest.fixture()
def newer_warehouse(tmp_path: Path) -> Path:
    db = tmp_path / "w.duckdb"
    close_writer(open_writer(db))
    from_a_newer_duckdb(db)
    return db


def test_a_warehouse_from_a_newer_duckdb_is_not_called_damaged(newer_warehouse: Path) -> None:
    """A refresh told a user whose DuckDB is older than the one that wrote the warehouse (1.5 and a file of 2.0)
    that it was 'a damaged or truncated file: restore it, or refresh into a new --db'; `status` and `sql` said
    DuckDB's own reason. Every command now says what DuckDB says: the file is of a newer storage version."""
    with pytest.raises(WarehouseError) as refused:
        check_warehouse_file(newer_warehouse)
    text = str(refused.value)
    assert text.startswith(f"cannot open {newer_warehouse}: IO Error: Trying to read a database file with "), text
    assert f"version number {FUTURE_STORAGE_VERSION}, but we can only read " in text
    assert "damaged" not in text and "restore" not in text


def test_refresh_names_a_newer_duckdbs_warehouse_as_such_and_leaves_it_alone(newer_warehouse: Path) -> None:
    before = newer_warehouse.read_bytes()
    result = CliRunner().invoke(app, ["refresh", "--replay", "-p", "lambda", "--db", str(newer_warehouse)])
    text = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert text.startswith(f"error: cannot open {newer_warehouse}: IO Error: Trying to read a database file with "), text
    assert f"version number {FUTURE_STORAGE_VERSION}, but we can only read " in text
    assert "damaged" not in text and len(result.output.strip().splitlines()) == 1
    assert newer_warehouse.read_bytes() == before
