"""A doctor bundle: what doctor read from a cluster, as a directory a support ticket can carry.

    <dir>/bundle.json                    {"version": 1, "collectedAt": ISO time, "namespace": str,
                                          "job": str | null, "cluster": str | null, ...notes,
                                          with --stack "pools" and "teams" (the namespace's team)}
    <dir>/objects/<Kind>.json            a JSON list of objects as the API server returns them
                                          (kind and apiVersion set), for each kind in KINDS, and
                                          PLACEMENT_KINDS when a job waits on them
    <dir>/logs/<pod>/<container>.log     the last lines of a container's log
    <dir>/logs/<pod>/<container>.previous.log   ... of the container before its last restart
    <dir>/aws/scaling-activities.json    optional: Auto Scaling DescribeScalingActivities `Activities`

Never Secrets: the collector does not read them and the reader refuses a
bundle holding any. Pod, Event and Node are required (a bundle without them
is partial); the operator and Kueue kinds may be absent (not installed).
Every problem reading a bundle is a BundleError naming the file and what
is wrong, one line, for exit 2.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1
KINDS = ("Pod", "Event", "Node", "MPIJob", "TrainJob", "JobSet", "Workload", "ClusterQueue")
REQUIRED_KINDS = ("Pod", "Event", "Node")
JOB_KINDS = ("MPIJob", "TrainJob", "JobSet")
# Read only for a job that waits on atomic scale-up or its network placement (kueue/collect_placement.py).
PLACEMENT_KINDS = ("ProvisioningRequest", "Topology")
META = "bundle.json"
ACTIVITIES = "aws/scaling-activities.json"
PREVIOUS = ".previous"  # container names are DNS labels: no dot, so "<c>.previous.log" is unambiguous
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class BundleError(Exception):
    """A bundle that cannot be read or written: the message names the file and the problem."""


@dataclass
class Bundle:
    """Everything doctor diagnoses from; `logs[(pod, container)]` and `previous_logs[...]` are text."""

    namespace: str
    job: str | None = None
    cluster: str | None = None
    collected_at: str | None = None
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    previous_logs: dict[tuple[str, str], str] = field(default_factory=dict)
    scaling_activities: list[dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # other bundle.json keys (pools, aws)
    path: str | None = None

    def of(self, kind: str) -> list[dict[str, Any]]:
        return self.objects.get(kind) or []

    @property
    def pods(self) -> list[dict[str, Any]]:
        return sorted(self.of("Pod"), key=pod_order)

    @property
    def events(self) -> list[dict[str, Any]]:
        return sorted(self.of("Event"), key=event_time)

    def node(self, name: str | None) -> dict[str, Any] | None:
        return next((n for n in self.of("Node") if n["metadata"]["name"] == name), None) if name else None

    @property
    def pools(self) -> dict[str, dict[str, Any]]:
        """The stack's pools as bundle.json records them (when collected with --stack): name -> facts."""
        pools = self.extra.get("pools")
        return pools if isinstance(pools, dict) else {}

    @property
    def teams(self) -> dict[str, Any]:
        """The diagnosed namespace's team as bundle.json records it (collected with --stack): name -> budget and
        month-to-date spend (bootstrap/doctor/collect.py team_facts)."""
        teams = self.extra.get("teams")
        return teams if isinstance(teams, dict) else {}

    def meta(self) -> dict[str, Any]:
        return {"version": VERSION, "collectedAt": self.collected_at, "namespace": self.namespace,
                "job": self.job, "cluster": self.cluster, **self.extra, "notes": list(self.notes)}


# -- ordering and small accessors the rules share -----------------------------------------------


def labels(obj: dict[str, Any]) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def name(obj: dict[str, Any]) -> str:
    return obj.get("metadata", {}).get("name", "")


def is_launcher(pod: dict[str, Any]) -> bool:
    return labels(pod).get("training.kubeflow.org/job-role") == "launcher"


def is_rank0(pod: dict[str, Any]) -> bool:
    """Worker 0 of an MPIJob, or the first pod of a JobSet's first job (torchrun's node rank 0)."""
    lab = labels(pod)
    if lab.get("training.kubeflow.org/job-role") == "worker":
        return lab.get("training.kubeflow.org/replica-index") == "0"
    if "jobset.sigs.k8s.io/jobset-name" in lab:
        return lab.get("jobset.sigs.k8s.io/job-index", "0") == "0" and \
            lab.get("batch.kubernetes.io/job-completion-index", "0") == "0"
    return False


def pod_order(pod: dict[str, Any]) -> tuple[int, str]:
    """Launcher first, then rank 0, then the rest by name."""
    return (0 if is_launcher(pod) else 1 if is_rank0(pod) else 2, name(pod))


def event_time(event: dict[str, Any]) -> str:
    return (event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
            or event.get("metadata", {}).get("creationTimestamp") or "")


# -- reading ------------------------------------------------------------------------------------


def _load_json(root: Path, relative: str) -> Any:
    path = root / relative
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise BundleError(f"{relative}: missing") from None
    except IsADirectoryError:
        raise BundleError(f"{relative}: is a directory, not a file") from None
    except UnicodeDecodeError as err:
        raise BundleError(f"{relative}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise BundleError(f"{relative}: cannot be read ({err.strerror})") from None
    if not text.strip():
        raise BundleError(f"{relative}: empty file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise BundleError(f"{relative}: not valid JSON: {err}") from None


def _read_meta(root: Path) -> dict[str, Any]:
    if not (root / META).exists():
        found = sorted(p.name for p in root.iterdir())[:5]
        what = f"it holds {', '.join(found)}" if found else "the directory is empty"
        raise BundleError(f"{META}: missing; not a doctor bundle ({what}); write one with `doctor --collect DIR`")
    meta = _load_json(root, META)
    if not isinstance(meta, dict):
        raise BundleError(f"{META}: must be a JSON object, got {type(meta).__name__}")
    if meta.get("version") != VERSION:
        raise BundleError(f"{META}: version {meta.get('version')!r} is not one this doctor reads ({VERSION})")
    if not isinstance(meta.get("namespace"), str) or not meta["namespace"]:
        raise BundleError(f"{META}: `namespace` must be a non-empty string, got {meta.get('namespace')!r}")
    for key in ("job", "cluster", "collectedAt"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise BundleError(f"{META}: `{key}` must be a string or null, got {meta[key]!r}")
    return meta


def _read_objects(root: Path, kind: str) -> list[dict[str, Any]]:
    relative = f"objects/{kind}.json"
    items = _load_json(root, relative)
    if not isinstance(items, list):
        raise BundleError(f"{relative}: must be a JSON list of {kind} objects, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BundleError(f"{relative}: item {i} is a {type(item).__name__}, not an object")
        if item.setdefault("kind", kind) != kind:
            raise BundleError(f"{relative}: item {i} is a {item['kind']}, not a {kind}")
        meta = item.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise BundleError(f"{relative}: item {i} has no metadata.name")
    return items


def _read_logs(root: Path, bundle: Bundle) -> None:
    logs = root / "logs"
    if not logs.is_dir():
        return
    for pod_dir in sorted(p for p in logs.iterdir() if p.is_dir()):
        for file in sorted(pod_dir.glob("*.log")):
            try:
                text = file.read_bytes().decode("utf-8", errors="replace")
            except OSError as err:
                raise BundleError(f"logs/{pod_dir.name}/{file.name}: cannot be read ({err.strerror})") from None
            stem = file.name[: -len(".log")]
            if stem.endswith(PREVIOUS):
                bundle.previous_logs[(pod_dir.name, stem[: -len(PREVIOUS)])] = text
            else:
                bundle.logs[(pod_dir.name, stem)] = text


def read_bundle(path: str | Path) -> Bundle:
    """The bundle at `path`; BundleError (one line, naming the file) for anything missing or malformed."""
    root = Path(path)
    if not root.exists():
        raise BundleError(f"{root}: no such directory")
    if not root.is_dir():
        raise BundleError(f"{root}: not a directory (a bundle is the directory `doctor --collect` wrote)")
    try:
        meta = _read_meta(root)
        objects_dir = root / "objects"
        if not objects_dir.is_dir():
            raise BundleError("objects/: missing (a partial bundle: collect it again)")
        if (objects_dir / "Secret.json").exists():
            raise BundleError("objects/Secret.json: bundles never hold Secrets; delete it before sharing the bundle")
        unknown = sorted(p.name for p in objects_dir.glob("*.json") if p.stem not in KINDS + PLACEMENT_KINDS)
        if unknown:
            raise BundleError(f"objects/{unknown[0]}: not a kind doctor reads ({', '.join(KINDS + PLACEMENT_KINDS)})")
        bundle = Bundle(namespace=meta["namespace"], job=meta.get("job"), cluster=meta.get("cluster"),
                        collected_at=meta.get("collectedAt"), path=str(root),
                        notes=[str(n) for n in meta.get("notes") or []],
                        extra={k: v for k, v in meta.items()
                               if k not in ("version", "collectedAt", "namespace", "job", "cluster", "notes")})
        for kind in KINDS + PLACEMENT_KINDS:
            if kind in REQUIRED_KINDS or (objects_dir / f"{kind}.json").exists():
                bundle.objects[kind] = _read_objects(root, kind)
        if (root / ACTIVITIES).exists():
            activities = _load_json(root, ACTIVITIES)
            if not isinstance(activities, list) or not all(isinstance(a, dict) for a in activities):
                raise BundleError(f"{ACTIVITIES}: must be a JSON list of scaling activities (objects)")
            bundle.scaling_activities = activities
        _read_logs(root, bundle)
    except PermissionError as err:
        raise BundleError(f"{err.filename}: permission denied") from None
    return bundle


# -- writing ------------------------------------------------------------------------------------


def _safe(part: str, what: str) -> str:
    if not _NAME.match(part):
        raise BundleError(f"refusing to write {what} {part!r}: not a Kubernetes name")
    return part


def write_bundle(bundle: Bundle, path: str | Path) -> Path:
    """Write `bundle` into the directory `path` (created; an existing one must be empty)."""
    root = Path(path)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise BundleError(f"{root}: exists and is not an empty directory; choose a new one")
    try:
        (root / "objects").mkdir(parents=True, exist_ok=True)
        for kind in KINDS + PLACEMENT_KINDS:
            if kind in bundle.objects or kind in REQUIRED_KINDS:
                items = bundle.objects.get(kind) or []
                (root / "objects" / f"{kind}.json").write_text(json.dumps(items, indent=1, sort_keys=True) + "\n")
        for logs, suffix in ((bundle.logs, ""), (bundle.previous_logs, PREVIOUS)):
            for (pod, container), text in logs.items():
                pod_dir = root / "logs" / _safe(pod, "pod")
                pod_dir.mkdir(parents=True, exist_ok=True)
                (pod_dir / f"{_safe(container, 'container')}{suffix}.log").write_text(text)
        if bundle.scaling_activities is not None:
            (root / "aws").mkdir(exist_ok=True)
            (root / ACTIVITIES).write_text(json.dumps(bundle.scaling_activities, indent=1, default=str) + "\n")
        (root / META).write_text(json.dumps(bundle.meta(), indent=1) + "\n")
    except OSError as err:
        raise BundleError(f"{err.filename or root}: cannot write ({err.strerror})") from None
    bundle.path = str(root)
    return root
