"""The one retry policy of every provider request (docs/reliability.md, "Retries"): it drives tenacity (httpx),
google-api-core's Retry, botocore's `standard` mode and scrapy's RETRY_TIMES (spiders/settings.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from tenacity import (
    RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_before_delay, wait_random_exponential,
)


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
    """At most `attempts` tries, waiting a 429/5xx's Retry-After or a full-jitter exponential backoff,
    no wait over `wait_max_s`, no retry past `budget_s`."""

    attempts: int = 3
    wait_max_s: float = 8.0
    budget_s: float = 120.0
    initial_wait_s: float = 0.5

    def wait_s(self, retry_after: float | None, backoff: float) -> float:
        return min(retry_after if retry_after is not None else backoff, self.wait_max_s)

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

    def google_retry(self, retryable: tuple[type[BaseException], ...], on_failure: Callable[[], None],
                     retry_after: Callable[[BaseException], float | None]) -> "GoogleAttempts":
        return GoogleAttempts(self, retryable, on_failure, retry_after)

    def botocore_retries(self) -> dict[str, Any]:
        # total_max_attempts counts the first try; botocore's max_attempts would not.
        return {"total_max_attempts": self.attempts, "mode": "standard"}


class GoogleAttempts:
    """A google-api-core Retry for one listing: its `on_error` hook adds what google's lacks, the attempt
    bound per page (AttemptsSpent; `page_done()` starts the count afresh) and waiting out Retry-After."""

    def __init__(self, policy: RetryPolicy, retryable: tuple[type[BaseException], ...],
                 on_failure: Callable[[], None], retry_after: Callable[[BaseException], float | None]) -> None:
        from google.api_core.retry import Retry, if_exception_type

        self.policy = policy
        self._on_failure = on_failure
        self._retry_after = retry_after
        self.page_done()
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
