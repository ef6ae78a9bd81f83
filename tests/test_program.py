"""The whole program on the dev and prod stacks: graph, zone coherence, Kubernetes validity."""

from __future__ import annotations

import pytest

from bootstrap.offline import mocks
from bootstrap.offline.plan_report import kubernetes_objects
from components.core.hardware import catalog
from tests.conftest import prod_started, stack_config, stack_raw
from tests.conftest import recording as shared_recording
from tests.k8s import validate_all

CRD_FILES = {
    "MPIJob": "kubeflow.org_mpijobs.yaml",
    "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
    "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml",
    "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml",
    "LocalQueue": "kueue.x-k8s.io_localqueues.yaml",
    "WorkloadPriorityClass": "kueue.x-k8s.io_workloadpriorityclasses.yaml",
    "Topology": "kueue.x-k8s.io_topologies.yaml",
    "AdmissionCheck": "kueue.x-k8s.io_admissionchecks.yaml",
    "ProvisioningRequestConfig": "kueue.x-k8s.io_provisioningrequestconfigs.yaml",
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml",
}


@pytest.fixture(scope="module", params=["dev", "prod"])
def stack(request):
    # prod's example jobs as if they started with `pulumi up` (shipped opt-in): what jobs become is tested here.
    recording = shared_recording(request.param, prod_started() if request.param == "prod" else None)
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
    kinds = validate_all(objects, cfg.kubernetes_version, CRD_FILES)
    assert {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition",
            "Deployment", "TrainJob", "ClusterTrainingRuntime", "ClusterQueue", "LocalQueue", "ResourceFlavor",
            "WorkloadPriorityClass", "Topology", "AdmissionCheck", "ProvisioningRequestConfig"} <= kinds


def test_one_definition_per_crd_and_one_for_every_kind_emitted(stack):
    from components.core.kube.queueing import CHART_CRDS as KUEUE_CHART_CRDS
    from components.core.observability.prometheus_stack import CHART_CRDS as MONITORING_CHART_CRDS
    from components.kubernetes.operators import TRAINER_CHART_CRDS

    _, _, rec, _ = stack
    ours = [o["metadata"]["name"] for o in kubernetes_objects(rec) if o["kind"] == "CustomResourceDefinition"]
    # The ProvisioningRequest CRD too: both stacks' GPU pools are atomic (gpuPools[].atomicScaleUp's default).
    assert sorted(ours) == ["mpijobs.kubeflow.org", "provisioningrequests.autoscaling.x-k8s.io"]
    # The charts' own CRDs; the cluster-autoscaler chart ships none (no crds/, no CRD templates at 9.59.0).
    everything = [*ours, *TRAINER_CHART_CRDS, *KUEUE_CHART_CRDS, *MONITORING_CHART_CRDS]
    assert len(everything) == len(set(everything))
    assert "pytorchjobs.kubeflow.org" not in everything  # training-operator v1 is not installed
    custom = {(o["apiVersion"].split("/")[0], o["kind"]) for o in kubernetes_objects(rec) if o["kind"] in CRD_FILES}
    plural = {"MPIJob": "mpijobs", "TrainJob": "trainjobs", "ClusterTrainingRuntime": "clustertrainingruntimes",
              "ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues",
              "WorkloadPriorityClass": "workloadpriorityclasses", "PrometheusRule": "prometheusrules",
              "Topology": "topologies", "AdmissionCheck": "admissionchecks",
              "ProvisioningRequestConfig": "provisioningrequestconfigs",
              "PodMonitor": "podmonitors", "ServiceMonitor": "servicemonitors"}
    for group, kind in custom:
        assert f"{plural[kind]}.{group}" in everything, kind


def test_file_system_is_off_the_eks_critical_path(stack):
    _, cfg, rec, _ = stack
    (eks,) = rec.of_type("aws:eks/cluster:Cluster")
    (fs,) = rec.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert not rec.depends_on(fs, eks)
    for dra in rec.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"):
        assert not rec.depends_on(dra, eks)
    for ng in rec.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert not rec.depends_on(ng, fs), ng.name
    pvs = rec.of_type("kubernetes:core/v1:PersistentVolume")  # the training namespace's, and one per team
    assert len(pvs) == 1 + len(cfg.teams)
    for pv in pvs:
        assert rec.depends_on(pv, fs) and rec.depends_on(pv, eks), pv.name


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
    objects = kubernetes_objects(rec)
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] in ("MPIJob", "TrainJob")}
    runtimes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ClusterTrainingRuntime"}
    assert {j.name for j in cfg.jobs} <= set(jobs)
    for job in cfg.jobs:
        obj = jobs[job.name]
        pool = cfg.pool(job.pool)
        if obj["kind"] == "MPIJob":
            worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]
            assert worker["replicas"] == job.nodes
            pod = worker["template"]["spec"]
        else:
            assert obj["spec"]["trainer"]["numNodes"] == job.nodes
            (node,) = runtimes[obj["spec"]["runtimeRef"]["name"]]["spec"]["template"]["spec"]["replicatedJobs"]
            pod = node["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"gpucluster.io/pool": pool.name}
        (container,) = pod["containers"]
        limits = container["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == str(pool.instance.gpu_count)
        if pool.efa_enabled:
            assert limits["vpc.amazonaws.com/efa"] == str(pool.instance.max_efa_interfaces)
        else:
            assert "vpc.amazonaws.com/efa" not in limits


def test_every_job_is_queued_and_waits_for_the_queue(stack):
    _, cfg, rec, _ = stack
    # The training namespace's queues (a team's are in its namespace: tests/test_teams_kube.py).
    (cluster_queue,) = [q for q in rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
                        if q.inputs["metadata"]["name"] == "gpucluster"]
    jobs = rec.of_type("kubernetes:kubeflow.org/v2beta1:MPIJob") + \
        rec.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert len(jobs) == len(cfg.jobs) + sum(p.fabric_test for p in cfg.gpu_pools)
    (local_queue,) = [q for q in rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
                      if q.inputs["metadata"]["namespace"] == cfg.training_namespace]
    for job in jobs:
        assert job.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == \
            local_queue.inputs["metadata"]["name"]
        assert job.inputs["metadata"]["namespace"] == local_queue.inputs["metadata"]["namespace"]
        assert rec.depends_on(job, cluster_queue) and rec.depends_on(job, local_queue)


def test_autoscaler_installs_after_the_system_nodes_with_its_pod_identity(stack):
    _, cfg, rec, _ = stack
    release = rec.named(f"{cfg.cluster_name}-autoscaler-release")
    (association,) = [a for a in rec.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                      if a.name.startswith(f"{cfg.cluster_name}-autoscaler")]
    (system,) = [r for r in rec.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    assert rec.depends_on(release, association) and rec.depends_on(release, system)
    assert release.inputs["values"]["autoDiscovery"] == {"clusterName": cfg.cluster_name}


def test_destroy_order_jobs_then_queue_then_operators_then_nodes(stack):
    # Pulumi deletes dependents first: a job before the queue objects it is admitted through, those before
    # Kueue (its finalizers), Kubernetes objects before the node groups and the cluster.
    _, cfg, rec, _ = stack
    (job,) = [r for r in rec.resources if r.type.endswith(":TrainJob") and r.inputs["metadata"]["name"] == cfg.jobs[0].name]
    (cluster_queue,) = [q for q in rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue")
                        if q.inputs["metadata"]["name"] == "gpucluster"]
    kueue = rec.named(f"{cfg.cluster_name}-queue-kueue")
    (gpu_group,) = [r for r in rec.of_type("aws:eks/nodeGroup:NodeGroup") if not r.name.endswith("system-nodes")]
    assert rec.depends_on(job, cluster_queue) and rec.depends_on(cluster_queue, kueue)
    assert rec.depends_on(job, gpu_group)


def test_prod_fabric_test_and_outputs(run_stack):
    rec = shared_recording("prod", prod_started())
    out = rec.stack_outputs
    assert out["expectedBusBandwidthGBps"] == {"h100": 487.0}
    assert out["gpuNodeGroups"] == {"h100": "gpucluster-prod-h100-node-group"}
    assert out["fsxClaimName"] == "fsx"
    assert out["bucketName"].startswith("gpucluster-prod-data-")
    p5 = catalog.get("p5.48xlarge")
    # 16 nodes more at maxNodes, and their 500 GiB gp3 root volumes.
    assert out["estimatedCostPerHourUsd"]["max"] - out["estimatedCostPerHourUsd"]["min"] == pytest.approx(
        16 * p5.price_usd_per_hour + 16 * 500 * 1.073741824 * 0.08 / 730, abs=0.01)
    names = {o["metadata"]["name"] for o in kubernetes_objects(rec) if o["kind"] == "MPIJob"}
    assert names == {"gpt-pretrain", "nccl-tests-h100"}
    assert out["localQueue"] == "training/gpu"


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


def test_upstream_images_are_pinned_in_one_place():
    # The fabric test's and the runtimes' image live in components/core/versions.py only; stacks may name it
    # for their own jobs.
    from pathlib import Path

    from components.core import versions

    root = Path(__file__).resolve().parent.parent
    sources = [p for p in root.rglob("*.py") if "venv" not in p.parts and p.parent.name != "tests"]
    naming = [p.relative_to(root).as_posix() for p in sources if versions.DLC_PYTORCH_IMAGE in p.read_text()]
    assert naming == ["components/core/versions.py"]
    assert ":latest" not in versions.DLC_PYTORCH_IMAGE and versions.DLC_PYTORCH_IMAGE.endswith(":2.13.0-cu133-amzn2023")


def test_the_dev_smoke_job_runs_torchrun_in_a_pytorch_image():
    # nccl-tests' image has no PyTorch; the AWS PyTorch DLC has PyTorch, EFA and aws-ofi-nccl.
    (job,) = stack_config("dev").jobs
    assert job.launcher == "torchrun"
    assert job.image.startswith("public.ecr.aws/deep-learning-containers/pytorch:")
