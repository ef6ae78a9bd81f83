"""How a user reaches what the metrics stack serves, and what it scrapes: for the plan, the outputs and README."""

from __future__ import annotations

from components.core.config import StackConfig
from components.core.observability import prometheus_stack as ps
from components.core.observability import tensorboard

# The chart names its Services after the release (kube-prometheus-stack-88.5.3: <release>-grafana from the
# grafana subchart's fullname, <fullname>-prometheus and <fullname>-alertmanager from the chart's own).
GRAFANA = f"kubectl -n {ps.NAMESPACE} port-forward svc/{ps.RELEASE}-grafana 3000:80"
PROMETHEUS = f"kubectl -n {ps.NAMESPACE} port-forward svc/{ps.RELEASE}-prometheus 9090:9090"
ALERTMANAGER = f"kubectl -n {ps.NAMESPACE} port-forward svc/{ps.RELEASE}-alertmanager 9093:9093"
GRAFANA_PASSWORD = (f"kubectl -n {ps.NAMESPACE} get secret {ps.GRAFANA_ADMIN_SECRET} "
                    "-o jsonpath='{.data.admin-password}' | base64 -d")
# What Prometheus scrapes besides the nodes and itself (device plugins expose no metrics; scrape.py).
SCRAPED = ("dcgm-exporter", "EFA counters", "kube-state-metrics", "node-exporter", "Kueue", "cluster-autoscaler",
           "MPI Operator", "Kubeflow Trainer", "JobSet", "jobs' own `metrics` port")


def port_forwards(cfg: StackConfig) -> dict[str, str]:
    out = {"grafana": GRAFANA, "grafanaPassword": GRAFANA_PASSWORD, "prometheus": PROMETHEUS,
           "alertmanager": ALERTMANAGER}
    if cfg.observability.tensorboard:
        out["tensorboard"] = (f"kubectl -n {cfg.training_namespace} port-forward svc/{tensorboard.NAME} "
                              f"{tensorboard.PORT}:{tensorboard.PORT}")
    return out
