"""The job verbs in a fleet (Kueue MultiKueue): submit --fleet, status, logs and cancel on the manager, pause of
the manager, and the drain before a worker's destroy.

Three API servers of recorded objects (tests/kube_fake.py), the manager `fleet` and the workers `fleet-east` and
`fleet-west`, behind one kubeconfig with a context per stack, as `python -m local up --stack fleet` writes it.
MultiKueue's part is played by the tests in the shapes Kueue v0.19.2 writes: on the manager, the Workload's
status.clusterName / nominatedClusterNames and admissionChecks (apis/kueue/v1beta2/workload_types.go), and the
MultiKueueCluster's condition Active (pkg/controller/admissionchecks/multikueue/multikueuecluster.go).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bootstrap.cluster.kinds import WORKLOAD
from bootstrap.deployed import pausing, teardown
from bootstrap.jobs import fleet, render
from bootstrap.verbs.jobs import cancel, status, submit
from bootstrap.verbs.jobs import logs as logs_verb
from tests.conftest import stack_config
from tests.kube_fake import FakeKube, Request
from tests.test_jobs import NOW, kueue, pod, workload
from tests.test_teardown_cli import FakeStack, project

NS = "training"
STACKS = ("fleet", "fleet-east", "fleet-west")


class Cluster(FakeKube):
    """FakeKube, with a PUT that replaces an object (Kube has no update; fleet.set_stop_policy PUTs) and a list of
    Workloads across namespaces (what a drain waits on)."""

    def handle(self, method, path, query, body):
        collection, _, name = path.rpartition("/")
        if method == "PUT" and name in self.collections.get(collection, {}):
            self.requests.append(Request(method, path, query, body))
            self.collections[collection][name] = body
            return 200, body
        if method == "GET" and path == WORKLOAD.path():
            self.requests.append(Request(method, path, query, body))
            return 200, {"kind": "WorkloadList", "apiVersion": "v1", "metadata": {}, "items": self.objects("Workload")}
        return super().handle(method, path, query, body)


@pytest.fixture
def clusters(tmp_path, monkeypatch):
    fakes = {name: Cluster().start() for name in STACKS}
    for fake in fakes.values():
        fake.on_create.append(kueue)
    for worker in ("fleet-east", "fleet-west"):  # what `pulumi up` of each worker made for its job pretrain
        fakes[worker].add({"apiVersion": "v1", "kind": "ConfigMap", "data": {"train_synthetic.py": "..."},
                           "metadata": {"name": "pretrain-scripts", "namespace": NS,
                                        "labels": {"app.kubernetes.io/managed-by": "pulumi"}}})
    merged = {"apiVersion": "v1", "kind": "Config", "current-context": "fleet-east", "clusters": [], "users": [],
              "contexts": []}
    for name, fake in fakes.items():
        merged["clusters"].append({"name": name, "cluster": {"server": fake.url}})
        merged["users"].append({"name": name, "user": {"token": "t"}})
        merged["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(merged))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    fakes["path"] = str(path)
    yield fakes
    for name in STACKS:
        fakes[name].stop()


def active(name: str, up: bool, since: str = "2026-12-05T11:40:00Z", reason: str = "Active",
           message: str = "Connected") -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster", "metadata": {"name": name},
            "status": {"conditions": [{"type": "Active", "status": "True" if up else "False", "reason": reason,
                                       "message": message, "lastTransitionTime": since}]}}


def add_clusters(manager: FakeKube, *objs: dict) -> None:
    """MultiKueueClusters on the manager (a kind the fake serves by path: bootstrap.cluster.kinds lacks it)."""
    for obj in objs:
        manager.collections.setdefault(fleet.MULTIKUEUE_CLUSTER.path(), {})[obj["metadata"]["name"]] = obj


def queued_job(manager: FakeKube, name: str = "pretrain", created: str = "2026-12-05T11:00:00Z", **status) -> dict:
    """A job submitted to the manager and its Workload, with MultiKueue's status fields."""
    manifest = json.loads(json.dumps(render.from_stack(stack_config("fleet-east"), "pretrain").manifest))
    manifest["metadata"].update(name=name, creationTimestamp=created)
    job = manager.add(manifest)
    wl = workload(job, 100, created, status.pop("admitted_at", None))
    wl["status"].update(status)
    manager.add(wl)
    return job


def lines(capsys) -> tuple[list[str], str]:
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


# -- submit --fleet --------------------------------------------------------------------------------------------


def test_submit_fleet_creates_the_job_on_the_manager_not_the_worker(clusters, capsys):
    argv = ["--stack", "fleet-east", "--fleet", "pretrain", "--kubeconfig", clusters["path"]]
    assert submit.main(argv, sleep=lambda _: None) == 0
    out, _ = lines(capsys)
    (job,) = clusters["fleet"].objects("TrainJob")
    expected = render.from_stack(stack_config("fleet-east"), "pretrain").manifest
    assert job["spec"] == expected["spec"]  # as fleet-east renders it, its queue and namespace
    assert job["metadata"]["namespace"] == NS and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    # The current context is fleet-east: nothing of the job's own went there, nor to fleet-west.
    for worker in ("fleet-east", "fleet-west"):
        assert clusters[worker].objects("TrainJob") == []
        assert not any(r.method == "POST" and r.path.endswith("/trainjobs") for r in clusters[worker].requests)
    runtime = job["spec"]["runtimeRef"]["name"]
    assert [o["metadata"]["name"] for o in clusters["fleet-west"].objects("ClusterTrainingRuntime")] == [runtime]
    assert out == [
        "submitted TrainJob pretrain to training on the fleet's manager fleet: 2 x p5.48xlarge, $110.08/h while it "
        "runs; deadline 18h 10m",
        f"created: ClusterTrainingRuntime {runtime} (manager fleet), TrainJob pretrain (manager fleet), "
        f"ClusterTrainingRuntime {runtime} (worker fleet-east), ClusterTrainingRuntime {runtime} (worker fleet-west)",
        "queue: queued on the fleet's manager fleet: position 1 of 1 in gpu; it runs on the first worker that "
        "admits it",
        "follow it: python -m bootstrap status --stack fleet (its WORKER column), then python -m bootstrap logs "
        "pretrain -f --stack fleet"]


def test_submit_fleet_json_names_the_manager(clusters, capsys):
    argv = ["--stack", "fleet-west", "--fleet", "pretrain", "--kubeconfig", clusters["path"], "--json"]
    assert submit.main(argv, sleep=lambda _: None) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["manager"] == "fleet" and report["namespace"] == NS
    assert report["queue"] == {"clusterQueue": "gpu", "position": 1, "pending": 1, "ahead": []}
    assert "TrainJob pretrain" in report["created"] and len(clusters["fleet"].objects("TrainJob")) == 1


def test_submit_fleet_refuses_when_a_worker_lacks_the_job_s_scripts(clusters, capsys):
    del clusters["fleet-west"].collections[f"/api/v1/namespaces/{NS}/configmaps"]["pretrain-scripts"]
    argv = ["--stack", "fleet-east", "--fleet", "pretrain", "--kubeconfig", clusters["path"]]
    assert submit.main(argv, sleep=lambda _: None) == 2
    assert capsys.readouterr().err == (
        "python -m bootstrap submit: error: ConfigMap pretrain-scripts on worker fleet-west missing, made by "
        "`pulumi up` of a stack with job pretrain in gpucluster:jobs: add it to each worker's stack and `pulumi up` "
        "them, or submit a job file (--file); nothing was submitted\n")
    assert clusters["fleet"].objects("TrainJob") == []


def test_submit_fleet_on_a_stack_in_no_fleet_is_exit_2(clusters, capsys):
    argv = ["--stack", "prod", "--fleet", "gpt-pretrain", "--kubeconfig", clusters["path"]]
    assert submit.main(argv, sleep=lambda _: None) == 2
    assert capsys.readouterr().err == (
        "python -m bootstrap submit: error: stack prod is in no fleet (no gpucluster:fleet in Pulumi.prod.yaml): "
        "--fleet needs a fleet's worker or manager (README, \"A fleet of clusters\")\n")


def test_submit_fleet_of_a_job_file_puts_its_scripts_on_every_worker(clusters, capsys, tmp_path):
    script = "examples/train_synthetic.py"
    job_file = tmp_path / "job.yaml"
    job_file.write_text(f"name: sweep\npool: h100\nnodes: 1\nlauncher: torchrun\nimage: "
                        f"public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023\n"
                        f"command: [python, /opt/gpucluster/scripts/train_synthetic.py]\nscripts: [{script}]\n")
    argv = ["--stack", "fleet-east", "--fleet", "--file", str(job_file), "--kubeconfig", clusters["path"]]
    assert submit.main(argv, sleep=lambda _: None) == 0, capsys.readouterr().err
    assert [j["metadata"]["name"] for j in clusters["fleet"].objects("TrainJob")] == ["sweep"]
    for worker in ("fleet-east", "fleet-west"):
        names = {c["metadata"]["name"] for c in clusters[worker].objects("ConfigMap")}
        assert "sweep-scripts" in names
    assert "sweep-scripts" not in {c["metadata"]["name"] for c in clusters["fleet"].objects("ConfigMap")}


# -- status ----------------------------------------------------------------------------------------------------


def four_jobs(manager: FakeKube) -> None:
    queued_job(manager, "queued", "2026-12-05T11:00:00Z")
    queued_job(manager, "offered", "2026-12-05T11:01:00Z", nominatedClusterNames=["fleet-east", "fleet-west"])
    queued_job(manager, "east", "2026-12-05T10:00:00Z", admitted_at="2026-12-05T11:00:00Z", clusterName="fleet-east")
    queued_job(manager, "west", "2026-12-05T10:01:00Z", admitted_at="2026-12-05T11:30:00Z", clusterName="fleet-west",
               admissionChecks=[{"name": "gpucluster-fleet", "state": "Ready", "message": 'The workload got '
                                 'reservation on "fleet-west"', "lastTransitionTime": "2026-12-05T11:30:00Z"}])
    add_clusters(manager, active("fleet-east", True),
                 active("fleet-west", False, "2026-12-05T11:45:00Z", "ClientConnectionFailed",
                        'Get "https://10.32.0.1/api": dial tcp: i/o timeout'))


def test_status_on_the_manager_has_each_job_s_worker(clusters, capsys):
    four_jobs(clusters["fleet"])
    argv = ["--stack", "fleet", "--kubeconfig", clusters["path"], "--context", "fleet"]
    assert status.main(argv, now=NOW) == 0
    out, _ = lines(capsys)
    # A job's cost is at its worker's prices (its stack file); one no worker has admitted has none.
    assert out == [
        "JOB      KIND      PHASE      POOL  NODES  ELAPSED  COST     GOODPUT  DEADLINE LEFT  WORKER",
        "east     TrainJob  Admitted   h100  2      1h       $110.08  -        17h 10m        fleet-east",
        "west     TrainJob  Admitted   h100  2      30m      $55.04   -        17h 40m        fleet-west (unreachable "
        "since 2026-12-05 11:45 UTC: ClientConnectionFailed)",
        "queued   TrainJob  Queued #1  h100  2      -        -        -        -              -",
        "offered  TrainJob  Queued #2  h100  2      -        -        -        -              nominated: "
        "fleet-east,fleet-west"]


def test_status_json_on_the_manager_carries_worker_and_its_health(clusters, capsys):
    four_jobs(clusters["fleet"])
    assert status.main(["--stack", "fleet", "--kubeconfig", clusters["path"], "--json"], now=NOW) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    pick = ("worker", "workerActive", "nominatedWorkers", "workerUnreachable", "fleetCheck")
    assert {name: {k: r[k] for k in pick} for name, r in rows.items()} == {
        "east": {"worker": "fleet-east", "workerActive": True, "nominatedWorkers": [], "workerUnreachable": None,
                 "fleetCheck": None},
        "west": {"worker": "fleet-west", "workerActive": False, "nominatedWorkers": [],
                 "workerUnreachable": {"since": "2026-12-05T11:45:00Z", "reason": "ClientConnectionFailed",
                                       "message": 'Get "https://10.32.0.1/api": dial tcp: i/o timeout'},
                 "fleetCheck": {"state": "Ready", "message": 'The workload got reservation on "fleet-west"'}},
        "queued": {"worker": None, "workerActive": None, "nominatedWorkers": [], "workerUnreachable": None,
                   "fleetCheck": None},
        "offered": {"worker": None, "workerActive": None, "nominatedWorkers": ["fleet-east", "fleet-west"],
                    "workerUnreachable": None, "fleetCheck": None}}


def test_status_fleet_from_a_worker_s_stack_reads_the_manager(clusters, capsys):
    four_jobs(clusters["fleet"])
    queued_job(clusters["fleet-east"], "local-only")  # on the worker itself: not the fleet's queue
    assert status.main(["--stack", "fleet-east", "--fleet", "--kubeconfig", clusters["path"], "--json"], now=NOW) == 0
    assert sorted(r["name"] for r in json.loads(capsys.readouterr().out)) == ["east", "offered", "queued", "west"]
    # Without --fleet, the worker's own cluster (its context, though the kubeconfig's current one is the same here).
    assert status.main(["--stack", "fleet-west", "--kubeconfig", clusters["path"], "--json"], now=NOW) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_status_of_a_stack_in_no_fleet_has_no_worker_column(clusters, capsys):
    assert status.main(["--stack", "prod", "--kubeconfig", clusters["path"], "--context", "fleet-east"],
                       now=NOW) == 0
    assert capsys.readouterr().out == "no jobs\n"
    assert status.main(["--stack", "prod", "--fleet", "--kubeconfig", clusters["path"]], now=NOW) == 2
    assert "stack prod is in no fleet" in capsys.readouterr().err


# -- logs and cancel follow the job ---------------------------------------------------------------------------


def running_on_east(clusters) -> None:
    job = queued_job(clusters["fleet"], admitted_at="2026-12-05T11:00:00Z", clusterName="fleet-east")
    add_clusters(clusters["fleet"], active("fleet-east", True))
    copy = json.loads(json.dumps(job))
    copy["metadata"].pop("uid")
    clusters["fleet-east"].add(copy)
    clusters["fleet-east"].add(pod("pretrain-node-0-0-abcde", "pretrain",
                                   {"batch.kubernetes.io/job-completion-index": "0"}))
    clusters["fleet-east"].logs[(NS, "pretrain-node-0-0-abcde", None)] = "step 10 loss 4.81\nstep 20 loss 4.80\n"


def test_logs_on_the_manager_follow_the_job_to_its_worker(clusters, capsys):
    running_on_east(clusters)
    assert logs_verb.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 0
    out, err = lines(capsys)
    assert out == ["job pretrain runs on worker fleet-east", "step 10 loss 4.81", "step 20 loss 4.80"]
    assert err == "# TrainJob pretrain: pod pretrain-node-0-0-abcde, node 0's torchrun (rank 0 and its node's other " \
                  "ranks)\n"
    assert logs_verb.main(["pretrain", "--stack", "fleet-west", "--fleet", "--kubeconfig", clusters["path"]]) == 0
    assert lines(capsys)[0][0] == "job pretrain runs on worker fleet-east"


def test_logs_of_a_job_still_in_the_manager_s_queue(clusters, capsys):
    queued_job(clusters["fleet"], nominatedClusterNames=["fleet-east"])
    assert logs_verb.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 2
    assert capsys.readouterr().err == (
        "python -m bootstrap logs: error: job pretrain has not started on any worker: it waits in the fleet "
        "manager's queue; MultiKueue has offered it to fleet-east (`python -m bootstrap status --stack <manager>` "
        "shows it)\n")


def test_logs_of_a_job_on_an_unreachable_worker_say_so(clusters, capsys):
    running_on_east(clusters)
    add_clusters(clusters["fleet"], active("fleet-east", False, reason="ClientConnectionFailed"))
    clusters["fleet-east"].stop()
    assert logs_verb.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 2
    out, err = lines(capsys)
    assert out == ["job pretrain runs on worker fleet-east"]
    assert err.startswith("python -m bootstrap logs: error: cannot reach the cluster: worker fleet-east (the "
                          "manager: fleet-east (unreachable since 2026-12-05 11:40 UTC: ClientConnectionFailed)): ")


def test_cancel_on_the_manager_deletes_it_there_and_names_the_worker(clusters, capsys):
    running_on_east(clusters)
    assert cancel.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 0
    out, _ = lines(capsys)
    assert out[:2] == ["deleted TrainJob pretrain on the fleet's manager",
                       "job pretrain ran on worker fleet-east: MultiKueue deletes its copy and its pods there"]
    assert clusters["fleet"].objects("TrainJob") == []
    assert len(clusters["fleet-east"].objects("TrainJob")) == 1  # MultiKueue's to delete, not ours
    assert not any(r.method == "DELETE" for r in clusters["fleet-east"].requests)


def test_cancel_of_a_queued_fleet_job(clusters, capsys):
    queued_job(clusters["fleet"])
    assert cancel.main(["pretrain", "--stack", "fleet-east", "--fleet", "--kubeconfig", clusters["path"]]) == 0
    assert lines(capsys)[0][:2] == ["deleted TrainJob pretrain on the fleet's manager",
                                    "job pretrain had not started on any worker"]


# -- pause of the manager, drain before a worker's destroy -----------------------------------------------------


def test_pause_of_the_manager_holds_its_queue_and_says_the_workers_run_on(tmp_path):
    stack, out = FakeStack([]), []
    code = pausing.run("fleet", True, None, True, True, select=lambda name: stack, out=out.append,
                       project_dir=project(tmp_path, "fleet"))
    assert code == 0 and [c[0] for c in stack.calls] == ["preview", "up"]
    assert out[0] == ("Pausing fleet manager fleet: its ClusterQueues get stopPolicy Hold; jobs wait in its queue "
                      "and none is dispatched. It has no GPU pool to scale.")
    assert out[1] == ("The workers (fleet-east, fleet-west) keep running what they admitted; pause each to stop "
                      "its GPU billing.")
    assert "gpucluster:paused: true" in (tmp_path / "Pulumi.fleet.yaml").read_text()
    out.clear()
    assert pausing.run("fleet", False, None, False, True, out=out.append, project_dir=tmp_path) == 0
    assert out[0] == ("Resuming fleet manager fleet: its ClusterQueues admit jobs again and MultiKueue dispatches "
                      "them to the workers (fleet-east, fleet-west).")


def destroy_args(*flags: str, timeout: float = 60, kubeconfig: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(stack="fleet-east", yes=True, delete_bucket_data=False, skip_export=False,
                              skip_drain="--skip-drain" in flags, drain_timeout=timeout, kubeconfig=kubeconfig,
                              context=None)


VPC = [{"urn": "urn:pulumi:fleet-east::gpucluster::aws:ec2/vpc:Vpc::vpc", "type": "aws:ec2/vpc:Vpc",
        "custom": True, "id": "vpc-1", "inputs": {}, "outputs": {}}]


@pytest.fixture
def ecr_of(moto_ecr):
    return lambda cfg: moto_ecr


def test_a_worker_is_drained_after_the_confirmation_and_before_the_destroy(tmp_path, ecr_of):
    stack, out, order = FakeStack(VPC), [], []

    def drain(args, cfg, say):
        order.append(("drain", len(stack.calls)))
        return 0

    code = teardown.run(destroy_args(), select=lambda name: stack, holds_objects=lambda cfg, b: False,
                        out=out.append, project_dir=project(tmp_path, "fleet-east"), drain=drain, ecr_of=ecr_of)
    assert code == 0 and order == [("drain", 0)] and [c[0] for c in stack.calls] == ["destroy"]
    assert out[-1] == ("\nfleet-east was a worker of fleet fleet: remove it from gpucluster:fleet.workers in "
                       "Pulumi.fleet.yaml and run `pulumi up --stack fleet` (until then the manager keeps a "
                       "MultiKueueCluster for it that cannot connect)")


def test_a_failed_drain_destroys_nothing(tmp_path, ecr_of):
    stack = FakeStack(VPC)
    code = teardown.run(destroy_args(), select=lambda name: stack, holds_objects=lambda cfg, b: False,
                        out=lambda line: None, project_dir=project(tmp_path, "fleet-east"),
                        drain=lambda args, cfg, say: 2)
    assert code == 2 and stack.calls == []
    stack = FakeStack(VPC)
    out: list[str] = []
    code = teardown.run(destroy_args("--skip-drain"), select=lambda name: stack, holds_objects=lambda cfg, b: False,
                        out=out.append, project_dir=project(tmp_path, "fleet-east"),
                        drain=lambda args, cfg, say: pytest.fail("drained despite --skip-drain"), ecr_of=ecr_of)
    assert code == 0 and [c[0] for c in stack.calls] == ["destroy"]
    assert "\nWARNING: --skip-drain: fleet-east's admitted jobs are not drained; the manager requeues them only " \
           "after fleet.workerLostMinutes" in out


def admitted_workload(name: str) -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "status": {"conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                                       "lastTransitionTime": "2026-12-05T11:00:00Z"}]}}


def test_drain_holds_every_cluster_queue_and_waits_for_the_admitted_workloads(clusters):
    east = clusters["fleet-east"]
    for name in ("gpucluster", "team-vision"):
        east.add({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                  "spec": {"stopPolicy": "None", "queueingStrategy": "BestEffortFIFO"}})
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))
    clock, out = [0.0], []

    def sleep(seconds):  # Kueue evicts the workload while we wait
        clock[0] += seconds
        east.objects("Workload")[0]["status"]["conditions"][0]["status"] = "False"

    code = teardown.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 out.append, sleep, lambda: clock[0])
    assert code == 0
    assert {q["metadata"]["name"]: q["spec"] for q in east.objects("ClusterQueue")} == {
        name: {"stopPolicy": "HoldAndDrain", "queueingStrategy": "BestEffortFIFO"}
        for name in ("gpucluster", "team-vision")}
    assert out == [
        "\nDraining fleet-east, a worker of fleet fleet, before the destroy (at most 60 s):",
        "stopPolicy HoldAndDrain on ClusterQueue gpucluster, team-vision: admitted jobs are evicted, nothing new is "
        "admitted",
        "  waiting for 1 admitted workload to leave: training/trainjob-pretrain-1a2b3 (60 s left)",
        "drained: no workload is admitted on fleet-east; the manager fleet re-dispatches its jobs to the other "
        "workers"]
    assert not any(r.method == "PUT" for r in clusters["fleet"].requests + clusters["fleet-west"].requests)


def test_drain_gives_up_at_its_timeout(clusters, capsys):
    clusters["fleet-east"].add(admitted_workload("trainjob-pretrain-1a2b3"))
    clock = [0.0]
    code = teardown.drain_worker(destroy_args(timeout=25, kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 lambda line: None, lambda s: clock.__setitem__(0, clock[0] + s), lambda: clock[0])
    assert code == 1
    assert "1 workload(s) still admitted on fleet-east after 25 s: training/trainjob-pretrain-1a2b3" in \
        capsys.readouterr().err


def test_an_unreachable_worker_asks_for_skip_drain(clusters, capsys):
    clusters["fleet-east"].stop()
    code = teardown.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 lambda line: None, lambda s: None, lambda: 0.0)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucluster: cannot drain worker fleet-east: ")
    assert err.endswith("add --skip-drain to destroy it without draining; nothing was destroyed\n")


# -- pure ------------------------------------------------------------------------------------------------------


def test_worker_cells():
    lost = fleet.Health(False, "2026-12-05T11:40:00Z", "ClientConnectionFailed", "timeout")
    assert fleet.worker_cell(fleet.Placement("fleet-east", (), "Ready", ""), lost) == \
        "fleet-east (unreachable since 2026-12-05 11:40 UTC: ClientConnectionFailed)"
    assert fleet.worker_cell(fleet.Placement(None, (), "Rejected", "no worker fits"), None) == \
        "- (gpucluster-fleet Rejected: no worker fits)"
    assert fleet.stack_of("fleet-west", stack_config("fleet")) == "fleet-west"
    assert fleet.manager_of(stack_config("fleet-west")) == "fleet" and fleet.manager_of(stack_config("prod")) is None


def test_the_rule_for_reaching_a_stack(clusters, tmp_path, monkeypatch):
    from bootstrap.cluster import connect

    assert connect.contexts(clusters["path"]) == set(STACKS)
    kube = connect.connect_stack("fleet-west", clusters["path"])  # its context, not the current one (fleet-east)
    assert kube.api_client.configuration.host == clusters["fleet-west"].url
    monkeypatch.setattr(connect, "kubeconfig_from_stack", lambda stack: json.loads(Path(clusters["path"])
                                                                                   .read_text()))
    kube = connect.connect_stack("fleet-north", clusters["path"])  # no such context: the stack's output
    assert kube.api_client.configuration.host == clusters["fleet-east"].url  # (that output's current context)
