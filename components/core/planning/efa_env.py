"""A job `env` that takes NCCL off EFA: the plan warns, naming the key, the value and what it costs on the pool.

The preset (components.core.hardware.nccl) puts NCCL on EFA through
aws-ofi-nccl; a job's own `env` is laid over it and may undo that without a
word. Each rule is its upstream's documented (or coded) behaviour:

- FI_PROVIDER: libfabric uses only the providers listed, comma-separated,
  or all but them after a leading `^` (libfabric fabric(7), "FI_PROVIDER");
  without `efa`, aws-ofi-nccl (which picks `efa` itself only when
  FI_PROVIDER is unset: v1.21.1 src/platform-aws.cpp PlatformAWS::init)
  runs over another provider, or fails and leaves NCCL to its sockets.
- NCCL_NET: forces one network by name, case-insensitively: "Socket" (TCP),
  "IB" (verbs) or a plugin's name, and never falls back (NCCL env docs,
  NCCL_NET; src/plugin/net.cc ncclNetInit: "Failed to initialize any NET
  plugin"). NCCL's IB transport takes only InfiniBand or Ethernet ports
  (src/transport/net_ib/init.cc); the Linux EFA driver reports neither
  (drivers/infiniband/hw/efa efa_port_link_layer: IB_LINK_LAYER_UNSPECIFIED).
- NCCL_NET_PLUGIN=none: no external plugin (NCCL env docs; net.cc
  strcasecmp "none"), so IB (no device) and then NCCL's sockets.
- FI_EFA_USE_DEVICE_RDMA false (0/false/no/off, libfabric src/var.c): libfabric
  emulates RMA and stops using device RDMA for sends and receives (fi_efa(7)),
  so FI_OPT_EFA_EMULATED_WRITE is true, which aws-ofi-nccl's RDMA protocol
  refuses on p5 and newer (nccl.RDMA_WRITE_TYPES): its initialization fails.
- NCCL_NET_GDR_LEVEL=LOC (or its old number 0): "Never use GPU Direct RDMA"
  (NCCL env docs; src/graph/paths.cc compares the name exactly).
- OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK true ("true" or a non-zero integer:
  include/nccl_ofi_param_impl.h): where GPUDirect RDMA fails to come up,
  the job runs "on host copy buffers at significantly reduced performance"
  instead of failing (aws-ofi-nccl v1.7.4-aws release notes).

NCCL_IB_DISABLE draws no warning: it disables NCCL's own IB transport only,
which never drives EFA (NCCL env docs, NCCL_IB_DISABLE). Pools without EFA
draw none either: their NCCL runs on sockets by design.
"""

from __future__ import annotations

from components.core.config import NAMESPACE, GpuPoolConfig, StackConfig
from components.core.config.stack import entries
from components.core.hardware import efa, nccl
from components.core.problems import show

FALSE_WORDS = frozenset({"0", "false", "no", "off"})  # libfabric's fi_parse_bool, case-insensitive


def env_warnings(cfg: StackConfig) -> list[str]:
    """One warning per job env key that takes NCCL off EFA (or GPUDirect RDMA) on the job's EFA pool."""
    pools = {p.name: p for _, p in entries(cfg.gpu_pools)}
    warnings = []
    for i, job in entries(cfg.jobs):
        pool = pools.get(job.pool)
        if pool is None or not pool.efa_enabled:
            continue
        secret = cfg.secret_env(i)
        for key, value in job.env.items():
            found = _effect(key, value.strip(), pool)
            if found is not None:
                what, cost = found
                shown = "(a secret value)" if key in secret else show(value)
                warnings.append(f"{NAMESPACE}:jobs[{i}].env.{key}: {shown} {what} on pool {pool.name!r} "
                                f"({pool.instance_type}): {cost}")
    return warnings


def tcp_cost(pool: GpuPoolConfig) -> str:
    """TCP on the node's ENA against the pool's EFA, in the catalog's and EC2's numbers."""
    itype = pool.instance
    # EC2 User Guide, "Amazon EC2 instance network bandwidth": a single TCP flow gets up to 10 Gbps inside
    # a cluster placement group, 5 Gbps otherwise.
    flow = 10 if pool.uses_placement_group else 5
    count = efa.efa_interface_count(itype)
    return (f"TCP over the ENA interface on network card 0, at most {itype.card0_gbps:g} Gbps a node and {flow} "
            f"Gbps a flow, instead of the pool's {count} EFA interface{'s' if count != 1 else ''} "
            f"({itype.network_gbps:g} Gbps, kernel bypass)")


def _effect(key: str, value: str, pool: GpuPoolConfig) -> tuple[str, str] | None:
    """(what the setting does, what it costs) when it takes NCCL off EFA on this pool; None otherwise."""
    if value == "":  # removes the preset's variable (mpirun) or leaves it empty: nothing forced
        return None
    name = pool.instance_type
    gdr = name in nccl.GDR_REQUIRED_TYPES
    if key == "FI_PROVIDER" and not _allows_efa(value):
        return ("keeps libfabric off its efa provider",
                f"aws-ofi-nccl then runs over another provider (or fails, leaving NCCL its own sockets): "
                f"{tcp_cost(pool)}")
    if key == "NCCL_NET" and value.lower() not in nccl.OFI_NET_NAMES:
        return _forced_net(value, pool)
    if key == "NCCL_NET_PLUGIN" and value.lower() == "none":
        return ("keeps NCCL from loading aws-ofi-nccl",
                f"NCCL's InfiniBand transport finds no EFA device, so NCCL falls back to its sockets: "
                f"{tcp_cost(pool)}")
    if key == "FI_EFA_USE_DEVICE_RDMA" and value.lower() in FALSE_WORDS and gdr:
        if name in nccl.RDMA_WRITE_TYPES:
            return ("turns the EFA device's RDMA off",
                    f"libfabric then emulates RDMA writes, which aws-ofi-nccl's RDMA protocol (its default on "
                    f"{name}) refuses: the plugin fails to initialize and NCCL falls back to its sockets: "
                    f"{tcp_cost(pool)}")
        return ("turns the EFA device's RDMA off",
                "libfabric then emulates RDMA and stops using device RDMA for sends and receives, so large "
                "messages no longer reach GPU memory by RDMA read but through bounce buffers (the preset sets it "
                "to 1 on this type)")
    if key == "NCCL_NET_GDR_LEVEL" and value in ("LOC", "0") and gdr:
        itype = pool.instance
        return ("turns GPUDirect RDMA off",
                f"NCCL stages every transfer between the {itype.gpu_count} GPUs and the "
                f"{efa.efa_interface_count(itype)} EFA interfaces through host memory, a copy each way")
    if key == "OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK" and _ofi_true(value) and gdr:
        return ("lets aws-ofi-nccl run without GPUDirect RDMA",
                "a node whose GPUDirect RDMA fails to come up then runs on host-copy buffers at significantly "
                "reduced performance instead of failing")
    return None


def _forced_net(value: str, pool: GpuPoolConfig) -> tuple[str, str]:
    if value.lower() == "socket":
        return "forces NCCL's TCP socket transport", tcp_cost(pool)
    if value.lower() == "ib":
        return ("forces NCCL's InfiniBand verbs transport",
                "it finds no device (EFA is neither an InfiniBand nor an Ethernet port) and, forced, never falls "
                "back: every communicator fails to initialize and the job fails")
    return (f"forces a network named {value!r}",
            "no plugin of an EFA node has that name (aws-ofi-nccl answers to Libfabric, AWS Libfabric or OFI): "
            "unless the image ships one, every communicator fails to initialize and the job fails")


def _allows_efa(value: str) -> bool:
    """Whether libfabric may still use `efa` under FI_PROVIDER=value, as libfabric reads it (src/fabric.c
    ofi_create_filter, ofi_apply_prov_init_filter): a comma-separated list matched case-insensitively, negated
    by a leading `^`; a layered name "efa;ofi_rxm" includes the core efa but, negated, does not exclude it."""
    negated = value.startswith("^")
    names = [name.lower() for name in value.removeprefix("^").split(",")]
    if negated:
        return "efa" not in names
    return any(name.split(";")[0] == "efa" for name in names)


def _ofi_true(value: str) -> bool:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value) != 0
    except ValueError:
        return False
