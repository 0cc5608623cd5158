"""How fast a fine-tuning job runs on a card: a pure time model (no I/O).

A training step on one GPU processes `seq_len x micro_batch` tokens. Its time is

    step = max(compute, weight reads) + dequantization, never less than the communication
    compute       = tokens x FLOPs per token / (dense peak x achieved utilization)
    weight reads  = passes x weight bytes / memory bandwidth   (bounds tiny batches)
    dequantization (QLoRA) = passes x 4-bit linear weights x 2.5 bytes / memory bandwidth
                    (read 0.5 byte, write the 16-bit copy the matmul then reads)
    communication = bytes each GPU sends per step / link bandwidth, overlapped with compute
                    (FSDP/ZeRO-3 prefetch), so it only costs time when it is the longer part
    ZeRO-Offload adds its PCIe traffic: each GPU's share of the 16-bit gradients to the host and
                    of the updated weights back (2 x 2N / n bytes over the card's PCIe); the CPU's
                    own update time is not modelled
    link          = the node's GPU-to-GPU fabric per direction (node_link: NVLink/NVSwitch, AMD
                    Infinity Fabric, TPU ICI, an NVLink bridge between two cards) or the card's PCIe

FLOPs per token (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1: forward
2N + 2 n_layer n_ctx d_attn; backward twice the forward):
    forward F = 2 N_active + 2 L s d_q       (N_active: MoE tokens see experts_per_token experts)
    full      = 3F (forward, activation gradients, weight gradients)
    lora/qlora= 2F + 6 A (the frozen base needs no weight gradients; A adapter parameters)
    gradient checkpointing adds one forward: + F
Utilization is the achieved fraction of the dense tensor peak, from published measurements (see
UTILIZATION and docs/recommender.md); tokens/s for a node is the per-GPU rate times the GPUs that
run (data-parallel copies, shards, or the fraction of a shared GPU).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuledger.warehouse.recommender.memory import MemoryEstimate, NF4_DQ_BITS, precision_bytes
from gpuledger.warehouse.recommender.models_catalog import ModelSpec

# Achieved share of the dense BF16/FP16 tensor peak (model FLOPs incl. recomputation / peak):
#   full: 0.50. IBM and Meta, "Maximizing training throughput using PyTorch FSDP" (2024): Llama 2 7B
#         on A100 80GB, 57% MFU; NVIDIA NeMo AutoModel performance summary: Llama 3 70B pretraining
#         on 64 H100, 389 model TFLOPs/s/GPU = 39% of 989.
#   lora, qlora: 0.45. NeMo AutoModel: Llama 3 8B LoRA on one H100, 402 model TFLOPs/s = 41%;
#         Qwen README profiling: Qwen-7B LoRA on one A100-SXM4-80G at seq 4096, 10.1 s per 8 x 4096
#         tokens = 3,244 tokens/s, i.e. 51% of 312 TFLOPs with checkpointing's extra forward.
# No published measurement of workstation or GeForce cards under the same recipes was found: they
# take the same shares of their own peak (for GeForce: FP16/BF16 with FP32 accumulate, the rate
# training uses, half the FP16-accumulate rate NVIDIA also lists).
UTILIZATION = {"full": 0.50, "lora": 0.45, "qlora": 0.45}
DEQUANT_BYTES_PER_PARAM = 2.5  # NF4 read (0.5) + bf16 write (2); the matmul's read is a weight read
# PCIe x16 per direction: 15.75, 31.5, 63 GB/s raw for 3.0, 4.0, 5.0 (PCI-SIG), about 80 % achieved.
PCIE_GEN5 = ("Hopper", "Blackwell", "Blackwell Ultra", "CDNA3", "CDNA4")
PCIE_GEN3 = ("Turing", "Volta", "Pascal", "Maxwell", "Kepler", "Vega/GCN5")
FABRIC_GBS_ASSUMED = 12.5  # per GPU when a multi-node offer states no network speed: 100 Gb/s


@dataclass(frozen=True)
class StepWork:
    """What one training step asks of each GPU, independent of the card."""

    tokens: float  # per GPU per step: seq_len x micro_batch
    flops_per_token: float  # hardware FLOPs, recomputation included
    weight_read_bytes: float  # weights read per step (all passes)
    dequant_bytes: float  # QLoRA's dequantization traffic per step
    shard_bytes: float  # bytes each GPU sends per step in a sharded plan (ZeRO-3 / FSDP)
    replica_bytes: float  # bytes each GPU sends per step when whole copies run data-parallel
    utilization: float
    offload_bytes: float = 0.0  # ZeRO-Offload: gradients to the host and updated weights back, over PCIe


def flops_per_token(spec: ModelSpec, method: str, seq_len: int, adapter_params: float,
                    checkpointing: bool, params: float | None = None) -> float:
    """Training FLOPs per token (module doc): 3F full, 2F + 6A adapters, + F with checkpointing."""
    n_active = spec.active_params * ((params / spec.params) if params else 1.0)
    forward = 2.0 * n_active + 2.0 * spec.layers * seq_len * spec.q_dim
    passes = 3.0 if method == "full" else 2.0
    total = passes * forward + (0.0 if method == "full" else 6.0 * adapter_params)
    return total + (forward if checkpointing else 0.0)


def step_work(est: MemoryEstimate, gpus: int) -> StepWork:
    """The per-step work of `est` (its setup and model) on a plan of `gpus` GPUs."""
    s, spec = est.setup, est.setup.spec()
    n = est.params
    pb = precision_bytes(s.precision)
    passes = (3.0 if s.method == "full" else 2.0) + (1.0 if s.gradient_checkpointing else 0.0)
    lin = spec.quantizable_fraction * n
    if s.method == "qlora":
        weight_bytes = lin * 2.0 + (n - lin) * pb  # the dequantized copy is what the matmul reads
        dequant = passes * lin * DEQUANT_BYTES_PER_PARAM
        gathered = lin * NF4_DQ_BITS / 8 + (n - lin) * pb  # what FSDP gathers: the packed 4-bit weights
    else:
        weight_bytes, dequant, gathered = n * pb, 0.0, n * pb
    share = (gpus - 1) / gpus if gpus > 1 else 0.0
    # Gradients live in the trainable parameters' dtype: the training precision for full fine-tuning,
    # the adapters' (fp32 for LoRA, bf16 for QLoRA under bf16; memory.estimate) otherwise.
    grad_b = pb if s.method == "full" else (2.0 if s.method == "qlora" and s.precision == "bf16" else 4.0)
    trainable_grad_bytes = est.trainable_params * grad_b
    if s.method == "full":
        shard = (2 * gathered + trainable_grad_bytes) * share  # two all-gathers + one reduce-scatter
    else:
        shard = 2 * gathered * share  # frozen weights gathered for forward and backward
    # Whole copies (DDP): a ring all-reduce of the gradients sends 2 (g-1)/g of them.
    return StepWork(
        tokens=float(s.seq_len * s.micro_batch),
        flops_per_token=flops_per_token(spec, s.method, s.seq_len, est.adapter_params, s.gradient_checkpointing,
                                        params=n),
        weight_read_bytes=passes * weight_bytes, dequant_bytes=dequant, shard_bytes=shard,
        replica_bytes=2.0 * trainable_grad_bytes, utilization=UTILIZATION[s.method],
        offload_bytes=(2.0 * n * pb / gpus) if s.offload else 0.0)


def pcie_gbs(architecture: str | None) -> float:
    """The card's host link, achieved GB/s per direction (the SQL macro pcie_gbs)."""
    return 50.0 if architecture in PCIE_GEN5 else 12.5 if architecture in PCIE_GEN3 else 25.0


def is_fabric_claim(interconnect: str | None) -> bool:
    """The source names a GPU fabric (the SQL macro is_fast_interconnect, plus Infinity Fabric and TPU ICI)."""
    return (interconnect or "").lower().startswith(("nvlink", "nvswitch", "infinity fabric", "ici"))


def node_link(vendor: str | None, card_link: str | None, form_factor: str | None, architecture: str | None,
              gpu_count: float, interconnect: str | None) -> tuple[str, float]:
    """(kind, GB/s per direction) between a node's GPUs (the SQL macro node_link_gbs): a module that
    only exists on a fabric baseboard (NVIDIA SXM/superchip, AMD OAM) has its fabric whatever the
    source says; a PCIe card's NVLink bridge counts for exactly two cards the source says are
    bridged; else PCIe. Datasheets give both directions: half is one direction."""
    link, form = card_link or "", form_factor or ""
    figure = re.search(r"([0-9.]+)\s*GB/s", link)
    node = (vendor == "NVIDIA" and link.lower().startswith("nvlink") and (form.lower().startswith("sxm")
                                                                          or form == "Superchip")) or \
        (vendor == "AMD" and link.lower().startswith("infinity fabric") and form == "OAM") or \
        (vendor == "Google" and link.lower().startswith("ici"))
    bridged = vendor == "NVIDIA" and link.lower().startswith(("bridge", "nvlink")) and not node and gpu_count == 2 \
        and is_fabric_claim(interconnect)
    if figure and gpu_count >= 2 and (node or bridged):
        kind = "NVLink bridge" if bridged else {"AMD": "Infinity Fabric", "Google": "ICI"}.get(vendor, "NVLink")
        return kind, float(figure.group(1)) / 2
    return "PCIe", pcie_gbs(architecture)


def fabric_gbs(network_gbps: float | None, gpus_per_node: float) -> float:
    """GB/s per GPU across nodes: the node's network speed shared by its GPUs."""
    if not network_gbps:
        return FABRIC_GBS_ASSUMED
    return network_gbps / 8.0 / max(gpus_per_node, 1.0)


def tokens_per_second(work: StepWork, peak_tflops: float | None, bandwidth_tbs: float | None, *,
                      gpu_count: float, plan_gpus: int, nodes: int, link: float, fabric: float,
                      pcie: float = 25.0) -> float | None:
    """Tokens per second of one plan on one offer (None: the card's peak or bandwidth is unknown).

    plan_gpus > 1: a sharded plan over plan_gpus GPUs on `nodes` nodes; plan_gpus = 1: a single-GPU
    plan, run as whole data-parallel copies on every GPU of the node (or on the share of a GPU
    gpu_count < 1 gives)."""
    if not peak_tflops or not bandwidth_tbs:
        return None
    bw = bandwidth_tbs * 1e12
    compute = work.tokens * work.flops_per_token / (peak_tflops * 1e12 * work.utilization)
    step = max(compute, work.weight_read_bytes / bw) + work.dequant_bytes / bw + work.offload_bytes / (pcie * 1e9)
    if plan_gpus > 1:
        gbs = fabric if nodes > 1 else link
        comm = work.shard_bytes / (gbs * 1e9)
        running = float(plan_gpus)
    else:
        copies = int(gpu_count) if gpu_count >= 1 else 1
        comm = work.replica_bytes * (copies - 1) / copies / (link * 1e9) if copies > 1 else 0.0
        running = float(copies) if gpu_count >= 1 else gpu_count
    return running * work.tokens / max(step, comm)
