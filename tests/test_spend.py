"""GPU spend per team and job in Prometheus (components/core/observability/spend.py): the recording rules, the
month-to-date rules and budget alerts for prod's teams (vision, language), the "GPU spend by team" dashboard,
nothing of it without teams; and, when a promtool is at hand, the rules evaluated by Prometheus' own unit
tester on synthetic kube-state-metrics series (two replicas' overlapping ones too, and one job name in two
team namespaces).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from components.core.observability import alerts, dashboards, spend
from components.core.observability import prometheus_stack as ps
from tests import k8s
from tests.conftest import stack_config, stack_raw
from tests.test_observability import check_query

TEAMS = "vision|language"
ZEROS = ('label_replace(vector(0), "namespace", "vision", "", "") or '
         'label_replace(vector(0), "namespace", "language", "", "")')
# Each deduplicated first: two kube-state-metrics replicas export the same series during a rollout.
RUNNING = ('max by (namespace, pod, node, container) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"})'
           ' * on (namespace, pod) group_left () max by (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)')
KSM_PODS = k8s.UPSTREAM / "metrics" / "kube-state-metrics-v2.20.0-pod-metrics.md"


def prod_teams(**budgets: float | None) -> list[dict]:
    """prod's teams, with the budgets given (None: none)."""
    teams = json.loads(stack_raw("prod")["gpucluster:teams"])
    for team in teams:
        if team["name"] in budgets:
            team.pop("monthlyBudgetUsd", None)
            if budgets[team["name"]] is not None:
                team["monthlyBudgetUsd"] = budgets[team["name"]]
    return teams


def groups(cfg) -> dict[str, dict]:
    return {g["name"]: g for g in alerts.prometheus_rule(cfg, ps.NAMESPACE)["spec"]["groups"]}


def exprs(rules: list[dict]) -> dict[str, str]:
    return {r.get("record") or r["alert"]: r["expr"] for r in rules}


# -- what kube-state-metrics calls a pod's GPUs ----------------------------------------------------------------


def test_the_gpu_request_series_is_kube_state_metrics_own():
    # v2.20.0 internal/store/pod.go: an extended resource's name through SanitizeLabelName, [^a-zA-Z0-9_] -> "_".
    assert re.sub(r"[^a-zA-Z0-9_]", "_", "nvidia.com/gpu") == spend.GPU_RESOURCE
    row = next(line for line in KSM_PODS.read_text().splitlines() if line.startswith("| kube_pod_container_resource_"
                                                                                       "requests "))
    # Kept per container, joined on pod and node.
    assert all(f"`{label}`" in row for label in ("resource", "node", "pod", "namespace", "container"))


# -- the per-minute rules ---------------------------------------------------------------------------------------


def test_prod_s_spend_rules_exactly():
    cfg = stack_config("prod")
    group = groups(cfg)[spend.SPEND_GROUP]
    assert group["interval"] == "60s"  # one sample a minute: sums / 60 are hours
    job_pod = "on (namespace, pod) group_left (gpucluster_job) gpucluster:job_pod:info"
    assert exprs(group["rules"]) == {
        # p5.48xlarge: 55.04 USD an hour (the catalog), 8 GPUs.
        spend.NODE_GPU_PRICE: 'max by (node) (kube_node_labels{label_node_kubernetes_io_instance_type="p5.48xlarge"})'
                              " * 0 + 6.88",
        spend.POD_GPUS: f"sum by (namespace, pod, node) ({RUNNING})",
        spend.POD_COST: f"{spend.POD_GPUS} * on (node) group_left () {spend.NODE_GPU_PRICE}",
        spend.TEAM_GPUS: f'sum by (namespace) ({spend.POD_GPUS}{{namespace=~"{TEAMS}"}}) or {ZEROS}',
        spend.TEAM_COST: f'sum by (namespace) ({spend.POD_COST}{{namespace=~"{TEAMS}"}}) or {ZEROS}',
        spend.JOB_GPUS: f"sum by (namespace, gpucluster_job) ({spend.POD_GPUS} * {job_pod})",
        spend.JOB_COST: f"sum by (namespace, gpucluster_job) ({spend.POD_COST} * {job_pod})",
    }
    # Each rule reads only the ones before it in the group, evaluated in order.
    names = [r["record"] for r in group["rules"]]
    for i, rule in enumerate(group["rules"]):
        assert not [n for n in names[i:] if n in rule["expr"]]


def test_the_price_per_gpu_is_every_pool_type_s_price_over_its_gpus():
    cfg = stack_config("prod", {"gpucluster:prices": {"p5.48xlarge": 40.0}})
    assert spend.gpu_prices(cfg) == {"p5.48xlarge": 5.0}
    pools = json.loads(stack_raw("prod")["gpucluster:gpuPools"])
    pools[0].update(capacityType="SPOT", extraInstanceTypes=["p5e.48xlarge"])
    mixed = stack_config("prod", {"gpucluster:gpuPools": pools, "gpucluster:jobs": [],
                                  "gpucluster:prices": {"p5e.48xlarge": 80.0}})
    assert spend.gpu_prices(mixed) == {"p5.48xlarge": 6.88, "p5e.48xlarge": 10.0}  # a Spot pool mixes types
    (prices,) = [r["expr"] for r in spend.recording_rules(mixed) if r["record"] == spend.NODE_GPU_PRICE]
    assert prices.endswith(' or max by (node) (kube_node_labels{label_node_kubernetes_io_instance_type="p5e.48xlarge"'
                           "}) * 0 + 10")


# -- month to date, budgets, alerts ------------------------------------------------------------------------------


def test_prod_s_month_rules_exactly():
    group = groups(stack_config("prod"))[spend.MONTH_GROUP]
    assert group["interval"] == "2m"

    def mtd(series: str) -> str:
        return (f"sum_over_time(({series} and on (namespace) (timestamp({series}) > on () group_left () "
                f"(gpucluster:month_start_time:seconds @ end())))[31d:5m]) / 12")

    assert exprs(group["rules"]) == {
        spend.MONTH_START: "vector(time() - time() % 60) - ((day_of_month() - 1) * 1440 + hour() * 60 + minute()) * 60",
        spend.TEAM_SPEND: mtd(spend.TEAM_COST),
        spend.TEAM_GPU_HOURS: mtd(spend.TEAM_GPUS),
        spend.TEAM_BUDGET: 'label_replace(vector(150000), "namespace", "vision", "", "") or '
                           'label_replace(vector(150000), "namespace", "language", "", "")',
    }


def test_budget_alerts_at_80_and_100_percent_for_budgeted_teams_only():
    cfg = stack_config("prod")
    by_name = {r["alert"]: r for r in alerts.alert_rules(cfg) if r["alert"].startswith("TeamBudget")}
    assert {n: (r["expr"], r["labels"]["severity"]) for n, r in by_name.items()} == {
        "TeamBudgetAt80Percent": (f"({spend.TEAM_SPEND} >= on (namespace) 0.8 * {spend.TEAM_BUDGET}) < on (namespace) "
                                  f"{spend.TEAM_BUDGET}", "warning"),
        "TeamBudgetReached": (f"{spend.TEAM_SPEND} >= on (namespace) {spend.TEAM_BUDGET}", "critical"),
    }
    assert by_name["TeamBudgetAt80Percent"]["annotations"]["summary"] == (
        "Team {{ $labels.namespace }} has spent ${{ $value | humanize }} this month, 80% or more of its monthly budget")
    assert all("--over-budget" in r["annotations"]["runbook"] and "for" not in r for r in by_name.values())
    one = stack_config("prod", {"gpucluster:teams": prod_teams(language=None)})
    assert exprs(spend.month_rules(one))[spend.TEAM_BUDGET] == 'label_replace(vector(150000), "namespace", "vision", ' \
                                                               '"", "")'
    none = stack_config("prod", {"gpucluster:teams": prod_teams(vision=None, language=None)})
    assert spend.TEAM_BUDGET not in exprs(spend.month_rules(none)) and spend.budget_alerts(none) == []
    assert spend.MONTH_GROUP in groups(none)  # spend and GPU-hours are recorded all the same


def test_a_client_reads_the_seconds_since_the_month_began():
    assert spend.month_to_date_queries("vision", 388800) == {
        "usd": 'sum_over_time(gpucluster:team_cost:usd_per_hour{namespace="vision"}[388800s]) / 60',
        "gpuHours": 'sum_over_time(gpucluster:team_gpus:running{namespace="vision"}[388800s]) / 60'}


def test_every_spend_query_parses_and_names_only_emitted_metrics():
    cfg = stack_config("prod")
    rules = [r for g in groups(cfg).values() for r in g["rules"]]
    client = list(spend.month_to_date_queries("vision", 60).values())
    assert [p for e in [r["expr"] for r in rules] + client for p in check_query(e)] == []


# -- nothing without teams -----------------------------------------------------------------------------------


def test_a_stack_without_teams_gets_none_of_it():
    for cfg in (stack_config("dev"), stack_config("prod", {"gpucluster:teams": []})):
        assert spend.rule_groups(cfg) == [] and spend.budget_alerts(cfg) == []
        assert list(groups(cfg)) == ["gpucluster.records", "gpucluster.alerts"]
        text = json.dumps(alerts.prometheus_rule(cfg, ps.NAMESPACE))
        assert "team" not in text.lower() and "gpucluster:job_cost" not in text
        assert dashboards.dashboard_keys(cfg) == dashboards.DASHBOARD_KEYS
        assert list(dashboards.dashboards(cfg, "fs-0123456789abcdef0", "us-east-1")) == list(dashboards.DASHBOARD_KEYS)
    # Teams only add: prod's first two groups are those of prod without teams, but for the budget alerts.
    with_teams, without = groups(stack_config("prod")), groups(stack_config("prod", {"gpucluster:teams": []}))
    assert with_teams["gpucluster.records"] == without["gpucluster.records"]
    assert [r for r in with_teams["gpucluster.alerts"]["rules"] if not r["alert"].startswith("TeamBudget")] == \
        without["gpucluster.alerts"]["rules"]


def test_dev_s_rules_are_what_they_were():
    rule = alerts.prometheus_rule(stack_config("dev"), ps.NAMESPACE)
    assert [r["record"] for r in rule["spec"]["groups"][0]["rules"]] == [
        alerts.JOB_POD, alerts.JOB_NODE, alerts.JOB_START, alerts.NODE_BANDWIDTH, alerts.COST]
    assert [r["alert"] for r in rule["spec"]["groups"][1]["rules"]] == [
        "GpuXidNeedsNodeReplacement", "JobGpusIdle", "EfaErrorsRising", "PoolNodeNotReady",
        "PoolNodeHardwareCondition", "WorkloadPendingTooLong", "JobPodsPendingTooLong", "JobNearDeadline",
        "JobStraggler", "JobGpuXidNeedsNodeReplacement", "JobNoProgress"]  # goodput_alerts.py: no EFA, no NcclOnSockets


# -- the dashboard ------------------------------------------------------------------------------------------


def test_the_spend_dashboard_s_panels_and_queries():
    cfg = stack_config("prod")
    assert dashboards.dashboard_keys(cfg) == (*dashboards.DASHBOARD_KEYS, "gpucluster-spend.json")
    board = dashboards.dashboards(cfg, "fs-0123456789abcdef0", "us-east-1")["gpucluster-spend.json"]
    assert (board["uid"], board["title"]) == ("gpucluster-spend", "gpucluster / gpucluster-prod / GPU spend by team")
    assert board["time"] == {"from": "now/M", "to": "now"}
    panels = {p["title"]: [(t["expr"], t["legendFormat"]) for t in p["targets"]] for p in board["panels"]}
    team, job = "{{namespace}}", "{{namespace}}/{{gpucluster_job}}"
    assert panels == {
        "Spend this month per team, and its budget": [(spend.TEAM_SPEND, team),
                                                      (spend.TEAM_BUDGET, "budget {{namespace}}")],
        "GPU-hours this month per team": [(spend.TEAM_GPU_HOURS, team)],
        "Cost per hour per team": [(spend.TEAM_COST, team)],
        "GPUs in use per team": [(spend.TEAM_GPUS, team)],
        "Cost per hour per job": [(spend.JOB_COST, job)],
        "GPUs in use per job": [(spend.JOB_GPUS, job)],
        "GPU-hours and cost per job over the dashboard's range": [
            (f"sum by (namespace, gpucluster_job) (sum_over_time({spend.JOB_GPUS}[$__range])) / 60", ""),
            (f"sum by (namespace, gpucluster_job) (sum_over_time({spend.JOB_COST}[$__range])) / 60", "")],
    }
    units = {p["title"]: p["fieldConfig"]["defaults"]["unit"] for p in board["panels"]}
    assert units["Spend this month per team, and its budget"] == "currencyUSD" == units["Cost per hour per job"]
    table = board["panels"][-1]
    assert table["type"] == "table" and all(t["instant"] and t["format"] == "table" for t in table["targets"])
    assert [p for _, targets in panels.items() for e, _ in targets for p in check_query(e)] == []
    none = stack_config("prod", {"gpucluster:teams": prod_teams(vision=None, language=None)})
    unbudgeted = dashboards.spend(none)["panels"][0]["targets"]
    assert [t["expr"] for t in unbudgeted] == [spend.TEAM_SPEND]  # no budget lines without budgets


# -- Prometheus' own unit tester ------------------------------------------------------------------------------

PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool")
# Not a skip (conftest fails those: the suite needs nothing outside the repository): without a promtool these
# are reported xfailed, not run. promtool is Prometheus' cmd/promtool at the pinned v3.14.0 (Go module v0.314.0).
needs_promtool = pytest.mark.xfail(PROMTOOL is None, run=False, reason="no promtool (PROMTOOL=path, or on PATH)")
NODE = 'kube_node_labels{{node="{node}", label_node_kubernetes_io_instance_type="p5.48xlarge", ' \
       'label_gpucluster_io_pool="h100"}}'


def pod_series(ns: str, pod: str, node: str, job: str, running: str, gpus: int = 8,
               instance: str | None = None) -> list[dict]:
    """A pod's kube-state-metrics series; `instance`: the replica exporting them (honorLabels keeps the pod's)."""
    base = f'namespace="{ns}", pod="{pod}", uid="{pod}-uid"' + (f', instance="{instance}"' if instance else "")
    return [
        {"series": f'kube_pod_container_resource_requests{{{base}, container="worker", node="{node}", '
                   f'resource="nvidia_com_gpu", unit="integer"}}', "values": f"{gpus}x200"},
        {"series": f'kube_pod_container_resource_requests{{{base}, container="worker", node="{node}", '
                   'resource="cpu", unit="core"}', "values": "90x200"},
        {"series": f'kube_pod_status_phase{{{base}, phase="Running"}}', "values": running},
        {"series": f'kube_pod_labels{{{base}, label_gpucluster_io_job="{job}"}}', "values": "1x200"},
    ]


def promtool_test(tmp_path, groups_: list[dict], tests: list[dict], every: str = "1m") -> subprocess.CompletedProcess:
    """`promtool test rules` of these rule groups; it evaluates every group `every` (whatever its interval)."""
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups_}, sort_keys=False))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "evaluation_interval": every,
                                                        "tests": tests}, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def annotations(summary: str) -> dict[str, str]:
    return {"summary": summary, "runbook": spend.BUDGET_RUNBOOK.replace("{{ $labels.namespace }}", "vision")}


@needs_promtool
def test_promtool_cost_per_team_and_job_and_the_budget_alerts(tmp_path):
    # Small budgets, so that two hours of one p5.48xlarge (55.04 USD/h) cross them: vision's 100 USD.
    cfg = stack_config("prod", {"gpucluster:teams": prod_teams(vision=100, language=1000)})
    rule = alerts.prometheus_rule(cfg, ps.NAMESPACE)
    series = [{"series": NODE.format(node=n), "values": "1x200"} for n in ("n1", "n2")]
    series += pod_series("vision", "va-worker-0", "n1", "va", "1x200")
    series += pod_series("language", "lb-worker-0", "n2", "lb", "0x200")  # Pending: not billed
    series += pod_series("training", "t-worker-0", "n2", "t", "1x200", gpus=4)  # no team's
    # Each 5-minute step after the month's start counts 55.04 / 12: 80 USD at the 18th step (90 min), 100 at the 22nd.
    tests = [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": spend.TEAM_COST, "eval_time": "60m", "exp_samples": [
            {"labels": f'{spend.TEAM_COST}{{namespace="vision"}}', "value": 55.04},
            {"labels": f'{spend.TEAM_COST}{{namespace="language"}}', "value": 0}]},
        {"expr": spend.JOB_COST, "eval_time": "60m", "exp_samples": [
            {"labels": f'{spend.JOB_COST}{{namespace="vision", gpucluster_job="va"}}', "value": 55.04},
            {"labels": f'{spend.JOB_COST}{{namespace="training", gpucluster_job="t"}}', "value": 27.52}]},
        {"expr": spend.TEAM_GPUS, "eval_time": "60m", "exp_samples": [
            {"labels": f'{spend.TEAM_GPUS}{{namespace="vision"}}', "value": 8},
            {"labels": f'{spend.TEAM_GPUS}{{namespace="language"}}', "value": 0}]},
        {"expr": spend.TEAM_SPEND, "eval_time": "120m", "exp_samples": [
            {"labels": f'{spend.TEAM_SPEND}{{namespace="vision"}}', "value": 110.08},
            {"labels": f'{spend.TEAM_SPEND}{{namespace="language"}}', "value": 0}]},
        {"expr": spend.TEAM_GPU_HOURS, "eval_time": "120m", "exp_samples": [
            {"labels": f'{spend.TEAM_GPU_HOURS}{{namespace="vision"}}', "value": 16},
            {"labels": f'{spend.TEAM_GPU_HOURS}{{namespace="language"}}', "value": 0}]},
    # Two minutes past each 5-minute step: the alert reads the spend another group records at the same
    # instant, in whichever order promtool runs the groups, so it sees this step's value or the last
    # minute's, and both include the same steps.
    ], "alert_rule_test": [
        {"eval_time": "87m", "alertname": "TeamBudgetAt80Percent", "exp_alerts": []},
        {"eval_time": "97m", "alertname": "TeamBudgetAt80Percent", "exp_alerts": [  # 19 steps: 87.15
            {"exp_labels": {"severity": "warning", "namespace": "vision"}, "exp_annotations": annotations(
                "Team vision has spent $87.15 this month, 80% or more of its monthly budget")}]},
        {"eval_time": "97m", "alertname": "TeamBudgetReached", "exp_alerts": []},
        {"eval_time": "117m", "alertname": "TeamBudgetAt80Percent", "exp_alerts": []},
        {"eval_time": "117m", "alertname": "TeamBudgetReached", "exp_alerts": [  # 23 steps: 105.49
            {"exp_labels": {"severity": "critical", "namespace": "vision"}, "exp_annotations": annotations(
                "Team vision has spent $105.5 this month, 100% or more of its monthly budget")}]},
    ]}]
    alerting = [g for g in rule["spec"]["groups"] if g["name"] == "gpucluster.alerts"][0]
    alerting = {**alerting, "rules": [r for r in alerting["rules"] if r["alert"].startswith("TeamBudget")]}
    kept = [g for g in rule["spec"]["groups"] if g["name"] != "gpucluster.alerts"] + [alerting]
    done = promtool_test(tmp_path, kept, tests)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_month_start_and_what_month_to_date_keeps(tmp_path):
    cfg = stack_config("prod")
    start = {"name": "start", "interval": "1h", "rules": [r for r in spend.month_rules(cfg)
                                                          if r["record"] == spend.MONTH_START]}
    # A month that began at 01:00 (the rule itself reads 1970-01-01 before February): what ran before is not counted.
    month = [{"record": spend.MONTH_START, "expr": "vector(3600)"},
             *[r for r in spend.month_rules(cfg) if r["record"] == spend.TEAM_SPEND]]
    costs = {"name": "cost", "interval": "1m", "rules": [
        {"record": spend.TEAM_COST, "expr": 'label_replace(vector(60), "namespace", "vision", "", "")'}]}
    done = promtool_test(tmp_path, [start], [{"interval": "1h", "input_series": [], "promql_expr_test": [
        {"expr": spend.MONTH_START, "eval_time": "745h", "exp_samples": [  # 1970-02-01 01:00 UTC
            {"labels": spend.MONTH_START, "value": 31 * 86400}]},
        {"expr": spend.MONTH_START, "eval_time": "743h", "exp_samples": [  # 1970-01-31 23:00 UTC
            {"labels": spend.MONTH_START, "value": 0}]}]}], every="1h")
    assert done.returncode == 0, done.stdout + done.stderr
    done = promtool_test(tmp_path, [costs, {"name": "month", "interval": "1m", "rules": month}], [
        {"interval": "1m", "input_series": [], "promql_expr_test": [
            {"expr": spend.TEAM_SPEND, "eval_time": "90m", "exp_samples": [  # 30 minutes at 60 USD/h
                {"labels": f'{spend.TEAM_SPEND}{{namespace="vision"}}', "value": 30}]}]}])
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_two_kube_state_metrics_replicas_count_once(tmp_path):
    # A rollout: the new replica exports the same series from minute 30, with its own `instance`, so for a while
    # every kube-state-metrics series is there twice.
    cfg = stack_config("prod")
    replicas = {"10.0.1.5:8080": "", "10.0.2.7:8080": "_x30 "}  # the new one: nothing for 30 minutes
    series = []
    for instance, gap in replicas.items():
        entries = [{"series": NODE.format(node="n1").replace("}", f', instance="{instance}"}}'), "values": "1x200"},
                   *pod_series("vision", "va-worker-0", "n1", "va", "1x200", instance=instance)]
        series += [{**e, "values": gap + e["values"].replace("x200", "x170" if gap else "x200")} for e in entries]
    checks = [
        {"expr": spend.POD_GPUS, "eval_time": t, "exp_samples": [
            {"labels": f'{spend.POD_GPUS}{{namespace="vision", pod="va-worker-0", node="n1"}}', "value": 8}]}
        for t in ("20m", "60m")] + [
        {"expr": spend.TEAM_COST, "eval_time": "60m", "exp_samples": [
            {"labels": f'{spend.TEAM_COST}{{namespace="vision"}}', "value": 55.04},  # 8 GPUs at 6.88
            {"labels": f'{spend.TEAM_COST}{{namespace="language"}}', "value": 0}]},
        {"expr": spend.JOB_GPUS, "eval_time": "60m", "exp_samples": [
            {"labels": f'{spend.JOB_GPUS}{{namespace="vision", gpucluster_job="va"}}', "value": 8}]},
    ]
    rule_groups = [g for g in alerts.prometheus_rule(cfg, ps.NAMESPACE)["spec"]["groups"]
                   if g["name"] != "gpucluster.alerts"]
    done = promtool_test(tmp_path, rule_groups, [{"interval": "1m", "input_series": series,
                                                   "promql_expr_test": checks}])
    assert done.returncode == 0, done.stdout + done.stderr
    # The same series through the join without max: an error once both replicas export (the rule would record
    # nothing), so the series above do overlap as a rollout's do.
    unguarded = ('sum by (namespace, pod, node) (kube_pod_container_resource_requests{resource="nvidia_com_gpu"} '
                 '* on (namespace, pod) group_left () (kube_pod_status_phase{phase="Running"} == 1))')
    done = promtool_test(tmp_path, [], [{"interval": "1m", "input_series": series, "promql_expr_test": [
        {"expr": unguarded, "eval_time": "60m", "exp_samples": [
            {"labels": '{namespace="vision", pod="va-worker-0", node="n1"}', "value": 8}]}]}])
    assert done.returncode != 0 and "many-to-many matching not allowed" in done.stdout + done.stderr, done.stdout


@needs_promtool
def test_promtool_the_same_job_name_in_two_team_namespaces_is_two_jobs(tmp_path):
    # vision's and language's "train", each on its own node: vision's GPUs idle, language's busy.
    rule = alerts.prometheus_rule(stack_config("dev"), ps.NAMESPACE)  # the per-job rules are every stack's
    groups_ = {g["name"]: g for g in rule["spec"]["groups"]}
    idle = [r for r in groups_["gpucluster.alerts"]["rules"] if r["alert"] == "JobGpusIdle"]
    series = []
    for ns, node, started, util in (("vision", "n1", 100, 5), ("language", "n2", 2000, 90)):
        pod = f'namespace="{ns}", pod="train-worker-0"'
        series += [
            {"series": f'kube_pod_labels{{{pod}, uid="{ns}-uid", label_gpucluster_io_job="train"}}', "values": "1x60"},
            {"series": f'kube_pod_info{{{pod}, uid="{ns}-uid", node="{node}"}}', "values": "1x60"},
            {"series": f'kube_pod_status_phase{{{pod}, uid="{ns}-uid", phase="Running"}}', "values": "1x60"},
            {"series": f'kube_pod_start_time{{{pod}, uid="{ns}-uid"}}', "values": f"{started}x60"},
            {"series": f'DCGM_FI_DEV_GPU_UTIL{{node="{node}", gpu="0", {pod}}}', "values": f"{util}x60"},
        ]
    job = 'gpucluster_job="train"'
    done = promtool_test(tmp_path, [groups_["gpucluster.records"], {"name": "alerts", "rules": idle}], [
        {"interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": alerts.JOB_NODE, "eval_time": "30m", "exp_samples": [
                {"labels": f'{alerts.JOB_NODE}{{namespace="vision", node="n1", {job}}}', "value": 1},
                {"labels": f'{alerts.JOB_NODE}{{namespace="language", node="n2", {job}}}', "value": 1}]},
            {"expr": alerts.JOB_START, "eval_time": "30m", "exp_samples": [
                {"labels": f'{alerts.JOB_START}{{namespace="vision", {job}}}', "value": 100},
                {"labels": f'{alerts.JOB_START}{{namespace="language", {job}}}', "value": 2000}]},
        ], "alert_rule_test": [
            {"eval_time": "30m", "alertname": "JobGpusIdle", "exp_alerts": [
                {"exp_labels": {"severity": "warning", "namespace": "vision", "gpucluster_job": "train"},
                 "exp_annotations": {"summary": "Job vision/train's GPUs are under 10% busy",
                                     "runbook": idle[0]["annotations"]["runbook"]}}]},
        ]}])
    assert done.returncode == 0, done.stdout + done.stderr
