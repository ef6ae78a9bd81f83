"""CPU pools' types and Spot extraInstanceTypes launch in the GPU zone: checked against its offerings (issue 27, item 5).

The pure check, the program's look-up on AWS's offerings as moto ships them
(us-east-1e, use1-az3, offers p5.48xlarge but none of the CPU-pool types), and
what a CPU pool of the new families costs and is accepted as.
"""

from __future__ import annotations

import pytest

from components.core.hardware import catalog, offerings
from components.core.hardware.zones import Zone
from tests.conftest import stack_config, stack_raw

ZONES = [Zone("us-east-1a", "use1-az6"), Zone("us-east-1b", "use1-az1"), Zone("us-east-1c", "use1-az2"),
         Zone("us-east-1d", "use1-az4"), Zone("us-east-1e", "use1-az3")]
ALL = {z.name for z in ZONES}
NOT_E = ALL - {"us-east-1e"}


class Pool:
    def __init__(self, instance_type: str, *extra: str):
        self.instance_type, self.extra_instance_types = instance_type, extra


def plan(offered, gpu_types, requested, gpu_pools=(), cpu_pools=()):
    return offerings.plan_zones(ZONES, offered, gpu_types, requested, 2,
                                offerings.zone_bound_types(list(gpu_pools), list(cpu_pools)))


def test_every_type_besides_the_gpu_pools_own_is_bound_to_the_zone_by_its_key_path():
    gpu = [Pool("p5.48xlarge"), Pool("p4d.24xlarge", "p4de.24xlarge")]
    cpu = [Pool("c7i.8xlarge", "m7i.8xlarge", "r7i.8xlarge")]
    assert offerings.gpu_pool_types(gpu) == ["p4d.24xlarge", "p5.48xlarge"]
    assert offerings.zone_bound_types(gpu, cpu) == [
        ("gpucluster:gpuPools[1].extraInstanceTypes[0]", "p4de.24xlarge"),
        ("gpucluster:cpuPools[0].instanceType", "c7i.8xlarge"),
        ("gpucluster:cpuPools[0].extraInstanceTypes[0]", "m7i.8xlarge"),
        ("gpucluster:cpuPools[0].extraInstanceTypes[1]", "r7i.8xlarge"),
    ]


def test_a_cpu_type_the_requested_gpu_zone_does_not_offer_is_reported_with_its_key_path():
    zone_plan, problems = plan({"p5.48xlarge": ALL, "c7i.8xlarge": NOT_E}, ["p5.48xlarge"], "use1-az3",
                               gpu_pools=[Pool("p5.48xlarge")], cpu_pools=[Pool("c7i.8xlarge")])
    assert zone_plan is not None and zone_plan.gpu_zone == "us-east-1e"
    assert [str(p) for p in problems] == [
        "gpucluster:cpuPools[0].instanceType: got 'c7i.8xlarge', which the GPU zone us-east-1e (use1-az3) does not "
        "offer (every pool launches in the GPU zone); zones offering it: us-east-1a (use1-az6), us-east-1b (use1-az1), "
        "us-east-1c (use1-az2), us-east-1d (use1-az4); set gpucluster:gpuAvailabilityZone to a zone offering every "
        "pool's type (us-east-1a (use1-az6), us-east-1b (use1-az1), us-east-1c (use1-az2), us-east-1d (use1-az4); on "
        "a deployed stack that replaces the GPU pools and the file system), or pick a type us-east-1e offers"]


def test_a_spot_fallback_type_is_checked_and_never_moves_the_zone():
    # The GPU zone is the first offering p4d (us-east-1a); p4de only in b: reported, the zone stays.
    offered = {"p4d.24xlarge": ALL, "p4de.24xlarge": {"us-east-1b"}}
    zone_plan, problems = plan(offered, ["p4d.24xlarge"], None, gpu_pools=[Pool("p4d.24xlarge", "p4de.24xlarge")])
    assert zone_plan.gpu_zone == "us-east-1a"
    (problem,) = problems
    assert problem.path == "gpucluster:gpuPools[0].extraInstanceTypes[0]"
    assert problem.message.startswith("got 'p4de.24xlarge', which the GPU zone us-east-1a (use1-az6) does not offer")
    assert "set gpucluster:gpuAvailabilityZone to a zone offering every pool's type (us-east-1b (use1-az1);" in (
        problem.message)


def test_zone_and_pool_type_problems_are_reported_together():
    offered = {"p5en.48xlarge": {"us-east-1a"}, "m7i.4xlarge": {"us-east-1b"}}
    zone_plan, problems = plan(offered, ["p5en.48xlarge"], "us-east-1c",
                               gpu_pools=[Pool("p5en.48xlarge")], cpu_pools=[Pool("m7i.4xlarge")])
    assert zone_plan is None
    assert [p.path for p in problems] == ["gpucluster:gpuAvailabilityZone", "gpucluster:cpuPools[0].instanceType"]
    assert problems[1].message.endswith("no zone offers every pool's type: pick a type us-east-1c offers")


def test_types_every_zone_offers_pass():
    assert plan({"p5.48xlarge": ALL, "c7i.8xlarge": ALL}, ["p5.48xlarge"], None,
                gpu_pools=[Pool("p5.48xlarge")], cpu_pools=[Pool("c7i.8xlarge")])[1] == []


# -- the program, on AWS's offerings as moto ships them -------------------------------------------------

CPU_POOL = {"name": "ps", "instanceType": "c7i.8xlarge", "maxNodes": 2}
P5 = {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2}


def test_the_program_stops_on_a_cpu_pool_type_the_gpu_zone_does_not_offer():
    from bootstrap.offline import mocks

    raw = stack_raw("dev", {"gpucluster:gpuAvailabilityZone": "use1-az3", "gpucluster:gpuPools": [P5],
                            "gpucluster:cpuPools": [CPU_POOL], "gpucluster:jobs": []})
    with pytest.raises(Exception) as info:
        mocks.run_program(raw, "dev")
    assert ("gpucluster:cpuPools[0].instanceType: got 'c7i.8xlarge', which the GPU zone us-east-1e (use1-az3) "
            "does not offer (every pool launches in the GPU zone); zones offering it: us-east-1a (use1-az6), "
            "us-east-1b (use1-az1), us-east-1c (use1-az2), us-east-1d (use1-az4), us-east-1f (use1-az5)") in str(
        info.value)
    assert info.value.recording.resources == []


def test_a_destroy_is_not_stopped_by_a_type_the_zone_no_longer_offers(run_stack, monkeypatch):
    from components.aws.lookups import DESTROYING_ENV

    monkeypatch.setenv(DESTROYING_ENV, "1")
    rec = run_stack("dev", {"gpucluster:gpuAvailabilityZone": "use1-az3", "gpucluster:gpuPools": [P5],
                            "gpucluster:cpuPools": [CPU_POOL], "gpucluster:jobs": []})
    assert rec.stack_outputs["gpuAvailabilityZone"] == "us-east-1e"


def test_a_c7i_8xlarge_cpu_pool_is_accepted_and_launches_in_the_gpu_zone(run_stack):
    cfg = stack_config("dev", {"gpucluster:cpuPools": [CPU_POOL]})
    assert cfg.cpu_pool("ps").instance.vcpus == 32
    rec = run_stack("dev", {"gpucluster:cpuPools": [CPU_POOL]})
    (group,) = [r for r in rec.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("ps-node-group")]
    assert group.inputs["instanceTypes"] == ["c7i.8xlarge"]
    assert rec.stack_outputs["cpuNodeGroups"].keys() == {"ps"}


# -- the CPU-pool families: DescribeInstanceTypes facts (test_catalog.py) and the cited prices ------------

# us-east-1 Linux on-demand USD/hour, AWS Price List API as of 2026-07-20, as copied in
# aws/karpenter-provider-aws pkg/providers/pricing/zz_generated.pricing_aws.go (commit 6fc13b5).
CITED = {
    "c7i": (0.357, 0.714, 1.428, 2.142, 2.856, 4.284),
    "c6i": (0.34, 0.68, 1.36, 2.04, 2.72, 4.08),
    "m6i": (0.384, 0.768, 1.536, 2.304, 3.072, 4.608),
    "r6i": (0.504, 1.008, 2.016, 3.024, 4.032, 6.048),
    "m7a": (0.46368, 0.92736, 1.85472, 2.78208, 3.70944, 5.56416),
    "c7a": (0.41056, 0.82112, 1.64224, 2.46336, 3.28448, 4.92672),
}
SIZES = ("2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")


@pytest.mark.parametrize("family", list(CITED))
def test_cpu_pool_families_carry_the_cited_us_east_1_prices(family):
    for size, price in zip(SIZES, CITED[family], strict=True):
        t = catalog.get(f"{family}.{size}")
        assert (t.price_usd_per_hour, t.price_region, t.price_source) == (price, "us-east-1", catalog.PRICE_SOURCE_CPU)
        assert f"{family}.{size}" in catalog.CPU_TYPES and not t.is_gpu and not t.efa_supported


def test_a_cpu_type_outside_the_catalog_names_every_family():
    from tests.test_config import problems

    (found,) = problems({"gpucluster:cpuPools": [{**CPU_POOL, "instanceType": "c7i.9xlarge"}]})
    assert found.startswith("gpucluster:cpuPools[0].instanceType: got 'c7i.9xlarge'; allowed CPU types: m7i (large, "
                            "xlarge, 2xlarge, 4xlarge, 8xlarge, 16xlarge), r7i (2xlarge, 4xlarge, 8xlarge, 16xlarge), "
                            "c7i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), c6i (")
