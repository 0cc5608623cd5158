"""A small built-in table of well-known open models, for the memory estimator.

Each entry carries the published parameter count and the architecture facts
the activation and LoRA estimates need, copied from the model's own
`config.json` (or, for LLaMA 65B, the paper's table), with the URL it came
from. Nothing is downloaded at run time: the table is data in this file.

The architecture also lets the estimator split the parameters into the
linear layers inside the transformer blocks (what QLoRA quantizes to 4 bit and
what LoRA adapts) and the embeddings / LM head (kept in 16 bit). Every entry's
architecture reproduces its published parameter count within 2 %
(tests/test_memory.py checks this), which guards against a mistyped field.

A model that is not in the table is still estimated from `--params` alone,
with a generic Llama-shaped architecture derived from the count
(`generic_spec`); the estimate then says so.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field


class UnknownModelError(ValueError):
    """The name matches no built-in model; the message lists the known names."""


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, described the way its config.json does."""

    name: str  # canonical key: "llama-3-70b"
    display: str
    published_params: float  # the model card's (rounded) count; `params` is computed from the shapes
    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads (= heads without GQA/MQA)
    intermediate: int  # intermediate_size (per expert for MoE)
    vocab: int  # vocab_size
    head_dim: int | None = None  # when not hidden / heads (Gemma 2 9B: 256)
    tied_embeddings: bool = False  # tie_word_embeddings: LM head shares the embedding matrix
    gated_mlp: bool = True  # SwiGLU/GeGLU (gate, up, down) vs. plain 2-matrix MLP (Falcon)
    experts: int = 1  # MoE: experts per layer (Mixtral: 8)
    experts_per_token: int = 1  # MoE: experts each token is routed to (Mixtral: 2)
    qkv_bias: bool = False  # attention_bias / Qwen2: q, k and v projections carry biases
    aliases: tuple[str, ...] = ()
    source: str = ""  # where the figures come from
    generic: bool = field(default=False, compare=False)  # True: shape derived from a parameter count

    # -- shapes ---------------------------------------------------------------
    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.hd

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.hd

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear layer in one block, per expert for the MLP."""
        h, i = self.hidden, self.intermediate
        shapes = {"q": (h, self.q_dim), "k": (h, self.kv_dim), "v": (h, self.kv_dim), "o": (self.q_dim, h)}
        if self.gated_mlp:
            shapes |= {"gate": (h, i), "up": (h, i), "down": (i, h)}
        else:
            shapes |= {"up": (h, i), "down": (i, h)}
        return shapes

    # -- parameter counts -----------------------------------------------------
    @property
    def attention_params_per_layer(self) -> int:
        return sum(a * b for k, (a, b) in self.linear_shapes().items() if k in ("q", "k", "v", "o"))

    @property
    def mlp_params_per_layer(self) -> int:
        per_expert = sum(a * b for k, (a, b) in self.linear_shapes().items() if k not in ("q", "k", "v", "o"))
        router = self.hidden * self.experts if self.experts > 1 else 0
        return per_expert * self.experts + router

    @property
    def block_linear_params(self) -> int:
        """Linear-layer weights inside the transformer blocks: what QLoRA stores in 4 bit."""
        return self.layers * (self.attention_params_per_layer + self.mlp_params_per_layer)

    @property
    def embedding_params(self) -> int:
        """Token embedding plus LM head (once if tied): kept in 16 bit by QLoRA."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def norm_params(self) -> int:
        return (2 * self.layers + 1) * self.hidden

    @property
    def layer_params(self) -> int:
        return self.attention_params_per_layer + self.mlp_params_per_layer + 2 * self.hidden

    def architecture_params(self) -> int:
        """Parameter count implied by the architecture: linear weights, embeddings, norms, and the
        q/k/v biases where the config has them (other biases: none in these models)."""
        bias = self.layers * (self.q_dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return self.block_linear_params + self.embedding_params + self.norm_params + bias

    @property
    def params(self) -> float:
        """The parameter count the estimates use: computed from the config shapes (the model card's
        figure is rounded: Qwen2.5-14B is 14.77B, not 14.7B); a generic spec keeps the count it was
        derived from."""
        return float(self.published_params) if self.generic else float(self.architecture_params())

    @property
    def active_params(self) -> float:
        """Parameters one token passes through: an MoE token uses experts_per_token of the experts."""
        if self.experts <= 1:
            return self.params
        idle = self.layers * (self.experts - self.experts_per_token) * (
            self.mlp_params_per_layer - self.hidden * self.experts) / self.experts
        return self.params - idle

    @property
    def quantizable_fraction(self) -> float:
        """Share of the parameters in block linear layers (QLoRA quantizes these, not embeddings/norms)."""
        return self.block_linear_params / self.architecture_params()

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Trainable LoRA parameters: r x (d_in + d_out) per adapted matrix (Hu et al. 2021, sec. 4)."""
        shapes = self.linear_shapes()
        per_layer = 0
        for t in targets:
            if t not in shapes:
                continue  # e.g. "gate" on a plain-MLP model
            a, b = shapes[t]
            mult = self.experts if t in ("gate", "up", "down") else 1
            per_layer += rank * (a + b) * mult
        return per_layer * self.layers


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


# Architecture fields are the config.json values at the URL given. The third field is the model
# card's rounded parameter count (shown, and checked against the shapes); estimates use `params`.
_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("llama-3-8b", "Llama 3 8B", 8.03e9, layers=32, hidden=4096, heads=32, kv_heads=8,
              intermediate=14336, vocab=128256,
              aliases=("meta-llama-3-8b", "llama3-8b", "llama-3.1-8b", "llama3.1-8b", "meta-llama-3.1-8b"),
              source=_hf("meta-llama/Meta-Llama-3-8B") + " (3.1: " + _hf("meta-llama/Llama-3.1-8B") + ", same shape)"),
    ModelSpec("llama-3-70b", "Llama 3 70B", 70.6e9, layers=80, hidden=8192, heads=64, kv_heads=8,
              intermediate=28672, vocab=128256,
              aliases=("meta-llama-3-70b", "llama3-70b", "llama-3.1-70b", "llama3.1-70b", "meta-llama-3.1-70b",
                       "llama-3.3-70b", "llama3.3-70b"),
              source=_hf("meta-llama/Meta-Llama-3-70B") + " (3.1: " + _hf("meta-llama/Llama-3.1-70B") + ", same shape)"),
    ModelSpec("llama-3.2-1b", "Llama 3.2 1B", 1.24e9, layers=16, hidden=2048, heads=32, kv_heads=8, head_dim=64,
              intermediate=8192, vocab=128256, tied_embeddings=True, aliases=("llama3.2-1b", "meta-llama-3.2-1b"),
              source=_hf("meta-llama/Llama-3.2-1B")),
    ModelSpec("llama-3.2-3b", "Llama 3.2 3B", 3.21e9, layers=28, hidden=3072, heads=24, kv_heads=8,
              intermediate=8192, vocab=128256, tied_embeddings=True, aliases=("llama3.2-3b", "meta-llama-3.2-3b"),
              source=_hf("meta-llama/Llama-3.2-3B")),
    ModelSpec("llama-3.1-405b", "Llama 3.1 405B", 405.9e9, layers=126, hidden=16384, heads=128, kv_heads=8,
              intermediate=53248, vocab=128256,
              aliases=("meta-llama-3.1-405b", "llama3.1-405b", "llama-3-405b", "llama-405b"),
              source=_hf("meta-llama/Llama-3.1-405B")),
    ModelSpec("llama-2-7b", "Llama 2 7B", 6.74e9, layers=32, hidden=4096, heads=32, kv_heads=32,
              intermediate=11008, vocab=32000, aliases=("llama2-7b", "llama-2-7b-hf"),
              source=_hf("meta-llama/Llama-2-7b-hf")),
    ModelSpec("llama-2-13b", "Llama 2 13B", 13.0e9, layers=40, hidden=5120, heads=40, kv_heads=40,
              intermediate=13824, vocab=32000, aliases=("llama2-13b", "llama-2-13b-hf"),
              source=_hf("meta-llama/Llama-2-13b-hf")),
    ModelSpec("llama-2-70b", "Llama 2 70B", 69.0e9, layers=80, hidden=8192, heads=64, kv_heads=8,
              intermediate=28672, vocab=32000, aliases=("llama2-70b", "llama-2-70b-hf"),
              source=_hf("meta-llama/Llama-2-70b-hf")),
    ModelSpec("llama-65b", "LLaMA 65B", 65.2e9, layers=80, hidden=8192, heads=64, kv_heads=64,
              intermediate=22016, vocab=32000, aliases=("llama-1-65b", "llama1-65b", "llama65b"),
              source="Touvron et al. 2023, LLaMA: Open and Efficient Foundation Language Models, Table 2 "
                     "(https://arxiv.org/abs/2302.13971); intermediate size from the HF conversion "
                     "(https://huggingface.co/huggyllama/llama-65b/blob/main/config.json)"),
    ModelSpec("mistral-7b", "Mistral 7B", 7.24e9, layers=32, hidden=4096, heads=32, kv_heads=8,
              intermediate=14336, vocab=32000, aliases=("mistral-7b-v0.1", "mistral7b"),
              source=_hf("mistralai/Mistral-7B-v0.1")),
    ModelSpec("mistral-7b-v0.3", "Mistral 7B v0.3", 7.25e9, layers=32, hidden=4096, heads=32, kv_heads=8,
              intermediate=14336, vocab=32768, aliases=("mistral7b-v0.3", "mistral-7b-v0.2"),
              source=_hf("mistralai/Mistral-7B-v0.3") + " (v0.2 and v0.3: vocabulary 32768)"),
    ModelSpec("mixtral-8x7b", "Mixtral 8x7B", 46.7e9, layers=32, hidden=4096, heads=32, kv_heads=8,
              intermediate=14336, vocab=32000, experts=8, experts_per_token=2,
              aliases=("mixtral-8x7b-v0.1", "mixtral"),
              source=_hf("mistralai/Mixtral-8x7B-v0.1")),
    ModelSpec("qwen-7b", "Qwen 7B (first generation)", 7.72e9, layers=32, hidden=4096, heads=32, kv_heads=32,
              intermediate=11008, vocab=151936, qkv_bias=True, aliases=("qwen1-7b",),
              source=_hf("Qwen/Qwen-7B") + " (intermediate_size 22016 covers both SwiGLU halves, 11008 each)"),
    ModelSpec("qwen2.5-7b", "Qwen2.5 7B", 7.61e9, layers=28, hidden=3584, heads=28, kv_heads=4,
              intermediate=18944, vocab=152064, qkv_bias=True, aliases=("qwen-2.5-7b", "qwen25-7b"),
              source=_hf("Qwen/Qwen2.5-7B")),
    ModelSpec("qwen2.5-14b", "Qwen2.5 14B", 14.7e9, layers=48, hidden=5120, heads=40, kv_heads=8,
              intermediate=13824, vocab=152064, qkv_bias=True, aliases=("qwen-2.5-14b", "qwen25-14b"),
              source=_hf("Qwen/Qwen2.5-14B")),
    ModelSpec("qwen2.5-32b", "Qwen2.5 32B", 32.5e9, layers=64, hidden=5120, heads=40, kv_heads=8,
              intermediate=27648, vocab=152064, qkv_bias=True, aliases=("qwen-2.5-32b", "qwen25-32b"),
              source=_hf("Qwen/Qwen2.5-32B")),
    ModelSpec("qwen2.5-72b", "Qwen2.5 72B", 72.7e9, layers=80, hidden=8192, heads=64, kv_heads=8,
              intermediate=29568, vocab=152064, qkv_bias=True, aliases=("qwen-2.5-72b", "qwen25-72b"),
              source=_hf("Qwen/Qwen2.5-72B")),
    ModelSpec("gemma-2-9b", "Gemma 2 9B", 9.24e9, layers=42, hidden=3584, heads=16, kv_heads=8, head_dim=256,
              intermediate=14336, vocab=256000, tied_embeddings=True, aliases=("gemma2-9b",),
              source=_hf("google/gemma-2-9b")),
    ModelSpec("gemma-2-27b", "Gemma 2 27B", 27.2e9, layers=46, hidden=4608, heads=32, kv_heads=16, head_dim=128,
              intermediate=36864, vocab=256000, tied_embeddings=True, aliases=("gemma2-27b",),
              source=_hf("google/gemma-2-27b")),
    ModelSpec("phi-3-mini", "Phi-3 mini (3.8B)", 3.82e9, layers=32, hidden=3072, heads=32, kv_heads=32,
              intermediate=8192, vocab=32064, aliases=("phi-3-mini-4k", "phi3-mini", "phi-3-mini-4k-instruct"),
              source=_hf("microsoft/Phi-3-mini-4k-instruct")),
    ModelSpec("falcon-40b", "Falcon 40B", 41.8e9, layers=60, hidden=8192, heads=128, kv_heads=8,
              intermediate=32768, vocab=65024, gated_mlp=False, aliases=("falcon40b",),
              source=_hf("tiiuae/falcon-40b") + " (ffn = 4 x hidden, GELU MLP, multi-query with 8 KV heads)"),
)


# A tuning word at the end, or just before a trailing -vX version ("-Instruct-v0.3").
_TUNING_SUFFIX = re.compile(r"-(hf|instruct|chat|it|base)(?=(-v\d+(\.\d+)*)?$)")
_VERSION_SUFFIX = re.compile(r"-v\d+(\.\d+)*$")


def _norm(name: str, drop_version: bool = False) -> str:
    """Lower case, repo owner dropped, separators unified, tuning words dropped (-Instruct, -it,
    -chat, -hf, -base): 'mistralai/Mistral-7B-Instruct-v0.3' -> 'mistral-7b-v0.3'; with
    drop_version the trailing -vX goes too ('mistral-7b')."""
    n = name.strip().lower().rsplit("/", 1)[-1]
    n = re.sub(r"[\s_]+", "-", n)
    while (m := _TUNING_SUFFIX.search(n)) is not None:
        n = n[:m.start()] + n[m.end():]
    return _VERSION_SUFFIX.sub("", n) if drop_version else n


def _index() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for m in _MODELS:
        for key in (m.name, *m.aliases):
            out[_norm(key)] = m
            out[_norm(key).replace("-", "")] = m
    return out


_INDEX = _index()


def models() -> tuple[ModelSpec, ...]:
    return _MODELS


def names() -> list[str]:
    return [m.name for m in _MODELS]


def lookup(name: str) -> ModelSpec:
    """The built-in model called `name` (case, separators, an owner/ prefix and -hf/-instruct ignored)."""
    spec = None
    for key in (_norm(name), _norm(name, drop_version=True)):
        spec = spec or _INDEX.get(key) or _INDEX.get(key.replace("-", ""))
    if spec is None:
        raise UnknownModelError(
            f"unknown model {name!r}; built-in models: {', '.join(names())} "
            "(or give the parameter count with --params)")
    return spec


def generic_spec(params: float, name: str | None = None) -> ModelSpec:
    """A Llama-shaped architecture with about `params` parameters, for models not in the table.

    Shape rules, read off the Llama family above: head size 128, depth about
    hidden / 128 (Llama 2 7B/13B: 4096/32, 5120/40), SwiGLU intermediate
    3.5 x hidden (Llama 3), no GQA (full multi-head KV, the larger activation),
    and a 128,256-token vocabulary with untied LM head (the larger logits).
    With N ~ 12 L h^2 and L = h / 128 this gives h = (128 N / 12)^(1/3).
    Activation and LoRA figures from it are approximate; the estimate says so.
    """
    if not (params > 0 and math.isfinite(params)):
        raise ValueError(f"parameter count must be a positive number, got {params}")
    hidden = max(256, 128 * round((128 * params / 12) ** (1 / 3) / 128))
    heads = hidden // 128
    intermediate = 256 * round(3.5 * hidden / 256)
    vocab = 128256
    per_layer = 4 * hidden * hidden + 3 * hidden * intermediate + 2 * hidden
    layers = max(1, round((params - 2 * vocab * hidden) / per_layer))
    return ModelSpec(name or f"generic-{params / 1e9:g}b", f"generic {params / 1e9:g}B (Llama-shaped)", float(params),
                     layers=layers, hidden=hidden, heads=heads, kv_heads=heads, intermediate=intermediate,
                     vocab=vocab, source="derived from the parameter count (warehouse.models_catalog.generic_spec)",
                     generic=True)
