"""The goodput controller's objects (pure): its code and config, its identity and rights, its pod, its scrape.

The controller (components/core/goodput/controller.py) is our own: no upstream piece joins a pre-step check's
verdict and our alerts to a quarantine and a gang restart (EKS node auto-repair reacts to the node monitoring
agent's conditions only, and replaces rather than restarts jobs). It runs on a stock Python image, the package
gpucluster_goodput mounted from a ConfigMap (the same code ConfigMap placement/prestep.py ships to the training
namespaces, here in the metrics namespace), on the system nodes, as nobody, with a read-only root.

Rendered when observability is on: remediation reads Prometheus' alerts and the accounting's metrics are for
Prometheus. It always runs then (accounting is useful everywhere); what it does to nodes is each pool's
`remediation` (off by default), read from its config ConfigMap every pass.

Rights, least: nodes get/list/patch (cluster-wide: quarantine); in each training namespace only (a RoleBinding
to a ClusterRole): pods list/watch/delete and pods/log get, events create, the jobs get/list/patch (the record
annotation), Kueue Workloads list, ConfigMaps get/list/create/update/patch/delete (the jobs' records: kept,
marked when their job is gone and deleted after the retention; RBAC cannot limit create, list or delete to a name
prefix, so the controller deletes only a ConfigMap whose name, labels and record agree, at the version it
listed); in its own namespace its config ConfigMap, by name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.core import versions as v
from components.core.config import StackConfig
from components.core.goodput import controller
from components.core.kube import hardening, network_policy, nodepool
from components.core.observability import goodput_alerts
from components.core.observability import prometheus_stack as ps
from components.core.placement import prestep

NAME = "gpucluster-goodput"
NAMESPACE = ps.NAMESPACE
CONFIG_MAP = f"{NAME}-config"
JOBS_ROLE = f"{NAME}-jobs"
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpucluster"}
SELECTOR = {"app.kubernetes.io/name": NAME}
PORT = controller.PORT
PYTHON_IMAGE = v.PYTHON_IMAGE
# kube-prometheus-stack 88.5.3: the Service kps-prometheus on prometheus.service.port 9090 (prometheus_stack.py).
PROMETHEUS_PORT = 9090
PROMETHEUS_URL = f"http://{ps.PROMETHEUS_SERVICE}.{ps.NAMESPACE}.svc:{PROMETHEUS_PORT}"
INTERVAL_SECONDS = 10
# The step lines are rank 0's, printed once per step: 200 lines hold the last 200 steps, minutes of any job,
# so a 10 s pass misses none (accounting.py merges what it has seen).
LOG_TAIL_LINES = 200
# A pass holds every job pod of the training namespaces and each job's log tail: a few MiB.
RESOURCES = {"requests": {"cpu": "50m", "memory": "96Mi"}, "limits": {"memory": "256Mi"}}
POD_SECURITY = hardening.pod_security_context(hardening.NOBODY)  # the image's USER is root
TMP_VOLUME, TMP_MOUNT = hardening.tmp_volume()
PROBE = {"httpGet": {"path": "/healthz", "port": "metrics"}, "timeoutSeconds": 5}
CODE_HASH_ANNOTATION = "gpucluster.io/code-sha256"  # a changed package rolls the pod


def enabled(cfg: StackConfig) -> bool:
    """Whether the stack runs the controller: with the metrics stack."""
    return cfg.observability.enabled


def namespaces(cfg: StackConfig) -> list[str]:
    """Where jobs run: the training namespace and each team's."""
    return [cfg.training_namespace, *(team.namespace for team in cfg.teams)]


def pool_terms(cfg: StackConfig) -> dict[str, dict[str, Any]]:
    """What a GPU pool's node costs and whether it bills while a job waits (a capacity reservation bills whether
    used or not; minNodes stay up): the terms bootstrap/jobs/goodput.py pool_terms gives the accounting."""
    return {p.name: {"nodeHourUsd": cfg.price(p.instance_type), "gpusPerNode": p.instance.gpu_count,
                     "billsWhileQueued": p.capacity_reservation_id is not None or p.min_nodes > 0,
                     "idleMinutes": p.idle_minutes, "maxNodes": p.max_nodes}
            for p in cfg.gpu_pools}


def config(cfg: StackConfig) -> dict[str, Any]:
    """controller.Config's JSON."""
    return {"pools": {p.name: p.remediation for p in cfg.gpu_pools}, "namespaces": namespaces(cfg),
            "prometheusUrl": PROMETHEUS_URL, "alerts": dict(goodput_alerts.REMEDIABLE_ALERTS),
            "intervalSeconds": INTERVAL_SECONDS, "logTailLines": LOG_TAIL_LINES, "poolTerms": pool_terms(cfg),
            "recordRetentionDays": cfg.observability.goodput.record_retention_days}


def _meta(name: str, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    return {"name": name, **({"namespace": namespace} if namespace else {}), "labels": dict(LABELS)}


def config_map(cfg: StackConfig) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CONFIG_MAP),
            "data": {controller.CONFIG_KEY: json.dumps(config(cfg), indent=1, sort_keys=True)}}


def code_config_map() -> dict[str, Any]:
    return prestep.code_config_map(NAMESPACE)


def code_hash() -> str:
    return hashlib.sha256(json.dumps(prestep.code_files(), sort_keys=True).encode()).hexdigest()


def _rule(groups: list[str], resources: list[str], verbs: list[str], names_: list[str] | None = None) -> dict:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs,
            **({"resourceNames": names_} if names_ else {})}


def rbac(cfg: StackConfig) -> list[dict[str, Any]]:
    subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    rbac_api = "rbac.authorization.k8s.io/v1"
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME)},
        {"apiVersion": rbac_api, "kind": "ClusterRole", "metadata": _meta(NAME, None),
         "rules": [_rule([""], ["nodes"], ["get", "list", "patch"])]},
        {"apiVersion": rbac_api, "kind": "ClusterRoleBinding", "metadata": _meta(NAME, None),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": subject},
        # Bound per training namespace below: a ClusterRole so that the rules are written once.
        {"apiVersion": rbac_api, "kind": "ClusterRole", "metadata": _meta(JOBS_ROLE, None), "rules": [
            _rule([""], ["pods"], ["list", "watch", "delete"]),
            _rule([""], ["pods/log"], ["get"]),
            _rule([""], ["events"], ["create"]),
            _rule([""], ["configmaps"], ["get", "list", "create", "update", "patch", "delete"]),  # records
            _rule(["kueue.x-k8s.io"], ["workloads"], ["list"]),
            _rule(["trainer.kubeflow.org"], ["trainjobs"], ["get", "list", "patch"]),
            _rule(["kubeflow.org"], ["mpijobs"], ["get", "list", "patch"]),
            _rule(["jobset.x-k8s.io"], ["jobsets"], ["get", "list", "patch"])]},
        {"apiVersion": rbac_api, "kind": "Role", "metadata": _meta(CONFIG_MAP),
         "rules": [_rule([""], ["configmaps"], ["get"], [CONFIG_MAP])]},
        {"apiVersion": rbac_api, "kind": "RoleBinding", "metadata": _meta(CONFIG_MAP),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONFIG_MAP},
         "subjects": subject},
    ]
    for namespace in namespaces(cfg):
        objs.append({"apiVersion": rbac_api, "kind": "RoleBinding", "metadata": _meta(NAME, namespace),
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": JOBS_ROLE},
                     "subjects": subject})
    return objs


def deployment() -> dict[str, Any]:
    container = {
        "name": "controller", "image": PYTHON_IMAGE,
        "command": ["python3", "-m", f"{prestep.PACKAGE}.controller", "--port", str(PORT)],
        "env": [{"name": controller.CONFIG_ENV, "value": f"{NAMESPACE}/{CONFIG_MAP}"},
                {"name": "PYTHONPATH", "value": prestep.CODE_ROOT},
                {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},  # the code's mount is read-only
                {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "ports": [{"name": "metrics", "containerPort": PORT}],
        "resources": RESOURCES,
        "readinessProbe": {**PROBE, "periodSeconds": 10},
        # /healthz fails once no pass has finished for a minute (metrics_text.HEALTHY_PASSES intervals).
        "livenessProbe": {**PROBE, "initialDelaySeconds": 30, "periodSeconds": 30, "failureThreshold": 4},
        "securityContext": hardening.container_security_context(),
        "volumeMounts": [dict(prestep.CODE_MOUNT), dict(TMP_MOUNT)],
    }
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(NAME),
        "spec": {
            "replicas": 1,
            # Never two at once: both would act on the same signal before either's record is written.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": dict(SELECTOR)},
            "template": {"metadata": {"labels": dict(LABELS), "annotations": {CODE_HASH_ANNOTATION: code_hash()}},
                         "spec": {"serviceAccountName": NAME, "nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL),
                                  "securityContext": dict(POD_SECURITY), "containers": [container],
                                  "volumes": [prestep.volume(), dict(TMP_VOLUME)]}},
        },
    }


def service() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(NAME),
            "spec": {"selector": dict(SELECTOR), "ports": [{"name": "metrics", "port": PORT, "targetPort": PORT}]}}


def service_monitor() -> dict[str, Any]:
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": _meta(NAME),
            "spec": {"selector": {"matchLabels": dict(SELECTOR)},
                     # The jobs' `namespace` label is the metric's own (metrics_text.py), not the target's.
                     "endpoints": [{"port": "metrics", "path": "/metrics", "honorLabels": True}]}}


def network_policy_ingress() -> dict[str, Any]:
    return network_policy.scrape_only(f"{NAME}-ingress", NAMESPACE, SELECTOR, PORT, ps.NAMESPACE)


def objects(cfg: StackConfig) -> list[dict[str, Any]]:
    """Everything but the ServiceMonitor (it waits for the Prometheus Operator's CRDs), in apply order."""
    return [code_config_map(), config_map(cfg), *rbac(cfg), deployment(), service(), network_policy_ingress()]

