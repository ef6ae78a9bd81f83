"""g. The job verbs against the real API server: submit, status, logs, cancel and doctor, their output and exit codes."""

from __future__ import annotations

import json
import time

import pytest

from bootstrap.doctor.kueue import rules_unevaluated
from local import kwok

from .conftest import dumps, job_file, jsonpath
from .test_b_gangs import NAMESPACE, finish, running, workload_of

JOB = "verbs"



@pytest.mark.stack("dev")
def test_submit_status_logs_cancel_on_a_real_cluster(cluster, tmp_path):
    local = cluster("dev")
    done = local.cli("submit", "--stack", "dev", "--file", job_file(tmp_path, JOB), "--json")
    assert done.returncode == 0, done.stderr
    submitted = json.loads(done.stdout)
    assert submitted["kind"] == "TrainJob" and submitted["name"] == JOB
    pods = local.wait(lambda: running(local.pods(NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={JOB}")),
                      "the job's pod to run")

    def status_row() -> dict:
        done = local.cli("status", "--stack", "dev", "--json")
        assert done.returncode == 0, done.stderr
        return {row["name"]: row for row in json.loads(done.stdout)}[JOB]

    # Running once the TrainJob's own status says its pods are ready: Trainer writes it a moment after the pods
    # run (CI saw "Admitted" on the first look), so status is asked until it says so.
    row = local.wait(lambda: (r := status_row())["phase"].lower() == "running" and r, "status to say running",
                     timeout=60)
    assert row["kind"] == "TrainJob"

    kwok.pod_logs(local.state, NAMESPACE, pods[0]["metadata"]["name"], ["step 1 loss 2.31", "step 2 loss 2.12"])
    done = local.cli("logs", "--stack", "dev", JOB)
    assert done.returncode == 0, done.stderr
    assert "step 2 loss 2.12" in done.stdout

    done = local.cli("cancel", "--stack", "dev", JOB)
    assert done.returncode == 0, done.stderr
    gone = f"jobset.sigs.k8s.io/jobset-name={JOB}"
    local.wait(lambda: not local.get("jobsets.jobset.x-k8s.io", namespace=NAMESPACE,
                                     selector=f"gpucluster.io/job={JOB}")["items"]
               and not local.get("jobsets.jobset.x-k8s.io", namespace=NAMESPACE, selector=gone)["items"]
               and not local.pods(NAMESPACE, gone), "the job's JobSet and pods to be gone")
    # ...and to stay gone: a foreground delete let Trainer re-create the JobSet, and its pods came back.
    time.sleep(10)
    assert all(t["metadata"]["name"] != JOB for t in local.get("trainjobs.trainer.kubeflow.org",
                                                                namespace=NAMESPACE)["items"])
    assert all(j["metadata"]["name"] != JOB for j in local.get("jobsets.jobset.x-k8s.io", namespace=NAMESPACE)["items"])
    assert local.pods(NAMESPACE, gone) == []
    done = local.cli("logs", "--stack", "dev", JOB)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"no MPIJob or TrainJob '{JOB}' in namespace training" in done.stderr


@pytest.mark.stack("dev")
def test_doctor_names_why_a_job_waits_from_the_real_kueue_message(cluster, tmp_path):
    """Two GPUs in the pool (2 x g6e.xlarge): a second two-node job waits, and doctor says why from Kueue's words."""
    local = cluster("dev")
    done = local.cli("submit", "--stack", "dev", "--file", job_file(tmp_path, "too-big", nodes=2))
    assert done.returncode == 0, done.stderr
    blocker = local.cli("submit", "--stack", "dev", "--file", job_file(tmp_path, "blocker", nodes=2))
    assert blocker.returncode == 0, blocker.stderr
    # Kueue says "insufficient unused quota", or, when an earlier Workload of the same shape already failed to fit
    # (too-big, queued behind the stack's own smoke job), sets it aside unevaluated with no QuotaReserved condition
    # (SchedulingEquivalenceHashing): doctor infers the same cause then (bootstrap/doctor/kueue/rules_unevaluated.py).
    local.wait(lambda: (t := workload_of(local, "TrainJob", "too-big")) and any(
        c["type"] == "QuotaReserved" for c in t.get("status", {}).get("conditions", [])),
        "Kueue to have evaluated the first two-node job")
    local.wait(lambda: (w := workload_of(local, "TrainJob", "blocker")) and not any(
        c["type"] == "Admitted" for c in w.get("status", {}).get("conditions", [])) and (
        "insufficient" in json.dumps(w.get("status", {})).lower()
        or not any(c["type"] == "QuotaReserved" for c in w.get("status", {}).get("conditions", []))),
        "Kueue to report the second job's quota shortfall, or set it aside")
    # doctor infers a cause for a Workload Kueue says nothing of only once it has been silent a while.
    time.sleep(rules_unevaluated.SILENT_AFTER_SECONDS + 2)
    bundle = tmp_path / "bundle"
    done = local.cli("doctor", "--stack", "dev", "blocker", "--collect", str(bundle), "--json")
    states = {n: jsonpath(workload_of(local, "TrainJob", n), "status") for n in ("too-big", "blocker")}
    assert done.returncode == 1, (done.stdout, done.stderr, dumps(states))
    report = json.loads(done.stdout)
    assert [f["cause"] for f in report["findings"]] == ["waiting-for-quota"], report
    # It fits the pool: it waits for the other job, not for a bigger pool (Kueue also names the system flavor).
    assert report["findings"][0]["fix"].startswith("other admitted jobs hold the pool's quota"), report
    read_back = local.cli("doctor", "--from", str(bundle), "--json")
    assert json.loads(read_back.stdout)["findings"] == report["findings"]
    for name in ("too-big", "blocker"):
        local.cli("cancel", "--stack", "dev", name)
    for pod in local.pods(NAMESPACE):
        finish(local, [pod])
