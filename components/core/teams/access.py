"""What a team's members may do (pure): a Role in the team's namespace, and an admission policy on their jobs.

Each team's Kubernetes group (its members' EKS access entries, components/aws/cluster.py)
gets a Role in the team's namespace: jobs of the four kinds we queue, their
pods, logs and events, its Workloads and LocalQueue; nothing cluster-wide.
A ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in
Kubernetes 1.30) refuses a member's job that skips the team's LocalQueue or
names a priority class the team may not use: Kueue itself has no per-queue
list of priority classes, and a job with no queue label is not Kueue's at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.core.config.teams import TeamConfig
from components.core.kube import queueing

ROLE = "gpucluster-team-member"
PRIORITY_POLICY = "gpucluster-team-jobs"

# The job kinds a member may create (Kueue's integrations we enable, queueing.INTEGRATIONS), with
# their API groups and resources.
JOB_RESOURCES = (("batch", "jobs"), ("kubeflow.org", "mpijobs"), ("trainer.kubeflow.org", "trainjobs"),
                 ("jobset.x-k8s.io", "jobsets"))
JOB_VERBS = ["create", "get", "list", "watch", "delete"]
READ_VERBS = ["get", "list", "watch"]


def role(team: TeamConfig) -> dict[str, Any]:
    """What a member may do, in the team's namespace only. The ConfigMaps: `submit` mounts a job's scripts
    from one; the Secrets: a job's secret env."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": ROLE, "namespace": team.namespace},
        "rules": [
            *({"apiGroups": [group], "resources": [resource], "verbs": list(JOB_VERBS)}
              for group, resource in JOB_RESOURCES),
            {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": list(JOB_VERBS)},
            {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "services"], "verbs": list(READ_VERBS)},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": list(READ_VERBS)},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": list(READ_VERBS)},
        ],
    }


def role_binding(team: TeamConfig) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": ROLE, "namespace": team.namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team.group}],
    }


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(f"'{v}'" for v in values) + "]"


def admission_policy(team: TeamConfig) -> dict[str, Any]:
    """A member's job must go through the team's LocalQueue, at a priority class the team may use.

    Matched on CREATE and UPDATE (Kueue copies a job's priority label to its Workload on update,
    pkg/controller/jobframework/reconciler.go), only for requests by the team's group: the operators'
    own child objects (an MPIJob's launcher Job, a TrainJob's JobSet) are created by their controllers."""
    labels = "object.metadata.labels"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"{PRIORITY_POLICY}-{team.name}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
                "resourceRules": [{"apiGroups": [group], "apiVersions": ["*"], "resources": [resource],
                                   "operations": ["CREATE", "UPDATE"]} for group, resource in JOB_RESOURCES],
            },
            "matchConditions": [{"name": "by-a-member", "expression": f"'{team.group}' in request.userInfo.groups"}],
            "validations": [
                {"expression": f"has({labels}) && '{queueing.QUEUE_LABEL}' in {labels} && "
                               f"{labels}['{queueing.QUEUE_LABEL}'] == '{queueing.LOCAL_QUEUE}'",
                 "message": f"team {team.name}: a job must carry the label {queueing.QUEUE_LABEL}: "
                            f"{queueing.LOCAL_QUEUE} (the team's queue)",
                 "reason": "Forbidden"},
                {"expression": f"has({labels}) && '{queueing.PRIORITY_LABEL}' in {labels} && "
                               f"{labels}['{queueing.PRIORITY_LABEL}'] in {_cel_list(team.priority_classes)}",
                 "message": f"team {team.name}: {queueing.PRIORITY_LABEL} must be one of "
                            f"{', '.join(team.priority_classes)}",
                 "reason": "Forbidden"},
            ],
        },
    }


def admission_policy_binding(team: TeamConfig) -> dict[str, Any]:
    name = f"{PRIORITY_POLICY}-{team.name}"
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Deny"]}}


# What `status --team` and `submit` read a team's spend through: the API server's proxy to the Prometheus
# Service's web port (bootstrap/jobs/budget.py). RBAC names a proxied service `<name>:<port>` (the path segment).
SPEND_READER = "gpucluster-spend-reader"


def spend_reader_role(namespace: str, service: str, port_name: str) -> dict[str, Any]:
    """Read access to Prometheus's query API through the API server, in the metrics stack's namespace: the
    members see what every team spends (the dashboard's numbers), and nothing else there."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": SPEND_READER, "namespace": namespace},
        "rules": [{"apiGroups": [""], "resources": ["services/proxy"], "resourceNames": [f"{service}:{port_name}"],
                   "verbs": ["get"]}],
    }


def spend_reader_binding(namespace: str, teams: Sequence[TeamConfig]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": SPEND_READER, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SPEND_READER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": t.group} for t in teams],
    }


# A team's pods stay in their sandbox whoever creates them (a member's Job makes its pods through the job
# controller): no privileged container, no host namespaces or host paths, no capability but IPC_LOCK, which
# libfabric's EFA provider needs to pin memory (components.core.kube.workers). The file system is mounted by
# the node for the team's directory only (components.core.storage.fsx_volume); a privileged pod could mount
# its root, or anything else of the node's.
POD_POLICY = "gpucluster-team-pods"
ALLOWED_CAPABILITIES = ("IPC_LOCK",)
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _every_container(condition: str) -> str:
    return " && ".join(f"(!has(object.spec.{field}) || object.spec.{field}.all(c, {condition}))"
                       for field in _CONTAINER_LISTS)


def pod_policy(teams: Sequence[TeamConfig]) -> dict[str, Any]:
    """Pods in the teams' namespaces: no way out to the node (checked on CREATE; a pod's spec is immutable
    where it matters)."""
    context = "has(c.securityContext)"
    checks = [
        ("!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && "
         "object.spec.hostPID) && !(has(object.spec.hostIPC) && object.spec.hostIPC)",
         "a team's pod may not use the node's network, process or IPC namespace"),
        ("!has(object.spec.volumes) || object.spec.volumes.all(v, !has(v.hostPath))",
         "a team's pod may not mount a path of the node (hostPath)"),
        (_every_container(f"!({context} && has(c.securityContext.privileged) && c.securityContext.privileged)"),
         "a team's pod may not run a privileged container"),
        (_every_container(f"!({context} && has(c.securityContext.capabilities) && "
                          "has(c.securityContext.capabilities.add)) || "
                          f"c.securityContext.capabilities.add.all(cap, cap in {_cel_list(ALLOWED_CAPABILITIES)})"),
         f"a team's pod may add no capability but {', '.join(ALLOWED_CAPABILITIES)}"),
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POD_POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                                            "values": [t.namespace for t in teams]}]},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                                   "operations": ["CREATE"]}],
            },
            "validations": [{"expression": expression, "message": message, "reason": "Forbidden"}
                            for expression, message in checks],
        },
    }


def pod_policy_binding() -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": POD_POLICY}, "spec": {"policyName": POD_POLICY, "validationActions": ["Deny"]}}
