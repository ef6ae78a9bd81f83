"""What every pool's managed node group has in common, GPU or CPU: the launch template's
metadata and root volume, the node group itself, and the autoscaler's node template on
its Auto Scaling group. components/aws/gpu_pool.py and cpu_pool.py add what differs."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.core.kube import nodepool

# The EKS-optimized AL2023 AMI without GPU drivers: system nodes and CPU pools, of the same release as the
# GPU pools' NVIDIA AMI (amazon-eks-ami releases every variant under one release version; EKS User Guide,
# "Create nodes with optimized Amazon Linux AMIs").
STANDARD_AMI_TYPE = "AL2023_x86_64_STANDARD"

# Root volume: gp3 baseline is 3,000 IOPS and 125 MiB/s; training images are
# 10-20 GB, so pulls get 500 MiB/s (needs >= 2,000 IOPS: at most 0.25 MiB/s
# per IOPS). EBS User Guide, "Amazon EBS General Purpose SSD volumes".
ROOT_DEVICE = "/dev/xvda"  # AL2023 AMIs' root device name
ROOT_VOLUME_IOPS = 6000
ROOT_VOLUME_THROUGHPUT_MIBPS = 500

# IMDSv2 only, one hop: a pod's packets to IMDS cross the pod's network
# namespace (a second hop) and are dropped, so pods cannot take the node
# role's credentials; they get their own through EKS Pod Identity (EKS Best
# Practices Guide, Security, "Restrict access to the instance profile
# assigned to the worker node").
METADATA_OPTIONS = {"http_endpoint": "enabled", "http_tokens": "required", "http_put_response_hop_limit": 1}

# The autoscaler owns the node count once the group exists (EKS User Guide,
# "Scale cluster compute with Karpenter and Cluster Autoscaler"); the path is
# the engine's camelCase property path.
AUTOSCALED_PROPERTY = "scalingConfig.desiredSize"


def root_volume(size_gib: int) -> list[dict[str, Any]]:
    """The launch template's block device mappings: an encrypted gp3 root, gone with the instance."""
    return [{
        "device_name": ROOT_DEVICE,
        "ebs": {"volume_size": size_gib, "volume_type": "gp3", "encrypted": "true",
                "iops": ROOT_VOLUME_IOPS, "throughput": ROOT_VOLUME_THROUGHPUT_MIBPS,
                "delete_on_termination": "true"},
    }]


def asg_name(resources: Any) -> str | None:
    """The node group's Auto Scaling group. None only when there is no node group any more: a
    `destroy --run-program` rerun after a partial destroy (pulumi/pulumi #23921) must not crash here."""
    if not resources or not resources[0].autoscaling_groups:
        return None
    return resources[0].autoscaling_groups[0].name


def tag_slug(key: str) -> str:
    """A resource-name part for a node-template tag key: label/gpucluster.io/pool -> label-gpucluster.io-pool."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key.removeprefix(f"{nodepool.NODE_TEMPLATE_PREFIX}/"))


@dataclass(frozen=True)
class NodeGroupSettings:
    """The stack-wide part of a pool's node group: where and with which AMI release it runs."""

    cluster_name: pulumi.Input[str]
    kubernetes_version: str
    ami_release_version: str  # gpucluster:versions.amiReleaseVersion
    subnet_id: pulumi.Input[str]  # the GPU zone's private subnet: one zone for every pool
    node_role_arn: pulumi.Input[str]
    tags: dict[str, str] = field(default_factory=dict)
    depends_on: list[pulumi.Resource] = field(default_factory=list)  # e.g. core add-ons, node role policies
    paused: bool = False  # gpucluster:paused: the floor drops to 0 so idle nodes can all go


@dataclass(frozen=True)
class AutoscaledGroup:
    node_group_name: pulumi.Output[str]
    asg_name: pulumi.Output[str]


def autoscaled_node_group(name: str, pool: nodepool.Pool, settings: NodeGroupSettings, ami_type: str,
                          template: aws.ec2.LaunchTemplate, instance_types: list[str] | None,
                          parent: pulumi.Resource) -> AutoscaledGroup:
    """The pool's EKS managed node group, `<name>-node-group`, from its launch template, and the
    autoscaler's node template on its Auto Scaling group (node_template_tags)."""
    group = _managed_node_group(name, pool, settings, ami_type, template, instance_types, parent)
    asg = group.resources.apply(asg_name)
    node_template_tags(name, pool, asg, parent)
    return AutoscaledGroup(group.node_group_name, asg)


def _managed_node_group(name: str, pool: nodepool.Pool, settings: NodeGroupSettings, ami_type: str,
                        template: aws.ec2.LaunchTemplate, instance_types: list[str] | None,
                        parent: pulumi.Resource) -> aws.eks.NodeGroup:
    node_group_tags = pulumi.Output.from_input(settings.cluster_name).apply(
        lambda cluster: {**settings.tags, **nodepool.autoscaler_tags(pool, cluster)})
    return aws.eks.NodeGroup(
        f"{name}-node-group",
        cluster_name=settings.cluster_name,
        node_role_arn=settings.node_role_arn,
        subnet_ids=[settings.subnet_id],
        ami_type=ami_type,
        version=settings.kubernetes_version,
        # Pinned per stack: a new AMI release never rolls nodes under a running job.
        release_version=settings.ami_release_version,
        instance_types=instance_types,
        capacity_type=pool.capacity_type,
        launch_template={"id": template.id, "version": template.latest_version.apply(str)},
        scaling_config=nodepool.scaling_config(pool, settings.paused),
        # One node at a time: a rolling AMI update never takes a whole
        # training job's nodes at once.
        update_config={"max_unavailable": 1},
        # EKS replaces nodes its monitoring agent reports unhealthy (GPU
        # Xid errors, NVLink, EFA) instead of leaving them to hang jobs
        # (EKS User Guide, "Enable node auto repair").
        node_repair_config={"enabled": True},
        labels=nodepool.node_labels(pool),
        taints=[{"key": t.key, "value": t.value, "effect": t.eks_effect} for t in nodepool.node_taints(pool)],
        tags=node_group_tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(settings.depends_on),
                                    ignore_changes=[AUTOSCALED_PROPERTY]),
    )


def node_template_tags(name: str, pool: nodepool.Pool, asg: pulumi.Output[str], parent: pulumi.Resource) -> None:
    """The autoscaler's node template on the Auto Scaling group, one Tag resource per key.

    Managed node groups do not copy their tags to the Auto Scaling group,
    where the autoscaler reads node templates. EKS itself tags the group for
    auto-discovery (EKS User Guide, "Managed node groups"), so only the
    node-template tags are added here: a second owner of the discovery tags
    would delete EKS's when a pool is renamed.
    """
    for key, value in nodepool.node_template_tags(pool).items():
        aws.autoscaling.Tag(f"{name}-asg-tag-{tag_slug(key)}", autoscaling_group_name=asg,
                            tag={"key": key, "value": value, "propagate_at_launch": False},
                            opts=pulumi.ResourceOptions(parent=parent))
