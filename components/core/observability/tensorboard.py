"""TensorBoard on the system nodes, serving every job's logs from the file system, read-only.

Jobs write to GPUCLUSTER_TENSORBOARD_DIR = <mountPath>/tensorboard/<job>
(components.core.kube.workers.job_env); this Deployment mounts the same
FSx claim read-only at /fsx and serves /fsx/tensorboard on port 6006.
It runs in the training namespace because the claim lives there.
"""

from __future__ import annotations

from typing import Any

from components.core import versions as v
from components.core.kube import nodepool, workers

NAME = "tensorboard"
PORT = 6006
MOUNT = "/fsx"
LOG_DIR = f"{MOUNT}/{workers.TENSORBOARD_SUBDIR}"
RESOURCES = {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpucluster"}


def deployment(namespace: str, claim_name: str) -> dict[str, Any]:
    container = {
        "name": NAME, "image": v.TENSORBOARD_IMAGE,
        "command": ["tensorboard", f"--logdir={LOG_DIR}", "--bind_all", f"--port={PORT}",
                    "--reload_interval=60"],
        "ports": [{"name": "http", "containerPort": PORT}],
        "resources": RESOURCES,
        "readinessProbe": {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 30},
        "securityContext": {"allowPrivilegeEscalation": False},
        "volumeMounts": [{"name": "fsx", "mountPath": MOUNT, "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {"metadata": {"labels": dict(LABELS)}, "spec": {
                "nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL),
                "containers": [container],
                "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": claim_name, "readOnly": True}}],
            }},
        },
    }


def service(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": namespace, "labels": dict(LABELS)},
            "spec": {"selector": {"app.kubernetes.io/name": NAME},
                     "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]}}
