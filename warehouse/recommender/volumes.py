"""What a provider bills for a volume holding a given number of GiB (minimum size, increments or fixed
tiers: warehouse/data/storage_volume_sizes.csv); the reference of the SQL macro billed_volume_gb."""

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
            out[(r["provider"], r["storage_class"])] = VolumeSizing(
                r["provider"], r["storage_class"], float(r["min_gb"]), float(r["increment_gb"]),
                tuple(sorted(float(t) for t in r["tiers_gb"].split())), float(r["max_gb"]) if r["max_gb"] else None,
                r["source"], r["checked"])
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
        largest = max(tiers_gb)
        return min((t for t in tiers_gb if t >= size), default=math.ceil(size / largest) * largest)
    if increment_gb:
        return math.ceil(size / increment_gb) * increment_gb
    return size


def billed_gb_for(provider: str, storage_class: str, need_gb: float) -> float:
    """billed_volume_gb with the published rule of (provider, storage_class), if any."""
    s = volume_sizings().get((provider, storage_class))
    return need_gb if s is None else billed_volume_gb(need_gb, s.min_gb, s.increment_gb, s.tiers_gb)


def holds(provider: str, storage_class: str, need_gb: float) -> bool:
    """Whether one volume of (provider, storage_class) holds need_gb (an Azure P10 holds 128 GiB)."""
    s = volume_sizings().get((provider, storage_class))
    return s is None or s.max_gb is None or need_gb <= s.max_gb
