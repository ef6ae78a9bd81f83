"""Read a live cluster into a Bundle: the job, its Workloads, pods, events, nodes, queues and the logs' last lines.

Through bootstrap.cluster.api.Kube (the API server's JSON as is). Never reads
Secrets. Before anything is kept, managedFields and the last-applied
annotation are dropped and env values whose names look like credentials
(TOKEN, SECRET, PASSWORD, API_KEY, ...) are replaced by "[redacted]": a
bundle is meant for a support ticket. A kind whose CRD is missing (Kueue or
an operator not installed) is recorded as absent, with a note.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import Kube, KubeError
from bootstrap.doctor.bundle import Bundle, name, pod_order
from bootstrap.doctor.kueue import collect_placement

DEFAULT_TAIL = 200
MAX_LOG_PODS = 32  # launcher and rank 0 first (bundle.pod_order); the rest are noted, not read
MAX_AUTOSCALER_EVENTS = 50
POD_SELECTORS = ("gpucluster.io/job={job}", "training.kubeflow.org/job-name={job}",
                 "jobset.sigs.k8s.io/jobset-name={job}")
SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL", re.I)
REDACTED = "[redacted]"
DROP_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


class CollectError(Exception):
    """What doctor was asked to read is not there (the job), or the API refused: one line, exit 2."""


def _sanitize(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "managedFields":
                continue
            if key == "annotations" and isinstance(item, dict):
                item = {k: v for k, v in item.items() if k not in DROP_ANNOTATIONS}
            if key == "env" and isinstance(item, list):
                item = [{**e, "value": REDACTED} if isinstance(e, dict) and "value" in e
                        and SECRET_ENV.search(str(e.get("name", ""))) else e for e in item]
            out[key] = _sanitize(item)
        return out
    if isinstance(value, list):
        return [_sanitize(item) for item in value]
    return value


class _Reader:
    """Kube calls that turn "this kind is not installed" into an empty list and a note."""

    def __init__(self, kube: Kube, notes: list[str]):
        self.kube, self.notes = kube, notes

    def list(self, kind: kinds.Kind, namespace: str | None = None, selector: str | None = None,
             field_selector: str | None = None, optional: bool = False) -> list[dict[str, Any]] | None:
        try:
            return self.kube.list(kind, namespace, selector, field_selector)
        except KubeError as err:
            if err.not_found:
                self.notes.append(f"{kind.kind}: not served by the cluster (its CRD is not installed)")
                return None
            if optional:
                self.notes.append(f"{kind.kind} in {namespace or 'the cluster'}: not read ({err})")
                return []
            raise CollectError(f"cannot list {kind.kind} in {namespace or 'the cluster'}: {err}") from None


def _find_jobs(reader: _Reader, namespace: str, job: str | None) -> dict[str, list[dict[str, Any]] | None]:
    found: dict[str, list[dict[str, Any]] | None] = {}
    for kind in kinds.JOB_KINDS:
        if job is None:
            found[kind.kind] = reader.list(kind, namespace)
            continue
        try:
            obj = reader.kube.get(kind, job, namespace)
        except KubeError as err:
            raise CollectError(f"cannot read {kind.kind} {namespace}/{job}: {err}") from None
        if obj is not None:
            obj.setdefault("kind", kind.kind)
            obj.setdefault("apiVersion", kind.api_version)
        found[kind.kind] = [obj] if obj else []
    if job is not None and not any(found.values()):
        raise CollectError(f"no MPIJob, TrainJob or JobSet named {job} in namespace {namespace}")
    return found


def _pods(reader: _Reader, namespace: str, job: str | None) -> list[dict[str, Any]]:
    if job is None:
        return reader.list(kinds.POD, namespace) or []
    pods: dict[str, dict[str, Any]] = {}
    for selector in POD_SELECTORS:
        for pod in reader.list(kinds.POD, namespace, selector.format(job=job)) or []:
            pods.setdefault(name(pod), pod)
    return sorted(pods.values(), key=pod_order)


def _owned_by(obj: dict[str, Any], uids: set[str]) -> bool:
    return any(ref.get("uid") in uids for ref in obj.get("metadata", {}).get("ownerReferences") or [])


def _job_events(events: list[dict[str, Any]], job: str | None, names: set[str]) -> list[dict[str, Any]]:
    if job is None:
        return events
    return [e for e in events if (e.get("involvedObject") or {}).get("name") in names
            or str((e.get("involvedObject") or {}).get("name", "")).startswith(f"{job}-")]


def _nodes(reader: _Reader, pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes = {name(n): n for n in reader.list(kinds.NODE, selector="gpucluster.io/pool", optional=True) or []}
    for node_name in sorted({(p.get("spec") or {}).get("nodeName") for p in pods} - {None} - set(nodes)):
        try:
            node = reader.kube.get(kinds.NODE, node_name)
        except KubeError as err:
            reader.notes.append(f"Node {node_name}: not read ({err})")
            continue
        if node is None:
            reader.notes.append(f"Node {node_name}: gone (deleted since its pods ran)")
        else:
            node.setdefault("kind", "Node")
            node.setdefault("apiVersion", "v1")
            nodes[node_name] = node
    return list(nodes.values())


def _containers_to_read(pod: dict[str, Any]) -> list[tuple[str, bool]]:
    """(container, previous) pairs whose logs exist: started containers, and the one before a restart."""
    out = []
    status = pod.get("status") or {}
    for cstatus in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
        state = cstatus.get("state") or {}
        if "running" in state or "terminated" in state:
            out.append((cstatus["name"], False))
        if cstatus.get("restartCount") and (cstatus.get("lastState") or {}).get("terminated"):
            out.append((cstatus["name"], True))
    return out


def _logs(reader: _Reader, bundle: Bundle, pods: list[dict[str, Any]], tail: int) -> None:
    for index, pod in enumerate(sorted(pods, key=pod_order)):
        wanted = _containers_to_read(pod)
        if index >= MAX_LOG_PODS:
            if wanted:
                bundle.notes.append(f"logs of {len(pods) - MAX_LOG_PODS} more pods not read (at most {MAX_LOG_PODS})")
            break
        for container, previous in wanted:
            try:
                text = reader.kube.pod_log(name(pod), bundle.namespace, container, tail_lines=tail, previous=previous)
            except KubeError as err:
                bundle.notes.append(f"log of {name(pod)}/{container}{' (previous)' if previous else ''}: {err}")
                continue
            (bundle.previous_logs if previous else bundle.logs)[(name(pod), container)] = text


def collect(kube: Kube, namespace: str, job: str | None = None, tail: int = DEFAULT_TAIL,
            cluster: str | None = None, pools: dict[str, dict[str, Any]] | None = None,
            scaling_activities: Callable[[], tuple[list[dict[str, Any]] | None, str]] | None = None,
            now: datetime | None = None, teams: dict[str, dict[str, Any]] | None = None) -> Bundle:
    """The bundle of `job` (every job of the namespace when None). Raises CollectError or ClusterUnreachable."""
    bundle = Bundle(namespace=namespace, job=job, cluster=cluster,
                    collected_at=(now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if pools:
        bundle.extra["pools"] = pools
    if teams:
        bundle.extra["teams"] = teams
    reader = _Reader(kube, bundle.notes)
    jobs = _find_jobs(reader, namespace, job)
    uids = {obj["metadata"].get("uid") for items in jobs.values() for obj in items or []} - {None}
    workloads = reader.list(kinds.WORKLOAD, namespace)
    if workloads is not None and job is not None:
        workloads = [w for w in workloads if _owned_by(w, uids)]
    pods = _pods(reader, namespace, job)
    names = {name(o) for items in jobs.values() for o in items or []} | {name(p) for p in pods}
    names |= {name(w) for w in workloads or []}
    events = _job_events(reader.list(kinds.EVENT, namespace) or [], job, names)
    nodes = _nodes(reader, pods)
    node_names = {name(n) for n in nodes}
    events += [e for e in reader.list(kinds.EVENT, "default", field_selector="involvedObject.kind=Node",
                                      optional=True) or []
               if (e.get("involvedObject") or {}).get("name") in node_names]
    autoscaler = reader.list(kinds.EVENT, "kube-system", field_selector="involvedObject.name=cluster-autoscaler-status",
                             optional=True) or []
    events += autoscaler[-MAX_AUTOSCALER_EVENTS:]
    objects: dict[str, list[dict[str, Any]] | None] = {
        **jobs, "Pod": pods, "Event": events, "Node": nodes, "Workload": workloads,
        "ClusterQueue": reader.list(kinds.CLUSTER_QUEUE, optional=True)}
    placement, extra = collect_placement.read(reader, namespace, workloads or [], events, nodes)
    objects.update(placement)
    bundle.extra.update(extra)
    bundle.objects = {kind: _sanitize(items) for kind, items in objects.items() if items is not None}
    _logs(reader, bundle, pods, tail)
    if scaling_activities is not None:
        activities, note = scaling_activities()
        bundle.extra["aws"] = {"scalingActivities": note}
        if activities is not None:
            bundle.scaling_activities = json.loads(json.dumps(activities, default=_iso))
    else:
        bundle.extra["aws"] = {"scalingActivities": "skipped: no --stack (the cluster's Auto Scaling groups "
                                                    "are found by its name)"}
    return bundle


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def aws_scaling_activities(session: Any, cluster_name: str, per_group: int = 20
                           ) -> tuple[list[dict[str, Any]] | None, str]:
    """The recent scaling activities of the cluster's autoscaled groups, or (None, why not): never raises."""
    try:
        from botocore.exceptions import BotoCoreError, ClientError

        if session.get_credentials() is None:
            return None, "skipped: no AWS credentials"
        client = session.client("autoscaling")
        tag = f"k8s.io/cluster-autoscaler/{cluster_name}"
        groups = [g["AutoScalingGroupName"]
                  for page in client.get_paginator("describe_auto_scaling_groups").paginate(
                      Filters=[{"Name": "tag-key", "Values": [tag]}])
                  for g in page.get("AutoScalingGroups", [])]
        activities = []
        for group in groups:
            activities += client.describe_scaling_activities(AutoScalingGroupName=group,
                                                             MaxRecords=per_group).get("Activities", [])
    except (BotoCoreError, ClientError) as err:
        return None, f"skipped: {err}"
    return activities, f"read {len(activities)} activities of {len(groups)} Auto Scaling groups tagged {tag}"


def pool_facts(cfg: Any) -> dict[str, dict[str, Any]]:
    """What the rules need of the stack's pools: type, EFA on or off, purchase option."""
    return {p.name: {"instanceType": p.instance_type, "efa": p.efa_enabled, "capacityType": p.capacity_type}
            for p in cfg.gpu_pools}


def team_facts(cfg: Any, namespace: str, spend: Callable[[Any], tuple[float | None, str]] | None,
               now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """bundle.json `teams`: the stack's team whose namespace doctor reads, when it has a monthly budget, with its
    month-to-date spend through `spend` (team -> (USD or None, how it was read or why not); None: not read).

    Empty for the training namespace and a stack without teams. Never raises: a spend that cannot be read is
    recorded as null with the reason."""
    team = next((t for t in getattr(cfg, "teams", ()) or () if t.namespace == namespace), None)
    if team is None or team.monthly_budget_usd is None:
        return {}
    usd, how = None, "not read: this doctor has no way to read spend"
    if spend is not None:
        try:
            usd, how = spend(team)
        except Exception as err:  # Prometheus unreachable, a bad answer: noted, the rest of the bundle stands
            usd, how = None, f"not read: {err}"
    return {team.name: {"namespace": team.namespace, "monthlyBudgetUsd": float(team.monthly_budget_usd),
                        "spendUsd": None if usd is None else round(float(usd), 2),
                        "month": (now or datetime.now(UTC)).strftime("%Y-%m"), "spend": how}}
