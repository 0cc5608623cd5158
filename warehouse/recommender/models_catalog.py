"""The built-in models (models.csv beside this file, each row its config.json's architecture), and a
Llama-shaped generic_spec for a model not in the table."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pydantic import TypeAdapter

from gpuledger.warehouse.recommender.names import resolve_name

CATALOG = Path(__file__).parent / "models.csv"


class UnknownModelError(ValueError):
    """The name matches no built-in model: `unknown` names the nearest, the message adds recommend's --params."""

    def __init__(self, unknown: str) -> None:
        self.unknown = unknown
        super().__init__(f"{unknown} (or give the parameter count with --params)")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, described the way its config.json does."""

    name: str
    display: str
    published_params: float  # the model card's (rounded) count; `params` is computed from the shapes
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int  # a dense layer's MLP width (intermediate_size, or intermediate_size_mlp)
    vocab: int
    head_dim: int | None = None  # when not hidden / heads
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU/GeGLU (gate, up, down) vs. a plain 2-matrix MLP (Falcon)
    experts: int = 1  # MoE: routed experts per MoE layer
    experts_per_token: int = 1
    expert_intermediate: int | None = None  # one expert's MLP width (moe_intermediate_size)
    shared_experts: int = 0  # experts every token passes through (Llama 4)
    moe_every: int = 1  # every n-th layer is MoE (Llama 4 Maverick: 2)
    qkv_bias: bool = False
    extra_params: float = 0.0  # a frozen tower loaded with the model (Gemma 3's vision encoder)
    aliases: tuple[str, ...] = ()
    source: str = ""
    generic: bool = field(default=False, compare=False)  # shape derived from a parameter count

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.hd

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.hd

    @property
    def moe_layers(self) -> int:
        return self.layers // self.moe_every if self.experts > 1 else 0

    @property
    def expert_width(self) -> int:
        return self.expert_intermediate or self.intermediate

    def mlp_params(self, width: int) -> int:
        return (3 if self.gated_mlp else 2) * self.hidden * width

    def linear_shapes(self, width: int | None = None) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear layer of one block, the MLP at `width`."""
        h, i = self.hidden, width or self.intermediate
        shapes = {"q": (h, self.q_dim), "k": (h, self.kv_dim), "v": (h, self.kv_dim), "o": (self.q_dim, h)}
        return shapes | ({"gate": (h, i), "up": (h, i), "down": (i, h)} if self.gated_mlp else
                         {"up": (h, i), "down": (i, h)})

    def _mlp_total(self, experts_per_moe_layer: float) -> float:
        """MLP weights over all layers, with this many experts counted per MoE layer."""
        router = self.hidden * self.experts
        moe = self.moe_layers * (experts_per_moe_layer * self.mlp_params(self.expert_width) + router)
        return (self.layers - self.moe_layers) * self.mlp_params(self.intermediate) + moe

    @property
    def block_linear_params(self) -> int:
        """Linear-layer weights inside the transformer blocks: what QLoRA stores in 4 bit."""
        attention = sum(a * b for k, (a, b) in self.linear_shapes().items() if k in "qkvo")
        return int(self.layers * attention + self._mlp_total(self.experts + self.shared_experts))

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def layer_params(self) -> float:
        """One block's weights (the largest FSDP unit): attention, an average MLP, norms."""
        return (self.block_linear_params / self.layers) + 2 * self.hidden

    def architecture_params(self) -> int:
        """Parameter count implied by the shapes: linear weights, embeddings, norms, q/k/v biases
        where the config has them, and any frozen extra tower."""
        bias = self.layers * (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return int(self.block_linear_params + self.embedding_params + (2 * self.layers + 1) * self.hidden
                   + bias + self.extra_params)

    @property
    def params(self) -> float:
        """The count the estimates use: from the shapes (the card rounds); a generic spec keeps its own."""
        return float(self.published_params) if self.generic else float(self.architecture_params())

    @property
    def active_params(self) -> float:
        """Parameters one text token passes through: the routed experts it uses, not the others, and
        no extra tower."""
        idle = self._mlp_total(self.experts + self.shared_experts) - \
            self._mlp_total(self.experts_per_token + self.shared_experts) if self.experts > 1 else 0.0
        return self.params - idle - self.extra_params

    @property
    def quantizable_fraction(self) -> float:
        return self.block_linear_params / self.architecture_params()

    def lora_params(self, rank: int, targets: tuple[str, ...], per_token: bool = False) -> int:
        """r x (d_in + d_out) per adapted matrix (Hu et al. 2021), every expert of an MoE layer (all are
        trained and held); per_token: only the adapters one token passes through, those of its routed
        experts and the shared ones (what the time model computes)."""
        attention = sum(rank * sum(s) for t, s in self.linear_shapes().items() if t in targets and t in "qkvo")

        def mlp(width: int) -> int:
            return sum(rank * sum(s) for t, s in self.linear_shapes(width).items() if t in targets and t not in "qkvo")
        dense = (self.layers - self.moe_layers) * mlp(self.intermediate)
        experts = (self.experts_per_token if per_token else self.experts) + self.shared_experts
        return self.layers * attention + dense + self.moe_layers * experts * mlp(self.expert_width)


_SPEC = TypeAdapter(ModelSpec)
_FIELD_OF_COLUMN = {"tied": "tied_embeddings", "gated": "gated_mlp"}


def _spec(row: dict[str, str]) -> ModelSpec:
    """A models.csv row as a ModelSpec: numbers and 0/1 flags converted, an empty cell the field's default."""
    given = {_FIELD_OF_COLUMN.get(k, k): v for k, v in row.items() if v != ""}
    return _SPEC.validate_python(given | {"aliases": tuple(row["aliases"].split())})


@lru_cache(maxsize=1)
def models() -> tuple[ModelSpec, ...]:
    with open(CATALOG, newline="") as f:
        return tuple(_spec(r) for r in csv.DictReader(f))


# A tuning word at the end, or just before a trailing -vX version ("-Instruct-v0.3").
_TUNING_SUFFIX = re.compile(r"-(hf|instruct|chat|it|base)(?=(-v\d+(\.\d+)*)?$)")
_VERSION_SUFFIX = re.compile(r"-v\d+(\.\d+)*$")


def _norm(name: str, drop_version: bool = False) -> str:
    """Lower case, owner dropped, separators unified, tuning words dropped:
    'mistralai/Mistral-7B-Instruct-v0.3' -> 'mistral-7b-v0.3' (drop_version: 'mistral-7b')."""
    n = re.sub(r"[\s_]+", "-", name.strip().lower().rsplit("/", 1)[-1])
    while (m := _TUNING_SUFFIX.search(n)) is not None:
        n = n[:m.start()] + n[m.end():]
    return _VERSION_SUFFIX.sub("", n) if drop_version else n


@lru_cache(maxsize=1)
def _index() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for m in models():
        for key in (m.name, *m.aliases):
            out[_norm(key)] = out[_norm(key).replace("-", "")] = m
    return out


def lookup(name: str) -> ModelSpec:
    """The built-in model called `name` (case, separators, an owner/ prefix and -hf/-instruct ignored);
    else UnknownModelError naming the nearest."""
    for key in (_norm(name), _norm(name, drop_version=True)):
        spec = _index().get(key) or _index().get(key.replace("-", ""))
        if spec is not None:
            return spec
    try:
        resolve_name("model", name, [m.name for m in models()])
    except ValueError as e:
        raise UnknownModelError(str(e)) from None
    raise AssertionError("unreachable: a known name is found above")


def generic_spec(params: float) -> ModelSpec:
    """A Llama-shaped architecture with about `params` parameters, for models not in the table:
    head size 128, depth about hidden / 128 (Llama 2), SwiGLU 3.5 x hidden (Llama 3), full multi-head
    KV and a 128,256-token untied vocabulary (the larger activations). N ~ 12 L h^2 with L = h / 128
    gives h = (128 N / 12)^(1/3). Activation and LoRA figures from it are approximate."""
    if not (params > 0 and math.isfinite(params)):
        raise ValueError(f"parameter count must be a positive number, got {params}")
    hidden = max(256, 128 * round((128 * params / 12) ** (1 / 3) / 128))
    intermediate = 256 * round(3.5 * hidden / 256)
    vocab = 128256
    layers = max(1, round((params - 2 * vocab * hidden)
                          / (4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden)))
    return ModelSpec(f"generic-{params / 1e9:g}b", f"generic {params / 1e9:g}B (Llama-shaped)", float(params),
                     layers=layers, hidden=hidden, heads=hidden // 128, kv_heads=hidden // 128,
                     intermediate=intermediate, vocab=vocab,
                     source="derived from the parameter count (models_catalog.generic_spec)", generic=True)
