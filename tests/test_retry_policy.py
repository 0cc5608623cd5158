"""The one retry policy: the documented bound on hits per endpoint, Retry-After, the time budget.

Every client is the real one (httpx, the Google clients and their pagers, boto3) against a
loopback server that always answers 503 (the replay server with a hook), with the policy's
defaults: docs/reliability.md ("Retries") promises at most 3 hits per endpoint per refresh.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from gpuledger.adapters import aws, gcp, lambdalabs
from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.adapters.retry import RetryPolicy
from gpuledger.http_headers import retry_after_s

DOCUMENTED_BOUND = 3  # docs/reliability.md, "Retries": attempts per endpoint per refresh


class Always503:
    """A replay hook: every request is answered 503 and counted by (host, path)."""

    def __init__(self) -> None:
        self.hits: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, host: str, req, exchange):
        with self.lock:
            self.hits[(host, req.path)] += 1
        if host.startswith("ec2."):
            body = (b'<?xml version="1.0"?><Response><Errors><Error><Code>Unavailable</Code><Message>down'
                    b"</Message></Error></Errors><RequestID>r1</RequestID></Response>")
            return 503, {"Content-Type": "text/xml"}, body
        return 503, {"Content-Type": "application/json"}, b'{"error": {"code": 503, "message": "down"}}'


def context(server, provider: str, **kwargs) -> SourceContext:
    """The policy's defaults (3 attempts, waits up to 8 s, a 120 s budget); only the read timeout is short."""
    return SourceContext(provider=provider, mode="replay", replay_urls=server.endpoints(),
                         settings=dict(server.settings.get(provider, {})), http_timeout_s=10, **kwargs)


def test_defaults_are_the_documented_ones() -> None:
    ctx = SourceContext(provider="x")
    assert (ctx.http_attempts, ctx.retry_wait_max_s, ctx.retry_budget_s) == (3, 8.0, 120.0)
    assert ctx.retry_policy.botocore_retries() == {"total_max_attempts": 3, "mode": "standard"}


def test_retry_after_as_seconds_and_as_an_http_date() -> None:
    now = datetime(2026, 10, 21, 7, 27, 30, tzinfo=timezone.utc)
    assert retry_after_s("120", now) == 120.0
    assert retry_after_s(" 2 ", now) == 2.0
    assert retry_after_s("Wed, 21 Oct 2026 07:28:00 GMT", now) == 30.0
    assert retry_after_s("Wed, 21 Oct 2026 07:00:00 GMT", now) == 0.0  # already past
    assert retry_after_s("-5", now) == 0.0
    assert retry_after_s("soon", now) is None
    assert retry_after_s("", now) is None and retry_after_s(None, now) is None


def test_httpx_get_hits_a_failing_endpoint_three_times(replay) -> None:
    hook = Always503()
    server = replay("lambda", hook=hook)
    ctx = context(server, "lambda")
    with ctx.http_client() as client, pytest.raises(SourceError, match=r"failed after 3 attempts: HTTP 503"):
        ctx.get(client, lambdalabs.API_HOST, lambdalabs.INSTANCE_TYPES_PATH)
    assert hook.hits == {(lambdalabs.API_HOST, lambdalabs.INSTANCE_TYPES_PATH): DOCUMENTED_BOUND}
    assert ctx.requests_made == 3


def test_a_request_that_gets_no_answer_counts_as_sent() -> None:
    # Without a network the summary said 'failed after 3 attempts: ConnectError ... (0 requests, 0 bytes)'.
    import socket

    with socket.socket() as sock:  # a port nothing listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = SourceContext(provider="lambda", mode="replay", replay_urls={lambdalabs.API_HOST: f"http://127.0.0.1:{port}"},
                        retry_wait_max_s=0.01)
    with ctx.http_client() as client, pytest.raises(SourceError, match=r"failed after 3 attempts: ConnectError"):
        ctx.get(client, lambdalabs.API_HOST, lambdalabs.INSTANCE_TYPES_PATH)
    assert ctx.requests_made == 3


def test_a_stream_is_retried_before_its_body_like_any_request(replay) -> None:
    hook = Always503()
    server = replay("aws", hook=hook)
    ctx = context(server, "aws")
    with ctx.http_client() as client, pytest.raises(SourceError, match=r"failed after 3 attempts: HTTP 503"):
        list(ctx.stream_bytes(client, aws.PRICING_BULK_HOST, aws.EC2_REGION_INDEX))
    assert hook.hits == {(aws.PRICING_BULK_HOST, aws.EC2_REGION_INDEX): DOCUMENTED_BOUND}


def test_google_clients_hit_each_failing_listing_three_times(replay) -> None:
    hook = Always503()
    server = replay("gcp", hook=hook)
    with pytest.raises(SourceError, match=r"^gcp: .* \(page 1\) failed after 3 attempts: 503"):
        gcp.fetch(context(server, "gcp"))
    # All five listings run at once, each through its client's pager (the TPU locations through the
    # client's own paging of a plain answer) and google-api-core's Retry.
    assert hook.hits == {
        (gcp.COMPUTE_HOST, "/compute/v1/projects/gpuledger-replay/zones"): DOCUMENTED_BOUND,
        (gcp.COMPUTE_HOST, "/compute/v1/projects/gpuledger-replay/aggregated/machineTypes"): DOCUMENTED_BOUND,
        (gcp.COMPUTE_HOST, "/compute/v1/projects/gpuledger-replay/aggregated/acceleratorTypes"): DOCUMENTED_BOUND,
        (gcp.BILLING_HOST, f"/v1/{gcp.COMPUTE_ENGINE_SERVICE}/skus"): DOCUMENTED_BOUND,
        (gcp.TPU_HOST, "/v2/projects/gpuledger-replay/locations"): DOCUMENTED_BOUND,
    }


def test_boto3_hits_a_failing_endpoint_three_times(replay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "x" * 40)
    hook = Always503()
    server = replay("aws", hook=hook)
    ctx = context(server, "aws")
    ec2_host = "ec2.us-east-1.amazonaws.com"
    client = ctx.boto_client("ec2", "us-east-1", ec2_host)
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="Unavailable"):
        client.describe_availability_zones()
    assert hook.hits == {(ec2_host, "/"): DOCUMENTED_BOUND}
    assert ctx.requests_made == 3


def test_google_pager_counts_attempts_per_page(replay) -> None:
    """One 503 on each Catalog page: every page recovers on its second try (the count starts
    afresh per page), so a long listing is not failed by scattered transient errors."""
    failed: set[str] = set()
    hits: list[str] = []

    def hook(host: str, req, exchange):
        if host == gcp.BILLING_HOST:
            token = req.params.get("pageToken", "")
            hits.append(token)
            if token not in failed:
                failed.add(token)
                return 503, {"Content-Type": "application/json"}, b'{"error": {"code": 503, "message": "busy"}}'
        return None

    server = replay("gcp", hook=hook)
    batch = gcp.fetch(context(server, "gcp", retry_wait_max_s=0.05))
    pages = len(failed)
    assert pages >= 2  # the bundled Catalog recording has several pages
    assert len(hits) == 2 * pages and batch.counts()["offers"] > 0


def test_retry_after_http_date_is_waited_for_by_httpx_and_google(replay) -> None:
    for provider, host in (("lambda", lambdalabs.API_HOST), ("gcp", gcp.BILLING_HOST)):
        times: list[float] = []

        def hook(h: str, req, exchange, host=host, times=times):
            if h != host:
                return None
            times.append(time.monotonic())
            if len(times) == 1:
                when = datetime.now(timezone.utc) + timedelta(seconds=3)
                return 429, {"Retry-After": email.utils.format_datetime(when, usegmt=True),
                             "Content-Type": "application/json"}, b'{"error": {"code": 429, "message": "slow"}}'
            return None

        server = replay(provider, hook=hook)
        module = lambdalabs if provider == "lambda" else gcp
        if provider == "lambda":
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("LAMBDA_API_KEY", "secret-test-key")
                module.fetch(context(server, provider, retry_wait_max_s=5.0))
        else:
            module.fetch(context(server, provider, retry_wait_max_s=5.0))
        # The date has whole seconds: 3 s ahead waits between 2 and 3 s (the backoff alone: under 0.5 s).
        assert times[1] - times[0] >= 1.9, (provider, times)


def test_the_time_budget_stops_a_retry_that_would_overrun_it(replay) -> None:
    times: list[float] = []

    def hook(host: str, req, exchange):
        times.append(time.monotonic())
        return 429, {"Retry-After": "2", "Content-Type": "text/plain"}, b"slow down"

    server = replay("lambda", hook=hook)
    ctx = context(server, "lambda", retry_wait_max_s=5.0, retry_budget_s=1.0)
    started = time.monotonic()
    with ctx.http_client() as client, pytest.raises(SourceError, match=r"failed after 1 attempts: HTTP 429"):
        ctx.get(client, lambdalabs.API_HOST, lambdalabs.INSTANCE_TYPES_PATH)
    assert len(times) == 1 and time.monotonic() - started < 2.0  # the 2 s Retry-After not waited


def test_wait_is_retry_after_capped_or_the_backoff() -> None:
    policy = RetryPolicy(attempts=3, wait_max_s=8.0)
    assert policy.wait_s(2.0, 0.3) == 2.0
    assert policy.wait_s(120.0, 0.3) == 8.0
    assert policy.wait_s(None, 0.3) == 0.3


def test_prefect_retries_a_crash_but_never_a_provider_failure() -> None:
    from prefect.states import Failed

    from gpuledger.flows.refresh import retry_only_crashes

    assert retry_only_crashes(None, None, Failed(data=RuntimeError("worker lost"))) is True
    assert retry_only_crashes(None, None, Failed(data=SourceError("lambda: HTTP 503 ..."))) is False


def test_a_live_fetch_hits_a_failing_endpoint_three_times_and_reports_it_as_its_outcome(
        replay, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lambda source's real httpx client, live, against an endpoint that always answers 503: the
    HTTP policy's three attempts, then a failed outcome. The task hands that outcome back as its
    result, so Prefect's task retries (retry_only_crashes) never multiply the hits."""
    from gpuledger.flows.fetch import SourcePlan, fetch_outcome

    hook = Always503()
    server = replay("lambda", hook=hook)
    monkeypatch.setattr(SourceContext, "url", lambda self, host: server.endpoints()[host])
    monkeypatch.setenv("LAMBDA_API_KEY", "secret-test-key")
    outcome = fetch_outcome(SourcePlan("lambda", "live"))
    assert outcome.state == "failed" and "failed after 3 attempts: HTTP 503" in outcome.error
    assert hook.hits == {(lambdalabs.API_HOST, lambdalabs.INSTANCE_TYPES_PATH): DOCUMENTED_BOUND}


def test_a_retry_after_that_is_no_number_of_seconds_leaves_the_backoff_in_charge() -> None:
    """`Retry-After: nan` read as no wait at all sent a 429's three tries at once (0.1 s through Cudo's client)."""
    assert retry_after_s("nan") is None and retry_after_s("-nan") is None
    assert retry_after_s("inf") == float("inf")  # capped by RetryPolicy.wait_max_s like any long wait
    assert RetryPolicy().wait_s(retry_after_s("nan"), 1.5) == 1.5
