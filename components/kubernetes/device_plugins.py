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

from components.core import namespaces
from components.core import versions as v
from components.core.config import GpuPoolConfig
from components.core.hardware import registries as ecr
from components.core.kube import hardening, nodepool

NAMESPACE = namespaces.KUBE_SYSTEM

# The well-known label the EFA chart's hard-coded node affinity matches on.
INSTANCE_TYPE_NODE_LABEL = "node.kubernetes.io/instance-type"


# Requests so the GPU nodes' DaemonSets are counted; memory limits well above what either uses
# (a device plugin is one small Go process; no CPU limit, as everywhere here).
NVIDIA_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
# The EFA chart's own requests (values.yaml: resources.requests 10m/20Mi), with the memory limit its
# comment suggests (128Mi).
EFA_RESOURCES = {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "128Mi"}}


def gpu_tolerations() -> list[dict[str, str]]:
    return [nodepool.GPU_TAINT.toleration()]


def nvidia_values() -> dict[str, Any]:
    """NVIDIA plugin on every GPU pool node.

    The chart's default affinity wants node-feature-discovery labels, which
    this cluster does not run, so the affinity is replaced with our pool label.

    Security: the plugin runs as root, as it must: it serves the kubelet's
    device-plugin socket in /var/lib/kubelet/device-plugins and creates
    /var/run/cdi on the host (hostPath volumes, templates/daemonset-device-plugin.yml
    at v0.20.0). With `securityContext` left empty the chart's helper gives the
    container allowPrivilegeEscalation false and drops ALL capabilities (no MIG,
    no volume-mounts device list, no CPU-manager compatibility: its three
    exceptions, none ours); the pod gets RuntimeDefault seccomp here
    (podSecurityContext). Its root filesystem stays writable: nothing in the
    chart or the plugin's docs says it writes only to those volumes. No probes:
    the plugin serves no health endpoint, and the chart has none.
    """
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": nodepool.POOL_LABEL, "operator": "Exists"}]},
        ]}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}, *gpu_tolerations()],
        # EFA is not Mellanox OFED: MOFED on would make containers ask for
        # MOFED libraries the nodes do not have. The chart passes MOFED_ENABLED
        # only for a real boolean (templates/daemonset-device-plugin.yml:
        # `typeIs "bool" .Values.mofedEnabled`), so this is False, not "false".
        "mofedEnabled": False,
        "podSecurityContext": {"seccompProfile": dict(hardening.RUNTIME_DEFAULT)},
        "resources": NVIDIA_RESOURCES,
    }


def efa_values(pools: Sequence[GpuPoolConfig], region: str) -> dict[str, Any]:
    """EFA plugin on EFA pool nodes only.

    The chart always requires node.kubernetes.io/instance-type in
    supportedInstanceLabels.values (templates/daemonset.yaml), and its default
    list predates p6; listing the pools' own types keeps that term true, and
    the nodeSelector keeps the plugin off a pool of the same type with EFA
    disabled. The image comes from the stack's region's EKS registry: the
    chart's default (values.yaml image.repository) is us-west-2's, a
    cross-region pull that fails where that registry is not reachable.

    Security: left as the chart ships it, privileged on the host network
    (values.yaml securityContext, templates/daemonset.yaml): the plugin opens
    the EFA devices under a hostPath /dev/infiniband and serves the kubelet's
    socket. A privileged container gets no seccomp filter whatever the pod
    asks, so none is set. No probes (none in the chart).
    """
    return {
        "image": {"repository": f"{ecr.addon_registry(region)}/eks/aws-efa-k8s-device-plugin",
                  "tag": v.EFA_PLUGIN_IMAGE_TAG},
        "nodeSelector": {nodepool.EFA_LABEL: "true"},
        "tolerations": gpu_tolerations(),
        "supportedInstanceLabels": {
            "keys": [INSTANCE_TYPE_NODE_LABEL],
            "values": sorted({t for p in pools if p.efa_enabled for t in p.instance_types}),
        },
        "resources": EFA_RESOURCES,
    }


@dataclass(frozen=True)
class DevicePluginsArgs:
    pools: Sequence[GpuPoolConfig]
    region: str
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
            chart=v.NVIDIA_CHART,
            version=v.NVIDIA_CHART_VERSION,
            repository_opts={"repo": v.NVIDIA_CHART_REPO},
            namespace=NAMESPACE,
            values=nvidia_values(),
            opts=release_opts,
        )
        self.efa = None
        if any(p.efa_enabled for p in args.pools):
            self.efa = k8s.helm.v3.Release(
                f"{name}-efa",
                name="aws-efa-k8s-device-plugin",
                chart=v.EFA_CHART,
                version=v.EFA_CHART_VERSION,
                repository_opts={"repo": v.EFA_CHART_REPO},
                namespace=NAMESPACE,
                values=efa_values(args.pools, args.region),
                opts=release_opts,
            )
        self.register_outputs({
            "nvidiaRelease": self.nvidia.name,
            "efaRelease": self.efa.name if self.efa is not None else None,
        })
