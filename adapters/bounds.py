"""Every answer bounded: a wall-clock deadline (a dripping server cannot stretch it), a byte limit on the wire
and decoded, and redirects followed only on the same scheme, host and port (credentials stay with their host)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, wait
from typing import Any, Callable, Iterator, TypeVar

import httpx

from gpuledger.http_headers import ACCEPT_ENCODING, unsafe_coding

T = TypeVar("T")
MAX_REDIRECTS = 5
# A streamed body's deadline grows by one second per STREAM_MIN_RATE bytes it delivered on the wire (decoded
# bytes would let a compressible trickle buy a thousand times the time).
STREAM_MIN_RATE = 256 * 1024
TRANSFER_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class AnswerRefused(Exception):
    """An answer not taken: too large, or a redirect to another origin. Not worth a retry."""


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or {"http": 80, "https": 443}.get(url.scheme)


def within(seconds: float, work: Callable[[], T]) -> T:
    """`work()` in a daemon thread; httpx.ReadTimeout when it has not finished after `seconds` (a
    response the abandoned thread still opens is closed)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            future.set_exception(err)

    threading.Thread(target=run, daemon=True, name="gpuledger-request").start()
    if not wait([future], seconds).done:
        future.add_done_callback(_close_abandoned)
        raise httpx.ReadTimeout(f"no complete answer within {seconds:g} s")
    return future.result()


def _close_abandoned(future: Future[Any]) -> None:
    if future.exception() is None and isinstance(future.result(), httpx.Response):
        future.result().close()


def open_answer(client: httpx.Client, request: httpx.Request, limit: int) -> httpx.Response:
    """The answer to `request`, body unread, after following redirects on the request's origin."""
    request.headers["Accept-Encoding"] = ACCEPT_ENCODING
    resp = client.send(request, stream=True)
    for _ in range(MAX_REDIRECTS + 1):
        following = resp.next_request
        if following is None:
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                resp.close()
                raise AnswerRefused(f"the answer declares {int(declared):,} bytes, over the limit of {limit:,}")
            if refused := unsafe_coding(resp.headers.get("content-encoding", "")):
                resp.close()
                raise AnswerRefused(refused)
            return resp
        resp.close()
        if origin(following.url) != origin(request.url):
            there = following.url.copy_with(path="/", query=None, fragment=None)
            raise AnswerRefused(f"HTTP {resp.status_code} redirect to another origin ({there}) not followed: "
                                "credentials stay with their host")
        resp = client.send(following, stream=True)
    resp.close()
    raise AnswerRefused(f"more than {MAX_REDIRECTS} redirects")


def chunks(resp: httpx.Response, limit: int, deadline: float, streamed: bool = False) -> Iterator[bytes]:
    """The decoded body in chunks, refused past `limit` bytes (wire or decoded); httpx.ReadTimeout
    past the monotonic `deadline` (for a streamed body, extended by the bytes it delivered on the wire)."""
    decoded = 0
    try:
        for chunk in resp.iter_bytes():
            decoded += len(chunk)
            if max(decoded, resp.num_bytes_downloaded) > limit:
                raise AnswerRefused(f"the answer exceeds the limit of {limit:,} bytes (after decompression)")
            if time.monotonic() > deadline + (resp.num_bytes_downloaded / STREAM_MIN_RATE if streamed else 0):
                raise httpx.ReadTimeout("the answer did not arrive within its deadline (a slow drip)")
            yield chunk
    except httpx.DecodingError as err:  # a body that does not parse: not worth a retry
        said = resp.headers.get("content-encoding", "")[:40]
        raise AnswerRefused(f"the answer does not decode as its Content-Encoding {said!r} says ({err})") from None


def materialized(resp: httpx.Response, limit: int, deadline: float,
                 on_received: Callable[[int], None] | None = None) -> httpx.Response:
    """`resp` (streamed) read whole within `limit` and `deadline`; `on_received` gets the wire bytes."""
    try:
        body = b"".join(chunks(resp, limit, deadline))
    finally:
        resp.close()
        if on_received is not None:
            on_received(resp.num_bytes_downloaded)
    headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in TRANSFER_HEADERS]
    return httpx.Response(resp.status_code, headers=headers, content=body, request=resp.request)


def fetch(client: httpx.Client, request: httpx.Request, limit: int, timeout_s: float,
          on_received: Callable[[int], None] | None = None) -> httpx.Response:
    """`request`'s whole answer, read within `timeout_s` seconds of wall clock and `limit` bytes."""
    deadline = time.monotonic() + timeout_s
    return within(timeout_s, lambda: materialized(open_answer(client, request, limit), limit, deadline, on_received))


def answer_limit(provider: str) -> int:
    """ProviderSpec.max_answer_mb in bytes: the limit of a streamed answer (AWS's price list files) and of a
    listing's pages together."""
    from gpuledger.adapters.contract import ProviderSpec
    from gpuledger.adapters.registry import UnknownProviderError, spec

    try:
        mb = spec(provider).max_answer_mb
    except UnknownProviderError:
        mb = ProviderSpec.model_fields["max_answer_mb"].default
    return int(mb * 2**20)


def held_limit(provider: str) -> int:
    """The limit of an answer read whole (held, then parsed): the provider's, never more than the default, which
    a provider raises only for what it streams or pages."""
    from gpuledger.adapters.contract import ProviderSpec

    return min(answer_limit(provider), int(ProviderSpec.model_fields["max_answer_mb"].default * 2**20))
