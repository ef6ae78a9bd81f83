"""The remediation controller's decisions (components/core/goodput/remediation.py, pure): which nodes a pre-step
check's verdict or a firing alert blames, what each pool mode does about them, the guards that keep a wrong alert
from draining a pool, and the node patch, job record and Event it writes."""

from __future__ import annotations

import json

import pytest

from components.core.goodput import names
from components.core.goodput import precheck_verdict as pv
from components.core.goodput import remediation as r
from components.core.kube import nodepool, workers
from components.core.observability import goodput_alerts

NOW = 1_790_000_000.0  # 2026-09-21T14:13:20Z
GOOD, BAD, OTHER = "ip-10-0-64-11.ec2.internal", "ip-10-0-64-12.ec2.internal", "ip-10-0-64-13.ec2.internal"
REASONS = dict(goodput_alerts.REMEDIABLE_ALERTS)


def node(name: str, pool: str | None = "h100", taints: list | None = None) -> dict:
    labels = {nodepool.POOL_LABEL: pool} if pool else {}
    return {"metadata": {"name": name, "labels": labels, "resourceVersion": "7"},
            "spec": {"taints": taints if taints is not None else [{"key": "nvidia.com/gpu", "value": "true",
                                                                    "effect": "NoSchedule"}]}}


def tainted(name: str) -> dict:
    return node(name, taints=[{"key": names.QUARANTINE_TAINT_KEY, "value": "xid", "effect": "NoSchedule"}])


def pod(name: str, on: str, job: str = "llm", namespace: str = "training", **extra) -> dict:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {workers.JOB_LABEL: job}, **extra},
            "spec": {"nodeName": on}, "status": {"phase": "Running"}}


# The job's pods running on the nodes the alerts name.
RUNNING = [pod("llm-0", BAD), pod("llm-1", OTHER)]


def job(name: str = "llm", namespace: str = "training", records: list | None = None, kind: str = "TrainJob") -> r.Job:
    annotations = {names.REMEDIATIONS_ANNOTATION: json.dumps(records)} if records is not None else {}
    return r.Job(kind, namespace, name, {"metadata": {"name": name, "namespace": namespace, "uid": "u-1",
                                                      "resourceVersion": "42", "annotations": annotations}})


def jobs(*found: r.Job) -> dict:
    return {(j.namespace, j.name): j for j in found}


def check_message(failed: list[str], passed: list[str]) -> str:
    """The termination message the real check writes (precheck_verdict.message), EFA gone on `failed`."""
    verdicts = {n: pv.verdict(names.VERDICT_FAIL, "efa-missing", "0 of 32 EFA devices") for n in failed}
    verdicts |= {n: pv.verdict(names.VERDICT_PASS, "ok", "32 EFA devices, 8 GPUs") for n in passed}
    return pv.message(verdicts, None, 487.0, 2.4)


def failed_pod(message: str, code: int = names.PRE_STEP_EXIT_CODE, state: str = "state") -> dict:
    out = pod("llm-node-0-0-abcde", GOOD)
    out["status"] = {"phase": "Failed", "containerStatuses": [{"name": "node", state: {"terminated": {
        "exitCode": code, "message": message, "finishedAt": "2026-09-21T14:13:00Z"}}}]}
    return out


def firing(alert: str = goodput_alerts.STRAGGLER, on: str = BAD, state: str = "firing", **labels) -> dict:
    return {"labels": {"alertname": alert, "node": on, "namespace": "training", "gpucluster_job": "llm", **labels},
            "annotations": {"summary": f"{on} slows job training/llm"}, "state": state,
            "activeAt": "2026-09-21T14:00:00Z", "value": "31"}


def alerts(*found: dict) -> dict:
    return {"status": "success", "data": {"alerts": list(found)}}


# -- signals -----------------------------------------------------------------------------------------------


def test_a_failed_pre_step_check_blames_the_nodes_it_judged_fail_and_only_those():
    signals = r.pre_step_signals(failed_pod(check_message([BAD], [GOOD, OTHER])))
    assert [(s.node, s.reason, s.namespace, s.job) for s in signals] == [(BAD, "pre-step-check", "training", "llm")]
    evidence = signals[0].evidence
    assert evidence["verdict"] == {"verdict": "fail", "reason": "efa-missing", "detail": "0 of 32 EFA devices"}
    assert (evidence["pod"], evidence["exitCode"], evidence["expected_gbps"]) == (
        "training/llm-node-0-0-abcde", 86, 487.0)
    assert signals[0].source == "pod training/llm-node-0-0-abcde container node"


def test_the_verdict_counts_in_last_state_too_but_not_with_another_exit_code_or_no_verdict():
    message = check_message([BAD, OTHER], [GOOD])
    assert [s.node for s in r.pre_step_signals(failed_pod(message, state="lastState"))] == [BAD, OTHER]
    assert r.pre_step_signals(failed_pod(message, code=1)) == []  # the job's own failure, not the check's
    assert r.pre_step_signals(failed_pod("Traceback (most recent call last): ...")) == []
    assert r.pre_step_signals(failed_pod(json.dumps({"other": {}}))) == []
    unlabelled = failed_pod(message)
    unlabelled["metadata"]["labels"] = {}
    assert r.pre_step_signals(unlabelled) == []  # not a job's pod


def test_only_firing_alerts_of_ours_with_a_node_namespace_and_job_are_signals():
    found = r.alert_signals(alerts(
        firing(), firing(state="pending"), firing("GpuXidNeedsNodeReplacement"), firing(goodput_alerts.NO_PROGRESS),
        firing(goodput_alerts.XID, on=OTHER), {**firing(goodput_alerts.NCCL_ON_SOCKETS), "labels": {
            "alertname": goodput_alerts.NCCL_ON_SOCKETS, "node": GOOD, "namespace": "training"}}), REASONS)
    assert [(s.node, s.reason, s.source) for s in found] == [(BAD, "straggler", "alert JobStraggler"),
                                                             (OTHER, "xid", "alert JobGpuXidNeedsNodeReplacement")]
    assert found[0].evidence["activeAt"] == "2026-09-21T14:00:00Z" and found[0].evidence["value"] == "31"
    assert r.alert_signals({}, REASONS) == [] and r.alert_signals(alerts(firing()), {}) == []


def test_the_alerts_the_controller_acts_on_are_h1_s_three_node_alerts_with_names_reasons():
    assert REASONS == {"NcclOnSockets": names.REASON_NCCL_ON_SOCKETS, "JobStraggler": names.REASON_STRAGGLER,
                       "JobGpuXidNeedsNodeReplacement": names.REASON_XID}


# -- decisions ---------------------------------------------------------------------------------------------


def pool(n: int = 16, taint: int = 0) -> list[dict]:
    names_ = [BAD, GOOD, OTHER] + [f"ip-10-0-65-{i}.ec2.internal" for i in range(n - 3)]
    return [tainted(x) if i >= n - taint else node(x) for i, x in enumerate(names_[:n])]


def straggler(on: str = BAD, **labels) -> list[r.Signal]:
    return r.alert_signals(alerts(firing(on=on, **labels)), REASONS)


def test_on_quarantines_the_node_and_deletes_only_the_job_s_live_pods_there():
    pods = [pod("llm-0", BAD), pod("llm-1", GOOD), pod("other-0", BAD, job="other"),
            pod("llm-old", BAD, deletionTimestamp="2026-09-21T14:13:00Z"), pod("llm-team", BAD, namespace="vision")]
    actions, skips = r.decide(straggler(), jobs(job()), pool(), pods, {"h100": "on"}, NOW)
    assert skips == []
    (action,) = actions
    assert (action.action, action.mode, action.quarantine_node, action.delete_pods) == ("quarantined", "on", True,
                                                                                         ["llm-0"])
    assert action.record == {"at": "2026-09-21T14:13:20Z", "node": BAD, "reason": "straggler", "action": "quarantined",
                             "mode": "on", "evidence": {"source": "alert JobStraggler", **straggler()[0].evidence}}


def test_dry_run_records_would_quarantine_and_touches_neither_node_nor_pods():
    (action,), _ = r.decide(straggler(), jobs(job()), pool(), [pod("llm-0", BAD)], {"h100": "dry-run"}, NOW)
    assert (action.action, action.quarantine_node, action.delete_pods) == ("would-quarantine", False, [])
    assert action.record["mode"] == "dry-run"


def test_off_or_a_node_without_a_pool_does_nothing():
    for modes, nodes in (({"h100": "off"}, pool()), ({}, pool()), ({"h100": "on"}, [node(BAD, pool=None)])):
        actions, (skip,) = r.decide(straggler(), jobs(job()), nodes, [], modes, NOW)
        assert actions == [] and skip.quiet and "remediation off" in skip.why


def test_one_record_per_node_and_reason_on_a_job_and_once_per_pass():
    done = [{"at": "2026-09-21T10:00:00Z", "node": BAD, "reason": "straggler", "action": "quarantined"}]
    actions, (skip,) = r.decide(straggler(), jobs(job(records=done)), pool(), [], {"h100": "on"}, NOW)
    assert actions == [] and skip.why == "already recorded on the job" and skip.quiet
    # The same node for another reason is another record (past the job's alert window).
    actions, _ = r.decide(r.alert_signals(alerts(firing(goodput_alerts.XID)), REASONS), jobs(job(records=done)),
                          pool(), RUNNING, {"h100": "on"}, NOW)
    assert [a.signal.reason for a in actions] == ["xid"]
    # Every pod of a gang says the same verdict: one action.
    message = check_message([BAD], [GOOD])
    signals = [*r.pre_step_signals(failed_pod(message)), *r.pre_step_signals(failed_pod(message))]
    actions, skips = r.decide(signals, jobs(job()), pool(), [], {"h100": "on"}, NOW)
    assert len(actions) == 1 and [s.why for s in skips] == ["already recorded on the job"]


def test_a_node_already_quarantined_is_not_patched_again_but_another_job_on_it_still_restarts():
    nodes = [tainted(BAD), *pool()[1:]]
    (action,), _ = r.decide(straggler(), jobs(job()), nodes, [pod("llm-0", BAD)], {"h100": "on"}, NOW)
    assert (action.quarantine_node, action.delete_pods, action.action) == (False, ["llm-0"], "quarantined")


def test_at_most_a_quarter_of_a_pool_is_quarantined_and_at_least_one_node_may_be():
    assert [r.pool_limit(n) for n in (1, 2, 3, 4, 7, 8, 16)] == [1, 1, 1, 1, 1, 2, 4]
    actions, (skip,) = r.decide(straggler(), jobs(job()), pool(16, taint=4), RUNNING, {"h100": "on"}, NOW)
    assert actions == [] and skip.why == "pool h100: 4 of 16 nodes quarantined already, at most 4 (25%)"
    assert not skip.quiet
    actions, _ = r.decide(straggler(), jobs(job()), pool(16, taint=3), RUNNING, {"h100": "on"}, NOW)
    assert len(actions) == 1
    # A pool scaled to a job's two nodes may lose one, not both (two nodes both slow in their pair: the first by
    # name goes; the check of the next start, on its replacement, tells whether the other is bad too).
    message = check_message([BAD, GOOD], [])
    actions, (skip,) = r.decide(r.pre_step_signals(failed_pod(message)), jobs(job()), pool(2), [], {"h100": "on"}, NOW)
    assert [a.signal.node for a in actions] == [GOOD] and skip.signal.node == BAD
    assert skip.why == "pool h100: 1 of 2 nodes quarantined already, at most 1 (25%)"
    # A pool scaled from zero to a few of its 16 nodes: the cap is a quarter of maxNodes, not of the nodes up now.
    actions, skips = r.decide(r.pre_step_signals(failed_pod(message)), jobs(job()), pool(2), [], {"h100": "on"},
                              NOW, {"h100": 16})
    assert sorted(a.signal.node for a in actions) == sorted([BAD, GOOD]) and skips == []
    # dry-run changes nothing, so it is never capped.
    actions, skips = r.decide(straggler(), jobs(job()), pool(16, taint=4), RUNNING, {"h100": "dry-run"}, NOW)
    assert [a.action for a in actions] == ["would-quarantine"] and skips == []


def test_alerts_remediate_one_node_per_job_per_ten_minutes_and_the_pre_step_check_is_exempt():
    two = r.alert_signals(alerts(firing(on=BAD), firing(on=OTHER)), REASONS)
    actions, (skip,) = r.decide(two, jobs(job()), pool(), RUNNING, {"h100": "on"}, NOW)
    assert [a.signal.node for a in actions] == [BAD]
    assert skip.why == ("job training/llm had a node remediated at 2026-09-21T14:13:20Z: at most one per job per "
                        "10 minutes for alerts")
    recent = [{"at": r.rfc3339(NOW - 599), "node": GOOD, "reason": "pre-step-check", "action": "quarantined"}]
    assert r.decide(straggler(), jobs(job(records=recent)), pool(), RUNNING, {"h100": "on"}, NOW)[0] == []
    old = [{**recent[0], "at": r.rfc3339(NOW - 600)}]
    assert len(r.decide(straggler(), jobs(job(records=old)), pool(), RUNNING, {"h100": "on"}, NOW)[0]) == 1
    # The pre-step check names every failed node at once, before any step: all of them, within the pool's share.
    message = check_message([BAD, OTHER], [GOOD])
    actions, skips = r.decide(r.pre_step_signals(failed_pod(message)), jobs(job(records=recent)), pool(), [],
                              {"h100": "on"}, NOW)
    assert [a.signal.node for a in actions] == [BAD, OTHER] and skips == []


def test_an_alert_about_a_node_the_job_no_longer_runs_on_is_not_acted_on():
    # A finished job's pods stay Succeeded on nodes now another job's; a restarted one's ran elsewhere since.
    finished = pod("llm-0", BAD)
    finished["status"]["phase"] = "Succeeded"
    for pods in ([finished], [pod("llm-0", GOOD)], [pod("llm-0", BAD, job="other")],
                 [pod("llm-0", BAD, deletionTimestamp="2026-09-21T14:13:00Z")], []):
        actions, (skip,) = r.decide(straggler(), jobs(job()), pool(), pods, {"h100": "on"}, NOW)
        assert actions == [] and skip.why == f"no running pod of job training/llm on {BAD} now", pods
    (action,), _ = r.decide(straggler(), jobs(job()), pool(), [pod("llm-0", BAD)], {"h100": "dry-run"}, NOW)
    assert action.action == "would-quarantine"


def test_a_job_or_node_that_is_gone_is_skipped_quietly():
    actions, (skip,) = r.decide(straggler(), {}, pool(), [], {"h100": "on"}, NOW)
    assert actions == [] and skip.why == "job training/llm not found" and skip.quiet
    actions, (skip,) = r.decide(straggler(on="gone"), jobs(job()), pool(), [], {"h100": "on"}, NOW)
    assert actions == [] and skip.why == "node gone not found"


# -- what is written ---------------------------------------------------------------------------------------


def acted(mode: str = "on") -> r.Action:
    (action,), _ = r.decide(straggler(), jobs(job()), pool(), [pod("llm-0", BAD)], {"h100": mode}, NOW)
    return action


def test_the_node_patch_adds_the_taint_to_the_others_cordons_and_keeps_the_evidence():
    patch = r.node_patch(node(BAD), acted())
    assert patch["metadata"]["resourceVersion"] == "7"  # conditional: a concurrent taint change fails it (409)
    assert patch["spec"] == {"unschedulable": True, "taints": [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
        {"key": "gpucluster.io/quarantine", "value": "straggler", "effect": "NoSchedule",
         "timeAdded": "2026-09-21T14:13:20Z"}]}
    evidence = json.loads(patch["metadata"]["annotations"]["gpucluster.io/quarantine-evidence"])
    assert (evidence["reason"], evidence["job"], evidence["namespace"], evidence["at"]) == (
        "straggler", "llm", "training", "2026-09-21T14:13:20Z")
    assert evidence["evidence"]["alert"] == "JobStraggler"


def test_the_job_patch_appends_the_record_to_those_there():
    before = {"metadata": {"resourceVersion": "42", "annotations": {names.REMEDIATIONS_ANNOTATION: json.dumps(
        [{"node": OTHER, "reason": "xid"}])}}}
    patch = r.job_patch(before, acted().record)
    assert patch["metadata"]["resourceVersion"] == "42"
    assert [x["node"] for x in json.loads(patch["metadata"]["annotations"]["gpucluster.io/remediations"])] == [
        OTHER, BAD]


@pytest.mark.parametrize("mode,reason,start", [
    ("on", "NodeQuarantined", f"quarantined node {BAD} (taint gpucluster.io/quarantine=straggler:NoSchedule, "
                              "cordoned) and deleted the job's pod(s) there: llm-0; reason straggler"),
    ("dry-run", "NodeWouldBeQuarantined", f"would quarantine node {BAD} (pool remediation dry-run: nothing "
                                          "changed); reason straggler")])
def test_the_event_is_a_warning_on_the_job_in_its_namespace(mode, reason, start):
    action = acted(mode)
    event = r.event(action.job, action, NOW, "trainer.kubeflow.org/v1alpha1")
    assert event["involvedObject"] == {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                       "name": "llm", "namespace": "training", "uid": "u-1"}
    assert event["metadata"] == {"generateName": "llm.", "namespace": "training"}
    assert (event["reason"], event["type"], event["count"]) == (reason, "Warning", 1)
    assert event["message"] == f"{start}, from alert JobStraggler"
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-09-21T14:13:20Z"
    assert "eventTime" not in event  # the legacy form: no reportingController or action required


def test_times_round_trip_as_rfc3339_seconds():
    assert r.rfc3339(NOW) == "2026-09-21T14:13:20Z" and r.unix("2026-09-21T14:13:20Z") == NOW
    assert r.unix("yesterday") is None and r.unix(None) is None
