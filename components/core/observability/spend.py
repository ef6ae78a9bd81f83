"""GPU spend per team and per job: recording rules, budget alerts, and the queries `status` and `submit` read.

Cost is what GPU requests of running pods bill: kube-state-metrics'
kube_pod_container_resource_requests for nvidia.com/gpu (resource
"nvidia_com_gpu", unit "integer": v2.20.0 internal/store/pod.go, an extended
resource's name through SanitizeLabelName, internal/store/utils.go), of pods
whose kube_pod_status_phase is Running, times the hourly price of one GPU of
the node the pod runs on. That price is per instance type, the node's
node.kubernetes.io/instance-type label (allow-listed, metrics.py): the stack
prices instance types (`cfg.price`), and a pool may mix types
(extraInstanceTypes), so its pool label would not say which price applies;
a pod's node selector names only the pool, and kube-state-metrics exports it
only opt-in (kube_pod_nodeselectors). Price per GPU = the instance's price /
its GPUs. A team is its namespace; a job is its pods' gpucluster_job
(m.JOB_POD).

Month to date (calendar month, UTC): a range in PromQL is a constant, so
"since the 1st" cannot be one. Two readings of the same per-minute series:

- `status` and `submit` sum the team's cost per hour over exactly the
  seconds since the month began, computed by the client
  (`month_to_date_queries`): each sample is one minute of it (the spend
  group's interval), so the sum / 60 is USD.
- Alerts and the dashboard cannot compute a window: a recorded month start
  (MONTH_START, read `@ end()`: at the evaluation time, in every step) and
  a 31-day subquery at 5-minute steps keep the samples taken after it, each
  step standing for the 5 minutes before it. Up to 5 minutes of a job off at
  its start and end; a 1-minute step would be exact, but 5 times the work
  on every evaluation (and past promtool's 10,000-sample limit in tests).

Both read what Prometheus still holds: with retentionDays under the month so
far (15 by default), the start of the month is gone. `submit` says so and
refuses to judge a budget on part of a month (bootstrap/jobs/budget.py).
"""

from __future__ import annotations

from typing import Any

from components.core.config import StackConfig
from components.core.hardware import catalog
from components.core.observability import metrics as m

GPU_RESOURCE = "nvidia_com_gpu"  # "nvidia.com/gpu" as kube-state-metrics names it
NODE_GPU_PRICE = "gpucluster:node_gpu_price:usd_per_hour"  # per node: its type's price / its GPUs
POD_GPUS = "gpucluster:pod_gpus:running"  # per (namespace, pod, node): GPUs a Running pod requests
POD_COST = "gpucluster:pod_cost:usd_per_hour"
TEAM_GPUS = "gpucluster:team_gpus:running"  # per team namespace, 0 while it runs nothing
TEAM_COST = "gpucluster:team_cost:usd_per_hour"
JOB_GPUS = "gpucluster:job_gpus:running"  # per (namespace, gpucluster_job), in every namespace
JOB_COST = "gpucluster:job_cost:usd_per_hour"
MONTH_START = "gpucluster:month_start_time:seconds"  # 00:00 UTC on the 1st of this month
TEAM_SPEND = "gpucluster:team_spend:usd_month_to_date"
TEAM_GPU_HOURS = "gpucluster:team_gpu_hours:month_to_date"
TEAM_BUDGET = "gpucluster:team_budget:usd_per_month"  # teams with monthlyBudgetUsd only

SPEND_GROUP, MONTH_GROUP = "gpucluster.spend", "gpucluster.month"
SAMPLE_SECONDS = 60  # the spend group's interval: one sample of a per-hour rule is one minute of it
MONTH_INTERVAL = "2m"  # under Prometheus's 5-minute lookback, so the alerts always find a value
MONTH_STEP_MINUTES = 5
MONTH_RANGE = "31d"  # the longest month
WARN_SHARE = 0.8  # the first budget alert, then the second at 100 %


def _number(x: float) -> str:
    return f"{x:.10g}"


def gpu_prices(cfg: StackConfig) -> dict[str, float]:
    """USD per GPU-hour of every GPU instance type the stack's pools may run."""
    types = dict.fromkeys(t for p in cfg.gpu_pools for t in p.instance_types)
    return {t: cfg.price(t) / catalog.get(t).gpu_count for t in types}


def _per_team(cfg: StackConfig, source: str) -> str:
    """`source` summed per team namespace, and 0 for a team running nothing: every team has a series."""
    names = [t.namespace for t in cfg.teams]
    zeros = " or ".join(f'label_replace(vector(0), "namespace", "{n}", "", "")' for n in names)
    return f'sum by (namespace) ({source}{{namespace=~"{"|".join(names)}"}}) or {zeros}'


def _per_job(source: str) -> str:
    return f"sum by (namespace, {m.JOB}) ({source} * on (namespace, pod) group_left ({m.JOB}) {m.JOB_POD})"


def recording_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    """The per-minute group: prices, GPUs and cost per pod, team and job (in this order: each reads the last)."""
    prices = " or ".join(f'max by (node) (kube_node_labels{{{m.INSTANCE_TYPE_LABEL}="{t}"}}) * 0 + {_number(p)}'
                         for t, p in gpu_prices(cfg).items())
    # One series per container and per pod however many kube-state-metrics replicas export them: during a
    # rollout two export the same series (but for `instance`), which would double the requests, and put two
    # phases on the join's one side, a many-to-many error that records nothing for the whole evaluation.
    running = (f'max by (namespace, pod, node, container) (kube_pod_container_resource_requests{{resource='
               f'"{GPU_RESOURCE}"}}) * on (namespace, pod) group_left () max by (namespace, pod) '
               '(kube_pod_status_phase{phase="Running"} == 1)')
    return [
        {"record": NODE_GPU_PRICE, "expr": prices},
        {"record": POD_GPUS, "expr": f"sum by (namespace, pod, node) ({running})"},
        {"record": POD_COST, "expr": f"{POD_GPUS} * on (node) group_left () {NODE_GPU_PRICE}"},
        {"record": TEAM_GPUS, "expr": _per_team(cfg, POD_GPUS)},
        {"record": TEAM_COST, "expr": _per_team(cfg, POD_COST)},
        {"record": JOB_GPUS, "expr": _per_job(POD_GPUS)},
        {"record": JOB_COST, "expr": _per_job(POD_COST)},
    ]


def month_to_date(series: str) -> str:
    """A per-hour series' total since the month began, for rules: the steps of a 31-day subquery whose sample
    was taken after this month's start (MONTH_START at the evaluation time), each standing for the
    MONTH_STEP_MINUTES before it."""
    this_month = f"timestamp({series}) > on () group_left () ({MONTH_START} @ end())"
    return (f"sum_over_time(({series} and on (namespace) ({this_month}))[{MONTH_RANGE}:{MONTH_STEP_MINUTES}m]) "
            f"/ {60 // MONTH_STEP_MINUTES}")


def month_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    """The month group: its start, each team's spend and GPU-hours so far, and the teams' budgets."""
    rules = [
        # The evaluation time less the minutes since 00:00 UTC on the 1st (and the seconds of this minute).
        {"record": MONTH_START, "expr": "vector(time() - time() % 60) - ((day_of_month() - 1) * 1440 + hour() * 60 "
                                        "+ minute()) * 60"},
        {"record": TEAM_SPEND, "expr": month_to_date(TEAM_COST)},
        {"record": TEAM_GPU_HOURS, "expr": month_to_date(TEAM_GPUS)},
    ]
    budgets = [f'label_replace(vector({_number(t.monthly_budget_usd)}), "namespace", "{t.namespace}", "", "")'
               for t in cfg.teams if t.monthly_budget_usd is not None]
    if budgets:
        rules.append({"record": TEAM_BUDGET, "expr": " or ".join(budgets)})
    return rules


def rule_groups(cfg: StackConfig) -> list[dict[str, Any]]:
    """The spend groups of the PrometheusRule; none without teams."""
    if not cfg.teams:
        return []
    return [{"name": SPEND_GROUP, "interval": f"{SAMPLE_SECONDS}s", "rules": recording_rules(cfg)},
            {"name": MONTH_GROUP, "interval": MONTH_INTERVAL, "rules": month_rules(cfg)}]


BUDGET_RUNBOOK = ("The GPU spend by team dashboard shows the team's jobs and their cost; `python -m bootstrap status "
                  "--team {{ $labels.namespace }}` lists them. At 100% `python -m bootstrap submit` refuses the "
                  "team's jobs (an admin's --over-budget overrides): cancel what can wait, or raise "
                  "teams[].monthlyBudgetUsd and `pulumi up`.")


def budget_alerts(cfg: StackConfig) -> list[dict[str, Any]]:
    """At WARN_SHARE of a team's budget (until 100 %) and at 100 %: teams with monthlyBudgetUsd only."""
    if not any(t.monthly_budget_usd is not None for t in cfg.teams):
        return []
    share = f"{WARN_SHARE:g}"
    rules = []
    for name, expr, severity, summary in (
            ("TeamBudgetAt80Percent", f"({TEAM_SPEND} >= on (namespace) {share} * {TEAM_BUDGET}) < on (namespace) "
                                      f"{TEAM_BUDGET}", "warning", f"{WARN_SHARE:.0%}"),
            ("TeamBudgetReached", f"{TEAM_SPEND} >= on (namespace) {TEAM_BUDGET}", "critical", "100%")):
        rules.append({"alert": name, "expr": expr, "labels": {"severity": severity}, "annotations": {
            "summary": "Team {{ $labels.namespace }} has spent ${{ $value | humanize }} this month, "
                       f"{summary} or more of its monthly budget",
            m.RUNBOOK: BUDGET_RUNBOOK}})
    return rules


def month_to_date_queries(namespace: str, seconds: int) -> dict[str, str]:
    """What a client reads for a team over the `seconds` since the month began (evaluated at that instant):
    USD and GPU-hours, one sample a minute, so / 60. No answer at all: the team's series do not exist."""
    window = f'{{namespace="{namespace}"}}[{max(seconds, SAMPLE_SECONDS)}s]'
    per_hour = 3600 // SAMPLE_SECONDS
    return {"usd": f"sum_over_time({TEAM_COST}{window}) / {per_hour}",
            "gpuHours": f"sum_over_time({TEAM_GPUS}{window}) / {per_hour}"}
