"""Pause and the scale-ups it must not leave running: the ProvisioningRequests of jobs that wait in a stopped queue.

On a pool with atomic scale-up (gpuPools[].atomicScaleUp), Kueue asks cluster-autoscaler for a job's nodes with a
ProvisioningRequest once it reserves the job's quota, before admitting it. A paused ClusterQueue (stopPolicy Hold
or HoldAndDrain) takes the reservation back from every job not yet admitted (Kueue v0.19.2 pkg/controller/core/
workload_controller.go reconcileOnClusterQueueActiveState, "the ClusterQueue is stopped"), but the provisioning
controller leaves that job's request alone: it returns early for a Workload without quota reservation that is neither
finished nor evicted (pkg/controller/admissionchecks/provisioning/controller.go Reconcile), and only an eviction or a
finish deletes requests (CleanupProvisioningRequestsOnEviction, beta and on in 0.19). So cluster-autoscaler would
go on scaling the pool up for a job that cannot start, and bill its nodes for the booking time (10 min) plus the
pool's idle time, during the pause. After the pause's `pulumi up`, release() deletes those requests: the
autoscaler stops asking, and nodes it already raised for them go once idle. Kueue makes a new request when resume
gives the job its quota back (attempt 1 again: no request of the job is left).

The functions above the line are pure; release() reads and deletes through a Kube.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster.api import Kube
from bootstrap.cluster.kinds import PROVISIONING_REQUEST, WORKLOAD
from bootstrap.jobs import state

SETTLE_SECONDS = 60.0  # Kueue takes back a stopped queue's reservations within seconds of the ClusterQueue's update
POLL_SECONDS = 2.0


@dataclass(frozen=True)
class Request:
    namespace: str
    name: str
    job: str  # the Workload's job, as `status` names it
    provisioned: bool  # cluster-autoscaler had raised (booked) its nodes already


def _owner(request: dict[str, Any]) -> str | None:
    """The uid of the Workload that controls the request (Kueue sets it as controller, provisioning/controller.go)."""
    for ref in (request.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == "Workload" and ref.get("controller"):
            return ref.get("uid")
    return None


def _job_of(workload: dict[str, Any]) -> str:
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        return ref.get("name") or workload["metadata"]["name"]
    return workload["metadata"]["name"]


def sort_requests(workloads: Iterable[dict[str, Any]], requests: Iterable[dict[str, Any]]
                  ) -> tuple[list[Request], list[Request]]:
    """(stale, unsettled): the requests of jobs that are neither admitted nor holding quota (a stopped queue took it
    back: what release() deletes), and those of jobs that still hold quota unadmitted (Kueue has not applied the
    stop yet: wait). An admitted job's request is its running nodes' (pause `finish` lets it run); a request whose
    Workload is gone is the garbage collector's."""
    by_uid = {(w.get("metadata") or {}).get("uid"): w for w in workloads}
    stale: list[Request] = []
    unsettled: list[Request] = []
    for request in requests:
        workload = by_uid.get(_owner(request))
        if workload is None or state.condition(workload, "Admitted"):
            continue
        meta = request["metadata"]
        found = Request(meta.get("namespace", ""), meta["name"], _job_of(workload),
                        state.condition(request, "Provisioned") is not None)
        (unsettled if state.condition(workload, "QuotaReserved") else stale).append(found)
    return stale, unsettled


def released_line(request: Request) -> str:
    nodes = ("the nodes it raised go once idle" if request.provisioned
             else "the autoscaler stops asking for its nodes")
    return (f"cancelled the scale-up for queued job {request.namespace}/{request.job} (ProvisioningRequest "
            f"{request.name}): {nodes}; resume asks again")


# --- against the cluster -----------------------------------------------------------------------------------------


def release(kube: Kube, namespaces: Iterable[str], out: Callable[[str], None],
            sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
            settle_seconds: float = SETTLE_SECONDS) -> list[str]:
    """Delete the stale requests in `namespaces` until none is unsettled or `settle_seconds` pass; the unsettled
    left (`namespace/request`: jobs Kueue still holds quota for, unadmitted), empty when all is released."""
    namespaces = tuple(namespaces)
    deadline = clock() + settle_seconds
    while True:
        unsettled: list[Request] = []
        for namespace in namespaces:
            requests = kube.list(PROVISIONING_REQUEST, namespace)
            if not requests:
                continue
            stale, waiting = sort_requests(kube.list(WORKLOAD, namespace), requests)
            for request in stale:
                kube.delete(PROVISIONING_REQUEST, request.name, namespace, propagation="Background")
                out(released_line(request))
            unsettled += waiting
        if not unsettled or clock() >= deadline:
            return [f"{r.namespace}/{r.name}" for r in unsettled]
        sleep(POLL_SECONDS)
