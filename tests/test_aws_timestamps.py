"""The boto3 clients' timestamp parser: the same instants as botocore's own, for every form AWS writes."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from botocore.utils import parse_timestamp

from gpuledger.adapters.aws import ec2
from gpuledger.adapters.base import parse_api_timestamp
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from tests.conftest import replay_context


@pytest.mark.parametrize("text, instant", [
    ("2026-11-29T00:11:48.000Z", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # EC2 XML
    ("2026-11-29T00:11:48Z", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),
    ("2026-11-29T01:11:48+01:00", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),
    ("Sun, 29 Nov 2026 00:11:48 GMT", datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # RFC 822
    (1795911108, datetime(2026, 11, 29, 0, 11, 48, tzinfo=timezone.utc)),  # epoch seconds (JSON APIs)
])
def test_same_instant_as_botocore(text, instant) -> None:
    ours = parse_api_timestamp(text)
    assert ours.tzinfo is not None and ours == instant == parse_timestamp(text)


def test_ec2_clients_parse_with_it() -> None:
    """A recorded spot price history page through a real EC2 client: its Timestamps carry the
    standard library's UTC (botocore's own parser gives dateutil's tzutc())."""
    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as server:
        client = ec2.ec2_client(replay_context(server, "aws"), "af-south-1")
        page = client.describe_spot_price_history(ProductDescriptions=["Linux/UNIX"],
                                                  StartTime=datetime(2026, 11, 1, tzinfo=timezone.utc),
                                                  Filters=ec2.gpu_type_filters(), MaxResults=1000)
    stamps = [p["Timestamp"] for p in page["SpotPriceHistory"]]
    assert stamps and all(s.tzinfo is timezone.utc for s in stamps)
