"""The metrics stack: what prod installs, what the dashboards and alerts query, the EFA counters, secrets.

Every PromQL expression is parsed (promql-parser, Prometheus' grammar) and
each metric it names must be one the pinned exporters emit, by their own
lists at the tag (tests/upstream/metrics, tests/upstream/charts), or one of
our recording rules, our EFA counter family or the job metrics contract.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import cache

import promql_parser
import pytest
import yaml

from components.core import system_nodes
from components.core.config import ConfigError
from components.core.kube import launcher, nodepool
from components.core.observability import alerts, dashboards, efa_exporter, metrics
from components.core.observability import prometheus_stack as ps
from components.core.planning.metrics_footprint import footprint
from tests import k8s
from tests.conftest import recording as shared_recording
from tests.conftest import stack_config, stack_raw

METRICS = k8s.UPSTREAM / "metrics"
SLACK = "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/abcdefghijklmnop"
TOPIC = "arn:aws:sns:us-east-1:210987654321:gpu-alerts"
# Overrides replace a whole key: a test changing one observability setting keeps prod's month of metrics,
# which its teams' budgets need (a budget is checked against what Prometheus kept since the 1st).
PROD_RETENTION = {"retentionDays": 32}
# For a test of a setting no budget allows (the stack off, a retention under a month): prod without teams.
# Without observability prod also gives up its teams' budgets and its pool's remediation (both read Prometheus).
NO_PROMETHEUS_READERS = {"gpucluster:teams": [],
            "gpucluster:gpuPools": [{**pool, "remediation": "off"}
                                    for pool in yaml.safe_load(stack_raw("prod")["gpucluster:gpuPools"])]}


# -- what the exporters emit, read from their own files ------------------------------------------


@cache
def dcgm_fields() -> dict[str, str]:
    """Every DCGM field dcgm-exporter 4.8.2 knows (default-counters.csv, commented or not) -> its type."""
    out = {}
    for line in (METRICS / "dcgm-exporter-4.8.2" / "default-counters.csv").read_text().splitlines():
        match = re.match(r"#?\s*(DCGM_FI_[A-Z0-9_]+)\s*,\s*(\w+)", line)
        if match:
            out[match[1]] = match[2]
    return out


def chart_counters() -> list[str]:
    """The counters the dcgm-exporter chart installs by default (its metrics ConfigMap template)."""
    text = (k8s.UPSTREAM / "charts" / "dcgm-exporter-4.8.2" / "templates" / "metrics-configmap.yaml").read_text()
    default = text.split("{{- else }}", 1)[1]
    return re.findall(r"^\s+(DCGM_FI_[A-Z0-9_]+)\s*,", default, re.MULTILINE)


@cache
def kube_state_metrics() -> set[str]:
    names = set()
    for page in ("pod", "node"):
        text = (METRICS / f"kube-state-metrics-v2.20.0-{page}-metrics.md").read_text()
        names |= set(re.findall(r"^\|\s*(kube_[a-z_]+)\s*\|", text, re.MULTILINE))
    return names


@cache
def kueue_metrics() -> set[str]:
    text = (METRICS / "kueue-v0.19.2-metrics.go").read_text()
    return {f"kueue_{name}" for name in
            re.findall(r"Subsystem:\s*constants\.KueueName,\s*Name:\s*\"([a-z_]+)\"", text)}


@cache
def efa_port_counters() -> set[str]:
    text = (METRICS / "efa-verbs-efa_linux_3.1.0.c").read_text()
    block = text.split("#define EFA_DEFINE_PORT_STATS", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r'"([a-z_]+)"', block))


def emitted() -> set[str]:
    recorded = {r["record"] for g in alerts.prometheus_rule(stack_config("prod"), ps.NAMESPACE)["spec"]["groups"]
                for r in g["rules"] if "record" in r}  # spend's groups too: prod has teams
    return ({f for f, _, _ in ps.DCGM_COUNTERS} | kube_state_metrics() | kueue_metrics() | recorded
            | {metrics.EFA_COUNTER} | set(metrics.JOB_METRICS) | controller_metrics())


def controller_metrics() -> set[str]:
    """What the goodput controller serves on /metrics (components/core/goodput/metrics_text.py)."""
    from components.core.goodput import metrics_text

    return set(metrics_text.HELP)


def test_the_metric_lists_are_read():
    assert {"kube_pod_labels", "kube_node_labels", "kube_node_status_condition", "kube_pod_info",
            "kube_pod_status_phase", "kube_pod_start_time", "kube_pod_container_resource_requests"} <= kube_state_metrics()
    assert {"kueue_pending_workloads", "kueue_admitted_active_workloads"} <= kueue_metrics()
    assert {"tx_bytes", "rx_bytes", "rdma_read_bytes", "rdma_write_bytes", "retrans_pkts"} <= efa_port_counters()
    assert dcgm_fields()["DCGM_FI_DEV_XID_ERRORS"] == "gauge"


# -- PromQL -------------------------------------------------------------------------------------------


def grafana_free(expr: str) -> str:
    """A panel's query as Prometheus sees it: Grafana's variables filled in."""
    return (expr.replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$namespace", "training")
            .replace("$job", "llama-70b"))


def selectors(node) -> list:
    if isinstance(node, promql_parser.VectorSelector):
        return [node]
    found = []
    for attr in ("lhs", "rhs", "expr", "args", "param", "vector_selector"):
        value = getattr(node, attr, None)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, promql_parser.Expr):
                found += selectors(child)
    return found


def check_query(expr: str) -> list[str]:
    """Problems of one PromQL expression: a parse error, a metric no exporter emits, an EFA counter that is none."""
    try:
        tree = promql_parser.parse(grafana_free(expr))
    except Exception as err:  # noqa: BLE001 (the parser raises a bare Exception subclass)
        return [f"{expr!r}: {err}"]
    problems = []
    for selector in selectors(tree):
        if selector.name not in emitted():
            problems.append(f"{expr!r}: {selector.name} is emitted by nothing we install")
        if selector.name == metrics.EFA_COUNTER:
            for matcher in selector.matchers.matchers:
                if matcher.name == "counter":
                    unknown = set(matcher.value.split("|")) - efa_port_counters()
                    problems += [f"{expr!r}: no EFA counter {c}" for c in sorted(unknown)]
    return problems


def test_check_query_catches_a_bad_metric_a_bad_counter_and_bad_syntax():
    assert check_query("avg(DCGM_FI_DEV_GPU_UTIL)") == []
    assert check_query("avg(DCGM_FI_DEV_GPU_UTILIZATION)") == [
        "'avg(DCGM_FI_DEV_GPU_UTILIZATION)': DCGM_FI_DEV_GPU_UTILIZATION is emitted by nothing we install"]
    assert check_query(f'rate({metrics.EFA_COUNTER}{{counter=~"tx_bytes|tx_bits"}}[5m])')[0].endswith(
        "no EFA counter tx_bits")
    assert "unclosed" in check_query("sum(rate(x[5m])")[0]


def prometheus_queries(board: dict) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p["targets"] if t["datasource"]["type"] == "prometheus"]


def prod_dashboards() -> dict[str, dict]:
    return dashboards.dashboards(stack_config("prod"), "fs-0123456789abcdef0", "us-east-1")


def test_every_dashboard_query_parses_and_names_only_emitted_metrics():
    boards = prod_dashboards()
    assert list(boards) == list(dashboards.DASHBOARD_KEYS) + ["gpucluster-spend.json"]  # prod has teams
    problems = [p for board in boards.values() for q in prometheus_queries(board) for p in check_query(q)]
    # A job is its namespace and name: the namespace first, then its jobs.
    variables = boards["gpucluster-job.json"]["templating"]["list"]
    assert [(v["name"], v["query"]["query"], v["definition"]) for v in variables] == [
        ("namespace", "label_values(gpucluster:job_node:info, namespace)",
         "label_values(gpucluster:job_node:info, namespace)"),
        ("job", 'label_values(gpucluster:job_node:info{namespace="$namespace"}, gpucluster_job)',
         'label_values(gpucluster:job_node:info{namespace="$namespace"}, gpucluster_job)')]
    assert problems == []


def test_every_rule_parses_names_only_emitted_metrics_and_has_a_runbook():
    cfg = stack_config("prod")
    rule = alerts.prometheus_rule(cfg, ps.NAMESPACE)
    k8s.validate_custom(rule, "monitoring.coreos.com_prometheusrules.yaml")
    rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert [p for r in rules for p in check_query(r["expr"])] == []
    alerting = [r for r in rules if "alert" in r]
    assert all(r["annotations"]["runbook"] and "\n" not in r["annotations"]["runbook"] for r in alerting)
    assert {r["alert"] for r in alerting} == {
        "GpuXidNeedsNodeReplacement", "JobGpusIdle", "EfaErrorsRising", "PoolNodeNotReady",
        "PoolNodeHardwareCondition", "WorkloadPendingTooLong", "JobPodsPendingTooLong", "JobNearDeadline",
        "TeamBudgetAt80Percent", "TeamBudgetReached",  # these two: prod's teams have budgets (test_spend.py)
        "NcclOnSockets", "JobStraggler", "JobGpuXidNeedsNodeReplacement", "JobNoProgress"}  # test_goodput_alerts.py


def test_alert_thresholds_come_from_the_stack():
    cfg = stack_config("prod", {"gpucluster:observability": {**PROD_RETENTION, "pendingAlertMinutes": 45}})
    by_name = {r["alert"]: r for r in alerts.alert_rules(cfg)}
    assert by_name["WorkloadPendingTooLong"]["for"] == "45m"
    assert by_name["JobGpusIdle"]["for"] == "15m" and by_name["JobGpusIdle"]["expr"].endswith("< 10")
    # prod's two jobs with a deadline: llama-70b's activeDeadlineSeconds, gpt-pretrain's maxCostUsd.
    deadlines = [r for r in alerts.alert_rules(cfg) if r["alert"] == "JobNearDeadline"]
    assert [re.search(r'namespace="([^"]+)", gpucluster_job="([^"]+)"\} > (\d+)', r["expr"]).groups()
            for r in deadlines] == [("training", "llama-70b", str(int(3628800 * 0.9))),
                                    ("training", "gpt-pretrain", str(int(deadline("gpt-pretrain") * 0.9)))]
    xids = by_name["GpuXidNeedsNodeReplacement"]["expr"]
    # The EKS node monitoring agent's fatal XIDs and 154; any of them in the last 6 hours (the gauge holds
    # the last XID only, so a later harmless one must not end the alert).
    assert sorted(int(x) for x in re.findall(r"== (\d+)", xids)) == [46, 48, 54, 62, 63, 64, 74, 79, 95, 109, 110,
                                                                      119, 120, 140, 154]
    assert xids.startswith("max by (node, gpu) (max_over_time((") and xids.endswith(")[6h:1m]))")
    assert by_name["WorkloadPendingTooLong"]["expr"] == "sum by (cluster_queue) (kueue_pending_workloads) > 0"


JOB_POD_JOIN = "on (namespace, pod) group_left"


def test_per_job_rules_and_alerts_are_per_namespace_and_name():
    """The same job name in two team namespaces is two jobs: each per-job rule groups, and each deadline alert
    matches, by namespace too (dev's texts but for the namespace)."""
    dev = stack_config("dev")
    records = {r["record"]: r["expr"] for r in alerts.recording_rules(dev)}
    assert records[alerts.JOB_NODE] == (f"max by (namespace, node, gpucluster_job) (({alerts.JOB_POD} and on "
                                        '(namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)) * '
                                        f'{JOB_POD_JOIN} (node) max by (namespace, pod, node) '
                                        '(kube_pod_info{node!=""}))')
    assert records[alerts.JOB_START] == ("min by (namespace, gpucluster_job) (kube_pod_start_time * "
                                         f"{JOB_POD_JOIN} (gpucluster_job) {alerts.JOB_POD})")
    by_name = {r["alert"]: r for r in alerts.alert_rules(dev)}
    idle = by_name["JobGpusIdle"]
    assert idle["expr"] == ("avg by (namespace, gpucluster_job) (DCGM_FI_DEV_GPU_UTIL * on (node) group_left "
                            f"(namespace, gpucluster_job) {alerts.JOB_NODE}) < 10")
    assert idle["annotations"]["summary"] == "Job {{ $labels.namespace }}/{{ $labels.gpucluster_job }}'s GPUs are " \
                                             "under 10% busy"
    # A team's job: its namespace is the team's (StackConfig.namespace_of).
    jobs = json.loads(stack_raw("prod")["gpucluster:jobs"])
    jobs[0]["team"] = "vision"
    cfg = stack_config("prod", {"gpucluster:jobs": jobs})
    near = [(r["expr"], r["annotations"]["summary"]) for r in alerts.alert_rules(cfg) if r["alert"] == "JobNearDeadline"]
    assert near == [
        ('time() - gpucluster:job_start_time:seconds{namespace="vision", gpucluster_job="llama-70b"} > 3265920',
         "Job vision/llama-70b is past 90% of its 3628800 s deadline (or cost bound)"),
        ('time() - gpucluster:job_start_time:seconds{namespace="training", gpucluster_job="gpt-pretrain"} > '
         f'{int(deadline("gpt-pretrain") * 0.9)}',
         f'Job training/gpt-pretrain is past 90% of its {deadline("gpt-pretrain")} s deadline (or cost bound)')]


def test_the_job_dashboard_reads_one_namespace_s_job():
    board = dashboards.job(stack_config("dev"), "fs-0123456789abcdef0", "us-east-1")
    queries = prometheus_queries(board)
    on_nodes = f'on (node) group_left () {alerts.JOB_NODE}{{namespace="$namespace", gpucluster_job="$job"}}'
    on_pods = f'{JOB_POD_JOIN} () {alerts.JOB_POD}{{namespace="$namespace", gpucluster_job="$job"}}'
    assert queries[0] == f"avg by (node) (DCGM_FI_DEV_GPU_UTIL * {on_nodes})"
    assert queries[-4:-2] == [f"sum(gpucluster_job_tokens_per_second * {on_pods})",
                              f"max(gpucluster_job_step_seconds * {on_pods})"]
    # The goodput controller's account of the job (test_goodput_panels_plot_only_what_the_goodput_controller_serves).
    assert queries[-2:] == ['sum by (phase) (gpucluster_job_gpu_seconds{namespace="$namespace", gpucluster_job="$job"})'
                            " / 3600", 'max(gpucluster_job_goodput_ratio{namespace="$namespace", gpucluster_job="$job"})']
    # Each of its 14 Prometheus queries picks the job by both.
    assert len(queries) == 14 and all('{namespace="$namespace", gpucluster_job="$job"}' in q for q in queries)


def test_goodput_panels_plot_only_what_the_goodput_controller_serves():
    """GPU-hours by phase stacked, and goodput, for the chosen job; goodput per job on the cluster dashboard. The
    controller serves both with the job's own namespace label (its ServiceMonitor honours it)."""
    from components.core.goodput import names

    served = controller_metrics()
    assert {names.GPU_SECONDS_METRIC, names.GOODPUT_METRIC} <= served
    boards = prod_dashboards()
    by_title = {p["title"]: p for b in boards.values() for p in b["panels"]}
    phases = by_title["GPU-hours by phase (the goodput controller's account)"]
    assert phases["fieldConfig"]["defaults"]["custom"]["stacking"] == {"mode": "normal", "group": "A"}
    assert [t["legendFormat"] for t in phases["targets"]] == ["{{phase}}"]
    ratio = by_title["Goodput: training over paid GPU-seconds"]
    per_job = by_title["Goodput per job: training over paid GPU-seconds (the goodput controller's)"]
    assert per_job["targets"][0]["expr"] == "max by (namespace, gpucluster_job) (gpucluster_job_goodput_ratio)"
    assert ratio["fieldConfig"]["defaults"]["unit"] == per_job["fieldConfig"]["defaults"]["unit"] == "percentunit"
    for panel in (phases, ratio, per_job):
        (expr,) = [t["expr"] for t in panel["targets"]]
        assert check_query(expr) == []
        names_in = {s.name for s in selectors(promql_parser.parse(grafana_free(expr)))}
        assert names_in and names_in <= served, expr


def deadline(job: str) -> int:
    from components.core.planning import teardown

    cfg = stack_config("prod")
    spec = next(j for j in cfg.jobs if j.name == job)
    return teardown.deadline_seconds(spec, cfg.pool(spec.pool), cfg.prices)


def test_cost_and_bandwidth_rules_use_the_stack_s_prices_and_the_catalog():
    cfg = stack_config("prod", {"gpucluster:prices": {"p5.48xlarge": 40.5}})
    rules = {r["record"]: r["expr"] for r in alerts.recording_rules(cfg)}
    assert '(count(kube_node_labels{label_node_kubernetes_io_instance_type="p5.48xlarge"}) or vector(0)) * 40.5' \
        in rules[alerts.COST]
    assert '{label_node_kubernetes_io_instance_type="p5.48xlarge"}) * 0 + 3200' in rules[alerts.NODE_BANDWIDTH]


# -- dcgm-exporter -------------------------------------------------------------------------------------


def test_dcgm_counters_keep_the_chart_s_and_add_sm_activity_and_ecc():
    ours = [f for f, _, _ in ps.DCGM_COUNTERS]
    assert [f for f in ours if f in chart_counters()] == chart_counters()
    assert set(ours) - set(chart_counters()) == {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
                                                 "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"}
    assert {f: t for f, t, _ in ps.DCGM_COUNTERS} == {f: dcgm_fields()[f] for f in ours}  # known, same type
    assert ps.dcgm_counters_csv().splitlines()[0] == "DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz)."


# -- the EFA counters ----------------------------------------------------------------------------------


def fake_sysfs(root, devices: dict[str, dict[str, str]]):
    for device, counters in devices.items():
        folder = root / "class" / "infiniband" / device / "ports" / "1" / "hw_counters"
        folder.mkdir(parents=True)
        for name, value in counters.items():
            (folder / name).write_text(value + "\n")


def test_the_collector_script_writes_every_counter_of_every_device(tmp_path):
    shell = shutil.which("sh")
    assert shell is not None
    fake_sysfs(tmp_path / "sys", {"rdmap16s27": {"tx_bytes": "123", "rx_bytes": "456", "lifespan": "12"},
                                  "rdmap32s27": {"rdma_write_bytes": "789", "weird": "n/a"}})
    out = tmp_path / "textfile"
    out.mkdir()
    script = tmp_path / "collect.sh"
    script.write_text(efa_exporter.COLLECT_SCRIPT)
    subprocess.run([shell, str(script)], check=True, timeout=30, env={
        "SYSFS_ROOT": str(tmp_path / "sys"), "TEXTFILE_DIR": str(out), "ONCE": "1", "PATH": "/usr/bin:/bin"})
    lines = (out / "efa.prom").read_text().splitlines()
    assert lines[:2] == [f"# HELP {metrics.EFA_COUNTER} EFA device counter, /sys/class/infiniband/<device>/ports/"
                         "<port>/hw_counters/<counter>.", f"# TYPE {metrics.EFA_COUNTER} untyped"]
    assert sorted(lines[2:]) == sorted([
        f'{metrics.EFA_COUNTER}{{device="rdmap16s27",port="1",counter="lifespan"}} 12',
        f'{metrics.EFA_COUNTER}{{device="rdmap16s27",port="1",counter="rx_bytes"}} 456',
        f'{metrics.EFA_COUNTER}{{device="rdmap16s27",port="1",counter="tx_bytes"}} 123',
        f'{metrics.EFA_COUNTER}{{device="rdmap32s27",port="1",counter="rdma_write_bytes"}} 789',
    ])  # "n/a" is not a number: left out, not a broken file
    assert not (out / "efa.prom.tmp").exists()


def test_the_collector_writes_a_valid_empty_file_without_efa(tmp_path):
    (tmp_path / "sys").mkdir()
    script = tmp_path / "collect.sh"
    script.write_text(efa_exporter.COLLECT_SCRIPT)
    subprocess.run([shutil.which("sh"), str(script)], check=True, timeout=30, env={
        "SYSFS_ROOT": str(tmp_path / "sys"), "TEXTFILE_DIR": str(tmp_path), "ONCE": "1", "PATH": "/usr/bin:/bin"})
    assert len((tmp_path / "efa.prom").read_text().splitlines()) == 2


def test_the_counters_we_name_are_the_efa_driver_s():
    named = set(metrics.EFA_TRAFFIC + metrics.EFA_RDMA + metrics.EFA_ERRORS + metrics.EFA_RETRANSMITS)
    assert named <= efa_port_counters()


# -- the program -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prod():
    return shared_recording("prod")


def objects(rec, kind: str) -> list[dict]:
    return [o for o in k8s.k8s_objects(rec) if o["kind"] == kind]


def release(rec, chart: str):
    (found,) = [r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["chart"] == chart]
    return found


def test_prod_installs_the_stack_on_the_system_nodes_with_a_sized_gp3_volume(prod):
    cfg = stack_config("prod")
    fp = footprint(cfg)
    stack = release(prod, "kube-prometheus-stack")
    assert (stack.inputs["version"], stack.inputs["namespace"]) == ("88.5.3", "monitoring")
    spec = stack.inputs["values"]["prometheus"]["prometheusSpec"]
    assert spec["nodeSelector"] == nodepool.SYSTEM_NODE_LABEL
    # prod keeps 32 days (Pulumi.prod.yaml): a team's budget reads a month of spend.
    assert spec["retention"] == "32d" and spec["retentionSize"] == f"{fp.retention_size_gb}GB"
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "gpucluster-gp3"
    assert claim["resources"]["requests"]["storage"] == f"{fp.volume_gib}Gi"
    assert spec["resources"]["requests"]["memory"] == fp.prometheus_resources["requests"]["memory"]
    assert "remoteWrite" not in spec
    (sc,) = prod.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert (sc.inputs["provisioner"], sc.inputs["parameters"]) == ("ebs.csi.aws.com", {"type": "gp3",
                                                                                       "encrypted": "true"})
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    values = stack.inputs["values"]
    for part in ("grafana", "kube-state-metrics"):
        assert values[part]["nodeSelector"] == nodepool.SYSTEM_NODE_LABEL and values[part]["resources"]["requests"]
    assert values["grafana"]["admin"]["existingSecret"] == "grafana-admin"
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == [
        "nodes=[gpucluster.io/pool,node.kubernetes.io/instance-type]",
        "pods=[gpucluster.io/job,jobset.sigs.k8s.io/jobset-name]"]


def test_dcgm_exporter_runs_on_gpu_pools_only_and_keeps_the_workload_s_pod(prod):
    dcgm = release(prod, "dcgm-exporter")
    stack = release(prod, "kube-prometheus-stack")
    assert dcgm.inputs["version"] == "4.8.2" and prod.depends_on(dcgm, stack)  # its ServiceMonitor needs the CRD
    values = dcgm.inputs["values"]
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "gpucluster.io/pool", "operator": "Exists"}]}]
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert values["serviceMonitor"]["honorLabels"] is True
    assert values["serviceMonitor"]["relabelings"] == [
        {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "node", "action": "replace"}]
    # The release reads our counters file (how the chart gets it there: tests/test_dcgm_exporter.py).
    assert values["customMetrics"] == ps.dcgm_counters_csv() and values["arguments"] == ["-f", ps.DCGM_COUNTERS_FILE]


def test_efa_counters_run_on_efa_nodes_of_published_pinned_images(prod, run_stack):
    (ds,) = objects(prod, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    # busybox from public ECR, through the stack's pull-through cache (tests/test_image_cache.py).
    assert [c["image"] for c in pod["containers"]] == [
        "000000000000.dkr.ecr.us-east-1.amazonaws.com/gpucluster-prod/docker/library/busybox:1.37.0",
        "quay.io/prometheus/node-exporter:v1.12.1"]
    assert [v for v in pod["volumes"] if "hostPath" in v] == [
        {"name": "sys", "hostPath": {"path": "/sys", "type": "Directory"}}]
    assert all(m["readOnly"] for c in pod["containers"] for m in c["volumeMounts"] if m["name"] == "sys")
    monitors = {o["metadata"]["name"] for o in objects(prod, "PodMonitor")}
    assert monitors == {"efa-counters", "gpucluster-jobs", "mpi-operator"}
    assert objects(shared_recording("dev"), "DaemonSet") == []  # dev's g6e.xlarge has no EFA


def dashboard_maps(rec) -> list[dict]:
    """Our ConfigMaps in the metrics namespace that Grafana's sidecar loads (the goodput controller's are not)."""
    return [o for o in objects(rec, "ConfigMap") if o["metadata"]["name"].startswith("gpucluster-")
            and o["metadata"].get("namespace") == "monitoring"
            and "grafana_dashboard" in o["metadata"].get("labels", {})]


def test_the_dashboards_in_configmaps_the_sidecar_loads(prod):
    maps = dashboard_maps(prod)
    # The three, and GPU spend by team: prod has teams (dev, without, has the three only).
    assert sorted(o["metadata"]["name"] for o in maps) == ["gpucluster-cluster", "gpucluster-job",
                                                           "gpucluster-node-health", "gpucluster-spend"]
    assert sorted(o["metadata"]["name"] for o in dashboard_maps(shared_recording("dev"))) == [
        "gpucluster-cluster", "gpucluster-job", "gpucluster-node-health"]
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "monitoring"
        (text,) = cm["data"].values()
        board = json.loads(text)
        assert board["uid"] == cm["metadata"]["name"]
    job = json.loads(next(cm for cm in maps if cm["metadata"]["name"] == "gpucluster-job")["data"][
        "gpucluster-job.json"])
    fsx = next(p for p in job["panels"] if p["datasource"]["type"] == "cloudwatch")
    file_system = prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")[0].id
    assert {t["metricName"] for t in fsx["targets"]} == {"DataReadBytes", "DataWriteBytes"}
    assert all(t["dimensions"] == {"FileSystemId": file_system} for t in fsx["targets"])
    # 48000 GiB of PERSISTENT_2 at 500 MB/s/TiB = 24000 MB/s, per 60 s CloudWatch period.
    assert fsx["fieldConfig"]["defaults"]["thresholds"]["steps"][1]["value"] == 24000 * 1e6 * 60


def test_grafana_reads_cloudwatch_with_its_own_role_and_nothing_else(prod):
    (assoc,) = [a for a in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
                if a.inputs["serviceAccount"] == "grafana"]
    assert assoc.inputs["namespace"] == "monitoring"
    (policy,) = [p for p in prod.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("grafana-role-policy")]
    assert json.loads(policy.inputs["policy"])["Statement"] == [
        {"Effect": "Allow", "Action": ["cloudwatch:GetMetricData", "cloudwatch:ListMetrics"], "Resource": "*"}]
    datasources = release(prod, "kube-prometheus-stack").inputs["values"]["grafana"]["additionalDataSources"]
    assert datasources == [{"name": "CloudWatch", "uid": "cloudwatch", "type": "cloudwatch",
                            "jsonData": {"authType": "default", "defaultRegion": "us-east-1"}}]


def test_tensorboard_serves_the_file_system_read_only_from_the_system_nodes(prod):
    (board,) = [o for o in objects(prod, "Deployment") if o["metadata"]["name"] == "tensorboard"]
    pod = board["spec"]["template"]["spec"]
    assert board["metadata"]["namespace"] == "training" and pod["nodeSelector"] == nodepool.SYSTEM_NODE_LABEL
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx", "readOnly": True}},
                              {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]  # its .tensorboard-info
    assert pod["containers"][0]["volumeMounts"] == [{"name": "fsx", "mountPath": "/fsx", "readOnly": True},
                                                    {"name": "tmp", "mountPath": "/tmp"}]
    assert "--logdir=/fsx/tensorboard" in pod["containers"][0]["command"]


def test_the_system_nodes_reach_fsx_for_tensorboard_without_fsx_waiting_for_eks(prod, run_stack):
    (eks,) = prod.of_type("aws:eks/cluster:Cluster")
    cluster_sg = eks.outputs["vpcConfig"]["clusterSecurityGroupId"]
    (fs,) = prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    rules = [r for r in prod.resources if r.type.startswith("aws:vpc/securityGroup") and "-system" in r.name]
    # Lustre's TCP 988 and 1018-1023 both ways: the file system's group and the cluster group's ingress.
    assert sorted(r.name.removeprefix("gpucluster-prod-storage-") for r in rules) == [
        "fsx-egress-tcp-1018-1023-system", "fsx-egress-tcp-988-system", "fsx-ingress-tcp-1018-1023-system",
        "fsx-ingress-tcp-988-system", "system-ingress-tcp-1018-1023-fsx", "system-ingress-tcp-988-fsx"]
    on_cluster_sg = [r for r in rules if r.inputs["securityGroupId"] == cluster_sg]
    assert len(on_cluster_sg) == 2
    assert all(r.inputs["referencedSecurityGroupId"] == cluster_sg for r in rules if r not in on_cluster_sg)
    assert not prod.depends_on(fs, eks)  # FSx is still created in parallel with EKS
    off = run_stack("prod", {"gpucluster:observability": {**PROD_RETENTION, "tensorboard": False}})
    assert not [r for r in off.resources if r.type.startswith("aws:vpc/securityGroup") and "-system" in r.name]


def test_kueue_and_the_autoscaler_are_scraped_through_our_monitors_after_the_crds_not_their_charts(prod):
    # A chart rendering a ServiceMonitor could not install before the CRDs: Kueue and the autoscaler would
    # wait for the whole metrics stack (tests/test_time_to_ready.py). Their charts' monitors are off; ours
    # wait for the CRDs, the charts do not.
    stack = release(prod, "kube-prometheus-stack")
    for chart, key, monitor, namespace in (
            ("cluster-autoscaler", ("serviceMonitor", "enabled"), "gpucluster-prod-autoscaler-monitor", "kube-system"),
            ("oci://registry.k8s.io/kueue/charts/kueue", ("enablePrometheus",), "gpucluster-prod-queue-monitor",
             "kueue-system")):
        other = release(prod, chart)
        value = other.inputs["values"]
        for part in key:
            value = value[part]
        assert value is False and not prod.depends_on(other, stack), chart
        ours = prod.named(monitor)
        assert ours.inputs["kind"] == "ServiceMonitor" and ours.inputs["metadata"]["namespace"] == namespace
        assert prod.depends_on(ours, stack) and prod.depends_on(ours, other)
        k8s.validate_custom(ours.inputs, "monitoring.coreos.com_servicemonitors.yaml")
    # The charts' Services, as their templates label them (scrape.py names the templates).
    kueue = prod.named("gpucluster-prod-queue-monitor").inputs["spec"]
    assert kueue["selector"]["matchLabels"] == {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": "kueue",
                                                "app.kubernetes.io/component": "metrics-service"}
    assert kueue["endpoints"] == [{"port": "https", "path": "/metrics", "scheme": "https",
                                   "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                                   "tlsConfig": {"insecureSkipVerify": True}}]
    autoscaler = prod.named("gpucluster-prod-autoscaler-monitor").inputs["spec"]
    assert autoscaler["selector"]["matchLabels"] == {"app.kubernetes.io/instance": "cluster-autoscaler",
                                                     "app.kubernetes.io/name": "aws-cluster-autoscaler"}
    assert autoscaler["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "10s"}]


def test_operators_without_a_chart_monitor_get_ours_after_the_crds(prod):
    stack = release(prod, "kube-prometheus-stack")
    monitors = {r.inputs["metadata"]["name"]: r for r in prod.resources
                if r.type.startswith("kubernetes:monitoring.coreos.com/v1:") and "operators" in r.name}
    assert set(monitors) == {"mpi-operator", "kubeflow-trainer", "jobset"}
    assert all(prod.depends_on(m, stack) for m in monitors.values())
    mpi = monitors["mpi-operator"].inputs
    assert (mpi["kind"], mpi["metadata"]["namespace"]) == ("PodMonitor", "mpi-operator")
    assert mpi["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "scheme": "http"}]
    # The Deployment declares the port the monitor names, and runs the metrics server on it.
    (dep,) = [o for o in objects(prod, "Deployment") if o["metadata"]["name"] == "mpi-operator"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "metrics", "containerPort": 9090} in container["ports"]
    assert "--monitoring-port=9090" in container["args"]
    assert mpi["spec"]["selector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    trainer = monitors["kubeflow-trainer"].inputs["spec"]
    assert trainer["endpoints"] == [{"port": "monitoring-port", "path": "/metrics", "scheme": "https",
                                     "tlsConfig": {"insecureSkipVerify": True}}]
    jobset = monitors["jobset"].inputs["spec"]
    assert jobset["endpoints"][0]["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    for monitor in monitors.values():
        k8s.validate_custom(monitor.inputs, f"monitoring.coreos.com_{monitor.inputs['kind'].lower()}s.yaml")


def test_disabled_leaves_the_metrics_stack_out(run_stack):
    rec = run_stack("prod", {"gpucluster:observability": {"enabled": False}, **NO_PROMETHEUS_READERS})
    charts = {r.inputs["chart"] for r in rec.of_type("kubernetes:helm.sh/v3:Release")}
    assert not charts & {"kube-prometheus-stack", "dcgm-exporter"}
    assert objects(rec, "DaemonSet") == [] and objects(rec, "PrometheusRule") == []
    assert not [r for r in rec.resources if r.type.startswith("kubernetes:monitoring.coreos.com/")]
    assert release(rec, "cluster-autoscaler").inputs["values"]["serviceMonitor"]["enabled"] is False
    assert "monitoring" not in rec.stack_outputs
    assert not [line for line in rec.stack_outputs["estimatedCostPerHourUsd"]["lines"]
                if line["item"].startswith("Prometheus")]


def test_amp_remote_write_has_its_own_workspace_and_write_only_role(run_stack):
    rec = run_stack("prod", {"gpucluster:observability": {**PROD_RETENTION, "remoteWrite": "amp"}})
    (workspace,) = rec.of_type("aws:amp/workspace:Workspace")
    (policy,) = [p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("prometheus-role-policy")]
    assert json.loads(policy.inputs["policy"])["Statement"] == [
        {"Effect": "Allow", "Action": ["aps:RemoteWrite"], "Resource": workspace.outputs["arn"]}]
    spec = release(rec, "kube-prometheus-stack").inputs["values"]["prometheus"]["prometheusSpec"]
    endpoint = workspace.outputs["prometheusEndpoint"].rstrip("/")
    assert spec["remoteWrite"] == [{"url": f"{endpoint}/api/v1/remote_write", "sigv4": {"region": "us-east-1"}}]
    assert any(line["item"].startswith("Amazon Managed Prometheus")
               for line in rec.stack_outputs["estimatedCostPerHourUsd"]["lines"])


def test_sns_and_slack_receivers():
    from bootstrap.offline import mocks

    raw = stack_raw("prod", {"gpucluster:observability": {**PROD_RETENTION, "alertSnsTopicArn": TOPIC},
                             "gpucluster:alertSlackWebhookUrl": SLACK})
    rec = mocks.run_program(raw, "prod", secret_keys=("gpucluster:alertSlackWebhookUrl",))
    config = release(rec, "kube-prometheus-stack").inputs["values"]["alertmanager"]["config"]
    receiver = next(r for r in config["receivers"] if r["name"] == "gpucluster")
    assert receiver["sns_configs"][0]["topic_arn"] == TOPIC
    assert receiver["sns_configs"][0]["sigv4"] == {"region": "us-east-1"}
    assert receiver["slack_configs"][0]["api_url_file"] == "/etc/alertmanager/secrets/alertmanager-receivers/" \
                                                           "slack-webhook-url"
    (policy,) = [p for p in rec.of_type("aws:iam/rolePolicy:RolePolicy") if p.name.endswith("alertmanager-role-policy")]
    assert json.loads(policy.inputs["policy"])["Statement"][0]["Resource"] == TOPIC
    (secret,) = [s for s in rec.of_type("kubernetes:core/v1:Secret") if s.name.endswith("alert-receivers")]
    assert secret.inputs["stringData"] == {"slack-webhook-url": SLACK}
    assert any(path.startswith("stringData") for path in secret.secret_inputs)
    assert SLACK not in json.dumps(release(rec, "kube-prometheus-stack").inputs["values"])


def test_no_receiver_by_default(prod):
    config = release(prod, "kube-prometheus-stack").inputs["values"]["alertmanager"]["config"]
    assert config["receivers"] == [{"name": "gpucluster"}, {"name": "null"}]


def test_a_webhook_in_plain_text_is_refused_without_echoing_it():
    with pytest.raises(ConfigError) as err:
        stack_config("prod", {"gpucluster:alertSlackWebhookUrl": SLACK})
    text = err.value.render()
    assert "gpucluster:alertSlackWebhookUrl: is stored in plain text" in text and SLACK not in text
    with pytest.raises(ConfigError) as err:
        stack_config("prod", {"gpucluster:alertSlackWebhookUrl": "https://example.com/hook?token=s3cr3t"})
    assert "is not a Slack incoming-webhook URL" in err.value.render() and "s3cr3t" not in err.value.render()


def test_bad_observability_keys_are_reported_together():
    with pytest.raises(ConfigError) as err:
        stack_config("prod", {"gpucluster:observability": {"retentionDays": 0, "remoteWrite": "thanos",
                                                            "alertSnsTopicArn": TOPIC + ".fifo"}})
    lines = err.value.render().splitlines()
    assert any(line.startswith("  - gpucluster:observability.retentionDays: got 0") for line in lines)
    assert "  - gpucluster:observability.remoteWrite: got 'thanos'; allowed: none, amp" in lines
    assert any(line.startswith("  - gpucluster:observability.alertSnsTopicArn: got") for line in lines)


# -- the system nodes ----------------------------------------------------------------------------------


def test_a_system_node_group_too_small_is_refused_with_the_shortfall_and_a_size_that_fits():
    with pytest.raises(ConfigError) as err:
        stack_config("prod", {"gpucluster:systemNodes": {"instanceType": "m7i.large", "count": 1}})
    (line,) = [x for x in err.value.render().splitlines() if "systemNodes" in x]
    assert line.startswith("  - gpucluster:systemNodes: 1 x m7i.large offer 1930m CPU and 7108Mi allocatable, "
                           "but the system pods request ")
    assert re.search(r"short of \d+m CPU", line) and line.endswith("would hold them (count, instanceType)")
    suggested = re.search(r"; (\d+) x (m7i\.\w+) would hold them", line).groups()
    resized = {"gpucluster:systemNodes": {"instanceType": suggested[1], "count": int(suggested[0])}}
    assert stack_config("prod", resized).system_nodes.count == int(suggested[0])  # and that one passes


def test_the_sums_count_daemonsets_per_node_and_the_metrics_stack_only_when_on():
    on = system_nodes.capacity(stack_config("prod"))
    # Off needs prod without its teams' budgets; teams run no system pod, so the difference is the stack's.
    off = system_nodes.capacity(stack_config("prod", {"gpucluster:observability": {"enabled": False}, **NO_PROMETHEUS_READERS}))
    prometheus = footprint(stack_config("prod")).prometheus_resources["requests"]
    # prometheus, operator, AM, the two config reloaders, grafana, KSM, NE x3, TB, the goodput controller
    stack_cpu = 500 + 100 + 20 + 2 * 10 + (100 + 2 * 10) + 50 + 3 * 20 + 100 + 50
    assert on.requested_cpu_m - off.requested_cpu_m == stack_cpu
    assert prometheus["cpu"] == "500m"
    assert system_nodes.allocatable("m7i.large") == (1930, 7108)
    assert system_nodes.reserved_cpu_m(8) == 90  # 60 + 10 + 5 + 5 + 4 x 2.5


def test_the_plan_lists_the_monitoring_pieces(prod):
    out = prod.stack_outputs["monitoring"]
    assert out["dashboards"] == [*dashboards.DASHBOARD_KEYS, "gpucluster-spend.json"]  # prod has teams
    assert out["volumeGiB"] == footprint(stack_config("prod")).volume_gib
    lines = {line["item"]: line for line in prod.stack_outputs["estimatedCostPerHourUsd"]["lines"]}
    gp3 = lines[f"Prometheus gp3 volume {out['volumeGiB']} GiB"]
    assert gp3["minPerHour"] == round(out["volumeGiB"] * 1.073741824 * 0.08 / 730, 4)
    assert out["volumeGiB"] == 100


def test_the_volume_is_fixed_and_the_estimate_only_warns(run_stack):
    small = footprint(stack_config("prod", {"gpucluster:observability": {"retentionDays": 1}, **NO_PROMETHEUS_READERS}))
    large = footprint(stack_config("prod", {"gpucluster:observability": {"retentionDays": 180}}))
    # The size never follows maxNodes or retention: the operator cannot resize a claim it made.
    assert small.volume_gib == large.volume_gib == 100
    # 180 days of every series at 2 bytes a sample every 30 s, held twice over (compaction and headroom).
    assert large.needed_gib * 2**30 >= 2 * large.series / 30 * 2 * 180 * 86400
    assert large.needed_gib - 10 < 2 * large.series / 30 * 2 * 180 * 86400 / 2**30  # rounded up to 10 GiB, no more
    assert small.holds_retention and not large.holds_retention
    assert footprint(stack_config("prod", {"gpucluster:observability": {**PROD_RETENTION, "volumeGiB": 500}})).volume_gib == 500
    # Size-based retention below the disk: 85 % of it, in Prometheus's GB (2^30 bytes).
    assert small.retention_size_gb == 85
    rec = run_stack("prod", {"gpucluster:observability": {"retentionDays": 180}})
    (warning,) = [msg for level, msg in rec.logs if level == "warning" and msg.startswith("observability:")]
    assert warning.startswith(f"observability: 180 days of metrics at every pool's maxNodes need about "
                              f"{large.needed_gib} GiB, the volume is 100 GiB")
    spec = release(rec, "kube-prometheus-stack").inputs["values"]["prometheus"]["prometheusSpec"]
    assert "persistentVolumeClaimRetentionPolicy" not in spec  # Retain: a re-created StatefulSet finds its data


def test_shipped_values_yaml_round_trips():
    # The values the chart reads, as YAML (what `helm get values` would show), carry no Python objects.
    values = ps.kube_prometheus_stack_values(footprint(stack_config("prod")), "gpucluster-prod", "us-east-1",
                                             alerts.alertmanager_config(None, None))
    assert yaml.safe_load(yaml.safe_dump(values)) == values


# -- what a job reports itself ------------------------------------------------------------------------


def metrics_jobs():
    base = {"pool": "dev", "nodes": 1, "image": "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023",
            "command": ["python", "train.py"]}
    cfg = stack_config("dev", {"gpucluster:jobs": [
        {**base, "name": "mpi-metrics", "launcher": "mpirun", "metricsPort": 9400},
        {**base, "name": "torch-metrics", "launcher": "torchrun", "metricsPort": 9400},
        {**base, "name": "quiet", "launcher": "torchrun"}]})
    ctx = launcher.JobContext("training", "fsx", cfg.storage, cfg.prices)
    return {j.name: launcher.job_manifest(j, cfg.pool(j.pool), ctx) for j in cfg.jobs}


def test_a_job_with_a_metrics_port_labels_its_workers_and_gets_the_port():
    jobs = metrics_jobs()
    mpi = jobs["mpi-metrics"]["spec"]["mpiReplicaSpecs"]
    assert mpi["Worker"]["template"]["metadata"]["labels"]["gpucluster.io/metrics-port"] == "9400"
    assert "gpucluster.io/metrics-port" not in mpi["Launcher"]["template"]["metadata"]["labels"]
    (launcher_container,) = mpi["Launcher"]["template"]["spec"]["containers"]
    assert "GPUCLUSTER_METRICS_PORT=9400" in launcher_container["command"]  # passed to the ranks with -x
    torch = jobs["torch-metrics"]["spec"]
    (node,) = torch["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["metadata"]["labels"]["gpucluster.io/metrics-port"] == "9400"
    assert {"name": "GPUCLUSTER_METRICS_PORT", "value": "9400"} in torch["trainer"]["env"]
    quiet = jobs["quiet"]["spec"]
    (node,) = quiet["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert "gpucluster.io/metrics-port" not in node["template"]["spec"]["template"]["metadata"]["labels"]
    assert all(e["name"] != "GPUCLUSTER_METRICS_PORT" for e in quiet["trainer"].get("env", []))
    for manifest in jobs.values():
        k8s.validate_custom(manifest, {"MPIJob": "kubeflow.org_mpijobs.yaml",
                                       "TrainJob": "trainer.kubeflow.org_trainjobs.yaml"}[manifest["kind"]])


def test_the_jobs_pod_monitor_scrapes_pod_ip_and_labelled_port_of_opted_in_pods_only():
    monitor = alerts.job_pod_monitor("training")
    k8s.validate_custom(monitor, "monitoring.coreos.com_podmonitors.yaml")
    assert monitor["spec"]["selector"] == {"matchExpressions": [{"key": "gpucluster.io/metrics-port",
                                                                 "operator": "Exists"}]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (relabel,) = endpoint["relabelings"]
    # What Prometheus does with it: source labels joined by the separator, matched, replaced.
    joined = relabel["separator"].join(["10.20.3.7", "9400"])
    assert re.fullmatch(relabel["regex"], joined)
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_ip", "__meta_kubernetes_pod_label_gpucluster_io_metrics_port"]
    assert (relabel["targetLabel"], relabel["replacement"]) == ("__address__", "$1")
    assert not re.fullmatch(relabel["regex"], relabel["separator"].join(["10.20.3.7", ""]))  # no port: no target


def test_a_bad_metrics_port_is_refused():
    with pytest.raises(ConfigError) as err:
        stack_config("dev", {"gpucluster:jobs": [{"name": "x", "pool": "dev", "nodes": 1, "launcher": "mpirun",
                                                  "image": "repo/img:1", "command": ["a"], "metricsPort": 80}]})
    assert "gpucluster:jobs[0].metricsPort: got 80" in err.value.render()
