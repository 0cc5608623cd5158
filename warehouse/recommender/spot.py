"""Spot as an expected cost (pure): interruptions over a run, each redoing half a checkpoint interval
of work (uniform arrivals) and a restart; checkpoints written on the way. An unknown rate leaves the
expected cost unknown, never zero (the ranking costs such an offer without interruptions and says that this is
a lower bound). The machine's own start-up after an interruption is not modelled."""

from __future__ import annotations

import math

HOURS_PER_MONTH = 730.0  # prices per month prorate over 8760 h / 12, as AWS and Azure do
# The published monthly interruption bands (offers.interruption_rate_max_pct) by their upper end: AWS Spot
# Advisor's "frequency of interruption" (https://aws.amazon.com/ec2/spot/instance-advisor/) and Azure's
# eviction rates, both 0-5 ... 20+ %; a band stands for its midpoint, the open top band (100) for 25 %.
BAND_MONTHLY_SHARE = {5.0: 0.025, 10.0: 0.075, 15.0: 0.125, 20.0: 0.175, 100.0: 0.25}
# gp3's baseline throughput, 125 MiB/s (https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html):
# the speed a checkpoint is written and read back at, on the cheapest bootable block volume.
STORAGE_GIB_PER_S = 125 / 1024
DEFAULT_CHECKPOINT_MINUTES = 30.0


def interruption_rate_per_hour(band_max_pct: float | None) -> float | None:
    """Interruptions per hour from an offer's published monthly rate band (its upper end): the band's
    share p as the constant hazard -ln(1 - p) / 730 h; None without a published rate."""
    share = BAND_MONTHLY_SHARE.get(band_max_pct)
    return None if share is None else -math.log(1.0 - share) / HOURS_PER_MONTH


def restart_hours(base_weights_gb: float, checkpoint_gb: float) -> float:
    return (base_weights_gb + checkpoint_gb) / STORAGE_GIB_PER_S / 3600.0


def checkpoint_write_hours(checkpoint_gb: float) -> float:
    return checkpoint_gb / STORAGE_GIB_PER_S / 3600.0


def expected_run_hours(run_hours: float, rate_per_hour: float | None, checkpoint_every_h: float,
                       restart_h: float, write_h: float) -> float | None:
    """Expected wall-clock hours of an interruptible run: run x (1 + rate x (interval / 2 + restart))
    + (run / interval) x checkpoint write; None when the rate is unknown."""
    if rate_per_hour is None:
        return None
    return (run_hours * (1.0 + rate_per_hour * (checkpoint_every_h / 2.0 + restart_h))
            + run_hours / checkpoint_every_h * write_h)
