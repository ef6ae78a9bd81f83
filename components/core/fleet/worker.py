"""A fleet worker's objects (pure): the manager's identity on it, its rights, and the token it starts with.

Credentials (issue 31: a ClusterProfile with a credentials provider, or a dedicated service-account token):
Kueue v0.19.2's ClusterProfile source needs the MultiKueueClusterProfile feature gate (alpha, off:
pkg/features/kube_features.go) and an access-provider plugin binary beside Kueue (an exec plugin on EKS would be
`aws eks get-token` with an IAM identity the manager's pod holds in every worker's account); so the worker has a
dedicated ServiceAccount, as Kueue's own setup script does
(site/static/examples/multikueue/create-multikueue-kubeconfig.sh at v0.19.2), whose token the manager holds in a
kubeconfig Secret. Not a 15-minute EKS token: a service-account token, rotated by the manager's CronJob
(components.core.fleet_token) and bound to an anchor Secret here so the older one is revoked.

Its rights are the script's, split: reads (get, list, watch) cluster-wide, writes (create, delete, update,
patch) by a RoleBinding in each namespace the worker queues jobs in; and in `gpucluster-fleet` its own tokens
and anchors (create and delete Secrets, never read them: the bootstrap Secret there never expires).
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


# The rules of Kueue v0.19.2's create-multikueue-kubeconfig.sh (site/static/examples/multikueue/, ClusterRole
# multikueue-sa-role) for the kinds we run, in its order: batch Jobs, JobSets, Kueue's Workloads and queues,
# MPIJobs. Left out: its Pod rule (our Kueue enables no pod integration: components.core.kube.queueing
# INTEGRATIONS has no "pod", so MultiKueue never creates Pods on a worker), and its StatefulSet, LeaderWorkerSet,
# TFJob, PaddleJob, PyTorchJob, XGBoostJob, Ray and AppWrapper rules (kinds not in INTEGRATIONS either).
SCRIPT_RULES = (
    _rule(["batch"], ["jobs"], JOB_VERBS),
    _rule(["batch"], ["jobs/status"], ["get"]),
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
# Split by verb. Reads cluster-wide: Kueue watches each kind on the worker in every namespace, by its origin label
# only (pkg/controller/admissionchecks/multikueue/multikueuecluster.go: establishWatch, c.Watch with
# MatchingLabels{MultiKueueOriginLabel} and no namespace; the ClusterQueue and LocalQueue cache handlers of
# startQueueWatchers). Writes only where the worker queues jobs (a RoleBinding in each such namespace): the
# manager's copies land in the namespace of the job it dispatches, which its mirrored LocalQueues confine to those.
READ_VERBS = ("get", "list", "watch")


def _split(rules: tuple[dict[str, Any], ...], read: bool) -> list[dict[str, Any]]:
    """The rules' read verbs (read) or their other verbs, in the script's order; a rule left with none dropped."""
    out = []
    for rule in rules:
        verbs = [v for v in rule["verbs"] if (v in READ_VERBS) == read]
        if verbs:
            out.append({**rule, "verbs": verbs})
    return out


READ_RULES = tuple(_split(CLUSTER_RULES, read=True))
WRITE_RULES = tuple(_split(CLUSTER_RULES, read=False))


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


def job_namespaces(cfg: StackConfig) -> list[str]:
    """Where the worker queues jobs: its training namespace, then each team's (gpucluster:teams order)."""
    return [cfg.training_namespace, *(t.namespace for t in cfg.teams)]


def _role_ref(kind: str, name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def read_role() -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _meta(names.READ_ROLE, None),
            "rules": [dict(r) for r in READ_RULES]}


def read_role_binding() -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "ClusterRoleBinding", "metadata": _meta(names.READ_ROLE, None),
            "roleRef": _role_ref("ClusterRole", names.READ_ROLE), "subjects": _subjects()}


def write_role() -> dict[str, Any]:
    """A ClusterRole granting nothing by itself: only its RoleBindings, one per job namespace, give its rights."""
    return {"apiVersion": RBAC_API, "kind": "ClusterRole", "metadata": _meta(names.WRITE_ROLE, None),
            "rules": [dict(r) for r in WRITE_RULES]}


def write_role_binding(namespace: str) -> dict[str, Any]:
    return {"apiVersion": RBAC_API, "kind": "RoleBinding", "metadata": _meta(names.WRITE_ROLE, namespace),
            "roleRef": _role_ref("ClusterRole", names.WRITE_ROLE), "subjects": _subjects()}


def token_role() -> dict[str, Any]:
    """Its own tokens (TokenRequest is `create` on serviceaccounts/token, by the account's name) and the anchor
    Secrets they are bound to, in this namespace only: `create` and `delete`, never `get`, `list` or `watch`
    (the bootstrap Secret here never expires: a rotated token that could read it would outlive its revocation).
    The rotator knows its anchors from the manager's Secret's annotations. `create` cannot be limited to names
    (RBAC docs: the name is not known at authorization), nor are a rotation's anchor names known in advance."""
    return {"apiVersion": RBAC_API, "kind": "Role", "metadata": _meta(names.TOKEN_ROLE),
            "rules": [_rule([""], ["serviceaccounts/token"], ["create"], [names.SERVICE_ACCOUNT]),
                      _rule([""], ["secrets"], ["create", "delete"])]}


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
    return [namespace(), service_account(), read_role(), read_role_binding(), write_role(),
            *(write_role_binding(ns) for ns in job_namespaces(cfg)), token_role(), token_role_binding(),
            bootstrap_secret()]


def access(server: str, ca_data: str, token: str) -> dict[str, str]:
    """The `fleetAccess` output's value (exported as a secret): what the manager's first kubeconfig holds."""
    return {"server": server, "certificateAuthorityData": ca_data, "token": token}
