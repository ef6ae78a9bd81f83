"""Jobs without `pulumi up`: submit, status, logs and cancel against an API server of recorded objects.

tests/kube_fake.py serves the objects over HTTP to the real `kubernetes`
client; Kueue's part (a Workload per job, admission) is played by the
tests, in the shapes Kueue v0.19.2 writes (v1beta2 Workload: spec.queueName,
spec.priority, ownerReferences to the job, status.conditions).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
import yaml
from moto import mock_aws

from bootstrap import stackfile
from bootstrap.jobs import checkpoints, logs, render, state
from bootstrap.verbs.jobs import cancel, status, submit
from bootstrap.verbs.jobs import logs as logs_verb
from components.core.kube import launcher
from components.core.storage import team_data
from tests import k8s
from tests.conftest import ROOT, stack_config
from tests.kube_fake import FakeKube

NS = "training"
NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
CRDS = {"MPIJob": "kubeflow.org_mpijobs.yaml", "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
        "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml"}


def workload(job: dict, priority: int, created: str, admitted_at: str | None = None) -> dict:
    """The Workload Kueue makes for a job (kueue v0.19.2 jobframework: named <kind>-<job>-<hash>, owned by it)."""
    conditions = []
    if admitted_at:
        conditions = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": admitted_at}
                      for t in ("QuotaReserved", "Admitted")]
    meta = job["metadata"]
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"{job['kind'].lower()}-{meta['name']}-1a2b3", "namespace": NS,
                         "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": job["kind"],
                                              "name": meta["name"], "uid": meta["uid"], "controller": True}]},
            "spec": {"queueName": "gpu", "priority": priority, "active": True,
                     "podSets": [{"name": "worker", "count": 2}]},
            "status": {"conditions": conditions}}


def kueue(fake: FakeKube, obj: dict) -> None:
    """Kueue's webhook and controller, as far as submit sees them: a pending Workload for a new job."""
    if obj["kind"] in ("MPIJob", "TrainJob", "JobSet"):
        fake.add(workload(obj, 100, "2026-12-05T11:59:00Z"))


def after_pulumi_up(fake: FakeKube) -> None:
    """What `pulumi up` leaves for prod's startOnUp: false jobs: the ConfigMaps of their scripts."""
    for job in ("llama-70b", "gpt-pretrain"):
        fake.add({"apiVersion": "v1", "kind": "ConfigMap", "data": {"train_synthetic.py": "..."},
                  "metadata": {"name": f"{job}-scripts", "namespace": NS,
                               "labels": {"app.kubernetes.io/managed-by": "pulumi"}}})


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    fake = FakeKube().start()
    fake.on_create.append(kueue)
    after_pulumi_up(fake)
    monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(tmp_path / "kubeconfig"))
    yield fake
    fake.stop()


def existing_job(fake: FakeKube, name: str, stack: str = "prod", **labels: str) -> dict:
    cfg = stack_config(stack)
    job = next(j for j in cfg.jobs if j.name == name)
    manifest = launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext(NS, "fsx", cfg.storage, cfg.prices))
    manifest["metadata"]["labels"].update(labels)
    return fake.add(manifest)


def run_json(capsys, verb, *argv, **kwargs) -> tuple[int, object]:
    code = verb.main(list(argv), **kwargs)
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip().startswith(("{", "[")) else out


# -- submit ---------------------------------------------------------------------------------------


def test_submit_renders_what_the_stack_would_and_says_where_it_queues(cluster, capsys):
    ahead = existing_job(cluster, "llama-70b", **{"app.kubernetes.io/managed-by": "gpucluster"})
    cluster.add(workload(ahead, 1000, "2026-12-05T11:00:00Z"))  # the fabric test's priority, queued earlier
    code, report = run_json(capsys, submit, "--stack", "prod", "gpt-pretrain", "--json", sleep=lambda _: None)
    assert code == 0
    (created,) = cluster.objects("MPIJob")
    cfg = stack_config("prod")
    job = next(j for j in cfg.jobs if j.name == "gpt-pretrain")
    expected = launcher.job_manifest(job, cfg.pool("h100"), launcher.JobContext(NS, "fsx", cfg.storage, cfg.prices))
    assert created["spec"] == expected["spec"]  # the same preset, queue, deadline as `pulumi up` would make
    assert created["metadata"]["labels"] == {**expected["metadata"]["labels"], "app.kubernetes.io/managed-by":
                                             "gpucluster"}
    k8s.validate_custom(created, CRDS["MPIJob"])
    assert report == {"kind": "MPIJob", "name": "gpt-pretrain", "namespace": NS, "pool": "h100", "nodes": 2,
                      "instanceType": "p5.48xlarge", "pricePerHour": 110.08, "deadlineSeconds": 163517,
                      "created": ["MPIJob gpt-pretrain"], "admitted": False,
                      "queue": {"clusterQueue": "gpu", "position": 2, "pending": 2, "ahead": ["llama-70b"]}}


def test_submit_pulls_public_ecr_images_through_the_stacks_cache(cluster, capsys):
    base = "210987654321.dkr.ecr.us-east-1.amazonaws.com/gpucluster-prod"
    cluster.add({"apiVersion": "v1", "kind": "ConfigMap", "data": {"publicEcrCache": base},
                 "metadata": {"name": "gpucluster-images", "namespace": NS}})
    assert submit.main(["--stack", "prod", "gpt-pretrain"], sleep=lambda _: None) == 0
    (created,) = cluster.objects("MPIJob")
    images = {c["image"] for spec in created["spec"]["mpiReplicaSpecs"].values()
              for c in spec["template"]["spec"]["containers"]}
    assert images == {f"{base}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"}


def test_submit_text_output(cluster, capsys):
    assert submit.main(["--stack", "prod", "gpt-pretrain"], sleep=lambda _: None) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("submitted MPIJob gpt-pretrain to training: 2 x p5.48xlarge, $110.08/h while it runs; "
                      "deadline 1d 21h 25m")
    assert out[2] == "queue: position 1 of 1 waiting in gpu"


def test_a_torchrun_job_gets_its_runtime_if_the_cluster_lacks_it(cluster, capsys):
    code, report = run_json(capsys, submit, "--stack", "prod", "llama-70b", "--json", sleep=lambda _: None)
    assert code == 0
    assert report["created"] == ["ClusterTrainingRuntime gpucluster-torch-h100-r10-g120", "TrainJob llama-70b"]
    (trainjob,) = cluster.objects("TrainJob")
    (runtime,) = cluster.objects("ClusterTrainingRuntime")
    assert trainjob["spec"]["runtimeRef"]["name"] == runtime["metadata"]["name"]
    for obj in (trainjob, runtime):
        k8s.validate_custom(obj, CRDS[obj["kind"]])
    cluster.collections.clear()  # a second submit into a cluster that has the runtime creates no second one
    after_pulumi_up(cluster)
    cluster.add(runtime)
    code, report = run_json(capsys, submit, "--stack", "prod", "llama-70b", "--json", sleep=lambda _: None)
    assert report["created"] == ["TrainJob llama-70b"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--stack", "dev", "smoke"], "job 'smoke' is started by `pulumi up` (startOnUp: true), which owns it"),
    (["--stack", "prod", "nope"], "no job 'nope' in stack prod; its jobs: llama-70b, gpt-pretrain"),
    (["--stack", "prod"], "give a job name or --file, one of them"),
])
def test_submit_refuses_with_the_reason(cluster, capsys, argv, message):
    assert submit.main(argv, sleep=lambda _: None) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert cluster.objects("MPIJob") == [] and cluster.objects("TrainJob") == []


def test_a_stack_job_s_scripts_must_be_there(cluster, capsys):
    cluster.collections.clear()
    assert submit.main(["--stack", "prod", "gpt-pretrain"], sleep=lambda _: None) == 2
    assert ("ConfigMap gpt-pretrain-scripts (the job's scripts) is not in training: run `pulumi up`, which creates it"
            in capsys.readouterr().err)


def test_a_job_that_exists_is_not_submitted_twice(cluster, capsys):
    existing_job(cluster, "gpt-pretrain")
    assert submit.main(["--stack", "prod", "gpt-pretrain"], sleep=lambda _: None) == 2
    assert "MPIJob gpt-pretrain exists in training" in capsys.readouterr().err


def job_file(tmp_path, **entry) -> str:
    base = {"name": "sweep-1", "pool": "h100", "nodes": 1, "launcher": "mpirun",
            "image": "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023",
            "command": ["python", "/opt/gpucluster/scripts/train_synthetic.py", "--steps", "100"],
            "scripts": ["examples/train_synthetic.py"]}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump({**base, **entry}))
    return str(path)


def test_a_job_file_is_checked_against_the_stack_and_brings_its_scripts(cluster, capsys, tmp_path):
    code, report = run_json(capsys, submit, "--stack", "prod", "--file", job_file(tmp_path), "--json",
                            sleep=lambda _: None)
    assert code == 0 and report["created"] == ["ConfigMap sweep-1-scripts", "MPIJob sweep-1"]
    (config_map,) = [c for c in cluster.objects("ConfigMap") if c["metadata"]["name"] == "sweep-1-scripts"]
    assert config_map["data"] == {"train_synthetic.py": (ROOT / "examples" / "train_synthetic.py").read_text()}
    (job,) = cluster.objects("MPIJob")
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    assert {"name": "scripts", "configMap": {"name": "sweep-1-scripts", "defaultMode": 0o555}} in worker["volumes"]
    k8s.validate_custom(job, CRDS["MPIJob"])


@pytest.mark.parametrize(("entry", "message"), [
    ({"nodes": 17}, "gpucluster:jobs[0].nodes: got 17; pool 'h100' has maxNodes 16"),
    ({"name": "gpt-pretrain"}, "job name 'gpt-pretrain' is a job of stack prod"),
    ({"env": {"TOKEN": {"secure": "v1:abc"}}}, "secret values cannot be read from a job file"),
    ({"scripts": ["../etc/passwd"]}, "must be a path inside this repository"),
])
def test_a_bad_job_file_is_refused_before_anything_is_created(cluster, capsys, tmp_path, entry, message):
    code = submit.main(["--stack", "prod", "--file", job_file(tmp_path, **entry)], sleep=lambda _: None)
    assert code == (1 if message.startswith("gpucluster:") or "repository" in message else 2)  # 1: bad config
    assert message in capsys.readouterr().err
    assert cluster.requests == [] or all(r.method == "GET" for r in cluster.requests)


def test_a_job_file_s_placement_reaches_its_workers(cluster, capsys, tmp_path):
    path = job_file(tmp_path, nodes=4, placement={"policy": "required", "layer": 2})
    assert submit.main(["--stack", "prod", "--file", path], sleep=lambda _: None) == 0
    (job,) = cluster.objects("MPIJob")
    replicas = job["spec"]["mpiReplicaSpecs"]
    assert replicas["Worker"]["template"]["metadata"]["annotations"] == {
        "cluster-autoscaler.kubernetes.io/safe-to-evict": "false",
        "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-2"}
    assert "annotations" not in replicas["Launcher"]["template"]["metadata"]
    k8s.validate_custom(job, CRDS["MPIJob"])


def pools_without_topology(monkeypatch) -> None:
    """Stack prod with its pool's `topology: off`, as a stack that turned it off would be."""
    real = stackfile.load_stack
    pools = [{**p, "topology": "off"} for p in json.loads(stackfile.read_stack_config("prod")["gpucluster:gpuPools"])]

    def load_stack(stack, *args, overrides=None, **kwargs):
        return real(stack, *args, overrides={"gpucluster:gpuPools": pools, **(overrides or {})}, **kwargs)

    monkeypatch.setattr(stackfile, "load_stack", load_stack)


@pytest.mark.parametrize(("off", "placement", "message"), [
    (True, {"policy": "required"},
     "gpucluster:jobs[0].placement: asks for required placement, but the pool has no network topology: its "
     "`topology` is off; use policy none (pool 'h100')"),
    (False, {"layer": 4},
     "gpucluster:jobs[0].placement.layer: got 4; p5.48xlarge nodes have 3 network layers (1 to 3) (pool 'h100')"),
])
def test_a_job_file_s_placement_is_held_to_the_stack_s_rules(cluster, capsys, tmp_path, monkeypatch, off, placement,
                                                            message):
    # The same parser and message as a job of the stack (tests/test_placement_config.py), before anything is made.
    if off:
        pools_without_topology(monkeypatch)
    code = submit.main(["--stack", "prod", "--file", job_file(tmp_path, nodes=4, placement=placement)],
                       sleep=lambda _: None)
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err
    assert all(r.method == "GET" for r in cluster.requests)


# -- status ---------------------------------------------------------------------------------------


def test_status_lists_phase_nodes_elapsed_cost_and_deadline(cluster, capsys):
    running = existing_job(cluster, "gpt-pretrain")
    cluster.add(workload(running, 100, "2026-12-05T09:00:00Z", admitted_at="2026-12-05T10:00:00Z"))
    running["status"] = {"conditions": [{"type": "Running", "status": "True",
                                         "lastTransitionTime": "2026-12-05T10:20:00Z"}]}
    queued = existing_job(cluster, "llama-70b")
    cluster.add(workload(queued, 100, "2026-12-05T11:30:00Z"))
    code, rows = run_json(capsys, status, "--stack", "prod", "--json", now=NOW)
    assert code == 0
    by_name = {r["name"]: r for r in rows}
    assert by_name["gpt-pretrain"] == {
        "name": "gpt-pretrain", "kind": "MPIJob", "phase": "Running", "pool": "h100", "nodes": 2,
        "startedAt": "2026-12-05T10:00:00+00:00", "elapsedSeconds": 7200,
        "costUsd": round(2 * 55.04 * 2, 2), "deadlineSeconds": 163517, "deadlineLeftSeconds": 163517 - 7200,
        "managedBy": None, "queuePosition": None, "goodput": None}  # no goodput record (test_goodput_report.py)
    assert by_name["llama-70b"]["phase"] == "Queued" and by_name["llama-70b"]["queuePosition"] == 1
    assert by_name["llama-70b"]["costUsd"] == 0.0
    assert status.main(["--stack", "prod"], now=NOW) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["JOB", "KIND", "PHASE", "POOL", "NODES", "ELAPSED", "COST", "GOODPUT", "DEADLINE",
                                "LEFT"]
    assert table[1].split() == ["gpt-pretrain", "MPIJob", "Running", "h100", "2", "2h", "$220.16", "-", "1d", "19h",
                                "25m"]


def test_a_failed_job_makes_status_exit_1(cluster, capsys):
    job = existing_job(cluster, "llama-70b")
    job["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                                     "lastTransitionTime": "2026-12-05T11:00:00Z"}]}
    assert status.main([], now=NOW) == 1
    assert "Failed" in capsys.readouterr().out


def test_status_without_a_cluster_is_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert status.main([]) == 2
    assert capsys.readouterr().err.startswith("python -m bootstrap status: error: cannot reach the cluster: kubeconfig")


# -- logs -----------------------------------------------------------------------------------------


def pod(name: str, job: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS,
                                                             "labels": {"gpucluster.io/job": job, **labels}}}


LAUNCHER_LOG = ("[1,0]<stdout>:step 10 loss 4.81\n[1,1]<stdout>:warming up\n[1,0]<stdout>:step 20 loss 4.80\n"
                "[1,12]<stderr>:NCCL WARN something\n")


def test_logs_of_an_mpijob_come_from_the_launcher_and_filter_a_rank(cluster, capsys):
    existing_job(cluster, "gpt-pretrain")
    cluster.add(pod("gpt-pretrain-launcher-x1", "gpt-pretrain", {"training.kubeflow.org/job-role": "launcher"}))
    cluster.add(pod("gpt-pretrain-worker-0", "gpt-pretrain", {"training.kubeflow.org/job-role": "worker"}))
    cluster.logs[(NS, "gpt-pretrain-launcher-x1", "launcher")] = LAUNCHER_LOG
    assert logs_verb.main(["gpt-pretrain"]) == 0
    assert capsys.readouterr().out == LAUNCHER_LOG
    assert logs_verb.main(["gpt-pretrain", "--rank", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "[1,1]<stdout>:warming up\n"
    assert captured.err == "# MPIJob gpt-pretrain: pod gpt-pretrain-launcher-x1, rank 1's lines of mpirun's output\n"
    assert logs_verb.main(["gpt-pretrain", "--rank", "12", "-f"]) == 0
    assert capsys.readouterr().out == "[1,12]<stderr>:NCCL WARN something\n"


def test_logs_of_a_trainjob_come_from_the_rank_s_node(cluster, capsys):
    existing_job(cluster, "llama-70b")
    for index in (0, 1):
        cluster.add(pod(f"llama-70b-node-0-{index}-abcde", "llama-70b",
                        {"batch.kubernetes.io/job-completion-index": str(index)}))
        cluster.logs[(NS, f"llama-70b-node-0-{index}-abcde", None)] = f"node {index} says hi\n"
    assert logs_verb.main(["llama-70b", "--rank", "9"]) == 0  # 8 per node: rank 9 is on node 1
    captured = capsys.readouterr()
    assert captured.out == "node 1 says hi\n"
    assert "node 1's torchrun (ranks 8-15)" in captured.err
    assert logs_verb.main(["llama-70b"]) == 0 and capsys.readouterr().out == "node 0 says hi\n"


def test_logs_before_the_pods_exist_say_why(cluster, capsys):
    existing_job(cluster, "gpt-pretrain")
    assert logs_verb.main(["gpt-pretrain"]) == 2
    assert "has no launcher pod yet: the MPI Operator starts it once every worker is ready" in capsys.readouterr().err


def test_rank_filter_reads_mpirun_s_tags():
    assert list(logs.only_rank(LAUNCHER_LOG.splitlines(), 0)) == ["[1,0]<stdout>:step 10 loss 4.81",
                                                                  "[1,0]<stdout>:step 20 loss 4.80"]


# -- cancel ---------------------------------------------------------------------------------------


def test_cancel_deletes_the_job_its_pods_and_its_scripts_and_names_the_newest_checkpoint(cluster, capsys,
                                                                                          tmp_path, monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    assert submit.main(["--stack", "prod", "--file", job_file(tmp_path)], sleep=lambda _: None) == 0
    (job,) = cluster.objects("MPIJob")
    cluster.add({**pod("sweep-1-worker-0", "sweep-1", {}), "metadata": {
        **pod("sweep-1-worker-0", "sweep-1", {})["metadata"],
        "ownerReferences": [{"kind": "MPIJob", "name": "sweep-1", "uid": job["metadata"]["uid"]}]}})
    capsys.readouterr()
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="prod-data")
        s3.put_object(Bucket="prod-data", Key="checkpoints/sweep-1/step-100/state.pt", Body=b"x")
        s3.put_object(Bucket="prod-data", Key="checkpoints/other/step-5/state.pt", Body=b"x")
        assert cancel.main(["sweep-1", "--stack", "prod", "--bucket", "prod-data"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "deleted MPIJob sweep-1 and its pods, ConfigMap sweep-1-scripts"
    assert out[1] == "checkpoints: /fsx/checkpoints (the next run of sweep-1 gets the same GPUCLUSTER_CHECKPOINT_DIR)"
    assert out[2].startswith("newest: /fsx/checkpoints/sweep-1/step-100/state.pt (s3://prod-data/checkpoints/"
                             "sweep-1/step-100/state.pt, written ")
    assert cluster.objects("MPIJob") == [] and cluster.objects("Pod") == []
    assert "sweep-1-scripts" not in {c["metadata"]["name"] for c in cluster.objects("ConfigMap")}
    delete = next(r for r in cluster.requests if r.method == "DELETE" and r.path.endswith("/mpijobs/sweep-1"))
    assert delete.body["propagationPolicy"] == "Foreground"  # pods first, each with its grace period


def test_cancel_refuses_a_job_pulumi_owns_unless_forced(cluster, capsys):
    existing_job(cluster, "gpt-pretrain", **{"app.kubernetes.io/managed-by": "pulumi"})
    assert cancel.main(["gpt-pretrain"]) == 2
    assert "belongs to the stack (`pulumi up` made it)" in capsys.readouterr().err
    assert len(cluster.objects("MPIJob")) == 1
    assert cancel.main(["gpt-pretrain", "--force"]) == 0
    assert cluster.objects("MPIJob") == []
    assert "the newest one: give --bucket" in capsys.readouterr().out


def test_job_state_of_recorded_objects():
    job = {"kind": "TrainJob", "apiVersion": "trainer.kubeflow.org/v1alpha1",
           "metadata": {"name": "t", "uid": "u1", "labels": {"kueue.x-k8s.io/max-exec-time-seconds": "3600"}},
           "spec": {"trainer": {"numNodes": 4}},
           "status": {"conditions": [{"type": "Complete", "status": "True",
                                      "lastTransitionTime": "2026-12-05T11:30:00Z"}]}}
    wl = workload({**job, "metadata": {**job["metadata"], "namespace": NS}}, 100, "2026-12-05T10:00:00Z",
                  admitted_at="2026-12-05T11:00:00Z")
    assert state.workload_of(job, [wl]) is wl
    item = state.row(job, wl, 10.0, NOW)
    assert (item["phase"], item["elapsedSeconds"], item["costUsd"], item["deadlineLeftSeconds"]) == (
        "Succeeded", 1800, 20.0, None)
    assert state.queue_position(wl, [wl]) is None  # admitted: not in the queue


def test_render_marks_what_submit_made():
    cfg = stack_config("prod")
    sub = render.from_stack(cfg, "gpt-pretrain")
    assert sub.manifest["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpucluster"
    assert sub.runtime is None and sub.config_map is None  # a stack job's ConfigMap comes with `pulumi up`


def test_cancel_deletes_a_trainjob_in_the_background_so_trainer_cannot_bring_its_jobset_back():
    """Kubeflow Trainer v2.3.0 re-creates the JobSet of a TrainJob deleted in the foreground (the e2e tier
    saw the delete never end); MPIJobs and JobSets keep the foreground delete."""
    from bootstrap.jobs import ops

    calls = []

    class Kube:
        def delete(self, kind, name, namespace=None, propagation="Foreground"):
            calls.append((kind.kind, name, propagation))
            return True

        def get(self, kind, name, namespace=None):
            return None

    from bootstrap.cluster import kinds

    for kind in ("TrainJob", "MPIJob", "JobSet"):
        ops.cancel(Kube(), {"kind": kind, "apiVersion": kinds.BY_KIND[kind].api_version,
                            "metadata": {"name": "j", "namespace": "training", "labels": {}}})
    assert calls == [("TrainJob", "j", "Background"), ("MPIJob", "j", "Foreground"), ("JobSet", "j", "Foreground")]


def test_a_member_who_may_not_read_runtimes_still_submits_and_creates_none(cluster, capsys):
    # A team member's Role is namespaced: GET of a cluster-scoped runtime is refused (403). The job goes ahead;
    # Trainer refuses it if the runtime is missing, and submit reports that refusal.
    cluster.fail[("GET", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/gpucluster-torch-h100-r10-g120")] = (
        403, 'clustertrainingruntimes.trainer.kubeflow.org "gpucluster-torch-h100-r10-g120" is forbidden')
    code, report = run_json(capsys, submit, "--stack", "prod", "llama-70b", "--json", sleep=lambda _: None)
    assert code == 0
    assert report["created"] == ["TrainJob llama-70b"]
    assert cluster.objects("ClusterTrainingRuntime") == []


# -- a team's jobs: logs and cancel find them in the team's namespace -----------------------------------------


TEAM_NS = "vision"


def team_stack(monkeypatch, job: str = "gpt-pretrain", team: str = TEAM_NS) -> None:
    """Stack prod with its job `job` given `team:` (as `pulumi up` would run it in the team's namespace)."""
    real = stackfile.load_stack
    jobs = [{**j, "team": team} if j["name"] == job else j
            for j in json.loads(stackfile.read_stack_config("prod")["gpucluster:jobs"])]

    def load_stack(stack, *args, overrides=None, **kwargs):
        return real(stack, *args, overrides={"gpucluster:jobs": jobs, **(overrides or {})}, **kwargs)

    monkeypatch.setattr(stackfile, "load_stack", load_stack)


def team_launcher(fake: FakeKube, job: str, log: str) -> None:
    fake.add({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{job}-launcher-x1", "namespace": TEAM_NS,
        "labels": {"gpucluster.io/job": job, "training.kubeflow.org/job-role": "launcher"}}})
    fake.logs[(TEAM_NS, f"{job}-launcher-x1", "launcher")] = log


@pytest.fixture
def s3_bucket(monkeypatch):
    """A moto bucket prod-data holding a training checkpoint and a team's, of the same job name."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    with mock_aws():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket="prod-data")
        yield s3


def test_a_stack_job_with_a_team_is_found_in_its_namespace_and_its_checkpoints_under_the_team_s_prefix(
        cluster, capsys, monkeypatch, s3_bucket):
    team_stack(monkeypatch)
    cfg = stackfile.load_stack("prod", standins=True)[0]
    sub = render.from_stack(cfg, "gpt-pretrain")
    assert sub.namespace == TEAM_NS == cfg.namespace_of(next(j for j in cfg.jobs if j.name == "gpt-pretrain"))
    cluster.add(sub.manifest)
    team_launcher(cluster, "gpt-pretrain", LAUNCHER_LOG)
    assert logs_verb.main(["gpt-pretrain", "--stack", "prod"]) == 0
    assert capsys.readouterr().out == LAUNCHER_LOG
    # The team's pods mount /teams/vision at /fsx: their /fsx/checkpoints is s3://<bucket>/teams/vision/checkpoints/.
    s3_bucket.put_object(Bucket="prod-data", Key="teams/vision/checkpoints/gpt-pretrain/step-7/state.pt", Body=b"x")
    s3_bucket.put_object(Bucket="prod-data", Key="checkpoints/gpt-pretrain/step-9/state.pt", Body=b"x")  # not its
    assert cancel.main(["gpt-pretrain", "--stack", "prod", "--bucket", "prod-data"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "deleted MPIJob gpt-pretrain and its pods"
    assert out[1] == ("checkpoints: /fsx/checkpoints (the next run of gpt-pretrain gets the same "
                      "GPUCLUSTER_CHECKPOINT_DIR; team vision's, teams/vision/checkpoints/ of the bucket)")
    assert out[2].startswith("newest: /fsx/checkpoints/gpt-pretrain/step-7/state.pt (s3://prod-data/teams/vision/"
                             "checkpoints/gpt-pretrain/step-7/state.pt, written ")
    assert cluster.objects("MPIJob") == []
    assert [r.path for r in cluster.requests if r.method == "DELETE"] == [
        "/apis/kubeflow.org/v2beta1/namespaces/vision/mpijobs/gpt-pretrain"]


def test_a_team_s_job_file_job_is_found_with_team(cluster, capsys, tmp_path, s3_bucket):
    cluster.add(render.from_file("prod", Path(job_file(tmp_path)), team=TEAM_NS).manifest)
    team_launcher(cluster, "sweep-1", "[1,0]<stdout>:step 1\n")
    assert logs_verb.main(["sweep-1", "--stack", "prod"]) == 2
    assert capsys.readouterr().err == (
        "python -m bootstrap logs: error: no MPIJob or TrainJob 'sweep-1' in namespace training (`python -m "
        "bootstrap status` lists them; a team's job is in its team's namespace: give --team (vision, language))\n")
    assert logs_verb.main(["sweep-1", "--stack", "prod", "--team", TEAM_NS]) == 0
    assert capsys.readouterr().out == "[1,0]<stdout>:step 1\n"
    assert logs_verb.main(["sweep-1", "--team", TEAM_NS]) == 0  # without a stack: the team's name is its namespace
    capsys.readouterr()
    code = cancel.main(["sweep-1", "--stack", "prod", "--team", TEAM_NS, "--namespace", "training"])
    assert code == 2 and capsys.readouterr().err == (
        "python -m bootstrap cancel: error: --namespace training is not team vision's (vision); give one of them\n")
    assert cancel.main(["sweep-1", "--stack", "prod", "--team", "nope"]) == 2
    assert "no team 'nope' in stack prod; its teams: vision, language" in capsys.readouterr().err
    assert len(cluster.objects("MPIJob")) == 1
    assert cancel.main(["sweep-1", "--team", TEAM_NS, "--bucket", "prod-data"]) == 0  # without a stack
    out = capsys.readouterr().out.splitlines()
    assert out[1].endswith("; team vision's, teams/vision/checkpoints/ of the bucket)")
    assert out[2] == "none in s3://prod-data/teams/vision/checkpoints/ yet: the next run starts from scratch"


def test_the_checkpoint_prefix_of_a_team_s_job_is_under_the_team_s_data():
    assert checkpoints.s3_prefix("/fsx/checkpoints", "/fsx", "checkpoints/") == "checkpoints/"
    assert checkpoints.s3_prefix("/fsx/checkpoints", "/fsx", "checkpoints/", "vision") == \
        "teams/vision/checkpoints/" == team_data.s3_prefix("vision") + "checkpoints/"
    assert checkpoints.s3_prefix("/data/ckpt", "/data", "checkpoints/", "language") == "teams/language/ckpt/"
