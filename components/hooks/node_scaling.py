"""A pool's minNodes and maxNodes, set on its managed node group as EKS allows, right before the group's update.

Why not the provider: the node group ignores `scalingConfig` once it exists, because
terraform-provider-aws (which pulumi-aws bridges) sends the whole block whenever any of it changes
(internal/service/eks/node_group.go, resourceNodeGroupUpdate, expandNodegroupScalingConfig) and an
ignored desiredSize is sent as the state holds it (Pulumi docs, "ignoreChanges": "Pulumi will
continue to send those stale values to the provider"): a minSize above it is refused
("Minimum capacity 2 can't be greater than desired size 0"; terraform-provider-aws #18310,
terraform-aws-eks #3306), and one within the bounds but below the live size scales the group down
under running jobs. The program records the bounds in the node group's scaling tag instead
(components.core.node_updates), so a new bound is an in-place tag update, and this runs as
that update's before-update hook, as the stack's identity:

- wait while the group is not ACTIVE: EKS refuses an update while another runs
  ("ResourceInUseException: Nodegroup cannot be updated as it is currently not in Active State"),
  such as a rolling update the provider gave up waiting for (its node group update timeout);
- read the live scaling config (DescribeNodegroup);
- send minSize and maxSize, and desiredSize only when the live one is outside the new bounds
  (raised to minSize, or lowered to maxSize): "when updating a node group, you can specify any or
  none of the properties" (EKS API Reference, NodegroupScalingConfig), so the autoscaler keeps the
  size it chose;
- wait for the update (DescribeUpdate) to succeed; a failed or cancelled one fails the hook, and
  with it the `pulumi up` step, before the provider's own update.

boto3 calls only (tested with botocore's Stubber: moto has no DescribeUpdate); time is injected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

# EKS API Reference, Nodegroup.status: CREATING | ACTIVE | UPDATING | DELETING | CREATE_FAILED | DELETE_FAILED |
# DEGRADED. Only ACTIVE takes an update; UPDATING and CREATING end by themselves.
READY = "ACTIVE"
BUSY = ("CREATING", "UPDATING")
# EKS API Reference, Update: status InProgress | Failed | Cancelled | Successful.
UPDATE_DONE = "Successful"
UPDATE_FAILED = ("Failed", "Cancelled")
POLL_SECONDS = 10
TIMEOUT_SECONDS = 15 * 60


class ScalingError(Exception):
    """EKS did not take the node group's new bounds: the `pulumi up` step fails, nothing else changed."""


def scaling_update(live: Mapping[str, int], min_size: int, max_size: int) -> dict[str, int] | None:
    """The scalingConfig to send for bounds (min_size, max_size), or None when the group has them already."""
    desired = int(live["desiredSize"])
    if (int(live["minSize"]), int(live["maxSize"])) == (min_size, max_size) and min_size <= desired <= max_size:
        return None
    config = {"minSize": min_size, "maxSize": max_size}
    if desired < min_size:
        config["desiredSize"] = min_size
    elif desired > max_size:
        config["desiredSize"] = max_size
    return config


def describe(live: Mapping[str, int], config: Mapping[str, int]) -> str:
    sizes = (f"{key[:-4]} {live[key]} -> {config[key]}" for key in ("minSize", "maxSize", "desiredSize")
             if key in config and config[key] != live[key])
    return ", ".join(sizes) or "unchanged"


def apply_scaling(eks: Any, cluster: str, nodegroup: str, min_size: int, max_size: int,
                  log: Callable[[str], None] = print, sleep: Callable[[float], None] = time.sleep,
                  now: Callable[[], float] = time.monotonic,
                  timeout_seconds: float = TIMEOUT_SECONDS) -> dict[str, int] | None:
    """Give the node group these bounds (see the module); the scalingConfig sent, or None when none was."""
    where = f"{cluster}/{nodegroup}"
    deadline = now() + timeout_seconds
    group = eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
    while group["status"] in BUSY:
        if now() >= deadline:
            raise ScalingError(f"{where}: the node group is still {group['status']} after {timeout_seconds / 60:g} "
                               f"minutes (an update of its own); run `pulumi up` again once `aws eks "
                               f"describe-nodegroup --cluster-name {cluster} --nodegroup-name {nodegroup}` says ACTIVE")
        log(f"{where}: waiting for the node group, {group['status']}, to be ACTIVE before its new bounds")
        sleep(POLL_SECONDS)
        group = eks.describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)["nodegroup"]
    if group["status"] != READY:
        raise ScalingError(f"{where}: the node group is {group['status']}, and EKS updates only an ACTIVE one; "
                           f"see its health in `aws eks describe-nodegroup --cluster-name {cluster} --nodegroup-name "
                           f"{nodegroup}`")
    live = group["scalingConfig"]
    config = scaling_update(live, min_size, max_size)
    if config is None:
        log(f"{where}: scaling already min {min_size}, max {max_size} (desired {live['desiredSize']})")
        return None
    if config.get("desiredSize", live["desiredSize"]) < live["desiredSize"]:
        log(f"{where}: maxNodes {max_size} is below the {live['desiredSize']} nodes the group has: "
            f"{live['desiredSize'] - max_size} of them are terminated, with whatever runs on them")
    update = eks.update_nodegroup_config(clusterName=cluster, nodegroupName=nodegroup, scalingConfig=config)["update"]
    while update["status"] != UPDATE_DONE:
        if update["status"] in UPDATE_FAILED:
            errors = "; ".join(f"{e.get('errorCode')}: {e.get('errorMessage')}" for e in update.get("errors") or [])
            raise ScalingError(f"{where}: EKS update {update['id']} to {config} {update['status']}"
                               + (f" ({errors})" if errors else ""))
        if now() >= deadline:
            raise ScalingError(f"{where}: EKS update {update['id']} to {config} still {update['status']} after "
                               f"{timeout_seconds / 60:g} minutes; see `aws eks describe-update --name {cluster} "
                               f"--nodegroup-name {nodegroup} --update-id {update['id']}`")
        sleep(POLL_SECONDS)
        update = eks.describe_update(name=cluster, nodegroupName=nodegroup, updateId=update["id"])["update"]
    log(f"{where}: {describe(live, config)}")
    return config
