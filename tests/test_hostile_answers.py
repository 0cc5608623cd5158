"""A hostile provider against the real adapter clients (loopback servers, the live code path): answers that
inflate past the byte limit in one read, and listings that never end."""

from __future__ import annotations

import functools
import json
import socketserver
import threading
import time
import tracemalloc
import zlib
from typing import Any, Iterator

import pytest

from gpuledger.adapters.aws.pricelist import EC2_REGION_INDEX, PRICING_BULK_HOST
from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.adapters.registry import source_module
from gpuledger.adapters.replay import Request
from tests.conftest import replay_context

LIMIT = 64 * 2**20  # Lambda's byte limit per answer (ProviderSpec.max_answer_mb)
DRIP_PAUSE_S = 0.25


@functools.cache
def bomb(encoding: str) -> bytes:
    """256 MiB of zeros as a few KB, brotli-encoded or gzip inside gzip."""
    block, n = b"\0" * (1 << 24), 16
    if encoding == "br":
        import brotli  # scrapy's dependency, so httpx always decodes br

        packer = brotli.Compressor(quality=5)
        return b"".join([packer.process(block) for _ in range(n)] + [packer.finish()])
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    outer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return outer.compress(b"".join([inner.compress(block) for _ in range(n)] + [inner.flush()])) + outer.flush()


@pytest.fixture
def hostile() -> Iterator[Any]:
    """hostile(encoding, body) -> (URL of a loopback server answering 200 with that body, requests heard); a body
    given as a list of pieces is sent one piece every DRIP_PAUSE_S, its end marked by closing the connection."""
    servers: list[socketserver.ThreadingTCPServer] = []

    def start(encoding: str, body: bytes | list[bytes]) -> tuple[str, list[bytes]]:
        heard: list[bytes] = []

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                heard.append(self.request.recv(65536))
                length = f"Content-Length: {len(body)}" if isinstance(body, bytes) else "Connection: close"
                head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: {encoding}\r\n"
                        f"{length}\r\n\r\n").encode()
                try:
                    self.request.sendall(head)
                    for piece in [body] if isinstance(body, bytes) else body:
                        self.request.sendall(piece)
                        time.sleep(0 if isinstance(body, bytes) else DRIP_PAUSE_S)
                except OSError:  # the client gave up
                    pass

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", heard

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("encoding", ["br", "gzip, gzip"])
def test_an_answer_that_inflates_without_bound_in_one_read_is_refused_unread(hostile: Any, encoding: str) -> None:
    """A few KB of brotli, or of gzip inside gzip, inflate to 256 MiB in the decoder's first call, before the
    byte limit is checked (httpx decodes both; brotli comes with scrapy). Each request asks for gzip or deflate
    alone, whose decoder inflates one 64 KiB read at a time, and an answer in another coding is refused."""
    url, heard = hostile(encoding, bomb(encoding))
    ctx = SourceContext(provider="lambda", mode="replay", replay_urls={"cloud.lambda.ai": url}, http_attempts=1)
    tracemalloc.start()
    try:
        with pytest.raises(SourceError) as err:
            source_module("lambda").fetch(ctx)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < LIMIT, f"{peak:,} bytes held"
    assert str(err.value) == (f"lambda: cloud.lambda.ai/api/v1/instance-types: the answer is encoded as "
                              f"{encoding!r}, not gzip or deflate alone as asked")
    assert b"\r\naccept-encoding: gzip, deflate\r\n" in heard[0].lower()


def first_page(server: Any, host: str, path: str) -> dict[str, Any]:
    return next(json.loads(ex.body()) for ex in server.exchanges[host] if ex.path == path and ex.status == 200)


# (provider, the listing's page rewritten so that it always has a next one, which is always a new request)
ENDLESS = {
    "vultr": lambda doc, n: {**doc, "meta": {**doc["meta"], "links": {"next": f"cursor{n}", "prev": ""}}},
    "digitalocean": lambda doc, n: {**doc, "links": {"pages": {
        "next": f"https://api.digitalocean.com/v2/sizes?page={n + 1}&per_page=200"}}},
    "oci": lambda doc, n: {**doc, "links": [{"rel": "next", "href":
                                             f"https://apexapps.oracle.com/pls/apex/cetools/api/v1/products/?o={n}"}]},
    "spheron": lambda doc, n: {**doc, "totalPages": 10**9},
    "primeintellect": lambda doc, n: {**doc, "totalCount": 10**12},
}


@pytest.mark.parametrize("provider", sorted(ENDLESS))
def test_a_listing_that_never_ends_stops_at_the_page_cap_in_one_line(replay: Any, provider: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A cursor, a next link and a page count that always promise one more page: the walk stops at the cap."""
    monkeypatch.setenv("GPULEDGER_MAX_PAGES", "4")
    served = [0]

    def endless(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        served[0] += 1
        body = ENDLESS[provider](first_page(server, host, req.path), served[0])
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    server = replay(provider, hook=endless)
    with pytest.raises(SourceError) as err:
        source_module(provider).fetch(replay_context(server, provider))
    assert str(err.value).startswith(f"{provider}: ") and "\n" not in str(err.value)
    assert str(err.value).endswith(": paging did not end within 4 pages (GPULEDGER_MAX_PAGES)")
    assert served[0] == 4


def test_a_listing_of_endless_large_pages_stops_at_the_byte_limit_not_the_page_cap(
        replay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each page under the limit, the pages together were bounded only by the page cap: 500 pages of 28 MB of
    sizes, all parsed and kept, take tens of GB (10 of them: 1.8 GB). A listing's pages together get the
    limit of one answer (64 MiB): DigitalOcean's fifth page of 16 MB ends the walk."""
    monkeypatch.setenv("GPULEDGER_MAX_PAGES", "20")
    server = replay("digitalocean")
    doc = first_page(server, "api.digitalocean.com", "/v2/sizes")
    copies = 16_000_000 // len(json.dumps(doc["sizes"]))
    body = json.dumps({**doc, "sizes": doc["sizes"] * copies, "links": {"pages": {"next": "NEXT"}}}).encode()
    served = [0]

    def large(host: str, req: Request, ex: Any) -> tuple[int, dict[str, str], bytes]:
        served[0] += 1
        link = f"https://api.digitalocean.com/v2/sizes?page={served[0] + 1}&per_page=200".encode()
        return 200, {"Content-Type": "application/json"}, body.replace(b"NEXT", link)

    server.hook = large
    with pytest.raises(SourceError) as err:
        source_module("digitalocean").fetch(replay_context(server, "digitalocean"))
    assert str(err.value) == ("digitalocean: /v2/sizes: its pages together exceed the limit of 67,108,864 bytes "
                              "of one answer (after 5 pages)")
    assert served[0] == 5


@pytest.mark.parametrize("provider, body", [("lambda", b"[" * 100_000 + b"]" * 100_000),
                                            ("vultr", b'{"a":' * 100_000 + b"1" + b"}" * 100_000)])
def test_json_nested_past_the_parser_is_no_json_answer(replay: Any, provider: str, body: bytes) -> None:
    """200 kB of nested brackets raised a bare RecursionError out of the parser: the fetch failed as a crash
    ('RecursionError: maximum recursion depth exceeded while decoding a JSON array'), not as the answer's fault."""
    server = replay(provider, hook=lambda host, req, ex: (200, {"Content-Type": "application/json"}, body))
    with pytest.raises(SourceError) as err:
        source_module(provider).fetch(replay_context(server, provider))
    assert f"did not answer JSON (starts {body[:80].decode()!r})" in str(err.value)
    assert str(err.value).startswith(f"{provider}: ")


def test_a_compressed_body_that_does_not_inflate_fails_its_request_in_one_line(hostile: Any) -> None:
    """A gzip body that is not gzip escaped as a bare httpx.DecodingError ('vultr: DecodingError: Error -3 while
    decompressing data: invalid stored block lengths'), naming no request. Like any body that does not parse,
    it is not retried."""
    url, heard = hostile("gzip", b"\x1f\x8b\x08\x00" + b"x" * 16)
    ctx = SourceContext(provider="vultr", mode="replay", replay_urls={"api.vultr.com": url}, retry_wait_max_s=0.05)
    with pytest.raises(SourceError) as err:
        source_module("vultr").fetch(ctx)
    assert str(err.value) == ("vultr: api.vultr.com/v2/plans: the answer does not decode as its Content-Encoding "
                              "'gzip' says (Error -3 while decompressing data: invalid stored block lengths)")
    assert len(heard) == 1


def test_an_aws_answer_read_whole_keeps_the_default_limit_while_its_price_list_file_streams_past_it(
        hostile: Any) -> None:
    """AWS declares 4 GiB for its streamed price list files, and that limit held its answers read whole too:
    region_index.json of 300 MB of JSON (0.3 MB of gzip) was held and parsed (peak 657 MiB). An answer read
    whole keeps the default 64 MiB; an offer file still streams past it."""
    decoded = b'{"regions": {' + b" " * (80 << 20) + b"}}"
    url, _ = hostile("gzip", zlib.compress(decoded, 1, wbits=31))
    ctx = SourceContext(provider="aws", mode="replay", replay_urls={PRICING_BULK_HOST: url}, http_attempts=1)
    with ctx.http_client() as client:
        with pytest.raises(SourceError) as err:
            ctx.get_json(client, PRICING_BULK_HOST, EC2_REGION_INDEX)
        offer_file = "/offers/v1.0/aws/AmazonEC2/20261125173012/us-east-1/index.csv"
        streamed = sum(len(chunk) for chunk in ctx.stream_bytes(client, PRICING_BULK_HOST, offer_file))
    assert str(err.value) == (f"aws: {PRICING_BULK_HOST}{EC2_REGION_INDEX}: the answer exceeds the limit of "
                              "67,108,864 bytes (after decompression)")
    assert streamed == len(decoded) == 83_886_095  # 80 MiB of spaces and 15 bytes of JSON


def test_a_streamed_body_earns_time_by_its_bytes_on_the_wire_not_decoded(hostile: Any) -> None:
    """A streamed body's deadline grew by its decoded bytes: a gzip trickle of ~1 kB per quarter second inflating
    to 1 MiB each bought 4 s per piece, so it never ran out (an AWS stream lived until the task's kill). By wire
    bytes the 12 pieces (3 s) fail past the 0.5 s deadline."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    pieces = [packer.compress(b" " * (1 << 20)) + packer.flush(zlib.Z_SYNC_FLUSH) for _ in range(12)]
    assert max(map(len, pieces)) < 1100  # a 1 MiB piece costs the server about 1 kB
    url, _ = hostile("gzip", pieces + [packer.flush()])
    ctx = SourceContext(provider="aws", mode="replay", replay_urls={PRICING_BULK_HOST: url}, http_timeout_s=0.5)
    started = time.monotonic()
    with ctx.http_client() as client, pytest.raises(SourceError) as err:
        for _ in ctx.stream_bytes(client, PRICING_BULK_HOST, "/offer.csv"):
            pass
    assert str(err.value) == (f"aws: GET {PRICING_BULK_HOST}/offer.csv failed: ReadTimeout: the answer did not "
                              "arrive within its deadline (a slow drip)")
    assert time.monotonic() - started < 2.5  # the 12 pieces take 3 s
