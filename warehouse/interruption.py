"""One interruption-risk scale across providers (`interruption_risk_level`, `interruption_rate_max_pct`,
`interruption_risk_source`; docs/data-dictionary.md): never NULL, so a missing signal never reads as safe."""

from __future__ import annotations

from typing import Any

LEVELS = ("none", "low", "medium", "high", "unknown")

AWS_SPOT_ADVISOR = "aws_spot_advisor"
AZURE_EVICTION_RATE = "azure_spot_eviction_rate"
VASTAI_RELIABILITY = "vastai_host_reliability"
RUNPOD_STOCK = "runpod_stock_status"
NOT_INTERRUPTIBLE = "not_interruptible"
UNPUBLISHED = "unpublished"
SOURCES = (AWS_SPOT_ADVISOR, AZURE_EVICTION_RATE, VASTAI_RELIABILITY, RUNPOD_STOCK, NOT_INTERRUPTIBLE, UNPUBLISHED)

# A published band's label -> (upper end in percent, level). AWS Spot Advisor's labels (its feed's
# `ranges`), Azure Resource Graph's `properties.evictionRate` values.
RATE_BANDS: dict[str, dict[str, tuple[float, str]]] = {
    AWS_SPOT_ADVISOR: {"<5%": (5, "low"), "5-10%": (10, "medium"), "10-15%": (15, "medium"),
                       "15-20%": (20, "high"), ">20%": (100, "high")},
    AZURE_EVICTION_RATE: {"0-5": (5, "low"), "5-10": (10, "medium"), "10-15": (15, "medium"),
                          "15-20": (20, "high"), "20+": (100, "high")},
}

# Vast.ai's host reliability (0..1) -> level: 1 - reliability read as the share of time the host
# is unavailable; at most 5 % is low, at most 15 % medium.
RELIABILITY_LOW = 0.95
RELIABILITY_MEDIUM = 0.85

# RunPod's stockStatus (lower case) of an interruptible pod -> level: scarce stock means a higher
# bid or an on-demand renter takes the GPU back sooner.
STOCK_LEVELS = {"high": "medium", "medium": "medium", "low": "high", "none": "high"}


def risk(level: str, source: str, rate_max_pct: float | None = None) -> dict[str, Any]:
    """The three offer fields, for an adapter's `batch.offer(..., **risk(...))`."""
    return {"interruption_risk_level": level, "interruption_rate_max_pct": rate_max_pct,
            "interruption_risk_source": source}


def unknown() -> dict[str, Any]:
    return risk("unknown", UNPUBLISHED)


def from_rate_band(label: str | None, source: str) -> dict[str, Any]:
    """A published monthly rate band (`<5%` from AWS, `0-5` from Azure); an absent or unlisted
    label is `unknown`."""
    band = RATE_BANDS[source].get((label or "").strip())
    return risk(band[1], source, band[0]) if band else unknown()


def from_host_reliability(reliability: float | None, outbid: bool) -> dict[str, Any]:
    """Vast.ai's host reliability; `outbid`: the offer is an interruptible bid."""
    if reliability is None:
        return unknown()
    low = reliability >= RELIABILITY_LOW and not outbid  # an outbid offer is never low
    return risk("low" if low else "medium" if reliability >= RELIABILITY_MEDIUM else "high", VASTAI_RELIABILITY)


def from_stock_level(level: str | None) -> dict[str, Any]:
    """RunPod's stock level of an interruptible pod (`high`/`medium`/`low`, `none` when out)."""
    mapped = STOCK_LEVELS.get((level or "").strip().lower())
    return risk(mapped, RUNPOD_STOCK) if mapped else unknown()


def default_for(purchase_option: str) -> dict[str, Any]:
    """What an offer whose source gives no signal carries: on-demand is not interruptible, any
    other purchase option is `unknown`."""
    return risk("none", NOT_INTERRUPTIBLE) if purchase_option == "on_demand" else unknown()
