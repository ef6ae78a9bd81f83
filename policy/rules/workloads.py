"""Rules on what runs in the cluster: pinned charts, pinned images, resource requests on every workload.

Kubernetes objects are registered by pulumi-kubernetes with their manifest
as properties (apiVersion, kind, metadata, spec), so the type token's last
part is the kind: kubernetes:apps/v1:Deployment,
kubernetes:kubeflow.org/v2beta1:MPIJob, kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .base import Resource, get, image_problem, is_list, is_unknown, problem, short_type

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"

# An exact chart version (SemVer 2, optional leading v as some charts tag it).
# Anything else Helm reads as a constraint ("^1.2", "~1.2.0", ">=1", "1.x") or,
# when empty, as "the latest version" (pulumi-kubernetes 4 helm.v3.Release.version:
# "Specify the exact chart version to install. If this is not specified, the
# latest version is installed.").
_EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")

# Kinds whose pods we create, directly or through a controller (Kubeflow MPI
# Operator, Kubeflow Trainer v2 with JobSet). The training runtimes are
# templates of the TrainJobs' pods, so they count too.
WORKLOAD_KINDS = frozenset({
    "Pod", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob",
    "MPIJob", "JobSet", "TrainJob", "ClusterTrainingRuntime", "TrainingRuntime",
})


def is_kubernetes_object(res: Resource) -> bool:
    return res.type.startswith("kubernetes:") and res.type != HELM_RELEASE and ":providers:" not in res.type


def helm_chart_pinned(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """A Helm release names an exact chart `version` (a local chart path is pinned by the repository)."""
    chart = get(res.props, "chart", "")
    version = get(res.props, "version")
    if is_unknown(version) or (isinstance(chart, str) and chart.startswith((".", "/", "file://"))):
        return []
    if not version:
        what = f"chart {chart} has no version, so Helm installs the latest"
    elif not _EXACT_VERSION.match(str(version)):
        what = f"chart {chart} version {version!r} is a range, not an exact version"
    else:
        return []
    return [problem(res, what, "set version='X.Y.Z' to one release of the chart (components/core/versions.py)")]


def _helm_image_problem(value: Any) -> str | None:
    """A chart value `image`: a reference string, or a map (repository/registry, tag, digest)."""
    if is_unknown(value):
        return None
    if isinstance(value, str):
        return image_problem(value)
    if not isinstance(value, Mapping):
        return None
    digest, tag = value.get("digest"), value.get("tag")
    if digest or is_unknown(tag):
        return None
    if tag is None or tag == "":
        # Charts default the tag to the chart's appVersion, which the pinned
        # chart fixes; but a repository set here without its tag may not hold
        # that appVersion (a mirror), so the tag is asked for with it.
        if value.get("repository") or value.get("name"):
            return f"image {value.get('repository') or value.get('name')!r} has no tag (the chart's default applies)"
        return None
    if str(tag) == "latest":
        return f"image {value.get('repository') or value.get('name') or ''!r} is tagged latest"
    return None


def _values_at(obj: Any, key: str, path: str) -> Iterator[tuple[str, Any]]:
    """Every value under `key` anywhere in `obj`, with its path."""
    if isinstance(obj, Mapping):
        for k, value in obj.items():
            if k == key:
                yield f"{path}.{k}", value
            yield from _values_at(value, key, f"{path}.{k}")
    elif is_list(obj):
        for i, value in enumerate(obj):
            yield from _values_at(value, key, f"{path}[{i}]")


def images_pinned(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """Images in Kubernetes objects' specs and in Helm values under `image` carry a tag other than latest
    (or a digest)."""
    fix = "name an exact tag or a digest (repository:tag, repository@sha256:...)"
    out = []
    if res.type == HELM_RELEASE:
        for path, value in _values_at(get(res.props, "values"), "image", "values"):
            why = _helm_image_problem(value)
            if why:
                out.append(problem(res, f"{why} at {path}", fix + " in the release values"))
        return out
    if not is_kubernetes_object(res):
        return []
    for path, value in _values_at(get(res.props, "spec"), "image", "spec"):
        why = image_problem(value) if isinstance(value, str) and not is_unknown(value) else None
        if why:
            out.append(problem(res, f"{why} at {path}", fix))
    return out


def _pod_specs(obj: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every pod spec under `obj`: a map with a `containers` list.

    Not under a TrainJob's runtimePatches: a patch's container is merged into the runtime's container of
    that name (Trainer v2.3.0 RuntimePatch; it may set env, volumeMounts and securityContext only), whose
    requests come from the runtime and spec.trainer.resourcesPerNode."""
    if isinstance(obj, Mapping):
        if is_list(obj.get("containers")):
            yield path, obj
            return
        for key, value in obj.items():
            if key != "runtimePatches":
                yield from _pod_specs(value, f"{path}.{key}")
    elif is_list(obj):
        for i, value in enumerate(obj):
            yield from _pod_specs(value, f"{path}[{i}]")


def _has_requests(resources: Any) -> bool:
    requests = get(resources, "requests")
    return is_unknown(resources) or is_unknown(requests) or (isinstance(requests, Mapping) and bool(requests))


def workload_requests(res: Resource, config: Mapping[str, Any]) -> list[str]:
    """Every container (and init container) of a workload we create requests resources.

    Without requests the scheduler places a pod as if it needed nothing and
    the kubelet evicts it first under pressure (Kubernetes docs, "Resource
    Management for Pods and Containers",
    https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/).
    A TrainJob's trainer takes its requests from spec.trainer.resourcesPerNode.
    """
    kind = short_type(res.type)
    if not res.type.startswith("kubernetes:") or kind not in WORKLOAD_KINDS:
        return []
    spec = get(res.props, "spec")
    if is_unknown(spec):
        return []
    out = []
    if kind == "TrainJob":
        trainer = get(spec, "trainer")
        if trainer is not None and not _has_requests(get(trainer, "resourcesPerNode")):
            out.append(problem(res, "spec.trainer.resourcesPerNode has no requests",
                               "set resources_per_node requests (cpu, memory, nvidia.com/gpu) on the trainer"))
    for path, pod in _pod_specs(spec, "spec"):
        for field in ("initContainers", "containers"):
            containers = pod.get(field)
            for i, container in enumerate(containers if is_list(containers) else []):
                if not isinstance(container, Mapping) or _has_requests(container.get("resources")):
                    continue
                name = container.get("name") or f"{field}[{i}]"
                out.append(problem(res, f"container {name} at {path}.{field}[{i}] has no resources.requests",
                                   "set resources.requests (cpu and memory at least) on the container"))
    return out
