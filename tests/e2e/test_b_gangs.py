"""b. Order and gangs on prod: the fabric test first; a job larger than the free quota waits whole, with no
partial pods, then starts whole; pods bind to their pool's nodes with their GPU and EFA requests met.

All of it is the real Kueue v0.19.2, MPI Operator, JobSet, Trainer and kube-scheduler at work.
"""

from __future__ import annotations

import pytest

from .conftest import Local, jsonpath

NAMESPACE = "training"
FABRIC_TEST = "nccl-tests-h100"
BIG_JOB = "llama-70b"  # all 16 nodes of the h100 pool


def workload_of(local: Local, kind: str, name: str) -> dict | None:
    for wl in local.get("workloads.kueue.x-k8s.io", namespace=NAMESPACE)["items"]:
        owners = wl["metadata"].get("ownerReferences", [])
        if any(o["kind"] == kind and o["name"] == name for o in owners):
            return wl
    return None


def condition(obj: dict | None, kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in jsonpath(obj, "status", "conditions", default=[]))


def running(pods: list[dict]) -> list[dict]:
    return [p for p in pods if p["status"].get("phase") == "Running"]


def node_labels(local: Local) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in local.get("nodes")["items"]}


def finish(local: Local, pods: list[dict], code: int = 0) -> None:
    for pod in pods:
        local.kubectl("annotate", "pod", pod["metadata"]["name"], "-n", NAMESPACE, "--overwrite",
                      f"gpucluster.io/kwok-exit={code}")


@pytest.mark.stack("prod")
def test_the_fabric_test_is_admitted_and_its_workers_run_on_h100_nodes_with_gpus_and_efa(cluster):
    local = cluster("prod")
    wl = local.wait(lambda: (w := workload_of(local, "MPIJob", FABRIC_TEST)) and condition(w, "Admitted") and w,
                    "the fabric test's workload to be admitted")
    assert wl["spec"]["priorityClassRef"]["name"] == "gpucluster-fabric-test"
    workers = local.wait(lambda: len(p := running(local.pods(
        NAMESPACE, f"training.kubeflow.org/job-name={FABRIC_TEST},training.kubeflow.org/job-role=worker"))) == 2 and p,
        "both fabric-test workers to run")
    labels = node_labels(local)
    assert len({p["spec"]["nodeName"] for p in workers}) == 2
    for pod in workers:
        node = labels[pod["spec"]["nodeName"]]
        assert node["gpucluster.io/pool"] == "h100" and node["node.kubernetes.io/instance-type"] == "p5.48xlarge"
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert (limits["nvidia.com/gpu"], limits["vpc.amazonaws.com/efa"]) == ("8", "32")
    launcher = local.wait(lambda: running(local.pods(
        NAMESPACE, f"training.kubeflow.org/job-name={FABRIC_TEST},training.kubeflow.org/job-role=launcher")),
        "the fabric test's launcher to run")
    assert labels[launcher[0]["spec"]["nodeName"]]["gpucluster.io/role"] == "system"


@pytest.mark.stack("prod")
def test_a_job_larger_than_the_free_quota_waits_whole_then_starts_whole(cluster):
    local = cluster("prod")
    local.wait(lambda: condition(workload_of(local, "MPIJob", FABRIC_TEST), "Admitted"), "the fabric test to hold quota")
    done = local.cli("submit", "--stack", "prod", BIG_JOB)
    assert done.returncode == 0, done.stderr
    wl = local.wait(lambda: workload_of(local, "TrainJob", BIG_JOB), "the big job's workload")
    # 16 nodes x 8 GPUs = the whole pool's quota, 2 nodes of which the fabric test holds: it waits, whole.
    local.wait(lambda: "insufficient" in str(jsonpath(workload_of(local, "TrainJob", BIG_JOB), "status", "conditions")
                                             ).lower(), "Kueue to say the big job does not fit")
    assert not condition(workload_of(local, "TrainJob", BIG_JOB), "QuotaReserved")
    assert local.pods(NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={BIG_JOB}") == []
    assert wl["spec"]["priorityClassRef"]["name"] == "gpucluster-training"

    finish(local, local.pods(NAMESPACE, f"training.kubeflow.org/job-name={FABRIC_TEST}"))
    local.wait(lambda: condition(local.get("mpijobs.kubeflow.org", FABRIC_TEST, NAMESPACE), "Succeeded"),
               "the fabric test to succeed")
    local.wait(lambda: condition(workload_of(local, "TrainJob", BIG_JOB), "Admitted"), "the big job to be admitted",
               timeout=120)
    pods = local.wait(lambda: len(p := running(local.pods(NAMESPACE, f"jobset.sigs.k8s.io/jobset-name={BIG_JOB}")))
                      == 16 and p, "all 16 of the big job's pods to run", timeout=120)
    labels = node_labels(local)
    assert len({p["spec"]["nodeName"] for p in pods}) == 16
    assert {labels[p["spec"]["nodeName"]]["gpucluster.io/pool"] for p in pods} == {"h100"}
    done = local.cli("cancel", "--stack", "prod", BIG_JOB)
    assert done.returncode == 0, done.stderr
