"""PrometheusRules: the recording rules the dashboards read, the alerts (each with a one-line runbook), and
Alertmanager's receivers.

Recording rules give every series a job's name (`gpucluster_job`, from
the MPIJob pods' gpucluster.io/job label or the TrainJob pods' JobSet
name) and put numbers only the stack knows into Prometheus: each node's
network bandwidth and the cluster's cost per hour, from the catalog and
the stack's prices. With teams, GPU spend per team and per job and the
budget alerts (spend.py).
"""

from __future__ import annotations

from typing import Any

from components.core.config import StackConfig
from components.core.hardware import catalog
from components.core.kube import workers
from components.core.observability import goodput_alerts, spend
from components.core.observability import metrics as m
from components.core.planning import teardown

API_VERSION = "monitoring.coreos.com/v1"
JOB_POD = m.JOB_POD  # 1 per (namespace, pod, gpucluster_job)
# A job is its namespace and name: teams may each run a job of the same name.
JOB_NODE = m.JOB_NODE
# kube-state-metrics v2.20.0 kube_pod_status_phase (STABLE): 1 for the pod's phase (tests/upstream/metrics).
RUNNING_POD = 'kube_pod_status_phase{phase="Running"} == 1'
JOB_START = "gpucluster:job_start_time:seconds"  # the oldest pod's start, per (namespace, gpucluster_job)
NODE_BANDWIDTH = "gpucluster:node_network_bandwidth:gbps"  # the instance type's, per node
COST = "gpucluster:cluster_cost_usd_per_hour"  # nodes running now, at the stack's prices
IDLE_GPU_PERCENT = m.IDLE_GPU_PERCENT
IDLE_MINUTES = 15
DEADLINE_SHARE = 0.9
XID_ALERT_HOURS = m.XID_ALERT_HOURS
RUNBOOK = m.RUNBOOK  # the annotation every alert carries


def _job_pod_rule() -> str:
    def one(label: str) -> str:
        return (f'max by (namespace, pod, {m.JOB}) (label_replace(kube_pod_labels{{{label}!=""}}, '
                f'"{m.JOB}", "$1", "{label}", "(.+)"))')
    return f"{one(m.JOB_POD_LABEL)} or {one(m.JOBSET_POD_LABEL)}"


def _types(cfg: StackConfig) -> list[str]:
    return list(dict.fromkeys([cfg.system_nodes.instance_type, *(p.instance_type for p in cfg.gpu_pools)]))


def _per_type(cfg: StackConfig, number) -> str:
    """One term per instance type of the stack: its nodes' count times `number(type)`."""
    terms = [f'(count(kube_node_labels{{{m.INSTANCE_TYPE_LABEL}="{t}"}}) or vector(0)) * {number(t)}'
             for t in _types(cfg)]
    return " + ".join(terms)


def recording_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    bandwidth = " or ".join(
        f'max by (node) (kube_node_labels{{{m.INSTANCE_TYPE_LABEL}="{t}"}}) * 0 + {catalog.get(t).network_gbps:g}'
        for t in _types(cfg))
    return [
        {"record": JOB_POD, "expr": _job_pod_rule()},
        # Running pods only: a finished job's pods stay (Succeeded) until the job is deleted, and their nodes,
        # given to the next jobs, are not its nodes any more (its GPUs idle, its straggler, its NCCL).
        # kube_pod_info once per pod (max by): two kube-state-metrics replicas, as in a rolling update, would
        # otherwise make the right side of the join many, and the rule fail.
        {"record": JOB_NODE, "expr": f"max by (namespace, node, {m.JOB}) (({JOB_POD} and on (namespace, pod) "
                                     f"({RUNNING_POD})) * on (namespace, pod) "
                                     'group_left (node) max by (namespace, pod, node) (kube_pod_info{node!=""}))'},
        {"record": JOB_START, "expr": f"min by (namespace, {m.JOB}) (kube_pod_start_time * on (namespace, pod) "
                                      f"group_left ({m.JOB}) {JOB_POD})"},
        {"record": NODE_BANDWIDTH, "expr": bandwidth},
        {"record": COST, "expr": _per_type(cfg, lambda t: f"{cfg.price(t):g}")},
    ]


_alert = m.alert


def alert_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    obs = cfg.observability
    # The gauge holds the last XID only: a harmless one after a fatal one would end the alert, so
    # any fatal XID in the last XID_ALERT_HOURS keeps it firing.
    xids = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {x}" for x in m.XIDS_REPLACE_NODE)
    xids = f"max_over_time(({xids})[{XID_ALERT_HOURS}h:1m])"
    errors = "|".join(m.EFA_ERRORS)
    conditions = "|".join(m.NODE_HEALTH_CONDITIONS)
    pool_node = f'on (node) group_left () kube_node_labels{{{m.POOL_LABEL}!=""}}'
    rules = [
        _alert("GpuXidNeedsNodeReplacement", f"max by (node, gpu) ({xids})", 0, "critical",
               "GPU {{ $labels.gpu }} on {{ $labels.node }} reported XID {{ $value }} in the last "
               f"{XID_ALERT_HOURS} hours",
               "This XID does not clear with a job restart: cordon and drain the node, then terminate the instance "
               "(the node group replaces it); `kubectl cordon {{ $labels.node }}`."),
        # group_left sets `namespace` to the job's: a GPU series carries its pod's only while a pod holds it.
        _alert("JobGpusIdle", f"avg by (namespace, {m.JOB}) (DCGM_FI_DEV_GPU_UTIL * on (node) group_left "
                              f"(namespace, {m.JOB}) {JOB_NODE}) < {IDLE_GPU_PERCENT}", IDLE_MINUTES, "warning",
               "Job {{ $labels.namespace }}/{{ $labels.gpucluster_job }}'s GPUs are under 10% busy",
               "A running job whose GPUs idle is stuck (data loading, a hung collective) or finished without "
               "exiting: read its logs, then stop it; every idle minute bills."),
        _alert("EfaErrorsRising", f'sum by (node, device, counter) (increase({m.EFA_COUNTER}{{counter=~"{errors}"}}'
                                  "[10m])) > 0", 0, "warning",
               "EFA {{ $labels.counter }} rising on {{ $labels.node }} {{ $labels.device }}",
               "EFA errors mean a bad link or a peer that went away: if one node keeps rising, drain and replace it; "
               "if all do, check security groups allow all traffic within the node group."),
        _alert("PoolNodeNotReady", f'(kube_node_status_condition{{condition="Ready",status="true"}} == 0) '
                                   f"* {pool_node}", 5, "critical",
               "GPU node {{ $labels.node }} is NotReady",
               "A NotReady GPU node stalls every job on it: `kubectl describe node {{ $labels.node }}`; replace the "
               "instance if it does not recover."),
        _alert("PoolNodeHardwareCondition", f'(kube_node_status_condition{{condition=~"{conditions}",'
                                            f'status="false"}} == 1) * {pool_node}', 0, "critical",
               "{{ $labels.node }} reports {{ $labels.condition }} False",
               "The EKS node monitoring agent found a hardware or OS fault: `kubectl describe node "
               "{{ $labels.node }}` names it; drain and replace the node."),
        # Both lists: under BestEffortFIFO a workload that does not fit moves to `inadmissible`
        # (kueue v0.19.2 pkg/cache/queue/cluster_queue.go), and that is the one stuck on quota.
        _alert("WorkloadPendingTooLong", "sum by (cluster_queue) (kueue_pending_workloads) > 0",
               obs.pending_alert_minutes, "warning",
               "Workloads have waited in ClusterQueue {{ $labels.cluster_queue }} over "
               f"{obs.pending_alert_minutes} minutes",
               "Queued, not admitted: the pool is busy, at maxNodes or short of quota; `kubectl get workloads -A` "
               "shows why."),
        _alert("JobPodsPendingTooLong", f'(kube_pod_status_phase{{namespace="{cfg.training_namespace}",'
                                        'phase="Pending"} == 1)', obs.pending_alert_minutes, "warning",
               "Pod {{ $labels.pod }} has been Pending over " f"{obs.pending_alert_minutes} minutes",
               "Admitted but not scheduled: the pool cannot scale up (capacity, quota, subnet IPs); the "
               "cluster-autoscaler's events on the pod say which."),
    ]
    for job in cfg.jobs:
        deadline = teardown.deadline_seconds(job, cfg.pool(job.pool), cfg.prices, cfg.ps_pool_of(job))
        if deadline is None:
            continue
        rules.append(_alert(
            "JobNearDeadline", f'time() - {JOB_START}{{namespace="{cfg.namespace_of(job)}", {m.JOB}="{job.name}"}} '
                               f"> {int(deadline * DEADLINE_SHARE)}", 0,
            "warning", f"Job {cfg.namespace_of(job)}/{job.name} is past 90% of its {deadline} s deadline (or cost bound)",
            "It will be stopped at the deadline: let it checkpoint, or raise runPolicy.activeDeadlineSeconds / "
            "maxCostUsd and `pulumi up` before then."))
    return rules + spend.budget_alerts(cfg) + goodput_alerts.alert_rules(cfg)


def prometheus_rule(cfg: StackConfig, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION, "kind": "PrometheusRule",
        "metadata": {"name": "gpucluster", "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        "spec": {"groups": [
            {"name": "gpucluster.records", "interval": "30s", "rules": recording_rules(cfg)},
            {"name": "gpucluster.alerts", "rules": alert_rules(cfg)},
            *spend.rule_groups(cfg),
        ]},
    }


def job_pod_monitor(namespace: str) -> dict[str, Any]:
    """Scrapes what a job reports (metrics.JOB_METRICS) on its workers' `metricsPort`, from jobs that set one.

    Worker pods declare no container port (a TrainJob cannot add one to its
    runtime's container), so the target is the pod's IP and the port from
    its gpucluster.io/metrics-port label: Kubernetes service discovery makes
    one port-less target per container, which this relabeling completes.
    """
    port_label = "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in workers.METRICS_PORT_LABEL)
    return {
        "apiVersion": API_VERSION, "kind": "PodMonitor",
        "metadata": {"name": "gpucluster-jobs", "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
        "spec": {"selector": {"matchExpressions": [{"key": workers.METRICS_PORT_LABEL, "operator": "Exists"}]},
                 "podMetricsEndpoints": [{"interval": "30s", "path": "/metrics", "relabelings": [
                     {"sourceLabels": ["__meta_kubernetes_pod_ip", port_label], "separator": ":",
                      "targetLabel": "__address__", "action": "replace", "regex": "(.+:[0-9]+)",
                      "replacement": "$1"}]}]},
    }


def alertmanager_config(sns_topic_arn: str | None, slack_url_file: str | None) -> dict[str, Any]:
    """No receiver by default (alerts show in Alertmanager's UI); SNS and/or Slack when the stack sets them."""
    receiver: dict[str, Any] = {"name": "gpucluster"}
    if sns_topic_arn:
        region = sns_topic_arn.split(":")[3]
        receiver["sns_configs"] = [{"topic_arn": sns_topic_arn, "sigv4": {"region": region},
                                    "subject": "{{ .CommonLabels.alertname }}", "send_resolved": True}]
    if slack_url_file:
        receiver["slack_configs"] = [{"api_url_file": slack_url_file, "send_resolved": True,
                                      "title": "{{ .CommonLabels.alertname }}",
                                      "text": "{{ range .Alerts }}{{ .Annotations.summary }}: "
                                              "{{ .Annotations.runbook }}\n{{ end }}"}]
    return {
        "route": {"receiver": "gpucluster", "group_by": ["alertname", "node", m.JOB],
                  "routes": [{"receiver": "null", "matchers": ['alertname = "Watchdog"']}]},
        "receivers": [receiver, {"name": "null"}],
    }

