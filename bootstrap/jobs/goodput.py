"""A job's goodput from the cluster, for `report` and `status`: the goodput controller's record of the job merged
with what is live now, and its breakdown (components/core/goodput/accounting.py defines the phases).

The record is a ConfigMap in the job's namespace (names.RECORD_PREFIX + the job's name, data[names.RECORD_KEY]:
JSON) that the controller keeps, since pods and their logs go with each restart. What is live: the job, its Kueue
Workload, its pods (by the operators' labels), the nodes and rank 0's log (bootstrap/jobs/logs.py: an MPIJob's
launcher, a TrainJob's node 0, a JobSet's chief; the container's previous run too, after a restart in place). A
team member who may not read nodes or ConfigMaps gets what the rest shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import Kube, KubeError
from bootstrap.jobs import logs, state
from components.core import config
from components.core.goodput import accounting, names


@dataclass(frozen=True)
class Goodput:
    breakdown: dict[str, Any]
    remediations: tuple[dict[str, Any], ...]  # the controller's records on the job, oldest first
    recorded: bool  # the controller's record was there
    live: bool  # the job is there (else: from its record only)

    def to_dict(self) -> dict[str, Any]:
        return {**self.breakdown, "remediations": list(self.remediations), "recorded": self.recorded,
                "live": self.live}


def record_name(job: str) -> str:
    return names.RECORD_PREFIX + job


def parse_record(config_map: dict[str, Any] | None) -> dict[str, Any] | None:
    """The record in a record ConfigMap; None without one, or when it is not a JSON object."""
    text = ((config_map or {}).get("data") or {}).get(names.RECORD_KEY)
    try:
        record = json.loads(text) if text else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _forbidden_as(kube_call, default):
    try:
        return kube_call()
    except KubeError as err:
        if err.status != 403:
            raise
        return default


def read_record(kube: Kube, namespace: str, job: str) -> dict[str, Any] | None:
    return parse_record(_forbidden_as(lambda: kube.get(kinds.CONFIG_MAP, record_name(job), namespace), None))


def records(kube: Kube, namespace: str) -> dict[str, dict[str, Any]]:
    """The namespace's records by job name ({} when ConfigMaps may not be read)."""
    out = {}
    for config_map in _forbidden_as(lambda: kube.list(kinds.CONFIG_MAP, namespace), []):
        name = config_map["metadata"]["name"]
        if name.startswith(names.RECORD_PREFIX) and (record := parse_record(config_map)) is not None:
            out[name.removeprefix(names.RECORD_PREFIX)] = record
    return out


def pool_terms(cfg: config.StackConfig | None, job: dict[str, Any]) -> dict[str, Any] | None:
    """The job's pool's terms, as accounting.merge takes them: USD per GPU-hour (the node's price over the GPUs the
    job uses on it: a job pays for whole nodes), whether the pool's nodes bill while the job waits (a capacity
    reservation bills whether used or not; minNodes stay up) and its idle minutes."""
    pool_name = (job["metadata"].get("labels") or {}).get(state.POOL_LABEL)
    pool = next((p for p in cfg.gpu_pools if p.name == pool_name), None) if cfg is not None else None
    if pool is None:
        return None
    per_node = accounting.job_gpus(job)[1] or pool.instance.gpu_count
    return {"type": "pool", "gpu_hour_usd": round(cfg.price(pool.instance_type) / per_node, 6),
            "bills_while_queued": pool.capacity_reservation_id is not None or pool.min_nodes > 0,
            "idle_minutes": pool.idle_minutes}  # caps the idle tail (accounting.TAIL_MARGIN_MINUTES)


def step_logs(kube: Kube, job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, str]:
    """Rank 0's log by pod name ({} before it has one)."""
    try:
        src = logs.source(job, pods, None)
    except logs.NoPod:
        return {}
    namespace = job["metadata"]["namespace"]
    pod = next(p for p in pods if p["metadata"]["name"] == src.pod)
    restarted = any((s.get("restartCount") or 0) > 0 and (src.container in (None, s.get("name")))
                    for s in (pod.get("status") or {}).get("containerStatuses") or [])
    text = ""
    for previous in (True, False) if restarted else (False,):
        try:
            text += kube.pod_log(src.pod, namespace, src.container, previous=previous)
        except KubeError:  # not started yet, or gone: its lines are in the record, or not printed yet
            continue
    return {src.pod: text} if text else {}


def of_job(kube: Kube, job: dict[str, Any], now: datetime, cfg: config.StackConfig | None = None) -> Goodput:
    """The live job's goodput: its record with what is live now (not written back: the controller keeps it)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    record = read_record(kube, namespace, name)
    workload = state.workload_of(job, kube.list(kinds.WORKLOAD, namespace))
    pods = kube.list(kinds.POD, namespace, accounting.job_pod_selector(job["kind"], name))
    nodes = _forbidden_as(lambda: kube.list(kinds.NODE), None)
    events = accounting.observe(now.timestamp(), job, workload, pods, nodes, step_logs(kube, job, pods))
    if (terms := pool_terms(cfg, job)) is not None:
        events.append(terms)
    merged = accounting.merge(record, events, job)
    return Goodput(accounting.breakdown(merged, now.timestamp()), tuple(accounting.remediations(job)),
                   record is not None, True)


def of_record(record: dict[str, Any], now: datetime) -> Goodput:
    """A job gone since: its record only."""
    return Goodput(accounting.breakdown(record, now.timestamp()), (), True, False)
