"""`bootstrap validate`: the stages' MPIJobs, the progress while they wait, the verdicts, the clean-up.

The cluster is tests/kube_fake.py's API server; Kueue, the autoscaler and
the MPI Operator are played by `Cluster.step`, one step per poll: the
Workload queued, then admitted, workers running on a node, the job done
with the launcher's log (the recorded nccl-tests runs of tests/data/nccl).
"""

from __future__ import annotations

import json

import pytest

from bootstrap.jobs import validation as job_validation
from bootstrap.verbs.jobs import validate
from components.core.kube import validation
from tests import k8s
from tests.conftest import ROOT, stack_config
from tests.kube_fake import FakeKube

NS = "training"
P5_2NODE = (ROOT / "tests" / "data" / "nccl" / "p5_efa_2node.log").read_text()
ONE_NODE = """[1,0]<stdout>:gpucluster-validate fsx mounted
[1,0]<stdout>:gpucluster-validate fsx write: 1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.9 s, 1.2 GB/s
[1,0]<stdout>:gpucluster-validate fsx read: 1073741824 bytes (1.1 GB, 1.0 GiB) copied, 0.6 s, 1.8 GB/s
gpucluster-validate nccl-tests
""" + "\n".join(line for line in P5_2NODE.splitlines() if "worker-1" not in line)
TWO_NODE = ("[1,0]<stdout>:gpucluster-validate tcp validate-h100-2node-worker-0 -> "
            "validate-h100-2node-worker-1.validate-h100-2node.training.svc:22 open\n"
            "[1,1]<stdout>:gpucluster-validate tcp validate-h100-2node-worker-1 -> "
            "validate-h100-2node-worker-0.validate-h100-2node.training.svc:22 open\n" + P5_2NODE)


class Cluster:
    """Kueue, the autoscaler and the MPI Operator, one step per poll of `validate`."""

    def __init__(self, fake: FakeKube, logs: dict[str, str], gpus: int = 8, efa: int = 32, succeed: bool = True,
                 finish_after: int = 4):
        self.fake, self.logs, self.gpus, self.efa = fake, logs, gpus, efa
        self.succeed, self.finish_after, self.steps, self.seen = succeed, finish_after, 0, []

    def step(self, _seconds: float) -> None:
        self.steps += 1
        for job in self.fake.objects("MPIJob"):
            name, nodes = job["metadata"]["name"], job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
            age = self.steps - job["metadata"].setdefault("annotations", {}).setdefault("born", self.steps)
            if age == 0:
                self.fake.add({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {
                    "name": f"mpijob-{name}", "namespace": NS, "creationTimestamp": "2026-12-05T12:00:00Z",
                    "ownerReferences": [{"kind": "MPIJob", "name": name, "uid": job["metadata"]["uid"]}]},
                    "spec": {"queueName": "gpu", "priority": 1000}, "status": {"conditions": []}})
            elif age == 1:
                (wl,) = [w for w in self.fake.objects("Workload") if w["metadata"]["name"] == f"mpijob-{name}"]
                wl["status"]["conditions"] = [{"type": "Admitted", "status": "True",
                                               "lastTransitionTime": "2026-12-05T12:01:00Z"}]
            elif age == 2:
                for i in range(nodes):
                    node = f"ip-10-20-0-{i + 1}"
                    self.fake.add({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}, "status": {
                        "allocatable": {"nvidia.com/gpu": str(self.gpus), "vpc.amazonaws.com/efa": str(self.efa)}}})
                    self.fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
                        "name": f"{name}-worker-{i}", "namespace": NS, "labels": {
                            "gpucluster.io/job": name, "training.kubeflow.org/job-role": "worker"}},
                        "spec": {"nodeName": node}, "status": {"phase": "Running"}})
            elif age == self.finish_after:
                self.fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
                    "name": f"{name}-launcher-x", "namespace": NS, "labels": {
                        "gpucluster.io/job": name, "training.kubeflow.org/job-role": "launcher"}}})
                self.fake.logs[(NS, f"{name}-launcher-x", "launcher")] = self.logs[name]
                job["status"] = {"conditions": [{"type": "Succeeded" if self.succeed else "Failed", "status": "True",
                                                 "lastTransitionTime": "2026-12-05T12:10:00Z"}]}
                self.seen.append(name)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    server = FakeKube().start()
    monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield server
    server.stop()


LOGS = {"validate-h100-1node": ONE_NODE, "validate-h100-2node": TWO_NODE}


def test_both_stages_pass_and_nothing_is_left(fake, capsys):
    cluster = Cluster(fake, LOGS)
    code = validate.main(["--stack", "prod"], sleep=cluster.step)
    out = capsys.readouterr().out
    assert code == 0, out
    assert cluster.seen == ["validate-h100-1node", "validate-h100-2node"]
    lines = out.splitlines()
    assert lines[0] == "h100: one-node stage, 1 x p5.48xlarge"
    assert "[00:00] one-node: queued (position 1 of 1)" in lines
    assert "[00:00] one-node: waiting for nodes (0/1 workers running)" in lines
    assert "h100 one-node: PASS" in lines
    assert "  ip-10-20-0-1: 8/8 GPUs and 32/32 EFA devices allocatable" in lines
    assert "  FSx mounted; direct 1 GiB write 1.2 GB/s, read 1.8 GB/s" in lines
    assert "h100 two-node: PASS" in lines
    assert any(line.startswith("  all_reduce_perf PASS: peak bus bandwidth") and "transport OFI/EFA" in line
               for line in lines)
    assert fake.objects("MPIJob") == []  # removed after each stage
    deletes = [r.path for r in fake.requests if r.method == "DELETE"]
    assert deletes == [f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs/validate-h100-1node",
                       f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs/validate-h100-2node"]


def test_missing_efa_devices_fail_the_first_stage_and_stop(fake, capsys):
    cluster = Cluster(fake, LOGS, efa=0)
    code = validate.main(["--stack", "prod", "--json"], sleep=cluster.step)
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and [(r["stage"], r["verdict"]) for r in report] == [("one-node", "FAIL")]
    assert "ip-10-20-0-1: 8/8 GPUs and 0/32 EFA devices allocatable (short: device plugins, or a bad device)" \
        in report[0]["details"]


def test_a_socket_fallback_fails_the_two_node_stage(fake, capsys):
    fallback = (ROOT / "tests" / "data" / "nccl" / "socket_fallback.log").read_text()
    cluster = Cluster(fake, {**LOGS, "validate-h100-2node": TWO_NODE.split("# nThread")[0] + fallback})
    code = validate.main(["--stack", "prod", "--stage", "two-node", "--json"], sleep=cluster.step)
    (result,) = json.loads(capsys.readouterr().out)
    assert code == 1 and result["verdict"] == "FAIL"
    assert any("transport Socket (fallback!)" in line for line in result["details"])


def test_a_stage_that_never_ends_times_out_and_is_removed(fake, capsys):
    cluster = Cluster(fake, LOGS, finish_after=10**6)
    now = iter(range(0, 10**6, 600))
    code = validate.main(["--stack", "prod", "--timeout", "30"], sleep=cluster.step, clock=lambda: next(now))
    out = capsys.readouterr().out
    assert code == 1 and "h100 one-node: TIMEOUT" in out
    assert fake.objects("MPIJob") == []


def test_ctrl_c_removes_the_job(fake, capsys):
    calls = []

    def interrupt(_seconds):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        Cluster(fake, LOGS).step(0)

    assert validate.main(["--stack", "prod"], sleep=interrupt) == 2
    assert "interrupted; what it created is removed" in capsys.readouterr().err
    assert fake.objects("MPIJob") == []


@pytest.mark.parametrize("stage", validation.STAGES)
def test_the_stages_jobs_are_valid_mpijobs_queued_first(stage):
    cfg = stack_config("prod")
    job = validation.mpijob(stage, cfg.pool("h100"), NS, "fsx")
    k8s.validate_custom(job, "kubeflow.org_mpijobs.yaml")
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/priority-class"] == "gpucluster-fabric-test"
    assert labels["kueue.x-k8s.io/max-exec-time-seconds"] == "1800"
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == (1 if stage == "one-node" else 2)
    script = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"][6]
    assert "/usr/local/bin/all_reduce_perf" in script and "-x FI_PROVIDER=efa" in script
    mounts = {m["mountPath"] for m in worker["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert ("/fsx" in mounts) is (stage == "one-node")  # the one-node stage reads the file system


def test_a_missing_pool_is_a_clean_error(fake, capsys):
    assert validate.main(["--stack", "prod", "--pool", "a100"]) == 2
    assert "no pool 'a100'; pools: h100" in capsys.readouterr().err


def test_a_worker_the_scheduler_cannot_place_is_said_why():
    """What the real scheduler reports when the nodes lack EFA devices (seen in tests/e2e/test_h_validate.py)."""
    from bootstrap.jobs import validation as run

    message = ("0/21 nodes are available: 16 Insufficient vpc.amazonaws.com/efa, 2 node(s) had untolerated taint(s), "
               "3 node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption: 0/21 "
               "nodes are available: 21 Preemption is not helpful for scheduling.")
    pending = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]}}
    assert run.unschedulable([{"status": {"phase": "Running"}}, pending]) == message
    assert run.unschedulable([{"status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}}]) is None
    gated = {"status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
             "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}]}}
    assert run.unschedulable([gated]) is None  # Kueue's gate, not the scheduler's verdict


def test_a_stage_queued_behind_its_atomic_scale_up_says_what_the_autoscaler_said():
    waiting = {"metadata": {"name": "mpijob-validate-h100-1node-1a2b3", "namespace": "training"},
               "status": {"admissionChecks": [
                   {"name": "gpucluster-atomic-scale-up", "state": "Pending",
                    "message": "Capacity is not found, CA will try to find it later."},
                   {"name": "ready-one", "state": "Ready", "message": "Capacity is found in the cluster"},
                   {"name": "silent", "state": "Pending"}]}}
    assert job_validation._checks_waiting(waiting) == [
        ("gpucluster-atomic-scale-up", "Capacity is not found, CA will try to find it later.")]
    assert job_validation._checks_waiting(None) == [] and job_validation._checks_waiting({"status": {}}) == []
