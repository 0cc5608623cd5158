"""The one retry policy of every provider request, and its translation to each client library.

A request (one URL, one page of a listing) is tried at most `attempts` times. Between tries
the client waits what a 429/5xx answer's Retry-After says (seconds, or an HTTP date), else a
jittered exponential backoff (full jitter: uniform in [0, initial * 2**n]); no wait exceeds
`wait_max_s`, and no retry starts whose wait would end past `budget_s` seconds after the first
try began. The same numbers drive:

- httpx (`SourceContext.get/post/stream_*`): tenacity;
- the Google clients: a `google.api_core.retry.Retry` (google's own backoff and deadline) passed
  to each call and kept by the client's pager for every later page, plus an `on_error` hook that
  enforces the attempt bound and Retry-After, which google-api-core's Retry does not;
- boto3: botocore's `standard` retry mode with `total_max_attempts` (botocore keeps its own
  jittered backoff and does not read Retry-After);
- scrapy: `RETRY_TIMES` = attempts - 1 (spiders/settings.py).

docs/reliability.md ("Retries") states the resulting bound on hits per endpoint per refresh.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks for: delay-seconds ("120") or an HTTP date
    ("Wed, 21 Oct 2026 07:28:00 GMT"); None when absent or unreadable; never negative."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())


class RetryableAnswer(Exception):
    """A 429 or 5xx answer: worth another try, after `retry_after` seconds if the server said."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AttemptsSpent(Exception):
    """The policy gave up on a request; `last` is the failure of its last try."""

    def __init__(self, last: BaseException, attempts: int) -> None:
        super().__init__(str(last))
        self.last = last
        self.attempts = attempts


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3
    wait_max_s: float = 8.0
    budget_s: float = 120.0
    initial_wait_s: float = 0.5

    def wait_s(self, retry_after: float | None, backoff: float) -> float:
        """The wait before the next try: the server's Retry-After if it gave one, else `backoff`."""
        return min(retry_after if retry_after is not None else backoff, self.wait_max_s)

    # -- tenacity (httpx) -----------------------------------------------------------------------
    def retrying(self, retryable: Callable[[BaseException], bool],
                 before_sleep: Callable[[RetryCallState], None] | None = None) -> Retrying:
        backoff = wait_random_exponential(multiplier=self.initial_wait_s, max=self.wait_max_s)

        def wait(state: RetryCallState) -> float:
            err = state.outcome.exception() if state.outcome else None
            return self.wait_s(getattr(err, "retry_after", None), backoff(state))

        return Retrying(
            stop=stop_after_attempt(self.attempts) | stop_before_delay(self.budget_s),
            wait=wait,
            retry=retry_if_exception(retryable),
            before_sleep=before_sleep,
            reraise=True,
        )

    # -- google-api-core ------------------------------------------------------------------------
    def google_retry(self, retryable: tuple[type[BaseException], ...], on_failure: Callable[[], None],
                     retry_after: Callable[[BaseException], float | None]) -> "GoogleAttempts":
        return GoogleAttempts(self, retryable, on_failure, retry_after)

    # -- botocore -------------------------------------------------------------------------------
    def botocore_retries(self) -> dict[str, Any]:
        # total_max_attempts counts the first try; botocore's max_attempts would not.
        return {"total_max_attempts": self.attempts, "mode": "standard"}


class GoogleAttempts:
    """A google-api-core Retry for one listing (one thread), with the policy's attempt bound per page.

    google-api-core retries until its deadline (`timeout`, here the policy's budget) with its own
    jittered backoff; it has no attempt count and ignores Retry-After. Its `on_error` hook, called
    with every retryable failure before the next backoff is drawn, adds both: it waits out a
    Retry-After, and raises AttemptsSpent once a page has failed `attempts` times. `page_done()`
    starts the count afresh for the pager's next page.
    """

    def __init__(self, policy: RetryPolicy, retryable: tuple[type[BaseException], ...],
                 on_failure: Callable[[], None], retry_after: Callable[[BaseException], float | None]) -> None:
        from google.api_core.retry import Retry, if_exception_type

        self.policy = policy
        self._on_failure = on_failure
        self._retry_after = retry_after
        self.failures = 0
        self.started = time.monotonic()
        self.retry = Retry(predicate=if_exception_type(*retryable), initial=policy.initial_wait_s,
                           maximum=policy.wait_max_s, multiplier=2.0, timeout=policy.budget_s,
                           on_error=self._failed)

    def page_done(self) -> None:
        self.failures = 0
        self.started = time.monotonic()

    def _failed(self, err: Exception) -> None:
        self._on_failure()
        self.failures += 1
        if self.failures >= self.policy.attempts:
            raise AttemptsSpent(err, self.failures)
        wait = self._retry_after(err)
        if wait is not None:
            wait = self.policy.wait_s(wait, 0.0)
            if time.monotonic() - self.started + wait > self.policy.budget_s:
                raise AttemptsSpent(err, self.failures)
            time.sleep(wait)  # google's own backoff follows, so the server's wait is always kept
