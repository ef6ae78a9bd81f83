"""TensorBoard on the system nodes, serving every job's logs from the file system, read-only.

Jobs write to GPUCLUSTER_TENSORBOARD_DIR = <mountPath>/tensorboard/<job>
(components.core.kube.workers.job_env); this Deployment mounts the same
FSx claim read-only at /fsx and serves /fsx/tensorboard on port 6006.
It runs in the training namespace because the claim lives there.
"""

from __future__ import annotations

from typing import Any

from components.core import versions as v
from components.core.kube import hardening, nodepool, workers

NAME = "tensorboard"
PORT = 6006
MOUNT = "/fsx"
LOG_DIR = f"{MOUNT}/{workers.TENSORBOARD_SUBDIR}"
RESOURCES = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpucluster"}

# TensorFlow's image runs as root (no USER): TensorBoard runs as nobody instead. It only reads the
# logs (jobs write them 0644 under 0755 directories with the default umask) and writes its
# .tensorboard-info under the temp directory, an emptyDir here; HOME points there too.
POD_SECURITY = hardening.pod_security_context(hardening.NOBODY)
TMP_VOLUME, TMP_MOUNT = hardening.tmp_volume(size="64Mi")
PROBE = {"httpGet": {"path": "/", "port": PORT}, "timeoutSeconds": 10}


def deployment(namespace: str, claim_name: str) -> dict[str, Any]:
    container = {
        "name": NAME, "image": v.TENSORBOARD_IMAGE,
        "command": ["tensorboard", f"--logdir={LOG_DIR}", "--bind_all", f"--port={PORT}",
                    "--reload_interval=60"],
        "ports": [{"name": "http", "containerPort": PORT}],
        "env": [{"name": "HOME", "value": "/tmp"}],
        "resources": RESOURCES,
        "readinessProbe": {**PROBE, "periodSeconds": 30},
        # Generous: a first load of many event files keeps it busy, and a restart starts that over.
        "livenessProbe": {**PROBE, "initialDelaySeconds": 60, "periodSeconds": 60, "failureThreshold": 5},
        "securityContext": hardening.container_security_context(),
        "volumeMounts": [{"name": "fsx", "mountPath": MOUNT, "readOnly": True}, dict(TMP_MOUNT)],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                "nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL),
                "automountServiceAccountToken": False,  # it never calls the Kubernetes API
                "securityContext": dict(POD_SECURITY),
                "containers": [container],
                "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}},
                            dict(TMP_VOLUME)],
            }},
        },
    }


def service(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
            "spec": {"selector": {"app.kubernetes.io/name": NAME},
                     "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]}}
