"""Kueue and the operators: waiting for quota, a held queue, pods that never got ready, a bound that ended the job.

Message formats (kubernetes-sigs/kueue v0.19.2, with the UnadmittedWorkloadsObservability
gate at its default, off):
- pkg/scheduler/scheduler.go requeueAndUpdate: QuotaReserved=False, reason "Pending"
  (the granular reasons WaitingForQuota, ExceedsMaxQuota, NoMatchingFlavor when the gate is
  on), message from pkg/scheduler/flavorassigner/flavorassigner.go Assignment.Message:
  "couldn't assign flavors to pod set <ps>: insufficient unused quota for <res> in flavor <f>,
  <n> more needed" or "insufficient quota for <res> in flavor <f>, previously considered
  podsets requests (...) + current podset request (...) > maximum capacity (...)"; the same
  text as a Warning event "Pending" on the Workload.
- pkg/controller/core/workload_controller.go: getQueueBlocker ("ClusterQueue <cq> is
  inactive", "LocalQueue <lq> doesn't exist") under reason "Inadmissible" (legacy) or
  Suspended/Misconfigured; reconcileNotReadyTimeout: Evicted=True reason "PodsReadyTimeout",
  "Exceeded the PodsReady timeout <ns>/<wl>"; triggerDeactivation: DeactivationTarget reason
  "RequeuingLimitExceeded"; reconcileMaxExecutionTime: DeactivationTarget reason
  "MaximumExecutionTimeExceeded" ("exceeding the maximum execution time") and a Warning event
  "MaximumExecutionTimeExceeded" ("The maximum execution time (<n>s) exceeded"); after
  deactivation Evicted=True reason "DeactivatedDueTo<cause>" (pkg/workload/patching
  ReasonWithCause), message "The workload is deactivated due to <message>".
- pkg/cache/scheduler/clusterqueue.go inactiveReason: ClusterQueue Active=False reason
  "Stopped", "Can't admit new workloads: is stopped." (stopPolicy Hold/HoldAndDrain).
- kubeflow/mpi-operator v0.8.2 (release-0.8) pkg/controller/mpi_job_controller.go
  updateMPIJobFailedStatus: the MPIJob's Failed condition copies the launcher Job's, whose
  reason is "DeadlineExceeded" ("Job was active longer than specified deadline", the batch Job
  controller) when runPolicy.activeDeadlineSeconds passes.
- kubeflow/trainer v2.3.0 pkg/apis/trainer/v1alpha1/trainjob_types.go and pkg/constants:
  TrainJob Failed, reason "DeadlineExceeded", "TrainJob exceeded its active deadline".
"""

from __future__ import annotations

import re

from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence
from bootstrap.doctor.kueue import rules_teams

QUOTA_REASONS = {"Pending", "WaitingForQuota", "ExceedsMaxQuota", "NoMatchingFlavor", "WaitingForPreemptedWorkloads",
                 "TopologyPlacementFailed"}
QUOTA_MESSAGE = re.compile(r"assign flavors|quota|flavor \S+ doesn't match|untolerated taint")
INACTIVE_REASONS = {"Inadmissible", "Suspended", "Misconfigured"}
BEYOND_FIX = ("the job asks for more than the pool's whole quota (maxNodes x what a node offers): lower "
              "jobs[].nodes or raise gpuPools[].maxNodes")
WAIT_FIX = ("other admitted jobs hold the pool's quota; this one starts when they finish "
            "(`kubectl get workloads -n NS`, `kubectl get clusterqueue -o wide`), or raise gpuPools[].maxNodes")
BOUND_FIX = ("the job's run-time bound ran out: it is jobs[].runPolicy.activeDeadlineSeconds or the time "
             "jobs[].maxCostUsd buys at the pool's price, whichever is shorter (the plan prints it). Raise the "
             "bound that applies and `pulumi up` (the job is replaced), resuming from the last checkpoint")


def _active_workloads(bundle: Bundle):
    for wl in bundle.of("Workload"):
        finished = condition(wl, "Finished")
        if not (finished and finished.get("status") == "True"):
            yield wl


def waiting_for_quota(bundle: Bundle) -> list[Finding]:
    out = []
    for wl in _active_workloads(bundle):
        reserved = condition(wl, "QuotaReserved")
        if not reserved or reserved.get("status") != "False" or reserved.get("reason") not in QUOTA_REASONS:
            continue
        message = reserved.get("message") or ""
        # After an eviction QuotaReserved is False with reason Pending too, carrying the eviction's message
        # (jobframework/reconciler.go): only the flavor assigner's messages are about quota.
        if not QUOTA_MESSAGE.search(message) or (wl.get("spec") or {}).get("active") is False:
            continue
        if rules_teams.explains_wait(bundle, wl):  # team-over-share or team-preempted says why, and whom it waits on
            continue
        # Kueue tries every flavor of the resource group and joins their reasons: "maximum capacity" for a
        # flavor the pod set can never fit (the system flavor, 0 GPUs) beside "insufficient unused quota"
        # for the pool it fits once others finish (seen on the local control plane). Beyond the pool's
        # whole quota only when no flavor merely lacks unused quota.
        beyond = (("maximum capacity" in message and "insufficient unused quota" not in message)
                  or reserved.get("reason") == "ExceedsMaxQuota")
        out.append(Finding("waiting-for-quota", f"Workload {name(wl)} waits for quota in the ClusterQueue",
                           (condition_evidence(wl, reserved),), BEYOND_FIX if beyond else WAIT_FIX))
    return out


def queue_inactive(bundle: Bundle) -> list[Finding]:
    evidence: list[Evidence] = []
    for wl in _active_workloads(bundle):
        reserved = condition(wl, "QuotaReserved")
        if reserved and reserved.get("status") == "False" and reserved.get("reason") in INACTIVE_REASONS:
            evidence.append(condition_evidence(wl, reserved))
        evicted = condition(wl, "Evicted")
        if evicted and evicted.get("status") == "True" and evicted.get("reason") == "ClusterQueueStopped":
            evidence.append(condition_evidence(wl, evicted))
    stopped = [cq for cq in bundle.of("ClusterQueue")
               if (c := condition(cq, "Active")) and c.get("status") == "False" and c.get("reason") == "Stopped"]
    waiting = [wl for wl in _active_workloads(bundle)
               if not ((c := condition(wl, "QuotaReserved")) and c.get("status") == "True")]
    if not evidence and not (stopped and waiting):
        return []
    evidence += [condition_evidence(cq, condition(cq, "Active")) for cq in stopped]
    misconfigured = any("doesn't exist" in e.text for e in evidence)
    fix = ("the job names a queue that does not exist: its `kueue.x-k8s.io/queue-name` label must be the "
           "stack's LocalQueue (`gpu`); `pulumi up` restores the queue objects" if misconfigured else
           "the ClusterQueue is held (the stack is paused: gpucluster:paused): "
           "`python -m bootstrap resume --stack S` releases it")
    return [Finding("queue-inactive", "the queue admits nothing: ClusterQueue stopped or LocalQueue missing",
                    tuple(evidence[:4]), fix)]


def pods_ready_timeout(bundle: Bundle) -> list[Finding]:
    out = []
    for wl in bundle.of("Workload"):
        evidence = []
        for ctype, reasons in (("Evicted", {"PodsReadyTimeout", "DeactivatedDueToRequeuingLimitExceeded"}),
                               ("DeactivationTarget", {"RequeuingLimitExceeded"})):
            cond = condition(wl, ctype)
            if cond and cond.get("status") == "True" and cond.get("reason") in reasons:
                evidence.append(condition_evidence(wl, cond))
        if evidence:
            gave_up = any("RequeuingLimitExceeded" in e.text for e in evidence)
            out.append(Finding(
                "pods-ready-timeout", f"Workload {name(wl)}: not every pod was ready in time; Kueue evicted it"
                + (" and gave up (deactivated)" if gave_up else " and requeues it"), tuple(evidence),
                "pods waited for nodes or images longer than waitForPodsReady (40 min): see the node and image "
                "findings. The job requeues with backoff at most 5 times" + (
                    "; it is now deactivated: after fixing the cause, `kubectl patch workload -n NS "
                    f"{name(wl)} --type merge -p '{{\"spec\":{{\"active\":true}}}}'`" if gave_up else "")))
    return out


def max_execution_time(bundle: Bundle) -> list[Finding]:
    out = []
    for wl in bundle.of("Workload"):
        evidence = [condition_evidence(wl, c) for c in (condition(wl, "Evicted"), condition(wl, "DeactivationTarget"))
                    if c and c.get("status") == "True" and "MaximumExecutionTimeExceeded" in (c.get("reason") or "")]
        evidence += [event_evidence(e) for e in bundle.events
                     if e.get("reason") == "MaximumExecutionTimeExceeded"
                     and (e.get("involvedObject") or {}).get("name") == name(wl)]
        if evidence:
            seconds = (wl.get("spec") or {}).get("maximumExecutionTimeSeconds")
            out.append(Finding("max-execution-time",
                               f"Workload {name(wl)} ran out of Kueue's maximum execution time"
                               + (f" ({seconds} s)" if seconds else ""), tuple(evidence[:3]), BOUND_FIX))
    return out


def deadline_exceeded(bundle: Bundle) -> list[Finding]:
    out = []
    for kind in ("MPIJob", "TrainJob", "JobSet"):
        for job in bundle.of(kind):
            failed = condition(job, "Failed")
            if failed and failed.get("status") == "True" and failed.get("reason") == "DeadlineExceeded":
                out.append(Finding("deadline-exceeded", f"{kind} {name(job)} ended at its active deadline",
                                   (condition_evidence(job, failed),), BOUND_FIX))
    return out
