"""A job Kueue set aside without evaluating it: no QuotaReserved message says why it waits, so doctor infers it from
the Workload's pod sets and the ClusterQueues' quota and usage (team-over-share or waiting-for-quota, as if Kueue
had said it).

Kueue v0.19.2 (with its default feature gates, which the program keeps: components/core/kube/queueing.py sets none):
- SchedulingEquivalenceHashing, Beta and on since v0.18 (pkg/features/kube_features.go L324-328, L824-827): when a
  Workload does not fit (NoFit, or no preemption candidates), its ClusterQueue remembers its shape
  (pkg/cache/queue/cluster_queue.go requeueIfNotPresent L702-707, handleInadmissibleHash L722-735) and sets aside,
  unevaluated, every Workload of that shape pushed after it (PushOrUpdate L441-447) until the queue's inadmissible
  Workloads are retried on a change in its cohort (pkg/cache/queue/inadmissible_workloads.go
  queueInadmissibleWorkloads L163-169). The shape: each pod set's name, count, requests, node selector, affinity and
  tolerations, and the priority (pkg/workload/workload.go computeSchedulingHash L386-429, pkg/util/pod/pod.go
  SpecShape L147-166): not the job's name.
- Only the scheduler writes QuotaReserved=False with the flavor assigner's message and status.resourceRequests
  (pkg/scheduler/scheduler.go requeueAndUpdate L1149-1187). With UnadmittedWorkloadsObservability off (its
  default, kube_features.go L899-901) the workload controller writes QuotaReserved only for a blocked queue
  (pkg/controller/core/workload_controller.go syncQuotaReservedFalseCondition L1977-1999,
  resolveLegacyUnadmittedQuotaReservedCondition L2063-2068, getQueueBlocker L2081-2095); its "Bypassed scheduling
  evaluation because an equivalent workload recently failed" (L2044-2047) is that gate's. So a job set aside has
  no QuotaReserved condition, or only one an earlier state left that says nothing of quota (scheduler.go L477:
  "Workload no longer fits after processing another workload").
- What a pod set asks: its template's requests summed over containers, at least its largest init container's
  (k8s.io/component-helpers PodRequests, read by pkg/workload/workload.go totalRequestsFromPodSets L664-677;
  limits stand for missing requests, pkg/workload/resources.go L122-132), times its count. Its flavor: the pool
  its node selector names (gpucluster.io/pool=<pool>, the nodeLabels of flavor pool-<pool>:
  components/core/kube/queueing.py resource_flavors). What the queue may still take: cohort.py headroom.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence
from bootstrap.doctor.kueue import cohort, rules_queue, rules_teams
from bootstrap.doctor.kueue.cohort import GPU, show
from components.core.kube.nodepool import POOL_LABEL

# The scheduler evaluates a new Workload within about a second of its creation; a job this old with no word from
# Kueue was set aside.
SILENT_AFTER_SECONDS = 10
# QuotaReserved reasons of a Workload waiting its turn (the legacy "Pending"; PendingEvaluation with the gate on),
# and the messages of a blocked queue or a wrong namespace, which are their own cause (queue-inactive).
PENDING_REASONS = {"Pending", "PendingEvaluation", ""}
BLOCKED = re.compile(r"is inactive|doesn't exist|doesn't match ClusterQueue selector")
FEATURE = ("SchedulingEquivalenceHashing, on by default since Kueue v0.18: pkg/cache/queue/cluster_queue.go "
           "PushOrUpdate")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        return None


def age(bundle: Bundle, wl: dict[str, Any]) -> float | None:
    """Seconds from the Workload's creation to the bundle's collection; None when either is unknown."""
    created, collected = _time(_dict(wl.get("metadata")).get("creationTimestamp")), _time(bundle.collected_at)
    if created is None or collected is None or (created.tzinfo is None) != (collected.tzinfo is None):
        return None
    return (collected - created).total_seconds()


def silent(wl: dict[str, Any]) -> dict[str, Any] | None:
    """Why the pending Workload has no say from Kueue: {} (no QuotaReserved condition) or its old QuotaReserved
    condition (a waiting reason, no flavor assigner's message). None when it is admitted, finished, inactive,
    evicted or preempted (their rules speak), or Kueue said why it waits."""
    status = _dict(wl.get("status"))
    if status.get("admission") or _dict(wl.get("spec")).get("active") is False:
        return None
    for ctype in ("Finished", "Admitted", "QuotaReserved", "Evicted", "Preempted", "DeactivationTarget"):
        if _dict(condition(wl, ctype)).get("status") == "True":
            return None
    reserved = condition(wl, "QuotaReserved")
    if reserved is None:
        return {}
    message = reserved.get("message") if isinstance(reserved.get("message"), str) else ""
    if (reserved.get("status") == "False" and reserved.get("reason", "") in PENDING_REASONS
            and not rules_queue.QUOTA_MESSAGE.search(message) and not BLOCKED.search(message)):
        return reserved
    return None


def _pod_gpus(spec: dict[str, Any]) -> float:
    """GPUs one pod asks: its containers' summed, at least its largest init container's."""
    def gpus(container: Any) -> float:
        resources = _dict(_dict(container).get("resources"))
        requests, limits = _dict(resources.get("requests")), _dict(resources.get("limits"))
        return cohort.quantity(requests.get(GPU, limits.get(GPU))) or 0.0
    init = max((gpus(c) for c in _list(spec.get("initContainers"))), default=0.0)
    return max(sum(gpus(c) for c in _list(spec.get("containers"))), init)


def asks(wl: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs the Workload's pod sets ask, by flavor: [{flavor, request, podSets: [(name, count, per pod)]}]. A pod
    set without a pool in its node selector, or asking no GPUs, is left out."""
    by_flavor: dict[str, dict[str, Any]] = {}
    for pod_set in _list(_dict(wl.get("spec")).get("podSets")):
        pod_set = _dict(pod_set)
        spec = _dict(_dict(pod_set.get("template")).get("spec"))
        pool = _dict(spec.get("nodeSelector")).get(POOL_LABEL)
        count = pod_set.get("count", 1)
        per_pod = _pod_gpus(spec)
        if not isinstance(pool, str) or not pool or not isinstance(count, int) or count < 1 or per_pod <= 0:
            continue
        entry = by_flavor.setdefault(cohort.FLAVOR_PREFIX + pool, {"request": 0.0, "podSets": []})
        entry["request"] += count * per_pod
        entry["podSets"].append((str(pod_set.get("name", "?")), count, per_pod))
    return [{"flavor": flavor, **entry} for flavor, entry in sorted(by_flavor.items())]


def _active(cq: dict[str, Any]) -> bool:
    return _dict(condition(cq, "Active")).get("status") != "False"  # a stopped queue: queue-inactive


def _note(reserved: dict[str, Any], seconds: float) -> str:
    said = ("Kueue has written no QuotaReserved condition on the Workload in the "
            f"{show(seconds)} s since its creation" if not reserved else
            "Kueue has not evaluated the Workload since its last QuotaReserved condition, which says nothing of quota")
    return (f"{said}: it has not evaluated the job because an equivalent one (the same pod sets and priority) failed "
            f"to fit, and sets such jobs aside until its cohort's usage changes ({FEATURE}). doctor inferred the wait "
            "from the job's pod sets and the ClusterQueues' quota and usage")


def _evidence(wl: dict[str, Any], reserved: dict[str, Any], ask: dict[str, Any], seconds: float) -> list[Evidence]:
    pods = ", ".join(f"pod set {ps}: {count} x {show(per)} {GPU}" for ps, count, per in ask["podSets"])
    text = (f"not admitted, {'no QuotaReserved condition' if not reserved else 'no quota message'} "
            f"{show(seconds)} s after its creation; {pods}, nodeSelector {POOL_LABEL}="
            f"{cohort.pool_of(ask['flavor'])} (flavor {ask['flavor']})")
    first = [Evidence("status", f"Workload/{name(wl)}", text, _dict(wl.get("metadata")).get("creationTimestamp"))]
    return first + ([condition_evidence(wl, reserved)] if reserved else [])


def inferred(bundle: Bundle, wl: dict[str, Any]) -> Finding | None:
    """team-over-share or waiting-for-quota for a Workload Kueue has said nothing of, when the queues show it cannot
    fit now; None without that evidence."""
    reserved = silent(wl)
    seconds = age(bundle, wl)
    cq = cohort.queue_of(bundle, wl)
    if reserved is None or seconds is None or seconds < SILENT_AFTER_SECONDS or cq is None or not _active(cq):
        return None
    for ask in asks(wl):
        flavor, request = ask["flavor"], ask["request"]
        room = cohort.headroom(bundle, cq, flavor)
        if room is None or request <= room[0]:
            continue  # usage unknown, or the job fits: not a quota wait doctor can show
        available, potential = room
        more, maximum = (None, potential) if request > potential else (request - available, None)
        first, note = _evidence(wl, reserved, ask, seconds), _note(reserved, seconds)
        details = {"inferred": True, "available": available}
        if cohort.cohort(cq) is not None:
            found = rules_teams.share_finding(bundle, wl, cq, flavor, request, more, maximum, "", first, note, details)
            if found is not None:
                return found
        fix = rules_queue.BEYOND_FIX if more is None else rules_queue.WAIT_FIX
        who = cohort.owner(bundle, name(cq))
        numbers = (f"{who} may take {show(available)} more GPUs of {flavor} now (at most {show(potential)}) and the "
                   f"job asks {show(request)}")
        evidence = [*first, Evidence("status", f"ClusterQueue/{name(cq)}", cohort.usage_text(cq, flavor))]
        return Finding("waiting-for-quota", f"Workload {name(wl)} waits for quota in the ClusterQueue", tuple(evidence),
                       f"{numbers}: {fix}. {note}",
                       {"queue": name(cq), "flavor": flavor, "request": request, "maximum": potential, **details})
    return None


def set_aside(bundle: Bundle) -> list[Finding]:
    return [f for wl in bundle.of("Workload") if (f := inferred(bundle, wl))]
