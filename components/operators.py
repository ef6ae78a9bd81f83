"""The job operators: Kubeflow MPI Operator and Kubeflow Training Operator (PyTorchJob only).

Launcher choice. `launcher: mpirun` jobs run as MPIJob `kubeflow.org/v2beta1`
under the Kubeflow MPI Operator v0.8.0; `launcher: torchrun` jobs run as
PyTorchJob `kubeflow.org/v1` under the Kubeflow Training Operator v1.9 with
only its PyTorchJob controller on (`--enable-scheme=pytorchjob`) and without
its MPIJob v1 CRD, so `mpijobs.kubeflow.org` has exactly one definition
(v2beta1). We chose it over Kubeflow Trainer v2 (TrainJob) because it is
one Deployment with no JobSet controller and no runtime catalogue to
install, and it is what the EKS + EFA recipes in
aws-samples/awsome-distributed-training use; Trainer v2 is its successor and
the path once those recipes move.

Nothing can be downloaded at deploy time, so the objects are built here from
the upstream install manifests:

- MPI Operator: `deploy/v2beta1/mpi-operator.yaml` of kubeflow/mpi-operator
  (Namespace, ServiceAccount, ClusterRoles, ClusterRoleBinding, Deployment;
  image tag set to the release as its release process does).
- Training Operator: `manifests/overlays/standalone` of kubeflow/training-operator
  release-1.9 (base: ServiceAccount, ClusterRole, ClusterRoleBinding, the
  webhook Secret the operator fills with its own certificate, Service,
  Deployment, ValidatingWebhookConfiguration), cut down to PyTorchJob.
- CRDs: the upstream YAML vendored in components/manifests/ (see its README).

Our only changes to upstream: both Deployments are pinned to the system
nodes (nodeSelector gpucluster.io/role=system) so they never hold a GPU
node up, and the Training Operator gets `--enable-scheme=pytorchjob` and a
webhook configuration for PyTorchJob alone (a webhook for a kind we do not
serve, with failurePolicy Fail, would only reject objects).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components.spec.nodepool import SYSTEM_NODE_LABEL

MANIFESTS = Path(__file__).resolve().parent / "manifests"

# kubeflow/mpi-operator v0.8.0 (FACTS.md "Operators"); the release tags the
# image like the Git tag without "v" (mpioperator/mpi-operator:0.7.0 for v0.7.0,
# kubeflow/mpi-operator PR #745).
MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR_IMAGE = "mpioperator/mpi-operator:0.8.0"
MPI_OPERATOR_NAMESPACE = "mpi-operator"

# Training Operator v1.9.2: the image tag of that release, from kubeflow/trainer
# PR #2634 "Release Training Operator Image for v1.9.2" (manifests/overlays/*:
# ghcr.io/kubeflow/training-v1/training-operator, newTag v1-3f15cb8).
TRAINING_OPERATOR_VERSION = "v1.9.2"
TRAINING_OPERATOR_IMAGE = "ghcr.io/kubeflow/training-v1/training-operator:v1-3f15cb8"
TRAINING_OPERATOR_NAMESPACE = "kubeflow"

MPIJOBS_CRD = "mpijobs.kubeflow.org"
PYTORCHJOBS_CRD = "pytorchjobs.kubeflow.org"
CRD_FILES = {MPIJOBS_CRD: "kubeflow.org_mpijobs.yaml", PYTORCHJOBS_CRD: "kubeflow.org_pytorchjobs.yaml"}

# Labels the MPI Operator's kustomization stamps on every object it installs.
_MPI_LABELS = {
    "app": "mpi-operator",
    "app.kubernetes.io/component": "mpijob",
    "app.kubernetes.io/name": "mpi-operator",
    "kustomize.component": "mpi-operator",
}
_TRAINING_LABELS = {"control-plane": "kubeflow-training-operator"}
_TRAINING_NAME = "training-operator"
_WEBHOOK_CERT_SECRET = "training-operator-webhook-cert"


@functools.cache
def _crd_text(crd_name: str) -> str:
    return (MANIFESTS / CRD_FILES[crd_name]).read_text()


def crd(crd_name: str) -> dict[str, Any]:
    """A vendored upstream CRD as a fresh dict (callers may add labels)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are ~600 KB each
    return yaml.load(_crd_text(crd_name), Loader=loader)


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _deployment(name: str, namespace: str, labels: dict[str, str], container: dict[str, Any],
                **pod_spec: Any) -> dict[str, Any]:
    """A one-replica operator Deployment on the system nodes, its service account named like it."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {"sidecar.istio.io/inject": "false"}},
                "spec": {"containers": [container], "serviceAccountName": name,
                         "nodeSelector": dict(SYSTEM_NODE_LABEL), **pod_spec},
            },
        },
    }


def mpi_operator_objects() -> list[dict[str, Any]]:
    """deploy/v2beta1/mpi-operator.yaml of kubeflow/mpi-operator, as dicts, CRD first."""
    ns = MPI_OPERATOR_NAMESPACE
    labels = dict(_MPI_LABELS)
    mpijobs = crd(MPIJOBS_CRD)
    mpijobs["metadata"].setdefault("labels", {}).update(labels)
    all_verbs = ["*"]
    operator_rules = [
        _rule([""], ["configmaps", "secrets", "services"], ["create", "list", "watch", "update"]),
        _rule([""], ["pods"], ["create", "get", "list", "watch", "delete", "update", "patch"]),
        _rule([""], ["pods/exec"], ["create"]),  # for the launcher's Role
        _rule([""], ["endpoints"], ["create", "get", "update"]),
        _rule([""], ["events"], ["create", "patch"]),
        _rule(["batch"], ["jobs"], ["create", "list", "update", "watch"]),
        _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["create", "get"]),
        _rule(["kubeflow.org"], ["mpijobs", "mpijobs/finalizers", "mpijobs/status"], all_verbs),
        _rule(["coordination.k8s.io"], ["leases"], all_verbs),
        _rule(["scheduling.incubator.k8s.io", "scheduling.sigs.dev", "scheduling.volcano.sh"],
              ["queues", "podgroups"], all_verbs),
        _rule(["scheduling.x-k8s.io"], ["podgroups"], all_verbs),
        _rule(["scheduling.k8s.io"], ["priorityclasses"], ["get", "list", "watch"]),
    ]
    edit_verbs = ["get", "list", "watch", "create", "delete", "deletecollection", "patch", "update"]
    agg = "rbac.authorization.kubeflow.org/aggregate-to-"
    return [
        mpijobs,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "mpi-operator", "namespace": ns, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubeflow-mpijobs-admin",
                      "labels": {**labels, f"{agg}kubeflow-admin": "true"}},
         "aggregationRule": {"clusterRoleSelectors": [
             {"matchLabels": {f"{agg}kubeflow-mpijobs-admin": "true"}}]},
         "rules": []},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubeflow-mpijobs-edit",
                      "labels": {**labels, f"{agg}kubeflow-edit": "true",
                                 f"{agg}kubeflow-mpijobs-admin": "true"}},
         "rules": [_rule(["kubeflow.org"], ["mpijobs", "mpijobs/status"], edit_verbs)]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubeflow-mpijobs-view", "labels": {**labels, f"{agg}kubeflow-view": "true"}},
         "rules": [_rule(["kubeflow.org"], ["mpijobs", "mpijobs/status"], ["get", "list", "watch"])]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "mpi-operator", "labels": labels}, "rules": operator_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "mpi-operator", "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mpi-operator"},
         "subjects": [{"kind": "ServiceAccount", "name": "mpi-operator", "namespace": ns}]},
        _deployment("mpi-operator", ns, labels, {
            "name": "mpi-operator",
            "image": MPI_OPERATOR_IMAGE,
            "args": ["-alsologtostderr", f"--lock-namespace={ns}"],
        }),
    ]


def training_operator_objects() -> list[dict[str, Any]]:
    """manifests/overlays/standalone of kubeflow/training-operator release-1.9, PyTorchJob only."""
    ns = TRAINING_OPERATOR_NAMESPACE
    name = _TRAINING_NAME
    labels = dict(_TRAINING_LABELS)
    crud = ["create", "delete", "get", "list", "patch", "update", "watch"]
    # manifests/base/rbac/role.yaml (controller-gen output of the v1.9 controllers).
    rules = [
        _rule([""], ["configmaps"], ["create", "list", "update", "watch"]),
        _rule([""], ["events"], crud),
        _rule([""], ["pods"], crud),
        _rule([""], ["pods/exec"], ["create"]),
        _rule([""], ["secrets"], ["get", "list", "update", "watch"]),
        _rule([""], ["serviceaccounts"], ["create", "get", "list", "watch"]),
        _rule([""], ["services"], ["create", "delete", "get", "list", "watch"]),
        _rule(["admissionregistration.k8s.io"], ["validatingwebhookconfigurations"],
              ["get", "list", "update", "watch"]),
        _rule(["autoscaling"], ["horizontalpodautoscalers"], crud),
    ]
    for kind in ("jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs"):
        rules += [
            _rule(["kubeflow.org"], [kind], crud),
            _rule(["kubeflow.org"], [f"{kind}/finalizers"], ["update"]),
            _rule(["kubeflow.org"], [f"{kind}/status"], ["get", "patch", "update"]),
        ]
    rules += [
        _rule(["rbac.authorization.k8s.io"], ["rolebindings"], ["create", "list", "update", "watch"]),
        _rule(["rbac.authorization.k8s.io"], ["roles"], ["create", "list", "update", "watch"]),
        _rule(["scheduling.volcano.sh"], ["podgroups"], crud),
        _rule(["scheduling.x-k8s.io"], ["podgroups"], crud),
    ]
    field_env = [{"name": env_name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
                 for env_name, path in (("MY_POD_NAMESPACE", "metadata.namespace"),
                                        ("MY_POD_NAME", "metadata.name"))]
    probe = {"httpGet": {"port": 8081}, "timeoutSeconds": 3}
    return [
        crd(PYTORCHJOBS_CRD),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": name, "namespace": ns, "labels": {"app": name}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": name, "labels": {"app": name}}, "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": name, "labels": {"app": name}},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": ns}]},
        # Empty on purpose: the operator's cert-controller writes its serving
        # certificate here and the CA into the webhook configuration below.
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": _WEBHOOK_CERT_SECRET, "namespace": ns},
         "type": "Opaque"},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": name, "namespace": ns, "labels": labels,
                      "annotations": {"prometheus.io/path": "/metrics", "prometheus.io/scrape": "true",
                                      "prometheus.io/port": "8080"}},
         "spec": {"type": "ClusterIP", "selector": labels, "ports": [
             {"name": "monitoring-port", "port": 8080, "targetPort": 8080},
             {"name": "webhook-server", "port": 443, "protocol": "TCP", "targetPort": 9443}]}},
        _deployment(name, ns, labels, {
            "name": name,
            "image": TRAINING_OPERATOR_IMAGE,
            "command": ["/manager"],
            # Only PyTorchJob: the MPIJob v1 controller would fight
            # the MPI Operator over mpijobs.kubeflow.org (kubeflow/trainer
            # issues #1777, #1972: enable the non-MPI schemes only).
            "args": ["--enable-scheme=pytorchjob"],
            "env": field_env,
            "ports": [{"containerPort": 8080},
                      {"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"}],
            "livenessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/healthz"},
                              "initialDelaySeconds": 15, "periodSeconds": 20},
            "readinessProbe": {**probe, "httpGet": {**probe["httpGet"], "path": "/readyz"},
                               "initialDelaySeconds": 10, "periodSeconds": 15},
            "securityContext": {"allowPrivilegeEscalation": False},
            "volumeMounts": [{"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs",
                              "readOnly": True}],
        }, terminationGracePeriodSeconds=10,
            volumes=[{"name": "cert", "secret": {"secretName": _WEBHOOK_CERT_SECRET, "defaultMode": 420}}]),
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         # The operator finds it by this name to inject its CA.
         "metadata": {"name": "validator.training-operator.kubeflow.org", "labels": labels},
         "webhooks": [{
             "name": "validator.pytorchjob.training-operator.kubeflow.org",
             "admissionReviewVersions": ["v1"],
             "clientConfig": {"service": {"name": name, "namespace": ns,
                                          "path": "/validate-kubeflow-org-v1-pytorchjob"}},
             "failurePolicy": "Fail",
             "sideEffects": "None",
             "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"], "resources": ["pytorchjobs"]}],
         }]},
    ]


def operator_objects() -> dict[str, list[dict[str, Any]]]:
    """Every object we install, per operator ("mpi", "pytorch")."""
    return {"mpi": mpi_operator_objects(), "pytorch": training_operator_objects()}


# -- registration -------------------------------------------------------------

_RESOURCE_TYPES = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "Service"): k8s.core.v1.Service,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"):
        k8s.admissionregistration.v1.ValidatingWebhookConfiguration,
}
_SHORT_KIND = {
    "CustomResourceDefinition": "crd", "Namespace": "ns", "ServiceAccount": "sa", "Secret": "secret",
    "Service": "svc", "ClusterRole": "clusterrole", "ClusterRoleBinding": "clusterrolebinding",
    "Deployment": "deployment", "ValidatingWebhookConfiguration": "webhook",
}
# Created first: everything else of an operator lives in its namespace or needs its CRD.
_FOUNDATION = ("CustomResourceDefinition", "Namespace")


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def register(resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The typed pulumi-kubernetes resource for a plain object (top-level keys to SDK names)."""
    cls = _RESOURCE_TYPES[(obj["apiVersion"], obj["kind"])]
    kwargs = {_snake(k): v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return cls(resource_name, **kwargs, opts=opts)


@dataclass(frozen=True)
class OperatorsArgs:
    provider: k8s.Provider
    # Wait for these too (the system node group: the Deployments must have
    # somewhere to run before Pulumi waits for them to become ready).
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)


class Operators(pulumi.ComponentResource):
    """MPI Operator and Training Operator (PyTorchJob) with their CRDs, on the system nodes.

    Jobs should `depends_on` this component: it completes when both CRDs
    exist and both operator Deployments (and so the PyTorchJob webhook) are ready.
    """

    crds: dict[str, k8s.apiextensions.v1.CustomResourceDefinition]
    deployments: dict[str, k8s.apps.v1.Deployment]

    def __init__(self, name: str, args: OperatorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Operators", name, None, opts)
        self.crds = {}
        self.deployments = {}
        for operator, objects in operator_objects().items():
            foundation: list[pulumi.Resource] = []
            rest: list[pulumi.Resource] = []
            for obj in sorted(objects, key=lambda o: (o["kind"] not in _FOUNDATION, o["kind"] == "Deployment")):
                kind = obj["kind"]
                res_name = f"{name}-{operator}-{_SHORT_KIND[kind]}-{obj['metadata']['name']}"
                if kind in _FOUNDATION:
                    deps = list(args.depends_on)
                elif kind == "Deployment":
                    deps = [*args.depends_on, *foundation, *rest]
                else:
                    deps = [*args.depends_on, *foundation]
                res = register(res_name, obj, pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                                     depends_on=deps))
                if kind == "CustomResourceDefinition":
                    self.crds[obj["metadata"]["name"]] = res
                if kind == "Deployment":
                    self.deployments[operator] = res
                (foundation if kind in _FOUNDATION else rest).append(res)
        self.register_outputs({
            "crds": list(self.crds),
            "mpiOperatorImage": MPI_OPERATOR_IMAGE,
            "trainingOperatorImage": TRAINING_OPERATOR_IMAGE,
        })
