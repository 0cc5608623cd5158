"""The replay server streams large body files instead of reading them whole per request."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import tracemalloc
from pathlib import Path

import httpx
import pytest

from gpuledger.adapters.replay import STREAM_MIN_BYTES, RecordingError, ReplayServer

BODY_BYTES = 6 * STREAM_MIN_BYTES


def _recording(root: Path) -> bytes:
    """One provider with a large gzip body (random bytes, so the file is as large as the body),
    a large plain body and a small one."""
    body = random.Random(19).randbytes(BODY_BYTES)
    folder = root / "big"
    folder.mkdir(parents=True)
    (folder / "prices.csv.gz").write_bytes(gzip.compress(body, 1, mtime=0))
    (folder / "plain.bin").write_bytes(body)
    manifest = {"provider": "big", "exchanges": [
        {"host": "prices.example", "path": "/prices.csv", "response": {"status": 200, "body_file": "prices.csv.gz",
                                                                        "headers": {"Content-Type": "text/csv"}}},
        {"host": "prices.example", "path": "/plain", "response": {"status": 200, "body_file": "plain.bin"}},
        {"host": "prices.example", "path": "/small", "response": {"status": 200, "body": "ok"}},
    ]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return body


def test_a_large_gz_body_is_streamed_decompressed_in_chunks(tmp_path: Path) -> None:
    body = _recording(tmp_path)
    with ReplayServer(tmp_path) as server, httpx.Client() as client:
        url = server.endpoints()["prices.example"]
        tracemalloc.start()
        try:
            digest, size, chunks = hashlib.sha256(), 0, 0
            with client.stream("GET", url + "/prices.csv") as resp:
                assert resp.status_code == 200
                assert resp.headers["transfer-encoding"] == "chunked"
                assert "content-length" not in resp.headers
                assert resp.headers["content-type"] == "text/csv"
                for chunk in resp.iter_bytes():
                    digest.update(chunk)
                    size += len(chunk)
                    chunks += 1
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert size == BODY_BYTES and digest.digest() == hashlib.sha256(body).digest()
        assert chunks > 1
        # the server held a chunk at a time: reading the 6 MiB file and its 6 MiB body whole would be 12 MiB
        assert peak < BODY_BYTES / 2, peak

        plain = client.get(url + "/plain")
        assert plain.headers["content-length"] == str(BODY_BYTES) and plain.content == body
        small = client.get(url + "/small")
        assert small.headers["content-length"] == "2" and small.text == "ok"
    assert server.bytes_sent == {"prices.example": 2 * BODY_BYTES + 2}


def _one_gz_body(root: Path, data: bytes) -> Path:
    folder = root / "gz"
    folder.mkdir(parents=True)
    (folder / "prices.json.gz").write_bytes(data)
    manifest = {"exchanges": [{"host": "prices.example", "path": "/prices",
                               "response": {"status": 200, "body_file": "prices.json.gz"}}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder / "prices.json.gz"


def test_a_gz_body_file_that_is_not_gzip_is_refused_naming_it(tmp_path: Path) -> None:
    body = _one_gz_body(tmp_path, b'{"saved": "by hand, not compressed"}')
    with pytest.raises(RecordingError) as err:
        ReplayServer(tmp_path)
    assert str(err.value) == (f"{tmp_path / 'gz' / 'manifest.json'}: exchange 0: body file {body} is not "
                              "gzip-compressed (a name ending in .gz is served decompressed)")


def test_a_truncated_gz_body_breaks_the_answer_off_in_one_log_line(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    whole = gzip.compress(random.Random(3).randbytes(50_000), mtime=0)
    body = _one_gz_body(tmp_path, whole[:len(whole) // 2])
    with ReplayServer(tmp_path) as server, httpx.Client() as client:
        with pytest.raises(httpx.RemoteProtocolError):
            client.get(server.endpoints()["prices.example"] + "/prices")
    assert "Traceback" not in capfd.readouterr().err  # the server thread printed none
    said = [r.getMessage() for r in caplog.records if r.name == "gpuledger.replay"]
    assert said == [f"gpuledger replay: body file {body} cannot be read: Compressed file ended before the "
                    "end-of-stream marker was reached"]
