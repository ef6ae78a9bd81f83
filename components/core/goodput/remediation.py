"""What the remediation controller does about a blamed node (pure): the signals, the guards, the patches.

Signals: (a) a pod of a job whose container ended with the pre-step check's exit code and verdict (names.py),
every node it judged `fail` blamed; (b) Prometheus' firing alerts of ours (goodput_alerts.REMEDIABLE_ALERTS,
given as the config's alert -> reason map), each naming `node`, `namespace` and `gpucluster_job`.

Per the blamed node's pool (its gpucluster.io/pool label) mode: `on` quarantines (taint, cordon, evidence),
deletes the job's pods on the node (the gang restarts by the job's failure policy, from its newest
checkpoint) and records it on the job; `dry-run` only records `would-quarantine`; `off` does nothing.
Idempotent: one record per (node, reason) on a job; a node already tainted is not patched again.

Guards, so that a wrong alert cannot drain a pool:
- at most MAX_POOL_SHARE of a pool quarantined at once, of its maxNodes (or of the nodes it has, when more):
  a pool that scales from zero has few nodes at a time, and at least one node (a pool of two may still
  lose its bad one); 25 %: a 16-node pool keeps 12 for the jobs while an admin looks. dry-run changes
  nothing, so it is not held to it;
- for alerts, at most one node per job per JOB_WINDOW_SECONDS: after a restart the alert's 5-minute window
  (goodput_alerts.WINDOW) and its `for` must see the job's new node set before blaming another, and a job
  whose nodes all look slow in turn is slow itself, not its nodes. The pre-step check is exempt: it measures
  each node before any step and names the failed ones itself; holding one back would only fail the job's
  next start again, spending its restarts (failure policy) in minutes.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass, field
from typing import Any

from . import names
from .events import remediations

POOL_LABEL = "gpucluster.io/pool"  # components/core/kube/nodepool.py POOL_LABEL (not importable here)
JOB_LABEL = "gpucluster.io/job"  # components/core/kube/workers.py JOB_LABEL: every pod of a job has it
MAX_POOL_SHARE = 0.25
JOB_WINDOW_SECONDS = 600
ALERT_LABELS = ("node", "namespace", "gpucluster_job")  # goodput_alerts: every remediable alert has them
EVENT_REASONS = {names.ACTION_QUARANTINED: "NodeQuarantined", names.ACTION_WOULD_QUARANTINE: "NodeWouldBeQuarantined"}
COMPONENT = "gpucluster-goodput"


def rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def unix(text: str) -> float | None:
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.UTC).timestamp()
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Signal:
    """One blamed node, for one job, with what says so."""

    node: str
    reason: str
    namespace: str
    job: str
    source: str  # for the log: "alert JobStraggler", "pod training/x-0 container node"
    evidence: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


# -- signals ----------------------------------------------------------------------------------------------


def _verdict(message: str) -> dict[str, Any] | None:
    try:
        body = json.loads(message).get(names.PRE_STEP_MESSAGE_KEY)
    except (ValueError, AttributeError):
        return None
    return body if isinstance(body, dict) and isinstance(body.get("nodes"), dict) else None


def pre_step_signals(pod: dict[str, Any]) -> list[Signal]:
    """The nodes a pod's failed pre-step check blames (state or lastState, any container)."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    job = (meta.get("labels") or {}).get(JOB_LABEL)
    if not job:
        return []
    out: list[Signal] = []
    for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        for state in ("state", "lastState"):
            ended = (container.get(state) or {}).get("terminated") or {}
            if ended.get("exitCode") != names.PRE_STEP_EXIT_CODE:
                continue
            body = _verdict(ended.get("message") or "")
            if body is None:
                continue
            for node, verdict in sorted(body["nodes"].items()):
                if isinstance(verdict, dict) and verdict.get("verdict") == names.VERDICT_FAIL:
                    where = f"{meta.get('namespace')}/{meta.get('name')}"
                    out.append(Signal(node, names.REASON_PRE_STEP, meta.get("namespace", ""), job,
                                      f"pod {where} container {container.get('name')}", {
                                          "pod": where, "container": container.get("name"),
                                          "exitCode": names.PRE_STEP_EXIT_CODE, "finishedAt": ended.get("finishedAt"),
                                          "verdict": verdict, "busbw_gbps": body.get("busbw_gbps"),
                                          "expected_gbps": body.get("expected_gbps"), "seconds": body.get("seconds")}))
    return list(dict.fromkeys(out))  # one per (node, job) even when several containers or states say it


def alert_signals(response: dict[str, Any], reasons: dict[str, str]) -> list[Signal]:
    """Firing alerts of `reasons` (alert name -> reason) in a GET /api/v1/alerts answer (Prometheus HTTP API:
    {"status": "success", "data": {"alerts": [{"labels", "annotations", "state", "activeAt", "value"}]}})."""
    out: list[Signal] = []
    for alert in ((response or {}).get("data") or {}).get("alerts") or []:
        labels = alert.get("labels") or {}
        name = labels.get("alertname")
        if alert.get("state") != "firing" or name not in reasons or not all(labels.get(k) for k in ALERT_LABELS):
            continue
        out.append(Signal(labels["node"], reasons[name], labels["namespace"], labels["gpucluster_job"],
                          f"alert {name}", {
                              "alert": name, "labels": labels, "activeAt": alert.get("activeAt"),
                              "value": alert.get("value"), "summary": (alert.get("annotations") or {}).get("summary")}))
    return list(dict.fromkeys(out))


# -- decisions --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """A job object (MPIJob, TrainJob, JobSet) and the records already on it."""

    kind: str
    namespace: str
    name: str
    obj: dict[str, Any] = field(compare=False, hash=False)

    @property
    def records(self) -> list[dict[str, Any]]:
        return records_of(self.obj)


@dataclass
class Action:
    signal: Signal
    job: Job
    mode: str
    action: str  # names.ACTION_QUARANTINED or names.ACTION_WOULD_QUARANTINE
    quarantine_node: bool  # taint, cordon, evidence (False: dry-run, or the node is tainted already)
    delete_pods: list[str]
    record: dict[str, Any]


@dataclass(frozen=True)
class Skip:
    signal: Signal
    why: str
    quiet: bool = False  # already done: not worth a log line every pass


records_of = remediations  # the job's records (events.py reads them for the accounting too)


def quarantined(node: dict[str, Any]) -> bool:
    return any(t.get("key") == names.QUARANTINE_TAINT_KEY for t in (node.get("spec") or {}).get("taints") or [])


def pool_of(node: dict[str, Any]) -> str | None:
    return ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)


def running_on(pods: list[dict[str, Any]], signal: Signal) -> bool:
    """Whether a pod of the signal's job runs on its node (phase Running, not being deleted)."""
    return any(p["metadata"].get("namespace") == signal.namespace
               and (p["metadata"].get("labels") or {}).get(JOB_LABEL) == signal.job
               and (p.get("spec") or {}).get("nodeName") == signal.node
               and (p.get("status") or {}).get("phase") == "Running"
               and not p["metadata"].get("deletionTimestamp") for p in pods)


def pool_limit(pool_nodes: int) -> int:
    return max(1, math.floor(MAX_POOL_SHARE * pool_nodes))


def decide(signals: list[Signal], jobs: dict[tuple[str, str], Job], nodes: list[dict[str, Any]],
           pods: list[dict[str, Any]], modes: dict[str, str], now: float,
           max_nodes: dict[str, int] | None = None) -> tuple[list[Action], list[Skip]]:
    """What to do about each signal, the pre-step check's first (`max_nodes`: each pool's maxNodes)."""
    by_name = {n["metadata"]["name"]: n for n in nodes}
    pool_size: dict[str, int] = {}
    held: dict[str, set[str]] = {}  # pool -> nodes quarantined, counting this pass
    for node in nodes:
        pool = pool_of(node)
        if pool is not None:
            pool_size[pool] = pool_size.get(pool, 0) + 1
            if quarantined(node):
                held.setdefault(pool, set()).add(node["metadata"]["name"])
    acted: dict[tuple[str, str], float] = {}  # job -> its newest record's time, this pass included
    for key, job in jobs.items():
        times = [t for r in job.records if (t := unix(r.get("at", ""))) is not None]
        if times:
            acted[key] = max(times)
    done: set[tuple[str, str, str, str]] = set()
    actions: list[Action] = []
    skips: list[Skip] = []
    order = sorted(signals, key=lambda s: (s.reason != names.REASON_PRE_STEP, s.namespace, s.job, s.node))
    for signal in order:
        key = (signal.namespace, signal.job)
        job = jobs.get(key)
        node = by_name.get(signal.node)
        pool = pool_of(node) if node is not None else None
        mode = modes.get(pool or "", names.MODE_OFF)
        if job is None:
            skips.append(Skip(signal, f"job {signal.namespace}/{signal.job} not found", quiet=True))
            continue
        if (signal.node, signal.reason) in {(r.get("node"), r.get("reason")) for r in job.records} or \
                (*key, signal.node, signal.reason) in done:
            skips.append(Skip(signal, "already recorded on the job", quiet=True))
            continue
        if node is None:
            skips.append(Skip(signal, f"node {signal.node} not found", quiet=True))
            continue
        if mode == names.MODE_OFF:
            skips.append(Skip(signal, f"pool {pool or '(none)'}: remediation off", quiet=True))
            continue
        if signal.reason != names.REASON_PRE_STEP and not running_on(pods, signal):
            # An alert reads a few minutes back: the job may have finished or moved off the node since, which
            # then holds another job (the pre-step check's pod has ended by design: it is exempt).
            skips.append(Skip(signal, f"no running pod of job {key[0]}/{key[1]} on {signal.node} now"))
            continue
        tainted = quarantined(node)
        if signal.reason != names.REASON_PRE_STEP and key in acted and now - acted[key] < JOB_WINDOW_SECONDS:
            skips.append(Skip(signal, f"job {key[0]}/{key[1]} had a node remediated at {rfc3339(acted[key])}: at "
                                      f"most one per job per {JOB_WINDOW_SECONDS // 60} minutes for alerts"))
            continue
        on = mode == names.MODE_ON
        size = max(pool_size.get(pool or "", 0), (max_nodes or {}).get(pool or "", 0))
        limit = pool_limit(size)
        holding = held.setdefault(pool or "", set())
        if on and not tainted and signal.node not in holding and len(holding) >= limit:
            skips.append(Skip(signal, f"pool {pool}: {len(holding)} of {size} nodes quarantined already, at most "
                                      f"{limit} ({MAX_POOL_SHARE:.0%})"))
            continue
        if on:
            holding.add(signal.node)
        action = names.ACTION_QUARANTINED if on else names.ACTION_WOULD_QUARANTINE
        doomed = sorted(p["metadata"]["name"] for p in pods
                        if on and p["metadata"].get("namespace") == signal.namespace
                        and (p["metadata"].get("labels") or {}).get(JOB_LABEL) == signal.job
                        and (p.get("spec") or {}).get("nodeName") == signal.node
                        and not p["metadata"].get("deletionTimestamp"))
        record = {"at": rfc3339(now), "node": signal.node, "reason": signal.reason, "action": action, "mode": mode,
                  "evidence": {"source": signal.source, **signal.evidence}}
        actions.append(Action(signal, job, mode, action, on and not tainted, doomed, record))
        done.add((*key, signal.node, signal.reason))
        acted[key] = now
    return actions, skips


# -- what is written --------------------------------------------------------------------------------------


def node_patch(node: dict[str, Any], action: Action) -> dict[str, Any]:
    """A JSON merge patch: the taint (with the node's others: a merge patch replaces the list), the cordon and
    the evidence; the node's resourceVersion makes it conditional, so a concurrent change of its taints fails
    the patch (409) instead of being lost."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != names.QUARANTINE_TAINT_KEY]
    taints.append({"key": names.QUARANTINE_TAINT_KEY, "value": action.signal.reason,
                   "effect": names.QUARANTINE_EFFECT, "timeAdded": action.record["at"]})
    evidence = {"reason": action.signal.reason, "job": action.signal.job, "namespace": action.signal.namespace,
                "at": action.record["at"], "evidence": action.record["evidence"]}
    return {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"],
                         "annotations": {names.EVIDENCE_ANNOTATION: json.dumps(evidence, sort_keys=True)}},
            "spec": {"taints": taints, "unschedulable": True}}


def job_patch(job: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The job's records with this one appended, conditional on the job's resourceVersion."""
    records = [*records_of(job), record]
    return {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"],
                         "annotations": {names.REMEDIATIONS_ANNOTATION: json.dumps(records, sort_keys=True)}}}


def message(action: Action) -> str:
    s = action.signal
    what = (f"quarantined node {s.node} (taint {names.QUARANTINE_TAINT_KEY}={s.reason}:{names.QUARANTINE_EFFECT}, "
            f"cordoned) and deleted the job's pod(s) there: {', '.join(action.delete_pods) or 'none left'}"
            if action.action == names.ACTION_QUARANTINED else
            f"would quarantine node {s.node} (pool remediation dry-run: nothing changed)")
    return f"{what}; reason {s.reason}, from {s.source}"


def event(job: Job, action: Action, now: float, api_version: str) -> dict[str, Any]:
    """A core/v1 Event on the job (the legacy form: no eventTime, so no series or action fields required)."""
    at = rfc3339(now)
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{job.name}.", "namespace": job.namespace},
            "involvedObject": {"apiVersion": api_version, "kind": job.kind, "name": job.name,
                               "namespace": job.namespace, "uid": job.obj["metadata"].get("uid")},
            "reason": EVENT_REASONS[action.action], "message": message(action)[:1024], "type": "Warning",
            "source": {"component": COMPONENT}, "firstTimestamp": at, "lastTimestamp": at, "count": 1}
