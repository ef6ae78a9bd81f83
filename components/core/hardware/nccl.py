"""NCCL / libfabric environment presets per instance type, and the all_reduce bandwidth to expect.

Pure data and functions, no Pulumi. The TrainingJob launcher starts from
`preset_env(instance_type)` and lays the job's own `env` over it with
`merge_env`; `bootstrap nccl-report` judges an nccl-tests run against
`expected_busbw_gbps`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components.core.hardware import catalog

# libfabric settings of the nccl-tests MPIJob for EFA (awslabs/awsome-distributed-ai,
# the continuation of aws-samples/awsome-distributed-training, main after #1077
# (2026-05): micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml passes
# FI_PROVIDER=efa, FI_EFA_FORK_SAFE=1 and NCCL_DEBUG=INFO). #1077 removed
# NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE and NCCL_TUNER_PLUGIN on the AWS EFA
# team's review: aws-ofi-nccl (1.16+) picks its tuner and those sizes itself,
# and a tuner path set by hand goes stale between images.
EFA_ENV: dict[str, str] = {
    "FI_PROVIDER": "efa",  # never let libfabric pick a slower provider (tcp, sockets)
    "FI_EFA_FORK_SAFE": "1",  # data loaders fork; libfabric must tolerate it
    "NCCL_DEBUG": "INFO",  # default so NET/OFI vs NET/Socket shows in the log; a job may lower it
}

# PyTorch jobs (FACTS.md, awsome-distributed-training FSDP/Megatron on EKS): a
# hung collective raises instead of blocking forever, and the caching allocator
# fragments less over long runs.
TORCH_ENV: dict[str, str] = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
}

# Exclusion form: bootstrap over whatever interface the pod has, never loopback or
# docker bridges (awsome-distributed-training images set NCCL_SOCKET_IFNAME=^docker,lo,veth;
# FACTS.md quotes ^lo for PyTorch jobs).
SOCKET_IFNAME_EXCLUDE = "^lo,docker"

# GPUDirect RDMA must be switched on by hand on P4d/P4de only; on P5 and newer
# aws-ofi-nccl enables it itself and the variable stays unset (FACTS.md,
# awsome-distributed-training PyTorch examples).
DEVICE_RDMA_FAMILIES = frozenset({"p4d", "p4de"})

# aws-ofi-nccl v1.21.1, src/platform-aws.cpp (platform_data_map): the types on which the plugin requires
# GPUDirect RDMA (gdr_required: it fails rather than fall back to host copies, unless
# OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK=1), and among them those whose default protocol is RDMA write
# (PROTOCOL::RDMA: p5/p5e, p5en/p6-b200, p6-b300), which needs the EFA device's native RDMA write
# (PlatformAWS::validate_rdma_write refuses FI_OPT_EFA_EMULATED_WRITE). p4d/p4de use SENDRECV.
GDR_REQUIRED_TYPES = frozenset({"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge",
                                "p6-b200.48xlarge", "p6-b300.48xlarge"})
RDMA_WRITE_TYPES = GDR_REQUIRED_TYPES - {"p4d.24xlarge", "p4de.24xlarge"}
# The NCCL_NET names aws-ofi-nccl answers to: "Libfabric", renamed "AWS Libfabric" or "OFI" when NCCL_NET
# asks for those (v1.21.1 src/nccl_ofi_interface_nvidia.cpp, nvidia_plugin_name_fixup); NCCL compares
# names case-insensitively (NCCL env docs, NCCL_NET; src/plugin/net.cc strcasecmp).
OFI_NET_NAMES = frozenset({"libfabric", "aws libfabric", "ofi"})

# nccl-report passes a run when its peak all_reduce bus bandwidth reaches this
# share of the expected value: run-to-run spread on a healthy pair of nodes is a
# few percent, a broken rail or a socket fallback costs far more.
BUSBW_PASS_FRACTION = 0.8

GIB = 2**30


@dataclass(frozen=True)
class BusbwReference:
    """Expected nccl-tests all_reduce bus bandwidth (GB/s) of 2 nodes, at a message size."""

    gbps: float
    size_bytes: int
    estimate: bool  # True: scaled from a measured type, not measured itself
    source: str


# Measured: aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/README.md
# "Results" (FACTS.md "Expected nccl-tests all_reduce bus bandwidth").
_MEASURED = {
    "p5.48xlarge": BusbwReference(487.0, 16 * GIB, False,
                                  "awsome-distributed-training nccl-tests README, 2x p5.48xlarge"),
    "p4de.24xlarge": BusbwReference(78.0, 2 * GIB, False,
                                    "awsome-distributed-training nccl-tests README, 2x p4de.24xlarge"),
}
# p4d has the same fabric as p4de (4x 100 Gbps EFA, same A100 NVSwitch board; FACTS.md
# instance table): the same bus bandwidth. Only GPU memory differs.
_MEASURED["p4d.24xlarge"] = BusbwReference(78.0, 2 * GIB, False,
                                           "same fabric as p4de.24xlarge (4x 100 Gbps EFA)")


def preset_env(instance_type: str, efa: bool = True, torch: bool = False) -> dict[str, str]:
    """The NCCL/libfabric environment for `instance_type` (efa=False: a pool with EFA turned off;
    torch=True: a torchrun job, which also gets TORCH_ENV).

    KeyError if the type is not in the catalog.
    """
    itype = catalog.get(instance_type)
    extra = dict(TORCH_ENV) if torch else {}
    if not itype.efa_supported or not efa:
        # Single-GPU or socket-only types: no libfabric at all, and NCCL_NET is not
        # forced, so NCCL uses its own socket (or no) transport.
        return {"NCCL_SOCKET_IFNAME": SOCKET_IFNAME_EXCLUDE, "NCCL_DEBUG": "INFO", **extra}
    env = {**EFA_ENV, **extra}
    env["NCCL_SOCKET_IFNAME"] = SOCKET_IFNAME_EXCLUDE
    if itype.family in DEVICE_RDMA_FAMILIES:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def merge_env(preset: Mapping[str, str],
              overrides: Mapping[str, str | int | float | None] | None) -> dict[str, str]:
    """`preset` with `overrides` laid over it: overrides win; None or "" removes the preset's key."""
    env = dict(preset)
    for key, value in (overrides or {}).items():
        if value is None or value == "":
            env.pop(key, None)
        elif isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise TypeError(f"env {key}: got {value!r}; values must be strings or numbers")
        else:
            env[key] = str(value)
    return env


def busbw_reference(instance_type: str) -> BusbwReference | None:
    """Expected 2-node all_reduce bus bandwidth for `instance_type`; None without EFA.

    Types nobody measured here are ESTIMATES: the measured reference with the
    closest aggregate EFA bandwidth, scaled by the ratio of the two bandwidths
    (per node, which is per GPU too: all these types have 8 GPUs). So p5e,
    p5en and p6-b200 (3200 Gbps like p5) expect 487, p6-b300 (6400 Gbps)
    about twice that, g6e.48xlarge (400 Gbps like p4d) about 78 and
    g5.48xlarge (100 Gbps) about a quarter of it. PCIe-only boards (g5, g6e)
    may fall short of the scaled figure inside the node.
    """
    itype = catalog.get(instance_type)
    if not itype.efa_supported:
        return None
    if itype.name in _MEASURED:
        return _MEASURED[itype.name]
    ref_name = min(_MEASURED, key=lambda name: abs(catalog.get(name).network_gbps - itype.network_gbps))
    ref = _MEASURED[ref_name]
    scale = itype.network_gbps / catalog.get(ref_name).network_gbps
    return BusbwReference(round(ref.gbps * scale, 1), ref.size_bytes, True,
                          f"estimate: {ref_name} scaled by EFA bandwidth "
                          f"{itype.network_gbps:g}/{catalog.get(ref_name).network_gbps:g} Gbps")


def expected_busbw_gbps(instance_type: str) -> tuple[float, str] | None:
    """(GB/s, message size such as "16 GiB") to expect from 2 nodes; None for types without EFA."""
    ref = busbw_reference(instance_type)
    if ref is None:
        return None
    return ref.gbps, format_bytes(ref.size_bytes)


def format_bytes(size: int) -> str:
    """Binary units as nccl-tests sizes are powers of two: 8 B, 512 KiB, 16 GiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value = float(size)
    unit = 0
    while value >= 1024 and unit < len(units) - 1:
        value /= 1024
        unit += 1
    return f"{value:g} {units[unit]}"
