"""EFA counters per node and device, from a published image: node-exporter's textfile collector fed by a script.

Stock node-exporter does not read EFA's hw_counters (its infiniband
collector reads ports/<n>/counters, which EFA devices do not have), and
the exporter of awsome-distributed-training is a fork with no published
image. So each EFA node runs one pod of two pinned, published images:
busybox runs COLLECT_SCRIPT, which copies every
/sys/class/infiniband/<device>/ports/<port>/hw_counters/<name> into a .prom
file on an emptyDir every INTERVAL_SECONDS; node-exporter, with only its
textfile collector, serves that file. Nothing is built or pushed by us, and
nothing is written to the node.
"""

from __future__ import annotations

from typing import Any

from components.core import images
from components.core import versions as v
from components.core.kube import hardening, nodepool
from components.core.observability import metrics

NAME = "efa-counters"
PORT = 9100  # node-exporter's default --web.listen-address
INTERVAL_SECONDS = 15
TEXTFILE_DIR = "/textfile"
HOST_SYS = "/host/sys"
COMPONENT_LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpucluster"}

# POSIX sh for busybox: one family, a series per device, port and counter. The
# file is written aside and renamed, so node-exporter never reads half of it.
COLLECT_SCRIPT = r"""#!/bin/sh
set -eu
root="${SYSFS_ROOT:-/host/sys}"
out="${TEXTFILE_DIR:-/textfile}/efa.prom"
while :; do
  tmp="$out.tmp"
  {
    echo "# HELP @METRIC@ EFA device counter, /sys/class/infiniband/<device>/ports/<port>/hw_counters/<counter>."
    echo "# TYPE @METRIC@ untyped"
    for f in "$root"/class/infiniband/*/ports/*/hw_counters/*; do
      [ -f "$f" ] || continue
      counter="${f##*/}"
      rest="${f%%/hw_counters/*}"
      port="${rest##*/}"
      device="${rest%%/ports/*}"
      device="${device##*/}"
      value="$(cat "$f" 2>/dev/null)" || continue
      case "$value" in ''|*[!0-9]*) continue ;; esac
      echo "@METRIC@{device=\"$device\",port=\"$port\",counter=\"$counter\"} $value"
    done
  } > "$tmp"
  mv "$tmp" "$out"
  [ "${ONCE:-0}" = 1 ] && exit 0
  sleep "${INTERVAL_SECONDS:-@INTERVAL@}"
done
""".replace("@METRIC@", metrics.EFA_COUNTER).replace("@INTERVAL@", str(INTERVAL_SECONDS))

# Small: a shell loop over a few hundred files, and one text file served.
COLLECTOR_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}
EXPORTER_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}}

# Both containers as `nobody`: sysfs's hw_counters files are world-readable (0444), the emptyDir is
# world-writable, the script's ConfigMap is mode 0555; nothing else is written. node-exporter's image
# runs as nobody already (quay.io/prometheus/node-exporter: USER nobody); busybox's as root, hence the UID.
POD_SECURITY = hardening.pod_security_context(hardening.NOBODY)
# The collector is alive while it keeps rewriting the file (every INTERVAL_SECONDS), ready once it has
# written it; node-exporter's landing page (`/`, as the prometheus-node-exporter chart probes it).
STALE_AFTER_MINUTES = 2
COLLECTOR_LIVENESS = {"exec": {"command": ["/bin/sh", "-c", f'test -n "$(find {TEXTFILE_DIR}/efa.prom '
                                                            f'-mmin -{STALE_AFTER_MINUTES})"']},
                      "initialDelaySeconds": 60, "periodSeconds": 60, "timeoutSeconds": 5}
COLLECTOR_READINESS = {"exec": {"command": ["/bin/sh", "-c", f"test -f {TEXTFILE_DIR}/efa.prom"]},
                       "periodSeconds": 15, "timeoutSeconds": 5}
EXPORTER_PROBE = {"httpGet": {"path": "/", "port": PORT}, "periodSeconds": 30, "timeoutSeconds": 5}


def config_map(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": namespace, "labels": dict(COMPONENT_LABELS)},
            "data": {"collect.sh": COLLECT_SCRIPT}}


def daemon_set(namespace: str, image_cache: str | None = None) -> dict[str, Any]:
    """On every EFA node (the EFA device plugin's label), tolerating the GPU taint; busybox through the
    pull-through cache at `image_cache` (components.core.images) when there is one."""
    volumes = [
        {"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}},
        {"name": "textfile", "emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}},
        {"name": "script", "configMap": {"name": NAME, "defaultMode": 0o555}},
    ]
    collector = {
        "name": "collect", "image": images.through_cache(v.BUSYBOX_IMAGE, image_cache), "command": ["/bin/sh", "/script/collect.sh"],
        "env": [{"name": "SYSFS_ROOT", "value": HOST_SYS}, {"name": "TEXTFILE_DIR", "value": TEXTFILE_DIR},
                {"name": "INTERVAL_SECONDS", "value": str(INTERVAL_SECONDS)}],
        "resources": COLLECTOR_RESOURCES,
        "livenessProbe": COLLECTOR_LIVENESS,
        "readinessProbe": COLLECTOR_READINESS,
        "securityContext": hardening.container_security_context(),
        "volumeMounts": [{"name": "sys", "mountPath": HOST_SYS, "readOnly": True},
                         {"name": "textfile", "mountPath": TEXTFILE_DIR},
                         {"name": "script", "mountPath": "/script", "readOnly": True}],
    }
    exporter = {
        "name": "node-exporter", "image": v.NODE_EXPORTER_IMAGE,
        "args": ["--collector.disable-defaults", "--collector.textfile",
                 f"--collector.textfile.directory={TEXTFILE_DIR}", f"--web.listen-address=:{PORT}"],
        "ports": [{"name": "metrics", "containerPort": PORT}],
        "resources": EXPORTER_RESOURCES,
        "livenessProbe": {**EXPORTER_PROBE, "failureThreshold": 3},
        "readinessProbe": dict(EXPORTER_PROBE),
        "securityContext": hardening.container_security_context(),
        "volumeMounts": [{"name": "textfile", "mountPath": TEXTFILE_DIR, "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(COMPONENT_LABELS)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(COMPONENT_LABELS)},
                "spec": {
                    "nodeSelector": {nodepool.EFA_LABEL: "true"},
                    "tolerations": [nodepool.GPU_TAINT.toleration()],
                    "priorityClassName": "system-node-critical",
                    # Neither container calls the Kubernetes API.
                    "automountServiceAccountToken": False,
                    "securityContext": dict(POD_SECURITY),
                    "containers": [collector, exporter],
                    "volumes": volumes,
                },
            },
        },
    }


def pod_monitor(namespace: str) -> dict[str, Any]:
    """Scraped by Prometheus with the node's name as `node`, like every per-node series here."""
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
        "metadata": {"name": NAME, "namespace": namespace, "labels": dict(COMPONENT_LABELS)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "podMetricsEndpoints": [{"port": "metrics", "interval": f"{INTERVAL_SECONDS}s",
                                     "relabelings": [node_relabeling()]}],
        },
    }


def node_relabeling() -> dict[str, Any]:
    """The scraped pod's node as the `node` label (Prometheus Operator RelabelConfig)."""
    return {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}
