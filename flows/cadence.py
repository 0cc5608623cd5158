"""How often each provider is refreshed (cadence groups by `ProviderFacts.kind`, one prefect.yaml deployment
each); a scheduled refresh waits for the refresh lock (`lock_wait_s`), one from the command line does not."""

from __future__ import annotations

import logging
import os
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Iterator

from gpuledger.adapters.registry import UNITS, specs
from gpuledger.warehouse.store import RefreshRunningError, refresh_lock

log = logging.getLogger("gpuledger.refresh")


@dataclass(frozen=True)
class Cadence:
    cron: str  # UTC
    kinds: tuple[str, ...]  # ProviderFacts.kind values refreshed on this schedule
    why: str


CADENCES: dict[str, Cadence] = {
    "market": Cadence("0 * * * *", ("marketplace", "aggregator"),
                      "bid and marketplace prices and live listings move within the hour"),
    "capacity": Cadence("30 */4 * * *", ("gpu_cloud",),
                        "list prices change rarely, but the capacity each scrape records moves through the day"),
    "nightly": Cadence("0 3 * * *", ("hyperscaler",),
                       "list prices are published at most daily; AWS's price list is the largest download"),
}
# Providers refreshed with another group than their kind's: RunPod's interruptible pods are priced
# and stocked like a marketplace's.
ALSO: dict[str, str] = {"runpod": "market"}
# Refresh units (adapters/registry.py UNITS) and the group that runs each: Capacity Blocks are sold
# out and released through the day, while AWS's price list is scraped nightly.
UNIT_GROUPS: dict[str, str] = {"aws_capacity_blocks": "capacity"}

# How long a scheduled refresh waits for a running one (prefect.yaml's `lock_wait_s`): less than
# the hourly interval, so waiting runs never pile up; one that gives up fails with the lock's message.
SCHEDULED_LOCK_WAIT_S = 3000.0
LOCK_POLL_S = 5.0


def groups() -> dict[str, list[str]]:
    """Cadence group -> its providers and refresh units (each in exactly one)."""
    out: dict[str, list[str]] = {g: [] for g in CADENCES}
    for spec in specs():
        [kind_group] = [g for g, c in CADENCES.items() if spec.facts.kind in c.kinds]
        out[ALSO.get(spec.name, kind_group)].append(spec.name)
    for unit in sorted(UNITS):
        out[UNIT_GROUPS[unit]].append(unit)
    return out


def providers_in(group: str) -> list[str]:
    if group not in CADENCES:
        raise ValueError(f"unknown cadence group {group!r}; known: {', '.join(CADENCES)}")
    return groups()[group]


@contextmanager
def refresh_lock_within(db: str | os.PathLike[str] | None, wait_s: float,
                        poll_s: float = LOCK_POLL_S, doing: str = "refresh") -> Iterator[None]:
    """The refresh lock, waiting up to `wait_s` seconds for a running refresh (then RefreshRunningError)."""
    deadline = time.monotonic() + wait_s
    with ExitStack() as stack:
        while True:
            try:
                stack.enter_context(refresh_lock(db, doing))
                break
            except RefreshRunningError as err:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                log.info("waiting up to %.0f s for the refresh lock: %s", left, err)
                time.sleep(min(poll_s, left))
        yield
