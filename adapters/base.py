"""What every source gets handed: where to send requests, and how.

A source never builds URLs to a provider's host by itself: it asks its
`SourceContext` for the base URL of a real host name. Live, that is the real
host; under replay, a loopback port serving recordings; under record, a
loopback proxy that saves what the real host said. The same client code runs
in all three, which is what makes the replay tests honest.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import httpx
from tenacity import (
    RetryCallState,
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from adapters.replay import Recorder, RecordingProxy, record_boto_client

log = logging.getLogger("gpuledger.adapters")

USER_AGENT = "gpuledger/0.1 (+https://github.com/gpuledger/gpuledger; GPU price comparison)"


class SourceError(Exception):
    """A provider could not be scraped; the message names the provider and what failed."""


class MissingCredentialsError(SourceError):
    """The provider needs credentials that are not configured; it is skipped, others continue."""


class SchemaDriftError(SourceError):
    """The provider answered, but not in the shape we parse (a field is missing or renamed)."""


@dataclass
class SourceContext:
    """Endpoints, settings and HTTP policy for one provider's scrape."""

    provider: str
    mode: str = "live"  # live | replay | record
    replay_urls: dict[str, str] = field(default_factory=dict)  # host -> loopback base URL
    settings: dict[str, Any] = field(default_factory=dict)
    recorder: Recorder | None = None
    proxy: RecordingProxy | None = None
    http_timeout_s: float = 60.0
    http_attempts: int = 3
    retry_wait_max_s: float = 8.0
    requests_made: int = 0

    # -- where to send requests -------------------------------------------------
    def upstream_url(self, host: str) -> str:
        """Base URL of `host` itself (live) or of its replay server."""
        if self.mode == "replay" or (self.mode == "record" and self.replay_urls):
            try:
                return self.replay_urls[host]
            except KeyError:
                raise SourceError(
                    f"{self.provider}: the recording has no exchanges for host {host}"
                ) from None
        return f"https://{host}"

    def url(self, host: str) -> str:
        """Base URL a plain HTTP client should use for `host` (no trailing slash)."""
        if self.mode == "record":
            assert self.proxy is not None
            return self.proxy.url(host)
        return self.upstream_url(host)

    def setting(self, name: str, default: Any = None) -> Any:
        env = os.environ.get(f"GPULEDGER_{name.upper()}")
        if env is not None:
            return env
        return self.settings.get(name, default)

    def select_regions(self, available: "Iterable[str]", live_defaults: "Iterable[str]", listed_in: str) -> list[str]:
        """Regions to scrape: setting `<provider>_regions` ("all" or a comma list); else, live,
        `live_defaults` (GPU regions), and under replay/record every region the source lists."""
        wanted = self.setting(f"{self.provider}_regions")
        avail = sorted(set(available))
        if wanted is None:
            defaults = set(live_defaults)
            return [r for r in avail if r in defaults] if self.mode == "live" else avail
        if wanted == "all":
            return avail
        names = [w.strip() for w in (wanted.split(",") if isinstance(wanted, str) else wanted) if w.strip()]
        unknown = [n for n in names if n not in avail]
        if unknown:
            raise SourceError(f"{self.provider}: regions {unknown} are not in {listed_in}")
        return names

    # -- clients ---------------------------------------------------------------
    def boto_client(self, service: str, region: str, host: str, **kwargs: Any) -> Any:
        """A real boto3 client; pointed at loopback under replay, recorded under record."""
        import boto3
        from botocore.config import Config

        endpoint = None if self.mode == "live" or (self.mode == "record" and not self.replay_urls) \
            else self.upstream_url(host)
        config = Config(
            retries={"max_attempts": self.http_attempts, "mode": "standard"},
            connect_timeout=min(self.http_timeout_s, 15),
            read_timeout=self.http_timeout_s,
            user_agent_extra="gpuledger/0.1",
        )
        client = boto3.client(service, region_name=region, endpoint_url=endpoint, config=config, **kwargs)
        if self.recorder is not None:
            record_boto_client(client, self.recorder, host)

        def count(**_: Any) -> None:
            self.requests_made += 1

        client.meta.events.register("before-send", count)
        return client

    def http_client(self, **kwargs: Any) -> httpx.Client:
        headers = {"User-Agent": USER_AGENT, **kwargs.pop("headers", {})}
        return httpx.Client(timeout=self.http_timeout_s, headers=headers, follow_redirects=True, **kwargs)

    def get(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> httpx.Response:
        """GET with retries on transport errors, 429 and 5xx; raises SourceError when exhausted."""
        return self._with_retries(lambda: client.get(self.url(host) + path, **kwargs), host, path)

    def post(self, client: httpx.Client, host: str, path: str, **kwargs: Any) -> httpx.Response:
        return self._with_retries(lambda: client.post(self.url(host) + path, **kwargs), host, path)

    def stream_lines(self, client: httpx.Client, host: str, path: str) -> Iterator[str]:
        """Stream a text body line by line: memory stays flat whatever the size."""
        attempt = 0
        while True:
            attempt += 1
            try:
                with client.stream("GET", self.url(host) + path) as resp:
                    self.requests_made += 1
                    if resp.status_code >= 400:
                        resp.read()
                        _raise_for(self.provider, host, path, resp)
                    yield from resp.iter_lines()
                    return
            except _RetryableHTTP as err:
                if attempt >= self.http_attempts:
                    raise SourceError(f"{self.provider}: GET {host}{path} failed: {err}") from err
                time.sleep(min(err.retry_after or 0.5 * 2**attempt, self.retry_wait_max_s))
            except httpx.TransportError as err:
                # Retrying mid-stream would duplicate lines already yielded: only a
                # failure before the first line is retried (the consumer sees none).
                raise SourceError(f"{self.provider}: GET {host}{path} failed: {type(err).__name__}: {err}") from err

    def _with_retries(self, call: Callable[[], httpx.Response], host: str, path: str) -> httpx.Response:
        def before_sleep(state: RetryCallState) -> None:
            log.info("%s: retrying %s%s after %s", self.provider, host, path, state.outcome.exception())

        @retry(
            stop=stop_after_attempt(self.http_attempts),
            wait=_wait_with_retry_after(self.retry_wait_max_s),
            retry=retry_if_exception(lambda e: isinstance(e, (httpx.TransportError, _RetryableHTTP))),
            before_sleep=before_sleep,
            reraise=True,
        )
        def attempt() -> httpx.Response:
            resp = call()
            self.requests_made += 1
            if resp.status_code >= 400:
                _raise_for(self.provider, host, path, resp)
            return resp

        try:
            return attempt()
        except _RetryableHTTP as err:
            raise SourceError(f"{self.provider}: {host}{path} failed after {self.http_attempts} attempts: {err}") from err
        except httpx.TransportError as err:
            raise SourceError(
                f"{self.provider}: {host}{path} failed after {self.http_attempts} attempts: "
                f"{type(err).__name__}: {err}"
            ) from err


class _RetryableHTTP(Exception):
    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _raise_for(provider: str, host: str, path: str, resp: httpx.Response) -> None:
    snippet = resp.text[:200].replace("\n", " ")
    msg = f"HTTP {resp.status_code} from {host}{path}: {snippet}"
    if resp.status_code == 429 or resp.status_code >= 500:
        retry_after = resp.headers.get("Retry-After")
        try:
            wait = float(retry_after) if retry_after else None
        except ValueError:
            wait = None
        raise _RetryableHTTP(msg, wait)
    raise SourceError(f"{provider}: {msg}")


def _wait_with_retry_after(max_wait: float) -> Callable[[RetryCallState], float]:
    backoff = wait_exponential(multiplier=0.5, max=max_wait)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _RetryableHTTP) and exc.retry_after is not None:
            return min(exc.retry_after, max_wait)
        return backoff(state)

    return wait
