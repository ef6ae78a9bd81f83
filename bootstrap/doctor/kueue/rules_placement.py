"""A job Kueue cannot place on the network topology: its pods must share one network domain and none has room (or
the pool has no room for them at all), as Kueue's topology-aware scheduling says; the domains the pool's nodes form.

Kueue v0.19.2:
- pkg/cache/scheduler/tas_flavor_snapshot.go notFitMessage L1997-2017: 'topology "<name>" doesn't allow to fit any
  of <n> pod(s)' or 'topology "<name>" allows to fit only <k> out of <n> pod(s)' (slice(s) for sliced pod sets),
  then ". Total nodes: <t>; excluded: <reasons>" when it excluded nodes (formatReasons L500-522: "nodeSelector: <n>",
  "affinity: <n>", "topologyDomain: <n>", 'taint "<t>": <n>', 'resource "<r>": <n>', sorted); for a required
  domain <k> is what the roomiest domain holds (findLevelWithFitDomains L1336-1390); "no topology domains at level:
  <label>" when no node of the flavor has that level (L1340-1343). A node without room for one pod is counted
  under the resource that fits the fewest pods, the alphabetically first on a tie (fillLeafCounts L1899-1918,
  pkg/resources/requests.go CountInWithLimitingResource).
- pkg/scheduler/flavorassigner/flavorassigner.go L860-871 and Assignment.Message L228-246: the reason is the pod
  set's, in "couldn't assign flavors to pod set <ps>: ..."; on the first pass it is the QuotaReserved=False message
  (scheduler.go requeueAndUpdate L1149-1187); on the second pass, after a ProvisioningRequest, the Workload keeps
  its quota and gets a Warning event "SecondPassFailed" with the same text (L1155-1160), retried within 30 s
  (pkg/cache/queue/second_pass_queue.go L30-34).
- apis/kueue/v1beta2/topology_types.go L28-39: the pod-set annotations kueue.x-k8s.io/podset-required-topology and
  podset-preferred-topology, which Kueue copies to the Workload's podSets[].topologyRequest.required / .preferred
  (workload_types.go L167-182); a Topology's spec.levels[].nodeLabel, broadest first.
- EKS labels topology.k8s.aws/network-node-layer-1 (broadest) to -3 or -4 (closest): components/core/hardware/
  topology.py. What runs on a node: bundle.json gpusInUse (bootstrap/doctor/kueue/collect_placement.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from bootstrap.doctor.bundle import Bundle, event_time, labels, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence, event_evidence
from bootstrap.doctor.kueue import rules_teams
from bootstrap.doctor.kueue.cohort import GPU, quantity
from components.core.hardware import topology as hw
from components.core.kube.nodepool import POOL_LABEL
from components.core.placement.provisioning import RETRY_STRATEGY

CAUSE = "network-domain"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
NOT_FIT = re.compile(r'topology "(?P<topology>[^"]+)" (?:doesn\'t allow to fit any of (?P<none>\d+)|allows to fit only '
                     r'(?P<fit>\d+) out of (?P<of>\d+)) (?P<unit>pod|slice)\(s\)(?:\. Total nodes: (?P<total>\d+); '
                     r'excluded: (?P<excluded>.*?))?(?=\. Pending the preemption|\. Preempting|$)', re.S)
NO_DOMAINS = re.compile(r"no topology domains at level: (?P<level>\S+)")
EXCLUDED_RESOURCE = re.compile(r'resource "[^"]+": (\d+)')
LAYER = re.compile(re.escape(hw.LAYER_LABEL).replace(r"\{\}", r"(\d+)"))
SHOWN_DOMAINS = 5
BOOKING = timedelta(minutes=10)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _true(obj: dict[str, Any], ctype: str) -> bool:
    return _dict(condition(obj, ctype)).get("status") == "True"


def parse_time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        return None


def parse(message: str) -> dict[str, Any] | None:
    """The first pod set's topology reason in a flavor assigner's message: {podSet, topology, pods, fit, unit, total,
    excluded} or {podSet, level, pods: None, fit: 0} (no domain at the level); None without one."""
    for pod_set in rules_teams.POD_SET.finditer(message):
        reasons = pod_set.group("reasons")
        if match := NOT_FIT.search(reasons):
            pods = int(match.group("none") or match.group("of"))
            return {"podSet": pod_set.group("podset"), "topology": match.group("topology"), "pods": pods,
                    "fit": int(match.group("fit") or 0), "unit": match.group("unit"),
                    "total": int(match.group("total")) if match.group("total") else None,
                    "excluded": match.group("excluded")}
        if match := NO_DOMAINS.search(reasons):
            return {"podSet": pod_set.group("podset"), "level": match.group("level"), "pods": None, "fit": 0,
                    "unit": "pod", "topology": None, "total": None, "excluded": None}
    return None


def pending_topology(wl: dict[str, Any]) -> list[str]:
    """The pod sets whose topology Kueue has yet to assign (a delayed topology request, Pending)."""
    admission = _dict(_dict(wl.get("status")).get("admission"))
    return [str(psa.get("name")) for psa in map(_dict, _list(admission.get("podSetAssignments")))
            if psa.get("delayedTopologyRequest") == "Pending" and not psa.get("topologyAssignment")]


def tas_wait(bundle: Bundle, wl: dict[str, Any]) -> dict[str, Any] | None:
    """What Kueue said of the Workload's topology placement, when that is why it waits: parse() plus `pass` (first:
    the QuotaReserved message; second: the latest SecondPassFailed event since its quota was reserved) and
    `evidence`. None for a finished, admitted or deactivated Workload."""
    if _true(wl, "Finished") or _true(wl, "Admitted") or _dict(wl.get("spec")).get("active") is False:
        return None
    reserved = condition(wl, "QuotaReserved") or {}
    if reserved.get("status") == "False":
        found = parse(str(reserved.get("message") or ""))
        return {**found, "pass": "first", "evidence": condition_evidence(wl, reserved)} if found else None
    if reserved.get("status") != "True" or not pending_topology(wl):
        return None
    since = parse_time(reserved.get("lastTransitionTime"))
    for event in reversed(bundle.events):
        if event.get("reason") != "SecondPassFailed" or _dict(event.get("involvedObject")).get("name") != name(wl):
            continue
        when = parse_time(event_time(event))
        if since and when and (since.tzinfo is None) == (when.tzinfo is None) and when < since:
            return None  # from an earlier attempt
        found = parse(str(event.get("message") or ""))
        return {**found, "pass": "second", "evidence": event_evidence(event)} if found else None
    return None


def _pod_set(wl: dict[str, Any], pod_set: str) -> dict[str, Any]:
    return next((ps for ps in map(_dict, _list(_dict(wl.get("spec")).get("podSets"))) if ps.get("name") == pod_set), {})


def wants(pod_set: dict[str, Any]) -> tuple[str, str | None]:
    """(required | preferred | none, the level's node label) the pod set asks of the topology."""
    request = _dict(pod_set.get("topologyRequest"))
    notes = _dict(_dict(_dict(pod_set.get("template")).get("metadata")).get("annotations"))
    for policy, key in (("required", REQUIRED), ("preferred", PREFERRED)):
        label = request.get(policy) or notes.get(key)
        if isinstance(label, str) and label:
            return policy, label
    return "none", None


def _gpus(node: dict[str, Any]) -> float:
    return quantity(_dict(_dict(node.get("status")).get("allocatable")).get(GPU)) or 0.0


def _free(node: dict[str, Any], in_use: dict[str, Any]) -> bool:
    """Ready, schedulable, with GPUs, and no GPU of it requested."""
    ready = _dict(condition(node, "Ready")).get("status") == "True"
    return (ready and not _dict(node.get("spec")).get("unschedulable") and _gpus(node) > 0
            and not quantity(in_use.get(name(node), 0)))


def domains(bundle: Bundle, pool: str, label: str | None) -> dict[str, Any]:
    """The pool's nodes by their value of `label` (all in one group when None): {nodes, unlabeled, known (whether
    doctor read what runs on them), groups: [{domain, nodes, free}], roomiest first}."""
    nodes = [n for n in bundle.of("Node") if labels(n).get(POOL_LABEL) == pool]
    read = _dict(bundle.extra.get("gpusInUse"))
    in_use = read.get("nodes") if isinstance(read.get("nodes"), dict) else None
    groups: dict[str, dict[str, Any]] = {}
    unlabeled = 0
    for node in nodes:
        value = labels(node).get(label) if label else pool
        if not value:
            unlabeled += 1
            continue
        group = groups.setdefault(value, {"domain": value, "nodes": 0, "free": 0})
        group["nodes"] += 1
        group["free"] += 1 if in_use is not None and _free(node, in_use) else 0
    ordered = sorted(groups.values(), key=lambda g: (-g["free"], -g["nodes"], g["domain"]))
    return {"nodes": len(nodes), "unlabeled": unlabeled, "known": in_use is not None, "groups": ordered}


def _domains_text(pool: str, label: str | None, found: dict[str, Any]) -> str:
    groups = found["groups"]
    if not found["nodes"]:
        return f"pool {pool}: no nodes"
    if not label:
        free = f", {sum(g['free'] for g in groups)} free" if found["known"] else ""
        unread = "" if found["known"] else " (what runs on them was not read)"
        return f"pool {pool}: {found['nodes']} nodes{free}{unread}"
    each = [f"{g['domain']}: {g['free']} of {g['nodes']} free" if found["known"] else f"{g['domain']}: {g['nodes']}"
            for g in groups[:SHOWN_DOMAINS]]
    more = f"; {len(groups) - SHOWN_DOMAINS} more" if len(groups) > SHOWN_DOMAINS else ""
    text = f"pool {pool}: {found['nodes']} nodes in {len(groups)} {label} domains: " + "; ".join(each) + more
    text += f"; {found['unlabeled']} without {label}" if found["unlabeled"] else ""
    return text + ("" if found["known"] else " (what runs on them was not read)")


def _wider(bundle: Bundle, topology: str | None, label: str) -> int | None:
    """The layer above `label` (broader), from the Topology's levels or the EKS numbering; None at the top."""
    levels = [str(_dict(lv).get("nodeLabel")) for t in bundle.of("Topology") if name(t) == topology
              for lv in _list(_dict(t.get("spec")).get("levels"))]
    if label in levels and levels.index(label) > 0 and (match := LAYER.fullmatch(levels[levels.index(label) - 1])):
        return int(match.group(1))
    match = LAYER.fullmatch(label)
    return int(match.group(1)) - 1 if match and int(match.group(1)) > 1 else None


def _busy(found: dict[str, Any]) -> str:
    busy = sum(int(n) for n in EXCLUDED_RESOURCE.findall(found.get("excluded") or ""))
    return (f" Of the {found['total']} nodes Kueue counted, {busy} have no room left for one pod." if busy
            and found.get("total") else "")


def _exist(pool: str, nodes: int, pods: int | None, second: bool) -> str:
    if pods is not None and nodes >= pods:
        return ""
    if second:
        return (f" Kueue places pods only on nodes that exist, and pool {pool} has {nodes}: the nodes "
                "cluster-autoscaler asked for may not have joined yet (a node with EFA takes up to 25 min).")
    return (f" Kueue places pods only on nodes that exist, and pool {pool} has {nodes}: with gpuPools[].atomicScaleUp "
            "the job's ProvisioningRequest adds its nodes before Kueue places it; without it nothing adds nodes for a "
            "job Kueue has not admitted.")


def _booked(bundle: Bundle, wl: dict[str, Any]) -> str:
    """When the job's provisioned nodes stop being booked for it: 10 min after its request was Provisioned
    (cluster-autoscaler-1.35.2 processors/provreq/processor.go defaultReservationTime)."""
    uid = _dict(wl.get("metadata")).get("uid")
    times = [parse_time(_dict(condition(pr, "Provisioned")).get("lastTransitionTime"))
             for pr in bundle.of("ProvisioningRequest") if _dict(condition(pr, "Provisioned")).get("status") == "True"
             and any(_dict(ref).get("uid") == uid for ref in _list(_dict(pr.get("metadata")).get("ownerReferences")))]
    until = max((t for t in times if t), default=None)
    when = f" until {(until + BOOKING).strftime('%H:%M:%SZ')}" if until else " for 10 min"
    return (f" The nodes cluster-autoscaler provisioned for the job are booked for it{when}; if Kueue cannot place it "
            f"by then, the request expires and Kueue asks again ({RETRY_STRATEGY['backoffLimitCount']} times, then it "
            "deactivates the job).")


def finding(bundle: Bundle, wl: dict[str, Any]) -> Finding | None:
    found = tas_wait(bundle, wl)
    if found is None:
        return None
    pod_set = _pod_set(wl, found["podSet"])
    policy, label = wants(pod_set)
    pool = str(_dict(_dict(_dict(pod_set.get("template")).get("spec")).get("nodeSelector")).get(POOL_LABEL) or "?")
    pods = found["pods"] if found["pods"] is not None else pod_set.get("count")
    what = "pods" if found["unit"] == "pod" else "slices"
    group = domains(bundle, pool, label if policy == "required" else None)
    evidence = [found["evidence"], Evidence("status", f"Workload/{name(wl)}", f"pod set {found['podSet']}: {pods} "
                                            f"{what}" + (f", {REQUIRED if policy == 'required' else PREFERRED} "
                                                         f"{label}" if label else ", no topology annotation"))]
    evidence.append(Evidence("status", f"Nodes of pool {pool}", _domains_text(pool, label if policy == "required"
                                                                               else None, group)))
    second = found["pass"] == "second"
    later = _booked(bundle, wl) if second else ""
    if "level" in found:
        title = (f"Workload {name(wl)} cannot be placed on the network topology: no node of pool {pool} has "
                 f"{found['level']}")
        fix = (f"Kueue found no {found['level']} domain among pool {pool}'s nodes."
               + _exist(pool, group["nodes"], None, second)
               + later + " Or run the job with placement: {policy: none}")
    elif policy == "required":
        top = group["groups"][0] if group["groups"] and group["known"] else None
        wider = _wider(bundle, found["topology"], label)
        title = (f"Workload {name(wl)} cannot fit in one network domain: its {pods} {what} must share one {label} "
                 f"domain, and the roomiest has room for {found['fit']}")
        fix = (f"The job requires all {pods} {what} in one {label} domain (jobs[].placement policy required; the pod "
               f"set's {REQUIRED}), and Kueue finds room for {found['fit']} at most in any one now"
               + (f" ({top['domain']}: {top['free']} of its {top['nodes']} nodes free)" if top else "") + "."
               + _busy(found) + _exist(pool, group["nodes"], pods, second) + later
               + " Wait for the jobs in a domain to end; or run it with placement: {policy: preferred} (Kueue packs "
               "the pods as close as the free nodes allow and spreads them only when it must)"
               + (f"; or require a broader layer, placement: {{policy: required, layer: {wider}}} (layer 1 is the "
                  "broadest)" if wider else "") + "; or give it fewer nodes (jobs[].nodes)")
    else:
        free = (f" ({sum(g['free'] for g in group['groups'])} of its {group['nodes']} nodes free)" if group["known"]
                else "")
        how = f"prefer one {label} domain but may spread" if policy == "preferred" else "may spread over its domains"
        title = (f"Workload {name(wl)} does not fit on the network topology: room for {found['fit']} of its {pods} "
                 f"{what} on pool {pool}")
        fix = (f"The job's {what} {how}, yet Kueue finds room for only {found['fit']} of {pods} on pool {pool}{free}."
               + _busy(found) + _exist(pool, group["nodes"], pods, second) + later
               + " It starts when running jobs free enough nodes; or give it fewer nodes (jobs[].nodes)")
    details = {"workload": name(wl), "podSet": found["podSet"], "pods": pods, "fit": found["fit"], "policy": policy,
               "level": label or found.get("level"), "topology": found["topology"], "pass": found["pass"],
               "excluded": found["excluded"], "domains": group["groups"] if group["known"] else None}
    return Finding(CAUSE, title, tuple(evidence), fix, details)


def network_domain(bundle: Bundle) -> list[Finding]:
    return [f for wl in bundle.of("Workload") if (f := finding(bundle, wl))]


def unless_topology(rule: Callable[[Bundle], list[Finding]]) -> Callable[[Bundle], list[Finding]]:
    """`rule` without its findings on the Workloads network-domain explains: the flavor assigner's message that
    carries the topology's words reads like a quota wait to waiting-for-quota ("couldn't assign flavors")."""
    def without(bundle: Bundle) -> list[Finding]:
        mine = {f"Workload/{name(wl)}" for wl in bundle.of("Workload") if tas_wait(bundle, wl)}
        return [f for f in rule(bundle) if not (f.evidence and f.evidence[0].where in mine)]
    without.__name__ = getattr(rule, "__name__", "rule")
    return without
