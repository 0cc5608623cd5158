"""GPU memory needed to fine-tune an LLM, a pure estimator: GiB per GPU of weights, gradients, optimizer
state, adapters, activations and overhead, for full, LoRA or QLoRA, on one GPU or sharded (ZeRO-3/FSDP).
Formulas and sources: docs/recommender.md, section 1."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from gpuledger.warehouse.recommender import models_catalog
from gpuledger.warehouse.recommender.models_catalog import ModelSpec
from gpuledger.warehouse.recommender.names import resolve_name

GIB = float(2**30)

METHODS = ("full", "lora", "qlora")
PRECISIONS = ("bf16", "fp16", "fp32")
OPTIMIZERS = ("adamw", "adamw8bit", "sgd")

# Bytes per parameter of the optimizer's own state (moments), before any fp32 master copy.
OPTIMIZER_STATE_BYTES = {"adamw": 8.0, "adamw8bit": 2.0, "sgd": 4.0}
MASTER_COPY_BYTES = 4.0  # fp32 master weights in mixed precision (ZeRO paper sec. 3.1)
NF4_DQ_BITS = 4.0 + 0.127  # QLoRA: NF4 + double-quantized constants, bits per parameter
CUDA_CONTEXT_GB = 1.0  # CUDA context + kernels (HF "Model training anatomy": 1-2 GB)
LOSS_FP32_COPIES = 2  # logits upcast to fp32 for the loss + their fp32 gradient
# A parameter count past which the input is a typo, not a model (2,500 x Llama 3.1 405B); above it
# the derived architecture and the sizes overflow floats.
MAX_PARAMS = 1e15

_ATTENTION, _MLP = ("q", "k", "v", "o"), ("gate", "up", "down")
LORA_TARGET_SETS = {"all-linear": _ATTENTION + _MLP, "all": _ATTENTION + _MLP, "attention": _ATTENTION,
                    "attn": _ATTENTION, "qv": ("q", "v"), "mlp": _MLP}
_TARGET_NAMES = {name: t for t in _ATTENTION + _MLP for name in (t, f"{t}_proj")}


def parse_lora_targets(targets: str) -> tuple[str, ...]:
    """'all-linear' | 'attention' | 'qv' | 'mlp' | a comma list of q,k,v,o,gate,up,down (or *_proj)."""
    key = targets.strip().lower()
    if key in LORA_TARGET_SETS:
        return LORA_TARGET_SETS[key]
    parts = [p.strip() for p in key.split(",") if p.strip()]
    if unknown := [p for p in parts if p not in _TARGET_NAMES]:
        raise ValueError(f"unknown LoRA target {unknown[0]!r}: use all-linear, attention, qv, mlp "
                         "or a comma list of q,k,v,o,gate,up,down")
    if not parts:
        raise ValueError("no LoRA targets given")
    return tuple(dict.fromkeys(_TARGET_NAMES[p] for p in parts))


@dataclass(frozen=True)
class TrainingSetup:
    """What is being fine-tuned and how. Give `model` (built-in name), `params`, or both
    (`params` then overrides the count while the architecture comes from the model)."""

    method: str
    model: str | None = None
    params: float | None = None
    precision: str = "bf16"
    optimizer: str = "adamw"
    lora_rank: int = 16
    lora_targets: str = "all-linear"
    seq_len: int = 2048
    micro_batch: int = 1
    gradient_checkpointing: bool = True
    offload: bool = False  # full fine-tuning: ZeRO-Offload keeps the optimizer state and fp32 master in host RAM

    # Counts past any real job (a rank past every model's width, a context of 10M tokens): refused before a
    # larger one overflows the float arithmetic of the estimates.
    MOST: ClassVar[dict[str, int]] = {"lora_rank": 65_536, "seq_len": 10_000_000, "micro_batch": 65_536}

    def __post_init__(self) -> None:
        for name, most in self.MOST.items():
            if (value := getattr(self, name)) is not None and value > most:
                shown = str(value) if len(str(value)) <= 20 else f"a number of {len(str(value))} digits"
                raise ValueError(f"{name} must be at most {most:,}, got {shown}")
        for kind, known in (("method", METHODS), ("precision", PRECISIONS), ("optimizer", OPTIMIZERS)):
            object.__setattr__(self, kind, resolve_name(kind, getattr(self, kind), known))  # QLoRA is qlora
        checks = [
            (self.model is not None or self.params is not None, "give a model name or a parameter count"),
            (self.params is None or self.params > 0, f"params must be positive, got {self.params}"),
            (self.params is None or not self.params > MAX_PARAMS,
             f"params must be at most {MAX_PARAMS:g}, got {self.params:g}" if self.params else ""),
            (self.lora_rank >= 1, f"lora_rank must be at least 1, got {self.lora_rank}"),
            (self.seq_len >= 1, f"seq_len must be at least 1, got {self.seq_len}"),
            (self.micro_batch >= 1, f"micro_batch must be at least 1, got {self.micro_batch}"),
            (not self.offload or self.method == "full", "offload applies to full fine-tuning only"),
        ]
        for ok, msg in checks:
            if not ok:
                raise ValueError(msg)
        targets = parse_lora_targets(self.lora_targets)
        if self.method != "full" and not set(targets) & set(layers := self.spec().linear_shapes()):
            raise ValueError(f"{self.spec().display} has no {', '.join(targets)} layer for LoRA to adapt "
                             f"(its linear layers: {', '.join(layers)})")

    def spec(self) -> ModelSpec:
        if self.model is not None:
            return models_catalog.lookup(self.model)
        return models_catalog.generic_spec(self.params or 0.0)


@dataclass(frozen=True)
class MemoryBreakdown:
    """GiB per GPU."""

    weights_gb: float
    gradients_gb: float
    optimizer_gb: float
    adapters_gb: float
    activations_gb: float
    overhead_gb: float

    @property
    def total_gb(self) -> float:
        return self.states_gb + self.activations_gb + self.overhead_gb

    @property
    def states_gb(self) -> float:
        """Model states: weights + gradients + optimizer + adapters (no activations, no overhead)."""
        return self.weights_gb + self.gradients_gb + self.optimizer_gb + self.adapters_gb

    def as_dict(self) -> dict[str, float]:
        return asdict(self) | {"total_gb": self.total_gb}


@dataclass(frozen=True)
class MemoryEstimate:
    setup: TrainingSetup
    model_name: str
    model_display: str
    generic_architecture: bool
    params: float
    trainable_params: float
    adapter_params: float
    gpus: int
    sharded: bool
    per_gpu: MemoryBreakdown
    artifact_gb: float  # the result you download: full weights, or the adapter
    checkpoint_gb: float  # one resumable checkpoint (trainable weights + optimizer state)
    base_weights_gb: float  # the base model's files (16-bit safetensors) on disk
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    host_gb: float = 0.0  # host RAM the job needs, all nodes together (ZeRO-Offload's optimizer state)

    @property
    def per_gpu_gb(self) -> float:
        return self.per_gpu.total_gb

    @property
    def total_gb(self) -> float:
        """All GPUs together."""
        return self.per_gpu.total_gb * self.gpus

    @property
    def state_bytes_per_param(self) -> float:
        """Weights + gradients + optimizer + adapters over all GPUs, per model parameter."""
        return self.per_gpu.states_gb * self.gpus * GIB / self.params

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_name, "model_display": self.model_display,
            "generic_architecture": self.generic_architecture, "params": self.params,
            "trainable_params": self.trainable_params, "adapter_params": self.adapter_params,
            "method": self.setup.method, "precision": self.setup.precision, "optimizer": self.setup.optimizer,
            "lora_rank": self.setup.lora_rank if self.setup.method != "full" else None,
            "lora_targets": self.setup.lora_targets if self.setup.method != "full" else None,
            "seq_len": self.setup.seq_len, "micro_batch": self.setup.micro_batch,
            "gradient_checkpointing": self.setup.gradient_checkpointing,
            "gpus": self.gpus, "sharded": self.sharded, "per_gpu": self.per_gpu.as_dict(),
            "total_gb": self.total_gb, "artifact_gb": self.artifact_gb, "checkpoint_gb": self.checkpoint_gb,
            "base_weights_gb": self.base_weights_gb, "host_gb": self.host_gb, "assumptions": list(self.assumptions),
        }


def precision_bytes(precision: str) -> float:
    return 4.0 if precision == "fp32" else 2.0


def activation_bytes(spec: ModelSpec, seq_len: int, micro_batch: int, checkpointing: bool,
                     act_bytes: float) -> dict[str, float]:
    """Activation memory in bytes, by part: 'layers', 'recompute', 'logits'."""
    h, per_width = spec.hidden, (4 if spec.gated_mlp else 2)
    attn = h + 2 * spec.q_dim + 2 * spec.kv_dim
    # An MoE layer keeps the activations of each expert a token passes through.
    moe = (h + per_width * spec.expert_width) * (spec.experts_per_token + spec.shared_experts)
    mlp = ((spec.layers - spec.moe_layers) * (h + per_width * spec.intermediate) + spec.moe_layers * moe) / spec.layers
    per_token_layer = act_bytes * (attn + mlp + 2 * h)
    tokens = seq_len * micro_batch
    # Checkpointing keeps each layer's input and recomputes one layer's activations at a time.
    layers = spec.layers * tokens * (h * act_bytes if checkpointing else per_token_layer)
    recompute = tokens * per_token_layer if checkpointing else 0.0
    logits = tokens * spec.vocab * (act_bytes + 4.0 * LOSS_FP32_COPIES)
    return {"layers": float(layers), "recompute": float(recompute), "logits": float(logits)}


def estimate(setup: TrainingSetup, gpus: int = 1, shard_lora: bool = False) -> MemoryEstimate:
    """Memory per GPU for `setup` on `gpus` GPUs of one job."""
    spec = setup.spec()
    n = float(setup.params if setup.params is not None else spec.params)
    pb = precision_bytes(setup.precision)
    state_b = OPTIMIZER_STATE_BYTES[setup.optimizer]
    targets = parse_lora_targets(setup.lora_targets)
    notes: list[str] = []
    if spec.generic:
        notes.append(f"{spec.display}: architecture not known, a Llama-shaped one is assumed "
                     f"({spec.layers} layers, hidden {spec.hidden}, vocab {spec.vocab}); activations are approximate")
    elif setup.params is not None and abs(setup.params - spec.params) / spec.params > 0.01:
        notes.append(f"parameter count {n / 1e9:.2f}B given; architecture of {spec.display} ({spec.params / 1e9:.2f}B)")

    adapter_params = host = 0.0
    sharded = gpus > 1 and (setup.method == "full" or shard_lora)
    if setup.method == "full":
        master = MASTER_COPY_BYTES if pb < 4 else 0.0
        weights = grads = artifact = n * pb
        optimizer = n * (state_b + master)
        if setup.offload:
            # ZeRO-Offload (Ren et al. 2021, sec. 4): fp32 master weights and optimizer moments live in
            # host RAM and the CPU runs the update; the GPU keeps 16-bit weights and gradients.
            host, optimizer = optimizer, 0.0
            notes.append(f"ZeRO-Offload: optimizer state and fp32 master ({host / GIB:.0f} GiB) in host RAM")
        adapters, trainable = 0.0, n
        checkpoint = n * (pb + state_b + master)
        notes.append(f"full fine-tuning, {setup.precision}, {setup.optimizer}: "
                     f"{(weights + grads + optimizer) / n:g} bytes/parameter of model state"
                     + (" (ZeRO accounting: 16 for mixed-precision AdamW)" if master and setup.optimizer == "adamw"
                        else ""))
    else:
        adapter_params = float(spec.lora_params(setup.lora_rank, targets) * (n / spec.params))
        if setup.method == "qlora":
            q_frac = spec.quantizable_fraction
            weights = n * q_frac * NF4_DQ_BITS / 8 + n * (1 - q_frac) * pb
            adapter_b = 2.0 if setup.precision == "bf16" else 4.0
            notes.append(f"qlora: block linear layers ({q_frac:.1%} of parameters) in NF4 + double quantization "
                         f"({NF4_DQ_BITS:g} bits), the rest in 16 bit; adapters in "
                         f"{'bf16 (QLoRA reference code)' if adapter_b == 2 else 'fp32'}")
        else:
            weights = n * pb
            adapter_b = 4.0
            notes.append(f"lora: frozen base in {setup.precision}, adapters in fp32 (PEFT default)")
        adapters = grads = artifact = adapter_params * adapter_b
        optimizer, trainable = adapter_params * state_b, adapter_params
        checkpoint = adapter_params * (adapter_b + state_b)
        notes.append(f"LoRA rank {setup.lora_rank} on {','.join(t for t in targets if t in spec.linear_shapes())}: "
                     f"{adapter_params / 1e6:.1f}M trainable parameters")

    act = activation_bytes(spec, setup.seq_len, setup.micro_batch, setup.gradient_checkpointing, pb)
    activations = sum(act.values())
    overhead = CUDA_CONTEXT_GB * GIB
    if setup.method == "qlora":
        biggest = max(a * b for w in (spec.intermediate, spec.expert_width) for a, b in spec.linear_shapes(w).values())
        overhead += biggest * 2.0  # one dequantized weight in 16 bit
    if sharded:
        scale = n / spec.params
        unit = max(spec.layer_params, spec.embedding_params / (1 if spec.tied_embeddings else 2)) * scale
        weight_b = (NF4_DQ_BITS / 8) if setup.method == "qlora" else pb
        grad_b = pb if setup.method == "full" else 0.0
        overhead += 2 * unit * max(weight_b, 2.0) + spec.layer_params * scale * grad_b
        weights, grads, optimizer, adapters = weights / gpus, grads / gpus, optimizer / gpus, adapters / gpus
        notes.append(f"sharded ZeRO-3/FSDP over {gpus} GPUs: weights, gradients and optimizer state / {gpus}; "
                     "activations and gather buffers per GPU")
    notes.append(f"activations: seq {setup.seq_len} x micro-batch {setup.micro_batch}, "
                 f"gradient checkpointing {'on' if setup.gradient_checkpointing else 'off'}, "
                 "FlashAttention/SDPA (no s^2 scores kept)")

    per_gpu = MemoryBreakdown(
        weights_gb=weights / GIB, gradients_gb=grads / GIB, optimizer_gb=optimizer / GIB,
        adapters_gb=adapters / GIB, activations_gb=activations / GIB, overhead_gb=overhead / GIB)
    return MemoryEstimate(
        setup=setup, model_name=spec.name, model_display=spec.display, generic_architecture=spec.generic,
        params=n, trainable_params=trainable, adapter_params=adapter_params, gpus=gpus, sharded=sharded,
        per_gpu=per_gpu, artifact_gb=artifact / GIB, checkpoint_gb=checkpoint / GIB,
        base_weights_gb=n * 2.0 / GIB, assumptions=tuple(notes), host_gb=host / GIB)
