"""What a later `pulumi up` does to a pool's node group: new bounds in place, or every node replaced (pure).

Bounds. The node group ignores `scalingConfig` once it exists: the provider sends the whole block
on any change, with the desiredSize of the state, and EKS refuses a minSize above it ("Minimum
capacity 2 can't be greater than desired size 0"; terraform-provider-aws #18310, terraform-aws-eks
#3306) or, below the bound, takes it and terminates the nodes the autoscaler added. So the bounds the
program asks for are also a tag of the node group (`scaling_tag`): changing minNodes, maxNodes or
paused changes the tag, an in-place update, and that update's before-update hook sets the bounds
itself (components.hooks.node_scaling), moving desiredSize only into them.

Restarts. The node group follows its launch template's latest version; a new version (any change of
the template's data: terraform-provider-aws ec2_launch_template.go, resourceLaunchTemplateUpdate)
or a new AMI release or Kubernetes version (UpdateNodegroupVersion) makes EKS drain and replace every
node, up to maxUnavailable at a time (EKS User Guide, "Understand each phase of node updates").
"""

from __future__ import annotations

import re

from components.core.kube import nodepool

SCALING_TAG = "gpucluster.io/scaling"

# The config keys that reach a pool's launch template or its node group's version: changing one
# restarts every node of the pool. tests/test_node_restarts.py changes each pool key and compares
# the launch templates; the stack's tags, minNodes, maxNodes, desiredNodes, idleMinutes, labels and
# fabricTest leave them alone. (instanceType, extraInstanceTypes and capacityType replace the node
# group itself: `bootstrap diff` lists that as a replacement.)
GPU_TEMPLATE_KEYS = ("rootVolumeGiB", "localNvmeRaid0", "efa", "placementGroup", "capacityReservationId")
CPU_TEMPLATE_KEYS = ("rootVolumeGiB",)
STACK_ROLL_KEYS = ("versions.amiReleaseVersion", "kubernetesVersion")
ROLL_NOTE = "nodes restart: running jobs stop"


def scaling_tag(pool: nodepool.Pool, paused: bool = False) -> dict[str, str]:
    """{SCALING_TAG: "min=0 max=4"}: the bounds of nodepool.scaling_config as a tag value.

    EKS tag values allow letters, digits, spaces and `+ - = . _ : / @` (EKS User Guide, "Tag your
    Amazon EKS resources").
    """
    sizes = nodepool.scaling_config(pool, paused)
    return {SCALING_TAG: f"min={sizes['min_size']} max={sizes['max_size']}"}


def parse_scaling_tag(value: str | None) -> tuple[int, int]:
    """(min, max) from a scaling tag's value; ValueError when it is not one of ours."""
    match = re.fullmatch(r"min=(\d+) max=(\d+)", value or "")
    if match is None:
        raise ValueError(f"{SCALING_TAG} {value!r} is not 'min=<n> max=<n>'")
    return int(match[1]), int(match[2])


def node_group_tags(pool: nodepool.Pool, cluster_name: str, paused: bool = False) -> dict[str, str]:
    """Every tag of ours on the pool's managed node group; the stack's tags go beside them."""
    return {**nodepool.autoscaler_tags(pool, cluster_name), **scaling_tag(pool, paused)}


def template_keys(pool: nodepool.Pool) -> tuple[str, ...]:
    """The pool's config keys that restart its nodes when they change."""
    return CPU_TEMPLATE_KEYS if pool.is_cpu else GPU_TEMPLATE_KEYS


def later_ups() -> dict[str, list[str]]:
    """What a later `pulumi up` of a deployed stack does with each kind of change, for the plan."""
    return {"restartGpuPoolKeys": list(GPU_TEMPLATE_KEYS), "restartCpuPoolKeys": list(CPU_TEMPLATE_KEYS),
            "restartStackKeys": list(STACK_ROLL_KEYS),
            "inPlace": ["minNodes", "maxNodes", "paused", "idleMinutes", "tags"]}
