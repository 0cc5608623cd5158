"""A server's Retry-After header read as seconds: shared by the providers' requests (adapters/retry.py) and the
catalog pull (warehouse/catalog.py), which may not import the adapters."""

from __future__ import annotations

import email.utils
import math
from datetime import datetime, timezone


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
