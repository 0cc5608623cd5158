"""What a provider bills for a volume that must hold a given number of GiB.

Block storage is billed for the size provisioned, not the bytes written, and a provider sets a
minimum size (GCP's balanced persistent disk: 10 GB) or bills fixed size tiers (an Azure
managed disk is billed as the smallest offered size that holds it: 20 GiB on Premium SSD is a
P4, 32 GiB). Each Azure tier has its own monthly price, so each is a storage class of its own
(`premium-ssd-lrs-p10`: exactly 128 GiB, holding at most 128): a volume is costed on every tier
that holds it and the cheapest wins, which is the smallest holding tier. The facts are
`warehouse/data/storage_volume_sizes.csv`, one row per (provider,
storage class), each citing the provider's page and the date it was read. A class without a
row has no published minimum known here: it is billed for the size needed, and the
recommender says the minimum is unknown.

`billed_volume_gb` is the reference the SQL macro of the same name (sql/recommend.sql) mirrors.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "storage_volume_sizes.csv"


@dataclass(frozen=True)
class VolumeSizing:
    """How one provider's storage class rounds a volume's size for billing."""

    provider: str
    storage_class: str
    min_gb: float  # the smallest volume it creates (0: billed as used)
    increment_gb: float  # sizes are whole multiples of this (0: any size)
    tiers_gb: tuple[float, ...]  # fixed sizes billed, smallest first; () when sizes are free
    max_gb: float | None  # the largest volume one disk of the class holds (None: several disks past the largest)
    source: str
    checked: str  # the date the source was read


@lru_cache(maxsize=1)
def volume_sizings() -> dict[tuple[str, str], VolumeSizing]:
    """Every published sizing rule, by (provider, storage_class)."""
    out = {}
    with open(DATA, newline="") as f:
        for r in csv.DictReader(f):
            tiers = tuple(sorted(float(t) for t in r["tiers_gb"].split()))
            sizing = VolumeSizing(provider=r["provider"], storage_class=r["storage_class"],
                                  min_gb=float(r["min_gb"]), increment_gb=float(r["increment_gb"]),
                                  tiers_gb=tiers, max_gb=float(r["max_gb"]) if r["max_gb"] else None,
                                  source=r["source"], checked=r["checked"])
            out[(sizing.provider, sizing.storage_class)] = sizing
    return out


def billed_volume_gb(need_gb: float, min_gb: float | None, increment_gb: float | None,
                     tiers_gb: tuple[float, ...] | None) -> float:
    """GiB billed for a volume holding need_gb: at least the minimum, then the smallest tier that
    holds it (past the largest tier, whole disks of the largest size), else rounded up to the
    increment. No known rule (min_gb None): the size needed."""
    if min_gb is None:
        return need_gb
    size = max(need_gb, min_gb)
    if tiers_gb:
        fitting = [t for t in tiers_gb if t >= size]
        largest = max(tiers_gb)
        return min(fitting) if fitting else math.ceil(size / largest) * largest
    if increment_gb:
        return math.ceil(size / increment_gb) * increment_gb
    return size


def billed_gb_for(provider: str, storage_class: str, need_gb: float) -> float:
    """billed_volume_gb with the published rule of (provider, storage_class), if any."""
    s = volume_sizings().get((provider, storage_class))
    if s is None:
        return need_gb
    return billed_volume_gb(need_gb, s.min_gb, s.increment_gb, s.tiers_gb)


def holds(provider: str, storage_class: str, need_gb: float) -> bool:
    """Whether one volume of (provider, storage_class) holds need_gb (an Azure P10 holds 128 GiB)."""
    s = volume_sizings().get((provider, storage_class))
    return s is None or s.max_gb is None or need_gb <= s.max_gb
