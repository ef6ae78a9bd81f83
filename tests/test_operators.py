"""The MPI Operator objects, the Trainer chart and our runtimes, and how the Operators component registers them."""

from __future__ import annotations

import pulumi_kubernetes as k8s_sdk
import pytest

from components.core import versions as v
from components.core.kube import mpi_operator, trainer
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.kubernetes import operators
from tests import k8s
from tests.conftest import recording as shared_recording
from tests.conftest import stack_config

OBJECTS = mpi_operator.mpi_operator_objects()
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
RELEASE = "kubernetes:helm.sh/v3:Release"
RUNTIME_TYPE = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"


def of_kind(kind: str) -> list[dict]:
    return [o for o in OBJECTS if o["kind"] == kind]


def deployment() -> dict:
    (dep,) = of_kind("Deployment")
    return dep


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_core_objects_valid_for_1_35(obj):
    k8s.validate_core(obj, "1.35")


def test_exactly_one_crd_mpijobs_serving_v2beta1():
    (crd,) = of_kind("CustomResourceDefinition")
    assert crd["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert [ver["name"] for ver in crd["spec"]["versions"]] == ["v2beta1"]
    assert not (mpi_operator.MANIFESTS / "kubeflow.org_pytorchjobs.yaml").exists()  # training-operator v1 is gone


def test_mpi_operator_pinned_to_the_newest_v0_8_release():
    # v0.8.2 carries #810 (terminating launchers are no longer re-created); Kueue v0.19.2 builds against it.
    assert v.MPI_OPERATOR_VERSION == "v0.8.2"
    assert deployment()["spec"]["template"]["spec"]["containers"][0]["image"] == "mpioperator/mpi-operator:0.8.2"


def test_operator_runs_on_system_nodes():
    pod = deployment()["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_LABEL
    assert "tolerations" not in pod
    labels = deployment()["spec"]["template"]["metadata"]["labels"]
    assert deployment()["spec"]["selector"]["matchLabels"] == labels


def test_mpi_operator_as_upstream():
    dep = deployment()
    assert dep["metadata"]["namespace"] == "mpi-operator"
    container = dep["spec"]["template"]["spec"]["containers"][0]
    # Upstream's two flags, and the metrics port (off upstream: --monitoring-port defaults to 0).
    assert container["args"] == ["-alsologtostderr", "--lock-namespace=mpi-operator", "--monitoring-port=9090"]
    assert container["ports"] == [{"name": "metrics", "containerPort": 9090}, {"name": "healthz", "containerPort": 8080}]
    # Probes on the operator's own /healthz server (cmd/mpi-operator/app/server.go: port 8080).
    for probe in (container["livenessProbe"], container["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": 8080}
    (binding,) = of_kind("ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]
    role = next(r for r in of_kind("ClusterRole") if r["metadata"]["name"] == "mpi-operator")
    assert {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs", "mpijobs/finalizers", "mpijobs/status"],
            "verbs": ["*"]} in role["rules"]
    assert {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]} in role["rules"]


def test_trainer_chart_values():
    assert (v.TRAINER_CHART, v.TRAINER_CHART_VERSION) == ("oci://ghcr.io/kubeflow/charts/kubeflow-trainer", "2.3.0")
    assert trainer.helm_values() == {
        "image": {"registry": "ghcr.io", "repository": "kubeflow/trainer/trainer-controller-manager",
                  "tag": "v2.3.0"},
        "manager": {"nodeSelector": SYSTEM_NODE_LABEL,
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
                    # The chart's, plus the read-only root of Trainer's own manifest.
                    "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                        "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}}},
        "jobset": {"install": True, "image": {"repository": "registry.k8s.io/jobset/jobset", "tag": "v0.12.0"},
                   "controller": {"nodeSelector": SYSTEM_NODE_LABEL,
                                  "securityContext": {"allowPrivilegeEscalation": False,
                                                      "readOnlyRootFilesystem": True,
                                                      "capabilities": {"drop": ["ALL"]}},
                                  "podSecurityContext": {"runAsNonRoot": True,
                                                         "seccompProfile": {"type": "RuntimeDefault"}}}},
        "runtimes": {"defaultEnabled": False},
        "crds": {"enabled": True},
    }


def test_runtimes_needed_once_per_pool_restart_budget_mount_and_grace_period():
    cfg = stack_config("prod", {"gpucluster:jobs": [
        {"name": n, "pool": "h100", "nodes": 2, "launcher": launcher, "image": "repo/train:1.0",
         "command": ["python", "train.py"], **extra}
        for n, launcher, extra in (("a", "torchrun", {}), ("b", "torchrun", {}), ("c", "torchrun", {"maxRestarts": 9}),
                                   ("d", "mpirun", {}), ("e", "torchrun", {"terminationGracePeriodSeconds": 120}))]})
    needed = operators.runtimes_needed(cfg.gpu_pools, cfg.jobs)
    assert [(p.name, r, m, g) for p, r, m, g in needed] == [("h100", 3, "/fsx", None), ("h100", 9, "/fsx", None), ("h100", 3, "/fsx", 120)]


def build(cfg=None, image_cache=None):
    cfg = cfg or stack_config("prod")

    def run():
        provider = k8s_sdk.Provider("k8s", kubeconfig="{}")
        operators.Operators("ops", operators.OperatorsArgs(provider=provider, pools=cfg.gpu_pools, jobs=cfg.jobs,
                                                           claim_name="fsx", image_cache=image_cache))
    return run


def test_component_registers_each_object_once_under_itself(run_mocked):
    rec = run_mocked(build(), "prod")
    (component,) = rec.of_type("gpucluster:index:Operators")
    children = [r for r in rec.resources if r.parent == component.urn]
    # The MPI Operator's objects and its NetworkPolicy, the Trainer namespace and release, one runtime (llama-70b's),
    # and the ProvisioningRequest CRD (prod's h100 pool is atomic).
    assert len(children) == len(OBJECTS) + 5
    for child in children:
        assert child.provider.startswith(rec.named("k8s").urn)
        assert child.name.startswith("ops-")
    assert sorted(crd.inputs["metadata"]["name"] for crd in rec.of_type(CRD_TYPE)) == [
        "mpijobs.kubeflow.org", "provisioningrequests.autoscaling.x-k8s.io"]


def test_trainer_release_and_runtimes_in_order(run_mocked):
    rec = run_mocked(build(), "prod")
    release = rec.named("ops-trainer")
    assert release.type == RELEASE
    assert (release.inputs["chart"], release.inputs["version"]) == (v.TRAINER_CHART, "2.3.0")
    assert release.inputs["namespace"] == "kubeflow-system" and "repositoryOpts" not in release.inputs
    assert rec.depends_on(release, rec.named("ops-trainer-ns"))
    (runtime,) = rec.of_type(RUNTIME_TYPE)
    assert runtime.inputs["metadata"]["name"] == "gpucluster-torch-h100-r10-g120"  # prod: maxRestarts 10, a 120 s grace
    assert rec.depends_on(runtime, release)  # its webhook must be up to admit it


def runtime_images(rec) -> list[str]:
    (runtime,) = rec.of_type(RUNTIME_TYPE)
    (job,) = runtime.inputs["spec"]["template"]["spec"]["replicatedJobs"]
    return [c["image"] for c in job["template"]["spec"]["template"]["spec"]["containers"]]


def test_the_runtimes_default_image_goes_through_the_cache_when_there_is_one(run_mocked):
    base = "000000000000.dkr.ecr.us-east-1.amazonaws.com/gpucluster-prod"
    assert runtime_images(run_mocked(build(image_cache=base), "prod")) == [
        f"{base}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"]
    assert runtime_images(run_mocked(build(), "prod")) == [v.DLC_PYTORCH_IMAGE]  # imageCache: false


def test_deployment_waits_for_crd_rbac_and_namespace(run_mocked):
    rec = run_mocked(build(), "prod")
    mpi = rec.named("ops-mpi-deployment-mpi-operator")
    assert rec.depends_on(mpi, rec.named("ops-mpi-crd-mpijobs.kubeflow.org"))
    assert rec.depends_on(mpi, rec.named("ops-mpi-clusterrolebinding-mpi-operator"))
    assert rec.depends_on(mpi, rec.named("ops-mpi-ns-mpi-operator"))
    assert mpi.inputs["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM_NODE_LABEL


def test_the_stack_and_submit_give_the_runtime_the_cache_s_image(run_stack):
    """Wired end to end: the program's runtime and the one `bootstrap submit` applies agree, through the cache."""
    from bootstrap.jobs import render
    from tests.conftest import prod_started

    rec = shared_recording("prod", prod_started())
    base = rec.stack_outputs["imageCache"]
    expected = [f"{base}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"]
    assert runtime_images(rec) == expected
    cfg = stack_config("prod")
    index = next(i for i, job in enumerate(cfg.jobs) if job.launcher == "torchrun")
    submitted = render.build(cfg, index, from_file=False, image_cache=base).runtime
    (job,) = submitted["spec"]["template"]["spec"]["replicatedJobs"]
    assert [c["image"] for c in job["template"]["spec"]["template"]["spec"]["containers"]] == expected
