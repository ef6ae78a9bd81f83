"""The manager's queues (pure): the workers' namespaces, LocalQueues and ClusterQueues, mirrored.

A job queued on the manager is copied to a worker in the same namespace with the same queue label
(MultiKueue), so the manager has every namespace and LocalQueue any worker has, rendered by the functions
that render them for that worker (components.core.kube.queueing, components.core.teams.queues), names and
all. Each ClusterQueue runs the MultiKueue check; its quota per flavor and resource is the sum over the workers
that have it (a job waits on the manager, not on a worker, while the fleet is full). The flavors are the
workers' own, node labels, taints and topology included, with their Topologies: a job that asks for a network
level needs a topology-aware flavor on the manager too, where Kueue v0.19.2 delays the placement to the worker
(pkg/scheduler/flavorassigner/tas_flavorassigner.go: "Delay TAS when MultiKueue is used"), and the labels keep
an h100 job on the h100 flavor's quota. No ProvisioningRequest check there: Kueue refuses it beside MultiKueue
(pkg/cache/scheduler/clusterqueue.go); each worker runs its own.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from components.core.config import StackConfig
from components.core.fleet import manager
from components.core.kube import queueing, trainer
from components.core.placement import topology
from components.core.storage import fsx_volume
from components.core.teams import queues as team_queues

if TYPE_CHECKING:
    from components.core.fleet.workers import FleetMember

# Kubernetes quantity suffixes (k8s.io/apimachinery pkg/api/resource/suffix.go).
_SCALE = {"m": Fraction(1, 1000), "": Fraction(1), "k": Fraction(10**3), "M": Fraction(10**6),
          "G": Fraction(10**9), "T": Fraction(10**12), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
          "Gi": Fraction(2**30), "Ti": Fraction(2**40)}
LIMITS = ("nominalQuota", "borrowingLimit", "lendingLimit")
# Kueue v0.19.2 ClusterQueuePreemption (apis/kueue/v1beta2/clusterqueue_types.go): Never for each kind.
MANAGER_PREEMPTION = {"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"},
                      "withinClusterQueue": "Never"}


def add_quantities(quantities: Sequence[str]) -> str:
    """Their sum: in their unit when they share one, else in base units (thousandths when fractional)."""
    parts = [queueing.split_quantity(q) for q in quantities]
    units = {unit for _, unit in parts}
    if len(units) == 1:
        return f"{sum(n for n, _ in parts)}{units.pop()}"
    total = sum(n * _SCALE[unit] for n, unit in parts)
    return str(int(total)) if total.denominator == 1 else f"{int(total * 1000)}m"


def worker_cluster_queues(cfg: StackConfig) -> list[dict[str, Any]]:
    """A worker's own ClusterQueues, as its Queue component renders them."""
    pools = cfg.all_pools
    if not cfg.teams:
        return [queueing.cluster_queue(pools, cfg.system_nodes, cfg.training_namespace, cfg.stop_policy)]
    return [team_queues.training_cluster_queue(pools, cfg.system_nodes, cfg.training_namespace, cfg.teams,
                                               cfg.stop_policy),
            *(team_queues.team_cluster_queue(t, pools, cfg.system_nodes, cfg.stop_policy) for t in cfg.teams)]


def worker_local_queues(cfg: StackConfig) -> list[dict[str, Any]]:
    return [queueing.local_queue(cfg.training_namespace), *(team_queues.local_queue(t) for t in cfg.teams)]


def _merge(queues: Sequence[dict[str, Any]], stop_policy: str) -> dict[str, Any]:
    """One manager ClusterQueue of the same-named queues of the workers: resources and flavors in first-seen
    order, each limit summed (a borrowing or lending limit only when every worker with that flavor sets it)."""
    merged = copy.deepcopy(queues[0])
    spec = merged["spec"]
    spec.pop("admissionChecksStrategy", None)
    resources: dict[str, None] = {}
    flavors: dict[str, dict[str, dict[str, list[str | None]]]] = {}
    for queue in queues:
        for group in queue["spec"]["resourceGroups"]:
            resources.update(dict.fromkeys(group["coveredResources"]))
            for flavor in group["flavors"]:
                by_resource = flavors.setdefault(flavor["name"], {})
                for res in flavor["resources"]:
                    for limit in LIMITS:
                        by_resource.setdefault(res["name"], {}).setdefault(limit, []).append(res.get(limit))

    def resource(flavor: str, name: str) -> dict[str, Any]:
        limits = flavors[flavor].get(name, {})
        out: dict[str, Any] = {"name": name, "nominalQuota": add_quantities(
            [q for q in limits.get("nominalQuota", []) if q is not None] or ["0"])}
        for limit in LIMITS[1:]:
            given = limits.get(limit, [])
            if given and None not in given:
                out[limit] = add_quantities(given)
        return out

    spec["resourceGroups"] = [{"coveredResources": list(resources), "flavors": [
        {"name": f, "resources": [resource(f, r) for r in resources]} for f in flavors]}]
    spec["admissionChecksStrategy"] = manager.check_strategy()
    spec["stopPolicy"] = stop_policy
    # No preemption on the manager: its quota is the workers' summed, so a job it preempted on one worker
    # might make room for one that then lands on another; each worker preempts for itself, on what it has.
    spec["preemption"] = MANAGER_PREEMPTION
    return merged


@dataclass(frozen=True)
class ManagerQueues:
    namespaces: tuple[str, ...]  # every namespace a worker queues jobs in, first-seen order
    topologies: tuple[dict[str, Any], ...]  # the workers' Kueue Topologies their flavors name
    flavors: tuple[dict[str, Any], ...]
    cluster_queues: tuple[dict[str, Any], ...]
    local_queues: tuple[dict[str, Any], ...]
    runtimes: tuple[dict[str, Any], ...]  # the workers' torchrun ClusterTrainingRuntimes


def manager_queues(cfg: StackConfig, members: Sequence[FleetMember]) -> ManagerQueues:
    """The manager's mirror of its workers' queues; its own pause (cfg.stop_policy) holds every one."""
    namespaces: dict[str, None] = {}
    flavors: dict[str, dict[str, Any]] = {}
    topologies: dict[str, dict[str, Any]] = {}
    by_queue: dict[str, list[dict[str, Any]]] = {}
    local: dict[tuple[str, str], dict[str, Any]] = {}
    runtimes: dict[str, dict[str, Any]] = {}
    for member in members:
        worker = member.config
        namespaces.update(dict.fromkeys([worker.training_namespace, *(t.namespace for t in worker.teams)]))
        for flavor in queueing.resource_flavors(worker.all_pools):  # the first worker's where two differ
            flavors.setdefault(flavor["metadata"]["name"], _labelled(flavor))
        for network in topology.topologies(worker.all_pools):
            topologies.setdefault(network["metadata"]["name"], _labelled(network))
        for queue in worker_cluster_queues(worker):
            by_queue.setdefault(queue["metadata"]["name"], []).append(queue)
        for lq in worker_local_queues(worker):
            local.setdefault((lq["metadata"]["namespace"], lq["metadata"]["name"]), lq)
        # Kueue builds a TrainJob's Workload from its runtime, and Trainer's webhook refuses a TrainJob whose
        # runtime is missing: the workers' runtimes, by name, as the workers render them (their FSx claim too:
        # a worker whose own runtime builds other pod sets than the manager's finishes the copy it was sent,
        # "The prebuilt workload is out of sync with its user job"). Not their default image, which each pulls
        # through its own region's cache: a job's TrainJob names its image, which is what runs.
        for job in worker.jobs:
            if job.launcher == "torchrun":
                rt = trainer.runtime(worker.pool(job.pool), job.max_restarts, fsx_volume.CLAIM_NAME, job.mount_path,
                                     job.termination_grace_period_seconds)
                runtimes.setdefault(rt["metadata"]["name"], rt)
    queues = tuple(_merge(qs, cfg.stop_policy) for qs in by_queue.values())
    return ManagerQueues(tuple(namespaces), tuple(topologies.values()), tuple(flavors.values()), queues,
                         tuple(local.values()), tuple(runtimes.values()))


def _labelled(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["labels"] = {**(out["metadata"].get("labels") or {}), **manager.LABELS}
    return out
