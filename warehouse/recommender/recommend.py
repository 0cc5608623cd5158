"""Which rented GPU to fine-tune on: the offers that fit a job, ranked by what the whole job costs
(billed compute with set-up, storage, egress, each shown). Formulas and sources: docs/recommender.md."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Sequence

import duckdb

from gpuledger.warehouse.availability import obtainable
from gpuledger.warehouse.freshness import (
    DEFAULT_MAX_AGE_HOURS, MAX_AGE_HOURS, ProviderFreshness, provider_freshness,
)
from gpuledger.warehouse.offer_filter import FilterError, known_names, resolve_names
from gpuledger.warehouse.recommender.memory import MemoryEstimate, TrainingSetup, estimate
from gpuledger.warehouse.recommender.macros import install_macros, macros_current
from gpuledger.warehouse.recommender.spot import (
    DEFAULT_CHECKPOINT_MINUTES, HOURS_PER_MONTH, checkpoint_write_hours, interruption_rate_per_hour, restart_hours,
)
from gpuledger.warehouse.recommender.throughput import (
    FABRIC_GBS_ASSUMED, is_fabric_claim, stated_fabric_gbps, step_work,
)

if TYPE_CHECKING:  # numpy: imported by a recommendation only, not by the reading commands
    from gpuledger.warehouse.recommender.ranking import OfferFacts

DEFAULT_HEADROOM = 0.05
# Limits past which a request is a typo, not a fine-tuning job: a run longer than a year, more runs
# than anyone schedules, or more tokens than Llama 3 was pretrained on (15T).
MAX_HOURS = 8760.0
MAX_RUNS = 10_000
MAX_TOKENS = 15e12
MAX_DATASET_GB = 1e6  # a petabyte: past it the storage costs overflow (and no fine-tuning set is that large)
MAX_NODES = 1024  # sharded over more rented nodes than this is a typo too (each count is tried in turn)
# The job costed when none is given: a typical instruction tune, 20M tokens (about 20,000 examples
# of 1,000 tokens) for 3 epochs, the default of Hugging Face's Trainer (num_train_epochs=3).
DEFAULT_DATASET_TOKENS = 20e6
DEFAULT_EPOCHS = 3.0


class UnknownProviderError(ValueError):
    """A --provider names no provider the warehouse knows; the message lists the known ones."""


@dataclass(frozen=True)
class RecommendRequest(TrainingSetup):
    """A fine-tuning job (the training setup, its size) and the constraints on where it may run."""

    hours: float | None = None  # fixed wall-clock hours per run instead of a job size (set-up included)
    runs: int = 1  # how many such runs (experiments)
    # The job size of one run, in training tokens (at most one of the three; none and no hours:
    # the default job, DEFAULT_DATASET_TOKENS x DEFAULT_EPOCHS).
    tokens: float | None = None
    dataset_tokens: float | None = None  # times epochs
    examples: int | None = None  # times seq_len times epochs
    epochs: float | None = None  # passes over dataset_tokens or examples (default 1; the default job's 3)
    by: str = "cost"  # cost: cheapest whole job first | time: fastest first
    budget: float | None = None  # USD: only jobs costing at most this (with by="time": fastest under it)
    spot: bool = False  # also consider spot / low-priority / interruptible offers
    commitments: bool = False  # also consider 1- and 3-year commitments (reserved, savings plan, committed use)
    region: str | None = None  # region prefix ('us-'), or a LIKE pattern with % or _
    providers: tuple[str, ...] = ()  # only these providers (empty: all)
    max_gpus: int = 8  # GPUs per plan (all nodes together)
    max_nodes: int = 1  # > 1 allows multi-node sharded plans (needs an RDMA fabric)
    shard_lora: bool = False  # allow FSDP-sharded LoRA/QLoRA across the GPUs of a node
    include_unavailable: bool = False  # keep offers the source reports without capacity (flagged)
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS  # a provider's last successful scrape must be this recent
    headroom: float = DEFAULT_HEADROOM  # fraction of GPU memory left free
    dataset_gb: float = 1.0  # training data kept on disk
    days: float | None = None  # the working set stays on a volume this long (runs and the idle time between)
    checkpoint_every_minutes: float = DEFAULT_CHECKPOINT_MINUTES  # spot: work lost per interruption is half of it
    checkpoints_kept: int = 1  # resumable checkpoints kept on disk at once
    downloads: int | None = None  # results downloaded (default: one per run)
    top: int = 10
    per_instance: bool = True  # one row per provider/instance/purchase option (cheapest place)
    as_of: datetime | None = None  # judge freshness at this time (default: now)

    MOST: ClassVar[dict[str, int]] = {**TrainingSetup.MOST, "examples": int(MAX_TOKENS), "max_gpus": 65_536,
                                      "checkpoints_kept": 10_000, "downloads": MAX_RUNS}

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "by", self.by.strip().lower())  # --by TIME is time, as names are read
        self.spec()  # an unknown model is refused here, naming the nearest
        hours = 1.0 if self.hours is None else self.hours
        checks = [
            (hours > 0, f"hours must be positive, got {self.hours}"),  # inf: over the most, said next
            (hours <= MAX_HOURS, f"hours must be at most {MAX_HOURS:g} (a year) per run, got {hours:g}"),
            (self.hours is None or self._no_size,
             "give either hours per run or a job size, not both"),
            (self.runs >= 1, f"runs must be at least 1, got {self.runs}"),
            (self.runs <= MAX_RUNS, f"runs must be at most {MAX_RUNS}, got {self.runs}"),
            (sum(x is not None for x in (self.tokens, self.dataset_tokens, self.examples)) <= 1,
             "give the job size once: tokens, dataset_tokens (x epochs) or examples (x seq_len x epochs)"),
            (self.epochs is None or self.epochs > 0 and math.isfinite(self.epochs),
             f"epochs must be positive, got {self.epochs}"),
            (self.epochs is None or self.tokens is None and self.hours is None,
             "epochs multiply dataset_tokens, examples or the default job, not tokens or hours"),
            (self.job_tokens is None or self.job_tokens >= 1,
             f"the job must train at least one token, got {self.job_tokens}"),
            ((self.job_tokens or 0) <= MAX_TOKENS, f"tokens must be at most {MAX_TOKENS:g} per run (more than "
             f"Llama 3's pretraining), got {self.job_tokens or 0:g}"),  # inf included
            (self.by in ("cost", "time"), f"by must be cost or time, got {self.by!r}"),
            (self.budget is None or (self.budget > 0 and math.isfinite(self.budget)),
             f"budget must be a positive amount of USD, got {self.budget}"),
            (self.max_gpus >= 1, f"max_gpus must be at least 1, got {self.max_gpus}"),
            (self.max_nodes >= 1, f"max_nodes must be at least 1, got {self.max_nodes}"),
            (self.max_nodes <= MAX_NODES, f"max_nodes must be at most {MAX_NODES}, got {self.max_nodes}"),
            (0 < self.max_age_hours <= MAX_AGE_HOURS,
             f"max_age_hours must be positive and at most {MAX_AGE_HOURS:g}, got {self.max_age_hours}"),
            (0 <= self.headroom < 1, f"headroom must be within [0, 1), got {self.headroom}"),
            (0 <= self.dataset_gb < math.inf, f"dataset_gb must be a size in GB, got {self.dataset_gb}"),
            (not self.dataset_gb > MAX_DATASET_GB,
             f"dataset_gb must be at most {MAX_DATASET_GB:g} (a petabyte), got {self.dataset_gb:g}"),
            (self.days is None or 0 < self.days <= 3660, f"days must be within (0, 3660], got {self.days}"),
            (1 <= self.checkpoint_every_minutes <= 24 * 60,
             f"checkpoint_every_minutes must be within [1, 1440], got {self.checkpoint_every_minutes}"),
            (self.checkpoints_kept >= 0, f"checkpoints_kept must not be negative, got {self.checkpoints_kept}"),
            (self.downloads is None or self.downloads >= 0, f"downloads must not be negative, got {self.downloads}"),
            (self.top >= 1, f"top must be at least 1, got {self.top}"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)

    @property
    def _no_size(self) -> bool:
        return all(x is None for x in (self.tokens, self.dataset_tokens, self.examples))

    @property
    def default_job(self) -> bool:
        """No job size and no hours given: the default job is costed."""
        return self.hours is None and self._no_size

    @property
    def job_tokens(self) -> float | None:
        """Training tokens of one run (None: fixed hours per run instead)."""
        epochs = self.epochs or 1.0
        if self.tokens is not None:
            return float(self.tokens)
        if self.dataset_tokens is not None:
            return float(self.dataset_tokens) * epochs
        if self.examples is not None:
            return float(self.examples) * self.seq_len * epochs
        return DEFAULT_DATASET_TOKENS * (self.epochs or DEFAULT_EPOCHS) if self.hours is None else None

    def job_text(self) -> str:
        """The job every offer was costed for, in words (every output says it)."""
        runs = f"{self.runs} runs of " if self.runs > 1 else ""
        if self.job_tokens is None:
            return f"{runs}{self.hours:g} h each (fixed hours: set-up included, no job size)"
        tokens = self.job_tokens
        job = f"{runs}{tokens / 1e6:,.4g}M tokens" if tokens >= 1e5 else \
            f"{runs}{tokens:,.6g} token{'' if tokens == 1 else 's'}"  # not "1e-06M tokens"
        if self.default_job:
            job += (f" (the default job: a typical instruction tune of {DEFAULT_DATASET_TOKENS / 1e6:g}M tokens x "
                    f"{self.epochs or DEFAULT_EPOCHS:g} epochs; give the job size with --tokens, --dataset-tokens or "
                    "--examples)")
        return job


@dataclass(frozen=True)
class CostBreakdown:
    """What the job costs on one candidate, USD, by component."""

    compute_usd: float | None  # None: the run's time is unknown (no tensor figure for the card)
    setup_usd: float  # the share of compute_usd that pays each run's set-up (fixed.setup_seconds)
    storage_usd: float | None
    egress_usd: float
    billed_seconds_per_run: float | None
    granularity_s: int
    minimum_s: int
    billing_source: str  # offer | provider | assumed
    storage_gb: float  # the working set
    storage_billed_gb: float  # the volume billed for it: the class's minimum and size tiers applied
    storage_size_known: bool | None  # the class's sizing rule is published (None: no storage price)
    storage_class: str | None
    storage_usd_per_gb_month: float
    storage_source: str  # region | provider | none
    egress_gb: float
    egress_source: str  # region | provider | none

    @property
    def total_usd(self) -> float | None:
        if self.compute_usd is None or self.storage_usd is None:
            return None
        return self.compute_usd + self.storage_usd + self.egress_usd

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"total_usd": self.total_usd}


@dataclass(frozen=True)
class Candidate:
    rank: int
    provider: str
    region: str
    zone: str
    instance_type: str
    purchase_option: str
    interruptible: bool  # spot / low_priority / interruptible: the provider may reclaim it
    interruption_risk: str | None  # the source's own words (AWS "<5%", Azure "0-5")
    reliability: float | None
    interruption_risk_level: str  # the one interruption-risk scale (warehouse/interruption.py)
    interruption_rate_max_pct: float | None
    interruption_risk_source: str
    gpu_model: str
    gpu_vendor: str
    gpu_count: float  # per node
    nodes: int
    plan: str  # single (one GPU or a slice) | data-parallel (a copy per GPU) | sharded (ZeRO-3/FSDP)
    gpus_used: float  # the GPUs the job runs on
    memory_gb_per_gpu: float  # as reported (GiB)
    memory_source: str  # reported | nominal
    usable_gb_per_gpu: float  # after headroom
    need_gb_per_gpu: float
    interconnect: str | None  # as the source states it
    link_kind: str  # what joins the node's GPUs, as counted: NVLink | Infinity Fabric | ICI | NVLink bridge | PCIe
    link_gbs: float  # its GB/s per direction (throughput.node_link)
    precision_supported: bool
    slow_path: bool  # ranked after the others: no fast path for the precision (or QLoRA off CUDA)
    price_per_hour: float  # one node
    price_per_gpu_hour: float
    available: bool | None
    tokens_per_s: float | None  # the time model's estimate for the whole plan (None: card figures unknown)
    tokens_per_s_per_gpu: float | None
    setup_hours: float  # start-up, image and weights down, result up: part of hours_per_run
    interruption_rate_per_hour: float | None  # spot: from the provider's risk (None: unknown, or not spot)
    uninterrupted_hours: float | None  # the run's time without interruptions
    hours_per_run: float | None  # training (expected, for spot) plus set-up; or the request's fixed hours
    cost: CostBreakdown
    flags: tuple[str, ...] = ()
    other_locations: int = 0  # same instance and purchase option elsewhere (not shown)
    # Share of the availability observations of this GPU model, provider and region with capacity
    # (warehouse.availability); None: no observation said either way.
    obtainable_7d: float | None = None
    obtainable_30d: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"cost": self.cost.as_dict(), "flags": list(self.flags)}


@dataclass
class Recommendation:
    request: RecommendRequest
    estimate: MemoryEstimate  # the single-GPU estimate
    sharded_estimates: dict[int, MemoryEstimate]  # GPUs -> per-GPU estimate of a sharded plan
    candidates: list[Candidate]
    fresh_providers: list[ProviderFreshness]
    stale_providers: list[ProviderFreshness]  # excluded: last successful scrape too old (or never)
    considered: int  # fitting offers before collapsing and the top-N cut
    notes: list[str] = field(default_factory=list)
    offers_per_provider: dict[str, int] = field(default_factory=dict)  # current offers of each provider
    left_out: list[dict[str, Any]] = field(default_factory=list)  # cheaper offers that fit no plan, and why

    @property
    def nothing_fits(self) -> bool:
        return not self.candidates

    def as_dict(self) -> dict[str, Any]:
        return {
            "request": asdict(self.request) | {"providers": list(self.request.providers)},
            "job": {"tokens_per_run": self.request.job_tokens, "hours_per_run": self.request.hours,
                    "runs": self.request.runs, "default": self.request.default_job, "text": self.request.job_text()},
            "left_out": self.left_out, "estimate": self.estimate.as_dict(),
            "sharded_estimates": {str(k): v.as_dict() for k, v in sorted(self.sharded_estimates.items())},
            "candidates": [c.as_dict() for c in self.candidates],
            "fresh_providers": [self._freshness_dict(p) for p in self.fresh_providers],
            "stale_providers": [self._freshness_dict(p) for p in self.stale_providers],
            "considered": self.considered, "nothing_fits": self.nothing_fits, "notes": list(self.notes),
        }

    def _freshness_dict(self, p: ProviderFreshness) -> dict[str, Any]:
        return {"provider": p.provider, "last_ok": p.last_ok, "last_attempt": p.last_attempt,
                "last_state": p.last_state, "age_hours": p.age_hours,
                "offers": self.offers_per_provider.get(p.provider, 0)}


def billed_seconds(duration_s: float, granularity_s: int | None, minimum_s: int | None) -> float:
    """One run's billed seconds: raised to the minimum charge, rounded up to the increment (a missing
    one counts as 3600 s), as the SQL macro billed_seconds."""
    gran = max(int(granularity_s if granularity_s is not None else 3600), 1)
    d = max(float(duration_s), float(minimum_s or 0))
    return float(math.ceil(round(d / gran, 9)) * gran)


def compute_cost(price_per_hour: float, hours: float, runs: int, granularity_s: int | None,
                 minimum_s: int | None, nodes: int = 1) -> tuple[float, float]:
    """(USD, billed seconds per run) for `runs` runs of `hours` on `nodes` machines: each run rounded up to
    the increment, the minimum charge paid once for the job, as runs done back to back in one rental
    (Hot Aisle's 30-day bare-metal minimum is one month for ten runs, not ten months); a minimum no
    longer than a run changes nothing."""
    billed = max(runs * billed_seconds(hours * 3600.0, granularity_s, 0),
                 billed_seconds(0.0, granularity_s, minimum_s))
    return nodes * price_per_hour * billed / 3600.0, billed / runs


def tiered_egress_cost(gb: float, tiers: Sequence[tuple[float, float | None, float]]) -> float:
    """USD to send `gb` out through monthly volume tiers [(start_gb, end_gb or None, usd_per_gb)],
    counting from 0 GB (the job's egress taken as the month's only egress)."""
    return sum((max((gb if end is None else min(gb, end)) - start, 0.0) * usd
                for start, end, usd in sorted(tiers)), 0.0)


def storage_cost(gb: float, usd_per_gb_month: float, hours: float) -> float:
    return gb * usd_per_gb_month * hours / HOURS_PER_MONTH


def _freshness(con: duckdb.DuckDBPyConnection, request: RecommendRequest, offers_per_provider: dict[str, int]
               ) -> tuple[list[ProviderFreshness], list[ProviderFreshness]]:
    """(fresh, stale) providers within the request's provider filter: every provider with a scrape
    run or a current offer (an offer's provider without a run is stale)."""
    named = {*offers_per_provider, *request.providers}  # a named provider never loaded is stale (never)
    kept = [p for p in provider_freshness(con, request.max_age_hours, request.as_of, named)
            if not request.providers or p.provider in request.providers]
    return [p for p in kept if p.fresh], [p for p in kept if not p.fresh]


def _ranked(con: duckdb.DuckDBPyConnection, request: RecommendRequest, plans: list[tuple[int, int, MemoryEstimate]],
            fresh: Iterable[str], facts: OfferFacts
            ) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]], Any, int]:
    """ranking.rank over the request's plans: the top candidates, how many offers fit, the cheaper
    ones left out, the largest GPU on offer and how many interruptible offers that fit have no published
    interruption rate; `fresh` names the providers whose data is fresh."""
    from gpuledger.warehouse.recommender import ranking

    figures = [ranking.Plan(
        **vars(step_work(est, gpus)), gpus=gpus, nodes=nodes, need_gb=est.per_gpu_gb, host_gb=est.host_gb,
        storage_gb=request.dataset_gb + est.base_weights_gb + request.checkpoints_kept * est.checkpoint_gb,
        egress_gb=est.artifact_gb * (request.runs if request.downloads is None else request.downloads),
        restart_h=restart_hours(est.base_weights_gb, est.checkpoint_gb),
        write_h=checkpoint_write_hours(est.checkpoint_gb), weights_gb=est.base_weights_gb, result_gb=est.artifact_gb)
        for gpus, nodes, est in plans]
    return ranking.rank(con, facts, figures, request, frozenset(fresh), _regions_ok(con, request, facts.places))


def _regions_ok(con: duckdb.DuckDBPyConnection, request: RecommendRequest, places: list[tuple[str, str]]
                ) -> frozenset[str] | None:
    """The regions --region keeps (None: no --region): a prefix ('us-' is us-east-1, not Azure's
    eastus), or a SQL LIKE pattern when it has % or _; in any case, as names match. One that matches
    no region of a current offer is a FilterError naming the nearest, as a name that matches nothing is."""
    region = (request.region or "").strip()  # " us-" pasted with a space is us-
    if not region:
        return None
    pattern = region if "%" in region or "_" in region else region + "%"
    regions = sorted({r for _, r in places})
    kept = con.execute("select r from unnest(?) t(r) where r ilike ?", [regions, pattern]).fetchall()
    if regions and not kept:
        resolve_names("region", [region], regions)  # raises: the pattern is no region's name either
    return frozenset(r for (r,) in kept)


def _plans(con: duckdb.DuckDBPyConnection, request: RecommendRequest
           ) -> tuple[MemoryEstimate, list[tuple[int, int, MemoryEstimate]]]:
    """The single-GPU estimate, and every plan as (GPUs, nodes, per-GPU estimate): one GPU, then the sharded
    plans the offers' whole-GPU counts per node allow within max_gpus and max_nodes, fewest nodes first."""
    single = estimate(request, 1)
    plans = [(1, 1, single)]
    if request.method == "full" or request.shard_lora:
        counts = [int(c) for (c,) in con.execute(
            "select distinct gpu_count from offers where gpu_count >= 1 and gpu_count = floor(gpu_count) order by 1"
        ).fetchall()]
        for nodes in range(1, request.max_nodes + 1):
            plans += [(per_node * nodes, nodes, estimate(request, per_node * nodes, shard_lora=request.shard_lora))
                      for per_node in counts if 2 <= per_node * nodes <= request.max_gpus]
    return single, plans


def _flags(row: dict[str, Any], request: RecommendRequest) -> tuple[list[str], bool]:
    """Warnings for one offer, and whether it is on a slow path (ranked after the supported ones)."""
    flags, gpu = [], row["gpu_model"]
    slow = not row["precision_supported"] or (request.method == "qlora" and row["gpu_vendor"] != "NVIDIA")
    if row.get("term_months"):
        flags.append(f"a {row['term_months']}-month commitment ({row['payment_option']}): billed for the whole "
                     "term whether used or not; the cost shown counts only the hours of the runs")
    if not row["precision_supported"]:
        flags.append(f"{gpu} has no BF16: falls back to fp16 with loss scaling or fp32 (slow path)"
                     if request.precision == "bf16" else
                     f"{gpu} ({row['gpu_architecture']}) has no fast {request.precision} path")
    if request.method == "qlora" and row["gpu_vendor"] != "NVIDIA":
        flags.append(f"QLoRA's 4-bit kernels (bitsandbytes) target CUDA; support on {row['gpu_vendor']} is limited")
    if row["memory_source"] == "nominal":
        flags.append("memory per GPU not reported by the source; the marketed size is used")
    if not row["gpu_variant_exact"]:
        flags.append(f"the source named only the GPU family; {gpu} is the likeliest variant")
    if row["available"] is False:
        flags.append("the source reports no capacity right now (kept by --include-unavailable)")
    if row["link_note"]:
        flags.append(row["link_note"])
    if row["plan"] != "single" and row["link_kind"] != "PCIe" and not is_fabric_claim(row["interconnect"]):
        flags.append(f"the source states no {row['link_kind']}; {gpu} ({row['gpu_form_factor']}) modules sit on "
                     f"an {row['link_kind']} baseboard: counted at {row['link_gbs']:g} GB/s per direction")
    if row["run_hours"] is not None:  # what raised the bill above the runs' hours, as compute_cost bills them
        gran, hours = row["granularity_s"], f"{row['run_hours']:.2f} h"
        per_run = billed_seconds(row["run_hours"] * 3600.0, gran, 0)
        if request.runs * per_run < billed_seconds(0.0, gran, row["minimum_s"]):
            least = _duration(row["minimum_s"])
            flags.append(f"{row['provider']} bills at least {least} a rental: "
                         + (f"the {request.runs} runs are costed back to back in one rental that pays it once "
                            "(separate rentals would pay it each time)" if request.runs > 1 else
                            f"the run's {hours} are billed as {least}"))
        elif row["run_hours"] * 3600.0 < gran:
            flags.append(f"{row['provider']} bills per started {_duration(gran)}: "
                         + (f"each of the {request.runs} runs of {hours} is billed as {_duration(per_run)} "
                            "(machines are deleted between runs)" if request.runs > 1 else
                            f"the run's {hours} are billed as {_duration(per_run)}"))
    if row["nodes"] > 1 and not (stated_fabric_gbps(row["multinode_fabric"]) or row["network_gbps"]):
        flags.append(f"the source states no speed for its fabric ({row['multinode_fabric']}): "
                     f"{FABRIC_GBS_ASSUMED * 8:g} Gb/s per GPU assumed across nodes")
    if row["billing_source"] == "assumed":
        flags.append("no billing increment known; per-hour billing assumed")
    if row["gpu_count"] < 1:
        flags.append(f"a {row['gpu_count']:g} slice of a {gpu}")
    if row["interruptible"]:
        rate = interruption_rate_per_hour(row["interruption_rate_max_pct"])  # the reference for row["rate"]
        if rate is None:
            flags.append(f"interruption rate unknown: cost assumes no interruption (checkpoints every "
                         f"{request.checkpoint_every_minutes:g} min counted): a lower bound, ranked by it")
        elif row["base_hours"] is not None:
            flags.append(f"expected {rate * row['base_hours']:.2f} interruptions "
                         f"({row['interruption_risk_level']} risk, up to {row['interruption_rate_max_pct']:g}% "
                         f"a month, {row['interruption_risk_source']}): "
                         f"{row['run_hours'] - row['setup_s'] / 3600.0 - row['base_hours']:.2f} "
                         f"h of redone work, restarts and checkpoints every {request.checkpoint_every_minutes:g} "
                         "min included")
    if row["tokens_per_s"] is None:
        flags.append((f"{row['gpu_model']} is a TPU: the time model covers CUDA/ROCm GPUs, not XLA on TPU"
                      if row["gpu_vendor"] == "Google" else
                      f"no dense tensor figure for {row['gpu_model']} at {request.precision}") + ": "
                     + ("speed, time and cost unknown: ranked after every offer with a known time"
                        if request.job_tokens is not None else "speed unknown"))
    elif row["setup_s"]:
        flags.append(f"set-up {row['setup_s'] / 60:.1f} min a run: start-up, "
                     f"the image and the weights down and the result up at {row['download_gbps']:.2g} Gb/s "
                     f"({row['bandwidth_source']})")
    cls, s_src, e_src = row["storage_class"], row["storage_source"], row["egress_source"]
    if s_src == "none":
        flags.append(f"no storage price for {row['provider']}: storage assumed free")
    elif s_src == "provider":
        flags.append(f"no storage price for {row['region']}: {row['provider']}'s cheapest ({cls}) used")
    need, billed = row["storage_gb"], row["storage_billed_gb"]
    if s_src != "none" and not row["storage_size_known"]:
        flags.append(f"no published minimum volume size for {row['provider']} {cls}: storage billed for the "
                     f"{need:.1f} GiB needed")
    elif s_src != "none" and billed > math.ceil(need):  # a minimum or a size tier, not the rounding to a GiB
        flags.append(f"storage billed for a {billed:g} GiB {cls} volume ({row['provider']}'s minimum or size tier; "
                     f"the job needs {need:.1f} GiB)")
    if request.days is not None or request.runs > 1:
        keep = row["persists_when_stopped"]
        if keep is False:
            flags.append(f"{row['provider']} does not keep a stopped machine's disk: the working set stays "
                         f"on a {cls or 'persistent'} volume between runs, machines are deleted")
        elif keep is None:
            flags.append(f"{row['provider']} does not document whether a stopped machine's disk persists")
    if e_src == "none":
        flags.append(f"no egress price for {row['provider']}: egress assumed free")
    elif e_src == "provider":
        flags.append(f"no egress price for {row['region']}: {row['provider']}'s dearest region used")
    return flags, slow


def _duration(seconds: float) -> str:
    """A billing minimum in its natural unit: '30 days', '1 h', '30 min', '60 s'."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            n = seconds / size
            return f"{n:g} {unit}{'s' if unit == 'day' and n != 1 else ''}"
    return f"{seconds:g} s"


def left_out_label(shown: Sequence[Any]) -> str:
    """What the left-out offers are to the candidates `shown`: with none shown, nothing to be cheaper than."""
    return "cheaper by the hour" if shown else "nearest to fitting"


def recommend(con: duckdb.DuckDBPyConnection, request: RecommendRequest,
              known_providers: Iterable[str] = ()) -> Recommendation:
    """Rank the current offers that fit `request`, by the effective cost of the whole job;
    `known_providers`: more provider names a --provider may give (the registered sources), beside
    the warehouse's."""
    if not macros_current(con):
        install_macros(con)
    request = check_providers(con, request, known_providers)
    single, plans = _plans(con, request)
    from gpuledger.warehouse.recommender import ranking  # numpy: only a recommendation pays its import

    facts = ranking.offer_facts(con)  # read once per request (a writable connection keeps no cache)
    offers_per_provider = facts.offers_per_provider()
    fresh, stale = _freshness(con, request, offers_per_provider)
    rows, considered, left_out, largest, rate_unknown = _ranked(con, request, plans, [p.provider for p in fresh], facts)
    shares = obtainable(con, request.as_of, {(r["gpu_model"], r["provider"], r["region"]) for r in rows})

    top: list[Candidate] = []
    for rank, row in enumerate(rows, start=1):
        flags, slow = _flags(row, request)
        share = shares.get((row["gpu_model"], row["provider"], row["region"]), (None, None))
        top.append(_from_row(
            Candidate, row, rank=rank, interruptible=bool(row["interruptible"]), need_gb_per_gpu=row["need_gb"],
            slow_path=slow, hours_per_run=row["run_hours"], setup_hours=row["setup_s"] / 3600.0,
            tokens_per_s_per_gpu=None if row["tokens_per_s"] is None else row["tokens_per_s"] / row["gpus_used"],
            interruption_rate_per_hour=row["rate"] if row["interruptible"] else None,
            uninterrupted_hours=row["base_hours"], cost=_cost(row), flags=tuple(flags),
            obtainable_7d=share[0], obtainable_30d=share[1]))

    sharded = {g: e for g, _, e in plans if g > 1}  # the estimate depends on the GPU count only
    notes = [f"job costed: {request.job_text()}; "
             + ("hours per offer from the time model plus each run's set-up" if request.job_tokens is not None
                else "every offer for these hours")
             + ", billed with each offer's increment and minimum (docs/recommender.md)"]
    if request.budget is not None:
        notes.append(f"only jobs costing at most ${request.budget:,.2f} in total")
    if stale:
        notes.append("stale providers left out (last successful scrape older than "
                     f"{request.max_age_hours:g} h, or none): " + ", ".join(p.provider for p in stale))
    if not request.spot:
        notes.append("on-demand only; --spot adds spot/interruptible offers (marked)")
    if rate_unknown:
        notes.append(f"interruptible offers with no published interruption rate: {rate_unknown} of the {considered} "
                     "that fit, each costed with its checkpoints and no interruption (a lower bound) and ranked by "
                     "that cost")
    for o in left_out:
        notes.append(f"left out, {left_out_label(top)}: {o['provider']} {o['instance_type']} ({o['gpu_count']:g}x "
                     f"{o['gpu_model']}, ${o['price_per_hour']:,.2f}/h): {o['reason']}")
    if not top:
        notes.append(over_budget(con, request, plans, fresh, facts)
                     or explain_nothing_fits(con, request, single, sharded, fresh, largest))
    return Recommendation(request=request, estimate=single, sharded_estimates=sharded, candidates=top,
                          fresh_providers=fresh, stale_providers=stale, considered=considered, notes=notes,
                          offers_per_provider=offers_per_provider, left_out=left_out)


def _cost(row: dict[str, Any]) -> CostBreakdown:
    """A ranked row's costs, its billing increment and minimum as whole seconds."""
    return _from_row(CostBreakdown, row, billed_seconds_per_run=row["billed_s"],
                     granularity_s=int(row["granularity_s"]), minimum_s=int(row["minimum_s"]))


def _from_row(cls: type, row: dict[str, Any], **given: Any) -> Any:
    """Dataclass `cls` from the row's columns of its fields' names, `given` set apart."""
    names = {f.name for f in fields(cls)} - given.keys()
    return cls(**{k: row[k] for k in names if k in row}, **given)


def check_providers(con: duckdb.DuckDBPyConnection, request: RecommendRequest,
                    known_providers: Iterable[str] = ()) -> RecommendRequest:
    """`request` with each --provider as the warehouse (or `known_providers`) spells it (any case);
    UnknownProviderError naming the nearest for one neither knows."""
    known = {*known_names(con, "provider"), *known_providers}
    try:
        return replace(request, providers=resolve_names("provider", request.providers, known))
    except FilterError as err:
        raise UnknownProviderError(str(err)) from None


def _option_variants(request: RecommendRequest) -> list[tuple[str, dict[str, Any]]]:
    """(the options as typed, the request fields they set) of single changes worth trying when
    nothing fits, most specific first."""
    r = request
    shardable = r.method == "full" or r.shard_lora
    extra, flag = ({}, "") if shardable else ({"shard_lora": True}, "--shard-lora ")
    # Offload is for full fine-tuning only: another method is a change only without it.
    no_offload, unflag = ({"offload": False}, "no --offload, ") if r.offload else ({}, "")
    variants = [
        (not shardable, "--shard-lora", {"shard_lora": True}),
        (r.max_gpus < 8, f"{flag}--max-gpus 8", {"max_gpus": 8, **extra}),
        (r.max_nodes == 1, f"{flag}--max-nodes 2 --max-gpus 16",
         {"max_nodes": 2, "max_gpus": max(16, r.max_gpus), **extra}),
        (r.method == "full" and r.optimizer == "adamw", "--optimizer adamw8bit", {"optimizer": "adamw8bit"}),
        (r.method == "full" and not r.offload, "--offload", {"offload": True}),
        *[(True, f"{unflag}--method {method}{shard}", {"method": method, **changes, **no_offload})
          for method in {"full": ("lora", "qlora"), "lora": ("qlora",)}.get(r.method, ())
          for shard, changes in (("", {}), (" --shard-lora", {"shard_lora": True}))],
        (not r.spot, "--spot", {"spot": True}),
        (not r.include_unavailable, "--include-unavailable", {"include_unavailable": True}),
        (bool(r.region), "no --region", {"region": None}),
        (bool(r.providers), "no --provider", {"providers": ()}),
        (not r.gradient_checkpointing, "--grad-ckpt", {"gradient_checkpointing": True}),
        (r.micro_batch > 1, "--micro-batch 1", {"micro_batch": 1}),
        (r.seq_len > 512, f"--seq-len {r.seq_len // 2}", {"seq_len": r.seq_len // 2}),
    ]
    return [(flags, changes) for wanted, flags, changes in variants if wanted]


def options_that_fit(con: duckdb.DuckDBPyConnection, request: RecommendRequest) -> list[str]:
    """The single changes of options (from _option_variants) under which some offer fits, each
    checked against the warehouse; a change implied by one already listed is left out."""
    from gpuledger.warehouse.recommender import ranking

    facts, found = ranking.offer_facts(con), []
    for flags, changes in _option_variants(request):
        if any(flags.startswith(f + " ") for f in found):
            continue  # "--method qlora" fits: "--method qlora --shard-lora" adds nothing
        if "--max-nodes" in flags and any("--max-gpus" in f for f in found):
            continue  # more GPUs on one node fit already: a second node is not the fix
        try:
            variant = replace(request, **changes, top=1, budget=None)
        except ValueError:  # e.g. --method lora with --lora-targets gate on a model without a gate
            continue  # a request the command would refuse is no option to suggest
        fresh, _ = _freshness(con, variant, facts.offers_per_provider())
        if _ranked(con, variant, _plans(con, variant)[1], [p.provider for p in fresh], facts)[0]:
            found.append(flags)
    return found


def over_budget(con: duckdb.DuckDBPyConnection, request: RecommendRequest, plans: list[tuple[int, int, MemoryEstimate]],
                fresh: list[ProviderFreshness], facts: OfferFacts) -> str | None:
    """When offers fit the job but none within --budget: the sentence naming the cheapest whole job (the
    memory and the options to change are not what stands in the way then)."""
    if request.budget is None:
        return None
    cheapest = replace(request, budget=None, by="cost", top=1)
    rows = _ranked(con, cheapest, plans, [p.provider for p in fresh], facts)[0]
    if not rows:
        return None
    r = rows[0]
    if (total := _cost(r).total_usd) is None:  # ranked first: no job that fits has a known cost
        return (f"nothing fits within --budget ${request.budget:,.2f}: the jobs that fit have no known cost "
                f"(no speed figure for their GPU at {request.precision}: {r['provider']} {r['instance_type']}, "
                f"{r['gpu_model']}); --hours costs a fixed time per run")
    return (f"nothing fits within --budget ${request.budget:,.2f}: the cheapest job that fits costs "
            f"${total:,.2f} ({r['provider']} {r['instance_type']}, {r['region']})")


def explain_nothing_fits(con: duckdb.DuckDBPyConnection, request: RecommendRequest, single: MemoryEstimate,
                         sharded: dict[int, MemoryEstimate], fresh: list[ProviderFreshness],
                         best: tuple[float, str] | None) -> str:
    """One sentence on why no offer fits, with the largest memory that was on offer and the options
    that would make something fit (each checked against the offers)."""
    if not fresh:
        return "nothing fits: no provider has a successful scrape within " \
               f"{request.max_age_hours:g} h (run `gpuledger refresh`, or raise --max-age-hours)"
    largest = (f"the largest GPU on offer is {best[1]} with {best[0]:.1f} GiB" if best
               else "no GPU is on offer within the filters")
    parts = [f"nothing fits: the job needs {single.per_gpu_gb:.1f} GiB on one GPU "
             f"(usable memory = reported x {1 - request.headroom:g}); {largest}"]
    if sharded:
        g, e = max(sharded.items())
        parts.append(f"sharded over {g} GPUs it needs {e.per_gpu_gb:.1f} GiB per GPU")
    options = options_that_fit(con, request)
    if not options:
        return "; ".join(parts) + ". No single change of options makes it fit on the current offers."
    return "; ".join(parts) + ". It would fit with " + ", or ".join(f"`{o}`" for o in options) + "."
