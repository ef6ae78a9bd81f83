"""A job's state from the objects the API server returns (pure): phase, its Kueue Workload and queue position,
when it started and ended, what it has cost, its deadline.

Conditions as the pinned operators write them: MPIJob (MPI Operator
v0.8.2, pkg/apis/kubeflow/v2beta1/types.go) Created, Running, Restarting,
Succeeded, Failed, Suspended and status.startTime/completionTime; TrainJob
(Trainer v2.3.0, trainjob_types.go) Suspended, Complete, Failed; Workload
(Kueue v0.19.2, v1beta2) QuotaReserved, Admitted, Evicted, Finished; JobSet
(v0.12.0) Completed, Failed, Suspended; and Workload's
status.admission.clusterQueue. Kueue suspends a queued job and unsuspends
it on admission, so "Queued" is a job whose Workload is not admitted yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from components.core.kube import queueing

JOB_LABEL = "gpucluster.io/job"
POOL_LABEL = "gpucluster.io/pool"
DEADLINE_LABEL = queueing.MAX_EXEC_TIME_LABEL

QUEUED, ADMITTED, RUNNING, SUCCEEDED, FAILED, EVICTED = "Queued", "Admitted", "Running", "Succeeded", "Failed", \
    "Evicted"


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The condition of that type whose status is True, else None."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return c
    return None


def workload_of(job: dict[str, Any], workloads: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Kueue Workload of a job: the one it owns (Kueue sets the job as its owner)."""
    uid = job["metadata"].get("uid")
    for wl in workloads:
        if any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def phase(job: dict[str, Any], workload: dict[str, Any] | None) -> str:
    if condition(job, "Succeeded") or condition(job, "Complete") or condition(job, "Completed"):
        return SUCCEEDED
    if condition(job, "Failed"):
        return FAILED
    if workload is not None and condition(workload, "Evicted") and not condition(workload, "Admitted"):
        return EVICTED
    if workload is None or not condition(workload, "Admitted"):
        return QUEUED
    if condition(job, "Running") or _trainjob_ready(job):
        return RUNNING
    return ADMITTED  # admitted: nodes are being added, pods are starting


def _trainjob_ready(job: dict[str, Any]) -> bool:
    return job["kind"] == "TrainJob" and any((j.get("ready") or 0) > 0 for j in
                                             (job.get("status") or {}).get("jobsStatus") or [])


def nodes(job: dict[str, Any]) -> int:
    """GPU nodes: an MPIJob's workers, a TrainJob's numNodes, a parameter-server JobSet's workers."""
    spec = job.get("spec") or {}
    if job["kind"] == "MPIJob":
        return int(spec["mpiReplicaSpecs"]["Worker"].get("replicas") or 0)
    if job["kind"] == "JobSet":
        return sum(int(rj["template"]["spec"].get("parallelism") or 1) * int(rj.get("replicas") or 1)
                   for rj in spec.get("replicatedJobs") or [] if rj["name"] == "worker")
    return int((spec.get("trainer") or {}).get("numNodes") or 0)


def started_at(job: dict[str, Any], workload: dict[str, Any] | None) -> datetime | None:
    """When it got its nodes: the Workload's admission (both launchers), else the MPIJob's startTime."""
    admitted = condition(workload, "Admitted")
    if admitted:
        return parse_time(admitted.get("lastTransitionTime"))
    return parse_time((job.get("status") or {}).get("startTime"))


def ended_at(job: dict[str, Any]) -> datetime | None:
    status = job.get("status") or {}
    if status.get("completionTime"):
        return parse_time(status["completionTime"])
    for kind in ("Succeeded", "Complete", "Completed", "Failed"):
        if found := condition(job, kind):
            return parse_time(found.get("lastTransitionTime"))
    return None


def deadline_seconds(job: dict[str, Any]) -> int | None:
    spec = job.get("spec") or {}
    if job["kind"] == "MPIJob":
        seconds = (spec.get("runPolicy") or {}).get("activeDeadlineSeconds")
    elif job["kind"] == "JobSet":
        seconds = next((rj["template"]["spec"].get("activeDeadlineSeconds")
                        for rj in spec.get("replicatedJobs") or []), None)
    else:
        seconds = spec.get("activeDeadlineSeconds")
    if seconds is None:
        label = (job["metadata"].get("labels") or {}).get(DEADLINE_LABEL)
        seconds = int(label) if label and label.isdigit() else None
    return int(seconds) if seconds is not None else None


@dataclass(frozen=True)
class Position:
    position: int  # 1 = next
    pending: int
    ahead: tuple[str, ...]
    cluster_queue: str


def queue_position(workload: dict[str, Any], workloads: list[dict[str, Any]]) -> Position | None:
    """Where a pending Workload stands in its queue: by priority, then age (Kueue's BestEffortFIFO order),
    among the workloads of the same LocalQueue not admitted or finished. None once it is admitted."""
    if condition(workload, "Admitted") or condition(workload, "Finished"):
        return None
    queue = (workload.get("spec") or {}).get("queueName")
    pending = [w for w in workloads if (w.get("spec") or {}).get("queueName") == queue
               and w["metadata"].get("namespace") == workload["metadata"].get("namespace")
               and not condition(w, "Admitted") and not condition(w, "Finished")
               and (w.get("spec") or {}).get("active", True) is not False]
    pending.sort(key=lambda w: (-int((w.get("spec") or {}).get("priority") or 0),
                                w["metadata"].get("creationTimestamp") or "", w["metadata"]["name"]))
    names = [w["metadata"]["name"] for w in pending]
    if workload["metadata"]["name"] not in names:
        return None
    index = names.index(workload["metadata"]["name"])
    owners = [_owner_name(w) for w in pending[:index]]
    return Position(index + 1, len(pending), tuple(owners), queue or "")


def _owner_name(workload: dict[str, Any]) -> str:
    refs = workload["metadata"].get("ownerReferences") or []
    return refs[0].get("name", workload["metadata"]["name"]) if refs else workload["metadata"]["name"]


def row(job: dict[str, Any], workload: dict[str, Any] | None, price_per_node_hour: float | None,
        now: datetime | None = None) -> dict[str, Any]:
    """One line of `status`: phase, nodes, elapsed, cost so far, deadline."""
    now = now or datetime.now(UTC)
    start, end = started_at(job, workload), ended_at(job)
    elapsed = ((end or now) - start).total_seconds() if start else 0.0
    count = nodes(job)
    deadline = deadline_seconds(job)
    labels = job["metadata"].get("labels") or {}
    return {
        "name": job["metadata"]["name"], "kind": job["kind"], "phase": phase(job, workload),
        "pool": labels.get(POOL_LABEL), "nodes": count, "startedAt": start.isoformat() if start else None,
        "elapsedSeconds": int(max(0.0, elapsed)),
        "costUsd": round(count * price_per_node_hour * max(0.0, elapsed) / 3600, 2)
        if price_per_node_hour is not None else None,
        "deadlineSeconds": deadline,
        "deadlineLeftSeconds": int(deadline - elapsed) if deadline is not None and start and not end else None,
        "managedBy": labels.get("app.kubernetes.io/managed-by"),
    }
