"""A fleet worker's objects (pure): the manager's identity on it, its rights, and the token it starts with.

Credentials (issue 31: a ClusterProfile with a credentials provider, or a dedicated service-account token):
Kueue v0.19.2's ClusterProfile source needs the MultiKueueClusterProfile feature gate (alpha, off:
pkg/features/kube_features.go) and an access-provider plugin binary beside Kueue (an exec plugin on EKS would be
`aws eks get-token` with an IAM identity the manager's pod holds in every worker's account); so the worker has a
dedicated ServiceAccount, as Kueue's own setup script does
(site/static/examples/multikueue/create-multikueue-kubeconfig.sh at v0.19.2), whose token the manager holds in a
kubeconfig Secret. Not a 15-minute EKS token: a service-account token, rotated by the manager's CronJob
(components.core.fleet_token) and bound to an anchor Secret here so the older one is revoked.
"""

from __future__ import annotations

from typing import Any

from components.core.config import StackConfig
from components.core.fleet import names

RBAC_API = "rbac.authorization.k8s.io/v1"
LABELS = {"app.kubernetes.io/part-of": "gpucluster", "app.kubernetes.io/component": "fleet"}
JOB_VERBS = ["create", "delete", "get", "list", "watch"]  # the script's verbs on every job kind it lists


def _rule(groups: list[str], resources: list[str], verbs: list[str], resource_names: list[str] | None = None
          ) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs,
            **({"resourceNames": resource_names} if resource_names else {})}


# The rules of Kueue v0.19.2's create-multikueue-kubeconfig.sh (ClusterRole multikueue-sa-role) for the kinds we
# run, in its order: batch Jobs, Pods, JobSets, Kueue's Workloads and queues, MPIJobs. Left out: its StatefulSet,
# LeaderWorkerSet, TFJob, PaddleJob, PyTorchJob, XGBoostJob, Ray and AppWrapper rules (kinds Kueue is not
# configured for here: components.core.kube.queueing.INTEGRATIONS).
SCRIPT_RULES = (
    _rule(["batch"], ["jobs"], JOB_VERBS),
    _rule(["batch"], ["jobs/status"], ["get"]),
    _rule([""], ["pods"], JOB_VERBS),
    _rule(["jobset.x-k8s.io"], ["jobsets"], JOB_VERBS),
    _rule(["jobset.x-k8s.io"], ["jobsets/status"], ["get"]),
    _rule(["kueue.x-k8s.io"], ["workloads"], [*JOB_VERBS, "update", "patch"]),
    _rule(["kueue.x-k8s.io"], ["clusterqueues", "localqueues"], ["get", "list", "watch"]),
    _rule(["kueue.x-k8s.io"], ["workloads/status"], ["get", "patch", "update"]),
    _rule(["kubeflow.org"], ["mpijobs"], JOB_VERBS),
    _rule(["kubeflow.org"], ["mpijobs/status"], ["get"]),
)
# The script has no rule for Trainer v2's TrainJob (trainer.kubeflow.org), which Kueue v0.19.2 dispatches
# (pkg/controller/jobs/trainjob/trainjob_multikueue_adapter.go: remote Get, Create and Delete, and the remote
# object's status read back; site/content/en/docs/tasks/run/multikueue/trainjob.md): the same verbs as every
# other job kind of the script. No events rule: MultiKueue records its events on the manager's objects only
# (pkg/controller/admissionchecks/multikueue/workload.go: recorder.Eventf(group.local, ...)).
TRAINJOB_RULES = (
    _rule(["trainer.kubeflow.org"], ["trainjobs"], JOB_VERBS),
    _rule(["trainer.kubeflow.org"], ["trainjobs/status"], ["get"]),
)
CLUSTER_RULES = (*SCRIPT_RULES, *TRAINJOB_RULES)


def enabled(cfg: StackConfig) -> bool:
    return cfg.fleet is not None and cfg.fleet.role == "worker"


def _meta(name: str, namespace: str | None = names.FLEET_NAMESPACE, **extra: Any) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {}), "labels": dict(LABELS), **extra}


def _subjects() -> list[dict[str, Any]]:
    return [{"kind": "ServiceAccount", "name": names.SERVICE_ACCOUNT, "namespace": names.FLEET_NAMESPACE}]


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(names.FLEET_NAMESPACE, None)}


def service_account() -> dict[str, Any]:
    # No token of its own in its pods: it runs none; its tokens are the bootstrap's and the rotator's.
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(names.SERVICE_ACCOUNT),
            "automountServiceAccountToken": False}


def cluster_role() -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _meta(names.CLUSTER_ROLE, None),
            "rules": [dict(r) for r in CLUSTER_RULES]}


def cluster_role_binding() -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": _meta(names.CLUSTER_ROLE, None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": names.CLUSTER_ROLE},
            "subjects": _subjects()}


def token_role() -> dict[str, Any]:
    """Its own tokens (TokenRequest is `create` on serviceaccounts/token, by the account's name) and the anchor
    Secrets they are bound to, in this namespace only. `create` cannot be limited to names (RBAC docs: the name
    is not known at authorization), nor can a rotation's new anchor name be known: Secrets by verb only; the
    namespace holds nothing but the anchors and the bootstrap token (its own)."""
    return {"apiVersion": RBAC_API, "kind": "Role", "metadata": _meta(names.TOKEN_ROLE),
            "rules": [_rule([""], ["serviceaccounts/token"], ["create"], [names.SERVICE_ACCOUNT]),
                      _rule([""], ["secrets"], ["get", "list", "create", "delete"])]}


def token_role_binding() -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": _meta(names.TOKEN_ROLE),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.TOKEN_ROLE},
            "subjects": _subjects()}


# pulumi-kubernetes (>= 4.18) waits on create until this JSONPath exists: the token controller has filled the
# Secret (Kubernetes docs, "Manually create a long-lived API token for a ServiceAccount"), so the stack's
# `fleetAccess` output, read from the live Secret after it, has the token.
WAIT_FOR_TOKEN = {"pulumi.com/waitFor": "jsonpath={.data.token}"}


def bootstrap_secret() -> dict[str, Any]:
    """The one long-lived token: the manager's first credential, used to start the rotation, never deleted by it
    (a manager kubeconfig Secret made again from `fleetAccess` still works)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": _meta(names.BOOTSTRAP_SECRET, annotations={
                "kubernetes.io/service-account.name": names.SERVICE_ACCOUNT, **WAIT_FOR_TOKEN})}


def objects(cfg: StackConfig) -> list[dict[str, Any]]:
    """Everything a worker renders, in apply order ([] for any other stack)."""
    if not enabled(cfg):
        return []
    return [namespace(), service_account(), cluster_role(), cluster_role_binding(), token_role(),
            token_role_binding(), bootstrap_secret()]


def access(server: str, ca_data: str, token: str) -> dict[str, str]:
    """The `fleetAccess` output's value (exported as a secret): what the manager's first kubeconfig holds."""
    return {"server": server, "certificateAuthorityData": ca_data, "token": token}
