"""A job in a fleet of clusters (Kueue MultiKueue): which cluster a verb talks to, where a job runs, whether its
worker can be reached (draining a worker and destroying a manager: bootstrap/deployed/draining.py).

On the manager, a job's Workload (kueue.x-k8s.io/v1beta2, Kueue v0.19.2 apis/kueue/v1beta2/workload_types.go)
says where the job is: `status.nominatedClusterNames` while MultiKueue dispatches it (the incremental dispatcher
names a few workers at a time), `status.clusterName` once a worker admitted it (reset when the Workload is
evicted), neither while it waits in the manager's queue. A worker is named by its MultiKueueCluster
(components.core.fleet.workers.cluster_name of its stack), whose condition `Active` is False, with a reason and
message, while the manager cannot reach it (pkg/controller/admissionchecks/multikueue/multikueuecluster.go,
updateStatus). The fleet's admission check is CHECK, its state and message in `status.admissionChecks`.

A verb that acts on the manager first checks the cluster it reached is one (ensure_manager: the MultiKueueConfig
MULTIKUEUE_CONFIG exists), and follows a job only to a worker its manager's stack file names (stack_of): never to
whatever the kubeconfig's current context or a cluster's name points at.

The functions above the line are pure; those below it read or write through a Kube, as bootstrap.jobs.ops does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster.api import Kube, KubeError
from bootstrap.cluster.kinds import WORKLOAD, Kind
from bootstrap.jobs import state
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from components.core.config import ConfigError, StackConfig
from components.core.config.cluster import stack_name
from components.core.fleet.names import ADMISSION_CHECK, MULTIKUEUE_CONFIG
from components.core.fleet.workers import cluster_name

# Kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go: MultiKueueCluster, cluster-scoped (kubebuilder
# scope=Cluster), condition type MultiKueueClusterActive = "Active".
MULTIKUEUE_CLUSTER = Kind("MultiKueueCluster", "kueue.x-k8s.io", "v1beta2", "multikueueclusters", namespaced=False)
ACTIVE = "Active"
# Kueue v0.19.2 apis/kueue/v1beta2/multikueue_types.go: MultiKueueConfig, cluster-scoped (kubebuilder scope=Cluster);
# the manager's is MULTIKUEUE_CONFIG (components.core.fleet.manager renders it): what makes a cluster the manager.
MULTIKUEUE_CONFIG_KIND = Kind("MultiKueueConfig", "kueue.x-k8s.io", "v1beta2", "multikueueconfigs", namespaced=False)
# The manager's AdmissionCheck with the MultiKueue controller (components.core.fleet renders it).
CHECK = ADMISSION_CHECK


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


def stack_of(cluster: str, manager: StackConfig | None, manager_stack: str | None = None) -> str:
    """The stack of the worker a MultiKueueCluster names, from the manager's stack file; a FleetError (never a guess
    from the cluster's name) when that file does not name it or could not be read."""
    if (stack := worker_stacks(manager).get(cluster)) is not None:
        return stack
    name = manager.stack if manager is not None else manager_stack or "<manager>"
    why = "names no stack of it in gpucluster:fleet.workers" if manager is not None else "could not be read"
    raise FleetError(f"worker {cluster} (a MultiKueueCluster of the manager) maps to no stack: Pulumi.{name}.yaml "
                     f"{why}; check that file's fleet.workers (each worker's MultiKueueCluster is named as its stack, "
                     "lowercased, other characters as '-'); nothing was done on any worker")


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


@dataclass(frozen=True)
class Target:
    """The cluster a job verb works on: a stack's own, or (`on_manager`) its fleet's manager."""

    kube: Kube
    on_manager: bool
    manager: StackConfig | None  # the manager's config when on_manager and its stack file could be read
    manager_stack: str | None = None  # the manager's stack name when on_manager


def reached(kube: Kube, stack: str, kubeconfig: str | None, context: str | None, current: bool) -> str:
    """Which context connect_stack took for `stack`, and its API server, as people read it."""
    from bootstrap.cluster.connect import contexts, kubeconfig_file

    first, host = kubeconfig_file(kubeconfig), kube.api_client.configuration.host
    if not (first and (context or current or stack in contexts(first))):
        return f"stack {stack}'s `kubeconfig` output ({host})"
    if not context and stack not in contexts(first):
        import yaml

        try:
            with open(first) as f:
                context = f"{(yaml.safe_load(f) or {}).get('current-context')} (its current one)"
        except (OSError, yaml.YAMLError, AttributeError):
            context = "(its current one)"
    return f"context {context or stack} of {first} ({host})"


def ensure_manager(kube: Kube, stack: str, where: Callable[[], str]) -> Kube:
    """`kube` when it is fleet `stack`'s manager (MultiKueueConfig MULTIKUEUE_CONFIG there), else a FleetError
    naming `where()` (reached) and how to pick the manager's cluster."""
    pick = (f"pick the manager's cluster with --context <its context> (without it, the kubeconfig's context named "
            f"{stack}); nothing was done")
    try:
        if kube.get(MULTIKUEUE_CONFIG_KIND, MULTIKUEUE_CONFIG) is not None:
            return kube
    except KubeError as err:
        if err.status != 403:
            raise
        raise FleetError(f"cannot tell whether {where()} is the manager of fleet {stack}: reading MultiKueueConfig "
                         f"{MULTIKUEUE_CONFIG} is forbidden ({err.message}); {pick}") from None
    raise FleetError(f"{where()} is not the manager of fleet {stack}: it has no MultiKueueConfig "
                     f"{MULTIKUEUE_CONFIG} (kueue.x-k8s.io/v1beta2, made by `pulumi up --stack {stack}`); {pick}")


def target(cfg: StackConfig | None, kubeconfig: str | None, context: str | None, fleet: bool,
           load: Callable[[str], StackConfig]) -> Target:
    """`--stack` (cfg) and `--fleet`: a manager stack is its own cluster; a worker's with --fleet its manager's
    (load reads the manager's stack file, for its workers); a stack in no fleet with --fleet is a FleetError.
    Reached as bootstrap.cluster.connect says; a manager is checked to be one (ensure_manager)."""
    from bootstrap.cluster.connect import connect, connect_stack

    if cfg is None or cfg.fleet is None:
        if fleet:
            raise FleetError(not_in_fleet(cfg.stack) if cfg is not None else "--fleet needs --stack: a worker or "
                             "the manager of a fleet")
        return Target(connect(cfg.stack if cfg else None, kubeconfig, context), False, None)
    if not is_manager(cfg) and not fleet:
        return Target(connect_stack(cfg.stack, kubeconfig, context, current=True), False, None)
    name, current = manager_of(cfg) or cfg.stack, is_manager(cfg)  # only the --stack itself may be the current one
    kube = connect_stack(name, kubeconfig, context, current=current)
    ensure_manager(kube, name, lambda: reached(kube, name, kubeconfig, context, current))
    if current:
        return Target(kube, True, cfg, name)
    try:
        manager = load(name)
    except (StackFileError, ConfigError):  # another project's stack, a bad file: its workers are not known
        manager = None
    return Target(kube, True, manager, name)


def worker_kube(cluster: str, manager: StackConfig | None, kubeconfig: str | None,
                manager_stack: str | None = None) -> Kube:
    """The worker a MultiKueueCluster names (stack_of), reached at its stack's context (bootstrap.cluster.connect)."""
    from bootstrap.cluster.connect import connect_stack

    return connect_stack(stack_of(cluster, manager, manager_stack), kubeconfig)
