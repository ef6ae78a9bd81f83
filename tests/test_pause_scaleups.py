"""Pause cancels the scale-ups Kueue asked for jobs that now wait in the paused queue (bootstrap/deployed/scaleups.py):
their ProvisioningRequests, which Kueue v0.19.2 leaves when a stopped ClusterQueue takes the job's quota back. Against
the fake API server; tests/e2e/test_m_placement.py proves it on the real Kueue."""

from __future__ import annotations

import pytest

from bootstrap.cluster.api import ClusterUnreachable
from bootstrap.cluster.kinds import PROVISIONING_REQUEST
from bootstrap.deployed import pausing, scaleups
from bootstrap.verbs import pause
from tests.kube_fake import FakeKube
from tests.test_teardown_cli import FakeStack, project

CHECK = "gpucluster-atomic-scale-up"


def workload(name: str, *true: str, namespace: str = "training") -> dict:
    # The conditions a stopped queue leaves: QuotaReserved False ("ClusterQueue ... is stopped"), Admitted False.
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"trainjob-{name}-1a2b3", "namespace": namespace, "uid": f"uid-{name}",
                         "ownerReferences": [{"kind": "TrainJob", "name": name, "controller": True}]},
            "status": {"conditions": [{"type": t, "status": "True" if t in true else "False"}
                                      for t in ("QuotaReserved", "Admitted")]}}


def queues(stop_policy: str | None = "Hold") -> list[dict]:
    """training's and team-a's LocalQueues and the ClusterQueues they feed (gpucluster stopped as pause sets it)."""
    spec = {"stopPolicy": stop_policy} if stop_policy else {}
    return [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "gpucluster"},
             "spec": spec},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
             "spec": {"stopPolicy": "HoldAndDrain"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "elsewhere"},
             "spec": {}},  # fed by no LocalQueue of the stack's: not the pause's
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "gpu", "namespace": "training"}, "spec": {"clusterQueue": "gpucluster"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "gpu", "namespace": "team-a"}, "spec": {"clusterQueue": "team-a"}}]


def request(job: str, attempt: int = 1, provisioned: bool = False, namespace: str = "training") -> dict:
    # Kueue names a request <workload>-<check>-<attempt> and makes the Workload its controller (provisioning/
    # controller.go); cluster-autoscaler sets Provisioned when it has raised the nodes.
    return {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": f"trainjob-{job}-1a2b3-{CHECK}-{attempt}", "namespace": namespace,
                         "ownerReferences": [{"kind": "Workload", "name": f"trainjob-{job}-1a2b3",
                                              "uid": f"uid-{job}", "controller": True}]},
            "status": {"conditions": [{"type": "Provisioned", "status": "True" if provisioned else "False"}]}}


def cluster(*objects: dict, stop_policy: str | None = "Hold") -> FakeKube:
    """The fake API server of a paused cluster with cluster-autoscaler's ProvisioningRequest CRD."""
    return FakeKube([*queues(stop_policy), *objects], serves=(PROVISIONING_REQUEST,))


def left_requests(fake: FakeKube, namespace: str = "training") -> list[str]:
    return sorted(fake.collections.get(PROVISIONING_REQUEST.path(namespace), {}))


def test_only_the_requests_of_jobs_neither_admitted_nor_holding_quota_are_stale():
    workloads = [workload("running", "QuotaReserved", "Admitted"), workload("held"),
                 workload("booked"), workload("settling", "QuotaReserved")]
    requests = [request("running", provisioned=True), request("held"), request("booked", provisioned=True),
                request("settling"), request("gone")]
    stale, unsettled = scaleups.sort_requests(workloads, requests)
    assert stale == [scaleups.Request("training", f"trainjob-held-1a2b3-{CHECK}-1", "held", False),
                     scaleups.Request("training", f"trainjob-booked-1a2b3-{CHECK}-1", "booked", True)]
    assert unsettled == [scaleups.Request("training", f"trainjob-settling-1a2b3-{CHECK}-1", "settling", False)]


def test_a_request_owned_by_no_workload_controller_is_left_alone():
    orphan = request("held")
    orphan["metadata"]["ownerReferences"][0]["controller"] = False
    assert scaleups.sort_requests([workload("held")], [orphan]) == ([], [])


def test_release_deletes_the_stale_requests_and_waits_for_kueue_to_take_back_the_rest():
    fake = cluster(workload("held"), workload("settling", "QuotaReserved"), request("held"), request("settling"),
                   workload("teamjob", namespace="team-a"), request("teamjob", provisioned=True, namespace="team-a"))
    settling = fake.collections["/apis/kueue.x-k8s.io/v1beta2/namespaces/training/workloads"][
        "trainjob-settling-1a2b3"]
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # Kueue applies the stop to the second job between two polls
        slept.append(seconds)
        settling["status"]["conditions"] = []

    lines: list[str] = []
    with fake.start():
        left = scaleups.release(fake.client(), ("training", "team-a"), lines.append, sleep=sleep,
                                clock=lambda: 0.0)
    assert left == [] and slept == [scaleups.POLL_SECONDS]
    assert left_requests(fake) == [] and left_requests(fake, "team-a") == []
    assert lines == [
        f"cancelled the scale-up for queued job training/held (ProvisioningRequest trainjob-held-1a2b3-{CHECK}-1): "
        "the autoscaler stops asking for its nodes; resume asks again",
        f"cancelled the scale-up for queued job team-a/teamjob (ProvisioningRequest trainjob-teamjob-1a2b3-{CHECK}-1)"
        ": the nodes it raised go once idle; resume asks again",
        f"cancelled the scale-up for queued job training/settling (ProvisioningRequest "
        f"trainjob-settling-1a2b3-{CHECK}-1): the autoscaler stops asking for its nodes; resume asks again"]
    deletes = [r for r in fake.requests if r.method == "DELETE"]
    assert {r.body["propagationPolicy"] for r in deletes} == {"Background"}


def test_release_gives_up_after_the_settle_time_and_names_what_kueue_still_holds():
    fake = cluster(workload("settling", "QuotaReserved"), request("settling"))
    now = iter([0.0, 30.0, 61.0])
    with fake.start():
        left = scaleups.release(fake.client(), ("training",), lambda _: None, sleep=lambda s: None,
                                clock=lambda: next(now))
    assert left == ["training/settling"]
    assert left_requests(fake) == [f"trainjob-settling-1a2b3-{CHECK}-1"]


def test_nothing_is_deleted_while_a_queue_the_stack_feeds_runs():
    # The pause not applied yet, or --stack pointing at another cluster: Kueue would only ask again.
    fake = cluster(workload("held"), request("held"), stop_policy=None)
    with fake.start(), pytest.raises(scaleups.NotPaused, match=r"ClusterQueue gpucluster is not stopped"):
        scaleups.release(fake.client(), ("training", "team-a"), lambda _: None)
    assert left_requests(fake) == [f"trainjob-held-1a2b3-{CHECK}-1"]
    assert scaleups.running_queues(queues("None")[:3], queues()[3:]) == ["gpucluster"]


def test_a_request_kueue_deleted_first_is_not_reported_cancelled():
    fake = cluster(workload("held"), request("held"))
    fake.fail[("DELETE", PROVISIONING_REQUEST.path("training", f"trainjob-held-1a2b3-{CHECK}-1"))] = (404, "gone")
    lines: list[str] = []
    with fake.start():
        assert scaleups.release(fake.client(), ("training",), lines.append) == []
    assert lines == []


# -- through pause ---------------------------------------------------------------------------------------------


def run_pause(tmp_path, fake: FakeKube, *, apply=True, extra=None):
    lines: list[str] = []
    with fake.start():
        code = pausing.run("prod", True, None, apply, assume_yes=True, select=lambda name: FakeStack([]),
                           out=lines.append, project_dir=project(tmp_path, "prod", extra),
                           connect=lambda stack, kubeconfig: fake.client())
    return code, lines


def test_pause_cancels_a_queued_jobs_scale_up_after_its_up(tmp_path):
    fake = cluster(workload("held"), request("held"), workload("running", "QuotaReserved", "Admitted"),
                   request("running", provisioned=True))
    code, lines = run_pause(tmp_path, fake)
    assert code == 0
    assert lines[-3:] == [
        "prod paused.",
        f"cancelled the scale-up for queued job training/held (ProvisioningRequest trainjob-held-1a2b3-{CHECK}-1): "
        "the autoscaler stops asking for its nodes; resume asks again",
        "no scale-up is left for a queued job: the autoscaler raises no node while the stack is paused"]
    assert left_requests(fake) == [f"trainjob-running-1a2b3-{CHECK}-1"]  # an admitted job keeps its nodes


def test_a_stack_without_atomic_pools_never_reaches_the_cluster(tmp_path):
    def no_cluster(stack, kubeconfig):
        raise AssertionError("pause reached the cluster")

    cfg, _, _ = pausing.stackfile.load_stack("prod", project(tmp_path, "prod"))
    assert cfg.gpu_pools and all(p.atomic_scale_up for p in cfg.gpu_pools)  # prod's pools: atomic by default
    on_quota = cfg.model_copy(update={"gpu_pools": [p.model_copy(update={"atomic_scale_up": False})
                                                    for p in cfg.gpu_pools]})
    assert pausing.release_scale_ups(on_quota, None, print, no_cluster) == 0


def test_an_unreachable_cluster_after_the_up_is_exit_2_and_says_how_to_finish(tmp_path, capsys):
    def unreachable(stack, kubeconfig):
        raise ClusterUnreachable("no cluster: give --stack, --kubeconfig or set KUBECONFIG")

    code = pausing.run("prod", True, None, True, assume_yes=True, select=lambda name: FakeStack([]),
                       out=lambda _: None, project_dir=project(tmp_path, "prod"), connect=unreachable)
    assert code == 2
    assert capsys.readouterr().err == (
        "gpucluster: prod is paused, but the scale-ups Kueue asked for its queued jobs could not be cancelled (no "
        "cluster: give --stack, --kubeconfig or set KUBECONFIG); the autoscaler may still raise their nodes: run "
        "`python -m bootstrap pause --stack prod --release-scale-ups` once the cluster can be reached\n")


def test_jobs_kueue_still_holds_quota_for_are_exit_1(tmp_path, capsys):
    cfg, _, _ = pausing.stackfile.load_stack("prod", project(tmp_path, "prod"))
    code = pausing.release_scale_ups(cfg, None, print, lambda stack, kubeconfig: None,
                                     release=lambda kube, namespaces, out: ["training/r-1"])
    assert code == 1
    assert capsys.readouterr().err == (
        "gpucluster: Kueue still holds quota for training/r-1 after 60 s though its queue is stopped: run `python -m "
        "bootstrap pause --stack prod --release-scale-ups` again in a minute\n")


def test_a_cluster_whose_queues_run_is_exit_1_and_says_which(tmp_path, capsys):
    cfg, _, _ = pausing.stackfile.load_stack("prod", project(tmp_path, "prod"))
    fake = cluster(workload("held"), request("held"), stop_policy=None)
    with fake.start():
        code = pausing.release_scale_ups(cfg, None, print, lambda stack, kubeconfig: fake.client())
    assert code == 1
    assert capsys.readouterr().err == (
        "gpucluster: nothing cancelled: ClusterQueue gpucluster is not stopped (stopPolicy None) in the cluster "
        "reached for prod: has `pulumi up --stack prod` applied the pause, and is this its cluster (--kubeconfig, or "
        "a context named prod)? Then run `python -m bootstrap pause --stack prod --release-scale-ups`\n")


def test_release_only_refuses_a_stack_that_is_not_paused(tmp_path, capsys):
    code = pausing.release_only("prod", None, project_dir=project(tmp_path, "prod"))
    assert code == 2
    assert "gpucluster: prod is not paused (gpucluster:paused is not true in Pulumi.prod.yaml)" in \
        capsys.readouterr().err


def test_release_only_on_a_paused_stack_cancels_without_an_up(tmp_path):
    fake = cluster(workload("held"), request("held"))
    lines: list[str] = []
    with fake.start():
        code = pausing.release_only("prod", None, out=lines.append,
                                    project_dir=project(tmp_path, "prod", {"gpucluster:paused": True}),
                                    connect=lambda stack, kubeconfig: fake.client())
    assert code == 0 and left_requests(fake) == []
    assert lines[-1] == "no scale-up is left for a queued job: the autoscaler raises no node while the stack is paused"


def test_the_flag_is_the_verbs(monkeypatch):
    called = []

    def release_only(stack, kubeconfig):
        called.append((stack, kubeconfig))
        return 0

    monkeypatch.setattr(pause, "release_only", release_only)
    assert pause.main(["--stack", "prod", "--release-scale-ups", "--kubeconfig", "/tmp/kc"]) == 0
    assert called == [("prod", "/tmp/kc")]


def test_resume_has_no_release_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        pause.resume_main(["--stack", "prod", "--release-scale-ups"])
    assert exit_.value.code == 2 and "unrecognized arguments: --release-scale-ups" in capsys.readouterr().err
