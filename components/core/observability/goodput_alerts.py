"""The goodput alerts: a node that slows a running job (NCCL on sockets, a straggler, a fatal XID) and a job
that stopped making progress.

The three node alerts are what the goodput controller acts on (REMEDIABLE_ALERTS, read from Prometheus'
GET /api/v1/alerts): each carries the labels `node`, `namespace` and `gpucluster_job`, the node to blame and
the job it slows. JobNoProgress names no node (a stalled collective stalls every rank alike), so it only
alerts.

A job's nodes come from the recording rule metrics.JOB_NODE (1 per namespace, node, job). Every join puts
that rule on the left and a per-node aggregate on the right (`JOB_NODE * on (node) group_left () ...`): two
jobs sharing a node then give two alerts, where the other way round would be a many-to-many error that
fails the whole rule. A node's GPU utilisation is the mean of all its GPUs: multi-node jobs hold whole nodes.

NcclOnSockets blames a node only when a peer of its job still carries EFA traffic: that node alone fell back.
When every node of a job is flat the cause is the job's (an image without aws-ofi-nccl, NCCL_NET=Socket, a
`launcher: ps` job talking gRPC over TCP), and quarantining its healthy nodes one by one would not fix it:
doctor's log rule nccl-socket-fallback names that case. JobGpuXidNeedsNodeReplacement fires only for a
fatal XID fresh in the last XID_FRESH_MINUTES: dcgm-exporter's gauge keeps the last XID, so a repaired
node put back in service must not be blamed again under its next job (alerts.py's node-level
GpuXidNeedsNodeReplacement keeps the XID_ALERT_HOURS view for the operator).

Only series our exporters emit are named (metrics.py; tests/test_observability.py checks each against the
exporters' own lists).
"""

from __future__ import annotations

from typing import Any

from components.core.config import StackConfig
from components.core.goodput import names
from components.core.observability import metrics as m

NCCL_ON_SOCKETS = "NcclOnSockets"
STRAGGLER = "JobStraggler"
XID = "JobGpuXidNeedsNodeReplacement"  # alerts.py's GpuXidNeedsNodeReplacement (node, gpu), per job
NO_PROGRESS = "JobNoProgress"
# The alerts the remediation controller acts on, and the reason it records (components/core/goodput/names.py).
REMEDIABLE_ALERTS: dict[str, str] = {
    NCCL_ON_SOCKETS: names.REASON_NCCL_ON_SOCKETS,
    STRAGGLER: names.REASON_STRAGGLER,
    XID: names.REASON_XID,
}

WINDOW = "5m"  # gauges averaged, EFA counters' rate: a few 15-30 s scrapes, past one slow step
XID_FRESH_MINUTES = 10  # the job alert holds a new fatal XID this long: many controller passes (10 s)
XID_CHANGE_MINUTES = 2  # a change seen within this window, on a 1-minute subquery step at 15-30 s scrapes
NCCL_FLAT_MINUTES = 5  # EFA flat for this long (after the window) while the GPUs work
STRAGGLER_MINUTES = 10
STEPS_WINDOW_MINUTES = 2  # JobNoProgress: 4 scrapes at the jobs' 30 s; `for` covers the rest of N minutes
STEP_METRIC = "gpucluster_job_step_seconds"
STEPS_METRIC = "gpucluster_job_steps_total"  # metrics.JOB_METRICS
SIGNAL_GPU, SIGNAL_STEP = "gpu-utilisation", "step-time"  # JobStraggler's `signal` label
JOB_KEY = f"namespace, {m.JOB}"


def efa_pools(cfg: StackConfig) -> list[str]:
    return [p.name for p in cfg.gpu_pools if p.efa_enabled]


def fatal_xids() -> str:
    """Each GPU whose last XID (the gauge's value) is one that needs the node replaced."""
    return " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {x}" for x in m.XIDS_REPLACE_NODE)


def xids_over_time() -> str:
    """Any fatal XID of a GPU in the last XID_ALERT_HOURS: the expression GpuXidNeedsNodeReplacement aggregates."""
    return f"max_over_time(({fatal_xids()})[{m.XID_ALERT_HOURS}h:1m])"


def fresh_xids() -> str:
    """A GPU whose gauge changed to a fatal XID in the last XID_FRESH_MINUTES: a value that never moved (the
    XID of a node since repaired, or a new series of the next pod starting at it) is not fresh. Held over the
    window, so a harmless XID right after the fatal one does not hide it."""
    changed = f"changes(DCGM_FI_DEV_XID_ERRORS[{XID_CHANGE_MINUTES}m]) > 0"
    return f"max_over_time((({fatal_xids()}) and {changed})[{XID_FRESH_MINUTES}m:1m])"


def _per_job_node(per_node: str) -> str:
    """`per_node` (one series per node) for each job on the node: (namespace, node, gpucluster_job)."""
    return f"({m.JOB_NODE} * on (node) group_left () {per_node})"


def job_node_gpu_util() -> str:
    return _per_job_node(f"avg by (node) (avg_over_time(DCGM_FI_DEV_GPU_UTIL[{WINDOW}]))")


def job_node_step_seconds() -> str:
    """The slowest rank's step time on each node of a job: the job's pods report it (no `node` label)."""
    pod_node = (f"{m.JOB_POD} * on (namespace, pod) group_left (node) max by (namespace, pod, node) "
                '(kube_pod_info{node!=""})')
    return (f"max by (namespace, node, {m.JOB}) (avg_over_time({STEP_METRIC}[{WINDOW}]) * on (namespace, pod) "
            f"group_left (node, {m.JOB}) ({pod_node}))")


def _median(series: str) -> str:
    return f"quantile by ({JOB_KEY}) (0.5, {series})"


def nccl_on_sockets(cfg: StackConfig) -> str:
    util = job_node_gpu_util()
    counters = "|".join(m.EFA_TRAFFIC + m.EFA_RDMA)
    traffic = f'sum by (node) (rate({m.EFA_COUNTER}{{counter=~"{counters}"}}[{WINDOW}]))'
    # Multi-node jobs only (one node's ranks talk over NVLink), counting the job's GPU nodes: an MPIJob's
    # launcher, or parameter servers, run on nodes without GPUs. `== 0`, not `unless ... > 0`: a node whose
    # counters are missing (exporter down) is not blamed. The last clause: some other node of the job (this
    # one is flat) moves EFA bytes, so NCCL does use EFA there; all flat is the job's own setup (docstring).
    return (f"{util} > {m.IDLE_GPU_PERCENT} and on ({JOB_KEY}) (count by ({JOB_KEY}) ({util}) > 1) "
            f'and on (node) kube_node_labels{{{m.POOL_LABEL}=~"{"|".join(efa_pools(cfg))}"}} '
            f"and on (node) ({traffic} == 0) "
            f"and on ({JOB_KEY}) {_per_job_node(f'({traffic} > 0)')}")


def straggler(cfg: StackConfig) -> str:
    ratio = f"{cfg.observability.goodput.straggler_ratio:g}"
    util, step = job_node_gpu_util(), job_node_step_seconds()
    # Against the median of all the job's nodes (itself included: PromQL has no leave-one-out), and only
    # while that median is busy: a job idling as a whole is JobGpusIdle's. One node alone is its own median.
    slow_gpus = (f"{util} < on ({JOB_KEY}) group_left () ({ratio} * ({_median(util)} > "
                 f"{m.IDLE_GPU_PERCENT}))")
    slow_steps = f"{step} > on ({JOB_KEY}) group_left () ({_median(step)} / {ratio})"
    return (f'label_replace({slow_gpus}, "signal", "{SIGNAL_GPU}", "", "") or '
            f'label_replace({slow_steps}, "signal", "{SIGNAL_STEP}", "", "")')


def xid_on_job_node() -> str:
    return _per_job_node(f"max by (node) ({fresh_xids()})")


def no_progress() -> str:
    # No pod of the job counted a step in the window; `for` makes it the last no_progress_minutes.
    return (f"max by ({JOB_KEY}) (increase({STEPS_METRIC}[{STEPS_WINDOW_MINUTES}m]) * on (namespace, pod) "
            f"group_left ({m.JOB}) {m.JOB_POD}) == 0")


DOCTOR_ARGS = "{{ $labels.gpucluster_job }} --namespace {{ $labels.namespace }}"
REMEDY = ("With its pool's `remediation: on` the goodput controller quarantines {{ $labels.node }} (taint "
          f"{names.QUARANTINE_TAINT_KEY}, cordon) and deletes the job's pod there, so the job restarts from its "
          "newest checkpoint on a replacement; `dry-run` only records it on the job")


def alert_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    goodput = cfg.observability.goodput
    job = "{{ $labels.namespace }}/{{ $labels.gpucluster_job }}"
    rules = []
    if efa_pools(cfg):
        rules.append(m.alert(
            NCCL_ON_SOCKETS, nccl_on_sockets(cfg), NCCL_FLAT_MINUTES, "critical",
            f"Job {job}'s GPUs on {{{{ $labels.node }}}} are busy but the node's EFA devices moved no bytes for "
            f"{NCCL_FLAT_MINUTES} minutes while its peers' did: NCCL on this node runs over TCP sockets",
            f"{REMEDY}. Otherwise: `bootstrap doctor {DOCTOR_ARGS}` (cause nccl-socket-fallback: NCCL_DEBUG=INFO "
            "logs `NET/Socket`, no `NET/OFI`); the pod must request vpc.amazonaws.com/efa. A job whose nodes are "
            "all flat (an image without the aws-ofi-nccl plugin, NCCL_NET=Socket) is not alerted here: doctor's "
            "nccl-socket-fallback names it."))
    pct = f"{goodput.straggler_ratio * 100:g}%"
    rules += [
        m.alert(
            STRAGGLER, straggler(cfg), STRAGGLER_MINUTES, "warning",
            f"{{{{ $labels.node }}}} slows job {job}: its {{{{ $labels.signal }}}} ({{{{ $value | humanize }}}}) is "
            f"off its peers' median by more than the straggler ratio {goodput.straggler_ratio:g}",
            f"{REMEDY}. Otherwise: GPU utilisation under {pct} of the job's median (or step time over the median / "
            f"{goodput.straggler_ratio:g}) for {STRAGGLER_MINUTES} minutes; compare the node on the job dashboard "
            "(throttling, an XID, EFA errors), then cordon it and delete its pod."),
        m.alert(
            XID, xid_on_job_node(), 0, "critical",
            f"Job {job} runs on {{{{ $labels.node }}}}, whose GPU reported XID {{{{ $value }}}} in the last "
            f"{XID_FRESH_MINUTES} minutes",
            f"{REMEDY}. Otherwise: this XID does not clear with a restart (GpuXidNeedsNodeReplacement); "
            "`kubectl cordon {{ $labels.node }}`, delete the job's pod there, terminate the instance. Only a "
            "fresh XID fires: the gauge keeps the last one, so a repaired node back in service is not blamed again."),
        m.alert(
            NO_PROGRESS, no_progress(), goodput.no_progress_minutes - STEPS_WINDOW_MINUTES, "warning",
            f"Job {job} has counted no step for {goodput.no_progress_minutes} minutes",
            "Not remediated: no node is to blame (a hung collective or data loader stalls every rank alike). "
            f"Read its logs (py-spy dump on a rank shows where it waits) and `bootstrap doctor {DOCTOR_ARGS}`, then "
            "restart it from its checkpoint; every stalled minute bills."),
    ]
    return rules
