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
from bootstrap.deployed import draining, pausing, teardown
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
    add_clusters(fakes["fleet"], MULTIKUEUE_CONFIG)  # what makes `fleet` the manager (fleet.ensure_manager)
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


MULTIKUEUE_CONFIG = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig",
                     "metadata": {"name": "gpucluster-fleet"}, "spec": {"clusters": ["fleet-east", "fleet-west"]}}


def add_clusters(manager: FakeKube, *objs: dict) -> None:
    """MultiKueueClusters (and the MultiKueueConfig) on the manager, kinds the fake serves by path
    (bootstrap.cluster.kinds lacks them)."""
    for obj in objs:
        kind = fleet.MULTIKUEUE_CLUSTER if obj["kind"] == "MultiKueueCluster" else fleet.MULTIKUEUE_CONFIG_KIND
        manager.collections.setdefault(kind.path(), {})[obj["metadata"]["name"]] = obj


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


# -- the wrong cluster ------------------------------------------------------------------------------------------


def without_manager_context(clusters, tmp_path) -> str:
    """The kubeconfig with the manager's context named `manager`, none `fleet`; its current one is the worker
    fleet-east."""
    merged = json.loads(Path(clusters["path"]).read_text())
    for c in merged["contexts"]:
        c["name"] = "manager" if c["name"] == "fleet" else c["name"]
    path = tmp_path / "no-manager-kubeconfig"
    path.write_text(json.dumps(merged))
    return str(path)


def not_the_manager(prog: str, where: str) -> str:
    return (f"python -m bootstrap {prog}: error: {where} is not the manager of fleet fleet: it has no MultiKueueConfig "
            "gpucluster-fleet (kueue.x-k8s.io/v1beta2, made by `pulumi up --stack fleet`); pick the manager's "
            "cluster with --context <its context> (without it, the kubeconfig's context named fleet); nothing was "
            "done\n")


def test_cancel_on_a_worker_taken_for_the_manager_deletes_nothing(clusters, capsys, tmp_path):
    running_on_east(clusters)
    path = without_manager_context(clusters, tmp_path)
    assert cancel.main(["pretrain", "--stack", "fleet", "--kubeconfig", path]) == 2
    east = clusters["fleet-east"]
    assert capsys.readouterr().err == not_the_manager(
        "cancel", f"context fleet-east (its current one) of {path} ({east.url})")
    assert len(east.objects("TrainJob")) == 1 and not any(r.method == "DELETE" for r in east.requests)
    assert len(clusters["fleet"].objects("TrainJob")) == 1
    # --context naming the manager's: cancelled there.
    assert cancel.main(["pretrain", "--stack", "fleet", "--kubeconfig", path, "--context", "manager"]) == 0
    assert clusters["fleet"].objects("TrainJob") == [] and len(east.objects("TrainJob")) == 1


def test_a_worker_s_fleet_verbs_refuse_a_context_that_is_not_the_manager(clusters, capsys):
    four_jobs(clusters["fleet"])
    argv = ["--stack", "fleet-east", "--fleet", "--kubeconfig", clusters["path"], "--context", "fleet-west"]
    assert status.main(argv, now=NOW) == 2
    captured = capsys.readouterr()
    west = clusters["fleet-west"]
    assert captured.out == "" and captured.err == not_the_manager(
        "status", f"context fleet-west of {clusters['path']} ({west.url})")
    assert logs_verb.main(["pretrain", *argv]) == 2
    assert "is not the manager of fleet fleet" in capsys.readouterr().err
    argv = ["--stack", "fleet-east", "--fleet", "pretrain", "--kubeconfig", clusters["path"], "--context", "fleet-west"]
    assert submit.main(argv, sleep=lambda _: None) == 2
    assert "is not the manager of fleet fleet" in capsys.readouterr().err
    assert west.objects("TrainJob") == [] and not any(r.method == "POST" for r in west.requests)


def test_a_manager_that_cannot_be_checked_is_refused(clusters, capsys):
    manager = clusters["fleet"]
    manager.fail[("GET", fleet.MULTIKUEUE_CONFIG_KIND.path(None, "gpucluster-fleet"))] = (
        403, 'multikueueconfigs.kueue.x-k8s.io "gpucluster-fleet" is forbidden')
    queued_job(manager)
    assert cancel.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 2
    assert capsys.readouterr().err == (
        f"python -m bootstrap cancel: error: cannot tell whether context fleet of {clusters['path']} ({manager.url}) "
        "is the manager of fleet fleet: reading MultiKueueConfig gpucluster-fleet is forbidden (multikueueconfigs."
        "kueue.x-k8s.io \"gpucluster-fleet\" is forbidden); pick the manager's cluster with --context <its context> "
        "(without it, the kubeconfig's context named fleet); nothing was done\n")
    assert len(manager.objects("TrainJob")) == 1


NO_STACK = ("worker fleet-north (a MultiKueueCluster of the manager) maps to no stack: Pulumi.fleet.yaml names no "
            "stack of it in gpucluster:fleet.workers; check that file's fleet.workers (each worker's "
            "MultiKueueCluster is named as its stack, lowercased, other characters as '-'); nothing was done on any "
            "worker")


def test_a_worker_the_manager_s_stack_file_does_not_name_is_not_guessed(clusters, capsys):
    queued_job(clusters["fleet"], admitted_at="2026-12-05T11:00:00Z", clusterName="fleet-north")
    add_clusters(clusters["fleet"], active("fleet-north", True))
    assert logs_verb.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 2
    out, err = lines(capsys)
    assert out == ["job pretrain runs on worker fleet-north"]
    assert err == f"python -m bootstrap logs: error: {NO_STACK}\n"
    # cancel deletes it on the manager all the same; its checkpoints are not looked for in a guessed stack.
    assert cancel.main(["pretrain", "--stack", "fleet", "--kubeconfig", clusters["path"]]) == 0
    out, err = lines(capsys)
    assert out[:2] == ["deleted TrainJob pretrain on the fleet's manager",
                       "job pretrain ran on worker fleet-north: MultiKueue deletes its copy and its pods there"]
    assert err == f"python -m bootstrap cancel: warning: its checkpoints cannot be looked up: {NO_STACK}\n"


def test_the_stack_of_a_worker_comes_from_the_manager_s_stack_file_only():
    assert fleet.stack_of("fleet-west", stack_config("fleet")) == "fleet-west"
    with pytest.raises(fleet.FleetError, match="^worker fleet-north .* Pulumi.fleet.yaml names no stack of it"):
        fleet.stack_of("fleet-north", stack_config("fleet"))
    with pytest.raises(fleet.FleetError, match=r"^worker fleet-east .* Pulumi.fleet.yaml could not be read;"):
        fleet.stack_of("fleet-east", None, "fleet")


def test_submit_fleet_with_the_manager_s_stack_is_exit_2(clusters, capsys):
    argv = ["--stack", "fleet", "--fleet", "pretrain", "--kubeconfig", clusters["path"]]
    assert submit.main(argv, sleep=lambda _: None) == 2
    assert capsys.readouterr().err == (
        "python -m bootstrap submit: error: --fleet takes a worker's stack (the job renders as that worker renders "
        "it); fleet is the fleet's manager: give one of its workers, fleet-east, fleet-west\n")
    assert clusters["fleet"].objects("TrainJob") == []
    assert "(0 ok, 1 problems found, 2\ncould not run)" in submit.__doc__ and "--stack that is the fleet's manager" \
        in submit.__doc__


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


def destroy_args(*flags: str, timeout: float | None = 60, kubeconfig: str | None = None, stack: str = "fleet-east",
                 yes: bool = True) -> argparse.Namespace:
    return argparse.Namespace(stack=stack, yes=yes, delete_bucket_data=False, skip_export=False,
                              skip_drain="--skip-drain" in flags, drain_timeout=timeout, kubeconfig=kubeconfig,
                              context=None, abandon_fleet_jobs="--abandon-fleet-jobs" in flags)


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


def admitted_workload(name: str, status: str = "True") -> dict:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS},
            "status": {"conditions": [{"type": "Admitted", "status": status, "reason": "Admitted", "message": "",
                                       "lastTransitionTime": "2026-12-05T11:00:00Z"}]}}


def queues(worker: FakeKube, **policies: str | None) -> None:
    """ClusterQueues on a worker, each with its stopPolicy (None: unset, Kueue's default None)."""
    for name, policy in policies.items():
        spec = {"queueingStrategy": "BestEffortFIFO", **({"stopPolicy": policy} if policy else {})}
        worker.add({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                    "spec": spec})


def policies(worker: FakeKube) -> dict[str, str | None]:
    return {q["metadata"]["name"]: q["spec"].get("stopPolicy") for q in worker.objects("ClusterQueue")}


def ticking(clock: list[float], then=None):
    """A sleep that moves the clock (and does what the cluster does meanwhile)."""
    def sleep(seconds):
        clock[0] += seconds
        if then is not None:
            then()
    return sleep


def test_drain_holds_every_cluster_queue_and_waits_for_the_admitted_workloads(clusters):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None", **{"team-vision": None})
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))
    clock, out = [0.0], []

    def evicted():  # Kueue evicts the workload while we wait
        east.objects("Workload")[0]["status"]["conditions"][0]["status"] = "False"

    code = draining.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 out.append, ticking(clock, evicted), lambda: clock[0])
    assert code == 0
    assert {q["metadata"]["name"]: q["spec"] for q in east.objects("ClusterQueue")} == {
        name: {"stopPolicy": "HoldAndDrain", "queueingStrategy": "BestEffortFIFO"}
        for name in ("gpucluster", "team-vision")}
    assert out == [
        "\nDraining fleet-east, a worker of fleet fleet, before the destroy (at most 60 s):",
        "stopPolicy HoldAndDrain on ClusterQueue gpucluster, team-vision: admitted jobs are evicted, nothing new is "
        "admitted",
        "  waiting for 1 admitted workload to leave: Workload training/trainjob-pretrain-1a2b3 (60 s left)",
        "drained: no workload is admitted and no job pod is left on fleet-east; the manager fleet re-dispatches its "
        "jobs to the other workers"]
    assert not any(r.method == "PUT" for r in clusters["fleet"].requests + clusters["fleet-west"].requests)


def test_drain_waits_for_the_evicted_job_s_pods_to_end_their_grace_period(clusters):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None")
    east.add(admitted_workload("trainjob-pretrain-1a2b3", status="False"))  # evicted: no longer admitted
    terminating = pod("pretrain-node-0-0-abcde", "pretrain", {})
    terminating["metadata"]["deletionTimestamp"] = "2026-12-05T11:59:00Z"  # writing its checkpoint on SIGTERM
    east.add(terminating)
    east.add({**pod("pretrain-node-0-1-fghij", "pretrain", {}), "status": {"phase": "Failed"}})  # ended: not waited
    east.add({**pod("sidecar", "pretrain", {}), "metadata": {"name": "sidecar", "namespace": NS}})  # no job's
    clock, out = [0.0], []
    pods = f"/api/v1/namespaces/{NS}/pods"
    code = draining.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"), out.append,
                                 ticking(clock, lambda: east.collections[pods].pop("pretrain-node-0-0-abcde")),
                                 lambda: clock[0])
    assert code == 0
    assert out[2:] == [
        "  waiting for 1 job pod to leave: Pod training/pretrain-node-0-0-abcde (terminating) (60 s left)",
        "drained: no workload is admitted and no job pod is left on fleet-east; the manager fleet re-dispatches its "
        "jobs to the other workers"]


def test_a_drain_that_times_out_puts_back_each_queue_s_stop_policy(clusters, capsys):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None", paused="Hold", **{"team-vision": None})
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))
    clock, out = [0.0], []
    code = draining.drain_worker(destroy_args(timeout=25, kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 out.append, ticking(clock), lambda: clock[0])
    assert code == 1
    assert out[2:] == [f"  waiting for 1 admitted workload to leave: Workload training/trainjob-pretrain-1a2b3 "
                       f"({left} s left)" for left in (25, 15, 5)]
    # Each as it was (an unset one as Kueue defaults it), through the API: `pulumi up` would not (no refresh).
    assert policies(east) == {"gpucluster": "None", "paused": "Hold", "team-vision": "None"}
    assert capsys.readouterr().err == (
        "gpucluster: still on fleet-east after 25 s: Workload training/trainjob-pretrain-1a2b3; give them longer "
        "(--drain-timeout) or add --skip-drain; nothing was destroyed\n"
        "gpucluster: put back the stopPolicy fleet-east's ClusterQueues had before the drain: gpucluster (None), "
        "paused (Hold), team-vision (None)\n")


def test_a_drain_timeout_of_0_does_not_wait(clusters, capsys):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None")
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))
    out = []
    code = draining.drain_worker(destroy_args(timeout=0, kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 out.append, lambda s: pytest.fail("waited"), lambda: 0.0)
    assert code == 1 and policies(east) == {"gpucluster": "None"}
    assert out[0] == "\nDraining fleet-east, a worker of fleet fleet, before the destroy (at most 0 s):"
    assert capsys.readouterr().err.startswith("gpucluster: still on fleet-east after 0 s: ")
    # Nothing left: 0 drains at once. Without a timeout given, the default.
    east.objects("Workload")[0]["status"]["conditions"][0]["status"] = "False"
    assert draining.drain_worker(destroy_args(timeout=0, kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 out.append, lambda s: pytest.fail("waited"), lambda: 0.0) == 0
    out.clear()
    draining.drain_worker(destroy_args(timeout=None, kubeconfig=clusters["path"]), stack_config("fleet-east"),
                          out.append, lambda s: None, lambda: 0.0)
    assert out[0] == "\nDraining fleet-east, a worker of fleet fleet, before the destroy (at most 1800 s):"


def test_destroy_parses_a_drain_timeout_of_0_as_0(monkeypatch):
    from bootstrap.verbs import destroy

    seen = []
    monkeypatch.setattr(destroy, "run", lambda args: seen.append(args) or 0)
    destroy.main(["--stack", "fleet-east", "--drain-timeout", "0", "--abandon-fleet-jobs"])
    assert seen[0].drain_timeout == 0.0 and seen[0].abandon_fleet_jobs is True
    destroy.main(["--stack", "fleet-east"])
    assert seen[1].drain_timeout == 1800 and seen[1].abandon_fleet_jobs is False


def test_an_interrupted_drain_puts_back_the_stop_policy(clusters, capsys):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None")
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))

    def ctrl_c(seconds):
        raise KeyboardInterrupt

    code = draining.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 lambda line: None, ctrl_c, lambda: 0.0)
    assert code == 2 and policies(east) == {"gpucluster": "None"}
    assert capsys.readouterr().err == (
        "gpucluster: the drain of fleet-east was interrupted; nothing was destroyed\n"
        "gpucluster: put back the stopPolicy fleet-east's ClusterQueues had before the drain: gpucluster (None)\n")


def test_a_worker_lost_mid_drain_says_how_to_put_back_its_queues(clusters, capsys):
    east = clusters["fleet-east"]
    queues(east, gpucluster="None", paused="Hold")
    east.add(admitted_workload("trainjob-pretrain-1a2b3"))
    clock = [0.0]
    code = draining.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 lambda line: None, ticking(clock, east.stop), lambda: clock[0])
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("gpucluster: cannot drain worker fleet-east: ")
    assert err[0].endswith("add --skip-drain to destroy it without draining; nothing was destroyed")
    assert err[1].startswith("gpucluster: the stopPolicy of fleet-east's ClusterQueues could not be put back (")
    assert err[1].endswith("): they admit nothing until you run:")
    assert err[2:] == [
        "  kubectl --context fleet-east patch clusterqueue gpucluster --type merge -p "
        "'{\"spec\":{\"stopPolicy\":\"None\"}}'",
        "  kubectl --context fleet-east patch clusterqueue paused --type merge -p '{\"spec\":{\"stopPolicy\":\"Hold\"}}'"]


def test_an_unreachable_worker_asks_for_skip_drain(clusters, capsys):
    clusters["fleet-east"].stop()
    code = draining.drain_worker(destroy_args(kubeconfig=clusters["path"]), stack_config("fleet-east"),
                                 lambda line: None, lambda s: None, lambda: 0.0)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucluster: cannot drain worker fleet-east: ")
    assert err.endswith("add --skip-drain to destroy it without draining; nothing was destroyed\n")  # nothing changed


# -- destroy of the manager ------------------------------------------------------------------------------------


KEEP = ("To keep them: cancel them (`python -m bootstrap cancel JOB --stack fleet`) or wait until they finish "
        "(`python -m bootstrap status --stack fleet`); or pause the manager (`python -m bootstrap pause --stack "
        "fleet`: nothing more is dispatched) and let the workers finish what they run. Or add --abandon-fleet-jobs "
        "to destroy it anyway. Nothing was destroyed.")
LOST = [
    "  training/east (TrainJob): runs on worker fleet-east; MultiKueue deletes it there when the manager's "
    "namespaces go",
    "  training/offered (TrainJob): offered to fleet-east, fleet-west, admitted by none: it exists only on the manager",
    "  training/queued (TrainJob): queued on the manager, the only place it exists",
    "  training/west (TrainJob): runs on worker fleet-west; MultiKueue deletes it there when the manager's "
    "namespaces go"]


def test_the_manager_s_destroy_lists_its_unfinished_jobs_and_refuses(clusters, capsys):
    four_jobs(clusters["fleet"])
    finished = queued_job(clusters["fleet"], "done", admitted_at="2026-12-05T09:00:00Z", clusterName="fleet-east")
    wl = next(w for w in clusters["fleet"].objects("Workload") if w["metadata"]["name"] == "trainjob-done-1a2b3")
    wl["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""})
    assert finished["metadata"]["name"] == "done"
    out = []
    args = destroy_args(stack="fleet", kubeconfig=clusters["path"])
    assert draining.manager_jobs(args, stack_config("fleet"), out.append) == 1 and out == []
    assert capsys.readouterr().err.splitlines() == [
        "gpucluster: fleet manager fleet still has 4 unfinished jobs, lost with it:", *LOST, KEEP]
    args = destroy_args("--abandon-fleet-jobs", stack="fleet", kubeconfig=clusters["path"])
    assert draining.manager_jobs(args, stack_config("fleet"), out.append) == 0
    assert out == ["\nWARNING: --abandon-fleet-jobs: 4 unfinished jobs of fleet fleet are lost with its manager:\n"
                   + "\n".join(LOST)]


def test_a_manager_with_no_unfinished_job_is_destroyed_without_a_word(clusters, capsys):
    out = []
    assert draining.manager_jobs(destroy_args(stack="fleet", kubeconfig=clusters["path"]), stack_config("fleet"),
                                 out.append) == 0
    assert out == [] and capsys.readouterr().err == ""


def test_a_manager_whose_jobs_cannot_be_listed_is_not_destroyed(clusters, capsys):
    clusters["fleet"].stop()
    args = destroy_args(stack="fleet", kubeconfig=clusters["path"])
    assert draining.manager_jobs(args, stack_config("fleet"), lambda line: None) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpucluster: cannot list the jobs of fleet fleet on its manager: ")
    assert err.endswith("add --abandon-fleet-jobs to destroy it without knowing what is lost; nothing was "
                        "destroyed\n")


def test_the_manager_s_jobs_are_checked_before_the_confirmation(tmp_path, ecr_of):
    stack = FakeStack(VPC)
    args = destroy_args(stack="fleet", yes=False)
    code = teardown.run(args, select=lambda name: stack, holds_objects=lambda cfg, b: False, out=lambda line: None,
                        project_dir=project(tmp_path, "fleet"), ask=lambda q: pytest.fail("asked"),
                        drain=lambda *a: pytest.fail("drained a manager"), fleet_jobs=lambda a, cfg, say: 1)
    assert code == 1 and stack.calls == []
    seen = []
    code = teardown.run(destroy_args(stack="fleet"), select=lambda name: stack, holds_objects=lambda cfg, b: False,
                        out=lambda line: None, project_dir=project(tmp_path, "fleet"), ecr_of=ecr_of,
                        drain=lambda *a: pytest.fail("drained a manager"),
                        fleet_jobs=lambda a, cfg, say: seen.append(cfg.stack) or 0)
    assert code == 0 and seen == ["fleet"] and [c[0] for c in stack.calls] == ["destroy"]
    # A worker's destroy lists no manager's jobs.
    code = teardown.run(destroy_args(), select=lambda name: FakeStack(VPC), holds_objects=lambda cfg, b: False,
                        out=lambda line: None, project_dir=project(tmp_path, "fleet-east"), ecr_of=ecr_of,
                        drain=lambda *a: 0, fleet_jobs=lambda *a: pytest.fail("listed a worker's"))
    assert code == 0


# -- pure ------------------------------------------------------------------------------------------------------


def test_worker_cells():
    lost = fleet.Health(False, "2026-12-05T11:40:00Z", "ClientConnectionFailed", "timeout")
    assert fleet.worker_cell(fleet.Placement("fleet-east", (), "Ready", ""), lost) == \
        "fleet-east (unreachable since 2026-12-05 11:40 UTC: ClientConnectionFailed)"
    assert fleet.worker_cell(fleet.Placement(None, (), "Rejected", "no worker fits"), None) == \
        "- (gpucluster-fleet Rejected: no worker fits)"
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
