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
- The system flavor (launchers, chiefs) is split evenly among the queues, so
  a team's launchers never borrow: a queue that borrows anything could be
  picked as a victim on that account.
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
