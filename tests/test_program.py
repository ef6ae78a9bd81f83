"""The whole program on the dev and prod stacks: graph, zone coherence, Kubernetes validity."""

from __future__ import annotations

import pytest

from bootstrap import mocks
from bootstrap.plan import kubernetes_objects
from components.spec import catalog
from tests.conftest import stack_config, stack_raw
from tests.k8s import validate_core, validate_custom

CRD_FILES = {"MPIJob": "kubeflow.org_mpijobs.yaml", "PyTorchJob": "kubeflow.org_pytorchjobs.yaml"}


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request):
    recording = mocks.run_program(stack_raw(request.param), request.param)
    return request.param, stack_config(request.param), recording, None


def deprecation_logs(rec: mocks.Recording) -> list[str]:
    # pulumi-aws logs "<Resource> is deprecated: ..." (and "<arg> is deprecated") on construction.
    return [m for level, m in rec.logs if level.startswith("warn") and "deprecated" in m]


def test_no_deprecated_resource_or_argument_is_used(stack):
    _, _, rec, _ = stack
    assert deprecation_logs(rec) == []
    assert rec.of_type("aws:s3/bucket:Bucket")


def test_every_kubernetes_object_is_valid(stack):
    _, cfg, rec, _ = stack
    objects = kubernetes_objects(rec)
    assert objects
    kinds = set()
    for obj in objects:
        kinds.add(obj["kind"])
        if obj["kind"] in CRD_FILES:
            validate_custom(obj, CRD_FILES[obj["kind"]])
        else:
            validate_core(obj, cfg.kubernetes_version)
    assert {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
            "Deployment"} <= kinds


def test_one_definition_per_crd(stack):
    _, _, rec, _ = stack
    names = [o["metadata"]["name"] for o in kubernetes_objects(rec) if o["kind"] == "CustomResourceDefinition"]
    assert sorted(names) == ["mpijobs.kubeflow.org", "pytorchjobs.kubeflow.org"]


def test_file_system_is_off_the_eks_critical_path(stack):
    _, _, rec, _ = stack
    (eks,) = rec.of_type("aws:eks/cluster:Cluster")
    (fs,) = rec.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert not rec.depends_on(fs, eks)
    for dra in rec.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        assert not rec.depends_on(dra, eks)
    for ng in rec.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert not rec.depends_on(ng, fs), ng.name
    (pv,) = rec.of_type("kubernetes:core/v1:PersistentVolume")
    assert rec.depends_on(pv, fs) and rec.depends_on(pv, eks)


def test_every_gpu_resource_lives_in_the_one_gpu_zone(stack):
    _, cfg, rec, _ = stack
    zone = rec.stack_outputs["gpuAvailabilityZone"]
    (gpu_subnet,) = [s for s in rec.of_type("aws:ec2/subnet:Subnet") if s.name.endswith(f"private-{zone}")]
    gpu_groups = [ng for ng in rec.of_type("aws:eks/nodeGroup:NodeGroup") if not ng.name.endswith("system-nodes")]
    assert len(gpu_groups) == len(cfg.gpu_pools)
    for ng in gpu_groups:
        assert ng.inputs["subnetIds"] == [gpu_subnet.id]
    (fs,) = rec.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["subnetIds"] == gpu_subnet.id


def test_jobs_request_exactly_their_node_types_devices(stack):
    _, cfg, rec, _ = stack
    jobs = [o for o in kubernetes_objects(rec) if o["kind"] in CRD_FILES]
    names = {o["metadata"]["name"] for o in jobs}
    assert {j.name for j in cfg.jobs} <= names
    for job in cfg.jobs:
        (obj,) = [o for o in jobs if o["metadata"]["name"] == job.name]
        pool = cfg.pool(job.pool)
        specs = obj["spec"]["mpiReplicaSpecs"] if obj["kind"] == "MPIJob" else obj["spec"]["pytorchReplicaSpecs"]
        worker = specs["Worker"]
        assert worker["replicas"] == job.nodes
        (container,) = worker["template"]["spec"]["containers"]
        limits = container["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == str(pool.instance.gpu_count)
        if pool.efa_enabled:
            assert limits["vpc.amazonaws.com/efa"] == str(pool.instance.max_efa_interfaces)
        else:
            assert "vpc.amazonaws.com/efa" not in limits


def test_prod_fabric_test_and_outputs(run_stack):
    rec = run_stack("prod")
    out = rec.stack_outputs
    assert out["expectedBusBandwidthGBps"] == {"h100": 487.0}
    assert out["gpuNodeGroups"] == {"h100": "gpucluster-prod-h100-node-group"}
    assert out["fsxClaimName"] == "fsx"
    assert out["bucketName"].startswith("gpucluster-prod-data-")
    p5 = catalog.get("p5.48xlarge")
    assert out["estimatedCostPerHourUsd"]["max"] - out["estimatedCostPerHourUsd"]["min"] == pytest.approx(
        16 * p5.price_usd_per_hour, abs=0.01)
    names = {o["metadata"]["name"] for o in kubernetes_objects(rec) if o["kind"] == "MPIJob"}
    assert names == {"gpt-pretrain", "nccl-tests-h100"}


def test_every_child_is_named_after_its_component(stack):
    _, cfg, rec, _ = stack
    components = {r.urn: r for r in rec.resources if not r.custom}
    for r in rec.resources:
        parent = components.get(r.parent)
        if parent is not None:
            assert r.name.startswith(parent.name), (r.name, parent.name)


def test_the_deprecation_check_catches_bucket_v2():
    import pulumi_aws as aws

    rec = mocks.run_program(stack_raw("dev"), "dev", program=lambda: aws.s3.BucketV2("legacy"))
    assert deprecation_logs(rec) == ["BucketV2 is deprecated: s3.BucketV2 has been deprecated in favor of s3.Bucket"]
