"""DevicePlugins: the NVIDIA and EFA device plugins, each only where its devices are.

The NVIDIA plugin advertises nvidia.com/gpu on every GPU pool node; the AWS
EFA plugin advertises vpc.amazonaws.com/efa on EFA pool nodes only (it
crash-loops on nodes without EFA devices). Both tolerate the GPU taint the
pools carry. The Helm values are pure functions so tests can read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.spec import nodepool
from components.spec.config import GpuPoolConfig

NAMESPACE = "kube-system"

# https://github.com/NVIDIA/k8s-device-plugin/releases: 0.20.0 is the newest
# release seen (NVIDIA/deepops PR #1382, 2026-08-27, verified against that page).
NVIDIA_CHART_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_CHART = "nvidia-device-plugin"
NVIDIA_CHART_VERSION = "0.20.0"

# https://github.com/aws/eks-charts/tree/master/stable/aws-efa-k8s-device-plugin:
# chart 0.5.29 ships plugin v0.5.20 (aws/eks-charts PR #1338, 2026-06-12);
# plugins before v0.5.10 miscount the devices of p6-b200.
EFA_CHART_REPO = "https://aws.github.io/eks-charts"
EFA_CHART = "aws-efa-k8s-device-plugin"
EFA_CHART_VERSION = "0.5.29"

# The well-known label the EFA chart's hard-coded node affinity matches on.
INSTANCE_TYPE_NODE_LABEL = "node.kubernetes.io/instance-type"


def gpu_tolerations() -> list[dict[str, str]]:
    return [nodepool.GPU_TAINT.toleration()]


def nvidia_values() -> dict[str, Any]:
    """NVIDIA plugin on every GPU pool node.

    The chart's default affinity wants node-feature-discovery labels, which
    this cluster does not run, so the affinity is replaced with our pool label.
    """
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": nodepool.POOL_LABEL, "operator": "Exists"}]},
        ]}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *gpu_tolerations()],
    }


def efa_values(pools: Sequence[GpuPoolConfig]) -> dict[str, Any]:
    """EFA plugin on EFA pool nodes only.

    The chart always requires node.kubernetes.io/instance-type in
    supportedInstanceLabels.values (templates/daemonset.yaml), and its default
    list predates p6; listing the pools' own types keeps that term true, and
    the nodeSelector keeps the plugin off a pool of the same type with EFA
    disabled.
    """
    return {
        "nodeSelector": {nodepool.EFA_LABEL: "true"},
        "tolerations": gpu_tolerations(),
        "supportedInstanceLabels": {
            "keys": [INSTANCE_TYPE_NODE_LABEL],
            "values": sorted({p.instance_type for p in pools if p.efa_enabled}),
        },
    }


@dataclass(frozen=True)
class DevicePluginsArgs:
    pools: Sequence[GpuPoolConfig]
    provider: k8s.Provider
    depends_on: list[pulumi.Resource] = field(default_factory=list)  # e.g. the system node group


class DevicePlugins(pulumi.ComponentResource):
    """Helm releases of the NVIDIA and (when any pool has EFA) the AWS EFA device plugins."""

    nvidia: k8s.helm.v3.Release
    efa: k8s.helm.v3.Release | None

    def __init__(self, name: str, args: DevicePluginsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:DevicePlugins", name, None, opts)
        release_opts = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on))

        self.nvidia = k8s.helm.v3.Release(
            f"{name}-nvidia",
            name="nvidia-device-plugin",
            chart=NVIDIA_CHART,
            version=NVIDIA_CHART_VERSION,
            repository_opts={"repo": NVIDIA_CHART_REPO},
            namespace=NAMESPACE,
            values=nvidia_values(),
            opts=release_opts,
        )
        self.efa = None
        if any(p.efa_enabled for p in args.pools):
            self.efa = k8s.helm.v3.Release(
                f"{name}-efa",
                name="aws-efa-k8s-device-plugin",
                chart=EFA_CHART,
                version=EFA_CHART_VERSION,
                repository_opts={"repo": EFA_CHART_REPO},
                namespace=NAMESPACE,
                values=efa_values(args.pools),
                opts=release_opts,
            )
        self.register_outputs({
            "nvidiaRelease": self.nvidia.name,
            "efaRelease": self.efa.name if self.efa is not None else None,
        })
