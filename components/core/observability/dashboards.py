"""The dashboards, as Grafana JSON in ConfigMaps the Grafana sidecar loads: cluster, job, node health and,
with teams, GPU spend by team.

Every Prometheus query names only series the pinned exporters, our rules or
the goodput controller (its GPU-seconds by phase and goodput per job) emit
(tests parse each one as PromQL and check its metric names). The job
dashboard's `namespace` and `job` variables list the jobs Prometheus has
seen (a job is its namespace and name); its FSx panel reads CloudWatch
(AWS/FSx), drawn against the file system's own throughput.
"""

from __future__ import annotations

import json
from typing import Any

from components.core.config import FSX_GIB_PER_TIB, StackConfig
from components.core.goodput import names as goodput
from components.core.observability import alerts
from components.core.observability import metrics as m
from components.core.observability import spend as sp

PROMETHEUS = {"type": "prometheus", "uid": "prometheus"}  # kube-prometheus-stack's provisioned data source
CLOUDWATCH = {"type": "cloudwatch", "uid": "cloudwatch"}  # ours (prometheus_stack.py)
RATE = "$__rate_interval"
RANGE = "$__range"  # the dashboard's time range, in Grafana's queries
JOB_VAR = f'namespace="$namespace", {m.JOB}="$job"'  # teams may each run a job of the same name
FSX_METRICS = ("DataReadBytes", "DataWriteBytes")  # AWS/FSx, Sum per period (FSx for Lustre User Guide, metrics)
FSX_FREE = "FreeDataStorageCapacity"


def _panel(title: str, targets: list[dict[str, Any]], unit: str, x: int, y: int, w: int = 12, h: int = 8,
           kind: str = "timeseries", datasource: dict[str, str] = PROMETHEUS,
           thresholds: list[tuple[float, str]] | None = None) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit}
    if thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": [{"value": None, "color": "green"}] + [
            {"value": v, "color": c} for v, c in thresholds]}
    return {"type": kind, "title": title, "datasource": datasource, "gridPos": {"x": x, "y": y, "w": w, "h": h},
            "fieldConfig": {"defaults": defaults, "overrides": []}, "targets": targets}


def _q(expr: str, legend: str, ref: str = "A") -> dict[str, Any]:
    return {"datasource": PROMETHEUS, "expr": expr, "legendFormat": legend, "refId": ref}


def _dashboard(uid: str, title: str, panels: list[dict[str, Any]],
               variables: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    for i, panel in enumerate(panels, start=1):
        panel["id"] = i
    return {"uid": uid, "title": title, "tags": ["gpucluster"], "schemaVersion": 39, "editable": False,
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
            "templating": {"list": variables or []}, "panels": panels}


def _stacked(panel: dict[str, Any]) -> dict[str, Any]:
    """A time series panel whose series are drawn on top of each other (Grafana's stacking "normal")."""
    panel["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 60,
                                                  "lineWidth": 1}
    return panel


def _goodput_panels(y: int) -> list[dict[str, Any]]:
    """The goodput controller's account of the chosen job (components/core/goodput/accounting.py): its paid
    GPU-hours by phase, stacked (they add up to its GPUs x wall clock), and training over paid."""
    by_phase = f"sum by (phase) ({goodput.GPU_SECONDS_METRIC}{{{JOB_VAR}}}) / 3600"
    return [
        _stacked(_panel("GPU-hours by phase (the goodput controller's account)", [_q(by_phase, "{{phase}}")],
                        "short", 0, y)),
        _panel("Goodput: training over paid GPU-seconds", [_q(f"max({goodput.GOODPUT_METRIC}{{{JOB_VAR}}})",
                                                              "goodput")], "percentunit", 12, y),
    ]


def _by_pool(expr: str) -> str:
    return f"{expr} * on (node) group_left ({m.POOL_LABEL}) kube_node_labels"


def _job_nodes(expr: str) -> str:
    return f"{expr} * on (node) group_left () {alerts.JOB_NODE}{{{JOB_VAR}}}"


def cluster(cfg: StackConfig) -> dict[str, Any]:
    gpus_requested = ('kube_pod_container_resource_requests{resource="nvidia_com_gpu"} * on (namespace, pod) '
                      'group_left () (kube_pod_status_phase{phase="Running"} == 1)')
    return _dashboard("gpucluster-cluster", f"gpucluster / {cfg.cluster_name} / cluster", [
        _panel("GPUs allocated per pool", [_q(f"sum by ({m.POOL_LABEL}) ({_by_pool(gpus_requested)})",
                                              "{{" + m.POOL_LABEL + "}}")], "short", 0, 0),
        _panel("GPUs busy per pool (mean utilization)", [_q(
            f"avg by ({m.POOL_LABEL}) ({_by_pool('DCGM_FI_DEV_GPU_UTIL')})", "{{" + m.POOL_LABEL + "}}")],
            "percent", 12, 0),
        _panel("GPU nodes per pool", [_q(f'count by ({m.POOL_LABEL}) (kube_node_labels{{{m.POOL_LABEL}!=""}})',
                                         "{{" + m.POOL_LABEL + "}}")], "short", 0, 8),
        _panel("Cost per hour now", [_q(f"sum({alerts.COST})", "USD/h")], "currencyUSD", 12, 8, kind="stat"),
        _panel("Workloads queued and admitted", [
            _q('sum by (cluster_queue, status) (kueue_pending_workloads)', "pending {{cluster_queue}} {{status}}"),
            _q("sum by (cluster_queue) (kueue_admitted_active_workloads)", "admitted {{cluster_queue}}", "B"),
        ], "short", 0, 16, w=24),
        _panel("Goodput per job: training over paid GPU-seconds (the goodput controller's)", [
            _q(f"max by (namespace, {m.JOB}) ({goodput.GOODPUT_METRIC})", "{{namespace}}/{{" + m.JOB + "}}")],
            "percentunit", 0, 24, w=24),
    ])


def _fsx_targets(file_system_id: str, region: str) -> list[dict[str, Any]]:
    return [{"datasource": CLOUDWATCH, "refId": chr(ord("A") + i), "region": region, "namespace": "AWS/FSx",
             "metricName": name, "dimensions": {"FileSystemId": file_system_id}, "statistic": "Sum",
             "period": "60", "queryMode": "Metrics", "metricQueryType": 0, "metricEditorMode": 0,
             "label": name} for i, name in enumerate(FSX_METRICS)]


def fsx_throughput_mb_s(cfg: StackConfig) -> float:
    """The file system's baseline throughput, MB/s: capacity in TiB (as FSx counts it) x its tier."""
    fsx = cfg.storage.fsx
    per_tib = fsx.throughput_per_tib or 200  # SCRATCH_2: 200 MB/s/TiB
    return fsx.storage_capacity_gib / FSX_GIB_PER_TIB * per_tib


def _variable(name: str, query: str) -> dict[str, Any]:
    """A variable listing a label's values, of the series a selector names (Grafana, "Prometheus template
    variables": label_values(metric, label)); refresh 2: on each time range change."""
    return {"name": name, "label": name, "type": "query", "datasource": PROMETHEUS, "refresh": 2,
            "query": {"query": query, "refId": f"{name}s"}, "definition": query}


def job(cfg: StackConfig, file_system_id: str, region: str) -> dict[str, Any]:
    # The namespaces running a job, then that namespace's jobs.
    variables = [_variable("namespace", f"label_values({alerts.JOB_NODE}, namespace)"),
                 _variable("job", f'label_values({alerts.JOB_NODE}{{namespace="$namespace"}}, {m.JOB})')]
    rdma = "|".join(m.EFA_RDMA)
    fsx_mb_s = fsx_throughput_mb_s(cfg)
    panels = [
        _panel("GPU utilization per node", [_q(f"avg by (node) ({_job_nodes('DCGM_FI_DEV_GPU_UTIL')})", "{{node}}")],
               "percent", 0, 0, thresholds=[(90, "blue")]),
        _panel("SM and tensor activity per node", [
            _q(f"avg by (node) ({_job_nodes('DCGM_FI_PROF_SM_ACTIVE')})", "SM {{node}}"),
            _q(f"avg by (node) ({_job_nodes('DCGM_FI_PROF_PIPE_TENSOR_ACTIVE')})", "tensor {{node}}", "B"),
        ], "percentunit", 12, 0),
        _panel("GPU memory used", [_q(f"sum by (node) ({_job_nodes('DCGM_FI_DEV_FB_USED')})", "{{node}}")],
               "decmbytes", 0, 8),
        _panel("GPU power", [_q(f"sum by (node) ({_job_nodes('DCGM_FI_DEV_POWER_USAGE')})", "{{node}}")],
               "watt", 12, 8),
        _panel("XID errors", [_q(f"max by (node, gpu) ({_job_nodes('DCGM_FI_DEV_XID_ERRORS')}) > 0",
                                 "{{node}} GPU {{gpu}}")], "none", 0, 16),
        # The instance's bandwidth is per direction: sent and received each against it.
        _panel("EFA throughput per node and direction vs the instance's bandwidth", [
            *(_q(f'sum by (node) ({_job_nodes(f"rate({m.EFA_COUNTER}{{counter={json.dumps(c)}}}[{RATE}])")})'
                 " * 8 / 1e9", f"{c.removesuffix('_bytes')} {{{{node}}}}", ref)
              for c, ref in zip(m.EFA_TRAFFIC, "AB", strict=True)),
            _q(_job_nodes(alerts.NODE_BANDWIDTH), "bandwidth {{node}}", "C"),
            _q(f'sum by (node) ({_job_nodes(f"rate({m.EFA_COUNTER}{{counter=~{json.dumps(rdma)}}}[{RATE}])")})'
               " * 8 / 1e9", "RDMA {{node}}", "D"),
        ], "Gbits", 12, 16),
        # CloudWatch sums bytes per 60 s period: the line is the file system's throughput x 60 s.
        _panel("FSx bytes per minute vs the file system's throughput", _fsx_targets(file_system_id, region),
               "decbytes", 0, 24,
               datasource=CLOUDWATCH, thresholds=[(fsx_mb_s * 1e6 * 60, "red")]),
        _panel("Tokens/s (when the job reports gpucluster_job_tokens_per_second)", [
            _q(f'sum(gpucluster_job_tokens_per_second * on (namespace, pod) group_left () {alerts.JOB_POD}'
               f"{{{JOB_VAR}}})", "tokens/s"),
        ], "short", 12, 24),
        _panel("Step time (when the job reports gpucluster_job_step_seconds)", [
            _q(f'max(gpucluster_job_step_seconds * on (namespace, pod) group_left () {alerts.JOB_POD}'
               f"{{{JOB_VAR}}})", "step"),
        ], "s", 12, 32),
        *_goodput_panels(40),
    ]
    return _dashboard("gpucluster-job", f"gpucluster / {cfg.cluster_name} / job", panels, variables)


def node_health(cfg: StackConfig) -> dict[str, Any]:
    conditions = "|".join(m.NODE_HEALTH_CONDITIONS)
    pool_nodes = f'on (node) group_left () kube_node_labels{{{m.POOL_LABEL}!=""}}'
    return _dashboard("gpucluster-node-health", f"gpucluster / {cfg.cluster_name} / node health", [
        _panel("Node monitoring agent: conditions False", [
            _q(f'(kube_node_status_condition{{condition=~"{conditions}",status="false"}} == 1) * {pool_nodes}',
               "{{node}} {{condition}}")], "none", 0, 0, kind="table"),
        _panel("GPU nodes not Ready", [_q(f'(kube_node_status_condition{{condition="Ready",status="true"}} == 0) '
                                          f"* {pool_nodes}", "{{node}}")], "none", 12, 0, kind="table"),
        _panel("XID errors (last value per GPU)", [_q("max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                                                      "{{node}} GPU {{gpu}}")], "none", 0, 8),
        _panel("ECC errors (volatile)", [
            _q(f"sum by (node) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[{RATE}]))", "double-bit {{node}}"),
            _q(f"sum by (node) (increase(DCGM_FI_DEV_ECC_SBE_VOL_TOTAL[{RATE}]))", "single-bit {{node}}", "B"),
        ], "short", 12, 8),
        _panel("Row remapping", [
            _q("max by (node, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE)", "failed {{node}} GPU {{gpu}}"),
            _q("sum by (node) (DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS)", "uncorrectable {{node}}", "B"),
        ], "short", 0, 16),
        _panel("EFA error counters", [_q(
            f'sum by (node, counter) (increase({m.EFA_COUNTER}{{counter=~"{"|".join(m.EFA_ERRORS)}"}}[{RATE}]))',
            "{{node}} {{counter}}")], "short", 12, 16),
    ])


def _table(expr: str, ref: str) -> dict[str, Any]:
    """One value per row at the end of the range (a table panel's instant query)."""
    return {**_q(expr, "", ref), "instant": True, "range": False, "format": "table"}


def spend(cfg: StackConfig) -> dict[str, Any]:
    """GPU spend by team (its namespace) and job, from spend.py's rules; over this month by default.

    The budget lines are the teams' monthlyBudgetUsd (gpucluster:team_budget:usd_per_month), drawn with
    each team's spend this month; the per-job table sums the per-minute rules over the dashboard's range."""
    team, job = "{{namespace}}", "{{namespace}}/{{" + m.JOB + "}}"
    month = [_q(sp.TEAM_SPEND, team)]
    if any(t.monthly_budget_usd is not None for t in cfg.teams):
        month.append(_q(sp.TEAM_BUDGET, "budget {{namespace}}", "B"))
    per_job = f"namespace, {m.JOB}"
    board = _dashboard("gpucluster-spend", f"gpucluster / {cfg.cluster_name} / GPU spend by team", [
        _panel("Spend this month per team, and its budget", month, "currencyUSD", 0, 0),
        _panel("GPU-hours this month per team", [_q(sp.TEAM_GPU_HOURS, team)], "short", 12, 0),
        _panel("Cost per hour per team", [_q(sp.TEAM_COST, team)], "currencyUSD", 0, 8),
        _panel("GPUs in use per team", [_q(sp.TEAM_GPUS, team)], "short", 12, 8),
        _panel("Cost per hour per job", [_q(sp.JOB_COST, job)], "currencyUSD", 0, 16),
        _panel("GPUs in use per job", [_q(sp.JOB_GPUS, job)], "short", 12, 16),
        # One sample a minute: the sum over the range / 60 is GPU-hours and USD.
        _panel("GPU-hours and cost per job over the dashboard's range", [
            _table(f"sum by ({per_job}) (sum_over_time({sp.JOB_GPUS}[{RANGE}])) / 60", "A"),
            _table(f"sum by ({per_job}) (sum_over_time({sp.JOB_COST}[{RANGE}])) / 60", "B"),
        ], "short", 0, 24, w=24, kind="table"),
    ])
    board["time"] = {"from": "now/M", "to": "now"}  # this calendar month so far
    return board


DASHBOARD_KEYS = ("gpucluster-cluster.json", "gpucluster-job.json", "gpucluster-node-health.json")
SPEND_KEY = "gpucluster-spend.json"  # with teams only


def dashboard_keys(cfg: StackConfig) -> tuple[str, ...]:
    """The ConfigMap keys of the stack's dashboards: the three, and the spend one when it has teams."""
    return DASHBOARD_KEYS + ((SPEND_KEY,) if cfg.teams else ())


def dashboards(cfg: StackConfig, file_system_id: str, region: str) -> dict[str, dict[str, Any]]:
    """{ConfigMap key: dashboard JSON} of all of them (dashboard_keys)."""
    boards = dict(zip(DASHBOARD_KEYS, (cluster(cfg), job(cfg, file_system_id, region), node_health(cfg)),
                      strict=True))
    if cfg.teams:
        boards[SPEND_KEY] = spend(cfg)
    return boards


def render(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=1, sort_keys=True)


def config_map_metadata(key: str, namespace: str, label: tuple[str, str]) -> dict[str, Any]:
    """A dashboard ConfigMap's metadata: the label the Grafana sidecar loads ConfigMaps by."""
    return {"name": key.removesuffix(".json"), "namespace": namespace,
            "labels": {label[0]: label[1], "app.kubernetes.io/part-of": "gpucluster"}}
