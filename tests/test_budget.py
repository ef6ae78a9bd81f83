"""A team's spend and budget in the CLI: the spend reader (bootstrap/jobs/budget.py) against a fake Prometheus
answer and a real HTTP server on 127.0.0.1, `submit --team` (namespace, priority class, budget refusal and
--over-budget) and `status --team`, against tests/kube_fake.py's API server, which here also answers the service
proxy to Prometheus. Every exit code keeps the CLI's one rule (README; tests/test_exit_codes.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import bootstrap.__main__ as cli
from bootstrap import stackfile
from bootstrap.jobs import budget, committed, render
from bootstrap.verbs.jobs import status, submit
from components.core.kube import queueing
from tests import http_fake, k8s
from tests.kube_fake import FakeKube, Request

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)  # 4.5 days into December
SINCE_SECONDS = 388800  # 4.5 x 86400
P5 = 55.04  # p5.48xlarge, the catalog's price (prod sets none)
SWEEP_BOUND = int(1000 / P5 * 3600)  # job_file's bound: maxCostUsd 1000 at one node, whole seconds
NONE_COMMITTED = {"jobs": 0, "usd": 0.0, "unbounded": [], "items": []}
NOTHING_HELD = committed.Committed(())
VALUES = k8s.UPSTREAM / "charts" / "kube-prometheus-stack-88.5.3" / "values.yaml"


def vector(ns: str, value: float, at: float) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": {"namespace": ns}, "value": [at, repr(value)]}]}}


class FakePrometheus:
    """Prometheus' /api/v1/query for the month-to-date queries, from what each team spent; None: no series."""

    QUERY = re.compile(r'sum_over_time\(gpucluster:team_(cost|gpus):[a-z_]+\{namespace="([^"]+)"\}\[(\d+)s\]\) / 60')

    def __init__(self, usd: dict[str, float | None], gpu_hours: float = 100.0):
        self.usd, self.gpu_hours = usd, gpu_hours
        self.asked: list[tuple[str, float]] = []

    def __call__(self, query: str, at: float) -> tuple[int, dict[str, Any]]:
        self.asked.append((query, at))
        match = self.QUERY.fullmatch(query)
        if not match:
            return 400, {"status": "error", "errorType": "bad_data", "error": f"unexpected query {query}"}
        kind, ns, _ = match.groups()
        if self.usd.get(ns) is None:
            return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}
        value = self.usd[ns] if kind == "cost" else self.gpu_hours
        return 200, vector(ns, value, at)


class KubeWithPrometheus(FakeKube):
    """The fake API server, also proxying to a Prometheus Service (GET .../services/kps-prometheus:http-web/proxy)."""

    def __init__(self, prometheus: Callable[[str, float], tuple[int, Any]] | None = None):
        super().__init__()
        self.prometheus = prometheus

    def handle(self, method, path, query, body):
        if path == budget.PROXY_PATH and self.prometheus is not None:
            self.requests.append(Request(method, path, query, body))
            return self.prometheus(query["query"], float(query["time"]))
        return super().handle(method, path, query, body)


def team_kueue(fake: FakeKube, obj: dict) -> None:
    """Kueue's part: a pending Workload, in the job's own namespace, owned by it."""
    if obj["kind"] in ("MPIJob", "TrainJob", "JobSet"):
        meta = obj["metadata"]
        fake.add({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                  "metadata": {"name": f"{obj['kind'].lower()}-{meta['name']}-1a2b3", "namespace": meta["namespace"],
                               "ownerReferences": [{"apiVersion": obj["apiVersion"], "kind": obj["kind"],
                                                    "name": meta["name"], "uid": meta["uid"], "controller": True}]},
                  "spec": {"queueName": "gpu", "priority": 100, "active": True},
                  "status": {"conditions": []}})


@pytest.fixture
def prometheus() -> FakePrometheus:
    return FakePrometheus({"vision": 12345.67, "language": 0.0})


@pytest.fixture
def cluster(tmp_path, monkeypatch, prometheus):
    fake = KubeWithPrometheus(prometheus).start()
    fake.on_create.append(team_kueue)
    monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(tmp_path / "kubeconfig"))
    monkeypatch.delenv(budget.URL_ENV, raising=False)
    yield fake
    fake.stop()


@pytest.fixture
def prometheus_server(prometheus):
    """A real HTTP server on 127.0.0.1 answering /api/v1/query as Prometheus does; its URL."""
    asked = []

    def answer(path: str, params: dict[str, str]) -> tuple[int, dict]:
        asked.append((path, params))
        return (prometheus(params["query"], float(params["time"])) if path == "/api/v1/query"
                else (404, {"status": "error", "error": "not found"}))

    server = http_fake.serve(answer)
    server.asked = asked
    yield server
    http_fake.stop(server)


def url_of(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def job_file(tmp_path, **entry) -> str:
    base = {"name": "sweep-1", "pool": "h100", "nodes": 1, "launcher": "mpirun",
            "image": "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023",
            "command": ["python", "/opt/gpucluster/scripts/train_synthetic.py", "--steps", "100"],
            "scripts": ["examples/train_synthetic.py"], "maxCostUsd": 1000}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in {**base, **entry}.items() if v is not None}))
    return str(path)


def run(verb, capsys, *argv: str, **kwargs) -> tuple[int, str, str]:
    code = verb.main(list(argv), **kwargs)
    out, err = capsys.readouterr()
    return code, out, err


# -- the Prometheus Service the proxy reaches, from the chart ----------------------------------------------


def test_the_proxy_reaches_the_chart_s_prometheus_service_port_by_name():
    values = yaml.safe_load(VALUES.read_text())["prometheus"]
    assert values["prometheusSpec"]["portName"] == budget.PORT_NAME == "http-web"
    assert values["service"]["port"] == 9090  # what PORT_FORWARD forwards
    assert budget.PROXY_PATH == "/api/v1/namespaces/monitoring/services/kps-prometheus:http-web/proxy/api/v1/query"


# -- the reader --------------------------------------------------------------------------------------------


def test_read_sums_the_per_minute_rule_over_the_seconds_since_the_first_of_the_month_utc(prometheus):
    asked = []

    def query(promql, at):
        asked.append((promql, at))
        return prometheus(promql, at)[1]["data"]["result"]

    spent = budget.read(query, "vision", NOW)
    window = f'{{namespace="vision"}}[{SINCE_SECONDS}s]'
    assert asked == [(f"sum_over_time(gpucluster:team_cost:usd_per_hour{window}) / 60", NOW.timestamp()),
                     (f"sum_over_time(gpucluster:team_gpus:running{window}) / 60", NOW.timestamp())]
    assert spent == budget.Spend("vision", 12345.67, 100.0, datetime(2026, 12, 1, tzinfo=UTC), NOW, None)
    assert spent.to_dict() == {"usd": 12345.67, "gpuHours": 100.0, "since": "2026-12-01T00:00:00+00:00",
                               "at": "2026-12-05T12:00:00+00:00", "partial": None}


def test_a_month_longer_than_prometheus_keeps_is_partial(prometheus):
    late = datetime(2026, 12, 20, tzinfo=UTC)
    spent = budget.read(lambda q, at: prometheus(q, at)[1]["data"]["result"], "vision", late, retention_days=15)
    assert spent.partial == (
        "Prometheus keeps 15 days (gpucluster:observability.retentionDays) and this month began 19.0 days ago, so "
        "what ran before the last 15 days is not counted; set retentionDays to 32 or more to hold a whole month")
    assert budget.read(lambda q, at: prometheus(q, at)[1]["data"]["result"], "vision", late, 32).partial is None


@pytest.mark.parametrize(("answer", "message"), [
    ([], "Prometheus has no gpucluster:team_cost:usd_per_hour for namespace vision this month: the stack's spend "
         "rules are not loaded (`pulumi up` with the team), or were loaded under a minute ago"),
    ([{"metric": {}, "value": [0, "NaN"]}], "with NaN"),
    ([{"metric": {}}], "with something other than a vector of numbers"),
])
def test_what_the_reader_cannot_use_is_spend_unknown(answer, message):
    with pytest.raises(budget.SpendUnknown, match=re.escape(message)):
        budget.read(lambda q, at: answer, "vision", NOW)


def test_the_first_minute_of_a_month_still_reads_a_whole_sample():
    asked = []
    budget.read(lambda q, at: asked.append(q) or [{"metric": {}, "value": [at, "1"]}], "vision",
                datetime(2027, 1, 1, 0, 0, 20, tzinfo=UTC))
    assert asked[0] == 'sum_over_time(gpucluster:team_cost:usd_per_hour{namespace="vision"}[60s]) / 60'


# -- the verdict -------------------------------------------------------------------------------------------


def spend_of(usd: float, partial: str | None = None) -> budget.Spend:
    return budget.Spend("vision", usd, 10.0, datetime(2026, 12, 1, tzinfo=UTC), NOW, partial)


def verdict(worst: float | None, spent: float | None = 140000.0, override: bool = False,
            partial: str | None = None, held: committed.Committed = NOTHING_HELD,
            admin: bool = True) -> budget.Verdict:
    def read():
        if spent is None:
            raise budget.SpendUnknown("Prometheus at http://localhost:9090 did not answer: [Errno 111] refused")
        return spend_of(spent, partial)
    return budget.judge("vision", "sweep-1", 150000.0, worst, read, override, held, lambda: admin)


def test_worst_case_is_the_nodes_at_the_pool_s_price_for_the_whole_bound():
    assert budget.worst_case_usd(2, P5, 163517) == pytest.approx(2 * P5 * 163517 / 3600)
    assert budget.worst_case_usd(2, P5, None) is None


def test_a_job_that_fits_and_one_that_does_not():
    fits = verdict(10000.0)
    assert (fits.problem, fits.refused) == (None, False)
    assert fits.summary() == ("budget: team vision has spent $140,000.00 of $150,000.00 this month; this job's "
                              "worst case $10,000.00 leaves $0.00")  # exactly at the budget still fits
    over = verdict(10000.01)
    assert (over.problem, over.refused, over.exit_code) == ("over", True, 1)
    assert over.refusal() == (
        "not submitted: team vision has spent $140,000.00 this month (since 2026-12-01 UTC) and job 'sweep-1' may "
        "cost up to $10,000.01 more: $150,000.01, over its monthly budget of $150,000.00. Either lower the job's "
        "bound (maxCostUsd, runPolicy.activeDeadlineSeconds) or its nodes, cancel what can wait, or raise "
        "teams[].monthlyBudgetUsd and `pulumi up`, or, as an admin, submit anyway with --over-budget")


def test_unbounded_unreadable_and_partial_are_refused_with_what_to_do():
    unbounded = verdict(None)
    assert (unbounded.problem, unbounded.exit_code) == ("unbounded", 1)
    assert unbounded.refusal() == (
        "not submitted: team vision has a monthly budget of $150,000.00 and job 'sweep-1' has no bound, so its "
        "worst case is unlimited. Either bound it with maxCostUsd (USD) or runPolicy.activeDeadlineSeconds in the "
        "job, or, as an admin, submit anyway with --over-budget")
    unreadable = verdict(1000.0, spent=None)
    assert (unreadable.problem, unreadable.exit_code) == ("unreadable", 2)  # could not run, as without a cluster
    assert unreadable.refusal() == (
        "not submitted: team vision's budget cannot be checked: its spend this month is unknown: Prometheus at "
        "http://localhost:9090 did not answer: [Errno 111] refused. Either reach Prometheus another way (`kubectl "
        "-n monitoring port-forward svc/kps-prometheus 9090:9090`, then --prometheus-url http://localhost:9090), "
        "or, as an admin, submit anyway with --over-budget")
    partial = verdict(1000.0, spent=10.0, partial="Prometheus keeps 15 days")
    assert (partial.problem, partial.exit_code) == ("partial", 1)
    assert partial.refusal().startswith("not submitted: team vision's budget cannot be checked on part of a month: "
                                        "Prometheus keeps 15 days (spend counted: $10.00). Either raise "
                                        "retentionDays to 32 or more and `pulumi up`")


def test_the_override_is_marked_only_when_it_was_needed_and_says_so():
    forced = verdict(20000.0, override=True)
    assert (forced.problem, forced.refused, forced.overridden) == ("over", False, True)
    assert forced.warning().startswith("OVER BUDGET: submitted anyway (--over-budget): team vision has spent "
                                       "$140,000.00 this month")
    assert forced.to_dict() == {
        "team": "vision", "budgetUsd": 150000.0, "spend": spend_of(140000.0).to_dict(), "spendUnknown": None,
        "committed": NONE_COMMITTED, "worstCaseUsd": 20000.0, "afterUsd": 160000.0, "problem": "over",
        "overBudget": True, "overBudgetDenied": False, "warning": forced.warning()}
    assert verdict(1000.0, override=True).overridden is False


# -- what the team's unfinished jobs hold (bootstrap/jobs/committed.py) -----------------------------------


def kueue_workload(name: str, owner: dict | None = None, bound: int | None = None, past: int | None = None,
                   admitted_at: str | None = None, finished: bool = False, active: bool = True,
                   gpus: int = 0, pods: int = 1, created: str = "2026-12-05T10:00:00Z") -> dict:
    """A Workload as Kueue v0.19.2 writes it (apis/kueue/v1beta2/workload_types.go): spec.active,
    spec.maximumExecutionTimeSeconds, spec.podSets[].count/template, status.accumulatedPastExecutionTimeSeconds, the
    Admitted and Finished conditions, owned by its job."""
    conditions = [{"type": "Finished", "status": "True", "reason": "Succeeded",
                   "lastTransitionTime": "2026-12-05T11:00:00Z"}] if finished else []
    if admitted_at:
        conditions += [{"type": t, "status": "True", "reason": t, "lastTransitionTime": admitted_at}
                       for t in ("QuotaReserved", "Admitted")]
    resources = {"requests": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec = {"queueName": "gpu", "priority": 100, "active": active,
            "podSets": [{"name": "main", "count": pods,
                         "template": {"spec": {"containers": [{"name": "c", "resources": resources}]}}}]}
    if bound is not None:
        spec["maximumExecutionTimeSeconds"] = bound
    status = {"conditions": conditions}
    if past is not None:
        status["accumulatedPastExecutionTimeSeconds"] = past
    refs = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
             "uid": owner["metadata"]["uid"], "controller": True}] if owner else []
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "spec": spec, "status": status,
            "metadata": {"name": name, "namespace": "vision", "creationTimestamp": created, "ownerReferences": refs}}


def an_mpijob(name: str, workers: int, deadline: int | None = None, pool: str = "h100") -> dict:
    labels = {"gpucluster.io/pool": pool, **({"kueue.x-k8s.io/max-exec-time-seconds": str(deadline)}
                                              if deadline else {})}
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": "vision", "uid": f"uid-{name}", "labels": labels},
            "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": workers}}}}


def test_what_is_left_of_a_bound_is_kueue_s_own_arithmetic():
    """reconcileMaxExecutionTime (pkg/controller/core/workload_controller.go): the bound less the admitted time of
    past Admit-Evict cycles, less the time since Admitted while admitted."""
    left = committed.remaining_seconds
    hour_ago = "2026-12-05T11:00:00Z"
    assert left(kueue_workload("q", bound=7200), None, NOW) == 7200  # queued: all of it
    assert left(kueue_workload("a", bound=7200, past=1800, admitted_at=hour_ago), None, NOW) == 1800
    assert left(kueue_workload("e", bound=7200, past=1800), None, NOW) == 5400  # evicted, queued again
    assert left(kueue_workload("x", bound=3000, admitted_at=hour_ago), None, NOW) == 0  # never below 0
    job = an_mpijob("j", 1, deadline=3600)
    assert left(kueue_workload("l", job), job, NOW) == 3600  # the job's label, before Kueue copied it
    assert left(kueue_workload("s", job, bound=1200), job, NOW) == 1200  # the Workload's, which Kueue enforces
    assert left(kueue_workload("n"), an_mpijob("k", 1), NOW) is None


def test_committed_is_each_unfinished_job_s_nodes_at_its_pool_s_price_for_what_is_left():
    big, small, done, off = (an_mpijob("big", 2, 7200), an_mpijob("small", 1, 3600), an_mpijob("done", 4, 3600),
                             an_mpijob("off", 4, 3600))
    workloads = [
        kueue_workload("mpijob-small-1", small, bound=3600, past=1800, created="2026-12-05T09:00:00Z"),
        kueue_workload("mpijob-big-1", big, bound=7200, admitted_at="2026-12-05T11:00:00Z"),
        kueue_workload("mpijob-done-1", done, bound=3600, finished=True),
        kueue_workload("mpijob-off-1", off, bound=3600, active=False),  # deactivated: Kueue never admits it
        kueue_workload("job-batch-1", bound=1800, gpus=4, pods=2),  # a member's batch Job: its GPUs
        kueue_workload("job-cpu-1"),  # no GPU: nothing to bill, bound or not
    ]
    held = committed.of(workloads, [big, small, done, off], {"h100": P5}.get, 7.5, NOW)
    assert [(c.job, c.count, c.unit, c.price_per_hour, c.remaining_seconds) for c in held.items] == [
        ("small", 1, "node", P5, 1800), ("job-batch-1", 8, "GPU", 7.5, 1800), ("big", 2, "node", P5, 3600)]
    assert held.usd == pytest.approx(P5 / 2 + 8 * 7.5 / 2 + 2 * P5)
    assert held.phrase() == "committed by 3 unfinished jobs: $167.60"
    assert held.to_dict()["items"][2] == {"job": "big", "workload": "mpijob-big-1", "count": 2, "unit": "node",
                                          "pricePerHour": P5, "remainingSeconds": 3600, "usd": 110.08}
    assert committed.of([], [], {}.get, 7.5, NOW).phrase() == "committed by 0 unfinished jobs: $0.00"


def test_a_job_of_the_team_without_a_bound_commits_it_to_an_unlimited_cost():
    free = an_mpijob("free", 1)
    held = committed.of([kueue_workload("mpijob-free-1", free), kueue_workload("mpijob-x", an_mpijob("x", 1, 60),
                                                                                 bound=60)],
                        [free], {"h100": P5}.get, 7.5, NOW)
    assert (held.usd, held.unbounded, held.phrase()) == (None, ("free",), "committed by 1 unfinished job: unlimited")


def test_the_gpu_count_of_a_workload_is_its_pod_sets_count_times_each_pod_s_gpus():
    wl = kueue_workload("w", gpus=8, pods=3)
    wl["spec"]["podSets"].append({"name": "launcher", "count": 1, "template": {"spec": {"containers": [
        {"name": "l", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}})  # a request defaults to its limit
    assert committed.workload_gpus(wl) == 25


def test_committed_jobs_count_against_the_budget():
    held = committed.Committed((committed.Commitment("a", "mpijob-a-1", 2, "node", P5, 3600),
                                committed.Commitment("b", "mpijob-b-1", 1, "node", P5, 36000)))
    fits = verdict(1000.0, spent=100000.0, held=held)
    assert fits.problem is None
    assert fits.summary() == ("budget: team vision has spent $100,000.00 of $150,000.00 this month; committed by 2 "
                              "unfinished jobs: $660.48; this job's worst case $1,000.00 leaves $48,339.52")
    over = verdict(10000.0, held=held)
    assert (over.problem, over.exit_code, over.after_usd) == ("over", 1, pytest.approx(150660.48))
    assert over.refusal() == (
        "not submitted: team vision has spent $140,000.00 this month (since 2026-12-01 UTC), is committed by 2 "
        "unfinished jobs: $660.48, and job 'sweep-1' may cost up to $10,000.00 more: $150,660.48, over its monthly "
        "budget of $150,000.00. Either lower the job's bound (maxCostUsd, runPolicy.activeDeadlineSeconds) or its "
        "nodes, cancel what can wait, or raise teams[].monthlyBudgetUsd and `pulumi up`, or, as an admin, submit "
        "anyway with --over-budget")
    assert verdict(10000.0).problem is None  # the same job fits without them
    assert over.to_dict()["committed"] == held.to_dict() and over.to_dict()["afterUsd"] == 150660.48


def test_an_unfinished_job_without_a_bound_refuses_the_next():
    held = committed.Committed((committed.Commitment("free", "mpijob-free-1", 1, "node", P5, None),))
    refused = verdict(1.0, spent=0.0, held=held)
    assert (refused.problem, refused.exit_code, refused.after_usd) == ("committed-unbounded", 1, None)
    assert refused.refusal() == (
        "not submitted: team vision has a monthly budget of $150,000.00 and its unfinished job 'free' has no bound, "
        "so what they may still cost is unlimited (committed by 1 unfinished job: unlimited). Either cancel the "
        "unfinished jobs with no bound (`python -m bootstrap cancel JOB --team vision`) or wait until they finish, "
        "or, as an admin, submit anyway with --over-budget")


def test_over_budget_is_honoured_for_an_admin_only_and_asked_only_when_needed():
    denied = verdict(20000.0, override=True, admin=False)
    assert (denied.problem, denied.refused, denied.overridden, denied.not_admin, denied.exit_code) == (
        "over", True, False, True, 1)
    assert denied.refusal() == (
        "not submitted: --over-budget is for the cluster's admins, and the API server says you may not create "
        "clusterqueues.kueue.x-k8s.io: team vision has spent $140,000.00 this month (since 2026-12-01 UTC) and job "
        "'sweep-1' may cost up to $20,000.00 more: $160,000.00, over its monthly budget of $150,000.00. Either lower "
        "the job's bound (maxCostUsd, runPolicy.activeDeadlineSeconds) or its nodes, cancel what can wait, or raise "
        "teams[].monthlyBudgetUsd and `pulumi up`, or ask an admin to submit it with --over-budget")
    assert denied.to_dict()["overBudgetDenied"] is True
    assert verdict(1000.0, spent=None, override=True, admin=False).exit_code == 1  # refused for who asks, not 2

    def never():
        raise AssertionError("asked whether an admin though nothing needed overriding")

    fits = budget.judge("vision", "sweep-1", 150000.0, 1000.0, lambda: spend_of(0.0), True, committed.Committed(()),
                        never)
    assert (fits.problem, fits.overridden, fits.not_admin) == (None, False, False)


# -- the two ways to ask Prometheus ----------------------------------------------------------------------


def test_url_query_asks_prometheus_http_api(prometheus_server, prometheus):
    query = budget.url_query(url_of(prometheus_server) + "/")
    spent = budget.read(query, "vision", NOW)
    assert spent.usd == 12345.67
    paths = [(p, sorted(q)) for p, q in prometheus_server.asked]
    assert paths == [("/api/v1/query", ["query", "time"])] * 2
    assert prometheus_server.asked[0][1]["time"] == f"{NOW.timestamp():.3f}"


def test_url_query_says_what_went_wrong(prometheus_server):
    url = url_of(prometheus_server)
    with pytest.raises(budget.SpendUnknown, match=re.escape(f"Prometheus at {url} said 400 Bad Request: unexpected "
                                                            "query up")):
        budget.url_query(url)("up", 0)
    prometheus_server.shutdown()
    prometheus_server.server_close()
    with pytest.raises(budget.SpendUnknown, match=re.escape(f"Prometheus at {url} did not answer: ")):
        budget.url_query(url, timeout=2)("up", 0)


def test_proxy_query_goes_through_the_api_server(cluster, prometheus):
    spent = budget.read(budget.proxy_query(cluster.client()), "language", NOW)
    assert spent.usd == 0.0
    (first, *_) = [r for r in cluster.requests if r.path == budget.PROXY_PATH]
    assert first.method == "GET" and first.query == {
        "query": f'sum_over_time(gpucluster:team_cost:usd_per_hour{{namespace="language"}}[{SINCE_SECONDS}s]) / 60',
        "time": f"{NOW.timestamp():.3f}"}


@pytest.mark.parametrize(("status_code", "reason", "message", "tail"), [
    (403, "Forbidden", 'services "kps-prometheus:http-web" is forbidden: User "alice" cannot get resource '
                       '"services/proxy" in API group "" in the namespace "monitoring"',
     " (reading it needs `get` on services/proxy in namespace monitoring)"),
    (503, "Service Unavailable", 'no endpoints available for service "kps-prometheus"', ""),  # HTTP's phrase
])
def test_proxy_query_says_what_the_api_server_said(cluster, status_code, reason, message, tail):
    cluster.prometheus = lambda q, at: (status_code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                      "message": message, "reason": reason.replace(" ", ""),
                                                      "code": status_code})
    with pytest.raises(budget.SpendUnknown) as caught:
        budget.proxy_query(cluster.client())("up", 0)
    assert str(caught.value) == ("Prometheus through the API server's proxy to service monitoring/kps-prometheus: the "
                                 f"API server said {status_code} {reason}: {message}{tail}")


# -- submit --team -------------------------------------------------------------------------------------------


def test_a_team_s_job_renders_into_its_namespace_at_its_priority_class(tmp_path):
    sub = render.from_file("prod", Path(job_file(tmp_path, priorityClass="gpucluster-low")),
                           team="vision")
    assert (sub.namespace, sub.team, sub.node_price_per_hour) == ("vision", "vision", P5)
    assert sub.manifest["metadata"]["namespace"] == "vision" and sub.config_map["metadata"]["namespace"] == "vision"
    labels = sub.manifest["metadata"]["labels"]
    assert labels[queueing.QUEUE_LABEL] == queueing.LOCAL_QUEUE  # the team's LocalQueue has the same name
    assert labels[queueing.PRIORITY_LABEL] == "gpucluster-low"
    plain = render.from_file("prod", Path(job_file(tmp_path)))
    assert (plain.namespace, plain.team) == ("training", None)


def test_submit_team_within_budget(cluster, capsys, tmp_path, prometheus):
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                         "--json", sleep=lambda _: None, now=NOW)
    assert code == 0, err
    report = json.loads(out)
    (job,) = cluster.objects("MPIJob")
    assert job["metadata"]["namespace"] == "vision" == report["namespace"]
    assert [c["metadata"]["namespace"] for c in cluster.objects("ConfigMap")] == ["vision"]
    deadline = int(1000 / P5 * 3600)  # maxCostUsd 1000 at one node
    assert report["deadlineSeconds"] == deadline
    assert (report["team"], report["priorityClass"]) == ("vision", "gpucluster-training")
    assert report["budget"] == {
        "team": "vision", "budgetUsd": 150000.0, "spend": budget.Spend(
            "vision", 12345.67, 100.0, datetime(2026, 12, 1, tzinfo=UTC), NOW).to_dict(),
        "spendUnknown": None, "committed": NONE_COMMITTED, "worstCaseUsd": round(P5 * deadline / 3600, 2),
        "afterUsd": round(12345.67 + P5 * deadline / 3600, 2), "problem": None, "overBudget": False,
        "overBudgetDenied": False, "warning": None}
    assert len(prometheus.asked) == 2 and {at for _, at in prometheus.asked} == {NOW.timestamp()}


def test_submit_team_text_says_what_is_left(cluster, capsys, tmp_path):
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       sleep=lambda _: None, now=NOW)
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == "submitted MPIJob sweep-1 to vision: 1 x p5.48xlarge, $55.04/h while it runs; deadline 18h 10m"
    assert lines[1] == ("budget: team vision has spent $12,345.67 of $150,000.00 this month; this job's worst case "
                        "$999.99 leaves $136,654.34")  # the bound's deadline is whole seconds
    assert lines[-1] == "follow it: python -m bootstrap logs sweep-1 -f --stack prod --namespace vision"


def test_submit_refuses_a_job_past_the_budget_and_creates_nothing(cluster, capsys, tmp_path, prometheus):
    prometheus.usd["vision"] = 149500.0
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                         sleep=lambda _: None, now=NOW)
    assert code == 1 and out == ""
    assert err == ("python -m bootstrap submit: error: not submitted: team vision has spent $149,500.00 this month "
                   "(since 2026-12-01 UTC) and job 'sweep-1' may cost up to $999.99 more: $150,499.99, over its "
                   "monthly budget of $150,000.00. Either lower the job's bound (maxCostUsd, "
                   "runPolicy.activeDeadlineSeconds) or its nodes, cancel what can wait, or raise "
                   "teams[].monthlyBudgetUsd and `pulumi up`, or, as an admin, submit anyway with --over-budget\n")
    assert cluster.objects("MPIJob") == [] and cluster.objects("ConfigMap") == []
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path), "--json",
                       sleep=lambda _: None, now=NOW)
    refused = json.loads(out)
    assert code == 1 and refused["submitted"] is False and refused["budget"]["problem"] == "over"
    assert refused["budget"]["afterUsd"] == 150499.99


def test_over_budget_submits_anyway_and_says_so_loudly(cluster, capsys, tmp_path, prometheus):
    prometheus.usd["vision"] = 149500.0
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                         "--over-budget", sleep=lambda _: None, now=NOW)
    assert code == 0 and len(cluster.objects("MPIJob")) == 1
    warning = ("OVER BUDGET: submitted anyway (--over-budget): team vision has spent $149,500.00 this month (since "
               "2026-12-01 UTC) and job 'sweep-1' may cost up to $999.99 more: $150,499.99, over its monthly "
               "budget of $150,000.00")
    assert out.splitlines()[0] == warning
    assert err == f"python -m bootstrap submit: warning: {warning}\n"
    cluster.collections.clear()
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       "--over-budget", "--json", sleep=lambda _: None, now=NOW)
    report = json.loads(out)
    assert code == 0 and report["budget"]["overBudget"] is True and report["budget"]["warning"] == warning


def test_an_unbounded_job_of_a_budgeted_team_is_refused(cluster, capsys, tmp_path, prometheus):
    code, _, err = run(submit, capsys, "--stack", "prod", "--file", job_file(tmp_path, maxCostUsd=None, team="vision"),
                       sleep=lambda _: None, now=NOW)
    assert code == 1
    assert ("team vision has a monthly budget of $150,000.00 and job 'sweep-1' has no bound, so its worst case is "
            "unlimited. Either bound it with maxCostUsd (USD) or runPolicy.activeDeadlineSeconds in the job") in err
    bounded = job_file(tmp_path, maxCostUsd=None, team="vision", runPolicy={"activeDeadlineSeconds": 7200})
    code, out, _ = run(submit, capsys, "--stack", "prod", "--file", bounded, "--json", sleep=lambda _: None, now=NOW)
    assert code == 0 and json.loads(out)["budget"]["worstCaseUsd"] == round(2 * P5, 2)


def test_spend_that_cannot_be_read_refuses_unless_overridden(cluster, capsys, tmp_path):
    cluster.prometheus = None  # the API server's proxy finds no such path: 404
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "language", "--file", job_file(tmp_path),
                         sleep=lambda _: None, now=NOW)
    assert code == 2 and out == "" and cluster.objects("MPIJob") == []
    assert err.startswith("python -m bootstrap submit: error: not submitted: team language's budget cannot be "
                          "checked: its spend this month is unknown: Prometheus through the API server's proxy to "
                          "service monitoring/kps-prometheus: the API server said 404 Not Found: ")
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "language", "--file", job_file(tmp_path),
                         "--over-budget", sleep=lambda _: None, now=NOW)
    assert code == 0 and out.startswith("OVER BUDGET: submitted anyway (--over-budget): team language's budget "
                                        "cannot be checked")
    (job,) = cluster.objects("MPIJob")
    assert job["metadata"]["namespace"] == "language"


def test_the_prometheus_url_replaces_the_proxy(cluster, capsys, tmp_path, prometheus_server, monkeypatch):
    cluster.prometheus = None
    code, _, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       "--prometheus-url", url_of(prometheus_server), sleep=lambda _: None, now=NOW)
    assert code == 0, err
    assert len(prometheus_server.asked) == 2 and not [r for r in cluster.requests if "proxy" in r.path]
    cluster.collections.clear()
    monkeypatch.setenv(budget.URL_ENV, url_of(prometheus_server))  # for people who port-forward
    assert run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
               sleep=lambda _: None, now=NOW)[0] == 0
    assert len(prometheus_server.asked) == 4


@pytest.mark.parametrize(("argv", "entry", "code", "message"), [
    (["--team", "vision"], {"priorityClass": "gpucluster-high"}, 1,
     "gpucluster:jobs[0].priorityClass: got 'gpucluster-high'; team 'vision' may use gpucluster-training, "
     "gpucluster-low"),
    ([], {"team": "vision", "priorityClass": "gpucluster-high"}, 1,
     "gpucluster:jobs[0].priorityClass: got 'gpucluster-high'; team 'vision' may use gpucluster-training, "
     "gpucluster-low"),
    (["--team", "nope"], {}, 2, "no team 'nope' in stack prod; its teams: vision, language"),
    (["--team", "vision"], {"team": "language"}, 2, "its team is 'language', not --team vision; give one of them"),
])
def test_submit_team_refusals(cluster, capsys, tmp_path, argv, entry, code, message):
    got, _, err = run(submit, capsys, "--stack", "prod", "--file", job_file(tmp_path, **entry), *argv,
                      sleep=lambda _: None, now=NOW)
    assert (got, message in err, "Traceback" in err) == (code, True, False), err
    assert cluster.objects("MPIJob") == []


def test_a_team_uses_any_of_its_own_classes(cluster, capsys, tmp_path):
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "language", "--file",
                         job_file(tmp_path, priorityClass="gpucluster-high"), "--json", sleep=lambda _: None, now=NOW)
    assert code == 0, err
    (job,) = cluster.objects("MPIJob")
    assert job["metadata"]["labels"][queueing.PRIORITY_LABEL] == "gpucluster-high" == json.loads(out)["priorityClass"]


def test_a_stack_job_must_be_the_team_s_already(cluster, capsys):
    code, _, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "gpt-pretrain", sleep=lambda _: None)
    assert code == 2
    assert ("job 'gpt-pretrain' is not team vision's: it runs in namespace training (gpucluster:jobs[1].team: none); "
            "set its team and `pulumi up`, or submit it as a job file with --team vision") in err


def test_a_team_without_a_budget_is_not_checked(cluster, capsys, tmp_path, monkeypatch, prometheus):
    real = stackfile.load_stack
    raw = stackfile.read_stack_config("prod")
    teams = [{k: v for k, v in t.items() if k != "monthlyBudgetUsd"} for t in json.loads(raw["gpucluster:teams"])]

    def load_stack(stack, *args, overrides=None, **kwargs):
        return real(stack, *args, overrides={"gpucluster:teams": teams, **(overrides or {})}, **kwargs)

    monkeypatch.setattr(stackfile, "load_stack", load_stack)
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path, maxCostUsd=None),
                       "--json", sleep=lambda _: None, now=NOW)
    assert code == 0 and json.loads(out)["budget"] is None and prometheus.asked == []


def test_jobs_a_team_runs_or_queues_hold_their_worst_case_against_the_budget(cluster, capsys, tmp_path):
    """The issue: a team at $0 submitting job after job, each bounded at $100k, against $150k."""
    bound = int(100000 / P5 * 3600)
    first = job_file(tmp_path, maxCostUsd=100000)
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "language", "--file", first, sleep=lambda _: None,
                         now=NOW)
    assert code == 0, err
    assert out.splitlines()[1] == ("budget: team language has spent $0.00 of $150,000.00 this month; this job's worst "
                                   "case $99,999.99 leaves $50,000.01")
    second = tmp_path / "second"
    second.mkdir()
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "language", "--file",
                         job_file(second, name="sweep-2", maxCostUsd=100000), sleep=lambda _: None, now=NOW)
    assert (code, out) == (1, "")
    assert err == ("python -m bootstrap submit: error: not submitted: team language has spent $0.00 this month (since "
                   "2026-12-01 UTC), is committed by 1 unfinished job: $99,999.99, and job 'sweep-2' may cost up to "
                   "$99,999.99 more: $199,999.98, over its monthly budget of $150,000.00. Either lower the job's bound "
                   "(maxCostUsd, runPolicy.activeDeadlineSeconds) or its nodes, cancel what can wait, or raise "
                   "teams[].monthlyBudgetUsd and `pulumi up`, or, as an admin, submit anyway with --over-budget\n")
    assert [j["metadata"]["name"] for j in cluster.objects("MPIJob")] == ["sweep-1"]
    # Kueue admits the first an hour ago, after 600 s of an earlier admission: that much of its bound is used.
    (wl,) = cluster.objects("Workload")
    wl["spec"]["maximumExecutionTimeSeconds"] = bound
    wl["status"] = {"accumulatedPastExecutionTimeSeconds": 600, "conditions": [
        {"type": t, "status": "True", "reason": t, "lastTransitionTime": "2026-12-05T11:00:00Z"}
        for t in ("QuotaReserved", "Admitted")]}
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "language", "--file",
                       job_file(second, name="sweep-2", maxCostUsd=1000), "--json", sleep=lambda _: None, now=NOW)
    report = json.loads(out)["budget"]
    left = bound - 600 - 3600
    assert code == 0 and report["committed"] == {"jobs": 1, "usd": round(P5 * left / 3600, 2), "unbounded": [], "items": [
        {"job": "sweep-1", "workload": "mpijob-sweep-1-1a2b3", "count": 1, "unit": "node", "pricePerHour": P5,
         "remainingSeconds": left, "usd": round(P5 * left / 3600, 2)}]}
    assert report["afterUsd"] == round(P5 * left / 3600 + P5 * SWEEP_BOUND / 3600, 2)
    lists = {r.path for r in cluster.requests if r.method == "GET" and r.path.endswith(("/workloads", "/mpijobs"))}
    assert lists == {"/apis/kueue.x-k8s.io/v1beta2/namespaces/language/workloads",
                     "/apis/kubeflow.org/v2beta1/namespaces/language/mpijobs"}  # the team's namespace only


def test_an_unbounded_job_the_team_runs_refuses_its_next_and_shows_in_status(cluster, capsys, tmp_path):
    cluster.add(kueue_workload("job-notebook-7c1f2", gpus=1))  # a member's batch Job, 1 GPU, no bound
    code, _, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       sleep=lambda _: None, now=NOW)
    assert code == 1 and cluster.objects("MPIJob") == []
    assert err == ("python -m bootstrap submit: error: not submitted: team vision has a monthly budget of $150,000.00 "
                   "and its unfinished job 'job-notebook-7c1f2' has no bound, so what they may still cost is unlimited "
                   "(committed by 1 unfinished job: unlimited). Either cancel the unfinished jobs with no bound "
                   "(`python -m bootstrap cancel JOB --team vision`) or wait until they finish, or, as an admin, "
                   "submit anyway with --over-budget\n")
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", now=NOW)
    assert code == 0 and out.splitlines()[-1].endswith(
        "$137,654.33 left; committed by 1 unfinished job: unlimited (job-notebook-7c1f2 unbounded)")
    code, out, _ = run(status, capsys, "--team", "vision", "--json", now=NOW)  # no stack: no prices
    assert json.loads(out)["committed"] is None


ADMIN_ONLY = {"verb": "create", "group": "kueue.x-k8s.io", "resource": "clusterqueues"}


def test_over_budget_is_for_the_cluster_s_admins_as_the_api_server_says(cluster, capsys, tmp_path, prometheus):
    prometheus.usd["vision"] = 149500.0
    cluster.authorize = lambda attributes: False  # a member: their Role names no ClusterQueue
    code, out, err = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                         "--over-budget", sleep=lambda _: None, now=NOW)
    assert (code, out) == (1, "") and cluster.objects("MPIJob") == [] and cluster.objects("ConfigMap") == []
    assert err == ("python -m bootstrap submit: error: not submitted: --over-budget is for the cluster's admins, and the "
                   "API server says you may not create clusterqueues.kueue.x-k8s.io: team vision has spent "
                   "$149,500.00 this month (since 2026-12-01 UTC) and job 'sweep-1' may cost up to $999.99 more: "
                   "$150,499.99, over its monthly budget of $150,000.00. Either lower the job's bound (maxCostUsd, "
                   "runPolicy.activeDeadlineSeconds) or its nodes, cancel what can wait, or raise "
                   "teams[].monthlyBudgetUsd and `pulumi up`, or ask an admin to submit it with --over-budget\n")
    (review,) = [r for r in cluster.requests if "selfsubjectaccessreviews" in r.path]
    assert (review.method, review.path) == ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert review.body == {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                           "spec": {"resourceAttributes": ADMIN_ONLY}}
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       "--over-budget", "--json", sleep=lambda _: None, now=NOW)
    refused = json.loads(out)
    assert code == 1 and refused["submitted"] is False
    assert (refused["budget"]["overBudget"], refused["budget"]["overBudgetDenied"]) == (False, True)
    assert cli.run(["submit", "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                    "--over-budget"]) == 1
    cluster.authorize = lambda attributes: attributes == ADMIN_ONLY  # an admin
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       "--over-budget", sleep=lambda _: None, now=NOW)
    assert code == 0 and out.startswith("OVER BUDGET: submitted anyway") and len(cluster.objects("MPIJob")) == 1


def test_over_budget_a_job_does_not_need_asks_nothing(cluster, capsys, tmp_path):
    cluster.authorize = lambda attributes: False
    code, out, _ = run(submit, capsys, "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path),
                       "--over-budget", sleep=lambda _: None, now=NOW)
    assert code == 0 and out.splitlines()[1].startswith("budget: team vision has spent $12,345.67")
    assert not [r for r in cluster.requests if "selfsubjectaccessreviews" in r.path]


# -- status --team ------------------------------------------------------------------------------------------


def submitted(cluster, capsys, tmp_path, team: str = "vision") -> None:
    assert run(submit, capsys, "--stack", "prod", "--team", team, "--file", job_file(tmp_path),
               "--over-budget", sleep=lambda _: None, now=NOW)[0] == 0


def test_status_team_lists_its_jobs_and_its_spend_against_the_budget(cluster, capsys, tmp_path):
    submitted(cluster, capsys, tmp_path)
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", "--json", now=NOW)
    report = json.loads(out)
    assert code == 0
    assert [j["name"] for j in report["jobs"]] == ["sweep-1"] and report["jobs"][0]["phase"] == "Queued"
    assert {k: v for k, v in report.items() if k != "jobs"} == {
        "team": "vision", "namespace": "vision", "budgetUsd": 150000.0,
        "spend": {"usd": 12345.67, "gpuHours": 100.0, "since": "2026-12-01T00:00:00+00:00",
                  "at": "2026-12-05T12:00:00+00:00", "partial": None},
        "spendUnknown": None, "usedShare": 0.0823, "leftUsd": 137654.33,
        "committed": {"jobs": 1, "usd": 999.99, "unbounded": [], "items": [  # queued: its whole bound ahead
            {"job": "sweep-1", "workload": "mpijob-sweep-1-1a2b3", "count": 1, "unit": "node", "pricePerHour": P5,
             "remainingSeconds": SWEEP_BOUND, "usd": 999.99}]}}
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", now=NOW)
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["JOB", "KIND", "PHASE"] and lines[1].split()[:3] == ["sweep-1", "MPIJob", "Queued"]
    assert lines[-1] == ("team vision (namespace vision): spent $12,345.67 this month (since 2026-12-01 UTC), 100.0 "
                         "GPU-hours; budget $150,000.00: 8.2% used, $137,654.33 left; committed by 1 unfinished job: "
                         "$999.99")


def test_status_team_without_prometheus_still_lists_the_jobs(cluster, capsys, tmp_path):
    submitted(cluster, capsys, tmp_path)
    cluster.prometheus = lambda q, at: (503, {"kind": "Status", "status": "Failure", "code": 503,
                                              "reason": "ServiceUnavailable",
                                              "message": 'no endpoints available for service "kps-prometheus"'})
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", now=NOW)
    assert code == 2  # the spend could not be read
    assert out.splitlines()[1].startswith("sweep-1")
    assert out.splitlines()[-1] == (
        "team vision (namespace vision): spend this month unknown: Prometheus through the API server's proxy to "
        "service monitoring/kps-prometheus: the API server said 503 Service Unavailable: no endpoints available for "
        'service "kps-prometheus"; committed by 1 unfinished job: $999.99')
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", "--json", now=NOW)
    report = json.loads(out)
    assert code == 2 and report["spend"] is None and report["spendUnknown"].endswith('service "kps-prometheus"')
    assert [j["name"] for j in report["jobs"]] == ["sweep-1"]


def test_status_team_at_its_budget_is_a_problem_found(cluster, capsys, prometheus, prometheus_server):
    prometheus.usd["vision"] = 150000.0
    code, out, _ = run(status, capsys, "--stack", "prod", "--team", "vision", "--prometheus-url",
                       url_of(prometheus_server), now=NOW)
    assert code == 1 and "budget $150,000.00: 100.0% used, $0.00 left" in out
    assert not [r for r in cluster.requests if "proxy" in r.path]


def test_status_team_arguments(cluster, capsys):
    assert run(status, capsys, "--stack", "prod", "--team", "nope", now=NOW)[2] == (
        "python -m bootstrap status: error: no team 'nope' in stack prod; its teams: vision, language\n")
    code, _, err = run(status, capsys, "--stack", "prod", "--team", "vision", "--namespace", "training", now=NOW)
    assert code == 2 and "--namespace training is not team vision's (vision); give one of them" in err
    code, out, _ = run(status, capsys, "--team", "vision", "--json", now=NOW)  # without a stack: no budget
    assert code == 0 and json.loads(out)["budgetUsd"] is None and json.loads(out)["spend"]["usd"] == 12345.67


def test_status_without_team_is_as_before(cluster, capsys):
    code, out, _ = run(status, capsys, "--stack", "prod", "--json", now=NOW)
    assert (code, json.loads(out)) == (0, [])
    assert not [r for r in cluster.requests if "proxy" in r.path]


def test_exit_codes_through_the_cli_entry(cluster, capsys, tmp_path, prometheus):
    prometheus.usd["vision"] = 149500.0
    assert cli.run(["submit", "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path)]) == 1
    assert cli.run(["status", "--stack", "prod", "--team", "vision"]) == 0
    prometheus.usd["vision"] = None  # no series: spend unknown
    assert cli.run(["submit", "--stack", "prod", "--team", "vision", "--file", job_file(tmp_path)]) == 2
    assert cli.run(["status", "--stack", "prod", "--team", "vision"]) == 2
    capsys.readouterr()
