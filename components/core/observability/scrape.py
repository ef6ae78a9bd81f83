"""Our monitors: the operators whose charts ship none (the MPI Operator, Kubeflow Trainer and JobSet), and
Kueue's and cluster-autoscaler's, whose charts' own are left off.

A chart that renders a ServiceMonitor cannot install before the Prometheus
Operator's CRDs (kube-prometheus-stack's): Kueue and the autoscaler would wait
for the whole metrics stack. Their monitors are ours instead, registered after
the CRDs, the charts' (`enablePrometheus`, `serviceMonitor.enabled`) off. The device
plugins expose no metrics: NVIDIA's k8s-device-plugin v0.20.0 serves only
the kubelet's device-plugin socket, and the EFA plugin's chart v0.5.29
declares no port. Prometheus has cluster-wide get on /metrics (the
kube-prometheus-stack chart's prometheus ClusterRole), which the
controller-runtime endpoints of JobSet check with a TokenReview.
"""

from __future__ import annotations

from typing import Any

from components.core.kube import autoscaling, mpi_operator, queueing, trainer

API_VERSION = "monitoring.coreos.com/v1"
PART_OF = {"app.kubernetes.io/part-of": "gpucluster"}

# MPI Operator v0.8.2: --monitoring-port (mpi_operator.METRICS_PORT), plain HTTP, port `metrics`.
MPI_OPERATOR_METRICS = ("mpi_operator_jobs_created_total", "mpi_operator_jobs_successful_total",
                        "mpi_operator_jobs_failed_total", "mpi_operator_job_info")

# Trainer 2.3.0's manager: controller-runtime metrics on :8443 over HTTPS with a
# self-signed certificate and no authentication filter (pkg/config/config.go);
# the chart's Service kubeflow-trainer-controller-manager names the port
# monitoring-port (charts/kubeflow-trainer/templates/manager/service.yaml).
TRAINER_SERVICE_LABELS = {"app.kubernetes.io/name": "kubeflow-trainer", "app.kubernetes.io/component": "manager"}
TRAINER_SERVICE_PORT = "monitoring-port"

# JobSet 0.12.0 (the Trainer chart's subchart): :8443 over HTTPS, authenticated
# (controller-runtime's WithAuthenticationAndAuthorization, main.go), the Service
# jobset-metrics-service port `https` (charts/jobset/templates/prometheus/
# manager_metrics_service.yaml) selected by the controller's labels.
JOBSET_SERVICE_LABELS = {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/component": "controller"}
JOBSET_SERVICE_PORT = "https"
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"  # Prometheus's own, as Kueue's chart does
JOBSET_METRICS = ("jobset_failed_total", "jobset_completed_total")

# Kueue 0.19.2's chart: the Service <release>-controller-manager-metrics-service, port `https` 8443,
# labelled kueue.metricsService.labels (templates/manager/auth_proxy_service.yaml, _helpers.tpl); its own
# ServiceMonitor scrapes it with Prometheus' token and metrics.serviceMonitor.tlsConfig's default
# insecureSkipVerify (templates/prometheus/monitor.yaml). Its other enablePrometheus objects, a Role and
# RoleBinding for kube-prometheus' prometheus-k8s account, do not name ours.
KUEUE_RELEASE = "kueue"
KUEUE_SERVICE_PORT = "https"

# cluster-autoscaler 9.59.0's chart: the Service <fullname> labelled and selected by
# cluster-autoscaler.instance-name (instance: the release; name: <cloudProvider>-cluster-autoscaler),
# port service.portName `http` (8085); its ServiceMonitor's interval and path are the chart's
# serviceMonitor defaults (templates/service.yaml, servicemonitor.yaml, _helpers.tpl; values.yaml).
AUTOSCALER_SERVICE_LABELS = {"app.kubernetes.io/instance": autoscaling.RELEASE_NAME,
                             "app.kubernetes.io/name": "aws-cluster-autoscaler"}
AUTOSCALER_SERVICE_PORT = "http"
AUTOSCALER_INTERVAL = "10s"

# A self-signed serving certificate: the scrape cannot verify it (controller-runtime
# pkg/metrics/server falls back to one when no certificate directory is set).
SELF_SIGNED = {"insecureSkipVerify": True}


def mpi_operator_pod_monitor() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "PodMonitor",
        "metadata": {"name": "mpi-operator", "namespace": mpi_operator.MPI_OPERATOR_NAMESPACE, "labels": PART_OF},
        "spec": {"selector": {"matchLabels": {"app": "mpi-operator"}},
                 "podMetricsEndpoints": [{"port": "metrics", "path": "/metrics", "scheme": "http"}]},
    }


def trainer_service_monitor() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "ServiceMonitor",
        "metadata": {"name": "kubeflow-trainer", "namespace": trainer.NAMESPACE, "labels": PART_OF},
        "spec": {"selector": {"matchLabels": dict(TRAINER_SERVICE_LABELS)},
                 "endpoints": [{"port": TRAINER_SERVICE_PORT, "path": "/metrics", "scheme": "https",
                                "tlsConfig": dict(SELF_SIGNED)}]},
    }


def jobset_service_monitor() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "ServiceMonitor",
        "metadata": {"name": "jobset", "namespace": trainer.NAMESPACE, "labels": PART_OF},
        "spec": {"selector": {"matchLabels": dict(JOBSET_SERVICE_LABELS)},
                 "endpoints": [{"port": JOBSET_SERVICE_PORT, "path": "/metrics", "scheme": "https",
                                "bearerTokenFile": SERVICE_ACCOUNT_TOKEN, "tlsConfig": dict(SELF_SIGNED)}]},
    }


def kueue_service_monitor() -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": KUEUE_RELEASE,
              "app.kubernetes.io/component": "metrics-service"}
    return {
        "apiVersion": API_VERSION, "kind": "ServiceMonitor",
        "metadata": {"name": "kueue", "namespace": queueing.NAMESPACE, "labels": PART_OF},
        "spec": {"selector": {"matchLabels": labels},
                 "endpoints": [{"port": KUEUE_SERVICE_PORT, "path": "/metrics", "scheme": "https",
                                "bearerTokenFile": SERVICE_ACCOUNT_TOKEN, "tlsConfig": dict(SELF_SIGNED)}]},
    }


def autoscaler_service_monitor() -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "ServiceMonitor",
        "metadata": {"name": "cluster-autoscaler", "namespace": autoscaling.NAMESPACE, "labels": PART_OF},
        "spec": {"selector": {"matchLabels": dict(AUTOSCALER_SERVICE_LABELS)},
                 "endpoints": [{"port": AUTOSCALER_SERVICE_PORT, "path": "/metrics",
                                "interval": AUTOSCALER_INTERVAL}]},
    }
