"""How fast a fine-tuning job runs on a card, a pure time model: a step is max(compute, weight reads)
plus QLoRA's dequantization and ZeRO-Offload's PCIe traffic, never shorter than the communication it
overlaps. FLOPs per token, utilization and links with their sources: docs/recommender.md, section 3."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuledger.warehouse.recommender.memory import MemoryEstimate, NF4_DQ_BITS, parse_lora_targets, precision_bytes

# Achieved share of the dense BF16/FP16 tensor peak, from published measurements (docs/recommender.md,
# section 3: IBM and Meta's FSDP Llama 2 7B at 57 % MFU, NeMo AutoModel's Llama 3 70B at 39 % and 8B LoRA
# at 41 %, Qwen-7B LoRA at 51 %); other cards take the same shares of their own peak.
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


def step_work(est: MemoryEstimate, gpus: int) -> StepWork:
    """The per-step work of `est` (its setup and model) on a plan of `gpus` GPUs."""
    s, spec, n = est.setup, est.setup.spec(), est.params
    full = s.method == "full"
    pb = precision_bytes(s.precision)
    # FLOPs per token (Kaplan et al. 2020): forward F, then 3F for full fine-tuning, 2F + 6 x adapter
    # parameters for LoRA (no weight gradients for the frozen base), + F with gradient checkpointing.
    # A token passes through the adapters of its routed experts only (MoE), as F counts active weights;
    # memory holds every expert's.
    forward = 2.0 * (spec.active_params * (n / spec.params)) + 2.0 * spec.layers * s.seq_len * spec.q_dim
    targets = parse_lora_targets(s.lora_targets)
    active_adapters = 0.0 if full else est.adapter_params * (
        spec.lora_params(s.lora_rank, targets, per_token=True) / spec.lora_params(s.lora_rank, targets))
    flops = (3.0 if full else 2.0) * forward + 6.0 * active_adapters
    flops += forward if s.gradient_checkpointing else 0.0
    passes = (3.0 if full else 2.0) + (1.0 if s.gradient_checkpointing else 0.0)
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
    grad_b = pb if full else (2.0 if s.method == "qlora" and s.precision == "bf16" else 4.0)
    trainable_grad_bytes = est.trainable_params * grad_b
    # Sharded: two all-gathers of the weights, plus a reduce-scatter of the gradients when full.
    # Whole copies (DDP): a ring all-reduce of the gradients sends 2 (g-1)/g of them.
    return StepWork(
        tokens=float(s.seq_len * s.micro_batch), flops_per_token=flops, weight_read_bytes=passes * weight_bytes,
        dequant_bytes=dequant, shard_bytes=(2 * gathered + (trainable_grad_bytes if full else 0.0)) * share,
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


# A speed stated with the fabric: "InfiniBand NDR 8x400 Gb/s", "RoCEv2 Ethernet 8x400G", "800Gbps Dual Plane RoCE".
_FABRIC_SPEED = re.compile(r"(?:(\d+)\s*[x×]\s*)?(\d+(?:\.\d+)?)\s*(?:Gbit/s|Gb/s|Gbps|GbE|G)(?![A-Za-z])")


def stated_fabric_gbps(multinode_fabric: str | None) -> float | None:
    """Gb/s of a node's fabric as its source states it with the fabric (ports x speed), None when it names
    no speed ("EFA", "InfiniBand NDR")."""
    m = _FABRIC_SPEED.search(multinode_fabric or "")
    return None if m is None else float(m.group(1) or 1) * float(m.group(2))


def fabric_gbs(network_gbps: float | None, gpus_per_node: float, multinode_fabric: str | None = None) -> float:
    """GB/s per GPU across nodes: the speed stated with the node's fabric, else its network speed (Azure's
    is the front-end Ethernet, not the InfiniBand), shared by its GPUs; else 100 Gb/s per GPU."""
    speed = stated_fabric_gbps(multinode_fabric) or network_gbps
    return speed / 8.0 / max(gpus_per_node, 1.0) if speed else FABRIC_GBS_ASSUMED


def tokens_per_second(work: StepWork, peak_tflops: float | None, bandwidth_tbs: float | None, *,
                      gpu_count: float, plan_gpus: int, nodes: int, link: float, fabric: float,
                      pcie: float = 25.0) -> float | None:
    """Tokens per second of one plan on one offer (None: the card's peak or bandwidth is unknown): sharded
    over plan_gpus > 1 GPUs, or a single-GPU plan copied on every whole GPU of the node (or a share of one)."""
    if not peak_tflops or not bandwidth_tbs:
        return None
    bw = bandwidth_tbs * 1e12
    compute = work.tokens * work.flops_per_token / (peak_tflops * 1e12 * work.utilization)
    step = max(compute, work.weight_read_bytes / bw) + work.dequant_bytes / bw + work.offload_bytes / (pcie * 1e9)
    if plan_gpus > 1:
        comm, running = work.shard_bytes / ((fabric if nodes > 1 else link) * 1e9), float(plan_gpus)
    else:
        copies = int(gpu_count) if gpu_count >= 1 else 1
        comm = work.replica_bytes * (copies - 1) / copies / (link * 1e9) if copies > 1 else 0.0
        running = float(copies) if gpu_count >= 1 else gpu_count
    return running * work.tokens / max(step, comm)
