"""Helm values of the metrics stack: kube-prometheus-stack on the system nodes, dcgm-exporter on the GPU pools.

Every key is one the pinned chart's values.yaml has (tests/test_charts.py).
Prometheus selects every ServiceMonitor, PodMonitor and PrometheusRule in
the cluster (the *SelectorNilUsesHelmValues switches off), so our monitors
(Kueue's and the autoscaler's among them) and dcgm-exporter's need no release label.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath
from typing import Any

from components.core.kube import hardening, nodepool
from components.core.observability import metrics
from components.core.observability.efa_exporter import node_relabeling
from components.core.planning.metrics_footprint import Footprint

NAMESPACE = "monitoring"
RELEASE = "kps"  # short: the chart prefixes every object's name with it
# kube-prometheus-stack 88.5.3 templates/prometheus/service.yaml: the Service <fullname>-prometheus, its port
# named prometheus.prometheusSpec.portName ("http-web" in values.yaml) on prometheus.service.port (9090).
PROMETHEUS_SERVICE = f"{RELEASE}-prometheus"
PROMETHEUS_PORT_NAME = "http-web"
DCGM_RELEASE = "dcgm-exporter"
STORAGE_CLASS = "gpucluster-gp3"
# Named so the Pod Identity associations can name them before the chart creates them.
PROMETHEUS_SERVICE_ACCOUNT = "prometheus"
ALERTMANAGER_SERVICE_ACCOUNT = "alertmanager"
GRAFANA_SERVICE_ACCOUNT = "grafana"
GRAFANA_ADMIN_SECRET = "grafana-admin"
ALERTMANAGER_SECRET = "alertmanager-receivers"
SLACK_URL_KEY = "slack-webhook-url"
DASHBOARD_LABEL = ("grafana_dashboard", "1")  # the chart's grafana.sidecar.dashboards label and labelValue
SCRAPE_INTERVAL = "30s"
HELM_TIMEOUT_SECONDS = 900
# The CRDs the chart installs (charts/crds/crds/ at kube-prometheus-stack-88.5.3): one definition
# of each in the cluster. Helm installs a chart's crds/ once and never upgrades them: a chart
# upgrade that needs newer CRDs applies them first (the chart's UPGRADE notes).
CHART_CRDS = tuple(f"{plural}.monitoring.coreos.com" for plural in (
    "alertmanagerconfigs", "alertmanagers", "podmonitors", "probes", "prometheusagents", "prometheuses",
    "prometheusrules", "scrapeconfigs", "servicemonitors", "thanosrulers"))

# Requests and limits of everything the chart runs on the system nodes (none are set by the chart).
OPERATOR_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
ALERTMANAGER_RESOURCES = {"requests": {"cpu": "20m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
GRAFANA_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
GRAFANA_SIDECAR_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
KUBE_STATE_METRICS_RESOURCES = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
NODE_EXPORTER_RESOURCES = {"requests": {"cpu": "20m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
DCGM_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
# The admission webhook's certificate Jobs (kube-webhook-certgen, a one-shot Go binary): the chart sets none.
WEBHOOK_JOB_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
# The config-reloader sidecar of Prometheus and Alertmanager. With none set the chart passes
# --config-reloader-{cpu,memory}-{request,limit}=0 (templates/prometheus-operator/deployment.yaml), which
# leaves the sidecars without requests; these are the operator's own defaults (prometheus-operator v0.93
# cmd/operator/main.go: defaultReloaderCPU 10m, defaultReloaderMemory 50Mi) and a memory limit.
CONFIG_RELOADER_RESOURCES = {"requests": {"cpu": "10m", "memory": "50Mi"}, "limits": {"memory": "128Mi"}}

# Security, chart by chart (kube-prometheus-stack 88.5.3 and its subcharts' values.yaml):
# - the operator, its webhook Jobs, kube-state-metrics: runAsNonRoot with a UID, RuntimeDefault
#   seccomp, a read-only root, no capabilities, probes: the charts' defaults, kept.
# - Prometheus and Alertmanager: the pods' securityContext is the chart's (runAsNonRoot 1000:2000,
#   RuntimeDefault); the containers' are the operator's own (read-only root, no escalation, drop ALL:
#   prometheus-operator v0.93 pkg/prometheus/server/statefulset.go, pkg/operator/config_reloader.go), and
#   so are their probes. The config reloader's probes are off by default; on here (enableProbe:
#   --enable-config-reloader-probes, its /healthz).
# - Grafana: the chart runs it as 472 with RuntimeDefault and no capabilities; its root filesystem stays
#   writable (Grafana writes under /var/lib/grafana and its log and plugin paths, which the chart mounts
#   only in part).
# - node-exporter: needs the host's network, PID namespace and root filesystem (read-only hostPath) to
#   report the node; it runs as nobody with a read-only root (chart defaults), and here also without
#   privilege escalation or capabilities, under RuntimeDefault seccomp.
# - dcgm-exporter: root with SYS_ADMIN, which DCGM's profiling counters (DCGM_FI_PROF_*, used by the
#   dashboards) need (the chart's values.yaml says so); no escalation, everything else dropped: as shipped.
NODE_EXPORTER_POD_SECURITY = {"fsGroup": hardening.NOBODY, **hardening.pod_security_context(hardening.NOBODY)}

# dcgm-exporter's counters: the chart's own list (deployment/templates/metrics-configmap.yaml at
# 4.5.3-4.8.2) and, from etc/default-counters.csv's commented fields, SM activity and ECC errors
# for the job and node-health dashboards. (field, Prometheus type, help)
DCGM_CHART_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending or "
                                          "receiving data."),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both "
                                            "protocol headers and data payloads - in bytes per second."),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both "
                                            "protocol headers and data payloads - in bytes per second."),
)
DCGM_ADDED_COUNTERS = (
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
)
DCGM_COUNTERS = DCGM_CHART_COUNTERS + DCGM_ADDED_COUNTERS

# How dcgm-exporter comes to read that list (chart 4.8.2, vendored in tests/upstream/charts/dcgm-exporter-4.8.2):
# templates/metrics-configmap.yaml writes `customMetrics` into the ConfigMap exporter-metrics-config-map, key
# `metrics` (lines 4, 9-11); templates/daemonset.yaml gives the container `arguments` as its only args
# (lines 122-125) and renders `extraConfigMapVolumes` and `extraVolumeMounts` whole (lines 99-101, 182-184),
# and nothing else mounts that ConfigMap. The chart's values.yaml mounts it by default over the image's own
# /etc/dcgm-exporter/default-counters.csv, which its default `-f` reads (values.yaml lines 24, 171-182); but
# a list we set replaces the default list, so one override of either would leave the exporter reading the
# image's file (no SM activity, no ECC) without a word. So we set all three, at a path the image has no file
# at: without the mount the exporter exits ("Could not read metrics file", internal/pkg/counters/
# counter_config.go) instead. `-f` is `--collectors` (pkg/cmd/app.go).
DCGM_COUNTERS_CONFIGMAP = "exporter-metrics-config-map"  # fixed by the template, whatever the release's name
DCGM_COUNTERS_KEY = "metrics"
DCGM_COUNTERS_VOLUME = "gpucluster-counters"
DCGM_COUNTERS_FILE = "/etc/dcgm-exporter/gpucluster-counters.csv"
# A subPath mount never sees the ConfigMap change, so the list's hash is on the pods: a new list rolls them.
DCGM_COUNTERS_ANNOTATION = "gpucluster.io/dcgm-counters-sha256"


def _system(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL), **(extra or {})}


def dcgm_counters_csv() -> str:
    """The counters file dcgm-exporter reads (its `DCGM FIELD, Prometheus metric type, help message` format)."""
    return "\n".join(f"{field}, {kind}, {text}" for field, kind, text in DCGM_COUNTERS) + "\n"


def dcgm_values() -> dict[str, Any]:
    """On every GPU pool node, tolerating the GPU taint; each series with its node and the pod holding the GPU.

    honorLabels keeps the exporter's `namespace`/`pod`/`container` (the
    workload holding the GPU, from the kubelet's pod-resources API) instead
    of renaming them exported_*; `node` comes from the scraped pod's node.
    """
    counters = dcgm_counters_csv()
    file_name = PurePosixPath(DCGM_COUNTERS_FILE).name
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": nodepool.POOL_LABEL, "operator": "Exists"}]}]}}},
        "tolerations": [nodepool.GPU_TAINT.toleration()],
        "resources": DCGM_RESOURCES,
        # Our counters file, from the chart's metrics ConfigMap to the exporter's -f (see DCGM_COUNTERS_FILE).
        # customMetrics is read by templates/metrics-configmap.yaml only; values.yaml has no default.
        "customMetrics": counters,
        "arguments": ["-f", DCGM_COUNTERS_FILE],
        "extraConfigMapVolumes": [{"name": DCGM_COUNTERS_VOLUME, "configMap": {
            "name": DCGM_COUNTERS_CONFIGMAP, "items": [{"key": DCGM_COUNTERS_KEY, "path": file_name}]}}],
        "extraVolumeMounts": [{"name": DCGM_COUNTERS_VOLUME, "mountPath": DCGM_COUNTERS_FILE, "subPath": file_name,
                               "readOnly": True}],
        "podAnnotations": {DCGM_COUNTERS_ANNOTATION: hashlib.sha256(counters.encode()).hexdigest()},
        "serviceMonitor": {"enabled": True, "interval": "15s", "honorLabels": True,
                           "relabelings": [node_relabeling()]},
    }


def prometheus_values(fp: Footprint, cluster_name: str, remote_write_url: str | None, region: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        **_system(),
        "resources": fp.prometheus_resources,
        "retention": f"{fp.retention_days}d",
        # Size-based retention too, below the volume: a full disk stops Prometheus.
        "retentionSize": f"{fp.retention_size_gb}GB",
        "storageSpec": {"volumeClaimTemplate": {"spec": {
            "storageClassName": STORAGE_CLASS, "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{fp.volume_gib}Gi"}}}}},
        "scrapeInterval": SCRAPE_INTERVAL,
        "evaluationInterval": SCRAPE_INTERVAL,
        "externalLabels": {"cluster": cluster_name},
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "probeSelectorNilUsesHelmValues": False,
        "scrapeConfigSelectorNilUsesHelmValues": False,
    }
    if remote_write_url is not None:
        # SigV4 with the pod's Pod Identity credentials (Amazon Managed Service for Prometheus User
        # Guide, "Set up ingestion from a new Prometheus server using Helm").
        spec["remoteWrite"] = [{"url": remote_write_url, "sigv4": {"region": region}}]
    return {"serviceAccount": {"create": True, "name": PROMETHEUS_SERVICE_ACCOUNT}, "prometheusSpec": spec}


def kube_prometheus_stack_values(fp: Footprint, cluster_name: str, region: str, alertmanager_config: dict[str, Any],
                                 remote_write_url: str | None = None, slack: bool = False) -> dict[str, Any]:
    am_spec: dict[str, Any] = _system({"resources": ALERTMANAGER_RESOURCES})
    if slack:
        am_spec["secrets"] = [ALERTMANAGER_SECRET]  # mounted at /etc/alertmanager/secrets/<name>/
    return {
        "fullnameOverride": RELEASE,
        # EKS runs the control plane: its scheduler, controller manager, etcd and kube-proxy
        # metrics are not reachable from the cluster, so neither their monitors nor their rules.
        "kubeControllerManager": {"enabled": False},
        "kubeScheduler": {"enabled": False},
        "kubeEtcd": {"enabled": False},
        "kubeProxy": {"enabled": False},
        "defaultRules": {"rules": {"etcd": False, "kubeControllerManager": False, "kubeSchedulerAlerting": False,
                                   "kubeSchedulerRecording": False, "kubeProxy": False}},
        "prometheusOperator": {**_system({"resources": OPERATOR_RESOURCES}),
                               "admissionWebhooks": {"patch": _system({"resources": WEBHOOK_JOB_RESOURCES})},
                               "prometheusConfigReloader": {"enableProbe": True,
                                                            "resources": CONFIG_RELOADER_RESOURCES}},
        "prometheus": prometheus_values(fp, cluster_name, remote_write_url, region),
        "alertmanager": {"serviceAccount": {"create": True, "name": ALERTMANAGER_SERVICE_ACCOUNT},
                         "config": alertmanager_config, "alertmanagerSpec": am_spec},
        "grafana": {
            **_system({"resources": GRAFANA_RESOURCES}),
            "serviceAccount": {"create": True, "name": GRAFANA_SERVICE_ACCOUNT},
            # The admin password is a Secret we create from a random one, never a chart default.
            "admin": {"existingSecret": GRAFANA_ADMIN_SECRET, "userKey": "admin-user", "passwordKey": "admin-password"},
            "sidecar": {"dashboards": {"enabled": True, "label": DASHBOARD_LABEL[0], "labelValue": DASHBOARD_LABEL[1],
                                       "searchNamespace": "ALL"},
                        "resources": GRAFANA_SIDECAR_RESOURCES},
            # FSx for Lustre's metrics live in CloudWatch (AWS/FSx); credentials from Pod Identity.
            "additionalDataSources": [{"name": "CloudWatch", "uid": "cloudwatch", "type": "cloudwatch",
                                       "jsonData": {"authType": "default", "defaultRegion": region}}],
        },
        "kube-state-metrics": {
            **_system({"resources": KUBE_STATE_METRICS_RESOURCES}),
            "metricLabelsAllowlist": [f"nodes=[{','.join(metrics.NODE_LABELS_ALLOWED)}]",
                                      f"pods=[{','.join(metrics.POD_LABELS_ALLOWED)}]"],
        },
        # On every node, GPU nodes included (the chart tolerates every NoSchedule taint).
        "prometheus-node-exporter": {"resources": NODE_EXPORTER_RESOURCES,
                                     "securityContext": dict(NODE_EXPORTER_POD_SECURITY),
                                     "containerSecurityContext": hardening.container_security_context()},
    }
