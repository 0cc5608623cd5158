"""The canonical GPU table: the single place GPU knowledge is kept.

`data/gpu_models.csv` lists each card once (memory, memory type, tensor-core
precisions, NVLink); `data/gpu_aliases.csv` maps every name a source uses to
one of those rows, optionally only within a reported-memory range (AWS calls
both the 40 GB and the 80 GB A100 "A100"). Both files are loaded into the
warehouse as tables, so SQL users see exactly what the parsers used. A name
that matches nothing is unknown: the caller quarantines the record, it is
never guessed.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).parent / "data"


class UnknownGPUError(ValueError):
    """A source named a GPU that the reference table does not know."""


@dataclass(frozen=True)
class GPUModel:
    gpu_model: str
    vendor: str
    family: str
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
    segment: str
    source: str | None
    bf16_dense_tflops: float | None = None  # dense tensor peak, no sparsity
    fp16_dense_tflops: float | None = None
    tensor_tflops_source: str | None = None


@dataclass(frozen=True)
class Alias:
    provider: str
    alias: str
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
    """Lower case, single spaces, no vendor-neutral noise around the name."""
    return re.sub(r"\s+", " ", name.strip().lower())


def _bool(v: str) -> bool:
    return v.strip().lower() == "true"


def _opt_float(v: str) -> float | None:
    return float(v) if v.strip() else None


def _opt_int(v: str) -> int | None:
    return int(v) if v.strip() else None


@lru_cache(maxsize=1)
def models() -> dict[str, GPUModel]:
    out = {}
    with open(DATA / "gpu_models.csv", newline="") as f:
        for r in csv.DictReader(f):
            out[r["gpu_model"]] = GPUModel(
                gpu_model=r["gpu_model"], vendor=r["vendor"], family=r["family"],
                memory_gb=float(r["memory_gb"]), memory_type=r["memory_type"],
                memory_bandwidth_tbs=float(r["memory_bandwidth_tbs"]) if r["memory_bandwidth_tbs"] else None,
                architecture=r["architecture"], bf16=_bool(r["bf16"]), fp8=_bool(r["fp8"]),
                fp4=_bool(r["fp4"]), int8=_bool(r["int8"]), nvlink=r["nvlink"] or None,
                form_factor=r["form_factor"] or None, segment=r["segment"], source=r["source"] or None,
                bf16_dense_tflops=_opt_float(r["bf16_dense_tflops"]),
                fp16_dense_tflops=_opt_float(r["fp16_dense_tflops"]),
                tensor_tflops_source=r["tensor_tflops_source"] or None,
            )
    return out


@lru_cache(maxsize=1)
def aliases() -> tuple[Alias, ...]:
    with open(DATA / "gpu_aliases.csv", newline="") as f:
        return tuple(
            Alias(
                provider=r["provider"], alias=normalize_name(r["alias"]),
                memory_mib_min=_opt_int(r["memory_mib_min"]), memory_mib_max=_opt_int(r["memory_mib_max"]),
                gpu_model=r["gpu_model"], variant_exact=_bool(r["variant_exact"]),
            )
            for r in csv.DictReader(f)
        )


def canonicalize(provider: str, name: str, memory_mib: float | None = None) -> tuple[GPUModel, bool]:
    """Map a source's GPU name (and reported memory) to (model, variant_exact).

    Provider-specific aliases win over generic ones. An alias with a memory
    range applies only when the reported memory falls inside it.
    """
    wanted = normalize_name(name)
    for scope in (provider, "*"):
        for a in aliases():
            if a.provider != scope or a.alias != wanted:
                continue
            if a.memory_mib_min is not None or a.memory_mib_max is not None:
                if memory_mib is None:
                    continue
                if a.memory_mib_min is not None and memory_mib < a.memory_mib_min:
                    continue
                if a.memory_mib_max is not None and memory_mib > a.memory_mib_max:
                    continue
            return models()[a.gpu_model], a.variant_exact
    mem = f" with {memory_mib:g} MiB" if memory_mib is not None else ""
    raise UnknownGPUError(f"unknown GPU name {name!r}{mem} from {provider}: add it to warehouse/data/gpu_aliases.csv")
