"""The MPIJob / PyTorchJob / nccl-tests manifests: upstream CRD schemas, resources, env, commands."""

from __future__ import annotations

import functools

import jsonschema
import pytest

from components.spec import launcher
from components.spec.nodepool import SYSTEM_NODE_LABEL
from tests import k8s
from tests.conftest import stack_config

CRD_FILE = {"MPIJob": "kubeflow.org_mpijobs.yaml", "PyTorchJob": "kubeflow.org_pytorchjobs.yaml"}
NAMESPACE = "training"
CLAIM = "fsx"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1.0"

# pool name -> (instance type, GPUs, EFA devices; 0: no EFA resource at all)
POOLS = {
    "a100": ("p4d.24xlarge", 8, 4),
    "h100": ("p5.48xlarge", 8, 32),
    "h200": ("p5en.48xlarge", 8, 16),
    "b300": ("p6-b300.48xlarge", 8, 16),
    "l40s": ("g6e.xlarge", 1, 0),
}


@pytest.fixture(scope="module", autouse=True)
def fast_crd_validation():
    """tests/k8s.validate_custom, with each 600 KB CRD schema parsed and checked once per module."""
    validators: dict[int, jsonschema.protocols.Validator] = {}

    def validate(instance, schema):
        if id(schema) not in validators:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validators[id(schema)] = cls(schema)
        validators[id(schema)].validate(instance)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(k8s, "crd_schema", functools.cache(k8s.crd_schema))
        mp.setattr(k8s.jsonschema, "validate", validate)
        yield


def synthetic():
    """A stack with one pool per type and an mpirun and a torchrun job on each."""
    pools = [{"name": name, "instanceType": itype, "maxNodes": 4} for name, (itype, _, _) in POOLS.items()]
    jobs = []
    for name in POOLS:
        for launcher_name, prefix in (("mpirun", "mpi"), ("torchrun", "torch")):
            jobs.append({"name": f"{prefix}-{name}", "pool": name, "nodes": 2, "launcher": launcher_name,
                         "image": IMAGE, "command": ["python", "train.py", "--steps=10"]})
    jobs.append({"name": "tuned", "pool": "h100", "nodes": 3, "launcher": "mpirun", "image": IMAGE,
                 "command": ["python", "train.py"], "gpusPerNode": 4, "maxRestarts": 7,
                 "mountPath": "/data",
                 "env": {"NCCL_DEBUG": "WARN", "NCCL_BUFFSIZE": "", "HOROVOD_FUSION_THRESHOLD": "67108864"},
                 "runPolicy": {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60,
                               "activeDeadlineSeconds": 7200, "backoffLimit": 0}})
    jobs.append({"name": "tuned-torch", "pool": "h100", "nodes": 4, "launcher": "torchrun", "image": IMAGE,
                 "command": ["torchrun", "train.py"], "maxRestarts": 7, "env": {"NCCL_DEBUG": "WARN"}})
    return stack_config("dev", {"gpucluster:gpuPools": pools, "gpucluster:jobs": jobs})


CFG = synthetic()
JOBS = {job.name: job for job in CFG.jobs}


def manifest(job_name: str) -> dict:
    job = JOBS[job_name]
    return launcher.job_manifest(job, CFG.pool(job.pool), CLAIM, NAMESPACE)


def replica_specs(m: dict) -> dict:
    return m["spec"]["mpiReplicaSpecs" if m["kind"] == "MPIJob" else "pytorchReplicaSpecs"]


def worker_pod(m: dict) -> dict:
    return replica_specs(m)["Worker"]["template"]["spec"]


def worker_container(m: dict) -> dict:
    (container,) = worker_pod(m)["containers"]
    return container


def launcher_command(m: dict) -> list[str]:
    (container,) = m["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return container["command"]


def env_of(m: dict) -> dict[str, str]:
    if m["kind"] == "PyTorchJob":
        return {e["name"]: e["value"] for e in worker_container(m)["env"]}
    cmd = launcher_command(m)
    pairs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-x" and "=" in cmd[i + 1]]
    return dict(pair.split("=", 1) for pair in pairs)


def all_manifests() -> list[dict]:
    jobs = [launcher.job_manifest(j, c.pool(j.pool), CLAIM, NAMESPACE)
            for c in (stack_config("dev"), stack_config("prod"), CFG) for j in c.jobs]
    tests = [launcher.nccl_test_mpijob(pool, NAMESPACE) for pool in CFG.gpu_pools]
    return jobs + tests


@pytest.mark.parametrize("m", all_manifests(), ids=lambda m: f"{m['kind']}-{m['metadata']['name']}")
def test_valid_against_upstream_crd_and_core_pod_schema(m):
    k8s.validate_custom(m, CRD_FILE[m["kind"]])
    # The CRDs do not reject unknown pod fields; the core Pod schema does.
    for role, spec in replica_specs(m).items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"x-{role.lower()}"},
               "spec": spec["template"]["spec"]}
        k8s.validate_core(pod, "1.35")


@pytest.mark.parametrize("pool_name", POOLS)
@pytest.mark.parametrize("prefix", ["mpi", "torch"])
def test_workers_take_the_types_gpus_and_efa_devices(pool_name, prefix):
    itype, gpus, efa = POOLS[pool_name]
    m = manifest(f"{prefix}-{pool_name}")
    res = worker_container(m)["resources"]
    for side in ("requests", "limits"):
        assert res[side]["nvidia.com/gpu"] == str(gpus)
        if efa:
            assert res[side]["vpc.amazonaws.com/efa"] == str(efa)
            assert res[side]["hugepages-2Mi"] == "5120Mi"
        else:
            assert "vpc.amazonaws.com/efa" not in res[side]
            assert "hugepages-2Mi" not in res[side]
    instance = CFG.pool(pool_name).instance
    assert res["requests"]["memory"] == res["limits"]["memory"] == f"{int(instance.memory_gib * 0.8)}Gi"
    assert res["requests"]["cpu"] == f"{int(instance.vcpus * 800)}m"
    assert "cpu" not in res["limits"]


def test_partial_node_gpus():
    m = manifest("tuned")
    assert worker_container(m)["resources"]["requests"]["nvidia.com/gpu"] == "4"
    assert m["spec"]["slotsPerWorker"] == 4


def test_env_presets_per_type():
    assert env_of(manifest("mpi-a100"))["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env_of(manifest("torch-a100"))["FI_EFA_USE_DEVICE_RDMA"] == "1"
    for name in ("mpi-h100", "torch-h100", "torch-h200", "mpi-b300"):
        env = env_of(manifest(name))
        assert "FI_EFA_USE_DEVICE_RDMA" not in env
        assert env["FI_PROVIDER"] == "efa"
    single = env_of(manifest("torch-l40s"))
    assert not any(k.startswith("FI_") for k in single)


def test_job_env_overrides_win_and_empty_removes():
    env = env_of(manifest("tuned"))
    assert env["NCCL_DEBUG"] == "WARN"
    assert "NCCL_BUFFSIZE" not in env
    assert env["HOROVOD_FUSION_THRESHOLD"] == "67108864"
    assert env["FI_PROVIDER"] == "efa"
    assert env_of(manifest("tuned-torch"))["NCCL_DEBUG"] == "WARN"


def test_mpirun_command_line_exact():
    m = manifest("mpi-h100")
    assert launcher_command(m) == [
        "mpirun", "--allow-run-as-root", "-np", "16", "-N", "8", "--bind-to", "none",
        "-x", "PATH", "-x", "LD_LIBRARY_PATH",
        "-x", "FI_PROVIDER=efa", "-x", "FI_EFA_FORK_SAFE=1", "-x", "NCCL_DEBUG=INFO",
        "-x", "NCCL_BUFFSIZE=8388608", "-x", "NCCL_P2P_NET_CHUNKSIZE=524288",
        "-x", "NCCL_TUNER_PLUGIN=/opt/aws-ofi-nccl/install/lib/libnccl-ofi-tuner.so",
        "-x", "NCCL_SOCKET_IFNAME=^lo,docker",
        "--mca", "pml", "^ucx", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_exclude", "lo,docker0",
        "python", "train.py", "--steps=10",
    ]
    tuned = launcher_command(manifest("tuned"))
    assert tuned[2:6] == ["-np", "12", "-N", "4"]


def test_mpijob_shape():
    m = manifest("mpi-h100")
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    assert spec["slotsPerWorker"] == 8
    assert spec["mpiImplementation"] == "OpenMPI"
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    launcher_spec = spec["mpiReplicaSpecs"]["Launcher"]
    assert launcher_spec["replicas"] == 1
    pod = launcher_spec["template"]["spec"]
    assert pod["nodeSelector"] == SYSTEM_NODE_LABEL
    assert "tolerations" not in pod
    assert "nvidia.com/gpu" not in str(pod["containers"][0]["resources"])
    assert spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert "command" not in worker_container(m)  # the operator starts sshd


def test_pytorchjob_elastic_worker_only():
    m = manifest("torch-h100")
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert list(spec["pytorchReplicaSpecs"]) == ["Worker"]
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["nprocPerNode"] == "8"
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "minReplicas": 2, "maxReplicas": 2, "maxRestarts": 3}
    container = worker_container(m)
    assert container["name"] == "pytorch"
    assert container["command"] == ["torchrun", "--no-python", "python", "train.py", "--steps=10"]
    tuned = manifest("tuned-torch")
    assert worker_container(tuned)["command"] == ["torchrun", "train.py"]
    assert tuned["spec"]["elasticPolicy"]["maxRestarts"] == 7
    assert manifest("torch-l40s")["spec"]["nprocPerNode"] == "1"


def test_run_policy():
    assert manifest("mpi-h100")["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running", "backoffLimit": 3}
    assert manifest("tuned")["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60, "backoffLimit": 0, "activeDeadlineSeconds": 7200}
    assert manifest("torch-h100")["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"


@pytest.mark.parametrize("name", ["mpi-h100", "torch-b300", "torch-l40s", "tuned"])
def test_worker_pod_placement_security_and_volumes(name):
    m = manifest(name)
    job = JOBS[name]
    pod = worker_pod(m)
    assert pod["nodeSelector"] == {"gpucluster.io/pool": job.pool}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    container = worker_container(m)
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {v["mountPath"]: v["name"] for v in container["volumeMounts"]}
    shm = volumes[mounts["/dev/shm"]]["emptyDir"]
    assert shm["medium"] == "Memory"
    assert shm["sizeLimit"] == f"{int(CFG.pool(job.pool).instance.memory_gib * 0.25)}Gi"
    assert volumes[mounts[job.mount_path]]["persistentVolumeClaim"] == {"claimName": CLAIM}


def test_nccl_tests_mpijob_uses_every_gpu_and_efa_device():
    pool = CFG.pool("h100")
    m = launcher.nccl_test_mpijob(pool, NAMESPACE)
    assert m["metadata"] == {"name": "nccl-tests-h100", "namespace": NAMESPACE,
                             "labels": launcher.labels("nccl-tests-h100", pool)}
    assert m["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    cmd = launcher_command(m)
    assert cmd[2:6] == ["-np", "16", "-N", "8"]
    assert cmd[-13:] == ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "1",
                         "-c", "1", "-n", "100"]
    res = worker_container(m)["resources"]["limits"]
    assert (res["nvidia.com/gpu"], res["vpc.amazonaws.com/efa"]) == ("8", "32")
    assert worker_container(m)["image"] == launcher.NCCL_TESTS_IMAGE
    assert "persistentVolumeClaim" not in str(worker_pod(m)["volumes"])
    p4d = launcher_command(launcher.nccl_test_mpijob(CFG.pool("a100"), NAMESPACE, nodes=4))
    assert p4d[2:6] == ["-np", "32", "-N", "8"]
    assert "FI_EFA_USE_DEVICE_RDMA=1" in p4d


def test_mpirun_has_one_mapping_directive():
    # Open MPI refuses -N together with -map-by ("Conflicting directives for mapping policy").
    from components.spec import launcher as lib

    command = lib.mpirun_command(2, 8, {"NCCL_DEBUG": "INFO"}, ["python", "train.py"])
    mapping = [a for a in command if a in ("-N", "-npernode", "-map-by", "--map-by", "-ppr", "--ppr")]
    assert mapping == ["-N"]
