"""The manager's token rotator (pure): a CronJob running components.core.fleet_token every
`fleet.tokenRotationHours`, each new token living twice that, so one missed run costs nothing.

It runs as goodput's controller does (components.core.observability.goodput_agent): a stock Python image, the
package gpucluster_fleet_token from a ConfigMap (with goodput's kubeapi.py beside its modules), on the system
nodes, as nobody, with a read-only root and a memory-backed /tmp for the tokens it writes while it works. Its
ServiceAccount may get and update the workers' kubeconfig Secrets and get their seed Secrets (to reseed a
re-created worker, or a refused token), by name, and nothing else on the manager.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.core import versions as v
from components.core.config import StackConfig
from components.core.fleet import manager, names
from components.core.kube import hardening, nodepool

if TYPE_CHECKING:
    from components.core.fleet.workers import FleetMember

CORE = Path(__file__).resolve().parents[1]
TOKEN_DIR = CORE / "fleet_token"
KUBEAPI = CORE / "goodput" / "kubeapi.py"
CODE_ROOT = "/opt/gpucluster-fleet"  # PYTHONPATH; the package is the directory below it
CODE_MOUNT = {"name": "code", "mountPath": f"{CODE_ROOT}/{names.PACKAGE}", "readOnly": True}
TMP_VOLUME = {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
TMP_MOUNT = {"name": "tmp", "mountPath": "/tmp"}
RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}
CODE_HASH_ANNOTATION = "gpucluster.io/code-sha256"
LABELS = {**manager.LABELS, "app.kubernetes.io/name": names.ROTATOR}
# A failed run is retried within the hour; the token in place still has a whole period to live.
BACKOFF_LIMIT = 3
DEADLINE_SECONDS = 600


def schedule(hours: int) -> str:
    """A cron schedule whose runs are at most `hours` apart (a step restarts at midnight, or the 1st)."""
    if hours < 24:
        return f"17 */{hours} * * *"
    days = hours // 24
    return "17 0 * * *" if days == 1 else f"17 0 */{days} * *"


def lifetime_seconds(cfg: StackConfig) -> int:
    return max(2 * cfg.fleet.token_rotation_hours * 3600, names.MIN_LIFETIME_SECONDS)


def code_files() -> dict[str, str]:
    """The package as the pod sees it: every module of components/core/fleet_token, and goodput's client."""
    files = {p.name: p.read_text(encoding="utf-8") for p in sorted(TOKEN_DIR.glob("*.py"))}
    files["kubeapi.py"] = KUBEAPI.read_text(encoding="utf-8")
    return files


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "namespace": names.MANAGER_NAMESPACE, "labels": dict(LABELS)}


def code_config_map() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(names.ROTATOR_CODE), "data": code_files()}


def rbac(members: Sequence[FleetMember]) -> list[dict[str, Any]]:
    rbac_api = "rbac.authorization.k8s.io/v1"
    secrets = [names.secret_name(m.cluster) for m in members]
    seeds = [names.seed_name(m.cluster) for m in members]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(names.ROTATOR)},
        {"apiVersion": rbac_api, "kind": "Role", "metadata": _meta(names.ROTATOR),
         "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"],
                    "resourceNames": secrets},
                   {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": seeds}]},
        {"apiVersion": rbac_api, "kind": "RoleBinding", "metadata": _meta(names.ROTATOR),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.ROTATOR},
         "subjects": [{"kind": "ServiceAccount", "name": names.ROTATOR, "namespace": names.MANAGER_NAMESPACE}]},
    ]


def command(cfg: StackConfig, members: Sequence[FleetMember]) -> list[str]:
    secrets = [a for m in members for a in ("--secret", names.secret_name(m.cluster))]
    return ["python3", "-m", names.PACKAGE, "--kubeconfig", "in-cluster", "--namespace", names.MANAGER_NAMESPACE,
            *secrets, "--lifetime-seconds", str(lifetime_seconds(cfg))]


def cron_job(cfg: StackConfig, members: Sequence[FleetMember]) -> dict[str, Any]:
    container = {
        "name": "rotate", "image": v.PYTHON_IMAGE, "command": command(cfg, members),
        "env": [{"name": "PYTHONPATH", "value": CODE_ROOT},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # the code's mount is read-only
                {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "resources": RESOURCES,
        "securityContext": hardening.container_security_context(),
        "volumeMounts": [dict(CODE_MOUNT), dict(TMP_MOUNT)],
    }
    code_hash = hashlib.sha256(json.dumps(code_files(), sort_keys=True).encode()).hexdigest()
    pod = {"serviceAccountName": names.ROTATOR, "restartPolicy": "Never",
           "nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL),
           "securityContext": hardening.pod_security_context(hardening.NOBODY),  # the image's USER is root
           "containers": [container],
           "volumes": [{"name": "code", "configMap": {"name": names.ROTATOR_CODE, "defaultMode": 0o444}},
                       dict(TMP_VOLUME)]}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(names.ROTATOR), "spec": {
        "schedule": schedule(cfg.fleet.token_rotation_hours), "timeZone": "Etc/UTC",
        # Never two at once: each deletes the anchor its Secret's annotations name as the previous one.
        "concurrencyPolicy": "Forbid", "startingDeadlineSeconds": 3600,
        "successfulJobsHistoryLimit": 1, "failedJobsHistoryLimit": 3,
        "jobTemplate": {"spec": {"backoffLimit": BACKOFF_LIMIT, "activeDeadlineSeconds": DEADLINE_SECONDS,
                                 "ttlSecondsAfterFinished": 86400, "template": {
                                     "metadata": {"labels": dict(LABELS),
                                                  "annotations": {CODE_HASH_ANNOTATION: code_hash}},
                                     "spec": pod}}}}}


def objects(cfg: StackConfig, members: Sequence[FleetMember]) -> list[dict[str, Any]]:
    """In apply order: its code, its identity and rights, the CronJob ([] unless a manager with workers)."""
    if not manager.enabled(cfg) or not members:
        return []
    return [code_config_map(), *rbac(members), cron_job(cfg, members)]
