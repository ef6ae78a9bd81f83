"""What a pool's node looks like to Kubernetes and to the cluster autoscaler.

Pure: a pool's config (GPU or CPU) in, labels, taints, autoscaler tags and
nodeadm user data out. `components/aws/gpu_pool.py` and `cpu_pool.py` put
them on the launch template, the managed node group and its Auto Scaling
group; the device plugins select GPU nodes by the same labels and tolerate
the same taint.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml

from components.core.config import CpuPoolConfig, GpuPoolConfig
from components.core.hardware import efa

POOL_LABEL = "gpucluster.io/pool"
ROLE_LABEL = "gpucluster.io/role"
# System nodes (add-ons, operators, launchers, the autoscaler) carry this label.
SYSTEM_NODE_LABEL = {ROLE_LABEL: "system"}
# CPU pool nodes carry this one. Besides naming them, it keeps Kueue's flavors
# apart: Kueue 0.19 matches a pod set against a flavor on the flavor's own
# label keys only, so a parameter server selecting role=cpu-pool can never be
# given the system flavor (role=system), nor a launcher a CPU pool's.
CPU_POOL_ROLE = {ROLE_LABEL: "cpu-pool"}
# kubelet sets the well-known node.kubernetes.io/instance-type itself; ours is
# a label the pool owns and the autoscaler's node template can repeat.
INSTANCE_TYPE_LABEL = "gpucluster.io/instance-type"
GPU_MODEL_LABEL = "gpucluster.io/gpu-model"
EFA_COUNT_LABEL = "gpucluster.io/efa-count"
# The AWS provider's GPU label (cluster-autoscaler cloudprovider/aws/aws_cloud_provider.go
# GPULabel): a node with it but no allocatable nvidia.com/gpu yet counts as
# unready, so the autoscaler does not add more nodes while the device plugin
# starts (kubernetes/autoscaler #1949).
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
# The label the EFA device plugin's nodeSelector uses (aws/eks-charts
# stable/aws-efa-k8s-device-plugin README; clowdhaus/aws-eks-efa-test).
EFA_LABEL = "vpc.amazonaws.com/efa.present"

GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"

# 2 MiB huge pages for libfabric's EFA provider: the nccl-tests MPIJob in
# aws-samples/awsome-distributed-training requests hugepages-2Mi: 5120Mi per
# worker. kubelet reports only pages reserved before it starts
# (https://kubernetes.io/docs/tasks/manage-hugepages/scheduling-hugepages/).
HUGEPAGES_2MI = "5120Mi"
HUGEPAGES_2MI_COUNT = 5120 // 2

AUTOSCALER_TAG_PREFIX = "k8s.io/cluster-autoscaler"
NODE_TEMPLATE_PREFIX = f"{AUTOSCALER_TAG_PREFIX}/node-template"
# Per-group override of --scale-down-unneeded-time, a Go duration (cluster-autoscaler
# cloudprovider/aws/README.md and aws_manager.go at 1.35.2: the AWS provider reads
# scaledownunneededtime, scaledownunreadytime, scaledownutilizationthreshold,
# scaledowngpuutilizationthreshold and ignoredaemonsetsutilization; "3" fails to parse).
IDLE_OPTION_TAG = f"{NODE_TEMPLATE_PREFIX}/autoscaling-options/scaledownunneededtime"

USER_DATA_BOUNDARY = "GPUCLUSTER-BOUNDARY"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str  # Kubernetes spelling: NoSchedule, PreferNoSchedule, NoExecute

    @property
    def eks_effect(self) -> str:
        """The EKS node group API's spelling (NO_SCHEDULE ...)."""
        return {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE",
                "NoExecute": "NO_EXECUTE"}[self.effect]

    def toleration(self) -> dict[str, str]:
        """A pod toleration matching this taint whatever its value."""
        return {"key": self.key, "operator": "Exists", "effect": self.effect}


# Keeps everything that does not ask for a GPU (system pods, operators) off
# the expensive nodes; the NVIDIA device plugin and GPU jobs tolerate it.
GPU_TAINT = Taint(key=GPU_RESOURCE, value="true", effect="NoSchedule")
# Keeps system pods off CPU pool nodes, so those scale back to zero; only the
# jobs' parameter servers (and DaemonSets that tolerate every taint) go there.
# Neither the NVIDIA device plugin nor the DCGM exporter tolerates it.
CPU_POOL_TAINT = Taint(key="gpucluster.io/cpu-pool", value="true", effect="NoSchedule")

Pool = GpuPoolConfig | CpuPoolConfig


def scaling_config(pool: Pool, paused: bool = False) -> dict[str, int]:
    """The managed node group's sizes. Paused, the floor is 0 so the autoscaler can give every node back.

    The provider uses them at creation only: desired_size is the initial size and
    the autoscaler's afterwards; later min/max changes reach the group through
    components.core.node_updates.scaling_tag and the node-scaling hook.
    """
    if paused:
        return {"min_size": 0, "desired_size": 0, "max_size": pool.max_nodes}
    return {"min_size": pool.min_nodes, "desired_size": pool.initial_nodes, "max_size": pool.max_nodes}


def efa_interfaces(pool: GpuPoolConfig) -> int:
    return efa.efa_interface_count(pool.instance, pool.efa_enabled)


def hugepages_2mi(pool: GpuPoolConfig) -> str | None:
    """Huge pages are reserved on EFA pools only: nothing else uses them."""
    return HUGEPAGES_2MI if pool.efa_enabled else None


def node_labels(pool: Pool) -> dict[str, str]:
    """The pool's own labels, then ours (which win: plugins and jobs select on them)."""
    instance = pool.instance
    if pool.is_cpu:
        return {**pool.labels, POOL_LABEL: pool.name, INSTANCE_TYPE_LABEL: instance.name, **CPU_POOL_ROLE}
    labels = {
        **pool.labels,
        POOL_LABEL: pool.name,
        INSTANCE_TYPE_LABEL: instance.name,
        GPU_MODEL_LABEL: instance.gpu_model or "",
        ACCELERATOR_LABEL: accelerator(pool),
        EFA_COUNT_LABEL: str(efa_interfaces(pool)),
    }
    if pool.efa_enabled:
        labels[EFA_LABEL] = "true"
    return labels


def accelerator(pool: GpuPoolConfig) -> str:
    """The accelerator label's value, e.g. nvidia-h100 (the autoscaler only tests for the label)."""
    return f"nvidia-{(pool.instance.gpu_model or 'gpu').lower()}"


def go_duration(minutes: int) -> str:
    """Minutes as a Go time.Duration string, the way the autoscaler prints them: 3 -> "3m0s"."""
    hours, rest = divmod(minutes, 60)
    return f"{hours}h{rest}m0s" if hours else f"{rest}m0s"


def node_taints(pool: Pool) -> tuple[Taint, ...]:
    return (CPU_POOL_TAINT,) if pool.is_cpu else (GPU_TAINT,)


def node_resources(pool: Pool) -> dict[str, str]:
    """Extended resources a node of the pool offers, as the autoscaler must assume them at zero nodes."""
    if pool.is_cpu:
        return {}
    resources = {GPU_RESOURCE: str(pool.instance.gpu_count)}
    if pool.efa_enabled:
        resources[EFA_RESOURCE] = str(efa_interfaces(pool))
        resources[HUGEPAGES_RESOURCE] = HUGEPAGES_2MI
    return resources


def discovery_tags(cluster_name: str) -> dict[str, str]:
    """cluster-autoscaler auto-discovery (cluster-autoscaler AWS provider README)."""
    return {f"{AUTOSCALER_TAG_PREFIX}/enabled": "true", f"{AUTOSCALER_TAG_PREFIX}/{cluster_name}": "owned"}


def node_template_tags(pool: Pool) -> dict[str, str]:
    """What a node would look like, so the autoscaler can scale the group up from zero.

    Format from the cluster-autoscaler AWS provider README ("Auto-Discovery
    Setup", scaling a node group to 0): label/<key>, taint/<key> =
    <value>:<Effect>, resources/<name>.
    """
    tags = {f"{NODE_TEMPLATE_PREFIX}/label/{k}": v for k, v in node_labels(pool).items()}
    tags.update({f"{NODE_TEMPLATE_PREFIX}/taint/{t.key}": f"{t.value}:{t.effect}" for t in node_taints(pool)})
    tags.update({f"{NODE_TEMPLATE_PREFIX}/resources/{k}": v for k, v in node_resources(pool).items()})
    # An idle node goes after idleMinutes, not the autoscaler's 10-minute default.
    tags[IDLE_OPTION_TAG] = go_duration(pool.idle_minutes)
    return tags


def autoscaler_tags(pool: Pool, cluster_name: str) -> dict[str, str]:
    return {**discovery_tags(cluster_name), **node_template_tags(pool)}


def local_storage_strategy(pool: Pool) -> str | None:
    """RAID0 over the instance-store NVMe disks: nodeadm moves kubelet and containerd onto it.

    A single disk is mounted instead: a one-device RAID0 buys nothing and
    is reported to fail on recent AL2023 AMIs (awslabs/amazon-eks-ami #2386).
    """
    if not pool.local_nvme_raid0 or pool.instance.local_nvme_disks == 0:
        return None
    return "RAID0" if pool.instance.local_nvme_disks > 1 else "Mount"


def node_config(pool: Pool) -> dict[str, Any] | None:
    """Our part of nodeadm's NodeConfig, or None when the defaults do.

    With a managed node group and no image_id, EKS appends the NodeConfig
    with the cluster endpoint, CA and CIDR and nodeadm merges the parts, so
    ours carries only spec.instance (awslabs/amazon-eks-ami nodeadm/doc/api.md,
    "localStorage"; nodeadm/doc/examples.md, "Merging multiple configuration
    objects").
    """
    strategy = local_storage_strategy(pool)
    if strategy is None:
        return None
    return {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": strategy}}},
    }


def hugepages_script(pages: int) -> str:
    """Reserve 2 MiB huge pages before kubelet starts.

    NodeConfig has no sysctl field, so this is a cloud-init shell part:
    nodeadm-run.service, which starts kubelet, is ordered After=cloud-final.service
    (awslabs/amazon-eks-ami templates/al2023/runtime/rootfs/etc/systemd/system/
    nodeadm-run.service), so kubelet sees the pages and advertises
    hugepages-2Mi. The sysctl.d file keeps them across reboots.
    """
    return (
        "#!/bin/bash\n"
        "set -euo pipefail\n"
        f"echo 'vm.nr_hugepages = {pages}' > /etc/sysctl.d/90-gpucluster-hugepages.conf\n"
        "sysctl --load /etc/sysctl.d/90-gpucluster-hugepages.conf\n"
    )


def user_data(pool: Pool) -> str | None:
    """The launch template's user data (MIME multipart), or None when nodes need nothing extra.

    EKS merges this with its own bootstrap part; every part must sit in a
    MIME multipart document (EKS User Guide, "Customize managed nodes with
    launch templates", Amazon Linux 2023 user data).
    """
    parts = []
    config = node_config(pool)
    if config is not None:
        parts.append(("application/node.eks.aws", "---\n" + yaml.safe_dump(config, sort_keys=False)))
    if pool.efa_enabled:
        parts.append(('text/x-shellscript; charset="us-ascii"', hugepages_script(HUGEPAGES_2MI_COUNT)))
    if not parts:
        return None
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{USER_DATA_BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{USER_DATA_BOUNDARY}", f"Content-Type: {content_type}", "", body]
    lines.append(f"--{USER_DATA_BOUNDARY}--")
    return "\n".join(lines) + "\n"


def user_data_base64(pool: Pool) -> str | None:
    """Launch templates take user data base64-encoded."""
    text = user_data(pool)
    return None if text is None else base64.b64encode(text.encode()).decode()
