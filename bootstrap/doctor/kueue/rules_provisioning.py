"""A job Kueue holds until cluster-autoscaler can add all of its nodes at once (atomic scale-up): its
ProvisioningRequest, what the autoscaler said of it, Kueue's retries, and the second pass that places the job.

Kueue v0.19.2, pkg/controller/admissionchecks/provisioning/:
- provisioning.go ProvisioningRequestName L55-58: attempt n of a Workload's check is the ProvisioningRequest
  "<workload>-<check>-<n>", owned by the Workload (controller.go L350); controller.go syncOwnedProvisionRequest
  L256-360: attempt = the check's retryCount + 1, podSets[].count = the pods of the pod sets that use the
  config's managedResources, a Normal event "ProvisioningRequestCreated" 'Created ProvisioningRequest: "<name>"'.
- controller.go syncCheckStates L617-679: Failed -> check Retry, "Retrying after failure: <msg>", while the
  attempt <= retryStrategy.backoffLimitCount, else Rejected with <msg>; BookingExpired before admission -> Retry
  "Retrying after booking expired: <msg>" (or Rejected); CapacityRevoked -> Rejected; Provisioned -> Ready;
  Accepted with a Provisioned condition -> Pending with that condition's message.
- pkg/workload/admissionchecks.go UpdateAdmissionCheckRequeueState L230-242: retry n waits backoffBaseSeconds x
  2^(n-1), at most backoffMaxSeconds; SyncAdmittedCondition L39-87: Admitted=False "UnsatisfiedChecks" until the
  check is Ready, then "PendingDelayedTopologyRequests" while a pod set's podSetAssignments[].
  delayedTopologyRequest is "Pending" (pkg/scheduler/flavorassigner/tas_flavorassigner.go L99-104: with this
  check on a topology flavor Kueue places the pods only on a second pass, pkg/workload/workload.go
  NeedsSecondPass L940-952).
- pkg/controller/core/workload_controller.go reconcileCheckBasedEviction L969-999: Retry evicts, Evicted=True
  reason "AdmissionCheck", 'Evicted due to AdmissionCheck in Retry state: "<check>" (<msg>)'; Rejected
  deactivates, then (L674-706) Evicted=True "DeactivatedDueToAdmissionCheck", "The workload is deactivated due
  to AdmissionCheck in Rejected state: ...", Warning event "AdmissionCheckRejected". pkg/workload/evict/evict.go
  resetChecksOnEviction L220-240: the check goes back to Pending, "Reset to Pending after eviction. Previously:
  <state>", retryCount + 1 after a Retry; CleanupProvisioningRequestsOnEviction (Beta, on since v0.19,
  pkg/features/kube_features.go L893-895) deletes the evicted Workload's requests.

kubernetes/autoscaler cluster-autoscaler-1.35.2 (the ProvisioningRequest API autoscaling.x-k8s.io/v1,
apis/provisioningrequest/autoscaling.x-k8s.io/v1/types.go: conditions Accepted, Provisioned, Failed,
BookingExpired, CapacityRevoked): processors/provreq/injector.go: Accepted=True "Accepted", "ProvisioningRequest is
accepted by ClusterAutoscaler"; provisioningrequest/besteffortatomic/provisioning_class.go: Provisioned=True
"CapacityIsProvisioned"/"CapacityIsFound", "Capacity is found in the cluster", once it has asked for every node in
one scale-up (allOrNothing, core/scaleup/orchestrator/orchestrator.go), else Provisioned=False "CapacityIsNotFound",
"Capacity is not found, CA will try to find it later." and it tries again after 1 min, doubling to 10 min
(config/flags/flags.go L219-220 defaults); processors/provreq/processor.go: Failed=True "Expired" 7 days after
creation if never provisioned, BookingExpired=True "CapacityReservationTimeExpired" 10 min after Provisioned.
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence
from bootstrap.doctor.kueue import rules_placement, rules_unevaluated
from bootstrap.doctor.kueue.cohort import pool_of
from components.core.kube.autoscaling import MAX_NODE_PROVISION_MINUTES
from components.core.placement import provisioning

CAUSE = "waiting-for-all-nodes"
# The program's AdmissionCheck and its ProvisioningRequestConfig's retryStrategy: Kueue asks again BACKOFF_LIMIT
# times, BACKOFF_BASE s after the first failure, doubling to at most BACKOFF_MAX s.
CHECK = provisioning.NAME
BACKOFF_LIMIT, BACKOFF_BASE, BACKOFF_MAX = (provisioning.RETRY_STRATEGY[k] for k in (
    "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"))
ATTEMPTS = BACKOFF_LIMIT + 1
CREATED = re.compile(r'Created ProvisioningRequest: "(?P<name>[^"]+)"')
WHY = re.compile(r"\((?:Retrying after (?P<after>failure|booking expired): )?(?P<why>.*)\)\s*$", re.S)
BOOKING_EXPIRED = "Capacity reservation time is expired"  # conditions.go CapacityReservationTimeExpiredMsg
PR_CONDITIONS = ("Failed", "CapacityRevoked", "BookingExpired", "Provisioned", "Accepted")
CAPACITY = ("If EC2 lacks {what} capacity: another zone (gpucluster:gpuAvailabilityZone), reserved capacity "
            "(gpuPools[].capacityType CAPACITY_BLOCK or capacityReservationId) or fewer nodes (jobs[].nodes); "
            "gpuPools[].atomicScaleUp: false admits the job on quota alone, and then its nodes join one by one and "
            "a partial set bills while it waits for the rest")
# AWS has no AtomicIncreaseSize: Provisioned=True is a raised desired size, and Kueue places only on Ready nodes.
JOIN = (f"Provisioned=True means cluster-autoscaler has raised the pool's Auto Scaling group, not that the nodes are "
        f"there: they may take up to {MAX_NODE_PROVISION_MINUTES} min to become Ready")
BOOKING = ("Kueue did not place the job in the 10 min cluster-autoscaler booked its nodes for it. On a first attempt "
           f"from zero that is normal: {JOIN}, and the next attempt finds them booting or Ready. If it recurs once "
           "they are Ready: with a required placement they may not share one network domain (placement: {policy: "
           "preferred}, or a broader layer)")
RETRIES = (f"When a request fails, Kueue asks again up to {BACKOFF_LIMIT} times ({BACKOFF_BASE} s later, doubling to "
           f"at most {BACKOFF_MAX} s) and then deactivates the job")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _true(obj: dict[str, Any], ctype: str, reason: str | None = None) -> dict[str, Any] | None:
    cond = condition(obj, ctype)
    return cond if cond and cond.get("status") == "True" and reason in (None, cond.get("reason")) else None


def age(bundle: Bundle, since: Any) -> str | None:
    """"24 min" from `since` to the bundle's collection; None when either is unknown."""
    start, end = rules_placement.parse_time(since), rules_placement.parse_time(bundle.collected_at)
    if start is None or end is None or (start.tzinfo is None) != (end.tzinfo is None) or end < start:
        return None
    minutes = int((end - start).total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def _all(pods: int) -> str:
    return "its node" if pods == 1 else f"all {pods} nodes"


def check_state(wl: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload's state of the atomic scale-up check, when its queue has the check."""
    return next((c for c in _list(_dict(wl.get("status")).get("admissionChecks"))
                 if _dict(c).get("name") == CHECK), None)


def attempt_of(request_name: str, wl: dict[str, Any]) -> int | None:
    match = re.fullmatch(re.escape(f"{name(wl)}-{CHECK}-") + r"(\d+)", request_name)
    return int(match.group(1)) if match else None


def requests_of(bundle: Bundle, wl: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(attempt, ProvisioningRequest) Kueue made for the Workload's check, the latest last."""
    found = [(attempt_of(name(pr), wl), pr) for pr in bundle.of("ProvisioningRequest")]
    return sorted(((n, pr) for n, pr in found if n is not None), key=lambda item: item[0])


def _last_created(bundle: Bundle, wl: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
    events = [e for e in bundle.events if e.get("reason") == "ProvisioningRequestCreated"
              and _dict(e.get("involvedObject")).get("name") == name(wl)]
    for event in reversed(events):
        match = CREATED.search(str(event.get("message") or ""))
        if match and (n := attempt_of(match.group("name"), wl)) is not None:
            return n, event
    return None, None


def gang(wl: dict[str, Any], request: dict[str, Any] | None) -> tuple[int, str]:
    """(GPU pods, pool): the request's pod counts, else the pod sets that ask for GPUs."""
    asks = rules_unevaluated.asks(wl)
    pool = pool_of(asks[0]["flavor"]) if asks else "?"
    if request is not None:
        counts = [_dict(ps).get("count") for ps in _list(_dict(request.get("spec")).get("podSets"))]
        if counts and all(isinstance(c, int) for c in counts):
            return sum(counts), pool
    return sum(count for ask in asks for _, count, _ in ask["podSets"]), pool


def _check_evidence(wl: dict[str, Any], check: dict[str, Any]) -> Evidence:
    text = f"admission check {CHECK} {check.get('state', '?')}"
    text += f": {check['message']}" if check.get("message") else ""
    extra = [f"{key} {check[key]}" for key in ("retryCount", "requeueAfterSeconds") if check.get(key) is not None]
    return Evidence("status", f"Workload/{name(wl)}", text + (f" ({', '.join(extra)})" if extra else ""),
                    check.get("lastTransitionTime"))


def _capacity(bundle: Bundle, pool: str) -> str:
    kind = _dict(bundle.pools.get(pool)).get("instanceType")
    return CAPACITY.format(what=f"{kind}" if isinstance(kind, str) else "the pool's instance")


def _booking(why: re.Match[str] | None) -> bool:
    """Whether the request ended because its booking ran out (the nodes were asked for), not for want of capacity."""
    return why is not None and (why.group("after") == "booking expired" or why.group("why") == BOOKING_EXPIRED)


def _kept(why: re.Match[str] | None) -> str:
    return ("its nodes are no longer booked for it, and cluster-autoscaler removes them after gpuPools[].idleMinutes "
            "idle unless another job takes them" if _booking(why) else "no node was added for it")


def _pending(bundle: Bundle, wl: dict[str, Any], check: dict[str, Any]) -> Finding:
    requests = requests_of(bundle, wl)
    attempt, request = requests[-1] if requests else ((check.get("retryCount") or 0) + 1, None)
    pods, pool = gang(wl, request)
    head = f"Workload {name(wl)} waits for {_all(pods)} of pool {pool} (attempt {attempt} of {ATTEMPTS})"
    hold = (f"Kueue has reserved the job's quota but creates none of its pods until cluster-autoscaler can add "
            f"{_all(pods)} at once (a ProvisioningRequest of class best-effort-atomic-scale-up, all or nothing)")
    idle = (": no node is started for the job, so none bills, while it waits" if attempt == 1 else ": no node is "
            "started for the job while it waits, but nodes an earlier attempt got bill until this one books them or "
            "they idle out (gpuPools[].idleMinutes)")
    evidence: list[Evidence] = []
    if request is None:
        said = (f"its ProvisioningRequest {name(wl)}-{CHECK}-{attempt} is gone" if "ProvisioningRequest" in
                bundle.objects else "the bundle holds no ProvisioningRequests (a cluster without the "
                "autoscaling.x-k8s.io/v1 CRD serves none)")
        title, now = head, (f"{said}; `kubectl get provisioningrequest -n {bundle.namespace} -o yaml` shows "
                            "cluster-autoscaler's answer")
    else:
        conds = {c: cond for c in PR_CONDITIONS if (cond := condition(request, c))}
        evidence = [condition_evidence(request, cond) for cond in conds.values()]
        asked = age(bundle, _dict(request.get("metadata")).get("creationTimestamp"))
        since = f" (Kueue asked {asked} ago)" if asked else ""
        idle += since
        provisioned, failed = conds.get("Provisioned") or {}, _true(request, "Failed")
        if failed or _true(request, "BookingExpired") or _true(request, "CapacityRevoked"):
            ended = failed or _true(request, "BookingExpired") or _true(request, "CapacityRevoked") or {}
            title = f"{head}: cluster-autoscaler ended the request ({ended.get('type')}, {ended.get('reason')})"
            last = attempt > BACKOFF_LIMIT or ended.get("type") == "CapacityRevoked"
            now = "that was its last chance: Kueue deactivates the job" if last else "Kueue asks again after a backoff"
        elif provisioned.get("status") == "True":  # the nodes are on their way, and bill
            title, idle = f"{head}: cluster-autoscaler has asked for them (Provisioned)", since
            now = f"{JOIN}; Kueue marks its check Ready next and places the job once they are"
        elif provisioned.get("status") == "False":
            found = provisioned.get("reason") == "CapacityIsNotFound"
            title = f"{head}: " + ("cluster-autoscaler has not found capacity for them" if found else
                                   f"cluster-autoscaler has not provisioned them ({provisioned.get('reason')})")
            now = ("cluster-autoscaler finds no capacity while the pool's group cannot grow by all of them at once "
                   "(it is at gpuPools[].maxNodes, or in backoff after EC2 refused a launch); it tries again by itself "
                   "after 1 min, doubling to 10 min, and fails the request only 7 days after it was made")
        elif "Accepted" in conds:
            title, now = f"{head}: cluster-autoscaler accepted the request", "it has not decided on a scale-up yet"
        else:
            title, now = f"{head}: cluster-autoscaler has not read the request yet", "it reads one request a loop"
    evidence.append(_check_evidence(wl, check))
    fix = f"{hold}{idle}; {now}. {RETRIES}. {_capacity(bundle, pool)}"
    details = {"workload": name(wl), "pool": pool, "nodes": pods, "attempt": attempt, "attempts": ATTEMPTS,
               "provisioningRequest": name(request) if request else None, "state": "waiting"}
    return Finding(CAUSE, title, tuple(evidence), fix, details)


def _retrying(bundle: Bundle, wl: dict[str, Any], check: dict[str, Any], evicted: dict[str, Any] | None) -> Finding:
    requests = requests_of(bundle, wl)
    created, event = _last_created(bundle, wl)
    failed = requests[-1][0] if requests else created or check.get("retryCount") or 1
    pods, pool = gang(wl, requests[-1][1] if requests else None)
    at = _dict(_dict(wl.get("status")).get("requeueState")).get("requeueAt")
    why = WHY.search(str((evicted or check).get("message") or ""))
    title = (f"Workload {name(wl)} waits to ask again for {_all(pods)} of pool {pool}: attempt {failed} of "
             f"{ATTEMPTS} failed" + (f", Kueue retries at {at}" if at else ""))
    wait = check.get("requeueAfterSeconds")
    said = f" ({why.group('why')})" if why else ""
    first = (f"The nodes of attempt {failed} were booked for the job, and the booking ran out{said}" if _booking(why)
             else f"cluster-autoscaler could not provision attempt {failed}{said}")
    fix = (f"{first}. Kueue released the job's quota and deleted the request; {_kept(why)}. Kueue asks again"
           + (f" {wait} s after the failure" if isinstance(wait, int) else " after a backoff")
           + f" ({BACKOFF_BASE} s after the first, doubling to at most {BACKOFF_MAX} s), {max(ATTEMPTS - failed, 0)} "
           f"attempt(s) left before it deactivates the job. {BOOKING if _booking(why) else _capacity(bundle, pool)}")
    evidence = ([condition_evidence(wl, evicted)] if evicted else []) + [_check_evidence(wl, check)]
    evidence += [event_evidence(event)] if event else []
    details = {"workload": name(wl), "pool": pool, "nodes": pods, "attempt": failed, "attempts": ATTEMPTS,
               "requeueAt": at, "state": "retrying"}
    return Finding(CAUSE, title, tuple(evidence), fix, details)


def _gave_up(bundle: Bundle, wl: dict[str, Any], check: dict[str, Any], why_cond: dict[str, Any] | None) -> Finding:
    requests = requests_of(bundle, wl)
    tried = requests[-1][0] if requests else _last_created(bundle, wl)[0]
    pods, pool = gang(wl, requests[-1][1] if requests else None)
    why = WHY.search(str((why_cond or check).get("message") or ""))
    title = (f"Workload {name(wl)} was deactivated: Kueue gave up on getting {_all(pods)} of pool {pool}"
             + (f" after {tried} attempt{'s' if tried != 1 else ''}" if tried else ""))
    fix = ("Kueue gave up" + (f" ({why.group('why')})" if why else "") + " and will not ask again; "
           f"{_kept(why)}. {BOOKING if _booking(why) else _capacity(bundle, pool)}. Then start it again: `kubectl "
           f"patch workload -n {bundle.namespace} {name(wl)} --type merge -p '{{\"spec\":{{\"active\":true}}}}'`")
    evidence = ([condition_evidence(wl, why_cond)] if why_cond else []) + [_check_evidence(wl, check)]
    evidence += [event_evidence(e) for e in bundle.events if e.get("reason") == "AdmissionCheckRejected"
                 and _dict(e.get("involvedObject")).get("name") == name(wl)][-1:]
    details = {"workload": name(wl), "pool": pool, "nodes": pods, "attempt": tried, "attempts": ATTEMPTS,
               "state": "deactivated"}
    return Finding(CAUSE, title, tuple(evidence), fix, details)


def _second_pass(bundle: Bundle, wl: dict[str, Any], check: dict[str, Any], pod_sets: list[str]) -> Finding:
    requests = requests_of(bundle, wl)
    request = requests[-1][1] if requests else None
    pods, pool = gang(wl, request)
    provisioned = _true(request, "Provisioned") if request else None
    evidence = [condition_evidence(request, provisioned)] if provisioned else [_check_evidence(wl, check)]
    evidence += [condition_evidence(wl, admitted)] if (admitted := condition(wl, "Admitted")) else []
    evidence.append(Evidence("status", f"Workload/{name(wl)}", "pod set " + ", ".join(pod_sets)
                             + ": delayedTopologyRequest Pending, no topologyAssignment"))
    fix = (f"{JOIN}. Kueue places the job on the network topology once {_all(pods)} {'is' if pods == 1 else 'are'} "
           "Ready with GPUs. If that is longer than the 10-min booking (normal for p5 from zero), Kueue asks again, "
           "once or twice, and a retry finds the booting nodes: nothing to do. If it lasts once they are Ready, they "
           "may not fit the job's placement; doctor says so (network-domain) once Kueue reports it")
    details = {"workload": name(wl), "pool": pool, "nodes": pods, "state": "placing"}
    return Finding(CAUSE, f"Workload {name(wl)}: cluster-autoscaler has asked for {_all(pods)} of pool {pool}; Kueue "
                          "places it on the network topology once they are Ready (its second pass)", tuple(evidence),
                   fix, details)


def finding(bundle: Bundle, wl: dict[str, Any]) -> Finding | None:
    check = check_state(wl)
    if check is None or _true(wl, "Finished") or _true(wl, "Admitted"):
        return None
    deactivated = (_true(wl, "Evicted", "DeactivatedDueToAdmissionCheck")
                   or _true(wl, "DeactivationTarget", "AdmissionCheck"))
    if (deactivated and CHECK in str(deactivated.get("message"))) or check.get("state") == "Rejected":
        return _gave_up(bundle, wl, check, deactivated)
    if _dict(wl.get("spec")).get("active") is False:
        return None
    evicted = _true(wl, "Evicted", "AdmissionCheck")
    if (evicted and CHECK in str(evicted.get("message"))) or check.get("state") == "Retry":
        return _retrying(bundle, wl, check, evicted)
    if not _true(wl, "QuotaReserved"):
        return None
    if check.get("state") == "Ready":
        pod_sets = rules_placement.pending_topology(wl)
        return _second_pass(bundle, wl, check, pod_sets) if pod_sets and not rules_placement.tas_wait(bundle, wl) \
            else None
    return _pending(bundle, wl, check)


def waiting_for_all_nodes(bundle: Bundle) -> list[Finding]:
    return [f for wl in bundle.of("Workload") if (f := finding(bundle, wl))]
