"""What every pool's managed node group has in common, GPU or CPU: the launch template's
metadata, root volume and node tags, the node group itself with its bounds hook, and the
autoscaler's node template and the stack's tags on its Auto Scaling group.
components/aws/gpu_pool.py and cpu_pool.py add what differs.

Only what must be in the launch template is: the node group follows the template's latest
version, and a new version replaces every node of the pool (components.core.node_updates).
The stack's tags reach the instances from the Auto Scaling group instead (instance_tags)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from components.core import node_updates
from components.core.kube import nodepool
from components.hooks import StackHooks

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
# "Scale cluster compute with Karpenter and Cluster Autoscaler"), and the
# bounds reach an existing group through the scaling tag and the hook, never
# the provider (components.core.node_updates): the whole block is
# ignored after creation. The engine's camelCase property path.
SCALING_PROPERTY = "scalingConfig"


def root_volume(size_gib: int) -> list[dict[str, Any]]:
    """The launch template's block device mappings: an encrypted gp3 root, gone with the instance."""
    return [{
        "device_name": ROOT_DEVICE,
        "ebs": {"volume_size": size_gib, "volume_type": "gp3", "encrypted": "true",
                "iops": ROOT_VOLUME_IOPS, "throughput": ROOT_VOLUME_THROUGHPUT_MIBPS,
                "delete_on_termination": "true"},
    }]


def node_tag_specifications(name: str) -> list[dict[str, Any]]:
    """The launch template's tags for each node and its volumes: the `Name` only, which never changes.

    The stack's tags are not here: a change of them would make a new template version and
    replace every node (instance_tags puts them on the instances instead).
    """
    return [{"resource_type": kind, "tags": {"Name": f"{name}-node"}} for kind in ("instance", "volume")]


# Per node of a rolling update: the drain (EKS's 15-minute eviction limit) and a new node's launch and boot.
MINUTES_PER_REPLACED_NODE = 20
PROVIDER_UPDATE_MINUTES = 60  # terraform-provider-aws eks/node_group.go, Timeouts.Update


def update_timeout(pool: nodepool.Pool) -> str:
    """How long a node group update may take: every node replaced, one at a time."""
    return f"{max(PROVIDER_UPDATE_MINUTES, MINUTES_PER_REPLACED_NODE * pool.max_nodes)}m"


def asg_name(resources: Any) -> str | None:
    """The node group's Auto Scaling group. None only when there is no node group any more: a
    `destroy --run-program` rerun after a partial destroy (pulumi/pulumi #23921) must not crash here."""
    if not resources or not resources[0].autoscaling_groups:
        return None
    return resources[0].autoscaling_groups[0].name


def tag_slug(key: str) -> str:
    """A resource-name part for a node-template tag key: label/gpucluster.io/pool -> label-gpucluster.io-pool."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", key.removeprefix(f"{nodepool.NODE_TEMPLATE_PREFIX}/"))


def tag_name_part(key: str) -> str:
    """A resource-name part for a stack tag key, distinct per key and stable whatever other keys exist:
    the key itself when it is already a slug, else its slug and a digest of it (`a/b` beside `a-b`)."""
    slug = tag_slug(key)
    return slug if slug == key else f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class NodeGroupSettings:
    """The stack-wide part of a pool's node group: where and with which AMI release it runs."""

    cluster_name: pulumi.Input[str]
    kubernetes_version: str
    ami_release_version: str  # gpucluster:versions.amiReleaseVersion
    subnet_id: pulumi.Input[str]  # the GPU zone's private subnet: one zone for every pool
    node_role_arn: pulumi.Input[str]
    hooks: StackHooks  # the bounds hook every node group binds (apply_node_group_scaling)
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
    """The pool's EKS managed node group, `<name>-node-group`, from its launch template; on its Auto
    Scaling group the autoscaler's node template (node_template_tags) and the stack's tags for its
    instances (instance_tags)."""
    group = _managed_node_group(name, pool, settings, ami_type, template, instance_types, parent)
    asg = group.resources.apply(asg_name)
    node_template_tags(name, pool, asg, parent)
    instance_tags(name, settings.tags, asg, parent, settings.hooks)
    return AutoscaledGroup(group.node_group_name, asg)


def _managed_node_group(name: str, pool: nodepool.Pool, settings: NodeGroupSettings, ami_type: str,
                        template: aws.ec2.LaunchTemplate, instance_types: list[str] | None,
                        parent: pulumi.Resource) -> aws.eks.NodeGroup:
    node_group_tags = pulumi.Output.from_input(settings.cluster_name).apply(
        lambda cluster: {**settings.tags, **node_updates.node_group_tags(pool, cluster, settings.paused)})
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
        # Before any update (a new scaling tag among them), the hook gives the group the pool's bounds; after a
        # create too, for a replacement is created from the ignored scalingConfig in the state, the first one.
        # A rolling update replaces one node at a time, each drained for up to 15 minutes (EKS User Guide,
        # "Understand each phase of node updates"): the provider's 60 minutes would give up on a large pool.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(settings.depends_on),
                                    ignore_changes=[SCALING_PROPERTY],
                                    custom_timeouts=pulumi.CustomTimeouts(update=update_timeout(pool)),
                                    hooks=StackHooks.before_update_after_create(
                                        settings.hooks.apply_node_group_scaling)),
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


def instance_tags(name: str, tags: dict[str, str], asg: pulumi.Output[str], parent: pulumi.Resource,
                  hooks: StackHooks | None) -> None:
    """The stack's tags on the Auto Scaling group, propagated to the instances it launches.

    Not in the launch template: there a changed tag is a new template version, and the node group
    replaces every node for it. An Auto Scaling group's tag with PropagateAtLaunch goes on each
    instance launched after it is set, and volumes get none (EC2 Auto Scaling User Guide, "Tag Auto
    Scaling groups and instances"); the instances already running (launched before the tag existed:
    it waits for its group) get it from the tag's hook (components.hooks.instance_tags). A managed
    node group's own tags reach neither ("Node group tags do not propagate to any other resources
    associated with the node group": EKS API Reference, Nodegroup). A value changes in place
    (terraform-provider-aws autoscaling/group_tag.go: only tag.key forces a new resource).
    """
    binding = StackHooks.after_create_or_update(hooks.tag_running_instances) if hooks is not None else None
    for key, value in tags.items():
        aws.autoscaling.Tag(f"{name}-instance-tag-{tag_name_part(key)}", autoscaling_group_name=asg,
                            tag={"key": key, "value": value, "propagate_at_launch": True},
                            opts=pulumi.ResourceOptions(parent=parent, hooks=binding))
