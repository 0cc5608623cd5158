"""The offer filters shared by the Python API (`gpuledger.query`) and `gpuledger show-gpus`.

One definition turns the filters into a SQL condition over `offers`, so the library and the
command line always select the same rows.

- `gpu`: a canonical model (`H100-SXM`) or a family (`H100`: every H100 variant), any case.
- `min_vram_gb`: GPU memory per GPU, the card's marketed size (`gpu_memory_gb_nominal`, so an
  A10G's reported 22.35 GiB counts as its 24 GB); for a slice of a GPU (`gpu_count` below 1)
  the slice's own memory.
- `spot`: True keeps only offers the provider may reclaim (spot, low_priority, interruptible),
  False only on-demand offers, None both.
- `providers`, `regions`: only these (a region ending in `*` is a prefix: `us-*`).
- `min_gpu_count`, `max_gpu_count`: GPUs per instance.
- `max_price`: USD per GPU-hour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

# Memory per GPU as the filters read it (see the module docstring).
VRAM_SQL = ("case when o.gpu_count < 1 then coalesce(o.gpu_memory_gb, o.gpu_memory_gb_nominal * o.gpu_count) "
            "else coalesce(o.gpu_memory_gb_nominal, o.gpu_memory_gb) end")
RECLAIMABLE = ("spot", "low_priority", "interruptible")


class FilterError(ValueError):
    """A filter value that cannot select anything; the message names it."""


@dataclass(frozen=True)
class OfferFilter:
    gpu: str | None = None
    min_vram_gb: float | None = None
    spot: bool | None = None
    providers: Sequence[str] = field(default=())
    regions: Sequence[str] = field(default=())
    min_gpu_count: float | None = None
    max_gpu_count: float | None = None
    max_price: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.providers, str) or isinstance(self.regions, str):
            raise FilterError("providers and regions are lists of names, not one string")
        for name in ("min_vram_gb", "min_gpu_count", "max_gpu_count", "max_price"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise FilterError(f"{name} must be a number >= 0, got {value!r}")

    def where(self) -> tuple[str, dict[str, Any]]:
        """The SQL condition over `offers o` (joined to nothing) and its named parameters."""
        parts: list[str] = []
        params: dict[str, Any] = {}
        if self.gpu:
            parts.append("(lower(o.gpu_model) = lower($gpu) or o.gpu_model in "
                         "(select gpu_model from gpu_models where lower(family) = lower($gpu)))")
            params["gpu"] = self.gpu
        if self.min_vram_gb is not None:
            parts.append(f"({VRAM_SQL}) >= $min_vram")
            params["min_vram"] = self.min_vram_gb
        if self.spot is True:
            parts.append("o.purchase_option in (" + ", ".join(f"'{p}'" for p in RECLAIMABLE) + ")")
        elif self.spot is False:
            parts.append("o.purchase_option = 'on_demand'")
        if self.providers:
            parts.append("o.provider in (select unnest($providers::varchar[]))")
            params["providers"] = list(self.providers)
        if self.regions:
            exact = [r for r in self.regions if not r.endswith("*")]
            prefixes = [r[:-1] for r in self.regions if r.endswith("*")]
            parts.append("(o.region in (select unnest($regions::varchar[])) or "
                         "list_bool_or([starts_with(o.region, p) for p in $prefixes::varchar[]]))")
            params["regions"], params["prefixes"] = exact, prefixes
        if self.min_gpu_count is not None:
            parts.append("o.gpu_count >= $min_gpus")
            params["min_gpus"] = self.min_gpu_count
        if self.max_gpu_count is not None:
            parts.append("o.gpu_count <= $max_gpus")
            params["max_gpus"] = self.max_gpu_count
        if self.max_price is not None:
            parts.append("o.price_per_gpu_hour <= $max_price")
            params["max_price"] = self.max_price
        return (" and ".join(parts) or "true"), params
