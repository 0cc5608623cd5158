"""The EC2 clients' timestamp parser: the same instants as botocore's own, for every form AWS writes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from botocore.utils import parse_timestamp

from gpuledger.adapters import aws


@pytest.mark.parametrize("text, instant", [
    ("2026-11-29T00:11:48.000Z", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # EC2 XML
    ("2026-11-29T00:11:48Z", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),
    ("2026-11-29T01:11:48+01:00", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),
    ("Sun, 29 Nov 2026 00:11:48 GMT", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # RFC 822
    (1795911108, datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # epoch seconds (JSON APIs)
])
def test_same_instant_as_botocore(text, instant) -> None:
    ours = aws.parse_api_timestamp(text)
    assert ours.tzinfo is not None and ours == instant == parse_timestamp(text)


def test_ec2_clients_parse_with_it() -> None:
    ctx = aws.SourceContext(provider="aws", mode="replay", replay_urls={"ec2.us-east-1.amazonaws.com": "http://127.0.0.1:9"})
    client = aws.ec2_client(ctx, "us-east-1")
    parser = client._endpoint._response_parser_factory.create_parser("ec2")
    assert parser._timestamp_parser is aws.parse_api_timestamp
