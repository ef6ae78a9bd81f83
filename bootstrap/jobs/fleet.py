"""A job in a fleet of clusters (Kueue MultiKueue): which cluster a verb talks to, where a job runs, whether its
worker can be reached, and what draining a worker changes.

On the manager, a job's Workload (kueue.x-k8s.io/v1beta2, Kueue v0.19.2 apis/kueue/v1beta2/workload_types.go)
says where the job is: `status.nominatedClusterNames` while MultiKueue dispatches it (the incremental dispatcher
names a few workers at a time), `status.clusterName` once a worker admitted it (reset when the Workload is
evicted), neither while it waits in the manager's queue. A worker is named by its MultiKueueCluster
(components.core.fleet.workers.cluster_name of its stack), whose condition `Active` is False, with a reason and
message, while the manager cannot reach it (pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
updateStatus). The fleet's admission check is CHECK, its state and message in `status.admissionChecks`.

The functions above the line are pure; those below it read or write through a Kube, as bootstrap.jobs.ops does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster.api import Kube, KubeError
from bootstrap.cluster.kinds import CLUSTER_QUEUE, WORKLOAD, Kind
from bootstrap.jobs import state
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from components.core.config import ConfigError, StackConfig
from components.core.config.cluster import stack_name
from components.core.fleet.names import ADMISSION_CHECK
from components.core.fleet.workers import cluster_name

# Kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go: MultiKueueCluster, cluster-scoped (kubebuilder
# scope=Cluster), condition type MultiKueueClusterActive = "Active".
MULTIKUEUE_CLUSTER = Kind("MultiKueueCluster", "kueue.x-k8s.io", "v1beta2", "multikueueclusters", namespaced=False)
ACTIVE = "Active"
# The manager's AdmissionCheck with the MultiKueue controller (components.core.fleet renders it).
CHECK = ADMISSION_CHECK
# Kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go StopPolicy: Hold (admitted workloads run to completion)
# and HoldAndDrain (admitted workloads are evicted); both cancel reservations and admit nothing new.
HOLD, HOLD_AND_DRAIN = "Hold", "HoldAndDrain"


class FleetError(SubmitError):
    """A fleet verb cannot go on as asked (exit 2, as a job verb that could not run); the message says why."""


def manager_of(cfg: StackConfig) -> str | None:
    """The stack name of the fleet's manager: the stack itself when it is one, None when it is in no fleet."""
    if cfg.fleet is None:
        return None
    return cfg.stack if cfg.fleet.role == "manager" else stack_name(cfg.fleet.manager or "")


def is_manager(cfg: StackConfig | None) -> bool:
    return cfg is not None and cfg.fleet is not None and cfg.fleet.role == "manager"


def not_in_fleet(stack: str) -> str:
    return (f"stack {stack} is in no fleet (no gpucluster:fleet in Pulumi.{stack}.yaml): --fleet needs a fleet's "
            "worker or manager (README, \"A fleet of clusters\")")


def worker_stacks(manager: StackConfig | None) -> dict[str, str]:
    """MultiKueueCluster name -> worker stack name, from the manager's fleet.workers ({} when not known)."""
    if not is_manager(manager):
        return {}
    return {cluster_name(stack_name(w.stack)): stack_name(w.stack) for w in manager.fleet.workers}


def stack_of(cluster: str, manager: StackConfig | None) -> str:
    """The stack of the worker a MultiKueueCluster names; the name itself when the manager's file is not read."""
    return worker_stacks(manager).get(cluster, cluster)


@dataclass(frozen=True)
class Placement:
    """Where a job of the manager's queue is: its worker once admitted, the workers nominated while dispatched."""

    worker: str | None
    nominated: tuple[str, ...]
    check_state: str | None  # CHECK's state: Pending, Ready, Retry or Rejected (None: not yet listed)
    check_message: str


def placement(workload: dict[str, Any] | None) -> Placement:
    status = (workload or {}).get("status") or {}
    check = next((c for c in status.get("admissionChecks") or [] if c.get("name") == CHECK), {})
    return Placement(status.get("clusterName") or None, tuple(status.get("nominatedClusterNames") or ()),
                     check.get("state"), check.get("message") or "")


@dataclass(frozen=True)
class Health:
    """A worker as the manager sees it: its MultiKueueCluster's Active condition (None: no such object)."""

    active: bool | None
    since: str | None  # the condition's lastTransitionTime
    reason: str
    message: str


def health(cluster: dict[str, Any] | None) -> Health:
    if cluster is None:
        return Health(None, None, "", "")
    found = next((c for c in (cluster.get("status") or {}).get("conditions") or [] if c.get("type") == ACTIVE), None)
    if found is None:  # not reconciled yet
        return Health(None, None, "", "")
    return Health(found.get("status") == "True", found.get("lastTransitionTime"), found.get("reason") or "",
                  found.get("message") or "")


def when(timestamp: str | None) -> str:
    """"2026-12-05T11:40:00Z" as people read it: "2026-12-05 11:40 UTC"."""
    moment = state.parse_time(timestamp)
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment else "an unknown time"


def unreachable(worker: str, h: Health) -> str:
    """"fleet-east (unreachable since <time>: <reason>)", or "fleet-east (unknown to the manager)"."""
    if h.active is None:
        return f"{worker} (no MultiKueueCluster {worker} on the manager, or not connected yet)"
    return f"{worker} (unreachable since {when(h.since)}: {h.reason or h.message or 'no reason given'})"


def worker_cell(p: Placement, h: Health | None) -> str:
    """The WORKER column of `status` on the manager."""
    if p.worker is not None:
        return p.worker if h is None or h.active else unreachable(p.worker, h)
    if p.nominated:
        return f"nominated: {','.join(p.nominated)}"
    if p.check_state in ("Retry", "Rejected"):
        return f"- ({CHECK} {p.check_state}: {p.check_message})" if p.check_message else f"- ({p.check_state})"
    return "-"


def fields(p: Placement, h: Health | None) -> dict[str, Any]:
    """The fleet's part of a `status --json` row."""
    lost = h is not None and p.worker is not None and h.active is not True
    return {"worker": p.worker, "workerActive": None if p.worker is None or h is None else h.active,
            "nominatedWorkers": list(p.nominated),
            "workerUnreachable": {"since": h.since, "reason": h.reason, "message": h.message} if lost else None,
            "fleetCheck": {"state": p.check_state, "message": p.check_message} if p.check_state else None}


def runs_on(job: str, worker: str) -> str:
    return f"job {job} runs on worker {worker}"


def not_started(job: str, p: Placement) -> str:
    where = f"; MultiKueue has offered it to {', '.join(p.nominated)}" if p.nominated else ""
    said = f"; {CHECK}: {p.check_state}: {p.check_message}" if p.check_message else ""
    return (f"job {job} has not started on any worker: it waits in the fleet manager's queue{where}{said} "
            "(`python -m bootstrap status --stack <manager>` shows it)")


def held(cluster_queue: dict[str, Any], policy: str) -> dict[str, Any]:
    """The ClusterQueue with spec.stopPolicy set to `policy` (the rest as read, resourceVersion included)."""
    return {**cluster_queue, "spec": {**(cluster_queue.get("spec") or {}), "stopPolicy": policy}}


def admitted(workloads: list[dict[str, Any]]) -> list[str]:
    """`namespace/name` of each Workload still admitted (condition Admitted True): what a drain waits for."""
    return sorted(f"{w['metadata'].get('namespace')}/{w['metadata']['name']}" for w in workloads
                  if state.condition(w, "Admitted"))


# -- through a Kube ---------------------------------------------------------------------------------------------


def workers_health(kube: Kube) -> dict[str, Health]:
    """Every MultiKueueCluster's health by name; {} when the manager serves none (no MultiKueue CRD) or hides them."""
    try:
        return {c["metadata"]["name"]: health(c) for c in kube.list(MULTIKUEUE_CLUSTER)}
    except KubeError as err:
        if err.status in (403, 404):
            return {}
        raise


def where(kube: Kube, job: dict[str, Any]) -> tuple[Placement, Health | None]:
    """Where a job of the manager runs, and its worker's health (None when it has no worker)."""
    workload = state.workload_of(job, kube.list(WORKLOAD, job["metadata"]["namespace"]))
    p = placement(workload)
    if p.worker is None:
        return p, None
    try:
        return p, health(kube.get(MULTIKUEUE_CLUSTER, p.worker))
    except KubeError as err:
        if err.status in (403, 404):
            return p, None
        raise


def set_stop_policy(kube: Kube, policy: str) -> list[str]:
    """Every ClusterQueue's spec.stopPolicy set to `policy`, live (a PUT of what was read: a conflict re-reads);
    the names of those changed."""
    changed = []
    for queue in kube.list(CLUSTER_QUEUE):
        name = queue["metadata"]["name"]
        for _ in range(3):
            if (queue.get("spec") or {}).get("stopPolicy") == policy:
                break
            try:
                kube._call("PUT", CLUSTER_QUEUE.path(None, name), body=held(queue, policy))  # Kube has no update
                changed.append(name)
                break
            except KubeError as err:
                if not err.conflict:
                    raise
                queue = kube.get(CLUSTER_QUEUE, name) or queue
    return changed


def drain(kube: Kube, timeout: float, out: Callable[[str], None], sleep: Callable[[float], None],
          clock: Callable[[], float], every: float = 10.0) -> list[str]:
    """Hold every ClusterQueue with HoldAndDrain and wait until no Workload is admitted, at most `timeout`
    seconds, a line each `every` seconds; what is still admitted then ([] when drained)."""
    changed = set_stop_policy(kube, HOLD_AND_DRAIN)
    out(f"stopPolicy {HOLD_AND_DRAIN} on ClusterQueue {', '.join(changed) or '(none changed: already held)'}: "
        "admitted jobs are evicted, nothing new is admitted")
    deadline = clock() + timeout
    while True:
        left = admitted(kube.list(WORKLOAD))
        if not left or clock() >= deadline:
            return left
        out(f"  waiting for {len(left)} admitted workload{'' if len(left) == 1 else 's'} to leave: "
            f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''} ({int(deadline - clock())} s left)")
        sleep(every)


@dataclass(frozen=True)
class Target:
    """The cluster a job verb works on: a stack's own, or (`on_manager`) its fleet's manager."""

    kube: Kube
    on_manager: bool
    manager: StackConfig | None  # the manager's config when on_manager and its stack file could be read


def target(cfg: StackConfig | None, kubeconfig: str | None, context: str | None, fleet: bool,
           load: Callable[[str], StackConfig]) -> Target:
    """`--stack` (cfg) and `--fleet`: a manager stack is its own cluster; a worker's with --fleet its manager's
    (load reads the manager's stack file, for its workers; unreadable, the workers are named as their clusters);
    a stack in no fleet with --fleet is a FleetError. Reached as bootstrap.cluster.connect says."""
    from bootstrap.cluster.connect import connect, connect_stack

    if cfg is None or cfg.fleet is None:
        if fleet:
            raise FleetError(not_in_fleet(cfg.stack) if cfg is not None else "--fleet needs --stack: a worker or "
                             "the manager of a fleet")
        return Target(connect(cfg.stack if cfg else None, kubeconfig, context), False, None)
    if is_manager(cfg):
        return Target(connect_stack(cfg.stack, kubeconfig, context, current=True), True, cfg)
    if not fleet:
        return Target(connect_stack(cfg.stack, kubeconfig, context, current=True), False, None)
    name = manager_of(cfg)
    kube = connect_stack(name, kubeconfig, context)
    try:
        manager = load(name)
    except (StackFileError, ConfigError):  # another project's stack, a bad file: workers named as their clusters
        manager = None
    return Target(kube, True, manager)


def worker_kube(cluster: str, manager: StackConfig | None, kubeconfig: str | None) -> Kube:
    """The worker a MultiKueueCluster names, reached at its stack's context (bootstrap.cluster.connect)."""
    from bootstrap.cluster.connect import connect_stack

    return connect_stack(stack_of(cluster, manager), kubeconfig)
