"""TrainingJob and FabricTest under Pulumi mocks: what is registered, under whom, after what."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s_sdk
import pytest

from components.core.kube import launcher
from components.kubernetes import operators
from components.kubernetes.training_job import FabricTest, FabricTestArgs, TrainingJob, TrainingJobArgs
from tests import k8s
from tests.conftest import stack_config

CRD_FILE = {"MPIJob": "kubeflow.org_mpijobs.yaml", "TrainJob": "trainer.kubeflow.org_trainjobs.yaml"}
MPIJOB_TYPE = "kubernetes:kubeflow.org/v2beta1:MPIJob"
TRAINJOB_TYPE = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
CLAIM = "fsx"

PROD_OVERRIDES = {
    # prod plus a second fabric-test pool and a pool without one.
    "gpucluster:gpuPools": [
        {"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 16, "fabricTest": True},
        {"name": "a100", "instanceType": "p4d.24xlarge", "maxNodes": 4, "fabricTest": True},
        {"name": "spare", "instanceType": "p5en.48xlarge", "maxNodes": 2},
    ],
}


def program(cfg, built: dict):
    """What __main__.py does for jobs: Operators, a TrainingJob per job, a FabricTest per fabric pool."""

    def run():
        provider = k8s_sdk.Provider("k8s", kubeconfig="{}")
        # The claim name arrives as an Output from the storage component.
        claim = pulumi.Output.from_input(CLAIM)
        ops = operators.Operators("ops", operators.OperatorsArgs(provider=provider, pools=cfg.gpu_pools,
                                                                 jobs=cfg.jobs, claim_name=CLAIM))
        for job in cfg.jobs:
            built[job.name] = TrainingJob(f"job-{job.name}", TrainingJobArgs(
                job=job, pool=cfg.pool(job.pool), namespace=cfg.training_namespace, claim_name=claim,
                provider=provider, storage=cfg.storage, prices=cfg.prices, depends_on=[ops]))
        for pool in cfg.gpu_pools:
            if pool.fabric_test:
                built[f"fabric-{pool.name}"] = FabricTest(f"fabric-{pool.name}", FabricTestArgs(
                    pool=pool, namespace=cfg.training_namespace, provider=provider, depends_on=[ops]))

    return run


@pytest.fixture(scope="module")
def recordings():
    """dev, prod and prod-with-more-pools, each run once for the module."""
    from bootstrap.offline import mocks
    from tests.conftest import stack_raw

    out = {}
    from tests.conftest import prod_started

    for key, stack, overrides in (("dev", "dev", None), ("prod", "prod", prod_started()),
                                  ("pools", "prod", prod_started(PROD_OVERRIDES))):
        built: dict = {}
        cfg = stack_config(stack, overrides)
        out[key] = (cfg, mocks.run_program(stack_raw(stack, overrides), stack, program=program(cfg, built)), built)
    return out


def as_manifest(reg) -> dict:
    kind = reg.inputs["kind"]
    return {"apiVersion": reg.inputs["apiVersion"], "kind": kind, "metadata": reg.inputs["metadata"],
            "spec": reg.inputs["spec"]}


def jobs_of(rec) -> list:
    return rec.of_type(MPIJOB_TYPE) + rec.of_type(TRAINJOB_TYPE)


@pytest.mark.parametrize("key", ["dev", "prod", "pools"])
def test_every_registered_job_matches_its_builder_and_the_upstream_crd(recordings, key):
    cfg, rec, _ = recordings[key]
    registered = {r.inputs["metadata"]["name"]: as_manifest(r) for r in jobs_of(rec)}
    context = launcher.JobContext(cfg.training_namespace, CLAIM, cfg.storage, cfg.prices)
    expected = {job.name: launcher.job_manifest(job, cfg.pool(job.pool), context) for job in cfg.jobs}
    expected.update({launcher.nccl_test_name(p): launcher.nccl_test_mpijob(p, cfg.training_namespace)
                     for p in cfg.gpu_pools if p.fabric_test})
    assert registered == expected
    for manifest in registered.values():
        k8s.validate_custom(manifest, CRD_FILE[manifest["kind"]])


def test_launcher_picks_the_kind(recordings):
    _, rec, built = recordings["prod"]
    kinds = {r.inputs["metadata"]["name"]: r.type for r in jobs_of(rec)}
    assert kinds["llama-70b"] == TRAINJOB_TYPE
    assert kinds["gpt-pretrain"] == MPIJOB_TYPE
    assert (built["llama-70b"].kind, built["llama-70b"].job_name) == ("TrainJob", "llama-70b")
    assert built["gpt-pretrain"].kind == "MPIJob"
    _, dev, _ = recordings["dev"]
    assert [r.inputs["metadata"]["name"] for r in dev.of_type(TRAINJOB_TYPE)] == ["smoke"]


@pytest.mark.parametrize("key", ["dev", "prod", "pools"])
def test_a_changed_job_is_replaced_not_patched(recordings, key):
    # TrainJob's trainer block and runtimeRef are immutable, and operators ignore spec edits of running jobs.
    _, rec, _ = recordings[key]
    for reg in jobs_of(rec):
        assert reg.replace_on_changes == ["spec"] and reg.delete_before_replace


@pytest.mark.parametrize("key", ["dev", "prod"])
def test_jobs_are_children_and_wait_for_the_operators(recordings, key):
    _, rec, _ = recordings[key]
    crds = rec.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    deployments = rec.of_type("kubernetes:apps/v1:Deployment")
    waited_for = [*crds, *deployments, *rec.of_type("kubernetes:helm.sh/v3:Release"),
                  *rec.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime")]
    provider = rec.named("k8s")
    for reg in jobs_of(rec):
        parent = rec.by_urn(reg.parent)
        assert parent.type in ("gpucluster:index:TrainingJob", "gpucluster:index:FabricTest")
        assert reg.name.startswith(f"{parent.name}-")
        assert reg.provider.startswith(provider.urn)
        for dep in waited_for:
            assert rec.depends_on(reg, dep), f"{reg.name} does not wait for {dep.name}"
    for component in rec.of_type("gpucluster:index:TrainingJob"):
        assert component.component_outputs["jobName"] in {r.inputs["metadata"]["name"] for r in jobs_of(rec)}


def test_fabric_test_only_on_fabric_test_pools(recordings):
    _, dev, _ = recordings["dev"]
    assert dev.of_type("gpucluster:index:FabricTest") == []
    _, prod, built = recordings["prod"]
    (fabric,) = prod.of_type("gpucluster:index:FabricTest")
    assert fabric.name == "fabric-h100"
    _, pools, built_pools = recordings["pools"]
    assert sorted(r.name for r in pools.of_type("gpucluster:index:FabricTest")) == ["fabric-a100", "fabric-h100"]
    names = {r.inputs["metadata"]["name"] for r in pools.of_type(MPIJOB_TYPE)}
    assert "nccl-tests-spare" not in names and {"nccl-tests-h100", "nccl-tests-a100"} <= names


def test_fabric_test_exports_expected_bus_bandwidth(recordings):
    _, rec, built = recordings["pools"]
    h100 = built["fabric-h100"]
    assert (h100.job_name, h100.kind) == ("nccl-tests-h100", "MPIJob")
    assert (h100.expected_busbw_gbps, h100.expected_busbw_size) == (487.0, "16 GiB")
    assert built["fabric-a100"].expected_busbw_gbps == 78.0
    outputs = rec.named("fabric-h100").component_outputs
    assert outputs == {"jobName": "nccl-tests-h100", "kind": "MPIJob", "expectedBusbwGbps": 487.0,
                       "expectedBusbwSize": "16 GiB"}


def test_only_one_mpijobs_crd_among_everything_registered(recordings):
    for _, rec, _ in recordings.values():
        crds = [r for r in rec.resources if r.type.endswith(":CustomResourceDefinition")
                and r.inputs["metadata"]["name"] == "mpijobs.kubeflow.org"]
        assert len(crds) == 1
