"""What is live of a job, as the events its accounting is made of (accounting.py says what each phase is).

Standard library only (this file ships into the cluster): the job's pods and GPUs, and observe(), which turns
the job, its Workload, pods, nodes and logs into JSON-able events for accounting.merge().
"""

from __future__ import annotations

import json
from datetime import datetime

from . import names
from . import steps as step_lines

VERSION = 1
GPU = "nvidia.com/gpu"
# The pods' labels, set by the operators (tests/e2e select by them on the local control plane): mpi-operator
# v0.8.2 (pkg/apis/kubeflow/v2beta1 JobNameLabel) on launcher and workers; JobSet v0.12.0 (api/jobset/v1alpha2
# jobset_types.go JobSetNameKey, RestartsKey) on every pod, a TrainJob's JobSet being named as the TrainJob.
MPIJOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
SUCCEEDED = ("Succeeded", "Complete", "Completed")  # MPIJob, TrainJob, JobSet (bootstrap/jobs/state.py)
FAILURE_SLACK = 1.0
_MERGED = ("pod", "node")  # one entry per pod uid / node name, updated in place


def job_pod_selector(kind: str, name: str) -> str:
    if kind == "MPIJob":
        return f"{MPIJOB_NAME_LABEL}={name}"
    if kind in ("TrainJob", "JobSet"):
        return f"{JOBSET_NAME_LABEL}={name}"
    raise ValueError(f"no pods known for kind {kind!r}")


def _gpus(resources: dict | None) -> int:
    resources = resources or {}
    values = [(resources.get(k) or {}).get(GPU) for k in ("limits", "requests")]
    return max((int(v) for v in values if str(v or "").isdigit()), default=0)


def _pod_gpus(template: dict | None) -> int:
    containers = (((template or {}).get("spec") or {}).get("containers")) or []
    return max((_gpus(c.get("resources")) for c in containers), default=0)


def job_gpus(job: dict) -> tuple[int, int]:
    """(GPU nodes, GPUs per node) from the job's spec (the node counts as bootstrap/jobs/state.py nodes())."""
    spec, kind = job.get("spec") or {}, job.get("kind")
    if kind == "MPIJob":
        worker = (spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}
        per_node = _pod_gpus(worker.get("template")) or int(spec.get("slotsPerWorker") or 0)
        return int(worker.get("replicas") or 0), per_node
    if kind == "TrainJob":
        trainer = spec.get("trainer") or {}
        per_node = _gpus(trainer.get("resourcesPerNode")) or str(trainer.get("numProcPerNode") or "")
        return int(trainer.get("numNodes") or 0), int(per_node) if str(per_node).isdigit() else 0
    counts = []  # a JobSet: its replicated jobs of GPU pods
    for rj in spec.get("replicatedJobs") or []:
        template = (rj.get("template") or {}).get("spec") or {}
        counts.append((int(rj.get("replicas") or 1) * int(template.get("parallelism") or 1),
                       _pod_gpus(template.get("template"))))
    return sum(n for n, g in counts if g), max((g for _, g in counts), default=0)


# -- what is live -------------------------------------------------------------------------------------------


def timestamp(text: str | None) -> float | None:
    """An RFC 3339 time as seconds since the epoch (None when absent or not one)."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def _true(obj: dict | None, kind: str) -> dict | None:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or []
                 if c.get("type") == kind and c.get("status") == "True"), None)


def _finished(job: dict, workload: dict | None) -> dict | None:
    for kinds, outcome in ((SUCCEEDED, "Succeeded"), (("Failed",), "Failed")):
        for kind in kinds:
            if (found := _true(job, kind)) and (at := timestamp(found.get("lastTransitionTime"))) is not None:
                return {"type": "finished", "at": at, "outcome": outcome}
    if (found := _true(workload, "Finished")) and (at := timestamp(found.get("lastTransitionTime"))) is not None:
        return {"type": "finished", "at": at, "outcome": found.get("reason") or "Finished"}
    return None


def remediations(job: dict) -> list[dict]:
    """The controller's records on the job (names.REMEDIATIONS_ANNOTATION), oldest first; [] if unreadable."""
    text = ((job.get("metadata") or {}).get("annotations") or {}).get(names.REMEDIATIONS_ANNOTATION)
    try:
        found = json.loads(text) if text else []
    except ValueError:
        return []
    return [r for r in found if isinstance(r, dict)] if isinstance(found, list) else []


def _pod_events(pod: dict) -> list[dict]:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    name, uid = meta.get("name"), meta.get("uid") or meta.get("name")
    attempt = str((meta.get("labels") or {}).get(RESTART_ATTEMPT_LABEL) or "")
    statuses = status.get("containerStatuses") or []
    failures, starts, firsts, ends = [], set(), [], []
    for cs in statuses:
        state, last = cs.get("state") or {}, (cs.get("lastState") or {}).get("terminated")
        current = state.get("running") or state.get("terminated") or {}
        seen = [t for t in (timestamp(current.get("startedAt")), timestamp((last or {}).get("startedAt"))) if t is not None]
        starts.update(seen)
        firsts.append(min(seen) if seen else None)
        ends.append(timestamp((state.get("terminated") or {}).get("finishedAt")))
        for ended in (state.get("terminated"), last):
            code = (ended or {}).get("exitCode")
            if code and (at := timestamp(ended.get("finishedAt"))) is not None:
                why = " (the pre-step check)" if code == names.PRE_STEP_EXIT_CODE else ""
                failures.append({"type": "failure", "at": at, "uid": uid, "reason": f"{name}: {cs.get('name')} "
                                                                                    f"exited {code}{why}"})
    every = {c.get("type"): c for c in status.get("conditions") or []}
    conditions = {k: c for k, c in every.items() if c.get("status") == "True"}
    if (gone := timestamp(meta.get("deletionTimestamp"))) is not None:  # when it will be gone: asked a grace period before
        at = gone - float(meta.get("deletionGracePeriodSeconds") or 0)
        failures.append({"type": "failure", "at": at, "uid": uid, "reason": f"{name}: deleted"})
    elif status.get("phase") == "Failed" and not failures:  # evicted, preempted: no container ended
        at = timestamp((every.get("DisruptionTarget") or every.get("Ready") or {}).get("lastTransitionTime"))
        if at is not None:
            failures.append({"type": "failure", "at": at, "uid": uid,
                             "reason": f"{name}: {status.get('reason') or 'failed'}"})
    started = max(firsts) if firsts and None not in firsts else \
        timestamp((conditions.get("ContainersReady") or {}).get("lastTransitionTime"))
    gpu = any(_gpus(c.get("resources")) for c in spec.get("containers") or [])
    return [{"type": "pod", "uid": uid, "pod": name, "attempt": int(attempt) if attempt.isdigit() else None,
             "node": spec.get("nodeName"), "gpu": gpu, "created": timestamp(meta.get("creationTimestamp")),
             "scheduled": timestamp((conditions.get("PodScheduled") or {}).get("lastTransitionTime")),
             "started": started, "starts": sorted(starts),
             "ended": max(ends) if ends and None not in ends else None}, *failures]


def _reused(finished: float, others: list[dict], mine: set) -> dict[str, float]:
    """Node -> when the first pod not of the job (nor a DaemonSet's or a static one: they are on every node) was
    scheduled on it at or after the job finished: the node is someone else's from then. A pod there before the
    finish (an earlier job's, left behind) says nothing about when the node stopped idling."""
    out: dict[str, float] = {}
    for pod in others:
        meta = pod.get("metadata") or {}
        if (meta.get("uid") or meta.get("name")) in mine or any(
                o.get("kind") in ("DaemonSet", "Node") for o in meta.get("ownerReferences") or []):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        scheduled = next((c.get("lastTransitionTime") for c in (pod.get("status") or {}).get("conditions") or []
                          if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
        at = timestamp(scheduled) if scheduled else timestamp(meta.get("creationTimestamp"))
        if node and at is not None and at >= finished:
            out[node] = min(out.get(node, at), at)
    return out


def observe(now: float, job: dict, workload: dict | None, pods: list[dict], nodes: list[dict] | None,
            logs: dict[str, str], others: list[dict] | None = None) -> list[dict]:
    """The events in what is live. `nodes`: the cluster's nodes (None: not known); a node of the job missing from
    it is gone. `logs`: pod name -> log text (rank 0's: an MPIJob's launcher, a TrainJob's node 0, a JobSet's
    chief). `others`: pods not of the job (None: not known); one scheduled on the job's node after it finished
    ends its idle tail ({"type": "reused"} events)."""
    events: list[dict] = [{"type": "observed", "at": now, "nodes": None if nodes is None else
                           sorted(n["metadata"]["name"] for n in nodes)}]
    if (created := timestamp(job["metadata"].get("creationTimestamp"))) is not None:
        events.append({"type": "created", "at": created})
    for condition, kind in (("QuotaReserved", "quota_reserved"), ("Admitted", "admitted"), ("Evicted", "evicted")):
        if (found := _true(workload, condition)) and (at := timestamp(found.get("lastTransitionTime"))) is not None:
            events.append({"type": kind, "at": at, **({"reason": found.get("reason")} if kind == "evicted" else {})})
    if (finished := _finished(job, workload)) is not None:
        events.append(finished)
    for r in remediations(job):
        if r.get("action") == names.ACTION_QUARANTINED and (at := timestamp(r.get("at"))) is not None:
            events.append({"type": "failure", "at": at, "uid": r.get("node"),
                           "reason": f"remediation: {r.get('reason')} on {r.get('node')}"})
    by_name = {n["metadata"]["name"]: n for n in nodes or []}
    for pod in pods:
        if (made := timestamp(pod["metadata"].get("creationTimestamp"))) is not None and created is not None \
                and made < created:
            continue  # a pod of an earlier job of that name, still terminating
        found = _pod_events(pod)
        events += found
        if (node := found[0]["node"]) in by_name:
            events.append({"type": "node", "node": node, "seen": now,
                           "created": timestamp(by_name[node]["metadata"].get("creationTimestamp"))})
    for text in (logs or {}).values():
        events += step_lines.parse(text)
    if finished is not None and others:
        mine = {(p.get("metadata") or {}).get("uid") or (p.get("metadata") or {}).get("name") for p in pods}
        events += [{"type": "reused", "node": node, "at": at}
                   for node, at in sorted(_reused(finished["at"], others, mine).items())]
    return events


# -- the record ---------------------------------------------------------------------------------------------
