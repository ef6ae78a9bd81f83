"""How big the metrics stack must be, and what it costs: series at every pool's maxNodes, the volume, AMP.

Estimates, stated as such in the plan. Per node: node-exporter's and
cAdvisor's series grow with the vCPUs and pods, dcgm-exporter's with the
GPUs, ours with the EFA devices. Prometheus stores 1-2 bytes per sample
(prometheus.io/docs/prometheus/latest/storage, "Operational aspects"); we
take 2 and double the volume for compaction and headroom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from components.core.config import StackConfig
from components.core.hardware import efa

SERIES_PER_NODE = 1500  # node-exporter, kubelet, cAdvisor and kube-state-metrics' fixed share
SERIES_PER_VCPU = 10  # node_cpu_seconds_total's modes and the per-CPU collectors
SERIES_PER_GPU = 30  # the dcgm-exporter counters we enable
SERIES_PER_EFA_DEVICE = 30  # one per hw_counters file
SERIES_PER_SYSTEM_NODE = 6000  # the operators', Kueue's and the stack's own pods and their targets
BYTES_PER_SAMPLE = 2
SECONDS_PER_SCRAPE = 30
# A fixed default, not the estimate: the volume's size must not follow maxNodes or retentionDays,
# because the Prometheus Operator cannot change a StatefulSet's claim template in place (it
# re-creates the StatefulSet) and never resizes an existing claim (prometheus-operator
# Documentation/platform/storage.md, "Resizing volumes"). The plan warns when the estimate is larger.
DEFAULT_VOLUME_GIB = 100
RETENTION_SIZE_SHARE = 0.85
# Prometheus keeps about this much memory per head series (head block chunks, index, WAL replay).
MEMORY_BYTES_PER_SERIES = 8 * 1024

# Prices, us-east-1 (the plan says so for other regions): gp3 $0.08/GB-month
# (aws.amazon.com/ebs/pricing); AMP $0.90 per 10M samples ingested (first 2B a month)
# and $0.03/GB-month stored (aws.amazon.com/prometheus/pricing), kept 150 days by default (the
# workspace's retention period, Amazon Managed Service for Prometheus User Guide). 730 hours a month.
GP3_USD_PER_GB_MONTH = 0.08
AMP_USD_PER_SAMPLE = 0.90 / 10_000_000
AMP_USD_PER_GB_MONTH = 0.03
AMP_BYTES_PER_SAMPLE = 2
AMP_RETENTION_DAYS = 150
HOURS_PER_MONTH = 730


@dataclass(frozen=True)
class Footprint:
    series: int
    retention_days: int
    volume_gib: int
    needed_gib: int  # retentionDays of every series at maxNodes, twice over
    prometheus_resources: dict[str, Any]
    ebs_usd_per_hour: float
    amp_usd_per_hour: float

    @property
    def samples_per_second(self) -> float:
        return self.series / SECONDS_PER_SCRAPE

    @property
    def retention_size_gb(self) -> int:
        """Size-based retention: 85 % of the volume, so the disk never fills. Prometheus's "GB" is
        2^30 bytes (units are powers of 2: cmd/prometheus/main.go, --storage.tsdb.retention.size)."""
        return max(1, int(self.volume_gib * RETENTION_SIZE_SHARE))

    @property
    def holds_retention(self) -> bool:
        return self.needed_gib <= self.volume_gib

    def to_dict(self) -> dict[str, Any]:
        return {"series": self.series, "retentionDays": self.retention_days, "volumeGiB": self.volume_gib,
                "neededGiB": self.needed_gib,
                "prometheusMemory": self.prometheus_resources["requests"]["memory"],
                "ebsUsdPerHour": round(self.ebs_usd_per_hour, 4), "ampUsdPerHour": round(self.amp_usd_per_hour, 4)}


def series_estimate(cfg: StackConfig) -> int:
    """Active series with every pool at maxNodes."""
    total = SERIES_PER_SYSTEM_NODE * cfg.system_nodes.count
    for pool in (p for p in cfg.gpu_pools if p is not None):
        node = pool.instance
        efa_devices = efa.efa_interface_count(node, pool.efa_enabled) if pool.efa_enabled else 0
        per_node = (SERIES_PER_NODE + SERIES_PER_VCPU * node.vcpus + SERIES_PER_GPU * node.gpu_count
                    + SERIES_PER_EFA_DEVICE * efa_devices)
        total += per_node * pool.max_nodes
    return total


def _memory(series: int) -> int:
    """Prometheus's memory request, MiB: 512 MiB plus the head series, rounded up to 256 MiB."""
    mib = 512 + series * MEMORY_BYTES_PER_SERIES / 2**20
    return int(math.ceil(mib / 256) * 256)


def footprint(cfg: StackConfig) -> Footprint:
    obs = cfg.observability
    series = series_estimate(cfg)
    disk_bytes = series / SECONDS_PER_SCRAPE * BYTES_PER_SAMPLE * obs.retention_days * 86400
    needed = int(math.ceil(2 * disk_bytes / 2**30 / 10) * 10)
    volume = obs.volume_gib or DEFAULT_VOLUME_GIB
    memory = _memory(series)
    resources = {"requests": {"cpu": "500m", "memory": f"{memory}Mi"}, "limits": {"memory": f"{memory * 2}Mi"}}
    ebs = volume * 1.073741824 * GP3_USD_PER_GB_MONTH / HOURS_PER_MONTH
    amp = 0.0
    if obs.remote_write == "amp":
        samples_per_hour = series / SECONDS_PER_SCRAPE * 3600
        stored_gb = samples_per_hour * 24 * AMP_RETENTION_DAYS * AMP_BYTES_PER_SAMPLE / 1e9  # steady state
        amp = samples_per_hour * AMP_USD_PER_SAMPLE + stored_gb * AMP_USD_PER_GB_MONTH / HOURS_PER_MONTH
    return Footprint(series=series, retention_days=obs.retention_days, volume_gib=volume, needed_gib=needed,
                     prometheus_resources=resources, ebs_usd_per_hour=ebs, amp_usd_per_hour=amp)
