"""GPU node pools: node facts (pure) and the exact resource contract of GpuNodePool under mocks."""

from __future__ import annotations

import base64
import email
import gzip
import json
from pathlib import Path

import moto
import pytest
import yaml

from bootstrap.offline import mocks
from components.aws.gpu_pool import GpuNodePool, GpuNodePoolArgs
from components.aws.lookups import Reservation, reservation_problems
from components.aws.node_group import SCALING_PROPERTY, NodeGroupSettings
from components.core import config, versions
from components.core.config import GpuPoolConfig
from components.core.hardware import catalog
from components.core.kube import nodepool
from components.core.problems import ConfigError
from components.core.stack_config import parse as parse_stack
from components.hooks import SCALING_HOOK, HookSettings, HookWork, StackHooks
from tests.conftest import stack_config, stack_raw

GPU_ZONE = "us-east-1a"
GPU_SUBNET = "subnet-0gpuzone00000000a"
BASE_SGS = ["sg-0cluster000000000a", "sg-0nodes00000000000a"]
BLOCK_ID = "cr-0123456789abcdef0"  # a Capacity Block in the GPU zone
FAR_BLOCK_ID = "cr-0fedcba9876543210"  # a Capacity Block in another zone
ODCR_ID = "cr-00000000000000001"
NT = nodepool.NODE_TEMPLATE_PREFIX


def pool_name(instance_type: str) -> str:
    return instance_type.replace(".", "-")


def pool(instance_type: str, **kw) -> GpuPoolConfig:
    return GpuPoolConfig(name=kw.pop("name", pool_name(instance_type)), instance_type=instance_type,
                         max_nodes=kw.pop("max_nodes", 2), **kw)


# -- node facts (pure) -----------------------------------------------------------


def test_labels_of_an_efa_pool():
    p5 = pool("p5.48xlarge", name="h100", labels={"team": "llm"})
    assert nodepool.node_labels(p5) == {
        "team": "llm",
        "gpucluster.io/pool": "h100",
        "gpucluster.io/instance-type": "p5.48xlarge",
        "gpucluster.io/gpu-model": "H100",
        "k8s.amazonaws.com/accelerator": "nvidia-h100",
        "gpucluster.io/efa-count": "32",
        "vpc.amazonaws.com/efa.present": "true",
    }


def test_accelerator_label_names_the_gpu_for_the_autoscaler():
    # The AWS provider's GPULabel: a node with it but no nvidia.com/gpu yet is unready, not capacity.
    assert nodepool.ACCELERATOR_LABEL == "k8s.amazonaws.com/accelerator"
    assert nodepool.node_labels(pool("p4d.24xlarge"))[nodepool.ACCELERATOR_LABEL] == "nvidia-a100"
    assert nodepool.node_labels(pool("g6e.xlarge"))[nodepool.ACCELERATOR_LABEL] == "nvidia-l40s"


@pytest.mark.parametrize(("minutes", "duration"), [(1, "1m0s"), (3, "3m0s"), (59, "59m0s"), (60, "1h0m0s")])
def test_idle_minutes_become_a_go_duration(minutes, duration):
    assert nodepool.go_duration(minutes) == duration
    tags = nodepool.node_template_tags(pool("p5.48xlarge", idle_minutes=minutes))
    assert tags[f"{NT}/autoscaling-options/scaledownunneededtime"] == duration


def test_labels_of_a_pool_without_efa_have_no_efa_label():
    labels = nodepool.node_labels(pool("g6e.xlarge", name="dev"))
    assert labels["gpucluster.io/efa-count"] == "0"
    assert nodepool.EFA_LABEL not in labels
    assert nodepool.EFA_LABEL not in nodepool.node_labels(pool("p5.48xlarge", efa="disabled"))


def test_our_labels_win_over_the_pools_own():
    labels = nodepool.node_labels(pool("g6e.xlarge", name="dev", labels={"gpucluster.io/pool": "other"}))
    assert labels["gpucluster.io/pool"] == "dev"


def test_gpu_taint():
    assert nodepool.node_taints(pool("g6e.xlarge")) == (nodepool.Taint("nvidia.com/gpu", "true", "NoSchedule"),)
    assert nodepool.GPU_TAINT.eks_effect == "NO_SCHEDULE"


def test_autoscaler_tags_p5():
    tags = nodepool.autoscaler_tags(pool("p5.48xlarge", name="h100"), "gpucluster-prod")
    assert tags == {
        "k8s.io/cluster-autoscaler/enabled": "true",
        "k8s.io/cluster-autoscaler/gpucluster-prod": "owned",
        f"{NT}/label/gpucluster.io/pool": "h100",
        f"{NT}/label/gpucluster.io/instance-type": "p5.48xlarge",
        f"{NT}/label/gpucluster.io/gpu-model": "H100",
        f"{NT}/label/k8s.amazonaws.com/accelerator": "nvidia-h100",
        f"{NT}/label/gpucluster.io/efa-count": "32",
        f"{NT}/label/vpc.amazonaws.com/efa.present": "true",
        f"{NT}/taint/nvidia.com/gpu": "true:NoSchedule",
        f"{NT}/resources/nvidia.com/gpu": "8",
        f"{NT}/resources/vpc.amazonaws.com/efa": "32",
        f"{NT}/resources/hugepages-2Mi": "5120Mi",
        f"{NT}/autoscaling-options/scaledownunneededtime": "3m0s",
    }


def test_autoscaler_tags_p6_b300_count_efa_interfaces_not_cards():
    tags = nodepool.node_template_tags(pool("p6-b300.48xlarge"))
    assert tags[f"{NT}/resources/vpc.amazonaws.com/efa"] == "16"
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "8"


def test_autoscaler_tags_g6e_xlarge_have_no_efa_or_hugepages():
    tags = nodepool.node_template_tags(pool("g6e.xlarge", name="dev"))
    assert tags[f"{NT}/resources/nvidia.com/gpu"] == "1"
    assert f"{NT}/resources/vpc.amazonaws.com/efa" not in tags
    assert f"{NT}/resources/hugepages-2Mi" not in tags
    assert tags[f"{NT}/taint/nvidia.com/gpu"] == "true:NoSchedule"


def test_every_label_has_a_node_template_tag():
    p = pool("p4d.24xlarge", labels={"team": "vision"})
    tags = nodepool.node_template_tags(p)
    assert {k: v for k, v in tags.items() if "/label/" in k} == {
        f"{NT}/label/{k}": v for k, v in nodepool.node_labels(p).items()}


def user_data_parts(p: GpuPoolConfig) -> dict[str, str]:
    message = email.message_from_string(base64.b64decode(nodepool.user_data_base64(p)).decode())
    assert message.is_multipart()
    return {part.get_content_type(): part.get_payload() for part in message.get_payload()}


def test_user_data_of_an_efa_pool_with_nvme_sets_raid0_and_hugepages():
    parts = user_data_parts(pool("p5.48xlarge"))
    assert set(parts) == {"application/node.eks.aws", "text/x-shellscript"}
    assert yaml.safe_load(parts["application/node.eks.aws"]) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}},
    }
    script = parts["text/x-shellscript"]
    assert script.startswith("#!/bin/bash\n")
    assert "vm.nr_hugepages = 2560" in script  # 2560 x 2 MiB = 5120Mi


def test_user_data_without_raid0_or_efa():
    parts = user_data_parts(pool("p5.48xlarge", local_nvme_raid0=False))
    assert set(parts) == {"text/x-shellscript"}
    parts = user_data_parts(pool("g6e.xlarge"))
    assert set(parts) == {"application/node.eks.aws"}
    assert nodepool.user_data(pool("g6e.xlarge", local_nvme_raid0=False)) is None


def test_release_version_parameter():
    assert versions.release_version_parameter("1.35") == (
        "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/recommended/release_version")


def test_reservation_problems():
    p = pool("p5.48xlarge", name="h100", capacity_type="CAPACITY_BLOCK", capacity_reservation_id=BLOCK_ID)
    assert reservation_problems(p, GPU_ZONE, Reservation(GPU_ZONE, "p5.48xlarge", 2)) == []
    assert [str(x) for x in reservation_problems(p, GPU_ZONE, Reservation("us-east-1b", "p4d.24xlarge", 2))] == [
        f"gpucluster:gpuPools[name=h100].capacityReservationId: {BLOCK_ID} is in us-east-1b, but the GPU zone is "
        f"{GPU_ZONE}; set gpucluster:gpuAvailabilityZone to us-east-1b or use a reservation in {GPU_ZONE}",
        f"gpucluster:gpuPools[name=h100].capacityReservationId: {BLOCK_ID} reserves p4d.24xlarge, "
        "not the pool's p5.48xlarge",
    ]


# -- bad config (validated by components.config) ---------------------------------


@pytest.mark.parametrize(("pool_raw", "message"), [
    ({"instanceType": "p5.48xlarge", "capacityType": "CAPACITY_BLOCK"},
     "gpucluster:gpuPools[0].capacityReservationId: is required when capacityType is CAPACITY_BLOCK "
     "(the Capacity Block's reservation id, cr-...)"),
    ({"instanceType": "m7i.xlarge"},
     "gpucluster:gpuPools[0].instanceType: got 'm7i.xlarge'; is not a GPU instance type; allowed: "
     + ", ".join(catalog.GPU_TYPES)),
    ({"instanceType": "g6e.xlarge", "efa": "required"},
     "gpucluster:gpuPools[0].efa: got 'required', but g6e.xlarge has no EFA; use auto or disabled, "
     "or an EFA type such as p5.48xlarge"),
    ({"instanceType": "p5.48xlarge", "minNodes": 3, "maxNodes": 1},
     "gpucluster:gpuPools[0].maxNodes: got 1; must be >= minNodes (3)"),
])
def test_bad_pool_config_is_rejected_with_its_key_path(pool_raw, message):
    raw = stack_raw("dev", {"gpucluster:gpuPools": [{"name": "bad", "maxNodes": 2, **pool_raw}],
                            "gpucluster:jobs": []})
    with pytest.raises(ConfigError) as info:
        parse_stack(raw)
    assert [str(p) for p in info.value.problems] == [message]
    assert message in str(info.value)


# -- GpuNodePool under mocks ------------------------------------------------------

VARIANTS = [
    {"name": "odcr", "instanceType": "p5.48xlarge", "maxNodes": 2, "capacityReservationId": ODCR_ID},
    {"name": "no-placement", "instanceType": "p4d.24xlarge", "maxNodes": 2, "placementGroup": "none"},
    {"name": "block", "instanceType": "p5en.48xlarge", "maxNodes": 2, "capacityType": "CAPACITY_BLOCK",
     "capacityReservationId": BLOCK_ID},
    {"name": "spot", "instanceType": "g6e.48xlarge", "maxNodes": 2, "capacityType": "SPOT"},
    {"name": "efa-off", "instanceType": "p4de.24xlarge", "maxNodes": 2, "efa": "disabled"},
    {"name": "scaled", "instanceType": "p5.48xlarge", "minNodes": 1, "desiredNodes": 2, "maxNodes": 4,
     "rootVolumeGiB": 500},
]
POOLS = [{"name": pool_name(t), "instanceType": t, "maxNodes": 2} for t in catalog.GPU_TYPES] + VARIANTS


def answer_capacity_blocks(monkeypatch) -> None:
    """The mocks do not know Capacity Blocks yet: answer getCapacityBlockReservation here."""
    original = mocks.GpuClusterMocks.call
    zones = {BLOCK_ID: GPU_ZONE, FAR_BLOCK_ID: "us-east-1b"}

    def call(self, args):
        if args.token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            rid = args.args["id"]
            return {"id": rid, "availabilityZone": zones[rid], "instanceType": "p5en.48xlarge",
                    "instanceCount": 2, "reservationType": "capacity-block", "state": "scheduled"}
        return original(self, args)

    monkeypatch.setattr(mocks.GpuClusterMocks, "call", call)


def pools_program(cfg: config.StackConfig):
    def program():
        hooks = StackHooks(HookSettings.of(cfg), HookWork(HookSettings.of(cfg), session=lambda: None))
        for p in cfg.gpu_pools:
            GpuNodePool(p.name, GpuNodePoolArgs(
                pool=p, node_group=NodeGroupSettings(
                    cluster_name=cfg.cluster_name, kubernetes_version=cfg.kubernetes_version,
                    ami_release_version=cfg.versions.ami_release_version, subnet_id=GPU_SUBNET,
                    node_role_arn="arn:aws:iam::000000000000:role/nodes", hooks=hooks, tags=cfg.tags,
                    paused=cfg.paused),
                vpc_id="vpc-0gpucluster0000000", security_group_ids=list(BASE_SGS)))
    return program


def run_pools(pools: list[dict], monkeypatch) -> tuple[config.StackConfig, mocks.Recording]:
    overrides = {"gpucluster:gpuPools": pools, "gpucluster:jobs": []}
    cfg = stack_config("dev", overrides)
    answer_capacity_blocks(monkeypatch)
    return cfg, mocks.run_program(stack_raw("dev", overrides), "dev", program=pools_program(cfg))


@pytest.fixture(scope="module")
def pools():
    with pytest.MonkeyPatch.context() as monkeypatch:
        cfg, recording = run_pools(POOLS, monkeypatch)
    return {p.name: p for p in cfg.gpu_pools}, recording


@pytest.fixture(scope="module")
def aws_types() -> dict:
    with gzip.open(Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz") as f:
        return json.load(f)


def resource(recording, name: str, role: str) -> mocks.Registration:
    return recording.named(f"{name}-{role}")


def efa_sg_id(recording, name: str) -> str:
    return resource(recording, name, "efa-sg").id


def asg_tags(recording, name: str) -> dict[str, str]:
    node_group = resource(recording, name, "node-group")
    asg = node_group.outputs["resources"][0]["autoscalingGroups"][0]["name"]
    tags = [r for r in recording.of_type("aws:autoscaling/tag:Tag") if r.name.startswith(f"{name}-asg-tag-")]
    assert all(t.inputs["autoscalingGroupName"] == asg for t in tags)
    assert all(t.inputs["tag"]["propagateAtLaunch"] is False for t in tags)
    return {t.inputs["tag"]["key"]: t.inputs["tag"]["value"] for t in tags}


@pytest.mark.parametrize("instance_type", catalog.GPU_TYPES)
def test_launch_template_interfaces_match_aws_data(pools, aws_types, instance_type):
    by_name, recording = pools
    name = pool_name(instance_type)
    interfaces = resource(recording, name, "launch-template").inputs["networkInterfaces"]
    network = aws_types[instance_type]["NetworkInfo"]
    cards = {c["NetworkCardIndex"]: c for c in network["NetworkCards"]}
    assert interfaces[0]["networkCardIndex"] == 0 and interfaces[0]["deviceIndex"] == 0
    assert "interfaceType" not in interfaces[0]  # the ENA primary
    for nic in interfaces:
        card = cards[int(nic["networkCardIndex"])]
        assert nic.get("interfaceType", "interface") in card["InterfaceTypes"]
        assert nic["deviceIndex"] < card["MaximumNetworkInterfaces"]
        assert "subnetId" not in nic  # the node group places interfaces
        assert nic["deleteOnTermination"] == "true"
    efa_nics = [nic for nic in interfaces if nic.get("interfaceType") in ("efa", "efa-only")]
    assert len(efa_nics) == network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)
    if by_name[name].efa_enabled:
        # Every interface, ENA primary included, in the EFA SG and the others.
        assert all(nic["securityGroups"] == [*BASE_SGS, efa_sg_id(recording, name)] for nic in interfaces)
    else:
        assert len(interfaces) == 1
        assert interfaces[0]["securityGroups"] == BASE_SGS


@pytest.mark.parametrize("instance_type", ["g6e.xlarge", "g6.xlarge", "g5.xlarge"])
def test_pool_without_efa_has_no_efa_sg_and_no_placement_group(pools, instance_type):
    _, recording = pools
    name = pool_name(instance_type)
    names = {r.name for r in recording.resources}
    assert f"{name}-efa-sg" not in names
    assert f"{name}-placement" not in names
    assert "placement" not in resource(recording, name, "launch-template").inputs
    outputs = recording.named(name).component_outputs
    assert outputs["efaInterfaces"] == 0
    assert outputs.get("efaSecurityGroupId") is None and outputs.get("placementGroupName") is None


def test_efa_security_group_allows_all_traffic_to_and_from_itself(pools):
    _, recording = pools
    sg = resource(recording, "p5-48xlarge", "efa-sg")
    assert sg.inputs["vpcId"] == "vpc-0gpucluster0000000"
    assert "ingress" not in sg.inputs and "egress" not in sg.inputs
    for role in ("efa-ingress", "efa-egress"):
        rule = resource(recording, "p5-48xlarge", role)
        assert rule.inputs["securityGroupId"] == sg.id
        assert rule.inputs["referencedSecurityGroupId"] == sg.id
        assert rule.inputs["ipProtocol"] == "-1"
        assert rule.parent == recording.named("p5-48xlarge").urn


@pytest.mark.parametrize(("name", "has_group"), [
    ("p5-48xlarge", True),  # auto, no reservation
    ("odcr", False),  # auto with a reservation: a placement group would fail the launch
    ("block", False),  # Capacity Block, auto
    ("no-placement", False),
    ("efa-off", False),
    ("g6e-xlarge", False),
])
def test_placement_group_presence(pools, name, has_group):
    _, recording = pools
    template = resource(recording, name, "launch-template").inputs
    names = {r.name for r in recording.resources}
    assert (f"{name}-placement" in names) is has_group
    if has_group:
        group = resource(recording, name, "placement")
        assert group.inputs["strategy"] == "cluster"
        assert template["placement"] == {"groupName": group.id}
        assert recording.named(name).component_outputs["placementGroupName"] == group.id
    else:
        assert "placement" not in template


def test_every_pool_lives_in_the_gpu_zone_subnet(pools):
    by_name, recording = pools
    for name in by_name:
        assert resource(recording, name, "node-group").inputs["subnetIds"] == [GPU_SUBNET]


def test_node_group_contract(pools):
    by_name, recording = pools
    for name, p in by_name.items():
        ng = resource(recording, name, "node-group")
        i = ng.inputs
        assert i["amiType"] == "AL2023_x86_64_NVIDIA"
        if p.capacity_type == "CAPACITY_BLOCK":
            # The type is on the launch template only (EKS User Guide, capacity-blocks-mng).
            assert "instanceTypes" not in i
            assert resource(recording, name, "launch-template").inputs["instanceType"] == p.instance_type
        else:
            assert i["instanceTypes"] == [p.instance_type]
            assert "instanceType" not in resource(recording, name, "launch-template").inputs
        assert i["version"] == "1.35"
        assert i["releaseVersion"] == "1.35.6-20260714"  # the stack's pin, never a lookup
        assert i["clusterName"] == "gpucluster-dev"
        assert i["labels"] == nodepool.node_labels(p)
        assert i["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
        assert i["updateConfig"] == {"maxUnavailable": 1}
        assert i["nodeRepairConfig"] == {"enabled": True}
        assert "diskSize" not in i  # the launch template sizes the disk
        template = resource(recording, name, "launch-template")
        assert i["launchTemplate"] == {"id": template.id, "version": "1"}
        # The provider never sends scalingConfig after creation; the hook sets the bounds before any update.
        assert ng.ignore_changes == [SCALING_PROPERTY] == ["scalingConfig"]
        assert ng.hooks == {"before_update": [SCALING_HOOK], "after_create": [SCALING_HOOK]}
        assert ng.parent == recording.named(name).urn


def test_scaling_config(pools):
    _, recording = pools
    assert resource(recording, "scaled", "node-group").inputs["scalingConfig"] == {
        "minSize": 1, "desiredSize": 2, "maxSize": 4}
    assert resource(recording, "g6e-xlarge", "node-group").inputs["scalingConfig"] == {
        "minSize": 0, "desiredSize": 0, "maxSize": 2}


def test_launch_template_node_settings(pools):
    _, recording = pools
    t = resource(recording, "scaled", "launch-template").inputs
    assert "imageId" not in t  # the node group's ami_type picks the AMI
    assert "vpcSecurityGroupIds" not in t
    assert t["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                    "httpPutResponseHopLimit": 1}
    assert t["blockDeviceMappings"] == [{"deviceName": "/dev/xvda", "ebs": {
        "volumeSize": 500, "volumeType": "gp3", "encrypted": "true", "iops": 6000, "throughput": 500,
        "deleteOnTermination": "true"}}]
    assert base64.b64decode(t["userData"]).decode() == nodepool.user_data(
        pool("p5.48xlarge", name="scaled", min_nodes=1, desired_nodes=2, max_nodes=4, root_volume_gib=500))
    assert [s["resourceType"] for s in t["tagSpecifications"]] == ["instance", "volume"]


@pytest.mark.parametrize(("name", "capacity_type", "market", "target"), [
    ("p5-48xlarge", "ON_DEMAND", None, None),
    ("odcr", "ON_DEMAND", None, ODCR_ID),
    ("block", "CAPACITY_BLOCK", "capacity-block", BLOCK_ID),
    ("spot", "SPOT", None, None),
])
def test_capacity_types(pools, name, capacity_type, market, target):
    _, recording = pools
    assert resource(recording, name, "node-group").inputs["capacityType"] == capacity_type
    template = resource(recording, name, "launch-template").inputs
    assert template.get("instanceMarketOptions") == ({"marketType": market} if market else None)
    assert template.get("capacityReservationSpecification") == (
        {"capacityReservationTarget": {"capacityReservationId": target}} if target else None)


@pytest.mark.parametrize(("name", "gpus", "efa"), [
    ("p5-48xlarge", "8", "32"),
    ("p6-b300-48xlarge", "8", "16"),
    ("g5-48xlarge", "8", "1"),
    ("g6e-xlarge", "1", None),
    ("efa-off", "8", None),
])
def test_autoscaler_tags_on_node_group_and_asg(pools, name, gpus, efa):
    by_name, recording = pools
    ng_tags = resource(recording, name, "node-group").inputs["tags"]
    assert ng_tags["k8s.io/cluster-autoscaler/enabled"] == "true"
    assert ng_tags["k8s.io/cluster-autoscaler/gpucluster-dev"] == "owned"
    on_asg = asg_tags(recording, name)
    # The ASG gets every node-template tag; EKS tags it for discovery itself.
    assert on_asg == nodepool.node_template_tags(by_name[name])
    assert on_asg.items() <= ng_tags.items()
    assert on_asg[f"{NT}/resources/nvidia.com/gpu"] == gpus
    assert on_asg.get(f"{NT}/resources/vpc.amazonaws.com/efa") == efa
    assert on_asg[f"{NT}/taint/nvidia.com/gpu"] == "true:NoSchedule"


def test_component_outputs_and_attributes(pools):
    _, recording = pools
    component = recording.named("p5-48xlarge")
    assert component.type == "gpucluster:index:GpuNodePool"
    out = component.component_outputs
    node_group = resource(recording, "p5-48xlarge", "node-group")
    assert out["nodeGroupName"] == node_group.outputs["nodeGroupName"]
    assert out["asgName"] == node_group.outputs["resources"][0]["autoscalingGroups"][0]["name"]
    assert out["efaSecurityGroupId"] == efa_sg_id(recording, "p5-48xlarge")
    assert out["efaInterfaces"] == 32 and out["gpusPerNode"] == 8
    children = [r for r in recording.resources if r.name.startswith("p5-48xlarge-")]
    assert children and all(r.parent == component.urn for r in children)


def test_capacity_block_in_another_zone_is_a_problem(monkeypatch):
    from components.aws.lookups import lookup_capacity_blocks

    answer_capacity_blocks(monkeypatch)
    far = [{"name": "far", "instanceType": "p5en.48xlarge", "maxNodes": 2, "capacityType": "CAPACITY_BLOCK",
            "capacityReservationId": FAR_BLOCK_ID}]
    cfg = stack_config("dev", {"gpucluster:gpuPools": far, "gpucluster:jobs": []})
    blocks = {}
    mocks.run_program(stack_raw("dev"), "dev", program=lambda: blocks.update(lookup_capacity_blocks(cfg)))
    assert blocks == {"far": Reservation("us-east-1b", "p5en.48xlarge", 2)}
    found = reservation_problems(cfg.gpu_pools[0], GPU_ZONE, blocks["far"])
    assert [p.path for p in found] == ["gpucluster:gpuPools[name=far].capacityReservationId"]
    assert f"{FAR_BLOCK_ID} is in us-east-1b, but the GPU zone is {GPU_ZONE}" in found[0].message


def test_capacity_block_in_another_zone_fails_the_program_before_registering(monkeypatch):
    answer_capacity_blocks(monkeypatch)
    far = [{"name": "far", "instanceType": "p5en.48xlarge", "maxNodes": 2, "capacityType": "CAPACITY_BLOCK",
            "capacityReservationId": FAR_BLOCK_ID}]
    raw = stack_raw("dev", {"gpucluster:gpuPools": far, "gpucluster:jobs": [],
                            "gpucluster:gpuAvailabilityZone": GPU_ZONE})
    with pytest.raises(Exception) as info:
        mocks.run_program(raw, "dev")
    assert type(info.value).__name__ == "RunError"
    assert f"{FAR_BLOCK_ID} is in us-east-1b, but the GPU zone is {GPU_ZONE}" in str(info.value)
    assert info.value.recording.resources == []


def test_dev_stack_pool_builds(run_mocked):
    cfg = stack_config("dev")
    recording = run_mocked(pools_program(cfg), "dev")
    (dev,) = cfg.gpu_pools
    assert dev.instance_type == "g6e.xlarge"
    assert len(recording.of_type("aws:eks/nodeGroup:NodeGroup")) == 1
    assert not recording.of_type("aws:ec2/placementGroup:PlacementGroup")
    assert not recording.of_type("aws:ec2/securityGroup:SecurityGroup")
