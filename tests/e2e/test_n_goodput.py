"""n. Goodput on prod (issue 32): the goodput controller the stack renders, run by the local control plane as the
pod would run it (the package from its code ConfigMap, as its own ServiceAccount under the rendered RBAC, its
config ConfigMap read every pass: local/goodput), acting on a 2-node TrainJob through the real Kueue v0.19.2
(topology-aware, with atomic scale-up), JobSet, Trainer, kube-scheduler and KWOK.

- a fake Prometheus (GET /api/v1/alerts, the Prometheus HTTP API) reports JobStraggler firing for one of the
  job's nodes: that node is tainted gpucluster.io/quarantine=straggler, cordoned and annotated with the evidence;
  the job's pod there is deleted; JobSet restarts the gang and Kueue's topology-aware scheduling replaces the node
  in the Workload's assignment (TASReplaceNodeOnNodeTaints), so the job runs again on other nodes, not requeued;
  the job's gpucluster.io/remediations annotation and a NodeQuarantined Event say so, once;
- the job then resumes from its checkpoint and finishes: `bootstrap report` splits its life into phases that add
  up to its wall-clock time, counting the work the restart lost (from the controller's record: the first
  attempt's pods and log are gone);
- the pre-step check fails on a node whose EFA is disabled (the termination message the check's own functions
  write from a fake sysfs tree, exit 86): that node is quarantined and the job restarts without it;
- with the pool's remediation dry-run (the config ConfigMap changed, no restart), an alert is only recorded
  (would-quarantine) and the node stays schedulable with the job's pods on it.

Every second of prod's h100 pool is KWOK's; the step and checkpoint lines are given to the pods' logs
(local/kwok.py pod_logs) as examples/train_synthetic.py prints them.
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

import pytest

from bootstrap import stackfile
from bootstrap.jobs import render
from components.core import versions
from components.core.goodput import names, remediation, steps
from components.core.goodput import precheck_verdict as pv
from components.core.kube import nodepool
from components.core.observability import goodput_agent as agent
from components.core.observability import goodput_alerts
from local import kwok, processes
from local.goodput import controller as goodput
from tests import http_fake

from .conftest import Local, dumps, jsonpath
from .teams_support import WORKLOADS, clear, job_pods, submit

pytestmark = pytest.mark.stack("prod")

NAMESPACE = "training"
POOL = "h100"
TRAINJOBS = "trainjobs.trainer.kubeflow.org"
PASS_SECONDS = 2  # the controller's pass, for this file (the stack's is 10 s)


# --- the cluster's pieces -----------------------------------------------------------------------------------------


class Alerts:
    """Prometheus' GET /api/v1/alerts, firing what the test puts in `firing`."""

    def __init__(self) -> None:
        self.firing: list[dict] = []
        self.server = http_fake.serve(self.answer)

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict]:
        if path != "/api/v1/alerts":
            return 404, {"status": "error", "error": f"not served: {path}"}
        return 200, {"status": "success", "data": {"alerts": list(self.firing)}}

    def fire(self, alert: str, node: str, job: str) -> None:
        self.firing.append({"labels": {"alertname": alert, "node": node, "namespace": NAMESPACE,
                                       "gpucluster_job": job, "severity": "warning", "signal": "gpu-utilisation"},
                            "annotations": {"summary": f"{node} slows job {NAMESPACE}/{job}"}, "state": "firing",
                            "activeAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "value": "38"})


def config(local: Local) -> dict:
    cm = local.get("configmaps", agent.CONFIG_MAP, agent.NAMESPACE)
    return json.loads(cm["data"]["config.json"])


def set_config(local: Local, **changes) -> None:
    """Change the controller's config ConfigMap: it reads it every pass, no restart."""
    body = {**config(local), **changes}
    local.kubectl("patch", "configmap", agent.CONFIG_MAP, "-n", agent.NAMESPACE, "--type", "merge", "-p",
                  json.dumps({"data": {"config.json": json.dumps(body)}}))


def pool_nodes(local: Local) -> dict[str, dict]:
    return {n["metadata"]["name"]: n for n in local.get("nodes", selector=f"{nodepool.POOL_LABEL}={POOL}")["items"]}


def quarantine(node: dict) -> dict | None:
    return next((t for t in node["spec"].get("taints", []) if t["key"] == names.QUARANTINE_TAINT_KEY), None)


def release_all(local: Local) -> None:
    """What an admin does once a node is replaced: no quarantine left on the pool."""
    for name, node in pool_nodes(local).items():
        if quarantine(node) or node["spec"].get("unschedulable"):
            local.kubectl("taint", "node", name, f"{names.QUARANTINE_TAINT_KEY}-", check=False)
            local.kubectl("uncordon", name)
            local.kubectl("annotate", "node", name, f"{names.EVIDENCE_ANNOTATION}-")


@pytest.fixture(scope="module")
def loop(cluster):
    """prod with nothing running, the controller on a fake Prometheus, passes every PASS_SECONDS."""
    local = cluster("prod")
    clear(local)
    release_all(local)
    assert "goodput" in local.kubectl("get", "deployment", agent.NAME, "-n", agent.NAMESPACE, "-o", "name")
    before = config(local)
    assert before["pools"] == {POOL: "on"}, before  # Pulumi.prod.yaml: remediation: "on"
    alerts = Alerts()
    goodput.restart(local.state, alerts.server.url)
    set_config(local, intervalSeconds=PASS_SECONDS)
    try:
        yield local, alerts
    finally:
        print("the goodput controller's log:", processes.log_tail(local.state, goodput.NAME, 30), sep="\n")
        local.kubectl("patch", "configmap", agent.CONFIG_MAP, "-n", agent.NAMESPACE, "--type", "merge", "-p",
                      json.dumps({"data": {"config.json": json.dumps(before)}}))
        goodput.restart(local.state, None)
        http_fake.stop(alerts.server)
        clear(local)
        release_all(local)


# --- jobs -----------------------------------------------------------------------------------------------------------


def start(local: Local, name: str) -> list[dict]:
    """A 2-node torchrun TrainJob on h100 as `submit --file` renders it, running; its pods, node 0 first."""
    entry = {"name": name, "pool": POOL, "nodes": 2, "launcher": "torchrun", "image": versions.DLC_PYTORCH_IMAGE,
             "command": ["python", "/opt/gpucluster/scripts/train_synthetic.py"]}
    cfg, _, _ = stackfile.load_stack("prod", standins=True, overrides={"gpucluster:jobs": [entry]})
    submit(local, [render.build(cfg, 0, from_file=True)], f"job {name}")
    return local.wait(lambda: len(found := running(local, name)) == 2 and found, f"{name}'s 2 pods running",
                      timeout=180)


def running(local: Local, name: str, attempt: int | None = None) -> list[dict]:
    pods = [p for p in job_pods(local, NAMESPACE) if p["metadata"]["labels"].get("jobset.sigs.k8s.io/jobset-name") == name
            and p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            and (attempt is None or p["metadata"]["labels"].get("jobset.sigs.k8s.io/restart-attempt") == str(attempt))]
    return sorted(pods, key=lambda p: p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])


def trainjob(local: Local, name: str) -> dict:
    return local.get(TRAINJOBS, name, NAMESPACE)


def records(local: Local, name: str) -> list[dict]:
    text = jsonpath(trainjob(local, name), "metadata", "annotations", names.REMEDIATIONS_ANNOTATION)
    return json.loads(text) if text else []


def job_events(local: Local, name: str) -> list[dict]:
    return [e for e in local.get("events", namespace=NAMESPACE)["items"]
            if e["involvedObject"].get("kind") == "TrainJob" and e["involvedObject"].get("name") == name
            and e["reason"] in ("NodeQuarantined", "NodeWouldBeQuarantined")]


def workload(local: Local, name: str) -> dict:
    return next(w for w in local.get(WORKLOADS, namespace=NAMESPACE)["items"]
                if any(o.get("name") == name for o in w["metadata"].get("ownerReferences", [])))


def assigned_nodes(wl: dict) -> set[str]:
    """The hostnames of Kueue's topology assignment (v1beta2: prefix + roots + suffix per slice)."""
    out = set()
    for ps in jsonpath(wl, "status", "admission", "podSetAssignments", default=[]):
        for piece in jsonpath(ps, "topologyAssignment", "slices", default=[]):
            for level in piece.get("valuesPerLevel", []):
                found = level.get("individual") or {}
                out |= {f"{found.get('prefix', '')}{root}{found.get('suffix', '')}" for root in found.get("roots", [])}
    return out


def started_at(pod: dict) -> float:
    stamp = jsonpath(pod, "status", "containerStatuses", 0, "state", "running", "startedAt")
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def give_steps(local: Local, pod: dict, first: int, last: int, checkpoint: int | None = None) -> None:
    """Rank 0's log (node 0's torchrun, `[rank0]:` as torchrun tags it): steps first..last since the pod started, a
    checkpoint after `checkpoint`."""
    began, now = started_at(pod) + 1, time.time()
    gap = (now - began) / max(1, last - first + 1)
    lines = [f"[rank0]:loading checkpoint: resuming at step {first}"]
    for i, step in enumerate(range(first, last + 1)):
        at = began + gap * (i + 1)
        lines.append(f"[rank0]:{steps.step_line(step, at)}")
        if step == checkpoint:
            lines.append(f"[rank0]:{steps.checkpoint_line(step, at + 0.1, at + gap * 0.5)}")
    kwok.pod_logs(local.state, NAMESPACE, pod["metadata"]["name"], lines)


def record_of(local: Local, name: str) -> dict:
    cm = local.get("configmaps", names.RECORD_PREFIX + name, NAMESPACE)
    return json.loads(cm["data"][names.RECORD_KEY])


# --- scenarios ------------------------------------------------------------------------------------------------------


def test_a_straggler_is_quarantined_its_job_restarts_elsewhere_resumes_and_the_report_adds_up(loop):
    local, alerts = loop
    pods = start(local, "straggle")
    first_nodes = [p["spec"]["nodeName"] for p in pods]
    slow = first_nodes[1]
    give_steps(local, pods[0], 1, 8, checkpoint=5)
    # The controller's record has attempt 0's step lines before anything fails (its pods and log go with it).
    local.wait(lambda: max((e["step"] for e in record_of(local, "straggle")["events"] if e["type"] == "step"),
                           default=0) == 8, "the record to hold attempt 0's step lines", timeout=30)
    assigned_before = assigned_nodes(workload(local, "straggle"))
    assert assigned_before == set(first_nodes), dumps(workload(local, "straggle"))

    alerts.fire(goodput_alerts.STRAGGLER, slow, "straggle")
    node = local.wait(lambda: quarantine(n := pool_nodes(local)[slow]) and n, f"{slow} quarantined", timeout=30)
    assert quarantine(node)["value"] == names.REASON_STRAGGLER and quarantine(node)["effect"] == "NoSchedule"
    assert node["spec"]["unschedulable"] is True
    evidence = json.loads(node["metadata"]["annotations"][names.EVIDENCE_ANNOTATION])
    assert (evidence["reason"], evidence["job"], evidence["namespace"]) == ("straggler", "straggle", NAMESPACE)
    assert evidence["evidence"]["alert"] == "JobStraggler" and evidence["evidence"]["labels"]["node"] == slow

    again = local.wait(lambda: len(p := running(local, "straggle", attempt=1)) == 2 and p,
                       "the gang running again (JobSet restart attempt 1)", timeout=120)
    now_on = [p["spec"]["nodeName"] for p in again]
    wl = workload(local, "straggle")
    print(f"straggler {slow}: the job ran on {first_nodes}, now on {now_on}; Kueue's assignment "
          f"{sorted(assigned_before)} -> {sorted(assigned_nodes(wl))}")
    assert slow not in now_on and len(set(now_on)) == 2
    # Kueue replaced the tainted node in the admitted Workload's topology assignment: not evicted, not requeued.
    assert assigned_nodes(wl) == set(now_on), dumps(wl)
    assert not any(c["type"] == "Evicted" and c["status"] == "True" for c in wl["status"]["conditions"]), dumps(wl)
    (record,) = records(local, "straggle")
    assert (record["node"], record["reason"], record["action"], record["mode"]) == (slow, "straggler", "quarantined",
                                                                                    "on")
    (event,) = job_events(local, "straggle")
    assert event["reason"] == "NodeQuarantined" and event["type"] == "Warning"
    assert event["message"].startswith(f"quarantined node {slow} (taint gpucluster.io/quarantine=straggler:NoSchedule")
    time.sleep(3 * PASS_SECONDS)  # the alert still fires: nothing more is done
    assert len(records(local, "straggle")) == 1 and len(job_events(local, "straggle")) == 1

    # Attempt 1 resumes from step 5's checkpoint, passes step 8 and finishes.
    give_steps(local, again[0], 6, 14, checkpoint=12)
    local.wait(lambda: max((e["step"] for e in record_of(local, "straggle")["events"] if e["type"] == "step"),
                           default=0) == 14, "the record to hold attempt 1's step lines", timeout=30)
    alerts.firing.clear()
    local.kubectl("annotate", "pod", *(p["metadata"]["name"] for p in again), "-n", NAMESPACE, "--overwrite",
                  "gpucluster.io/kwok-exit=0")
    local.wait(lambda: any(c["type"] == "Complete" and c["status"] == "True"
                           for c in jsonpath(trainjob(local, "straggle"), "status", "conditions", default=[])),
               "the TrainJob complete", timeout=120)
    local.wait(lambda: any(e["type"] == "finished" for e in record_of(local, "straggle")["events"]),
               "the record to say it finished", timeout=30)
    out = local.cli("report", "--stack", "prod", "straggle", "--namespace", NAMESPACE, "--json", timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    text = local.cli("report", "--stack", "prod", "straggle", "--namespace", NAMESPACE, timeout=180).stdout
    print(text)
    phases = report["phases"]
    assert sum(phases.values()) == report["wall_clock_seconds"] > 0, report
    assert report["outcome"] and report["restarts"] == 1, report
    assert phases["lost_to_restarts"] > 0 and phases["training"] > 0 and phases["checkpointing"] >= 0, phases
    assert report["steps"] == 14 and report["step_lines"] is True
    assert [(r["node"], r["action"]) for r in report["remediations"]] == [(slow, "quarantined")]
    assert sum(report["gpu_seconds"].values()) == 16 * report["wall_clock_seconds"]
    metrics = goodput.metrics()
    assert 'gpucluster_job_goodput_ratio{namespace="training",gpucluster_job="straggle"}' in metrics
    assert 'gpucluster_goodput_remediations_total{reason="straggler",action="quarantined"} 1.0' in metrics


def sysfs(root: Path, devices: int) -> str:
    """A node's /sys as the EFA driver shows it: one class/infiniband entry per device (none: EFA disabled)."""
    (root / "class" / "infiniband").mkdir(parents=True)
    for i in range(devices):
        (root / "class" / "infiniband" / f"rdmap{i}s{i + 16}" / "device").mkdir(parents=True)
    return str(root)


def test_the_pre_step_check_catches_a_node_with_efa_disabled_and_the_job_restarts_without_it(loop, tmp_path):
    local, _ = loop
    pods = start(local, "precheck")
    env = {e["name"]: e.get("value") for e in pods[0]["spec"]["containers"][0].get("env", [])}
    expected_efa, expected_gbps = int(env["GPUCLUSTER_PRE_STEP_EFA_DEVICES"]), float(env["GPUCLUSTER_PRE_STEP_EXPECTED_GBPS"])
    good, bad = (p["spec"]["nodeName"] for p in pods)
    verdicts = {good: pv.local_check(sysfs(tmp_path / "good", expected_efa), expected_efa, good),
                bad: pv.local_check(sysfs(tmp_path / "bad", 0), expected_efa, bad)}
    message = pv.message({n: {k: v for k, v in found.items() if k != "node"} for n, found in verdicts.items()},
                         None, expected_gbps, 1.8)
    print(f"pre-step check on {good} and {bad} (EFA disabled): {message}")
    # Every node's check exits 86 with the same verdict (rank 0 gathers them all); JobSet restarts the gang at once.
    local.kubectl("annotate", "pod", *(p["metadata"]["name"] for p in pods), "-n", NAMESPACE, "--overwrite",
                  f"gpucluster.io/kwok-exit={names.PRE_STEP_EXIT_CODE}", "gpucluster.io/kwok-exit-container=node",
                  f"gpucluster.io/kwok-message={message}")
    node = local.wait(lambda: quarantine(n := pool_nodes(local)[bad]) and n, f"{bad} quarantined", timeout=60)
    assert quarantine(node)["value"] == names.REASON_PRE_STEP and node["spec"]["unschedulable"] is True
    evidence = json.loads(node["metadata"]["annotations"][names.EVIDENCE_ANNOTATION])["evidence"]
    assert evidence["verdict"] == {"verdict": "fail", "reason": "efa-missing",
                                   "detail": f"0 of {expected_efa} EFA devices under {tmp_path}/bad/class/infiniband"}
    assert evidence["exitCode"] == names.PRE_STEP_EXIT_CODE
    assert quarantine(pool_nodes(local)[good]) is None
    again = local.wait(lambda: len(p := [x for x in running(local, "precheck")
                                         if x["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] != "0"]) == 2
                       and p, "the gang running again", timeout=120)
    now_on = sorted(p["spec"]["nodeName"] for p in again)
    print(f"pre-step check: {bad} quarantined; the job runs on {now_on}")
    assert bad not in now_on
    (record,) = records(local, "precheck")
    assert (record["node"], record["reason"], record["action"]) == (bad, "pre-step-check", "quarantined")
    # The pod that said so is gone (JobSet's restart deletes the failed attempt within a second or two): the
    # controller's pod watch kept what it said.
    said = record["evidence"]["pod"].split("/")[1]
    assert said in {p["metadata"]["name"] for p in pods}
    assert said not in {p["metadata"]["name"] for p in job_pods(local, NAMESPACE)}
    assert [e["reason"] for e in job_events(local, "precheck")] == ["NodeQuarantined"]


def test_dry_run_only_records_and_leaves_the_node_and_the_job_alone(loop):
    local, alerts = loop
    set_config(local, pools={POOL: "dry-run"})
    try:
        pods = start(local, "dryrun")
        slow = pods[1]["spec"]["nodeName"]
        alerts.fire(goodput_alerts.STRAGGLER, slow, "dryrun")
        (record,) = local.wait(lambda: records(local, "dryrun"), "the dry-run record", timeout=30)
        assert (record["node"], record["action"], record["mode"]) == (slow, "would-quarantine", "dry-run")
        (event,) = job_events(local, "dryrun")
        assert event["reason"] == "NodeWouldBeQuarantined"
        assert event["message"].startswith(f"would quarantine node {slow} (pool remediation dry-run: nothing changed)")
        time.sleep(3 * PASS_SECONDS)
        node = pool_nodes(local)[slow]
        assert quarantine(node) is None and not node["spec"].get("unschedulable")
        assert names.EVIDENCE_ANNOTATION not in node["metadata"].get("annotations", {})
        still = running(local, "dryrun")
        assert [p["metadata"]["name"] for p in still] == [p["metadata"]["name"] for p in pods], "no pod was deleted"
        assert len(records(local, "dryrun")) == 1
    finally:
        set_config(local, pools={POOL: "on"})


def test_a_record_whose_job_is_gone_is_marked_then_deleted_after_the_retention_and_no_other(loop):
    """The records' sweep as the controller's own ServiceAccount under the rendered RBAC (list, patch and delete of
    ConfigMaps in the job namespaces), at its first pass: a record whose job went (its gone-since mark) longer ago
    than the retention (prod's: 90 days) is deleted, one whose job has just gone is marked, the live job's and a
    ConfigMap that only looks like a record are kept."""
    local, alerts = loop

    def config_map(name: str, job: str, gone_since: str | None = None) -> dict:
        meta = {"name": name, "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/part-of": "gpucluster", remediation.JOB_LABEL: job}}
        if gone_since:
            meta["annotations"] = {names.RECORD_GONE_ANNOTATION: gone_since}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
                "data": {names.RECORD_KEY: json.dumps({"kind": "TrainJob", "name": job})}}

    def record_maps() -> dict[str, dict]:
        return {c["metadata"]["name"]: c for c in local.get("configmaps", namespace=NAMESPACE,
                                                            selector=remediation.JOB_LABEL)["items"]}

    retention = config(local)["recordRetentionDays"]
    assert retention == 90
    pods = start(local, "keeper")  # a job that is there: its record stays
    kept = names.RECORD_PREFIX + "keeper"
    local.wait(lambda: kept in record_maps(), "the live job's record", timeout=30)
    old, new, lookalike = (names.RECORD_PREFIX + x for x in ("ghost-old", "ghost-new", "not-ghost-old"))
    long_ago = "2026-01-01T00:00:00Z"
    local.apply([config_map(old, "ghost-old", long_ago), config_map(new, "ghost-new"),
                 config_map(lookalike, "ghost-old", long_ago)], "records of gone jobs and a lookalike")
    began = time.time()
    try:
        goodput.restart(local.state, alerts.server.url)  # its first pass sweeps
        found = local.wait(lambda: (maps := record_maps()) and old not in maps and names.RECORD_GONE_ANNOTATION in (
            maps[new]["metadata"].get("annotations") or {}) and maps, "the sweep", timeout=30)
        assert {kept, new, lookalike} <= set(found)
        since = found[new]["metadata"]["annotations"][names.RECORD_GONE_ANNOTATION]
        assert began - 1 <= calendar.timegm(time.strptime(since, "%Y-%m-%dT%H:%M:%SZ")) <= time.time() + 1
        assert found[lookalike]["metadata"]["annotations"] == {names.RECORD_GONE_ANNOTATION: long_ago}
        assert names.RECORD_GONE_ANNOTATION not in (found[kept]["metadata"].get("annotations") or {})
        said = processes.log_tail(local.state, goodput.NAME, 50)
        assert f"record {NAMESPACE}/{old}: deleted, its job gone for 90 days" in said
        assert f"record {NAMESPACE}/{new}: its job is gone; the record is deleted in 90 days" in said
        assert [p["metadata"]["name"] for p in running(local, "keeper")] == [p["metadata"]["name"] for p in pods]
    finally:
        local.kubectl("delete", "configmap", old, new, lookalike, "-n", NAMESPACE, "--ignore-not-found")
