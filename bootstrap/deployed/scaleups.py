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
gives the job its quota back (named for the check's next attempt: the stop left the check's state as it was).
Only once every ClusterQueue the job namespaces' LocalQueues feed is stopped: before that Kueue would ask again.

The functions above the line are pure; release() reads and deletes through a Kube.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster.api import Kube
from bootstrap.cluster.kinds import CLUSTER_QUEUE, LOCAL_QUEUE, PROVISIONING_REQUEST, WORKLOAD
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


def running_queues(cluster_queues: Iterable[dict[str, Any]], local_queues: Iterable[dict[str, Any]]) -> list[str]:
    """The ClusterQueues the LocalQueues feed that are not stopped (spec.stopPolicy None, the API's default;
    Kueue v0.19.2 apis/kueue/v1beta2/clusterqueue_types.go): the pause is not applied there yet."""
    fed = {(q.get("spec") or {}).get("clusterQueue") for q in local_queues}
    return sorted(q["metadata"]["name"] for q in cluster_queues
                  if q["metadata"]["name"] in fed and (q.get("spec") or {}).get("stopPolicy", "None") == "None")


def released_line(request: Request) -> str:
    nodes = ("the nodes it raised go once idle" if request.provisioned
             else "the autoscaler stops asking for its nodes")
    return (f"cancelled the scale-up for queued job {request.namespace}/{request.job} (ProvisioningRequest "
            f"{request.name}): {nodes}; resume asks again")


# --- against the cluster -----------------------------------------------------------------------------------------


class NotPaused(Exception):
    """The cluster's queues are not stopped: the pause is not applied there (or this is another cluster)."""


def release(kube: Kube, namespaces: Iterable[str], out: Callable[[str], None],
            sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
            settle_seconds: float = SETTLE_SECONDS) -> list[str]:
    """Delete the stale requests in `namespaces` until none is unsettled or `settle_seconds` pass; the jobs left
    (`namespace/job`: Kueue still holds their quota, unadmitted), empty when all is released. NotPaused, and
    nothing deleted, while a ClusterQueue the namespaces' LocalQueues feed is not stopped."""
    namespaces = tuple(namespaces)
    local_queues = [q for namespace in namespaces for q in kube.list(LOCAL_QUEUE, namespace)]
    if running := running_queues(kube.list(CLUSTER_QUEUE), local_queues):
        raise NotPaused(f"ClusterQueue {', '.join(running)} is not stopped (stopPolicy None)")
    deadline = clock() + settle_seconds
    while True:
        unsettled: list[Request] = []
        for namespace in namespaces:
            requests = kube.list(PROVISIONING_REQUEST, namespace)
            if not requests:
                continue
            stale, waiting = sort_requests(kube.list(WORKLOAD, namespace), requests)
            for request in stale:
                if kube.delete(PROVISIONING_REQUEST, request.name, namespace, propagation="Background"):
                    out(released_line(request))
            unsettled += waiting
        if not unsettled or clock() >= deadline:
            return sorted({f"{r.namespace}/{r.job}" for r in unsettled})
        sleep(POLL_SECONDS)
