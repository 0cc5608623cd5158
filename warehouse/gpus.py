"""The canonical GPU table (data/gpu_models.csv) and every source's names for its cards (data/gpu_aliases.csv,
optionally within a memory range); a name that matches nothing is unknown, never guessed."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).parent / "data"


class UnknownGPUError(ValueError):
    """A source named a GPU that the reference table does not know."""


# The two dataclasses are also the columns of the warehouse tables gpu_models and gpu_aliases (warehouse/schema.py).
@dataclass(frozen=True)
class GPUModel:
    gpu_model: str
    vendor: str
    family: str  # the bare name a source may give: "H100"
    memory_gb: float
    memory_type: str
    memory_bandwidth_tbs: float | None
    architecture: str
    bf16: bool
    fp8: bool
    fp4: bool
    int8: bool
    nvlink: str | None
    form_factor: str | None
    segment: str  # datacenter | workstation | consumer
    source: str | None
    # Dense (no sparsity) tensor peak for training: BF16, and FP16 (FP32 accumulate on GeForce).
    bf16_dense_tflops: float | None = None
    fp16_dense_tflops: float | None = None
    tensor_tflops_source: str | None = None


@dataclass(frozen=True)
class Alias:
    provider: str  # '*' for names every source uses
    alias: str  # normalized: lower case, single spaces
    memory_mib_min: int | None
    memory_mib_max: int | None
    gpu_model: str
    variant_exact: bool


@dataclass(frozen=True)
class GpuFacts:
    """The GPUs of one offer, as a source resolved them against the reference table."""

    gpu_model: str
    variant_exact: bool  # the source's name fixes the variant (memory, form factor), not a guess
    name: str  # as the source names it
    vendor: str
    count: float  # below 1 for a partition of one GPU
    memory_gb: float | None  # per GPU, or the slice's own memory for a partition; None: not stated
    memory_gb_nominal: float  # the reference table's figure for the model
    total_memory_gb: float | None


def normalize_name(name: str) -> str:
    """Lower case, single spaces."""
    return re.sub(r"\s+", " ", name.strip().lower())


def _read(name: str, cls: type) -> list:
    """The rows of data/`name` as `cls`, each cell converted to its field's type (an empty cell: None)."""
    convert = {"bool": lambda v: v.strip().lower() == "true", "float": float, "int": int}
    with open(DATA / name, newline="") as f:
        return [cls(**{fd.name: None if not r[fd.name] and "None" in fd.type
                       else convert.get(fd.type.split(" ")[0], str)(r[fd.name]) for fd in fields(cls)})
                for r in csv.DictReader(f)]


@lru_cache(maxsize=1)
def models() -> dict[str, GPUModel]:
    return {m.gpu_model: m for m in _read("gpu_models.csv", GPUModel)}


@lru_cache(maxsize=1)
def aliases() -> tuple[Alias, ...]:
    return tuple(Alias(**{**vars(a), "alias": normalize_name(a.alias)}) for a in _read("gpu_aliases.csv", Alias))


def canonicalize(provider: str, name: str, memory_mib: float | None = None) -> tuple[GPUModel, bool]:
    """Map a source's GPU name (and reported memory) to (model, variant_exact). Provider-specific
    aliases win over generic ones; an alias with a memory range applies only inside it."""
    wanted = normalize_name(name)
    for scope in (provider, "*"):
        for a in aliases():
            ranged = a.memory_mib_min is not None or a.memory_mib_max is not None
            if a.provider == scope and a.alias == wanted and (not ranged or memory_mib is not None and (
                    a.memory_mib_min or -math.inf) <= memory_mib <= (a.memory_mib_max or math.inf)):
                return models()[a.gpu_model], a.variant_exact
    mem = f" with {memory_mib:g} MiB" if memory_mib is not None else ""
    raise UnknownGPUError(f"unknown GPU name {name!r}{mem} from {provider}: add it to warehouse/data/gpu_aliases.csv")
