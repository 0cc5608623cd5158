"""Spot as an expected cost (pure): interruptions over a run, each costing the work since the
last checkpoint and a restart.

    expected hours = run hours x (1 + rate x (checkpoint interval / 2 + restart))
                     + (run hours / checkpoint interval) x checkpoint write time
    restart        = (base weights + checkpoint) / storage read speed
    rate           = interruptions per hour, or None when the provider publishes no risk: the
                     expected cost is then unknown, never taken as zero

An interruption lands on average half-way between two checkpoints (uniform arrivals), so half an
interval of work is redone. The machine's own start-up (boot, image pull) is not modelled: no
provider publishes it.
"""

from __future__ import annotations

import math

HOURS_PER_MONTH = 730.0
# AWS Spot Advisor "frequency of interruption" buckets: the share of instances of a type that AWS
# interrupted over the trailing month (https://aws.amazon.com/ec2/spot/instance-advisor/). A bucket
# stands for its midpoint; ">20%" for 25 %.
SPOT_ADVISOR_MONTHLY = {"<5%": 0.025, "5-10%": 0.075, "10-15%": 0.125, "15-20%": 0.175, ">20%": 0.25}
# gp3's baseline throughput, 125 MiB/s (https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html):
# the speed a checkpoint is written and read back at, on the cheapest bootable block volume.
STORAGE_GIB_PER_S = 125 / 1024
DEFAULT_CHECKPOINT_MINUTES = 30.0


def interruption_rate_per_hour(risk: str | None) -> float | None:
    """Interruptions per hour from today's `offers.interruption_risk` text (AWS Spot Advisor
    buckets): a monthly share p becomes the constant hazard -ln(1 - p) / 730 h. None: unknown."""
    share = SPOT_ADVISOR_MONTHLY.get((risk or "").replace(" ", ""))
    return None if share is None else -math.log(1.0 - share) / HOURS_PER_MONTH


def restart_hours(base_weights_gb: float, checkpoint_gb: float) -> float:
    return (base_weights_gb + checkpoint_gb) / STORAGE_GIB_PER_S / 3600.0


def checkpoint_write_hours(checkpoint_gb: float) -> float:
    return checkpoint_gb / STORAGE_GIB_PER_S / 3600.0


def expected_run_hours(run_hours: float, rate_per_hour: float | None, checkpoint_every_h: float,
                       restart_h: float, write_h: float) -> float | None:
    """Expected wall-clock hours of an interruptible run (module doc); None when the rate is unknown."""
    if rate_per_hour is None:
        return None
    return (run_hours * (1.0 + rate_per_hour * (checkpoint_every_h / 2.0 + restart_h))
            + run_hours / checkpoint_every_h * write_h)
