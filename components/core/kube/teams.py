"""Teams in Kueue and Kubernetes (pure): a ClusterQueue per team in one cohort, fair sharing, access, guards.

Kueue v0.19.2, v1beta2 (apis/kueue/v1beta2/clusterqueue_types.go):

- Every ClusterQueue of the stack joins the cohort `gpucluster` (spec.cohortName):
  the training namespace's queue keeps what the teams are not guaranteed, each
  team's queue its guarantee, and the cohort's capacity is their sum, the
  pools at maxNodes. Idle quota of any of them is lent to the others.
- Fair sharing (the manager's `fairSharing` section, components.core.kube.queueing)
  divides what is borrowed by each queue's spec.fairSharing.weight.
- preemption.reclaimWithinCohort Any: a queue within its nominal quota takes
  lent capacity back from a borrowing queue whatever the priorities
  (pkg/scheduler/preemption/preemption.go: reason InCohortReclamation).
  Only a queue that is borrowing on the contested flavor and resource is a
  victim (preemption.go findCandidates, cqIsBorrowing): a team running within
  its guarantee is never preempted by another team. withinClusterQueue Never:
  a team's own jobs never preempt each other; priority orders its queue and
  picks the first victim among its borrowed jobs.
- The system flavor (launchers, chiefs) is split evenly among the queues, so
  a team's launchers never borrow: a queue that borrows anything could be
  picked as a victim on that account.

Access: each team's Kubernetes group (its members' EKS access entries, components/aws)
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

from components.core.config import SystemNodesConfig
from components.core.config.teams import TeamConfig
from components.core.kube import nodepool, queueing

COHORT = "gpucluster"
# Kueue's fair sharing: preempt when the preemptor's share after admission is at most the victim's
# queue's share before, then when the preemptor's share is below the victim's (the two strategies
# Kueue allows together, in this order: pkg/config/validation.go at v0.19.2).
FAIR_SHARING = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
PREEMPTION = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
ROLE = "gpucluster-team-member"
PRIORITY_POLICY = "gpucluster-team-jobs"

# The job kinds a member may create (Kueue's integrations we enable, queueing.INTEGRATIONS), with
# their API groups and resources.
JOB_RESOURCES = (("batch", "jobs"), ("kubeflow.org", "mpijobs"), ("trainer.kubeflow.org", "trainjobs"),
                 ("jobset.x-k8s.io", "jobsets"))
JOB_VERBS = ["create", "get", "list", "watch", "delete"]
READ_VERBS = ["get", "list", "watch"]


def cluster_queue_name(team: TeamConfig) -> str:
    return f"{queueing.CLUSTER_QUEUE}-team-{team.name}"


def namespaces(teams: Sequence[TeamConfig]) -> list[str]:
    return [t.namespace for t in teams]


def guaranteed_nodes(team: TeamConfig, pool: nodepool.Pool) -> int:
    share = team.pools.get(pool.name)
    if share is None or pool.is_cpu:
        return 0
    return share.guaranteed_nodes(pool.max_nodes, pool.instance.gpu_count)


def _limit_nodes(gpus: int | None, pool: nodepool.Pool) -> int | None:
    return None if gpus is None else gpus // pool.instance.gpu_count


def team_flavor(team: TeamConfig, pool: nodepool.Pool, resources: Sequence[str]) -> dict[str, Any]:
    """The team's quota on one pool's flavor: its guarantee, and the limits it set, in whole nodes."""
    share = team.pools.get(pool.name)
    nominal = queueing.pool_quota_nodes(pool, resources, guaranteed_nodes(team, pool))
    borrow = _limit_nodes(share.borrow_limit_gpus, pool) if share is not None else None
    lend = _limit_nodes(share.lend_limit_gpus, pool) if share is not None else None
    limits = {"borrowingLimit": borrow, "lendingLimit": lend}
    rows = []
    for r in resources:
        row = {"name": r, "nominalQuota": nominal[r]}
        for key, nodes in limits.items():
            if nodes is not None:
                row[key] = queueing.pool_quota_nodes(pool, resources, nodes)[r]
        rows.append(row)
    return {"name": queueing.flavor_name(pool), "resources": rows}


def system_shares(system: SystemNodesConfig, resources: Sequence[str], queues: int) -> list[dict[str, str]]:
    """The system flavor's quota split among `queues` queues: the first (the training namespace's) keeps what
    does not divide evenly."""
    whole = queueing.system_quota(system, resources)
    shares = []
    for index in range(queues):
        share = {}
        for r, amount in whole.items():
            number, unit = queueing.split_quantity(amount)
            part = number // queues + (number % queues if index == 0 else 0)
            share[r] = f"{part}{unit}"
        shares.append(share)
    return shares


def _flavors(system_share: dict[str, str], pool_flavors: list[dict[str, Any]],
             resources: Sequence[str]) -> list[dict[str, Any]]:
    system = {"name": queueing.SYSTEM_FLAVOR,
              "resources": [{"name": r, "nominalQuota": system_share[r]} for r in resources]}
    return [system, *pool_flavors]


def team_cluster_queue(team: TeamConfig, pools: Sequence[nodepool.Pool], system_share: dict[str, str],
                       stop_policy: str = "None") -> dict[str, Any]:
    resources = queueing.covered_resources(pools)
    return {
        "apiVersion": queueing.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": cluster_queue_name(team)},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
            "cohortName": COHORT,
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": stop_policy,
            "preemption": dict(PREEMPTION),
            # A Quantity; Kueue refuses 0 < weight <= 1n (pkg/webhooks/common.go), the config keeps it > 0.
            "fairSharing": {"weight": format(team.weight, "g")},
            "resourceGroups": [{
                "coveredResources": resources,
                "flavors": _flavors(system_share, [team_flavor(team, p, resources) for p in pools], resources),
            }],
        },
    }


def training_cluster_queue(pools: Sequence[nodepool.Pool], system: SystemNodesConfig, system_share: dict[str, str],
                           namespace: str, teams: Sequence[TeamConfig], stop_policy: str = "None") -> dict[str, Any]:
    """The training namespace's queue in the cohort: each pool less the teams' guarantees, lent while idle."""
    resources = queueing.covered_resources(pools)
    queue = queueing.cluster_queue(pools, system, namespace, stop_policy)
    flavors = []
    for pool in pools:
        nodes = pool.max_nodes - sum(guaranteed_nodes(t, pool) for t in teams)
        quota = queueing.pool_quota_nodes(pool, resources, nodes)
        flavors.append({"name": queueing.flavor_name(pool),
                        "resources": [{"name": r, "nominalQuota": quota[r]} for r in resources]})
    spec = queue["spec"]
    spec["resourceGroups"][0]["flavors"] = _flavors(system_share, flavors, resources)
    spec.update({"cohortName": COHORT, "preemption": dict(PREEMPTION), "fairSharing": {"weight": "1"}})
    return queue


def local_queue(team: TeamConfig) -> dict[str, Any]:
    # Named as the training namespace's, so a job's manifest differs only in its namespace.
    return {"apiVersion": queueing.API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": queueing.LOCAL_QUEUE, "namespace": team.namespace},
            "spec": {"clusterQueue": cluster_queue_name(team)}}


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
