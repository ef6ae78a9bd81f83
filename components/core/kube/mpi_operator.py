"""The Kubeflow MPI Operator's install manifest as plain objects (pure).

`deploy/v2beta1/mpi-operator.yaml` of kubeflow/mpi-operator (Namespace,
ServiceAccount, ClusterRoles, ClusterRoleBinding, Deployment), built here
because nothing is downloaded at deploy time; the CRD is the upstream file
vendored in components/manifests/ (see its README). components/kubernetes/operators.py
registers them.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import yaml

from components.core import namespaces
from components.core import versions as v
from components.core.kube import hardening
from components.core.kube.nodepool import SYSTEM_NODE_LABEL

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"

MPI_OPERATOR_NAMESPACE = namespaces.MPI_OPERATOR
MPIJOBS_CRD = "mpijobs.kubeflow.org"
CRD_FILES = {MPIJOBS_CRD: "kubeflow.org_mpijobs.yaml"}

# Labels the MPI Operator's kustomization stamps on every object it installs.
_MPI_LABELS = {
    "app": "mpi-operator",
    "app.kubernetes.io/component": "mpijob",
    "app.kubernetes.io/name": "mpi-operator",
    "kustomize.component": "mpi-operator",
}


@functools.cache
def _crd_text(crd_name: str) -> str:
    return (MANIFESTS / CRD_FILES[crd_name]).read_text()


@functools.cache
def _crd_json(crd_name: str) -> str:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are ~600 KB each: parsed once
    return json.dumps(yaml.load(_crd_text(crd_name), Loader=loader))


def crd(crd_name: str) -> dict[str, Any]:
    """A vendored upstream CRD as a fresh dict (callers may add labels)."""
    return json.loads(_crd_json(crd_name))


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


# --monitoring-port serves the default Prometheus registry over HTTP (cmd/mpi-operator/app/options/options.go
# at v0.8.2: default 0, off); 8080 is the /healthz server (app/server.go healthCheckPort), which the
# upstream manifest probes not at all: our liveness and readiness probes use it.
METRICS_PORT = 9090
HEALTH_PORT = 8080
HEALTH_PROBE = {"httpGet": {"path": "/healthz", "port": HEALTH_PORT}, "periodSeconds": 20, "timeoutSeconds": 5}

# The manifest sets none; ours, so the system nodes' capacity check can count it.
OPERATOR_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}

# The manifest sets no securityContext. The image is gcr.io/distroless/base-debian12:latest with no USER
# (kubeflow/mpi-operator Dockerfile, release-0.8 at b10758d "Prepare v0.8.2"), so root: runAsNonRoot
# needs a numeric UID, distroless's nonroot. The binary only talks to the API server and serves HTTP;
# klog writes to stderr (klog/v2's logtostderr defaults true; options.go calls klog.InitFlags), so the
# root filesystem is read-only, with a small /tmp in case a library wants one.
OPERATOR_POD_SECURITY = hardening.pod_security_context(hardening.DISTROLESS_NONROOT)
TMP_VOLUME, TMP_MOUNT = hardening.tmp_volume()


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
    """deploy/v2beta1/mpi-operator.yaml of kubeflow/mpi-operator, as dicts, CRD first.

    The objects and RBAC rules are the manifest's at v0.8.0, unchanged in
    release-0.8 (v0.8.2) but for the image line. Our changes are the
    Deployment's: pinned to the system nodes, metrics and probes on, requests
    and limits, and run unprivileged (OPERATOR_POD_SECURITY, a restricted
    container, /tmp as an emptyDir).
    """
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
            "image": v.MPI_OPERATOR_IMAGE,
            "args": ["-alsologtostderr", f"--lock-namespace={ns}", f"--monitoring-port={METRICS_PORT}"],
            "ports": [{"name": "metrics", "containerPort": METRICS_PORT},
                      {"name": "healthz", "containerPort": HEALTH_PORT}],
            "livenessProbe": {**HEALTH_PROBE, "initialDelaySeconds": 15, "failureThreshold": 3},
            "readinessProbe": {**HEALTH_PROBE, "initialDelaySeconds": 5},
            "resources": OPERATOR_RESOURCES,
            "securityContext": hardening.container_security_context(),
            "volumeMounts": [dict(TMP_MOUNT)],
        }, securityContext=dict(OPERATOR_POD_SECURITY), volumes=[dict(TMP_VOLUME)]),
    ]
