"""AWS answers that break in ways the nightly meets, through the real boto3 and httpx clients against the
loopback replay of the bundled recording: a listing whose NextToken never ends, an answer that times out or
breaks off mid-body (a core answer fails the scrape in one line naming it; an enrichment's costs only itself)."""

from __future__ import annotations

import gzip
import itertools
import re
import time

import pytest

from gpuledger.adapters import aws
from gpuledger.adapters.base import SourceError
from gpuledger.adapters.replay import BUNDLED_RECORDINGS, FileBody, RecordingError, ReplayServer
from tests.conftest import replay_context

REGION = "us-east-1"
EC2_HOST = f"ec2.{REGION}.amazonaws.com"
SERVED_AT_MOST = 60  # pages a looping listing is answered before the hook ends it (the old code never stopped)
PAGES = 8  # GPULEDGER_MAX_PAGES here: us-east-1 has 7 pages of DescribeInstanceTypes
# The deadline of every answer while one EC2 answer breaks. The other answers must beat it even on a loaded,
# shared machine: the price list streams and is parsed alongside, and a tight deadline can fail it first.
DEADLINE_S = 3


@pytest.fixture(scope="module")
def server():
    with ReplayServer(BUNDLED_RECORDINGS, providers=["aws"]) as replay:
        yield replay


def scrape(server, hook, http_timeout_s=10, **settings):
    server.hook = hook
    try:
        ctx = replay_context(server, "aws", settings={"aws_regions": REGION, **settings}, http_timeout_s=http_timeout_s)
        return aws.fetch(ctx), ctx
    finally:
        server.hook = None


def endless_pages(server, action: str, tokens):
    """Every `action` page of us-east-1 answered with its recorded first page and the next of `tokens` as its
    NextToken, up to SERVED_AT_MOST pages (then the listing ends); `served` counts them."""
    served = itertools.count(1)
    first = next(e for e in server.exchanges[EC2_HOST]
                 if e.match["params"].get("Action") == action and "NextToken" not in e.match["params"])

    def hook(host, req, ex):
        if host != EC2_HOST or req.params.get("Action") != action:
            return None
        body = first.body().decode()
        n = next(served)
        hook.served = n
        token = f"<nextToken>{next(tokens)}</nextToken>" if n < SERVED_AT_MOST else "<nextToken></nextToken>"
        body = re.sub(r"<nextToken>[^<]*</nextToken>", token, body)
        return 200, {"Content-Type": "text/xml;charset=UTF-8"}, body.encode()

    hook.served = 0
    return hook


@pytest.mark.parametrize("tokens, reason", [
    (itertools.cycle(["page-a", "page-b"]), r"page token 'page-a' came again \(a paging loop\)"),
    ((f"page-{i}" for i in itertools.count()), r"paging did not end within 8 pages \(GPULEDGER_MAX_PAGES\)"),
])
def test_a_core_listing_whose_next_token_never_ends_fails_the_scrape(server, tokens, reason) -> None:
    hook = endless_pages(server, "DescribeInstanceTypes", tokens)
    with pytest.raises(SourceError) as failed:
        scrape(server, hook, max_pages=PAGES)
    message = str(failed.value)
    assert message.startswith(f"aws: EC2 API in {REGION} (DescribeInstanceTypes): ")
    assert re.search(reason, message) and "\n" not in message, message
    assert hook.served <= PAGES


def test_an_enrichment_whose_next_token_never_ends_costs_only_itself(server) -> None:
    hook = endless_pages(server, "DescribeSpotPriceHistory", (f"page-{i}" for i in itertools.count()))
    batch, ctx = scrape(server, hook, max_pages=PAGES)
    assert list(ctx.degraded) == ["spot prices"]
    assert ctx.degraded["spot prices"] == (f"aws: EC2 API in {REGION} (DescribeSpotPriceHistory): paging did not "
                                           "end within 8 pages (GPULEDGER_MAX_PAGES)")
    assert batch.spot_prices == [] and not [o for o in batch.offers if o.purchase_option == "spot"]
    # README: 63 GPU types priced on demand in us-east-1
    assert len([o for o in batch.offers if o.purchase_option == "on_demand"]) == 63
    assert hook.served == PAGES


def test_a_spot_advisor_feed_of_another_shape_is_one_reason_not_one_per_region(server) -> None:
    batch, ctx = scrape(server, lambda host, req, ex: (200, {"Content-Type": "application/json"}, b"{}")
                        if host == aws.ec2.SPOT_ADVISOR_HOST else None, aws_regions="us-east-1,us-west-2,eu-west-1")
    assert ctx.degraded == {"spot advisor": "aws: Spot Advisor feed lacks ranges/spot_advisor (KeyError('ranges'))"}
    spot = [o for o in batch.offers if o.purchase_option == "spot"]
    assert {o.region for o in spot} == {"us-east-1", "us-west-2", "eu-west-1"}
    assert {(o.interruption_risk, o.interruption_risk_level) for o in spot} == {(None, "unknown")}


def cut_short(ex, folder):
    """The recorded answer gzipped and cut in half: the replay server breaks the connection mid-body."""
    path = folder / "cut.xml.gz"
    data = gzip.compress(ex.body())
    path.write_bytes(data[:len(data) // 2])
    return FileBody(path)


class Dripping(FileBody):
    """The recorded answer one byte every 0.25 s, each read well within the DEADLINE_S read timeout; it breaks
    off after DRIP_FOR_S (botocore's read timeout alone held a call as long as the server dripped)."""

    @property
    def length(self):
        return None

    def chunks(self, size=1, limit=None):
        started = time.monotonic()
        for byte in self.path.read_bytes():
            if time.monotonic() - started > DRIP_FOR_S:
                raise RecordingError("the drip ends")
            time.sleep(0.25)
            yield bytes([byte])


DRIP_FOR_S = 4 * DEADLINE_S  # long enough that a try held as long as the drip cannot pass the bound


def dripping(ex, folder):
    (folder / "drip.xml").write_bytes(ex.body())
    return 200, {"Content-Type": "text/xml;charset=UTF-8"}, Dripping(folder / "drip.xml")


def inflating(ex, folder):
    """The recorded answer and 65 MiB of spaces (XML allows them after the root element), as 65 kB of gzip."""
    path = folder / "large.xml.gz"
    path.write_bytes(gzip.compress(ex.body() + b" " * (65 << 20), 1))
    return 200, {"Content-Type": "text/xml;charset=UTF-8"}, FileBody(path)


BREAKS = {
    "timeout": lambda ex, folder: time.sleep(DEADLINE_S + 1.5),  # past the read timeout of every attempt
    "connection reset mid-body": lambda ex, folder: (200, {"Content-Type": "text/xml;charset=UTF-8"},
                                                     cut_short(ex, folder)),
    "drip": dripping,
}
BROKE = {"timeout": r"Read timeout on endpoint URL", "connection reset mid-body": r"Connection was closed|ncomplete",
         "drip": r"Read timeout on endpoint URL"}


def broken(action, kind, folder):
    def hook(host, req, ex):
        if host == EC2_HOST and req.params.get("Action") == action and "NextToken" not in req.params:
            return (BREAKS.get(kind) or kind)(ex, folder)
        return None

    return hook


@pytest.mark.parametrize("kind", BREAKS)
def test_a_core_ec2_answer_that_times_out_or_breaks_off_fails_the_scrape_naming_it(server, kind, tmp_path) -> None:
    with pytest.raises(SourceError) as failed:
        scrape(server, broken("DescribeInstanceTypes", kind, tmp_path), http_timeout_s=DEADLINE_S)
    message = str(failed.value)
    assert message.startswith(f"aws: EC2 API in {REGION} (DescribeInstanceTypes) failed: "), message
    assert re.search(BROKE[kind], message) and "\n" not in message, message


@pytest.mark.parametrize("kind", BREAKS)
def test_a_spot_history_answer_that_times_out_or_breaks_off_costs_only_itself(server, kind, tmp_path) -> None:
    """A drip held each botocore try for DRIP_FOR_S, then failed as a closed connection: each of the 2 tries
    ends at its DEADLINE_S deadline."""
    started = time.monotonic()
    batch, ctx = scrape(server, broken("DescribeSpotPriceHistory", kind, tmp_path), http_timeout_s=DEADLINE_S)
    assert time.monotonic() - started < 2 * DRIP_FOR_S
    assert list(ctx.degraded) == ["spot prices"]
    reason = ctx.degraded["spot prices"]
    assert reason.startswith(f"aws: EC2 API in {REGION} (DescribeSpotPriceHistory) failed: "), reason
    assert re.search(BROKE[kind], reason), reason
    assert batch.spot_prices == [] and not [o for o in batch.offers if o.purchase_option == "spot"]
    assert len([o for o in batch.offers if o.purchase_option == "on_demand"]) == 63


EMPTY_SPOT = (b'<?xml version="1.0" encoding="UTF-8"?>\n<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/'
              b'doc/2016-11-15/"><requestId>r</requestId><spotPriceHistorySet/><nextToken/>'
              b'</DescribeSpotPriceHistoryResponse>')


def test_an_empty_spot_history_after_stored_prices_is_a_failed_answer_not_a_vanished_market(server) -> None:
    """DescribeSpotPriceHistory returns the price in effect at StartTime as well: after a region's stored history
    an answer without any price is not "no spot market" (every spot offer closed, or the anomaly guard failing
    the whole scrape when every region answers so)."""
    def empty(host, req, ex):
        if host == EC2_HOST and req.params.get("Action") == "DescribeSpotPriceHistory":
            return 200, {"Content-Type": "text/xml;charset=UTF-8"}, EMPTY_SPOT
        return None

    server.hook = empty
    try:
        mark = {"spot_price_history:us-east-1": "2026-11-30T02:58:05+00:00"}
        ctx = replay_context(server, "aws", settings={"aws_regions": REGION}, since=mark)
        batch = aws.fetch(ctx)
        first = replay_context(server, "aws", settings={"aws_regions": REGION})
        first_batch = aws.fetch(first)  # no stored history: nothing to contradict
    finally:
        server.hook = None
    assert ctx.degraded == {"spot prices": "aws: EC2 API in us-east-1 (DescribeSpotPriceHistory) answered no "
                                           "Linux/UNIX spot price since 2026-11-30T02:58:05+00:00, though it returns "
                                           "the price in effect then"}
    assert not [o for o in batch.offers if o.purchase_option == "spot"]
    assert len([o for o in batch.offers if o.purchase_option == "on_demand"]) == 63
    assert first.degraded == {} and not [o for o in first_batch.offers if o.purchase_option == "spot"]


def test_az_offerings_answering_no_gpu_type_is_a_failed_answer_not_every_offer_unavailable(server) -> None:
    """DescribeInstanceTypes describes the GPU types a region has; an offerings answer naming none of them would
    mark every offer of the region `available = false`. 67: the items with a gpuInfo in the recording's us-east-1
    DescribeInstanceTypes pages."""
    empty = (b'<DescribeInstanceTypeOfferingsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r'
             b'</requestId><instanceTypeOfferingSet/></DescribeInstanceTypeOfferingsResponse>')
    batch, ctx = scrape(server, lambda host, req, ex: (200, {"Content-Type": "text/xml;charset=UTF-8"}, empty)
                        if host == EC2_HOST and req.params.get("Action") == "DescribeInstanceTypeOfferings" else None)
    assert ctx.degraded == {"az offerings": "aws: EC2 API in us-east-1 (DescribeInstanceTypeOfferings) offered "
                                            "none of the 67 GPU instance types DescribeInstanceTypes describes"}
    on_demand = [o for o in batch.offers if o.purchase_option == "on_demand"]
    assert len(on_demand) == 63 and {(o.available, o.available_count) for o in on_demand} == {(None, None)}


def test_an_ec2_answer_over_the_byte_limit_costs_only_its_enrichment(server, tmp_path) -> None:
    """botocore read an answer whole, with no byte limit: 65 MiB of spot history was held and parsed. It is
    refused at the limit of an answer read whole, 64 MiB, and not retried."""
    batch, ctx = scrape(server, broken("DescribeSpotPriceHistory", inflating, tmp_path))
    assert ctx.degraded == {"spot prices": f"aws: {EC2_HOST} (DescribeSpotPriceHistory): the answer exceeds the "
                                           "limit of 67,108,864 bytes (after decompression)"}
    assert len([o for o in batch.offers if o.purchase_option == "on_demand"]) == 63
