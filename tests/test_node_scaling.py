"""A later `pulumi up` that changes a pool's bounds: it reaches EKS as EKS accepts it, and never undoes the autoscaler.

The first tests replay the update of a deployed node group the way the engine and the provider make it:

- the engine sets every ignored path back to its old input (pulumi/pulumi
  pkg/resource/deploy/step_generator.go, processIgnoreChanges), runs the resource's before-update
  hooks, then asks the provider to update when anything else changed;
- the bridged terraform-provider-aws sends UpdateNodegroupConfig with the whole scaling_config when
  any of it changed (internal/service/eks/node_group.go: resourceNodeGroupUpdate,
  expandNodegroupScalingConfig), an ignored desired_size as the state has it (the bridge drops the
  ignored attribute's diff: pulumi-terraform-bridge pkg/tfshim/sdk-v2, processIgnoreChanges);
- EKS refuses a minSize above the desired size ("Minimum capacity 2 can't be greater than desired
  size 0": terraform-provider-aws #18310, terraform-aws-eks #3306) and applies any desiredSize it
  is sent, terminating nodes above it (EKS API Reference, NodegroupScalingConfig).
"""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest
from botocore.stub import Stubber

from bootstrap.offline import mocks
from components.aws.gpu_pool import GpuNodePool, GpuNodePoolArgs
from components.aws.node_group import NodeGroupSettings
from components.core import node_updates
from components.hooks import SCALING_HOOK, HookSettings, HookWork, StackHooks, node_scaling
from tests.conftest import stack_config, stack_raw

CLUSTER = "gpucluster-dev"
NODEGROUP = "gpucluster-dev-h100-node-group-1a2b3c4"


class InvalidParameterException(Exception):
    pass


class FakeEks:
    """One node group's scaling as EKS keeps it: min <= desired <= max, or the update is refused."""

    def __init__(self, min_size: int, max_size: int, desired: int):
        self.scaling = {"minSize": min_size, "maxSize": max_size, "desiredSize": desired}
        self.sent: list[dict[str, int]] = []

    def describe_nodegroup(self, clusterName: str, nodegroupName: str) -> dict[str, Any]:
        return {"nodegroup": {"status": "ACTIVE", "scalingConfig": dict(self.scaling)}}

    def update_nodegroup_config(self, clusterName: str, nodegroupName: str, scalingConfig: dict) -> dict[str, Any]:
        self.sent.append(dict(scalingConfig))
        after = {**self.scaling, **scalingConfig}
        if after["minSize"] > after["desiredSize"]:
            raise InvalidParameterException(f"Minimum capacity {after['minSize']} can't be greater than desired "
                                            f"size {after['desiredSize']}")
        if after["desiredSize"] > after["maxSize"]:
            raise InvalidParameterException(f"Desired size {after['desiredSize']} can't be greater than maximum "
                                            f"capacity {after['maxSize']}")
        self.scaling = after
        return {"update": {"id": "u-1", "status": "Successful", "errors": []}}


class Session:
    def __init__(self, eks):
        self.eks = eks

    def client(self, service: str):
        assert service == "eks"
        return self.eks


def pool_program(cfg, work: HookWork):
    def program():
        hooks = StackHooks(HookSettings.of(cfg), work)
        for p in cfg.gpu_pools:
            GpuNodePool(f"{CLUSTER}-{p.name}", GpuNodePoolArgs(
                pool=p, node_group=NodeGroupSettings(
                    cluster_name=CLUSTER, kubernetes_version=cfg.kubernetes_version,
                    ami_release_version=cfg.versions.ami_release_version, subnet_id="subnet-0gpu",
                    node_role_arn="arn:aws:iam::000000000000:role/nodes", hooks=hooks, tags=cfg.tags,
                    paused=cfg.paused),
                vpc_id="vpc-0gpucluster", security_group_ids=["sg-0cluster"]))
    return program


def node_group(overrides: dict, work: HookWork) -> mocks.Registration:
    cfg = stack_config("dev", {"gpucluster:jobs": [], **overrides})
    rec = mocks.run_program(stack_raw("dev", {"gpucluster:jobs": [], **overrides}), "dev",
                            program=pool_program(cfg, work))
    (group,) = rec.of_type("aws:eks/nodeGroup:NodeGroup")
    return group


def reset_ignored(new: dict, old: dict, paths: list[str]) -> dict:
    """processIgnoreChanges for the dotted paths this program uses."""
    goal = copy.deepcopy(new)
    for path in paths:
        *parents, leaf = path.split(".")
        src, dst = old, goal
        for key in parents:
            src, dst = src[key], dst[key]
        dst[leaf] = src[leaf]
    return goal


def pulumi_up(old: mocks.Registration, new: mocks.Registration, work: HookWork, eks: FakeEks,
              state_desired: int) -> None:
    """The update step of the node group, as the engine and the provider run it (see the module)."""
    goal = reset_ignored(new.inputs, old.inputs, new.ignore_changes)
    if goal == old.inputs:
        return
    hooks = {SCALING_HOOK: work.apply_scaling_now}
    args = pulumi.ResourceHookArgs(urn=new.urn, id=f"{CLUSTER}:{NODEGROUP}", name=new.name, type=new.type,
                                   new_inputs=goal, old_inputs=old.inputs,
                                   old_outputs={"clusterName": CLUSTER, "nodeGroupName": NODEGROUP})
    for name in new.hooks.get("before_update", []):
        hooks[name](args)
    if goal["scalingConfig"] != old.inputs["scalingConfig"]:
        sizes = goal["scalingConfig"]
        eks.update_nodegroup_config(clusterName=CLUSTER, nodegroupName=NODEGROUP, scalingConfig={
            "minSize": int(sizes["minSize"]), "maxSize": int(sizes["maxSize"]), "desiredSize": state_desired})


def pool(**kw) -> dict:
    return {"gpucluster:gpuPools": [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4, **kw}]}


@pytest.fixture
def eks_work():
    def make(min_size: int, max_size: int, desired: int) -> tuple[FakeEks, HookWork]:
        eks = FakeEks(min_size, max_size, desired)
        settings = HookSettings(stack="dev", cluster_name=CLUSTER, region="us-east-1", profile=None, role_arn=None,
                                export_timeout_minutes=60, adopted_bucket=None)
        return eks, HookWork(settings, session=lambda: Session(eks), log=lambda _: None)
    return make


def test_raising_min_nodes_above_the_deployed_desired_size_works(eks_work):
    # Deployed from zero: EKS holds min 0, desired 0, and so does the state.
    eks, work = eks_work(0, 4, 0)
    old, new = node_group(pool(minNodes=0), work), node_group(pool(minNodes=2), work)
    pulumi_up(old, new, work, eks, state_desired=0)
    assert eks.scaling == {"minSize": 2, "maxSize": 4, "desiredSize": 2}
    # One request, and the provider's own update sends no scaling at all.
    assert eks.sent == [{"minSize": 2, "maxSize": 4, "desiredSize": 2}]


def test_pausing_keeps_the_nodes_the_autoscaler_added(eks_work):
    # min 1, created with desired 1 (the state's), the autoscaler at 3 for running jobs.
    eks, work = eks_work(1, 4, 3)
    old = node_group(pool(minNodes=1), work)
    new = node_group({**pool(minNodes=1), "gpucluster:paused": True}, work)
    pulumi_up(old, new, work, eks, state_desired=1)
    # pauseMode finish lets admitted jobs run: only the floor moves, no node is terminated.
    assert eks.scaling == {"minSize": 0, "maxSize": 4, "desiredSize": 3}
    assert eks.sent == [{"minSize": 0, "maxSize": 4}]


def test_resuming_raises_the_floor_again(eks_work):
    eks, work = eks_work(0, 4, 0)
    old = node_group({**pool(minNodes=2), "gpucluster:paused": True}, work)
    new = node_group(pool(minNodes=2), work)
    pulumi_up(old, new, work, eks, state_desired=0)
    assert eks.scaling == {"minSize": 2, "maxSize": 4, "desiredSize": 2}


def test_a_replaced_group_gets_the_pool_s_bounds_not_the_first_ones(eks_work):
    """A change that replaces the group (its instance type, say) creates the new one from the ignored
    scalingConfig as the state holds it, the first up's: paused or not, minNodes 2 then. The after-create
    hook gives the new group the pool's bounds now."""
    eks, work = eks_work(2, 4, 2)  # the replacement, as EKS created it from the state's scalingConfig
    new = node_group({**pool(minNodes=2), "gpucluster:paused": True}, work)
    assert new.hooks["after_create"] == [SCALING_HOOK]
    args = pulumi.ResourceHookArgs(urn=new.urn, id=f"{CLUSTER}:{NODEGROUP}-new", name=new.name, type=new.type,
                                   new_inputs=new.inputs, old_inputs=None, old_outputs=None,
                                   new_outputs={"clusterName": CLUSTER, "nodeGroupName": f"{NODEGROUP}-new"})
    work.apply_scaling_now(args)
    assert eks.scaling == {"minSize": 0, "maxSize": 4, "desiredSize": 2}  # the floor paused; nodes the jobs hold stay
    assert eks.sent == [{"minSize": 0, "maxSize": 4}]


def test_an_unrelated_update_sends_no_scaling(eks_work):
    eks, work = eks_work(0, 4, 3)
    old = node_group(pool(), work)
    new = node_group(pool(labels={"team": "llm"}), work)
    pulumi_up(old, new, work, eks, state_desired=0)
    assert eks.sent == [] and eks.scaling == {"minSize": 0, "maxSize": 4, "desiredSize": 3}


def test_the_node_group_carries_its_bounds_as_a_tag_and_binds_the_hook(eks_work):
    _, work = eks_work(0, 4, 0)
    group = node_group(pool(minNodes=1), work)
    assert group.inputs["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 4}  # creation only
    assert group.ignore_changes == ["scalingConfig"]
    assert group.hooks == {"before_update": [SCALING_HOOK], "after_create": [SCALING_HOOK]}
    # A rolling update of every node, one at a time, 20 minutes each, is not cut off at the provider's 60.
    assert group.custom_timeouts == {"update": "80m"}
    assert node_group(pool(maxNodes=16), work).custom_timeouts == {"update": "320m"}
    assert node_group(pool(maxNodes=2), work).custom_timeouts == {"update": "60m"}
    assert group.inputs["tags"][node_updates.SCALING_TAG] == "min=1 max=4"
    paused = node_group({**pool(minNodes=1), "gpucluster:paused": True}, work)
    assert paused.inputs["tags"][node_updates.SCALING_TAG] == "min=0 max=4"


# -- the pure parts and the API calls ------------------------------------------------------


@pytest.mark.parametrize(("live", "bounds", "sent"), [
    ((0, 4, 0), (2, 4), {"minSize": 2, "maxSize": 4, "desiredSize": 2}),  # raised into the bounds
    ((0, 4, 3), (2, 4), {"minSize": 2, "maxSize": 4}),  # already inside: the autoscaler's size stays
    ((0, 8, 6), (0, 4), {"minSize": 0, "maxSize": 4, "desiredSize": 4}),  # lowered to the new ceiling
    ((1, 4, 3), (0, 4), {"minSize": 0, "maxSize": 4}),  # pause
    ((2, 4, 3), (2, 4), None),  # nothing to do
])
def test_scaling_update(live, bounds, sent):
    current = dict(zip(("minSize", "maxSize", "desiredSize"), live))
    assert node_scaling.scaling_update(current, *bounds) == sent


def test_scaling_tag_round_trip():
    assert node_updates.parse_scaling_tag("min=0 max=450") == (0, 450)
    with pytest.raises(ValueError, match="is not 'min=<n> max=<n>'"):
        node_updates.parse_scaling_tag(None)


def eks_stub():
    import boto3

    client = boto3.client("eks", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    return client, Stubber(client)


def update(status: str, errors: list | None = None) -> dict:
    return {"update": {"id": "u-1", "status": status, "type": "ConfigUpdate", "errors": errors or []}}


def test_apply_scaling_waits_for_the_update():
    client, stub = eks_stub()
    names = {"clusterName": CLUSTER, "nodegroupName": NODEGROUP}
    stub.add_response("describe_nodegroup", {"nodegroup": {"status": "ACTIVE", "scalingConfig": {
        "minSize": 0, "maxSize": 4, "desiredSize": 0}}}, names)
    stub.add_response("update_nodegroup_config", update("InProgress"), {
        **names, "scalingConfig": {"minSize": 2, "maxSize": 4, "desiredSize": 2}})
    stub.add_response("describe_update", update("InProgress"),
                      {"name": CLUSTER, "nodegroupName": NODEGROUP, "updateId": "u-1"})
    stub.add_response("describe_update", update("Successful"),
                      {"name": CLUSTER, "nodegroupName": NODEGROUP, "updateId": "u-1"})
    logs, sleeps = [], []
    with stub:
        sent = node_scaling.apply_scaling(client, CLUSTER, NODEGROUP, 2, 4, log=logs.append, sleep=sleeps.append)
    stub.assert_no_pending_responses()
    assert sent == {"minSize": 2, "maxSize": 4, "desiredSize": 2}
    assert sleeps == [node_scaling.POLL_SECONDS] * 2
    assert logs == [f"{CLUSTER}/{NODEGROUP}: min 0 -> 2, desired 0 -> 2"]


def test_a_failed_update_fails_the_hook():
    client, stub = eks_stub()
    stub.add_response("describe_nodegroup", {"nodegroup": {"status": "ACTIVE", "scalingConfig": {
        "minSize": 0, "maxSize": 4, "desiredSize": 0}}})
    stub.add_response("update_nodegroup_config", update("Failed", [
        {"errorCode": "AsgInstanceLaunchFailures", "errorMessage": "InsufficientInstanceCapacity"}]))
    with stub, pytest.raises(node_scaling.ScalingError,
                             match="Failed \\(AsgInstanceLaunchFailures: InsufficientInstanceCapacity\\)"):
        node_scaling.apply_scaling(client, CLUSTER, NODEGROUP, 2, 4, log=lambda _: None, sleep=lambda _: None)


def test_a_lower_ceiling_says_which_nodes_go():
    eks = FakeEks(0, 8, 6)
    logs: list[str] = []
    node_scaling.apply_scaling(eks, CLUSTER, NODEGROUP, 0, 4, log=logs.append)
    assert logs[0] == (f"{CLUSTER}/{NODEGROUP}: maxNodes 4 is below the 6 nodes the group has: 2 of them are "
                       "terminated, with whatever runs on them")
    assert eks.scaling == {"minSize": 0, "maxSize": 4, "desiredSize": 4}


def test_a_group_still_updating_is_waited_for_and_a_degraded_one_refused():
    """A rolling update the provider stopped waiting for is still running: EKS would refuse a second one
    (ResourceInUseException), so the hook waits for ACTIVE first."""
    client, stub = eks_stub()
    scaling = {"minSize": 0, "maxSize": 4, "desiredSize": 0}
    stub.add_response("describe_nodegroup", {"nodegroup": {"status": "UPDATING", "scalingConfig": scaling}})
    stub.add_response("describe_nodegroup", {"nodegroup": {"status": "ACTIVE", "scalingConfig": scaling}})
    stub.add_response("update_nodegroup_config", update("Successful"))
    logs, sleeps = [], []
    with stub:
        sent = node_scaling.apply_scaling(client, CLUSTER, NODEGROUP, 1, 4, log=logs.append, sleep=sleeps.append)
    stub.assert_no_pending_responses()
    assert sent == {"minSize": 1, "maxSize": 4, "desiredSize": 1} and sleeps == [node_scaling.POLL_SECONDS]
    assert logs[0] == f"{CLUSTER}/{NODEGROUP}: waiting for the node group, UPDATING, to be ACTIVE before its new bounds"
    client, stub = eks_stub()
    stub.add_response("describe_nodegroup", {"nodegroup": {"status": "DEGRADED", "scalingConfig": scaling}})
    with stub, pytest.raises(node_scaling.ScalingError, match="is DEGRADED, and EKS updates only an ACTIVE one"):
        node_scaling.apply_scaling(client, CLUSTER, NODEGROUP, 1, 4, log=lambda _: None, sleep=lambda _: None)
