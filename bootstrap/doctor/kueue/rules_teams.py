"""Teams that share the cluster through one Kueue cohort: a job past its team's guarantee waiting to borrow, a job
preempted so that the GPUs it borrowed go back to their owner, a team at its monthly budget.

Message formats (kubernetes-sigs/kueue v0.19.2; bootstrap/doctor/kueue/cohort.py cites the ClusterQueue fields):
- pkg/scheduler/flavorassigner/flavorassigner.go Assignment.Message L228-245 and fitsResourceQuota
  L1330-1380: QuotaReserved=False, reason "Pending" (WaitingForQuota/ExceedsMaxQuota with the
  UnadmittedWorkloadsObservability gate, off by default), "couldn't assign flavors to pod set <ps>:
  <reasons>" (pod sets joined by "; ", reasons sorted and joined by ", "): "insufficient unused quota
  for <res> in flavor <f>, <n> more needed" (n = the request less what the queue may still take:
  its unused nominal quota plus what the cohort lends within its borrowingLimit,
  pkg/cache/scheduler/resource_node.go available L106-122) or "insufficient quota for <res> in
  flavor <f>, previously considered podsets requests (<q>) + current podset request (<q>) > maximum
  capacity (<q>)" (potentialAvailable L129-140: nominal + borrowingLimit, or all the cohort could
  ever lend); pkg/scheduler/scheduler.go L293 may append ". Pending the preemption of <n> workload(s)".
- pkg/scheduler/preemption/preemption.go preemptionMessage L177-191: "Preempted to accommodate a
  workload (UID: <uid>, JobUID: <uid>) due to <reason>; preemptor path: /<cohort>/<cq>; preemptee
  path: /<cohort>/<cq>" (buildCQPath L721-730, "UNKNOWN" when missing), the reasons' words
  L162-168; IssuePreemptions L229-263 sets Evicted=True reason "Preempted" (workload_types.go
  L1083) and Preempted=True reason InCohortReclamation / InCohortFairSharing /
  InCohortReclaimWhileBorrowing (workload.go SetPreemptedCondition L973-982, reasons
  workload_types.go L1033-1049), both with that message, and a Normal event "Preempted" on the
  victim Workload. pkg/controller/jobframework/reconciler.go L583-610: once the job stopped,
  Requeued=True reason "Preempted" with the same message. pkg/workload/workload.go
  SetQuotaReservation L893-935: readmission turns Preempted and Evicted False ("Previously: ...").
- Spend: bundle.json `teams` (written by `doctor --collect --stack`, bootstrap/doctor/collect.py
  team_facts): {team: {namespace, monthlyBudgetUsd (gpucluster:teams[].monthlyBudgetUsd), spendUsd
  (month to date, UTC), month, spend (how it was read, or why not)}}.
"""

from __future__ import annotations

import re
from typing import Any

from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence
from bootstrap.doctor.kueue import cohort
from bootstrap.doctor.kueue.cohort import GPU, show

WAIT_REASONS = {"Pending", "WaitingForQuota", "ExceedsMaxQuota"}
POD_SET = re.compile(r"couldn't assign flavors to pod set (?P<podset>\S+): (?P<reasons>.*?)"
                     r"(?=; couldn't assign flavors to pod set |$)", re.S)
UNUSED = re.compile(r"insufficient unused quota for (?P<resource>[^\s,]+) in flavor (?P<flavor>[^\s,]+), "
                    r"(?P<more>[^\s,]+) more needed")
MAXIMUM = re.compile(r"insufficient quota for (?P<resource>[^\s,]+) in flavor (?P<flavor>[^\s,]+), previously "
                     r"considered podsets requests \((?P<before>[^)]*)\) \+ current podset request "
                     r"\((?P<request>[^)]*)\) > maximum capacity \((?P<maximum>[^)]*)\)")
PREEMPTING = re.compile(r"Pending the preemption of (\d+) workload")
PREEMPTED = re.compile(r"Preempted to accommodate a workload \(UID: (?P<uid>[^,]*), JobUID: (?P<job_uid>[^)]*)\) "
                       r"due to (?P<why>.*?); preemptor path: (?P<preemptor>[^\s;]+); "
                       r"preemptee path: (?P<preemptee>[^\s;]+)")
COHORT_REASONS = {"InCohortReclamation": "reclamation within the cohort",
                  "InCohortFairSharing": "Fair Sharing within the cohort",
                  "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing"}
CHECKPOINT = ("it resumes from its last checkpoint if it writes them (GPUCLUSTER_CHECKPOINT_DIR; frequent saves "
              "lose less when borrowed GPUs are taken back)")


def _message(cond: dict[str, Any] | None) -> str:
    value = (cond or {}).get("message")
    return value if isinstance(value, str) else ""


def _unfinished(bundle: Bundle):
    for wl in bundle.of("Workload"):
        finished = condition(wl, "Finished")
        if not (finished and finished.get("status") == "True") and (wl.get("spec") or {}).get("active") is not False:
            yield wl


# -- preempted to give back lent capacity -----------------------------------------------------------


def preemption(wl: dict[str, Any]) -> tuple[str, re.Match[str] | None, list[dict[str, Any]]] | None:
    """(reason, the parsed message, its conditions) when Kueue preempted the Workload for another queue of its
    cohort and has not admitted it again; None otherwise."""
    preempted = condition(wl, "Preempted")
    evicted = condition(wl, "Evicted")
    if preempted and preempted.get("status") == "True" and preempted.get("reason") in COHORT_REASONS:
        reason, source = preempted["reason"], preempted
    elif evicted and evicted.get("status") == "True" and evicted.get("reason") == "Preempted":
        match = PREEMPTED.search(_message(evicted))
        reason = next((r for r, words in COHORT_REASONS.items() if match and match.group("why") == words), None)
        if reason is None:
            return None
        source = evicted
    else:
        return None
    requeued = condition(wl, "Requeued")
    shown = [source] + ([requeued] if requeued and requeued.get("status") == "True" else [])
    return reason, PREEMPTED.search(_message(source)), shown


def _path_queue(match: re.Match[str] | None, group: str) -> str | None:
    path = match.group(group) if match else ""
    return path.rstrip("/").rsplit("/", 1)[-1] if path and path != "UNKNOWN" else None


def team_preempted(bundle: Bundle) -> list[Finding]:
    out = []
    for wl in _unfinished(bundle):
        found = preemption(wl)
        if found is None:
            continue
        reason, match, conds = found
        preemptor, preemptee = _path_queue(match, "preemptor"), _path_queue(match, "preemptee")
        taker = cohort.owner(bundle, preemptor) if preemptor else "another queue of the cohort"
        victim = (cohort.owner(bundle, preemptee) if preemptee else
                  cohort.owner(bundle, name(q)) if (q := cohort.queue_of(bundle, wl)) else "its team")
        if reason == "InCohortFairSharing":
            title = (f"Workload {name(wl)} was preempted for fair sharing: {taker} had less than its share of the "
                     f"cohort's borrowed GPUs, {victim} more")
        else:
            title = f"Workload {name(wl)} was preempted: {taker} took back GPUs {victim} had borrowed"
        requeued = (condition(wl, "Requeued") or {}).get("status") == "True"
        waiting = over_share(bundle, wl)  # why it waits now, when its queue is at its guarantee
        flavor = waiting.details["flavor"] if waiting else None
        fix = (f"{victim} ran past its guarantee on GPUs lent by the cohort, and {taker} asked for them "
               f"({COHORT_REASONS[reason]}). " + ("Kueue requeued the job" if requeued else
                                                  "Kueue requeues the job once its pods have stopped")
               + f": it starts again when the cohort has GPUs for it, and {CHECKPOINT}."
               + (f" The GPUs of {flavor} are held now by {waiting.details['heldBy']}." if waiting else "")
               + " To keep a job from being preempted, run it within the team's guaranteed GPUs (teams[].pools."
               + (cohort.pool_of(flavor) if flavor else "<pool>") + ".guaranteedGpus) or raise them; "
               "borrowLimitGpus caps how far the team borrows")
        evidence = [condition_evidence(wl, c) for c in conds]
        evidence += [event_evidence(e) for e in bundle.events if e.get("reason") == "Preempted"
                     and (e.get("involvedObject") or {}).get("name") == name(wl)][-1:]
        details = {"reason": reason, "preemptor": preemptor, "preemptee": preemptee, "requeued": requeued,
                   "preemptorWorkloadUid": match.group("uid") if match else None}
        out.append(Finding("team-preempted", title, tuple(evidence[:4]), fix, details))
    return out


# -- over its share, waiting to borrow -------------------------------------------------------------


def _gpu_clauses(message: str) -> list[dict[str, Any]]:
    """The GPU reasons of the message: {podset, flavor, more | request, maximum}."""
    out = []
    for pod_set in POD_SET.finditer(message):
        for m in UNUSED.finditer(pod_set.group("reasons")):
            if m.group("resource") == GPU:
                out.append({"podset": pod_set.group("podset"), "flavor": m.group("flavor"),
                            "more": cohort.quantity(m.group("more"))})
        for m in MAXIMUM.finditer(pod_set.group("reasons")):
            maximum = cohort.quantity(m.group("maximum"))
            if m.group("resource") == GPU and maximum:  # 0: a flavor with no GPUs (the system nodes')
                out.append({"podset": pod_set.group("podset"), "flavor": m.group("flavor"), "maximum": maximum,
                            "request": cohort.quantity(m.group("request"))})
    return out


def _requested(wl: dict[str, Any], pod_set: str) -> float | None:
    for request in (wl.get("status") or {}).get("resourceRequests") or []:
        if isinstance(request, dict) and request.get("name") == pod_set:
            return cohort.quantity((request.get("resources") or {}).get(GPU))
    return None


def over_share(bundle: Bundle, wl: dict[str, Any]) -> Finding | None:
    """The finding when the Workload waits for GPUs its queue could only borrow; None otherwise."""
    reserved = condition(wl, "QuotaReserved")
    if not reserved or reserved.get("status") != "False" or reserved.get("reason") not in WAIT_REASONS:
        return None
    message = _message(reserved)
    clauses = _gpu_clauses(message)
    cq = cohort.queue_of(bundle, wl)
    if not clauses or cq is None or cohort.cohort(cq) is None:
        return None
    clause = next((c for c in clauses if "more" in c), clauses[0])  # one that only waits, if any
    request = _requested(wl, clause["podset"]) or clause.get("request")
    return share_finding(bundle, wl, cq, clause["flavor"], request, clause.get("more"), clause.get("maximum"),
                         message, [condition_evidence(wl, reserved)])


def share_finding(bundle: Bundle, wl: dict[str, Any], cq: dict[str, Any], flavor: str, request: float | None,
                  more: float | None, maximum: float | None, message: str, first: list[Evidence],
                  note: str = "", extra: dict[str, Any] | None = None) -> Finding | None:
    """team-over-share for a Workload of `cq` asking `request` GPUs of `flavor`: `more` needed than the queue may
    take now, or `maximum` the most it can ever hold (when `more` is None). None when the queue's usage is unknown
    or the job fits within its guarantee. `first`: the evidence of the wait; `note` ends the fix."""
    pool = cohort.pool_of(flavor)
    used = cohort.usage(cq, flavor)
    if used is None:
        return None
    total, borrowed = used
    nominal, limit = cohort.quota(cq, flavor)
    if not (total >= nominal or (request is not None and total + request > nominal)):
        return None  # within its guarantee: Kueue reclaims lent GPUs for it (waiting-for-quota says the rest)
    who, team = cohort.owner(bundle, name(cq)), cohort.team_of(name(cq)) is not None
    others = cohort.holders(bundle, cq, flavor)
    held = "; ".join(cohort.describe_holder(h) for h in others) or "no other queue of the cohort (its own jobs)"
    limit_text = (f"its borrowing limit is {show(limit)} GPUs" if limit is not None
                  else "it has no borrowing limit")
    asks = f"{show(request)} GPUs" if request is not None else "its GPUs"
    at_limit = limit is not None and (borrowed >= limit or (request is not None and total + request > nominal + limit))
    if more is None:
        title = (f"Workload {name(wl)} asks {asks} of {flavor}, more than {who} can ever hold there "
                 f"({show(maximum)})")
        fix = (f"{who} is guaranteed {show(nominal)} GPUs of {flavor} and {limit_text}: the most it can hold is "
               f"{show(maximum)}, so Kueue never admits this job. Lower jobs[].nodes, or raise "
               + (f"teams[].pools.{pool}.guaranteedGpus or borrowLimitGpus" if team else
                  "gpuPools[].maxNodes or lower the teams' guarantees") + " (`pulumi up`)")
    else:
        uses = (f"uses {show(total - borrowed)} of its {show(nominal)} guaranteed GPUs of {flavor} "
                f"(+{show(borrowed)} borrowed)" if nominal else
                f"has no guarantee on {flavor} and borrows {show(borrowed)} GPUs")
        title = f"Workload {name(wl)} waits to borrow: {who} {uses} and the job needs {show(more)} more"
        idle = None if request is None else max(request - more, 0)
        preempting = PREEMPTING.search(message)
        if at_limit:
            fix = (f"{who} may borrow at most {show(limit)} GPUs of {flavor} past its guarantee and borrows "
                   f"{show(borrowed)}: the job starts when {who}'s own jobs free {show(more)} GPUs, or "
                   f"raise teams[].pools.{pool}.borrowLimitGpus")
        else:
            lend = "none" if not idle else f"only {show(idle)}" if idle is not None else "too few"
            fix = (f"the job asks {asks}, past {who}'s guarantee, and the cohort has {lend} idle to lend ({limit_text}). "
                   f"The GPUs of {flavor} are held by {held}. "
                   + (f"Kueue is preempting {preempting.group(1)} workload(s) for it. " if preempting else "")
                   + "It starts when they free enough; lent GPUs go back to their owners first and idle ones are "
                   "shared by weight (teams[].weight). To run sooner, raise "
                   + (f"teams[].pools.{pool}.guaranteedGpus" if team else "gpuPools[].maxNodes")
                   + " or make the job smaller")
    evidence = [*first, Evidence("status", f"ClusterQueue/{name(cq)}", cohort.usage_text(cq, flavor))]
    evidence += [Evidence("status", f"ClusterQueue/{h['queue']}", cohort.usage_text(cohort.queue(bundle, h["queue"]),
                                                                                     flavor)) for h in others[:2]]
    details = {"queue": name(cq), "flavor": flavor, "guaranteed": nominal, "using": total, "borrowed": borrowed,
               "borrowingLimit": limit, "request": request, "moreNeeded": more,
               "maximum": maximum, "heldBy": held,
               "holders": [{k: h[k] for k in ("queue", "using", "borrowed")} for h in others], **(extra or {})}
    return Finding("team-over-share", title, tuple(evidence), fix + (f". {note}" if note else ""), details)


def explains_wait(bundle: Bundle, wl: dict[str, Any]) -> bool:
    """Whether a team rule reports this waiting Workload (so waiting-for-quota need not)."""
    return preemption(wl) is not None or over_share(bundle, wl) is not None


def team_over_share(bundle: Bundle) -> list[Finding]:
    return [f for wl in _unfinished(bundle) if preemption(wl) is None and (f := over_share(bundle, wl))]


# -- budget reached ---------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def team_budget_reached(bundle: Bundle) -> list[Finding]:
    out = []
    for team, facts in sorted(bundle.teams.items()):
        if not isinstance(facts, dict):
            continue
        budget, spend = _number(facts.get("monthlyBudgetUsd")), _number(facts.get("spendUsd"))
        if budget is None or spend is None or budget <= 0 or spend < budget:
            continue
        month = facts.get("month") if isinstance(facts.get("month"), str) else "this month"
        text = (f"month-to-date spend {spend:,.2f} USD of its monthlyBudgetUsd {budget:,.2f} "
                f"({100 * spend / budget:.0f} %), {month} (UTC)")
        source = facts.get("spend") if isinstance(facts.get("spend"), str) else ""
        evidence = Evidence("metric", f"team {team}" + (f" ({source})" if source else ""), text,
                            bundle.collected_at)
        out.append(Finding(
            "team-budget-reached", f"team {team} has spent its monthly budget ({spend:,.0f} of {budget:,.0f} USD)",
            (evidence,),
            "`bootstrap submit` refuses the team's jobs whose worst-case cost would pass the budget until the month "
            "(UTC) ends, unless an admin overrides it (it says so); jobs already running go on and keep spending. "
            f"Raise team {team}'s teams[].monthlyBudgetUsd and `pulumi up`, or cancel the team's jobs",
            {"team": team, "spendUsd": spend, "monthlyBudgetUsd": budget, "month": facts.get("month")}))
    return out
