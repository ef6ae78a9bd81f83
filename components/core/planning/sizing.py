"""Capacity sizing: does a model's training state fit, on how many nodes, how long, at what cost.

Pure functions, no Pulumi, no I/O. The formulas (FACTS.md "Sizing"):

- Mixed-precision Adam keeps 16 bytes per parameter: 2 (bf16 weights) + 2 (bf16
  grads) + 12 (fp32 master weights, momentum, variance) -- ZeRO, Rajbhandari et
  al., 2020. Tensor and pipeline parallelism shard the parameters first
  (P' = P / (tp * pp)); ZeRO then shards over the data-parallel degree
  Nd = N / (tp * pp): stage 0 16P', stage 1 4P' + 12P'/Nd, stage 2
  2P' + 14P'/Nd, stage 3 16P'/Nd.
- Training FLOPs are 6 x params per token, 8 x with activation recomputation
  (Narayanan et al., 2021, "Efficient Large-Scale Language Model Training on
  GPU Clusters Using Megatron-LM"); time = FLOPs / (GPUs x achieved FLOP/s).

Activations are not modelled: they depend on batch, sequence length and
recomputation. Instead a fixed share of GPU memory is kept free for them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from components.core.hardware import catalog
from components.core.planning.sizing_request import ZERO_STAGES, SizingError, SizingInput, validate

__all__ = ["ZERO_STAGES", "SizingError", "SizingInput", "SizingResult", "size"]

# Bytes per parameter of mixed-precision Adam (ZeRO paper, section 3.1).
WEIGHT_BYTES = 2  # bf16 weights
GRAD_BYTES = 2  # bf16 gradients
OPTIMIZER_BYTES = 12  # fp32 master weights, momentum, variance
STATE_BYTES_PER_PARAM = WEIGHT_BYTES + GRAD_BYTES + OPTIMIZER_BYTES  # 16

# Share of GPU memory kept free for activations, temporary buffers, the CUDA
# context and allocator fragmentation: model state may use at most 75%. A rule
# of thumb, not a measurement; long sequences without recomputation need more.
ACTIVATION_HEADROOM = 0.25

# FLOPs per parameter per token: forward 2 + backward 4; recomputing
# activations repeats the forward pass (Narayanan et al., 2021).
FLOPS_PER_PARAM_TOKEN = 6
FLOPS_PER_PARAM_TOKEN_RECOMPUTE = 8

# Upper bound of the min_nodes search: far beyond any single EKS node group.
MAX_NODES_SEARCH = 4096

GB = 1e9  # decimal, as memory and FLOP reports quote it
GIB = 2**30  # GPU memory in the catalog is GiB




@dataclass
class SizingResult:
    """What `size` found; None wherever an input needed for a value was not given."""

    params: float
    tokens: float | None
    instance_type: str | None
    gpu_model: str | None
    nodes: int | None
    gpus: int
    tp: int
    pp: int
    zero_stage: int
    data_parallel: int
    model_state_gb_per_gpu: float
    gpu_memory_gb: float | None
    model_state_limit_gb: float | None
    headroom_gb: float | None  # GPU memory left after the model state (negative: over)
    fits: bool | None
    min_nodes: int | None
    min_gpus: int | None
    flops_per_token: float
    total_flops: float | None
    achieved_tflops_per_gpu: float | None
    training_days: float | None
    gpu_hours: float | None
    node_hours: float | None
    price_usd_per_hour: float | None
    cost_usd: float | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def model_state_bytes_per_gpu(params: float, zero_stage: int, tp: int, pp: int, data_parallel: int) -> float:
    """Bytes of weights, gradients and optimizer state one GPU holds."""
    shard = params / (tp * pp)
    nd = data_parallel
    if zero_stage == 0:
        return STATE_BYTES_PER_PARAM * shard
    if zero_stage == 1:  # optimizer state partitioned
        return (WEIGHT_BYTES + GRAD_BYTES) * shard + OPTIMIZER_BYTES * shard / nd
    if zero_stage == 2:  # + gradients partitioned
        return WEIGHT_BYTES * shard + (GRAD_BYTES + OPTIMIZER_BYTES) * shard / nd
    if zero_stage == 3:  # + weights partitioned
        return STATE_BYTES_PER_PARAM * shard / nd
    raise ValueError(f"ZeRO stage {zero_stage} does not exist; allowed {ZERO_STAGES}")


def usable_bytes_per_gpu(gpu_memory_gib: float) -> float:
    """Bytes of one GPU's memory the model state may take (the rest is activation headroom)."""
    return gpu_memory_gib * GIB * (1 - ACTIVATION_HEADROOM)


def size(inp: SizingInput) -> SizingResult:
    """Size one training run; SizingError lists every problem with `inp` at once."""
    params, tokens, itype = validate(inp)
    mp = inp.tp * inp.pp
    notes: list[str] = []

    if itype is not None:
        per_node = itype.gpu_count
        nodes = inp.nodes if inp.nodes is not None else inp.gpus // per_node
        gpus = nodes * per_node
    else:
        nodes = None
        gpus = inp.gpus
    data_parallel = gpus // mp

    state = model_state_bytes_per_gpu(params, inp.zero_stage, inp.tp, inp.pp, data_parallel)

    gpu_memory_gb = model_state_limit_gb = headroom_gb = None
    fits = min_nodes = min_gpus = None
    if itype is not None:
        gpu_memory = itype.gpu_memory_gib * GIB
        limit = usable_bytes_per_gpu(itype.gpu_memory_gib)
        gpu_memory_gb = gpu_memory / GB
        model_state_limit_gb = limit / GB
        headroom_gb = (gpu_memory - state) / GB
        fits = state <= limit
        min_nodes = _min_nodes(params, inp.zero_stage, inp.tp, inp.pp, itype.gpu_count, limit)
        min_gpus = min_nodes * itype.gpu_count if min_nodes is not None else None
        if min_nodes is None:
            notes.append(_never_fits_note(inp.zero_stage))
        if inp.tp > itype.gpu_count:
            notes.append(f"--tp {inp.tp} spans nodes ({itype.gpu_count} GPUs each): tensor parallelism "
                         "over EFA is much slower than over NVLink")
    else:
        notes.append("no --instance-type: GPU memory unknown, fit and cost not judged")

    flops_per_token = (FLOPS_PER_PARAM_TOKEN_RECOMPUTE if inp.recompute else FLOPS_PER_PARAM_TOKEN) * params
    achieved = _achieved_tflops(inp, itype, notes)
    total_flops = training_days = gpu_hours = node_hours = None
    if tokens is not None:
        total_flops = flops_per_token * tokens
    if total_flops is not None and achieved is not None:
        seconds = total_flops / (gpus * achieved * 1e12)
        training_days = seconds / 86400
        gpu_hours = gpus * seconds / 3600
        if nodes is not None:
            node_hours = nodes * seconds / 3600
    elif tokens is None:
        notes.append("no --tokens: training time and cost not estimated")

    price = cost = None
    if itype is not None:
        price = catalog.price(itype.name, inp.price_overrides)
        if node_hours is not None:
            cost = node_hours * price

    return SizingResult(
        params=params,
        tokens=tokens,
        instance_type=itype.name if itype else None,
        gpu_model=itype.gpu_model if itype else None,
        nodes=nodes,
        gpus=gpus,
        tp=inp.tp,
        pp=inp.pp,
        zero_stage=inp.zero_stage,
        data_parallel=data_parallel,
        model_state_gb_per_gpu=state / GB,
        gpu_memory_gb=gpu_memory_gb,
        model_state_limit_gb=model_state_limit_gb,
        headroom_gb=headroom_gb,
        fits=fits,
        min_nodes=min_nodes,
        min_gpus=min_gpus,
        flops_per_token=flops_per_token,
        total_flops=total_flops,
        achieved_tflops_per_gpu=achieved,
        training_days=training_days,
        gpu_hours=gpu_hours,
        node_hours=node_hours,
        price_usd_per_hour=price,
        cost_usd=cost,
        notes=notes,
    )


def _min_nodes(params: float, stage: int, tp: int, pp: int, per_node: int, limit: float) -> int | None:
    """Fewest nodes on which the model state fits with the same tp/pp/stage; None if none up to the cap."""
    mp = tp * pp
    for nodes in range(1, MAX_NODES_SEARCH + 1):
        gpus = nodes * per_node
        if gpus % mp:
            continue
        if model_state_bytes_per_gpu(params, stage, tp, pp, gpus // mp) <= limit:
            return nodes
        if stage == 0:  # nothing is sharded over data parallelism: more nodes never help
            return None
    return None


def _never_fits_note(stage: int) -> str:
    if stage == 0:
        return ("never fits at ZeRO stage 0: every data-parallel rank holds the whole state; "
                "raise --zero-stage, --tp or --pp")
    if stage in (1, 2):
        return (f"does not fit on up to {MAX_NODES_SEARCH} nodes at ZeRO stage {stage}: the unsharded part "
                "alone is too big; raise --zero-stage, --tp or --pp")
    return f"does not fit on up to {MAX_NODES_SEARCH} nodes; raise --tp or --pp"


def _achieved_tflops(inp: SizingInput, itype: catalog.InstanceType | None, notes: list[str]) -> float | None:
    if inp.achieved_tflops is not None:
        if itype is not None and inp.achieved_tflops > itype.peak_bf16_tflops_per_gpu:
            notes.append(f"--achieved-tflops {inp.achieved_tflops:g} exceeds the dense BF16 peak of "
                         f"{itype.gpu_model} ({itype.peak_bf16_tflops_per_gpu:g} TFLOP/s)")
        return inp.achieved_tflops
    if inp.mfu is not None and itype is not None:
        if inp.recompute:
            notes.append("with --recompute, --mfu is read as hardware FLOPs utilization: "
                         "recomputed FLOPs count as work done")
        return inp.mfu * itype.peak_bf16_tflops_per_gpu
    if inp.tokens is not None:
        notes.append("no --mfu or --achieved-tflops: training time and cost not estimated")
    return None
