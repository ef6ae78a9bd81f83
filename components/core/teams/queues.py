"""A team's queue in Kueue (pure): a ClusterQueue per team in one cohort with the training namespace's.

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
- The system flavor (launchers, chiefs) and CPU pools (parameter servers) are
  held whole by every queue and never lent or borrowed (unshared_flavor): a
  queue that borrows anything is a candidate victim for all its jobs.
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


def unshared_flavor(flavor: str, quota: dict[str, str], resources: Sequence[str]) -> dict[str, Any]:
    """A flavor every queue holds whole and never lends or borrows (borrowingLimit and lendingLimit 0): the
    system nodes' launchers and chiefs, and CPU pools' parameter servers. A queue that borrows anything is a
    candidate victim for all of its jobs on that resource, GPUs included: so nothing of a team's but GPUs
    past its guarantee is ever borrowed. The quota is promised to each queue at once (the nodes hold far more
    launchers than run); what does not fit waits for the scheduler, not for Kueue."""
    return {"name": flavor, "resources": [{"name": r, "nominalQuota": quota[r], "borrowingLimit": "0",
                                           "lendingLimit": "0"} for r in resources]}


def _flavors(pools: Sequence[nodepool.Pool], system: SystemNodesConfig, resources: Sequence[str],
             gpu_flavor) -> list[dict[str, Any]]:
    """The system flavor first, then each pool's: a GPU pool's from `gpu_flavor(pool)`, a CPU pool's unshared."""
    return [unshared_flavor(queueing.SYSTEM_FLAVOR, queueing.system_quota(system, resources), resources),
            *(unshared_flavor(queueing.flavor_name(p), queueing.pool_quota(p, resources), resources) if p.is_cpu
              else gpu_flavor(p) for p in pools)]


def team_cluster_queue(team: TeamConfig, pools: Sequence[nodepool.Pool], system: SystemNodesConfig,
                       stop_policy: str = "None") -> dict[str, Any]:
    resources = queueing.covered_resources(pools)
    return {
        "apiVersion": queueing.API_VERSION, "kind": "ClusterQueue", "metadata": {"name": cluster_queue_name(team)},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
            "cohortName": COHORT,
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": stop_policy,
            # Atomic scale-up on the atomic pools' flavors, as in the training namespace's queue.
            **queueing.admission_checks(pools),
            "preemption": dict(PREEMPTION),
            # A Quantity; Kueue refuses 0 < weight <= 1n (pkg/webhooks/common.go), the config keeps it > 0.
            "fairSharing": {"weight": format(team.weight, "g")},
            "resourceGroups": [{
                "coveredResources": resources,
                "flavors": _flavors(pools, system, resources, lambda p: team_flavor(team, p, resources)),
            }],
        },
    }


def training_cluster_queue(pools: Sequence[nodepool.Pool], system: SystemNodesConfig, namespace: str,
                           teams: Sequence[TeamConfig], stop_policy: str = "None") -> dict[str, Any]:
    """The training namespace's queue in the cohort: each GPU pool less the teams' guarantees, lent while idle."""
    resources = queueing.covered_resources(pools)
    queue = queueing.cluster_queue(pools, system, namespace, stop_policy)

    def remainder(pool: nodepool.Pool) -> dict[str, Any]:
        quota = queueing.pool_quota_nodes(pool, resources, pool.max_nodes - sum(guaranteed_nodes(t, pool)
                                                                                 for t in teams))
        return {"name": queueing.flavor_name(pool), "resources": [{"name": r, "nominalQuota": quota[r]}
                                                                  for r in resources]}

    spec = queue["spec"]
    spec["resourceGroups"][0]["flavors"] = _flavors(pools, system, resources, remainder)
    spec.update({"cohortName": COHORT, "preemption": dict(PREEMPTION), "fairSharing": {"weight": "1"}})
    return queue


def local_queue(team: TeamConfig) -> dict[str, Any]:
    # Named as the training namespace's, so a job's manifest differs only in its namespace.
    return {"apiVersion": queueing.API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": queueing.LOCAL_QUEUE, "namespace": team.namespace},
            "spec": {"clusterQueue": cluster_queue_name(team)}}
