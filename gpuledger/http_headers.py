"""A server's headers read one way by the providers' requests (adapters/) and the catalog pull (warehouse/catalog.py),
which may not import the adapters: how long Retry-After asks to wait, and which Content-Encoding is safe to read."""

from __future__ import annotations

import email.utils
import math
from datetime import datetime, timezone

# The codings asked for and read: their decoder (zlib) inflates one read of 64 KiB at a time, to at most about
# 66 MB. Brotli, or gzip inside gzip, inflates a few KB to gigabytes in one call, before any limit is checked.
ACCEPT_ENCODING = "gzip, deflate"


def unsafe_coding(content_encoding: str) -> str | None:
    """Why an answer encoded as `content_encoding` is not read (None when it is one that was asked for)."""
    codings = [c for c in map(str.strip, content_encoding.lower().split(",")) if c not in ("", "identity")]
    if codings in ([], ["gzip"], ["deflate"]):
        return None
    return f"the answer is encoded as {content_encoding[:40]!r}, not gzip or deflate alone as asked"


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a Retry-After header asks for (delay-seconds or an HTTP date), never negative; None
    when absent or unreadable."""
    text = (value or "").strip()
    try:
        seconds = float(text)
        return None if math.isnan(seconds) else max(0.0, seconds)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - (now or datetime.now(timezone.utc))).total_seconds())
