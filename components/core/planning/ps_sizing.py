"""Parameter-server sizing: the memory each parameter server holds and the bytes it moves per step (pure).

TensorFlow's ParameterServerStrategy keeps every variable on the parameter
servers, spread over them by the variable partitioner, and an optimizer's
slot variables beside the variable they belong to; each worker reads the
variables it needs at every step and sends its gradients back
(tensorflow.org, "Parameter server training with ParameterServerStrategy",
"Variable sharding"). So, with fp32 variables (TensorFlow keeps variables in
float32 under a mixed_float16/mixed_bfloat16 policy: "Mixed precision",
"variables are float32") and Adam's two slots:

- memory per PS = (4 + 4 x slots) bytes x params / psReplicas;
- bytes per PS per step = workers x (4 bytes read + 4 bytes of gradient)
  x params / psReplicas, half in, half out.

An even spread is the best case: a partitioner that leaves one large
variable whole puts it on one PS. The network line is the time those bytes
take at the PS node's peak bandwidth, a floor on every step.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from components.core.hardware import catalog

VARIABLE_BYTES = 4  # float32 variables
GRADIENT_BYTES = 4  # gradients arrive in the variable's dtype
ADAM_SLOTS = 2  # m and v
GIB = 2**30


@dataclass(frozen=True)
class PsSizing:
    params: float
    ps_replicas: int
    workers: int
    ps_instance_type: str
    memory_gib_per_ps: float
    ps_node_memory_gib: int
    fits: bool  # within the memory a parameter server requests (workers.NODE_SHARE of the node)
    bytes_per_ps_per_step: float  # in and out together
    network_gbps: float  # the PS node's peak
    network_seconds_per_step: float  # those bytes at that peak: a floor on the step time

    def to_dict(self) -> dict:
        return asdict(self)


def size_ps(params: float, ps_replicas: int, workers: int, ps_instance_type: str,
            optimizer_slots: int = ADAM_SLOTS, node_share: float = 0.8) -> PsSizing:
    node = catalog.get(ps_instance_type)
    state = params * (VARIABLE_BYTES + VARIABLE_BYTES * optimizer_slots) / ps_replicas
    moved = workers * params * (VARIABLE_BYTES + GRADIENT_BYTES) / ps_replicas
    memory_gib = state / GIB
    return PsSizing(
        params=params, ps_replicas=ps_replicas, workers=workers, ps_instance_type=ps_instance_type,
        memory_gib_per_ps=round(memory_gib, 2), ps_node_memory_gib=node.memory_gib,
        fits=memory_gib <= node.memory_gib * node_share,
        bytes_per_ps_per_step=moved, network_gbps=node.network_gbps,
        network_seconds_per_step=round(moved * 8 / (node.network_gbps * 1e9), 3),
    )


def render(s: PsSizing) -> str:
    fit = "fits" if s.fits else "does NOT fit"
    return (f"{s.ps_replicas} parameter server{'s' if s.ps_replicas != 1 else ''} on {s.ps_instance_type}: "
            f"{s.memory_gib_per_ps:,.1f} GiB of variables and Adam slots each ({fit} {s.ps_node_memory_gib} GiB); "
            f"{s.bytes_per_ps_per_step / 1e9:,.2f} GB in and out of each per step from {s.workers} worker"
            f"{'s' if s.workers != 1 else ''}: at least {s.network_seconds_per_step:g} s a step at "
            f"{s.network_gbps:g} Gbps")
