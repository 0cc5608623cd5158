"""`gpuledger recommend` (the cheapest card or node that fits a fine-tuning job) and `gpuledger macros`."""

from __future__ import annotations

import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuledger.adapters.registry import SOURCES
from gpuledger.flows.literal import cell, labelled, literal, plain
from gpuledger.flows.ops_cli import DbOption
from gpuledger.flows.output import (
    Format, FormatOption, JsonOption, chosen, emit, err, fail, flagged, out, widest_line,
)

from gpuledger.warehouse.freshness import DEFAULT_MAX_AGE_HOURS
from gpuledger.warehouse.recommender.macros import macros_sql
from gpuledger.warehouse.recommender.memory import METHODS, OPTIMIZERS, PRECISIONS
from gpuledger.warehouse.recommender.recommend import (
    Candidate, CostBreakdown, Recommendation, RecommendRequest, UnknownProviderError, recommend,
)


def _money(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:,.2f}" if x >= 0.005 or x == 0 else f"{x:.4f}"


def _purchase(c: Candidate) -> Text:
    if not c.interruptible:  # on demand, or a commitment: its kind over its term and payment
        words = c.purchase_option.split("_")
        term = next((i for i, w in enumerate(words) if w.endswith("y") and w[:-1].isdigit()), None)
        return cell(c.purchase_option.replace("_", "-")) if term is None else \
            _lines(" ".join(words[:term]), " ".join(words[term:]))
    risk = "risk unknown" if c.interruption_risk_level == "unknown" else f"{c.interruption_risk_level} risk"
    if c.interruption_rate_max_pct is not None:
        risk += f" (<={c.interruption_rate_max_pct:g}%/mo)"
    return Text.assemble(cell(c.purchase_option.upper(), "yellow"), " ", cell(risk))


def _gpus(c: Candidate) -> str:
    node = f"{c.gpu_count:g}x {c.gpu_model}"
    return node if c.nodes == 1 else f"{c.nodes} nodes x {node}"


def _plan(c: Candidate) -> tuple[str, ...]:
    if c.plan == "sharded":
        return f"sharded x{c.gpus_used:g}", c.link_kind
    return ("data-parallel", f"x{c.gpus_used:g}") if c.plan == "data-parallel" else \
        ("1 GPU" if c.gpus_used == 1 else "slice",)


def _lines(first: str, second: str = "") -> Text:
    """A cell of two lines, the second dim."""
    return Text.assemble(cell(first), *(("\n", cell(second, "dim")) if second else ()))


def _print_estimate(rec: Recommendation) -> None:
    e, s = rec.estimate, rec.estimate.setup
    b = e.per_gpu
    method = s.method if s.method == "full" else f"{s.method} r{s.lora_rank} {s.lora_targets}"
    out.print(Text.assemble((plain(e.model_display), "bold"), plain(
            f" ({e.params / 1e9:.1f}B params) - {method}, {s.precision}, {s.optimizer}, seq {s.seq_len} x "
            f"micro-batch {s.micro_batch}, gradient checkpointing {'on' if s.gradient_checkpointing else 'off'}")))
    out.print(Text.assemble("one GPU needs ", (f"{b.total_gb:.1f} GiB", "bold"),
                            f" = weights {b.weights_gb:.1f} + gradients {b.gradients_gb:.1f}"
                            f" + optimizer {b.optimizer_gb:.1f} + adapters {b.adapters_gb:.1f}"
                            f" + activations {b.activations_gb:.1f} + overhead {b.overhead_gb:.1f}"))
    if rec.sharded_estimates:
        shards = ", ".join(f"{g} GPUs: {x.per_gpu_gb:.1f}" for g, x in sorted(rec.sharded_estimates.items()))
        out.print(literal(f"sharded (ZeRO-3/FSDP), GiB per GPU: {shards}"))
    out.print(literal(f"result to download: {e.artifact_gb:.2f} GiB; one checkpoint: {e.checkpoint_gb:.2f} GiB"))
    if e.host_gb:
        out.print(literal(f"ZeRO-Offload: {e.host_gb:.0f} GiB of host RAM for the optimizer state (all nodes)"))


_COLUMNS = ("#", "provider", "instance / place", "purchase", "GPUs", "GiB/GPU", "plan", "$/h", "obtainable\n7d/30d",
            "tokens/s\n/GPU", "h/run", "set-up", "compute", "storage", "egress", "total $", "notes")
_TEXT = ("provider", "instance / place", "purchase", "GPUs", "plan", "notes")  # left-aligned
_FOLDS = ("instance / place", "purchase", "notes")  # long text, folded on a narrow terminal; no number, no GPU
# Left out, in this order, where the table is wider than the terminal: the parts of the total first.
_LEAST_TOLD = ("set-up", "storage", "egress", "compute", "GiB/GPU", "obtainable\n7d/30d", "plan", "tokens/s\n/GPU",
               "h/run")
_FOLDED = 10  # a text column is folded down to no fewer characters than this


def _fitting(rows: list[list[Text]], width: int | None) -> tuple[list[int], list[str], int]:
    """The columns of `rows` a table of `width` characters shows with every number whole (None: all), the names
    of those left out, and the width that shows them all."""
    def needs(i: int) -> int:  # a column's characters: its widest line (folded: _FOLDED), padding and a border
        widest = widest_line([Text(_COLUMNS[i]), *(r[i] for r in rows)])
        return (min(widest, _FOLDED) if _COLUMNS[i] in _FOLDS else widest) + 3

    shown = list(range(len(_COLUMNS)))
    full_width = 1 + sum(map(needs, shown))
    for name in _LEAST_TOLD:
        if width is None or 1 + sum(map(needs, shown)) <= width:
            break
        shown.remove(_COLUMNS.index(name))
    return shown, [_COLUMNS[i].replace("\n", " ") for i in range(len(_COLUMNS)) if i not in shown], full_width


def _print(rec: Recommendation) -> None:
    _print_estimate(rec)
    if not rec.candidates:
        for note in rec.notes[:-1]:  # the last, why nothing fits, is said by the caller
            err.print(labelled("note:", "yellow", note))
        return
    req = rec.request
    order = "fastest first" if req.by == "time" else "cheapest job first"
    footnotes: dict[str, int] = {}
    rows: list[list[Text]] = []
    for c in rec.candidates:
        marks = [str(footnotes.setdefault(f, len(footnotes) + 1)) for f in c.flags]
        where = (c.zone or c.region) + (f" (+{c.other_locations})" if c.other_locations else "")
        tier = literal("" if c.precision_supported else "slow path ", style="red")
        rows.append([cell(c.rank), cell(c.provider), _lines(c.instance_type, where),
                     _purchase(c), cell(_gpus(c)),
                     cell(f"{c.usable_gb_per_gpu:.0f}/{c.memory_gb_per_gpu:.0f}"),
                     _lines(*_plan(c)), cell(_money(c.price_per_hour * c.nodes)),
                     _lines(*("?" if s is None else f"{s:.0%}" for s in (c.obtainable_7d, c.obtainable_30d))),
                     cell("?") if c.tokens_per_s is None else
                     _lines(f"{c.tokens_per_s:,.0f}", f"{c.tokens_per_s_per_gpu:,.0f}"),
                     cell(f"{c.hours_per_run:,.2f}" if c.hours_per_run is not None else "?"),
                     cell(_money(c.cost.setup_usd) if c.hours_per_run is not None else "?"),
                     cell(_money(c.cost.compute_usd)), cell(_money(c.cost.storage_usd)),
                     cell(_money(c.cost.egress_usd)), cell(_money(c.cost.total_usd), "bold"),
                     Text.assemble(tier, " ".join(f"[{m}]" for m in marks))])
    # Piped (a file, a pager, a script), the table keeps its own width: the 200 columns of `out` cut a wide
    # one's numbers ('1,210.…') and its notes column (spot and commitment rows, long instance names).
    # On a terminal, text folds and no number is cut: the columns that do not fit are left out and named.
    width = out.width if out.is_terminal else None
    shown, left_out, full_width = _fitting(rows, width)
    t = Table(title=literal(f"job: {req.job_text()}; {order}"), title_justify="left")
    for i in shown:
        col = _COLUMNS[i]
        t.add_column(col, justify="left" if col in _TEXT else "right", no_wrap=col not in _FOLDS, overflow="fold")
    for r in rows:
        t.add_row(*(r[i] for i in shown))
    (out if out.is_terminal else Console(file=sys.stdout, soft_wrap=True, width=4000)).print(t)
    if left_out:
        out.print(literal(f"left out for the terminal's {width} columns: {', '.join(left_out)} (--format csv or "
                          f"--json has every column, as does a terminal of {full_width} columns)"))
    out.print("GiB/GPU = usable (after headroom) / reported; (+n) = the same offer in n more places, none ranked "
              "higher; h/run = training + set-up (start-up, downloads, upload); compute = runs x billed time "
              "(each run up to the increment; a minimum charge paid once a job) x $/h, set-up $ included; "
              "obtainable = share of the availability observations of the GPU with the provider in the region "
              "that had capacity, over 7 / 30 days", highlight=False)
    for text, n in footnotes.items():
        out.print(literal(f"[{n}] {text}"))
    for note in rec.notes:
        err.print(labelled("note:", "yellow", note))


# The request's fields its checks name, as the flags that set them (the Python API's messages keep the fields).
FLAGS = {**{field: "--" + field.replace("_", "-") for field in (
    "params", "lora_rank", "seq_len", "micro_batch", "offload", "hours", "runs", "tokens", "dataset_tokens", "examples",
    "epochs", "by", "budget", "max_gpus", "max_nodes", "max_age_hours", "headroom", "dataset_gb", "days", "top")},
         "checkpoint_every_minutes": "--checkpoint-every"}


def recommend_command(
    method: str = typer.Option(..., "--method", help=f"Fine-tuning method: {', '.join(METHODS)} (any case)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="A built-in model (llama-3-70b, mistral-7b, "
                                        "qwen2.5-72b, ...); see docs/recommender.md."),
    params: Optional[float] = typer.Option(None, "--params", help="Parameter count (70e9); overrides the model's, "
                                           "or stands alone for a model not in the table."),
    precision: str = typer.Option("bf16", "--precision", help=f"Training precision: {', '.join(PRECISIONS)}."),
    optimizer: str = typer.Option("adamw", "--optimizer", help=f"Optimizer: {', '.join(OPTIMIZERS)}."),
    lora_rank: int = typer.Option(16, "--lora-rank", help="LoRA rank r of the adapters."),
    lora_targets: str = typer.Option("all-linear", "--lora-targets", help="all-linear, attention, qv, mlp, or a "
                                     "comma list of q,k,v,o,gate,up,down."),
    seq_len: int = typer.Option(2048, "--seq-len", help="Tokens per sequence."),
    micro_batch: int = typer.Option(1, "--micro-batch", help="Sequences per GPU per step."),
    # two flags, not one pair, where the last given wins: both given is refused
    grad_ckpt: bool = typer.Option(False, "--grad-ckpt", help="Assume gradient checkpointing (activations "
                                   "recomputed: less memory); the default."),
    no_grad_ckpt: bool = typer.Option(False, "--no-grad-ckpt", help="Assume no gradient checkpointing."),
    offload: bool = typer.Option(False, "--offload", help="Full fine-tuning with ZeRO-Offload: optimizer state "
                                 "in host RAM (checked against the offer's RAM)."),
    hours: Optional[float] = typer.Option(None, "--hours", help="Fixed wall-clock hours per run instead of a job "
                                          "size (every offer costed for the same time)."),
    runs: int = typer.Option(1, "--runs", help="Number of runs (experiments)."),
    tokens: Optional[float] = typer.Option(None, "--tokens", help="Training tokens per run (50e6). Without a job "
                                           "size: the default job, 20M tokens x 3 epochs."),
    dataset_tokens: Optional[float] = typer.Option(None, "--dataset-tokens", help="Tokens in the dataset; "
                                                   "x --epochs per run."),
    examples: Optional[int] = typer.Option(None, "--examples", help="Training examples; x --seq-len x --epochs "
                                           "per run."),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="Passes over --dataset-tokens or --examples "
                                           "(default 1)."),
    by: str = typer.Option("cost", "--by", help="Rank by cost (cheapest whole job) or time (fastest)."),
    budget: Optional[float] = typer.Option(None, "--budget", help="Only jobs costing at most this many USD "
                                           "(with --by time: the fastest under it)."),
    spot: bool = typer.Option(False, "--spot", help="Also consider spot / interruptible offers (marked)."),
    commitments: bool = typer.Option(False, "--commitments",
                                     help="Also consider 1- and 3-year commitments (reserved, savings plans, "
                                          "committed use; marked)."),
    region: Optional[str] = typer.Option(None, "--region", help="Region prefix (us-), or a LIKE pattern (%us%)."),
    provider: list[str] = typer.Option([], "--provider", "-p", help="Only these providers (repeatable)."),
    max_gpus: int = typer.Option(8, "--max-gpus", help="At most this many GPUs per plan."),
    max_nodes: int = typer.Option(1, "--max-nodes", help="Allow sharded plans over this many nodes (RDMA fabric)."),
    shard_lora: bool = typer.Option(False, "--shard-lora", help="Allow FSDP-sharded LoRA/QLoRA across a node."),
    include_unavailable: bool = typer.Option(False, "--include-unavailable", help="Keep offers the source reports "
                                             "without capacity (flagged)."),
    headroom: float = typer.Option(0.05, "--headroom", help="Fraction of GPU memory left free."),
    dataset_gb: float = typer.Option(1.0, "--dataset-gb", help="Training data kept on disk, GB."),
    checkpoint_every: float = typer.Option(30.0, "--checkpoint-every", help="Spot: minutes between checkpoints "
                                           "(an interruption redoes half of it on average)."),
    days: Optional[float] = typer.Option(None, "--days", help="Keep the working set on a volume this many days "
                                         "(runs and the idle time between them); billed for all of it."),
    top: int = typer.Option(10, "--top", help="Show this many candidates."),
    all_locations: bool = typer.Option(False, "--all-locations", help="One row per region/zone instead of "
                                       "one per instance type."),
    max_age_hours: float = typer.Option(DEFAULT_MAX_AGE_HOURS, "--max-age-hours", help="Leave out providers whose "
                                        "last successful scrape is older than this."),
    fmt: Format = FormatOption,
    as_json: bool = JsonOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Cheapest card or node that fits a fine-tuning job, by what the whole job costs.

    Estimates the memory the job needs (weights, gradients, optimizer,
    adapters, activations, overhead), keeps the current offers that fit it
    from providers with a fresh scrape, times the job on each (training plus
    each run's set-up) and ranks them by compute (billing increment and
    minimum applied) + storage + egress. Without a job size it costs the
    default job, 20M tokens x 3 epochs, and says so. Exits 1 when nothing fits.

    \b
    Examples:
      gpuledger recommend --model llama-3-8b --method qlora
      gpuledger recommend --model qwen3-8b --method lora --tokens 50e6
      gpuledger recommend --model llama-3-70b --method lora --tokens 20e6 \\
          --by time --budget 500
      gpuledger recommend --model llama-3-70b --method qlora \\
          --dataset-tokens 5e6 --epochs 2 --runs 10 --spot
      gpuledger recommend --model llama-3-70b --method full --json
      gpuledger recommend --params 13e9 --method lora --region us- --top 5
    """
    from gpuledger.flows.cli import cancellable_reader

    if grad_ckpt and no_grad_ckpt:
        raise fail("--grad-ckpt and --no-grad-ckpt exclude each other: give one (the default: --grad-ckpt)", 2)
    try:
        request = RecommendRequest(
            method=method, model=model, params=params, precision=precision, optimizer=optimizer,
            lora_rank=lora_rank, lora_targets=lora_targets, seq_len=seq_len, micro_batch=micro_batch,
            gradient_checkpointing=not no_grad_ckpt, offload=offload, hours=hours, runs=runs, tokens=tokens,
            dataset_tokens=dataset_tokens, examples=examples, epochs=epochs, by=by, budget=budget, spot=spot,
            commitments=commitments, region=region, providers=tuple(provider), max_gpus=max_gpus,
            max_nodes=max_nodes, shard_lora=shard_lora, include_unavailable=include_unavailable,
            max_age_hours=max_age_hours, headroom=headroom, dataset_gb=dataset_gb, days=days,
            checkpoint_every_minutes=checkpoint_every, top=top, per_instance=not all_locations)
    except ValueError as e:  # an unknown model included
        raise fail(flagged(str(e), FLAGS), 2) from None
    with cancellable_reader(db, "the recommendation") as con:
        try:
            rec = recommend(con, request, SOURCES)
        except UnknownProviderError as e:
            raise fail(str(e), 2) from None
    fmt = chosen(fmt, as_json)
    if fmt == "json":  # the whole answer: the estimate, the job, each candidate with its costs and flags
        sys.stdout.write(json.dumps(rec.as_dict(), default=str, indent=2) + "\n")
    elif fmt == "csv":  # one row per candidate, its costs flattened; the header also when nothing fits
        columns = [f.name for f in fields(Candidate) if f.name != "cost"] + [
            f.name for f in fields(CostBreakdown)] + ["total_usd"]
        emit(columns, [[{**c.as_dict(), **c.cost.as_dict()}[k] for k in columns] for c in rec.candidates], "csv")
    else:
        _print(rec)
    if rec.nothing_fits:
        err.print(literal(rec.notes[-1], style="red"))  # the explanation comes last
        raise typer.Exit(1)


def macros_command() -> None:
    """Print the recommender's SQL macros (fits, fresh_providers, billed_seconds, ...) as TEMP macros.

    `gpuledger sql` and `gpuledger recommend` have them already; this is for
    a plain DuckDB session, read-only included.

    \b
    Example:
      gpuledger macros > gpuledger-macros.sql
      duckdb -readonly gpuledger.duckdb     # then: .read gpuledger-macros.sql
    """
    sys.stdout.write(macros_sql())


def register(app: typer.Typer) -> None:
    app.command(name="recommend")(recommend_command)
    app.command(name="macros")(macros_command)
