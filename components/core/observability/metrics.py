"""The metric names and labels our dashboards and alerts are written against, and where each comes from.

Every query names only series these emit (tests check them against the
pinned exporters' own lists in tests/upstream/metrics):

- dcgm-exporter's counters (DCGM_FI_*, prometheus_stack.DCGM_COUNTERS), one series per GPU, with
  the node (our relabeling) and, while a pod holds the GPU, its namespace
  and pod (the exporter's Kubernetes attribution);
- kube-state-metrics (kube_*), node and pod labels as allow-listed below;
- Kueue's controller (kueue_*);
- our EFA counters (gpucluster_efa_hw_counter, efa_exporter.py);
- our recording rules (gpucluster:*, alerts.py);
- what a job reports itself (JOB_METRICS), when it does.
"""

from __future__ import annotations

from typing import Any

from components.core.kube import nodepool

# kube-state-metrics turns an allow-listed label `a.b/c-d` into `label_a_b_c_d`
# (its --metric-labels-allowlist; non-alphanumerics become "_").
POOL_LABEL = "label_gpucluster_io_pool"
INSTANCE_TYPE_LABEL = "label_node_kubernetes_io_instance_type"
JOB_POD_LABEL = "label_gpucluster_io_job"  # MPIJob pods (components.core.kube.workers.labels)
JOBSET_POD_LABEL = "label_jobset_sigs_k8s_io_jobset_name"  # TrainJob pods: the JobSet is named like the TrainJob
NODE_LABELS_ALLOWED = (nodepool.POOL_LABEL, "node.kubernetes.io/instance-type")
POD_LABELS_ALLOWED = ("gpucluster.io/job", "jobset.sigs.k8s.io/jobset-name")

# The label our recording rules give a job's series.
JOB = "gpucluster_job"
# Recorded by our rules (alerts.py): 1 per (namespace, pod, gpucluster_job).
JOB_POD = "gpucluster:job_pod:info"
# Recorded by our rules (alerts.py): 1 per (namespace, node, gpucluster_job).
JOB_NODE = "gpucluster:job_node:info"
# The annotation every alert of ours carries.
RUNBOOK = "runbook"
# Thresholds the alerts share (alerts.py, goodput_alerts.py): a GPU under this % is idle; a fatal XID
# keeps its alerts firing this long (the gauge holds the last XID only).
IDLE_GPU_PERCENT = 10
XID_ALERT_HOURS = 6


def alert(name: str, expr: str, minutes: int, severity: str, summary: str, runbook: str) -> dict[str, Any]:
    """A PrometheusRule alert of ours: a severity, a summary and a one-line runbook."""
    rule: dict[str, Any] = {"alert": name, "expr": expr, "labels": {"severity": severity},
                            "annotations": {"summary": summary, RUNBOOK: runbook}}
    if minutes:
        rule["for"] = f"{minutes}m"
    return rule

# EFA counters: one family, a series per device, port and hw_counter file.
EFA_COUNTER = "gpucluster_efa_hw_counter"
EFA_TRAFFIC = ("tx_bytes", "rx_bytes")
EFA_RDMA = ("rdma_read_bytes", "rdma_write_bytes")
# Counters that only grow when something is wrong (the EFA driver's port stats).
EFA_ERRORS = ("rx_drops", "rdma_read_wr_err", "rdma_write_wr_err", "retrans_timeout_events",
              "unresponsive_remote_events", "impaired_remote_conn_events")
EFA_RETRANSMITS = ("retrans_bytes", "retrans_pkts")

# What a job may serve on its `metricsPort` (a PodMonitor scrapes it): the job dashboard plots these.
JOB_METRICS = {
    "gpucluster_job_tokens_per_second": "training throughput, tokens/s, a gauge per rank",
    "gpucluster_job_step_seconds": "wall time of the last optimizer step, a gauge per rank",
    "gpucluster_job_loss": "the last training loss, a gauge (TensorBoard has the curves)",
    # JobNoProgress (goodput_alerts.py) fires when no pod of a job counts one for noProgressMinutes.
    "gpucluster_job_steps_total": "optimizer steps completed, a counter per rank",
}

# EKS node monitoring agent conditions (EKS User Guide, "Detect node health issues and enable
# automatic node repair"): each False on a node with a hardware or OS problem.
NODE_HEALTH_CONDITIONS = ("AcceleratedHardwareReady", "ContainerRuntimeReady", "KernelReady", "NetworkingReady",
                          "StorageReady")

# XIDs after which the GPU must be reset or the node replaced, not the job retried: the EKS node
# monitoring agent's fatal list (aws/eks-node-monitoring-agent v1.6.4, monitors/nvidia/dcgm/
# dcgm_policies.go), which also marks the node AcceleratedHardwareReady=False, and 154 ("GPU
# recovery action changed": the driver asks for a reset or reboot; NVIDIA's XID catalog).
XIDS_REPLACE_NODE = (46, 48, 54, 62, 63, 64, 74, 79, 95, 109, 110, 119, 120, 140, 154)
