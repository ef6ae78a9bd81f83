"""d. Each launcher as the real operators run it: MPIJob (launcher and workers, a hostfile of the real worker
pods) and TrainJob through our ClusterTrainingRuntime (the NCCL/EFA preset in the pods Trainer creates)."""

from __future__ import annotations

import pytest

from components.core import job_identity
from components.core.hardware import nccl

from .conftest import jsonpath
from .test_b_gangs import NAMESPACE, condition, finish, running

MPI_JOB = "gpt-pretrain"  # prod, mpirun over 2 x p5.48xlarge


def _env(pod: dict) -> dict[str, str]:
    container = pod["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.stack("prod")
def test_the_mpijob_hostfile_names_its_real_worker_pods(cluster):
    local = cluster("prod")
    done = local.cli("submit", "--stack", "prod", MPI_JOB)
    assert done.returncode == 0, done.stderr
    selector = f"training.kubeflow.org/job-name={MPI_JOB}"
    workers = local.wait(lambda: len(p := running(local.pods(NAMESPACE, f"{selector},training.kubeflow.org/job-role"
                                                                        "=worker"))) == 2 and p,
                         "the MPIJob's two workers to run", timeout=120)
    config = local.get("configmaps", f"{MPI_JOB}-config", NAMESPACE)
    hosts = [line.split()[0] for line in config["data"]["hostfile"].splitlines() if line.strip()]
    slots = {line.split()[1] for line in config["data"]["hostfile"].splitlines() if line.strip()}
    assert slots == {"slots=8"}  # one rank per GPU of a p5.48xlarge
    # Each entry is <pod hostname>.<subdomain>...: a real worker pod's, behind the job's headless Service.
    names = {p["metadata"]["name"]: p for p in workers}
    assert len(hosts) == 2
    for host in hosts:
        hostname, subdomain = host.split(".")[:2]
        pod = names[hostname]
        assert pod["spec"]["hostname"] == hostname and pod["spec"]["subdomain"] == subdomain
    service = local.get("services", subdomain, NAMESPACE)
    assert service["spec"]["clusterIP"] == "None"
    slices = local.get("endpointslices.discovery.k8s.io", namespace=NAMESPACE,
                       selector=f"kubernetes.io/service-name={subdomain}")["items"]
    endpoint_hosts = {e.get("hostname") for s in slices for e in s.get("endpoints") or []}
    assert set(names) <= endpoint_hosts
    launcher = local.wait(lambda: running(local.pods(NAMESPACE, f"{selector},training.kubeflow.org/job-role=launcher")),
                          "the launcher to run")
    # The preset reaches every rank through mpirun's -x KEY=VALUE in the launcher's command.
    container = launcher[0]["spec"]["containers"][0]
    argv = [*container.get("command", []), *container.get("args", [])]
    exported = dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv[:-1])
                    if arg == "-x" and "=" in argv[i + 1])
    for key, value in nccl.preset_env("p5.48xlarge").items():
        assert exported.get(key) == value, key
    # The operator leaves the service account alone: launcher and workers are the jobs' role to AWS
    # (the Pod Identity association on training/default).
    assert {p["spec"]["serviceAccountName"] for p in [*workers, *launcher]} == {job_identity.SERVICE_ACCOUNT}
    finish(local, local.pods(NAMESPACE, selector))
    local.wait(lambda: condition(local.get("mpijobs.kubeflow.org", MPI_JOB, NAMESPACE), "Succeeded"),
               "the MPIJob to succeed")


@pytest.mark.stack("dev")
def test_the_trainjob_pods_carry_the_nccl_preset_through_our_runtime(cluster):
    local = cluster("dev")
    pods = local.wait(lambda: running(local.pods(NAMESPACE, "jobset.sigs.k8s.io/jobset-name=smoke")),
                      "the smoke TrainJob's pod to run")
    trainjob = local.get("trainjobs.trainer.kubeflow.org", "smoke", NAMESPACE)
    runtime = jsonpath(trainjob, "spec", "runtimeRef", "name")
    assert runtime.startswith("gpucluster-torch-dev")
    env = _env(pods[0])
    for key, value in nccl.preset_env("g6e.xlarge", efa=False, torch=True).items():
        assert env.get(key) == value, key
    assert pods[0]["spec"]["nodeSelector"]["gpucluster.io/pool"] == "dev"
    # Trainer's JobSet keeps the namespace's default service account: the jobs' role to AWS.
    assert {p["spec"]["serviceAccountName"] for p in pods} == {job_identity.SERVICE_ACCOUNT}
