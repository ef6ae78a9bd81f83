"""gpuPools[].atomicScaleUp / topology and jobs[].placement: defaults, resolution and the rules (issue 30)."""

from __future__ import annotations

import pytest

from components.core.config import ConfigError
from components.core.hardware import topology as hw
from components.core.placement import topology
from components.core.stack_config import parse as parse_stack
from tests.conftest import stack_config, stack_raw

P5 = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 16}
G5 = {"name": "a10", "instanceType": "g5.48xlarge", "maxNodes": 4}
P6 = {"name": "b200", "instanceType": "p6-b200.48xlarge", "maxNodes": 8}


def job(nodes: int = 4, pool: str = "h100", **extra) -> dict:
    return {"name": "t", "pool": pool, "nodes": nodes, "launcher": "mpirun", "image": "repo/train:1.0",
            "command": ["python", "train.py"], **extra}


def parsed(pools: list[dict], jobs: list[dict]):
    return stack_config("dev", {"gpucluster:gpuPools": pools, "gpucluster:jobs": jobs})


def problems(pools: list[dict], jobs: list[dict], stack: str = "dev") -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw(stack, {"gpucluster:gpuPools": pools, "gpucluster:jobs": jobs}), "gpucluster", stack)
    return [str(p) for p in info.value.problems]


def test_pools_default_to_atomic_scale_up_and_the_eks_topology():
    pool = parsed([P5], [job()]).gpu_pools[0]
    assert pool.atomic_scale_up is True and pool.topology == "auto"
    assert topology.pool_layers(pool) == 3 and topology.pool_topology(pool) == "gpucluster-network-3"


@pytest.mark.parametrize(("instance_type", "layers"), [
    ("p5.48xlarge", 3), ("p5en.48xlarge", 3), ("p4d.24xlarge", 3), ("g6e.xlarge", 3),
    ("p6-b200.48xlarge", 4), ("g5.48xlarge", 0), ("g6.xlarge", 0), ("m7i.large", 0)])
def test_the_types_eks_labels_and_their_layers(instance_type, layers):
    assert hw.network_layers(instance_type) == layers


def test_a_topology_lists_the_layers_broadest_first_then_the_node():
    assert topology.topology(4) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "gpucluster-network-4"},
        "spec": {"levels": [{"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
                            {"nodeLabel": "topology.k8s.aws/network-node-layer-2"},
                            {"nodeLabel": "topology.k8s.aws/network-node-layer-3"},
                            {"nodeLabel": "topology.k8s.aws/network-node-layer-4"},
                            {"nodeLabel": "kubernetes.io/hostname"}]}}


def test_one_topology_per_layer_count_and_none_for_unlabelled_or_off_pools():
    cfg = parsed([P5, {**P5, "name": "h100b"}, P6, G5, {**P5, "name": "off", "topology": "off"}], [job()])
    assert [t["metadata"]["name"] for t in topology.topologies(cfg.gpu_pools)] == \
        ["gpucluster-network-3", "gpucluster-network-4"]
    off = cfg.pool("off")
    assert topology.pool_topology(off) is None and topology.pool_topology(cfg.pool("a10")) is None


@pytest.mark.parametrize(("nodes", "placement", "expected"), [
    (4, None, {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}),
    (1, None, None),
    (1, {"policy": "required"}, {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}),
    (4, {"policy": "required", "layer": 2},
     {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-2"}),
    (4, {"layer": 1}, {"kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-1"}),
    (4, {"policy": "none"}, None),
])
def test_a_jobs_placement_defaults_to_preferred_at_the_closest_layer_for_several_nodes(nodes, placement, expected):
    extra = {"placement": placement} if placement is not None else {}
    cfg = parsed([P5], [job(nodes, **extra)])
    resolved = topology.job_placement(cfg.jobs[0], cfg.gpu_pools[0])
    assert (resolved.annotation if resolved else None) == expected


def test_the_closest_layer_of_a_four_layer_type_is_4_and_a_pool_without_topology_places_nothing():
    cfg = parsed([P6, G5], [job(pool="b200"), {**job(pool="a10"), "name": "u"}])
    assert topology.job_placement(cfg.jobs[0], cfg.pool("b200")) == topology.Placement("preferred", 4)
    assert topology.job_placement(cfg.jobs[1], cfg.pool("a10")) is None
    assert topology.fabric_test_placement(cfg.pool("b200")) == topology.Placement("preferred", 4)
    assert topology.fabric_test_placement(cfg.pool("a10")) is None


def test_every_placement_a_pool_cannot_honour_at_once():
    assert problems([P5, G5], [
        job(placement={"policy": "required"}, pool="a10"),
        {**job(placement={"layer": 4}), "name": "u"},
        {**job(placement={"layer": 3}, pool="a10"), "name": "v"},
    ], stack="prod") == [
        "gpucluster:jobs[0].placement: asks for required placement, but the pool has no network topology: EKS "
        "labels no network layers on g5.48xlarge (types: g6e, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300); use "
        "policy none (pool 'a10')",
        "gpucluster:jobs[1].placement.layer: got 4; p5.48xlarge nodes have 3 network layers (1 to 3) (pool 'h100')",
        "gpucluster:jobs[2].placement: asks for preferred placement, but the pool has no network topology: EKS "
        "labels no network layers on g5.48xlarge (types: g6e, p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300); use "
        "policy none (pool 'a10')",
    ]


def test_a_pool_with_its_topology_off_places_nothing():
    assert problems([{**P5, "topology": "off"}], [job(placement={"policy": "preferred"})]) == [
        "gpucluster:jobs[0].placement: asks for preferred placement, but the pool has no network topology: its "
        "`topology` is off; use policy none (pool 'h100')"]
    cfg = parsed([{**P5, "topology": "off"}], [job(placement={"policy": "none"})])
    assert topology.job_placement(cfg.jobs[0], cfg.gpu_pools[0]) is None


def test_a_bad_placement_of_its_own_is_refused_with_what_is_allowed():
    assert problems([P5], [job(placement={"policy": "none", "layer": 2}),
                           {**job(placement={"policy": "nearby", "layer": 0}), "name": "u"}]) == [
        "gpucluster:jobs[0].placement.layer: got 2 with policy 'none': a layer applies to policy preferred or "
        "required",
        "gpucluster:jobs[1].placement.policy: got 'nearby'; allowed: preferred, required, none",
        "gpucluster:jobs[1].placement.layer: got 0; must be an integer from 1 to 4",
    ]


def test_bad_pool_switches_are_refused_with_what_is_allowed():
    found = problems([{**P5, "atomicScaleUp": "maybe", "topology": "on"}], [job()])
    assert any("gpuPools[0].atomicScaleUp" in p for p in found)
    assert "gpucluster:gpuPools[0].topology: got 'on'; allowed: auto, off" in found


def test_a_pool_that_scales_with_a_topology_must_admit_atomically_but_a_fixed_one_need_not():
    assert problems([{**P5, "atomicScaleUp": False}], [job()]) == [
        "gpucluster:gpuPools[0].atomicScaleUp: is false on a pool that scales (minNodes < maxNodes) with a network "
        "topology: Kueue places jobs by topology only onto nodes that exist and waits for new ones only behind "
        "atomic admission, so no job would start from zero; set `topology: off` as well, or keep atomicScaleUp"]
    cfg = parsed([{**P5, "atomicScaleUp": False, "topology": "off"},
                  {**P5, "name": "fixed", "atomicScaleUp": False, "minNodes": 4, "maxNodes": 4}], [job()])
    assert topology.pool_topology(cfg.pool("h100")) is None
    assert topology.pool_topology(cfg.pool("fixed")) == "gpucluster-network-3"
    # A type EKS does not label has no topology to lose.
    assert parsed([{**G5, "atomicScaleUp": False}], [job(pool="a10")]).gpu_pools[0].atomic_scale_up is False


def region_problems(region: str, pools: list[dict]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw("dev", {"aws:region": region, "gpucluster:gpuAvailabilityZone": None,
                                      "gpucluster:gpuPools": pools, "gpucluster:jobs": []}), "gpucluster", "dev")
    return [str(p) for p in info.value.problems if ".topology" in str(p)]  # the others: ARNs of the partition


@pytest.mark.parametrize("region", ["eu-south-1", "cn-north-1", "us-gov-east-1", "ap-southeast-5"])
def test_a_topology_in_a_region_ec2_describes_none_of_is_refused(region):
    assert region_problems(region, [P5, {**G5, "name": "g5"}, {**P6, "topology": "off"}]) == [
        f"gpucluster:gpuPools[0].topology: got 'auto' for p5.48xlarge in {region}, where EC2 describes no instance "
        "topology (EC2 User Guide, 'Prerequisites for Amazon EC2 topology', AWS Regions), so EKS labels no node with "
        "a network layer and a Kueue topology would match none; set `topology: off`"]


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-northeast-1", "us-gov-west-1", "il-central-1"])
def test_the_regions_ec2_describes_topology_in_keep_it(region):
    assert hw.region_problem(region, "p5.48xlarge", "auto") is None
    assert hw.region_problem("eu-south-1", "p5.48xlarge", "off") is None
    assert hw.region_problem("eu-south-1", "g5.48xlarge", "auto") is None
    assert len(hw.TOPOLOGY_REGIONS) == 29
