"""A later `pulumi up` that restarts a pool's nodes: only what must be in the launch template is, and
`bootstrap diff` names every change that makes a new template version (or a new AMI release) as
"<pool>: nodes restart: running jobs stop"."""

from __future__ import annotations

import copy
import json

import pulumi
import pytest

from bootstrap import stackfile
from bootstrap.offline import mocks, plan_diff, plan_report, replacements
from components.aws.cpu_pool import CpuNodePool, CpuNodePoolArgs
from components.aws.gpu_pool import GpuNodePool, GpuNodePoolArgs
from components.aws.node_group import NodeGroupSettings, tag_name_part
from components.core import node_updates
from components.core.stack_config import parse as parse_stack
from components.hooks import HookSettings, HookWork, StackHooks
from tests.conftest import recording as shared_recording
from tests.conftest import shared_run, stack_config, stack_raw

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
TAG = "aws:autoscaling/tag:Tag"
ODCR = "cr-00000000000000001"
GPU = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4}
CPU = {"name": "ps", "instanceType": "m7i.8xlarge", "maxNodes": 2}


def pools_program(cfg):
    def program():
        work = HookWork(HookSettings.of(cfg), session=lambda: None)
        settings = NodeGroupSettings(
            cluster_name=cfg.cluster_name, kubernetes_version=cfg.kubernetes_version,
            ami_release_version=cfg.versions.ami_release_version, subnet_id="subnet-0gpu",
            node_role_arn="arn:aws:iam::000000000000:role/nodes", hooks=StackHooks(HookSettings.of(cfg), work),
            tags=cfg.tags, paused=cfg.paused)
        for p in cfg.gpu_pools:
            GpuNodePool(f"{cfg.cluster_name}-{p.name}", GpuNodePoolArgs(
                pool=p, node_group=settings, vpc_id="vpc-0gpu", security_group_ids=["sg-0cluster", "sg-0nodes"]))
        for p in cfg.cpu_pools:
            CpuNodePool(f"{cfg.cluster_name}-{p.name}", CpuNodePoolArgs(
                pool=p, node_group=settings, security_group_ids=["sg-0cluster", "sg-0nodes"]))
    return program


def pools_plan(gpu: dict | None = None, cpu: dict | None = None, **stack) -> dict:
    """An offline plan (`plan --json` shape) of one GPU and one CPU pool."""
    overrides = {"gpucluster:gpuPools": [{**GPU, **(gpu or {})}], "gpucluster:cpuPools": [{**CPU, **(cpu or {})}],
                 "gpucluster:jobs": [], **{f"gpucluster:{k}": v for k, v in stack.items()}}
    rec = mocks.run_program(stack_raw("dev", overrides), "dev", program=pools_program(stack_config("dev", overrides)))
    plan = {"stack": "dev", "cost": {}, "resources": plan_report.resource_rows(rec)}
    return json.loads(json.dumps(plan, sort_keys=True, default=str))


@pytest.fixture(scope="module")
def base() -> dict:
    return pools_plan()


def row(plan: dict, type_: str, name: str) -> dict:
    (found,) = [r for r in plan["resources"] if r["type"] == type_ and r["name"] == name]
    return found


def version_changes(old: dict, new: dict, pool: str) -> list[str]:
    """The paths of the pool's launch template whose change makes a new template version."""
    name = f"gpucluster-dev-{pool}-launch-template"
    a, b = row(old, LT, name)["inputs"], row(new, LT, name)["inputs"]
    return [p for p, _, _ in plan_diff._changes(a, b) if replacements.restarts_nodes(LT, p)]


# Each pool key with a value that differs from the base pool's; the launch template must change for
# exactly the keys node_updates lists, so the plan's list is true by construction.
GPU_CHANGES = {
    "rootVolumeGiB": 500, "localNvmeRaid0": False, "efa": "disabled", "placementGroup": "none",
    "capacityReservationId": ODCR,
    "minNodes": 1, "maxNodes": 8, "desiredNodes": 2, "idleMinutes": 10, "labels": {"team": "llm"},
    "fabricTest": True, "capacityType": "SPOT",
}
CPU_CHANGES = {"rootVolumeGiB": 200, "minNodes": 1, "maxNodes": 4, "idleMinutes": 10, "labels": {"team": "llm"},
               "capacityType": "SPOT"}


def test_the_gpu_pool_keys_that_make_a_new_template_version_are_the_listed_ones(base):
    changing = {key for key, value in GPU_CHANGES.items() if version_changes(base, pools_plan(gpu={key: value}), "h100")}
    assert changing == set(node_updates.GPU_TEMPLATE_KEYS)


def test_the_cpu_pool_keys_that_make_a_new_template_version_are_the_listed_ones(base):
    changing = {key for key, value in CPU_CHANGES.items() if version_changes(base, pools_plan(cpu={key: value}), "ps")}
    assert changing == set(node_updates.CPU_TEMPLATE_KEYS)


def test_a_stack_tag_change_leaves_the_templates_and_reaches_new_instances_from_the_asg(base):
    tagged = pools_plan(tags={"team": "llm", "cost/center": "42"})
    assert version_changes(base, tagged, "h100") == [] and version_changes(base, tagged, "ps") == []
    for pool in ("h100", "ps"):
        spec = row(tagged, LT, f"gpucluster-dev-{pool}-launch-template")["inputs"]["tagSpecifications"]
        assert spec == [{"resourceType": kind, "tags": {"Name": f"gpucluster-dev-{pool}-node"}}
                        for kind in ("instance", "volume")]
        group = row(tagged, NG, f"gpucluster-dev-{pool}-node-group")
        tags = {r["inputs"]["tag"]["key"]: r["inputs"]["tag"] for r in tagged["resources"]
                if r["type"] == TAG and r["name"].startswith(f"gpucluster-dev-{pool}-instance-tag-")}
        assert tags == {"team": {"key": "team", "value": "llm", "propagateAtLaunch": True},
                        "cost/center": {"key": "cost/center", "value": "42", "propagateAtLaunch": True}}
        assert all(group["urn"] in r["dependencies"] for r in tagged["resources"]
                   if r["type"] == TAG and "-instance-tag-" in r["name"] and pool in r["name"])
    # A value changes in place: only tag.key replaces an ASG tag (autoscaling/group_tag.go).
    retagged = pools_plan(tags={"team": "vision", "cost/center": "42"})
    result = plan_diff.compare(tagged, retagged)
    assert result.restarts == [] and not any(c.replaced for c in result.changed)
    assert {c.row["name"] for c in result.changed if c.row["type"] == TAG} == {
        "gpucluster-dev-h100-instance-tag-team", "gpucluster-dev-ps-instance-tag-team"}


def test_tag_resource_names_are_distinct_and_stable():
    assert tag_name_part("team") == "team"
    assert tag_name_part("cost/center") != tag_name_part("cost-center") == "cost-center"
    assert tag_name_part("cost/center").startswith("cost-center-")


def test_bootstrap_diff_flags_a_root_volume_change_as_restarting_the_pools_nodes(base):
    text = plan_diff.render(plan_diff.compare(base, pools_plan(gpu={"rootVolumeGiB": 500})))
    assert ("> - h100: nodes restart: running jobs stop (node group `gpucluster-dev-h100-node-group`; because of "
            "`blockDeviceMappings[0].ebs.volumeSize` of launch template `gpucluster-dev-h100-launch-template`)") in text
    assert "ps: nodes restart" not in text


def test_bootstrap_diff_flags_a_new_ami_release_on_every_pool(base):
    result = plan_diff.compare(base, pools_plan(versions={**stack_config("dev").versions.model_dump(by_alias=True),
                                                          "amiReleaseVersion": "1.35.7-20260801"}))
    assert [(r.group, r.causes) for r in result.restarts] == [
        ("h100", ["`releaseVersion`"]), ("ps", ["`releaseVersion`"])]


def hand_plan(spec_tags: dict, template_tags: dict, labels: dict) -> dict:
    lt_urn, ng_urn = "urn:pulumi:dev::gpucluster::x$aws:ec2/launchTemplate:LaunchTemplate::lt", "urn:ng"
    lt = {"urn": lt_urn, "type": LT, "name": "lt", "dependencies": [],
          "inputs": {"tagSpecifications": [{"resourceType": "instance", "tags": spec_tags}], "tags": template_tags}}
    ng = {"urn": ng_urn, "type": NG, "name": "ng", "dependencies": [lt_urn],
          "inputs": {"labels": labels, "launchTemplate": {"id": "lt-1", "version": "1"}}}
    return {"stack": "dev", "cost": {}, "resources": [lt, ng]}


@pytest.mark.parametrize(("labels", "group"), [({"gpucluster.io/pool": "h100"}, "h100"),
                                               ({"gpucluster.io/role": "system"}, "system nodes")])
def test_bootstrap_diff_flags_a_tag_change_that_reaches_a_template(labels, group):
    old = hand_plan({"team": "a"}, {"team": "a"}, labels)
    new = copy.deepcopy(old)
    new["resources"][0]["inputs"]["tagSpecifications"][0]["tags"]["team"] = "b"
    text = plan_diff.render(plan_diff.compare(old, new))
    assert (f"> - {group}: nodes restart: running jobs stop (node group `ng`; because of "
            "`tagSpecifications[0].tags.team` of launch template `lt`)") in text
    # The template's own tags are set on it: no new version, no restart.
    only_resource_tags = copy.deepcopy(old)
    only_resource_tags["resources"][0]["inputs"]["tags"]["team"] = "b"
    assert plan_diff.compare(old, only_resource_tags).restarts == []


def test_the_plan_says_what_restarts_nodes(run_stack):
    raw = stack_raw("prod")
    report = plan_report.build_report(parse_stack(raw, stackfile.project_name(), "prod"),
                                      shared_run(raw, "prod"), [])
    assert report["laterUps"]["restartGpuPoolKeys"] == list(node_updates.GPU_TEMPLATE_KEYS)
    from bootstrap.offline.plan_text import _later_ups

    lines = _later_ups(report["laterUps"])
    assert lines[1] == "Later `pulumi up`s of the deployed stack"
    assert lines[2].startswith("  nodes restart: running jobs stop: every node of a pool is replaced")
    assert "rootVolumeGiB" in lines[2] and "versions.amiReleaseVersion" in lines[2]


def test_a_stack_tag_change_leaves_the_system_nodes_template_alone(run_stack):
    """Launchers and parameter-server chiefs run on the system nodes: a tag must not replace them either."""
    rec = run_stack("dev", {"gpucluster:tags": {"team": "llm"}})
    template = rec.named("gpucluster-dev-system-launch-template")
    assert template.inputs["tagSpecifications"] == [{"resourceType": kind, "tags": {"Name": "gpucluster-dev-system"}}
                                                    for kind in ("instance", "volume")]
    tag = rec.named("gpucluster-dev-system-instance-tag-team")
    assert tag.inputs["tag"] == {"key": "team", "value": "llm", "propagateAtLaunch": True}
    assert rec.depends_on(tag, rec.named("gpucluster-dev-system-nodes"))
    untagged = shared_recording("dev")
    assert untagged.named("gpucluster-dev-system-launch-template").inputs["tagSpecifications"] == \
        template.inputs["tagSpecifications"]


def test_instances_running_before_their_tag_existed_get_it(moto_account):
    """The system nodes, a pool's minNodes, the nodes an update replaced: launched before the tag (which waits
    for its node group), so PropagateAtLaunch misses them; the tag's hook tags them."""
    import boto3

    from components.hooks import INSTANCE_TAGS_HOOK, HookSettings, HookWork

    ec2 = boto3.client("ec2", region_name="us-east-1")
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    template = ec2.create_launch_template(LaunchTemplateName="system", LaunchTemplateData={
        "ImageId": "ami-12c6146b", "InstanceType": "m7i.large"})["LaunchTemplate"]["LaunchTemplateId"]
    autoscaling.create_auto_scaling_group(AutoScalingGroupName="eks-system-1", MinSize=2, MaxSize=2,
                                          DesiredCapacity=2, AvailabilityZones=["us-east-1a"],
                                          LaunchTemplate={"LaunchTemplateId": template})
    settings = HookSettings(stack="dev", cluster_name="gpucluster-dev", region="us-east-1", profile=None,
                            role_arn=None, export_timeout_minutes=60, adopted_bucket=None)
    logs: list[str] = []
    work = HookWork(settings, session=lambda: boto3.Session(region_name="us-east-1"), log=logs.append)
    args = pulumi.ResourceHookArgs(urn="urn:tag", id="eks-system-1,team", name="gpucluster-dev-system-instance-tag-team",
                                   type="aws:autoscaling/tag:Tag", new_inputs={
                                       "autoScalingGroupName": "eks-system-1",
                                       "tag": {"key": "team", "value": "llm", "propagateAtLaunch": True}})
    work.tag_instances_now(args)
    running = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert len(running) == 2
    assert all({"Key": "team", "Value": "llm"} in i.get("Tags", []) for i in running)
    assert logs == ["eks-system-1: tag team on 2 running instances"]
    rec = mocks.run_program(stack_raw("dev", {"gpucluster:tags": {"team": "llm"}}), "dev")
    for name in ("gpucluster-dev-system-instance-tag-team", "gpucluster-dev-dev-instance-tag-team"):
        assert rec.named(name).hooks == {"after_create": [INSTANCE_TAGS_HOOK], "after_update": [INSTANCE_TAGS_HOOK]}
