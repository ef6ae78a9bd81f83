"""The controller's accounting pass: each job's record ConfigMap (accounting.py's record) and its breakdown.

Per job: its pods (accounting.job_pod_selector), its Kueue Workload (owned by the job), rank 0's log tail (the
step lines), the nodes; accounting.observe -> merge into the stored record -> write it back when it changed,
then breakdown for /metrics. accounting.merge changes a record only when something happened (a pod, a step
line, a condition), so a quiet job costs no write, and a finished job's record once its idle tail is closed.
The other jobs' pods (the pods the controller lists anyway) tell when a finished job's nodes went to another job;
pods it does not list (other namespaces, unlabelled) are left to the tail's cap: no extra API call per pass.
"""

from __future__ import annotations

import json
from typing import Any

from . import kubeapi, names
from .events import timestamp
from .remediation import JOB_LABEL, POOL_LABEL, Job, rfc3339

WORKLOADS = "kueue.x-k8s.io/v1beta2"  # Kueue v0.19.2 (bootstrap/cluster/kinds.py)
MPI_ROLE = "training.kubeflow.org/job-role"  # mpi-operator v0.8.2 v2beta1 JobRoleLabel
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # Indexed Jobs (Kubernetes 1.28+)
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"


def rank_zero(kind: str, pods: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str | None]]:
    """The pods (and container) whose log has rank 0's step lines, as bootstrap/jobs/logs.py finds them: an
    MPIJob's launcher (mpirun prints every rank), a TrainJob's node 0 (completion index 0), a ps JobSet's chief.
    Every attempt's still there: an old one's last lines count until it is gone."""
    def label(pod: dict[str, Any], key: str) -> str | None:
        return (pod["metadata"].get("labels") or {}).get(key)
    if kind == "MPIJob":
        return [(p, "launcher") for p in pods if label(p, MPI_ROLE) == "launcher"]
    first = [p for p in pods if label(p, COMPLETION_INDEX) == "0"]
    if kind == "JobSet":
        first = [p for p in first if label(p, REPLICATED_JOB) == "chief"]
    return [(p, None) for p in first]


SWEEP_SECONDS = 3600  # how often the controller sweeps the records (a list of them per namespace)
SWEEP_SAYS = {"mark": "its job is gone; the record is deleted in {days:g} days unless the job comes back",
              "unmark": "its job is back; the record is kept", "delete": "deleted, its job gone for {days:g} days"}
# The records' labels (Books.job writes both): the sweep lists only ConfigMaps with both.
RECORD_SELECTOR = f"{JOB_LABEL},app.kubernetes.io/part-of=gpucluster"


def _record_kind(config_map: dict[str, Any]) -> str | None:
    try:
        record = json.loads((config_map.get("data") or {}).get(names.RECORD_KEY) or "null")
    except ValueError:
        return None
    return record.get("kind") if isinstance(record, dict) else None


def sweep_plan(config_maps: list[dict[str, Any]], live: set[str], listed_kinds: set[str], now: float,
               retention_days: float) -> dict[str, list[dict[str, Any]]]:
    """What the sweep does to each record (a ConfigMap whose name and job label agree, holding a record of a job
    kind in `listed_kinds`, the kinds whose jobs were listed: a kind whose list failed says nothing of its jobs):
    "mark" the records whose job is not among `live` with the time it is first found gone, "unmark" the records of
    jobs there again, "delete" the records whose job has been gone for `retention_days`. Counting from when the job
    went, not from the record's last change: a job that finished long ago keeps its record that long after it is
    deleted."""
    plan: dict[str, list[dict[str, Any]]] = {"mark": [], "unmark": [], "delete": []}
    for config_map in config_maps:
        meta = config_map.get("metadata") or {}
        job = (meta.get("labels") or {}).get(JOB_LABEL)
        if job is None or meta.get("name") != names.RECORD_PREFIX + job or _record_kind(config_map) not in listed_kinds:
            continue
        marked = (meta.get("annotations") or {}).get(names.RECORD_GONE_ANNOTATION)
        if job in live:
            if marked is not None:
                plan["unmark"].append(config_map)
        elif (since := timestamp(marked)) is None:  # not marked (or unreadably): gone from now
            plan["mark"].append(config_map)
        elif now - since >= retention_days * 86400:
            plan["delete"].append(config_map)
    return {what: sorted(found, key=lambda c: c["metadata"]["name"]) for what, found in plan.items()}


class NotARecord(Exception):
    """A ConfigMap at a job's record name that is not that job's record."""


class Books:
    """The accounting pass over one API client and the accounting module."""

    def __init__(self, api: kubeapi.Client, accounting: Any):
        self.api, self.accounting = api, accounting

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        try:
            return self.api.list(kubeapi.path(WORKLOADS, "workloads", namespace))
        except kubeapi.ApiError as err:
            if err.status == 404:  # Kueue's CRD not installed: jobs never queue
                return []
            raise

    def job(self, cfg: Any, job: Job, pods: list[dict[str, Any]], workloads: list[dict[str, Any]],
            nodes: list[dict[str, Any]], now: float) -> dict[str, Any] | None:
        """Observe the job, keep its record, and return its breakdown (None before it has a record)."""
        acc = self.accounting
        selector = dict(part.split("=", 1) for part in acc.job_pod_selector(job.kind, job.name).split(","))
        mine = [p for p in pods if p["metadata"].get("namespace") == job.namespace
                and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
        workload = next((w for w in workloads if any(o.get("kind") == job.kind and o.get("name") == job.name
                                                     for o in w["metadata"].get("ownerReferences") or [])), None)
        logs = {}
        for pod, container in rank_zero(job.kind, mine):
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed"):
                try:
                    logs[pod["metadata"]["name"]] = self.api.log(job.namespace, pod["metadata"]["name"], container,
                                                                 cfg.log_tail_lines)
                except (kubeapi.ApiError, OSError):
                    pass  # a pod going away, a node not answering: its lines come next pass or not at all
        name = names.RECORD_PREFIX + job.name
        where = kubeapi.path("v1", "configmaps", job.namespace, name)
        stored = self.api.get(where)
        if stored is not None and (stored["metadata"].get("labels") or {}).get(JOB_LABEL) != job.name:
            raise NotARecord(f"ConfigMap {job.namespace}/{name} is not a record of job {job.name} (no "
                             f"{JOB_LABEL}={job.name} label): left alone, the job is not accounted")
        try:
            before = json.loads((stored.get("data") or {}).get(names.RECORD_KEY) or "null") if stored else None
        except ValueError:
            before = None  # not ours to read: started afresh
        uids = {p["metadata"].get("uid") for p in mine}
        others = [p for p in pods if p["metadata"].get("uid") not in uids and (p.get("spec") or {}).get("nodeName")]
        events = acc.observe(now, job.obj, workload, mine, nodes, logs, others)
        if (terms := cfg.pool_event(job.obj, acc.job_gpus(job.obj)[1])) is not None:
            pool = cfg.terms.get((job.obj["metadata"].get("labels") or {}).get(POOL_LABEL) or "") or {}
            if pool.get("idleMinutes") is not None:  # the idle tail's cap (accounting.TAIL_MARGIN_MINUTES)
                terms["idle_minutes"] = float(pool["idleMinutes"])
            events.append(terms)
        record = acc.merge(before if isinstance(before, dict) else None, events, job.obj)
        if record != before:
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": job.namespace,
                                 "labels": {"app.kubernetes.io/part-of": "gpucluster", JOB_LABEL: job.name}},
                    "data": {names.RECORD_KEY: json.dumps(record, sort_keys=True)}}
            if stored is None:
                self.api.create(kubeapi.path("v1", "configmaps", job.namespace), body)
            else:
                body["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
                self.api.replace(where, body)
        return acc.breakdown(record, now)

    def sweep(self, namespaces: tuple[str, ...], live: set[tuple[str, str]], listed_kinds: set[str], now: float,
              retention_days: float) -> list[str]:
        """Carry out each namespace's sweep_plan, each write conditional on the version listed (a record rewritten
        or replaced since is left to the next sweep); `live`: (namespace, name) of every job there. A line for
        each record marked, unmarked or deleted, and for each that failed."""
        said = []
        for namespace in namespaces:
            try:
                found = self.api.list(kubeapi.path("v1", "configmaps", namespace), RECORD_SELECTOR)
            except (kubeapi.ApiError, OSError) as err:
                said.append(f"records in {namespace}: not swept: {err}")
                continue
            plan = sweep_plan(found, {name for ns, name in live if ns == namespace}, listed_kinds, now,
                              retention_days)
            for what, config_map in ((w, c) for w in ("mark", "unmark", "delete") for c in plan[w]):
                meta = config_map["metadata"]
                where = kubeapi.path("v1", "configmaps", namespace, meta["name"])
                try:
                    if what == "delete":
                        done = self.api.delete(where, {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]})
                    else:
                        self.api.merge_patch(where, {"metadata": {"resourceVersion": meta["resourceVersion"],
                                                                  "annotations": {names.RECORD_GONE_ANNOTATION: (
                                                                      rfc3339(now) if what == "mark" else None)}}})
                        done = True
                except kubeapi.ApiError as err:
                    if err.status not in (404, 409):  # gone or changed since the list: the next sweep sees it
                        said.append(f"record {namespace}/{meta['name']}: {what} failed: {err}")
                    continue
                if done:
                    said.append(f"record {namespace}/{meta['name']}: " + SWEEP_SAYS[what].format(days=retention_days))
        return said
