"""The job verbs' work against the cluster: submit, find, list, read logs, cancel (through bootstrap.cluster)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import Kube, KubeError
from bootstrap.jobs import logs, state
from bootstrap.jobs.render import MANAGED_BY, PULUMI, SUBMITTED, Submission, SubmitError
from components.core import images
from components.core.kube import workers

WORKLOAD_WAIT_SECONDS = 10  # Kueue makes a job's Workload within a second or two of its creation
JOB_KINDS = (kinds.MPIJOB, kinds.TRAINJOB, kinds.JOBSET)  # a TrainJob's own JobSet is found as the TrainJob


@dataclass(frozen=True)
class Submitted:
    job: dict[str, Any]
    created: tuple[str, ...]  # "ClusterTrainingRuntime gpucluster-torch-h100-r3", ...
    workload: dict[str, Any] | None
    position: state.Position | None


def submit(kube: Kube, sub: Submission, sleep: Callable[[float], None] = time.sleep) -> Submitted:
    """Create what the job needs and the job; then its queue position, once Kueue has its Workload."""
    if kube.get(kinds.of(sub.manifest), sub.name, sub.namespace) is not None:
        raise SubmitError(f"{sub.kind} {sub.name} exists in {sub.namespace}: `python -m bootstrap cancel {sub.name}` "
                          "first, or submit it under another name (--name)")
    if sub.secret and kube.get(kinds.SECRET, workers.secret_env_name(sub.job.name), sub.namespace) is None:
        raise SubmitError(f"Secret {workers.secret_env_name(sub.job.name)} (the job's secret env) is not in "
                          f"{sub.namespace}: run `pulumi up`, which creates it")
    if sub.job.scripts and sub.config_map is None and \
            kube.get(kinds.CONFIG_MAP, workers.scripts_config_map_name(sub.job.name), sub.namespace) is None:
        raise SubmitError(f"ConfigMap {workers.scripts_config_map_name(sub.job.name)} (the job's scripts) is not in "
                          f"{sub.namespace}: run `pulumi up`, which creates it")
    created = []
    if sub.runtime is not None and _runtime_missing(kube, sub.runtime["metadata"]["name"]):
        kube.create(kinds.CLUSTER_TRAINING_RUNTIME, sub.runtime)
        created.append(f"ClusterTrainingRuntime {sub.runtime['metadata']['name']}")
    if sub.config_map is not None:
        try:
            kube.create(kinds.CONFIG_MAP, sub.config_map)
        except KubeError as err:
            if not err.conflict:
                raise
            raise SubmitError(f"ConfigMap {sub.config_map['metadata']['name']} exists (a job of that name ran "
                              "before?): cancel that job first") from None
        created.append(f"ConfigMap {sub.config_map['metadata']['name']}")
    job = kube.create(kinds.of(sub.manifest), sub.manifest)
    created.append(f"{sub.kind} {sub.name}")
    workload = None
    deadline = time.monotonic() + WORKLOAD_WAIT_SECONDS
    while True:
        workloads = kube.list(kinds.WORKLOAD, sub.namespace)
        workload = state.workload_of(job, workloads)
        if workload is not None or time.monotonic() >= deadline:
            break
        sleep(1)
    position = state.queue_position(workload, workloads) if workload is not None else None
    return Submitted(job, tuple(created), workload, position)


def _runtime_missing(kube: Kube, name: str) -> bool:
    """Whether the job's runtime must be created. A team member may not read cluster-scoped objects: for them
    the job goes ahead, and Trainer refuses it if the runtime is missing (an admin's submit or `pulumi up` of a
    job of that shape creates it), which submit reports."""
    try:
        return kube.get(kinds.CLUSTER_TRAINING_RUNTIME, name) is None
    except KubeError as err:
        if err.status != 403:
            raise
        return False


def image_cache(kube: Kube, *namespaces: str) -> str | None:
    """Where the stack's pull-through cache serves public ECR images (its ConfigMap, in the first of
    `namespaces` that has it), None without one. A team member may not read the training namespace's: for
    them it is none (the images come from public ECR itself)."""
    for namespace in dict.fromkeys(namespaces):
        try:
            config_map = kube.get(kinds.CONFIG_MAP, images.CONFIG_MAP_NAME, namespace)
        except KubeError as err:
            if err.status != 403:
                raise
            continue
        if (base := ((config_map or {}).get("data") or {}).get(images.CONFIG_MAP_KEY)) is not None:
            return base
    return None


def find(kube: Kube, name: str, namespace: str, teams: tuple[str, ...] = ()) -> dict[str, Any]:
    """The job of that name in the namespace; `teams`: the stack's, named when it is not there (a team's job is in
    its team's namespace)."""
    for kind in JOB_KINDS:
        if (job := kube.get(kind, name, namespace)) is not None:
            return job
    elsewhere = f"; a team's job is in its team's namespace: give --team ({', '.join(teams)})" if teams else ""
    raise SubmitError(f"no MPIJob or TrainJob {name!r} in namespace {namespace} (`python -m bootstrap status` "
                      f"lists them{elsewhere})")


def jobs(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    found = []
    for kind in JOB_KINDS:
        try:
            # A TrainJob's JobSet carries no part-of label of ours: only `launcher: ps` JobSets are listed.
            found += kube.list(kind, namespace, "app.kubernetes.io/part-of=gpucluster")
        except KubeError as err:
            if not err.not_found:  # the CRD is not installed: no jobs of that kind
                raise
    return sorted(found, key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))


def pods_of(kube: Kube, job: dict[str, Any]) -> list[dict[str, Any]]:
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    pods = kube.list(kinds.POD, namespace, f"{state.JOB_LABEL}={name}")
    if not pods and job["kind"] == "TrainJob":  # TrainJobs made before their pods carried our label
        pods = kube.list(kinds.POD, namespace, f"jobset.sigs.k8s.io/jobset-name={name}")
    return pods


def log_lines(kube: Kube, job: dict[str, Any], rank: int | None, follow: bool,
              tail: int | None) -> tuple[logs.Source, Iterator[str]]:
    src = logs.source(job, pods_of(kube, job), rank)
    namespace = job["metadata"]["namespace"]
    if follow:
        lines: Iterator[str] = kube.follow_log(src.pod, namespace, src.container, tail)
    else:
        lines = iter(kube.pod_log(src.pod, namespace, src.container, tail).splitlines())
    return src, logs.only_rank(lines, src.rank)


def cancel_propagation(kind: str) -> str:
    """How a job's dependents go. Foreground (the job goes once its pods are gone, each with its grace
    period), except a TrainJob: Kubeflow Trainer v2.3.0 keeps reconciling a TrainJob that is being deleted
    and re-creates the JobSet the garbage collector just removed, so a foreground delete never ends and the
    pods come back (seen on the local control plane, tests/e2e/test_g_verbs.py). In the background, the
    TrainJob goes at once and the collector removes its JobSet, Jobs and pods after it."""
    return "Background" if kind == "TrainJob" else "Foreground"  # as the program's DELETE_IN_BACKGROUND


def cancel(kube: Kube, job: dict[str, Any], force: bool = False) -> list[str]:
    """Delete the job (its pods go with it) and what `submit` made for it; Pulumi's objects only with `force`."""
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    owner = (job["metadata"].get("labels") or {}).get(MANAGED_BY)
    if owner == PULUMI and not force:
        raise SubmitError(f"{job['kind']} {name} belongs to the stack (`pulumi up` made it): cancelling it here lasts "
                          "only until the next `pulumi up` re-creates it, and re-runs it. Remove it from "
                          "gpucluster:jobs (or set its startOnUp: false) and `pulumi up`; --force deletes it anyway")
    kube.delete(kinds.of(job), name, namespace, propagation=cancel_propagation(job["kind"]))
    deleted = [f"{job['kind']} {name} and its pods"]
    scripts = kube.get(kinds.CONFIG_MAP, workers.scripts_config_map_name(name), namespace)
    if scripts is not None and (scripts["metadata"].get("labels") or {}).get(MANAGED_BY) == SUBMITTED:
        kube.delete(kinds.CONFIG_MAP, scripts["metadata"]["name"], namespace)
        deleted.append(f"ConfigMap {scripts['metadata']['name']}")
    return deleted
