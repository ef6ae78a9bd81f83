"""The goodput alerts (components/core/observability/goodput_alerts.py): their contract with the remediation
controller (names, reasons, the labels it acts on), thresholds from the stack, only series our exporters
emit; and, when a promtool is at hand, each alert firing on the node or job it should and on no other, on
synthetic dcgm-exporter, kube-state-metrics, EFA and job series (Prometheus' own rule unit tester).
"""

from __future__ import annotations

import json

from components.core.goodput import names
from components.core.observability import alerts, goodput_alerts, metrics
from components.core.observability import prometheus_stack as ps
from tests import k8s
from tests.conftest import stack_config, stack_raw
from tests.test_observability import check_query, efa_port_counters
from tests.test_spend import needs_promtool, promtool_test

GA = goodput_alerts


def by_name(cfg) -> dict[str, dict]:
    return {r["alert"]: r for r in GA.alert_rules(cfg)}


def with_goodput(stack: str, **goodput) -> object:
    raw = stack_raw(stack)
    obs = raw.get("gpucluster:observability") or {}
    obs = json.loads(obs) if isinstance(obs, str) else dict(obs)
    return stack_config(stack, {"gpucluster:observability": {**obs, "goodput": goodput}})


# -- the contract with the controller ---------------------------------------------------------------------


def test_the_remediable_alerts_and_the_reasons_the_controller_records():
    assert GA.REMEDIABLE_ALERTS == {"NcclOnSockets": "nccl-on-sockets", "JobStraggler": "straggler",
                                    "JobGpuXidNeedsNodeReplacement": "xid"}
    assert set(GA.REMEDIABLE_ALERTS.values()) == set(names.REASONS) - {names.REASON_PRE_STEP}
    rules = by_name(stack_config("prod"))
    assert set(GA.REMEDIABLE_ALERTS) < set(rules) and "JobNoProgress" not in GA.REMEDIABLE_ALERTS


def test_prod_gets_the_four_alerts_and_dev_all_but_nccl_on_sockets_with_their_for_and_severity():
    def summary(cfg):
        return {n: (r.get("for"), r["labels"]) for n, r in by_name(cfg).items()}

    assert summary(stack_config("prod")) == {
        "NcclOnSockets": ("5m", {"severity": "critical"}), "JobStraggler": ("10m", {"severity": "warning"}),
        "JobGpuXidNeedsNodeReplacement": (None, {"severity": "critical"}),
        "JobNoProgress": ("18m", {"severity": "warning"})}  # 20 minutes: a 2-minute window, then 18 more
    # dev's pool (g6e.xlarge) has no EFA: nothing to be flat.
    assert list(summary(stack_config("dev"))) == ["JobStraggler", "JobGpuXidNeedsNodeReplacement", "JobNoProgress"]
    # In the PrometheusRule, at the end of the alerts group.
    rule = alerts.prometheus_rule(stack_config("prod"), ps.NAMESPACE)
    k8s.validate_custom(rule, "monitoring.coreos.com_prometheusrules.yaml")
    group = next(g for g in rule["spec"]["groups"] if g["name"] == "gpucluster.alerts")
    assert [r["alert"] for r in group["rules"]][-4:] == list(summary(stack_config("prod")))


def test_thresholds_come_from_the_stack():
    cfg = with_goodput("prod", noProgressMinutes=45, stragglerRatio=0.7)
    rules = by_name(cfg)
    assert rules["JobNoProgress"]["for"] == "43m"
    assert rules["JobNoProgress"]["annotations"]["summary"] == (
        "Job {{ $labels.namespace }}/{{ $labels.gpucluster_job }} has counted no step for 45 minutes")
    straggler = rules["JobStraggler"]["expr"]
    assert "< on (namespace, gpucluster_job) group_left () (0.7 * (quantile by (namespace, gpucluster_job) (0.5, " \
           in straggler and straggler.count("/ 0.7), ") == 1 and "0.8" not in straggler
    assert "under 70% of the job's median" in rules["JobStraggler"]["annotations"]["runbook"]
    # The shortest setting: the window alone, no `for`.
    assert "for" not in by_name(with_goodput("dev", noProgressMinutes=2))["JobNoProgress"]


def test_nccl_on_sockets_watches_the_efa_pools_only():
    assert 'kube_node_labels{label_gpucluster_io_pool=~"h100"}' in by_name(stack_config("prod"))["NcclOnSockets"][
        "expr"]
    pools = json.loads(stack_raw("prod")["gpucluster:gpuPools"])
    off = stack_config("prod", {"gpucluster:gpuPools": [{**pools[0], "efa": "disabled", "fabricTest": False}]})
    assert GA.efa_pools(off) == [] and "NcclOnSockets" not in by_name(off)
    # Traffic only: the driver's byte counters, send/receive and RDMA.
    expr = by_name(stack_config("prod"))["NcclOnSockets"]["expr"]
    assert 'counter=~"tx_bytes|rx_bytes|rdma_read_bytes|rdma_write_bytes"' in expr
    assert {"tx_bytes", "rx_bytes", "rdma_read_bytes", "rdma_write_bytes"} <= efa_port_counters()


def test_the_job_scoped_xid_alert_reads_the_node_alert_s_xids_fresh_only():
    rules = {r["alert"]: r for r in alerts.alert_rules(stack_config("dev"))}
    # The node alert (the operator's): any fatal XID in the last 6 hours, unchanged by the job alert's fix.
    assert rules["GpuXidNeedsNodeReplacement"]["expr"] == f"max by (node, gpu) ({GA.xids_over_time()})"
    assert GA.xids_over_time() == f"max_over_time(({GA.fatal_xids()})[6h:1m])"
    # The job alert (the controller's): a change to a fatal XID within 2 minutes, held 10 minutes.
    assert rules["JobGpuXidNeedsNodeReplacement"]["expr"] == (
        "(gpucluster:job_node:info * on (node) group_left () max by (node) (max_over_time(((" + GA.fatal_xids()
        + ") and changes(DCGM_FI_DEV_XID_ERRORS[2m]) > 0)[10m:1m])))")
    assert GA.fatal_xids().count("DCGM_FI_DEV_XID_ERRORS == ") == len(metrics.XIDS_REPLACE_NODE) == 15


def test_every_expression_parses_and_names_only_emitted_series():
    assert "gpucluster_job_steps_total" in metrics.JOB_METRICS
    exprs = [r["expr"] for s in ("prod", "dev") for r in GA.alert_rules(stack_config(s))]
    assert len(exprs) == 7 and [p for e in exprs for p in check_query(e)] == []


def test_runbooks_are_one_line_and_say_what_the_controller_does():
    rules = by_name(stack_config("prod"))
    for name, rule in rules.items():
        runbook = rule["annotations"]["runbook"]
        assert "\n" not in runbook and rule["annotations"]["summary"]
        assert ("the goodput controller quarantines {{ $labels.node }}" in runbook) == (name in GA.REMEDIABLE_ALERTS)
    assert rules["JobNoProgress"]["annotations"]["runbook"].startswith("Not remediated: no node is to blame")


# -- Prometheus' own unit tester --------------------------------------------------------------------------

MINUTES = 40
REST = {"severity", "alertname"}


def node_labels(node: str, pool: str = "h100") -> dict:
    return {"series": f'kube_node_labels{{node="{node}", label_gpucluster_io_pool="{pool}", '
                      f'label_node_kubernetes_io_instance_type="p5.48xlarge"}}', "values": f"1x{MINUTES}"}


PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def pod(job: str, name: str, node: str, ns: str = "training", phase: str = "Running") -> list[dict]:
    """A pod's kube-state-metrics series: kube_pod_status_phase for every phase, 1 for its own, 0 for the rest."""
    base = f'namespace="{ns}", pod="{name}", uid="{ns}-{name}"'
    return [{"series": f'kube_pod_labels{{{base}, label_gpucluster_io_job="{job}"}}', "values": f"1x{MINUTES}"},
            {"series": f'kube_pod_info{{{base}, node="{node}"}}', "values": f"1x{MINUTES}"},
            *({"series": f'kube_pod_status_phase{{{base}, phase="{p}"}}', "values": f"{int(p == phase)}x{MINUTES}"}
              for p in PHASES)]


def gpus(node: str, util: str, pod_: str = "", ns: str = "training", count: int = 2) -> list[dict]:
    """dcgm-exporter's series of a node's GPUs, each with the pod holding it (its Kubernetes attribution)."""
    held = f', namespace="{ns}", pod="{pod_}", container="worker"' if pod_ else ""
    return [{"series": f'DCGM_FI_DEV_GPU_UTIL{{node="{node}", gpu="{i}"{held}}}', "values": util}
            for i in range(count)]


def efa(node: str, values: str) -> list[dict]:
    return [{"series": f'{metrics.EFA_COUNTER}{{node="{node}", device="rdmap16s27", port="1", counter="{c}"}}',
             "values": values} for c in ("tx_bytes", "rx_bytes", "rdma_write_bytes")]


def job(name: str, nodes: dict[str, int | str], ns: str = "training", pool: str = "h100") -> list[dict]:
    """A job with one worker pod per node, each node's GPUs at its utilisation (a number: all along)."""
    series = []
    for i, (node, util) in enumerate(nodes.items()):
        values = util if isinstance(util, str) else f"{util}x{MINUTES}"
        series += [node_labels(node, pool), *pod(name, f"{name}-worker-{i}", node, ns),
                   *gpus(node, values, f"{name}-worker-{i}", ns)]
    return series


def render(text: str, labels: dict[str, str], value: str) -> str:
    for key, label in labels.items():
        text = text.replace(f"{{{{ $labels.{key} }}}}", label)
    return text.replace("{{ $value | humanize }}", value).replace("{{ $value }}", value)


def fired(rule: dict, value: str, **labels: str) -> dict:
    """What promtool must see of `rule` firing with these labels and value."""
    return {"exp_labels": {**rule["labels"], **labels},
            "exp_annotations": {k: render(v, labels, value) for k, v in rule["annotations"].items()}}


def run(tmp_path, cfg, rules: list[dict], series: list[dict], checks: list[dict], exprs: list[dict] = ()):
    records = next(g for g in alerts.prometheus_rule(cfg, ps.NAMESPACE)["spec"]["groups"]
                   if g["name"] == "gpucluster.records")
    done = promtool_test(tmp_path, [records, {"name": "goodput", "rules": rules}], [
        {"interval": "1m", "input_series": series, "alert_rule_test": checks, "promql_expr_test": list(exprs)}])
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_promtool_nccl_on_sockets_names_the_busy_efa_node_whose_counters_went_flat(tmp_path):
    cfg = stack_config("prod")
    rule = by_name(cfg)["NcclOnSockets"]
    rising, flat = f"0+1000000x{MINUTES}", f"5000x{MINUTES}"
    series = [
        # llm: both nodes busy; n2's EFA traffic stops at minute 20 (NCCL fell back to sockets).
        *job("llm", {"n1": 90, "n2": 90}), *efa("n1", rising), *efa("n2", f"0+1000000x20 20000000x{MINUTES - 20}"),
        # An MPIJob's launcher on a system node: the job still has one GPU node, which talks over NVLink.
        *job("mpi", {"n3": 90}), *pod("mpi", "mpi-launcher", "sys1"), *efa("n3", flat),
        *job("idle", {"n4": 3, "n5": 3}), *efa("n4", flat), *efa("n5", flat),  # JobGpusIdle's, not this
        *job("l4", {"n6": 90, "n7": 90}, pool="l4"), *efa("n6", flat), *efa("n7", flat),  # not an EFA pool
        # n9's counters are missing (its exporter is down): no evidence, no blame.
        *job("blind", {"n8": 90, "n9": 90}), *efa("n8", rising),
        # Error counters rising are not traffic.
        {"series": f'{metrics.EFA_COUNTER}{{node="n2", device="rdmap16s27", port="1", counter="rx_drops"}}',
         "values": f"0+5x{MINUTES}"},
        # Every node of the job flat all along (an image without aws-ofi-nccl, or a `launcher: ps` job's gRPC),
        # or all going flat together at minute 20: the job's setup, not a node's (doctor's nccl-socket-fallback).
        *job("sockets", {"n10": 90, "n11": 90, "n12": 90}), *efa("n10", flat), *efa("n11", flat), *efa("n12", flat),
        *job("together", {"n13": 90, "n14": 90}), *efa("n13", f"0+1000000x20 20000000x{MINUTES - 20}"),
        *efa("n14", f"0+1000000x20 20000000x{MINUTES - 20}"),
        # A finished job's pods stay, Succeeded, on nodes now another's: n15 runs a one-node job (busy, no EFA),
        # n16 a job of its own with EFA traffic. The finished job is on neither.
        *pod("done", "done-worker-0", "n15", phase="Succeeded"), *pod("done", "done-worker-1", "n16",
                                                                       phase="Succeeded"),
        *job("solo", {"n15": 90}), *efa("n15", flat), *job("next", {"n16": 90, "n17": 90}), *efa("n16", rising),
        *efa("n17", rising),
        # A second kube-state-metrics replica (a rolling update) reports llm's pod on n2 again.
        {"series": 'kube_pod_info{namespace="training", pod="llm-worker-1", uid="training-llm-worker-1", node="n2", '
                   'instance="10.0.9.9:8080"}', "values": f"1x{MINUTES}"},
    ]
    # Flat from minute 20: the 5-minute rate is 0 from minute 24 (its window (19, 24]), firing 5 minutes on.
    run(tmp_path, cfg, [rule], series, [
        {"eval_time": "10m", "alertname": "NcclOnSockets", "exp_alerts": []},
        {"eval_time": "22m", "alertname": "NcclOnSockets", "exp_alerts": []},
        {"eval_time": "28m", "alertname": "NcclOnSockets", "exp_alerts": []},  # pending
        {"eval_time": "30m", "alertname": "NcclOnSockets", "exp_alerts": [
            fired(rule, "90", namespace="training", node="n2", gpucluster_job="llm")]},
        {"eval_time": "40m", "alertname": "NcclOnSockets", "exp_alerts": [
            fired(rule, "90", namespace="training", node="n2", gpucluster_job="llm")]},
    ])


@needs_promtool
def test_promtool_a_straggler_among_its_peers_by_gpu_utilisation_and_by_step_time(tmp_path):
    cfg = stack_config("prod")
    rule = by_name(cfg)["JobStraggler"]
    steps = []
    for i, seconds in enumerate((1, 1.05, 2)):
        steps.append({"series": f'{GA.STEP_METRIC}{{namespace="training", pod="steps-worker-{i}", '
                                f'instance="10.0.0.{i}:9400", job="training/gpucluster-jobs", container="worker"}}',
                      "values": f"{seconds}x{MINUTES}"})
    series = [
        *job("big", {"n1": 95, "n2": 94, "n3": 96, "n4": 40}),  # median 94.5: n4 under 75.6
        *job("pair", {"n5": 90, "n6": 85}),  # median 87.5: 85 is over 70
        *job("lazy", {"n7": 5, "n8": 5, "n9": 0}),  # idle as a whole: JobGpusIdle's
        *job("steps", {"n10": 90, "n11": 90, "n12": 90}), *steps,  # median 1.05 s: 2 s is over 1.3125
        *job("one", {"n13": 30}),  # its own median
        # Slow for its first 5 minutes only: pending, never firing.
        *job("blip", {"n14": 95, "n15": 95, "n16": f"40x5 95x{MINUTES - 5}"}),
    ]
    both = [fired(rule, "40", namespace="training", node="n4", gpucluster_job="big", signal="gpu-utilisation"),
            fired(rule, "2", namespace="training", node="n12", gpucluster_job="steps", signal="step-time")]
    run(tmp_path, cfg, [rule], series, [
        {"eval_time": "5m", "alertname": "JobStraggler", "exp_alerts": []},
        {"eval_time": "12m", "alertname": "JobStraggler", "exp_alerts": both},
        {"eval_time": "40m", "alertname": "JobStraggler", "exp_alerts": both},
    ], [{"expr": GA.job_node_step_seconds(), "eval_time": "12m", "exp_samples": [
        {"labels": f'{{namespace="training", node="n{10 + i}", gpucluster_job="steps"}}', "value": s}
        for i, s in enumerate((1, 1.05, 2))]}])


@needs_promtool
def test_promtool_a_fresh_fatal_xid_names_the_node_and_each_job_on_it_a_stale_one_the_node_only(tmp_path):
    cfg = stack_config("prod")
    rules = {r["alert"]: r for r in alerts.alert_rules(cfg)}
    node_rule, job_rule = rules["GpuXidNeedsNodeReplacement"], rules["JobGpuXidNeedsNodeReplacement"]

    def xid(node: str, values: str, gpu: int = 0) -> dict:
        return {"series": f'DCGM_FI_DEV_XID_ERRORS{{node="{node}", gpu="{gpu}"}}', "values": values}

    series = [
        # XID 79 (fallen off the bus) on n2's GPU 3 at minute 10, then a harmless 13: it stays fatal for 6 hours.
        *job("llm", {"n1": 90, "n2": 90}), xid("n1", f"0x{MINUTES}"), xid("n2", f"0x9 79 13x{MINUTES - 10}", 3),
        node_labels("n3"), xid("n3", f"0x9 48x{MINUTES - 9}"),  # no job on it: the node alert only
        # Two one-GPU jobs of two teams on one node: one alert each (no many-to-many error).
        node_labels("n4"), *pod("a", "a-worker-0", "n4", "vision"), *pod("b", "b-worker-0", "n4", "language"),
        xid("n4", f"0x9 79x{MINUTES - 9}"),
        *job("ok", {"n5": 90}), xid("n5", f"13x{MINUTES}"),  # not a fatal XID
        # n6 was repaired and put back in service; the gauge still holds its old 79 (no change all along).
        *job("next", {"n6": 90}), xid("n6", f"79x{MINUTES}"),
    ]
    job_alerts = [fired(job_rule, "79", namespace="training", node="n2", gpucluster_job="llm"),
                  fired(job_rule, "79", namespace="vision", node="n4", gpucluster_job="a"),
                  fired(job_rule, "79", namespace="language", node="n4", gpucluster_job="b")]
    node_alerts = [fired(node_rule, "79", node="n2", gpu="3"), fired(node_rule, "48", node="n3", gpu="0"),
                   fired(node_rule, "79", node="n4", gpu="0"), fired(node_rule, "79", node="n6", gpu="0")]
    job_alert = "JobGpuXidNeedsNodeReplacement"
    run(tmp_path, cfg, [node_rule, job_rule], series, [
        {"eval_time": "5m", "alertname": job_alert, "exp_alerts": []},  # n6's stale 79: not fresh
        {"eval_time": "5m", "alertname": "GpuXidNeedsNodeReplacement",
         "exp_alerts": [fired(node_rule, "79", node="n6", gpu="0")]},
        # Fresh at minutes 9-10: n2's 79 fires though a harmless 13 replaced it a minute later.
        {"eval_time": "12m", "alertname": job_alert, "exp_alerts": job_alerts},
        {"eval_time": "18m", "alertname": job_alert, "exp_alerts": job_alerts},
        # 10 minutes on nothing changed: the job alert ends, so an untainted node is not quarantined again;
        # the node alert keeps its 6 hours for the operator.
        {"eval_time": "22m", "alertname": job_alert, "exp_alerts": []},
        {"eval_time": "40m", "alertname": job_alert, "exp_alerts": []},
        {"eval_time": "30m", "alertname": "GpuXidNeedsNodeReplacement", "exp_alerts": node_alerts},
    ])


@needs_promtool
def test_promtool_no_progress_after_no_progress_minutes_not_for_a_slow_or_a_partly_stalled_job(tmp_path):
    cfg = with_goodput("dev", noProgressMinutes=10)
    rule = by_name(cfg)["JobNoProgress"]

    def steps(job_: str, pods: list[str]) -> list[dict]:
        series = []
        for i, values in enumerate(pods):
            name = f"{job_}-worker-{i}"
            series += [*pod(job_, name, f"{job_}-n{i}"),
                       {"series": f'{GA.STEPS_METRIC}{{namespace="training", pod="{name}", instance="10.0.0.{i}:9400", '
                                  'job="training/gpucluster-jobs", container="worker"}', "values": values}]
        return series

    stalled = f"0+10x15 150x{MINUTES - 15}"  # its last step counted at minute 15
    series = [
        *steps("stuck", [stalled, stalled]),
        *steps("slow", [" ".join(str(i // 3) for i in range(MINUTES + 1))]),  # one step every 3 minutes
        *steps("partly", [stalled, f"0+10x{MINUTES}"]),  # one pod still counts: no node-free verdict
    ]
    alert = fired(rule, "0", namespace="training", gpucluster_job="stuck")
    # No increase in (14, 16] first at minute 16; 8 minutes on it fires, 9 after the last step was scraped.
    run(tmp_path, cfg, [rule], series, [
        {"eval_time": "10m", "alertname": "JobNoProgress", "exp_alerts": []},
        {"eval_time": "23m", "alertname": "JobNoProgress", "exp_alerts": []},
        {"eval_time": "24m", "alertname": "JobNoProgress", "exp_alerts": [alert]},
        {"eval_time": "40m", "alertname": "JobNoProgress", "exp_alerts": [alert]},
    ])
