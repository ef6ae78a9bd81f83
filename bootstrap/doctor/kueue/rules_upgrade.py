"""A job queued before its pool got a network topology: the pool's flavor now takes only pod sets that ask for
one, and the job's, made before, asks none, so Kueue never admits it.

Kueue v0.19.2:
- pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS L198-201: 'Flavor "<f>"
  supports only TopologyAwareScheduling' for a pod set that asks for no topology (pkg/workload/workload.go
  IsExplicitlyRequestingTAS L515-521: a required, preferred or unconstrained request, or a slice one) on a flavor
  with spec.topologyName, unless every flavor of the ClusterQueue has one (isTASImplied L219-221; ours hold the
  system flavor, which has none).
- pkg/scheduler/flavorassigner/flavorassigner.go checkFlavorForPodSets L1230-1236 (the reason, per flavor tried),
  Status.Message L353-362 (the reasons sorted and joined with ", ") and Assignment.Message L228-246 ("couldn't
  assign flavors to pod set <ps>: ..."); pkg/scheduler/scheduler.go requeueAndUpdate L1172-1185: QuotaReserved=False
  reason "Pending" and a Warning event "Pending" with that message (the UnadmittedWorkloadsObservability gate off,
  its default: pkg/features/kube_features.go L899-901).
- pkg/controller/jobframework/tas.go L60-88: a Workload's pod sets, their topology request included, come from the
  job's kueue.x-k8s.io/podset-*-topology annotations when Kueue makes the Workload; requeueing never changes them.
A job made since asks for one (components/core/kube/workers.py topology_annotations); bootstrap/jobs/upgrade_gate.py
lists, before `pulumi up`, the jobs this would happen to.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from bootstrap.doctor.bundle import Bundle, name
from bootstrap.doctor.findings import Evidence, Finding, condition, condition_evidence
from bootstrap.doctor.kueue.cohort import pool_of
from bootstrap.doctor.kueue.rules_teams import POD_SET
from components.core.kube.nodepool import POOL_LABEL

CAUSE = "created-before-topology"
ONLY_TAS = re.compile(r'Flavor "(?P<flavor>[^"]+)" supports only TopologyAwareScheduling')


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stranded(wl: dict[str, Any]) -> dict[str, Any] | None:
    """{podSet, flavor, condition} when Kueue refuses the Workload's pod set a flavor for asking no topology;
    None for a finished or deactivated Workload, or one that waits for anything else."""
    finished = _dict(condition(wl, "Finished")).get("status") == "True"
    if finished or _dict(wl.get("spec")).get("active") is False:
        return None
    reserved = condition(wl, "QuotaReserved")
    if not reserved or reserved.get("status") != "False":
        return None
    for pod_set in POD_SET.finditer(str(reserved.get("message") or "")):
        if match := ONLY_TAS.search(pod_set.group("reasons")):
            return {"podSet": pod_set.group("podset"), "flavor": match.group("flavor"), "condition": reserved}
    return None


def _pod_set(wl: dict[str, Any], pod_set: str) -> dict[str, Any]:
    return next((_dict(ps) for ps in _dict(wl.get("spec")).get("podSets") or [] if _dict(ps).get("name") == pod_set),
                {})


def finding(wl: dict[str, Any]) -> Finding | None:
    found = stranded(wl)
    if found is None:
        return None
    pod_set, flavor = found["podSet"], found["flavor"]
    spec = _dict(_pod_set(wl, pod_set))
    selector = _dict(_dict(_dict(spec.get("template")).get("spec")).get("nodeSelector")).get(POOL_LABEL)
    pool = str(selector or pool_of(flavor))
    owner = next((_dict(r) for r in _dict(wl.get("metadata")).get("ownerReferences") or []), {})
    job = str(owner.get("name") or name(wl))
    created = _dict(wl.get("metadata")).get("creationTimestamp")
    evidence = (condition_evidence(wl, found["condition"]),
                Evidence("status", f"Workload/{name(wl)}",
                         f"pod set {pod_set}: {spec.get('count', '?')} pods on pool {pool}, no topology request (no "
                         "kueue.x-k8s.io/podset-required-topology, -preferred-topology or -unconstrained-topology "
                         "annotation)", created))
    title = (f"Workload {name(wl)} never starts: flavor {flavor} takes only jobs that ask for a network topology, "
             f"and its pod set {pod_set} asks none")
    fix = (f"The job was queued before pool {pool} got its network topology (gpuPools[].topology: auto). Kueue fixes "
           "a Workload's pod sets when it makes it, so this one never asks for a topology and never gets "
           f"{flavor} (a queue that also holds a flavor without one, system, implies none). Cancel it and submit it "
           f"again: `python -m bootstrap cancel {job} --stack S`, then `python -m bootstrap submit --stack S {job}` "
           "(a job file: --file; a team's job: --team T), which renders the topology request. It resumes from its "
           "last checkpoint, if it writes them")
    return Finding(CAUSE, title, evidence, fix, {"workload": name(wl), "job": job, "podSet": pod_set,
                                                  "flavor": flavor, "pool": pool})


def created_before_topology(bundle: Bundle) -> list[Finding]:
    return [f for wl in bundle.of("Workload") if (f := finding(wl))]


def unless_stranded(rule: Callable[[Bundle], list[Finding]]) -> Callable[[Bundle], list[Finding]]:
    """`rule` without its findings on the Workloads created-before-topology explains: the flavor assigner's message
    also carries the other flavors' quota reasons (the system flavor's "> maximum capacity (0)" for GPUs), which
    read like a quota wait to waiting-for-quota. (team-over-share passes over a flavor with no GPUs.)"""
    def without(bundle: Bundle) -> list[Finding]:
        mine = {f"Workload/{name(wl)}" for wl in bundle.of("Workload") if stranded(wl)}
        return [f for f in rule(bundle) if not (f.evidence and f.evidence[0].where in mine)]
    without.__name__ = getattr(rule, "__name__", "rule")
    return without
