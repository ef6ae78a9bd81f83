"""The MPI Operator and Training Operator objects, and how the Operators component registers them."""

from __future__ import annotations

import pulumi_kubernetes as k8s_sdk
import pytest

from components import operators
from components.spec.nodepool import SYSTEM_NODE_LABEL
from tests import k8s

OBJECTS = operators.operator_objects()
ALL = [obj for objs in OBJECTS.values() for obj in objs]
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def of_kind(kind: str, operator: str | None = None) -> list[dict]:
    pool = OBJECTS[operator] if operator else ALL
    return [o for o in pool if o["kind"] == kind]


def deployment(operator: str) -> dict:
    (dep,) = of_kind("Deployment", operator)
    return dep


@pytest.mark.parametrize("obj", ALL, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_core_objects_valid_for_1_35(obj):
    k8s.validate_core(obj, "1.35")


@pytest.mark.parametrize("crd_name", list(operators.CRD_FILES))
def test_vendored_crds_are_the_shared_upstream_files(crd_name):
    shared = k8s.SCHEMAS / operators.CRD_FILES[crd_name]
    if not shared.exists():
        pytest.skip(f"{shared} not present: upstream CRD schemas are shipped in shared/schemas")
    assert (operators.MANIFESTS / operators.CRD_FILES[crd_name]).read_text() == shared.read_text()


def test_exactly_one_mpijobs_crd_serving_v2beta1():
    crds = {o["metadata"]["name"]: o for o in of_kind("CustomResourceDefinition")}
    assert len(of_kind("CustomResourceDefinition")) == len(crds) == 2
    assert [v["name"] for v in crds["mpijobs.kubeflow.org"]["spec"]["versions"]] == ["v2beta1"]
    assert [v["name"] for v in crds["pytorchjobs.kubeflow.org"]["spec"]["versions"]] == ["v1"]
    assert of_kind("CustomResourceDefinition", "mpi")[0]["metadata"]["name"] == "mpijobs.kubeflow.org"
    assert of_kind("CustomResourceDefinition", "pytorch")[0]["metadata"]["name"] == "pytorchjobs.kubeflow.org"


def test_images_pinned_to_releases():
    assert deployment("mpi")["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "mpioperator/mpi-operator:0.8.0"
    assert deployment("pytorch")["spec"]["template"]["spec"]["containers"][0]["image"] == \
        "ghcr.io/kubeflow/training-v1/training-operator:v1-3f15cb8"


@pytest.mark.parametrize("operator", list(OBJECTS))
def test_operators_run_on_system_nodes(operator):
    pod = deployment(operator)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_LABEL
    assert "tolerations" not in pod
    labels = deployment(operator)["spec"]["template"]["metadata"]["labels"]
    assert deployment(operator)["spec"]["selector"]["matchLabels"] == labels


def test_mpi_operator_as_upstream():
    dep = deployment("mpi")
    assert dep["metadata"]["namespace"] == "mpi-operator"
    assert dep["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "-alsologtostderr", "--lock-namespace=mpi-operator"]
    (binding,) = of_kind("ClusterRoleBinding", "mpi")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": "mpi-operator"}]
    role = next(r for r in of_kind("ClusterRole", "mpi") if r["metadata"]["name"] == "mpi-operator")
    assert {"apiGroups": ["kubeflow.org"], "resources": ["mpijobs", "mpijobs/finalizers", "mpijobs/status"],
            "verbs": ["*"]} in role["rules"]
    assert {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]} in role["rules"]


def test_training_operator_serves_pytorchjob_only():
    dep = deployment("pytorch")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["--enable-scheme=pytorchjob"]
    (webhooks,) = of_kind("ValidatingWebhookConfiguration", "pytorch")
    assert [w["rules"][0]["resources"] for w in webhooks["webhooks"]] == [["pytorchjobs"]]
    (service,) = of_kind("Service", "pytorch")
    assert service["spec"]["selector"] == dep["spec"]["template"]["metadata"]["labels"]
    assert webhooks["webhooks"][0]["clientConfig"]["service"]["name"] == service["metadata"]["name"]
    webhook_port = next(p for p in service["spec"]["ports"] if p["port"] == 443)
    assert webhook_port["targetPort"] == 9443
    (secret,) = of_kind("Secret", "pytorch")
    (volume,) = dep["spec"]["template"]["spec"]["volumes"]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    assert "data" not in secret  # the operator writes its own certificate


def build(provider_name: str = "k8s"):
    provider = k8s_sdk.Provider(provider_name, kubeconfig="{}")
    return operators.Operators("ops", operators.OperatorsArgs(provider=provider))


def test_component_registers_each_object_once_under_itself(run_mocked):
    rec = run_mocked(build)
    (component,) = rec.of_type("gpucluster:index:Operators")
    children = [r for r in rec.resources if r.parent == component.urn]
    assert len(children) == len(ALL)
    for child in children:
        assert child.provider.startswith(rec.named("k8s").urn)
        assert child.name.startswith("ops-")
    crds = rec.of_type(CRD_TYPE)
    assert sorted(r.inputs["metadata"]["name"] for r in crds) == ["mpijobs.kubeflow.org", "pytorchjobs.kubeflow.org"]
    mpijobs = next(r for r in crds if r.inputs["metadata"]["name"] == "mpijobs.kubeflow.org")
    assert mpijobs.inputs["spec"]["versions"][0]["name"] == "v2beta1"


def test_deployments_wait_for_crds_rbac_and_namespace(run_mocked):
    rec = run_mocked(build)
    crds = {r.inputs["metadata"]["name"]: r for r in rec.of_type(CRD_TYPE)}
    mpi = rec.named("ops-mpi-deployment-mpi-operator")
    assert rec.depends_on(mpi, crds["mpijobs.kubeflow.org"])
    assert rec.depends_on(mpi, rec.named("ops-mpi-clusterrolebinding-mpi-operator"))
    assert rec.depends_on(mpi, rec.named("ops-mpi-ns-mpi-operator"))
    torch = rec.named("ops-pytorch-deployment-training-operator")
    assert rec.depends_on(torch, crds["pytorchjobs.kubeflow.org"])
    assert rec.depends_on(torch, rec.named("ops-pytorch-secret-training-operator-webhook-cert"))
    assert rec.depends_on(rec.named("ops-pytorch-sa-training-operator"), rec.named("ops-pytorch-ns-kubeflow"))
    assert mpi.inputs["spec"]["template"]["spec"]["nodeSelector"] == SYSTEM_NODE_LABEL
