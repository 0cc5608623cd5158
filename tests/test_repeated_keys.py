"""A JSON object that names a key twice is caught at parse time: the first value is kept, every
later one quarantined (docs/sources.md), never the last one loaded silently."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb

from gpuledger.adapters.base import RepeatedKey, parse_json
from gpuledger.adapters.replay import BUNDLED_RECORDINGS
from tests.builders import replayed_warehouse

RECORDING = BUNDLED_RECORDINGS / "lambda" / "instance-types.json"


def test_parse_json_keeps_the_first_value_and_reports_the_rest() -> None:
    found: list[RepeatedKey] = []
    doc = parse_json(b'{"a": 1, "b": {"p": 1.29, "p": 5.55, "p": 9}, "a": [2]}', "h/x", found)
    assert doc == {"a": 1, "b": {"p": 1.29}}
    assert [(r.where, r.key, r.value) for r in found] == [("h/x", "p", 5.55), ("h/x", "p", 9), ("h/x", "a", [2])]
    assert parse_json('{"a": 1, "b": 2}', "h/x", found) == {"a": 1, "b": 2} and len(found) == 3


def lambda_body_with(extra: str) -> bytes:
    """Lambda's recorded answer with `extra` (raw JSON members) right after its gpu_1x_a10 entry:
    text, since a Python dict cannot hold a key twice."""
    data = json.loads(RECORDING.read_text())["data"]
    members = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in data.items()]
    assert members[0].startswith('"gpu_1x_a10"')  # $1.29 in the recording (129 cents)
    return ('{"data": {' + ", ".join([members[0], *([extra] if extra else []), *members[1:]]) + "}}").encode()


def refresh_lambda(body: bytes, db: Path) -> None:
    def hook(host: str, req: object, ex: object) -> tuple[int, dict[str, str], bytes] | None:
        if ex is None or not req.path.endswith("/instance-types"):  # type: ignore[attr-defined]
            return None
        return 200, {"Content-Type": "application/json"}, body

    replayed_warehouse(db, ["lambda"], hook=hook, refresh_id="r-dup")


def test_lambda_instance_type_given_twice_loads_the_first_price_and_quarantines_the_second(tmp_path: Path) -> None:
    """gpu_1x_a10 named again at $5.55, and gpu_1x_rtx6000 (69 cents recorded) with its price
    field given twice: one answer, both caught."""
    data = json.loads(RECORDING.read_text())["data"]
    second = json.loads(json.dumps(data["gpu_1x_a10"]))
    second["instance_type"]["price_cents_per_hour"] = 555
    rtx = json.dumps(data["gpu_1x_rtx6000"])
    body = lambda_body_with(f'"gpu_1x_a10": {json.dumps(second)}').replace(
        rtx.encode(), rtx.replace('"price_cents_per_hour": 69', '"price_cents_per_hour": 69, '
                                  '"price_cents_per_hour": 555').encode())
    db = tmp_path / "ledger.duckdb"
    refresh_lambda(body, db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        prices = con.execute("select instance_type, region, price_per_hour from offers where instance_type in "
                             "('gpu_1x_a10', 'gpu_1x_rtx6000') order by 1, 2").fetchall()
        quarantined = con.execute("select kind, source_ref, reason, raw from quarantine order by source_ref").fetchall()
        count = con.execute("select count(*) from offers").fetchone()[0]
    finally:
        con.close()
    assert prices == [("gpu_1x_a10", "us-east-1", 1.29), ("gpu_1x_a10", "us-west-1", 1.29),
                      ("gpu_1x_rtx6000", "us-south-1", 0.69)]  # never $5.55
    assert count == 27  # the recording's offers, the repeated one not added
    (kind, ref, reason, raw), (kind2, ref2, _, raw2) = quarantined
    assert kind == "json" and ref == "cloud.lambda.ai/api/v1/instance-types key 'gpu_1x_a10'"
    assert "repeated JSON key 'gpu_1x_a10'" in reason and "first value is kept" in reason
    assert json.loads(raw)["instance_type"]["price_cents_per_hour"] == 555
    assert (kind2, ref2, raw2) == ("json", "cloud.lambda.ai/api/v1/instance-types key 'price_cents_per_hour'", "555")
