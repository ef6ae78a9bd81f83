"""The MPIJob / TrainJob / ClusterTrainingRuntime / nccl-tests manifests: upstream CRD schemas, resources,
env, commands, queue labels and run deadlines."""

from __future__ import annotations

import jsonschema
import pytest

from components.core.kube import launcher, queueing, trainer, workers
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import prestep
from tests import k8s
from tests.conftest import stack_config

CRD_FILE = {"MPIJob": "kubeflow.org_mpijobs.yaml", "TrainJob": "trainer.kubeflow.org_trainjobs.yaml",
            "ClusterTrainingRuntime": "trainer.kubeflow.org_clustertrainingruntimes.yaml"}
NAMESPACE = "training"
CLAIM = "fsx"
IMAGE = "210987654321.dkr.ecr.us-east-1.amazonaws.com/train:1.0"

# pool name -> (instance type, GPUs, EFA devices; 0: no EFA resource at all)
POOLS = {
    "a100": ("p4d.24xlarge", 8, 4),
    "h100": ("p5.48xlarge", 8, 32),
    "h200": ("p5en.48xlarge", 8, 16),
    "b300": ("p6-b300.48xlarge", 8, 16),
    "l40s": ("g6e.xlarge", 1, 0),
}


def synthetic():
    """A stack with one pool per type and an mpirun and a torchrun job on each."""
    pools = [{"name": name, "instanceType": itype, "maxNodes": 4} for name, (itype, _, _) in POOLS.items()]
    jobs = []
    for name in POOLS:
        for launcher_name, prefix in (("mpirun", "mpi"), ("torchrun", "torch")):
            jobs.append({"name": f"{prefix}-{name}", "pool": name, "nodes": 2, "launcher": launcher_name,
                         "image": IMAGE, "command": ["python", "train.py", "--steps=10"]})
    jobs.append({"name": "tuned", "pool": "h100", "nodes": 3, "launcher": "mpirun", "image": IMAGE,
                 "command": ["python", "train.py"], "gpusPerNode": 4,
                 "mountPath": "/data",
                 "env": {"NCCL_DEBUG": "WARN", "NCCL_BUFFSIZE": "", "HOROVOD_FUSION_THRESHOLD": "67108864"},
                 "runPolicy": {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60,
                               "activeDeadlineSeconds": 7200, "backoffLimit": 0}})
    jobs.append({"name": "tuned-torch", "pool": "h100", "nodes": 4, "launcher": "torchrun", "image": IMAGE,
                 "command": ["torchrun", "train.py"], "maxRestarts": 7, "gpusPerNode": 4, "mountPath": "/data",
                 "env": {"NCCL_DEBUG": "WARN", "FI_EFA_FORK_SAFE": ""}, "maxCostUsd": 1000,
                 "runPolicy": {"activeDeadlineSeconds": 36000}})
    # Six launchers and the metrics stack need more than dev's 2 x m7i.large.
    return stack_config("dev", {"gpucluster:gpuPools": pools, "gpucluster:jobs": jobs,
                                "gpucluster:systemNodes": {"instanceType": "m7i.xlarge", "count": 2}})


CFG = synthetic()
JOBS = {job.name: job for job in CFG.jobs}
STORAGE = CFG.storage


def ctx(claim: str | None = CLAIM) -> launcher.JobContext:
    return launcher.JobContext(NAMESPACE, claim, STORAGE, CFG.prices)


def manifest(job_name: str) -> dict:
    job = JOBS[job_name]
    return launcher.job_manifest(job, CFG.pool(job.pool), ctx())


def runtime_of(m: dict) -> dict:
    """The ClusterTrainingRuntime a TrainJob names, as components.kubernetes.operators registers it."""
    job = JOBS[m["metadata"]["name"]]
    rt = trainer.runtime(CFG.pool(job.pool), job.max_restarts, CLAIM, job.mount_path)
    assert rt["metadata"]["name"] == m["spec"]["runtimeRef"]["name"]
    return rt


def pod_templates(m: dict) -> dict[str, dict]:
    """role -> pod template of an MPIJob, or of the runtime a TrainJob runs."""
    if m["kind"] == "MPIJob":
        return {role: spec["template"] for role, spec in m["spec"]["mpiReplicaSpecs"].items()}
    if m["kind"] == "TrainJob":
        m = runtime_of(m)
    (node,) = m["spec"]["template"]["spec"]["replicatedJobs"]
    return {"Node": node["template"]["spec"]["template"]}


def worker_pod(m: dict) -> dict:
    templates = pod_templates(m)
    return (templates.get("Worker") or templates["Node"])["spec"]


def worker_container(m: dict) -> dict:
    (container,) = worker_pod(m)["containers"]
    return container


def worker_resources(m: dict) -> dict:
    """What a worker requests, a TrainJob's resourcesPerNode merged over its runtime's (Trainer #3602)."""
    res = {side: dict(v) for side, v in worker_container(m)["resources"].items()}
    if m["kind"] == "TrainJob":
        for side, v in m["spec"]["trainer"].get("resourcesPerNode", {}).items():
            res[side].update(v)
    return res


def launcher_command(m: dict) -> list[str]:
    """mpirun's argv, after the first-contact wrapper (tests/test_first_contact.py) that execs it and the pre-step
    check's (tests/test_prestep_render.py) that execs it in turn on a multi-node job of an EFA pool."""
    (container,) = m["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:2] == ["/bin/sh", "-c"] and command[3] == "gpucluster-first-contact"
    return unwrap_pre_step(command[4:])


def unwrap_pre_step(command: list[str]) -> list[str]:
    """The job's own command inside the pre-step check's wrapper (placement.prestep.wrap), if it has one."""
    if command[:2] == ["/bin/sh", "-c"] and command[3] == "gpucluster-pre-step":
        return command[4:]
    return command


def env_of(m: dict) -> dict[str, str]:
    """The environment the training processes get (a TrainJob's trainer.env upserted over the runtime's)."""
    if m["kind"] == "TrainJob":
        env = {e["name"]: e["value"] for e in worker_container(m)["env"]}
        env.update({e["name"]: e["value"] for e in m["spec"]["trainer"].get("env", []) if "value" in e})
        return {k: v for k, v in env.items() if v != ""}
    cmd = launcher_command(m)
    pairs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-x" and "=" in cmd[i + 1]]
    return dict(pair.split("=", 1) for pair in pairs)


def all_manifests() -> list[dict]:
    manifests = []
    for c in (stack_config("dev"), stack_config("prod"), CFG):
        for j in c.jobs:
            m = launcher.job_manifest(j, c.pool(j.pool), launcher.JobContext(NAMESPACE, CLAIM, c.storage, c.prices))
            manifests.append(m)
            if j.launcher == "torchrun":
                manifests.append(trainer.runtime(c.pool(j.pool), j.max_restarts, CLAIM, j.mount_path))
    return manifests + [launcher.nccl_test_mpijob(pool, NAMESPACE) for pool in CFG.gpu_pools]


@pytest.mark.parametrize("m", all_manifests(), ids=lambda m: f"{m['kind']}-{m['metadata']['name']}")
def test_valid_against_upstream_crd_and_core_pod_schema(m):
    k8s.validate_custom(m, CRD_FILE[m["kind"]])
    # The CRDs do not reject unknown pod fields; the core Pod schema does.
    if m["kind"] == "TrainJob":
        return  # its pods are the runtime's, validated with it
    for role, template in pod_templates(m).items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"x-{role.lower()}", **template["metadata"]},
               "spec": template["spec"]}
        k8s.validate_core(pod, "1.35")


def test_the_trainjob_schema_rejects_fields_removed_in_trainer_2_2():
    # A guard on the guard: the v2.3.0 schema knows no podTemplateOverrides (replaced by runtimePatches).

    bad = manifest("torch-h100")
    bad["spec"]["podTemplateOverrides"] = []
    schema = k8s.crd_schema(CRD_FILE["TrainJob"], "v1alpha1")
    assert "podTemplateOverrides" not in schema["properties"]["spec"]["properties"]
    assert "runtimePatches" in schema["properties"]["spec"]["properties"]
    assert schema["properties"]["spec"]["properties"]["trainer"]["properties"]["numProcPerNode"]["type"] == "integer"
    jsonschema.validate(manifest("torch-h100"), schema)


@pytest.mark.parametrize("pool_name", POOLS)
@pytest.mark.parametrize("prefix", ["mpi", "torch"])
def test_workers_take_the_types_gpus_and_efa_devices(pool_name, prefix):
    itype, gpus, efa = POOLS[pool_name]
    m = manifest(f"{prefix}-{pool_name}")
    res = worker_resources(m)
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


def test_kueue_counts_what_the_trainjob_pods_request():
    # Kueue 0.19.2 computes pod sets with Trainer 2.2.1, which *replaces* the runtime's resources with
    # resourcesPerNode; Trainer 2.3.0 merges. Complete resourcesPerNode makes both give what workers request.
    for name in ("torch-h100", "tuned-torch", "torch-l40s"):
        m = manifest(name)
        replaced = m["spec"]["trainer"]["resourcesPerNode"]
        assert replaced == worker_resources(m), name
        assert {"cpu", "memory", "nvidia.com/gpu"} <= set(replaced["requests"])


def test_partial_node_gpus():
    m = manifest("tuned")
    assert worker_resources(m)["requests"]["nvidia.com/gpu"] == "4"
    assert m["spec"]["slotsPerWorker"] == 4
    torch = manifest("tuned-torch")
    assert worker_resources(torch)["limits"]["nvidia.com/gpu"] == "4"
    assert torch["spec"]["trainer"]["numProcPerNode"] == 4


def test_env_presets_per_type():
    assert env_of(manifest("mpi-a100"))["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env_of(manifest("torch-a100"))["FI_EFA_USE_DEVICE_RDMA"] == "1"
    for name in ("mpi-h100", "torch-h100", "torch-h200", "mpi-b300"):
        env = env_of(manifest(name))
        assert "FI_EFA_USE_DEVICE_RDMA" not in env
        assert env["FI_PROVIDER"] == "efa"
        # aws-ofi-nccl picks its tuner and sizes; the old hand-set values are gone (ADT #1077).
        assert not {"NCCL_TUNER_PLUGIN", "NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE"} & set(env)
    single = env_of(manifest("torch-l40s"))
    assert not any(k.startswith("FI_") for k in single)
    torch = env_of(manifest("torch-h100"))
    assert torch["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert torch["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in env_of(manifest("mpi-h100"))


def test_jobs_learn_where_datasets_and_checkpoints_are():
    env = env_of(manifest("mpi-h100"))
    assert (env["GPUCLUSTER_DATASET_DIR"], env["GPUCLUSTER_CHECKPOINT_DIR"]) == ("/fsx/datasets", "/fsx/checkpoints")
    assert env_of(manifest("tuned"))["GPUCLUSTER_CHECKPOINT_DIR"] == "/data/checkpoints"
    # Loss curves: under the job's own mount, where the TensorBoard reads /fsx/tensorboard.
    assert env["GPUCLUSTER_TENSORBOARD_DIR"] == "/fsx/tensorboard/mpi-h100"
    assert env_of(manifest("tuned"))["GPUCLUSTER_TENSORBOARD_DIR"] == "/data/tensorboard/tuned"


def test_job_env_overrides_win_and_empty_removes():
    env = env_of(manifest("tuned"))
    assert env["NCCL_DEBUG"] == "WARN"
    assert "NCCL_BUFFSIZE" not in env
    assert env["HOROVOD_FUSION_THRESHOLD"] == "67108864"
    assert env["FI_PROVIDER"] == "efa"
    torch = manifest("tuned-torch")
    assert env_of(torch)["NCCL_DEBUG"] == "WARN"
    # Trainer upserts over the runtime's variables: a removed one is set empty there.
    trainer_env = {e["name"]: e["value"] for e in torch["spec"]["trainer"]["env"] if "value" in e}
    assert trainer_env["FI_EFA_FORK_SAFE"] == "" and "FI_EFA_FORK_SAFE" not in env_of(torch)
    assert "FI_PROVIDER" not in trainer_env  # the runtime's, unchanged, not repeated


def test_mpirun_command_line_exact():
    m = manifest("mpi-h100")
    assert launcher_command(m) == [
        "/opt/amazon/openmpi/bin/mpirun", "--allow-run-as-root", "--tag-output", "-np", "16", "-N", "8",
        "--bind-to", "none", "-x", "PATH", "-x", "LD_LIBRARY_PATH",
        "-x", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "-x", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
        "-x", "AWS_REGION", "-x", "AWS_DEFAULT_REGION",
        # torch.distributed's env:// rendezvous: rank 0 on worker 0, by its name in the job's Service.
        "-x", "MASTER_ADDR=mpi-h100-worker-0.mpi-h100.training.svc", "-x", "MASTER_PORT=29500",
        "-x", "FI_PROVIDER=efa", "-x", "FI_EFA_FORK_SAFE=1", "-x", "NCCL_DEBUG=INFO",
        "-x", "NCCL_SOCKET_IFNAME=^lo,docker",
        "-x", "GPUCLUSTER_JOB=mpi-h100",
        "-x", "GPUCLUSTER_DATASET_DIR=/fsx/datasets", "-x", "GPUCLUSTER_CHECKPOINT_DIR=/fsx/checkpoints",
        "-x", "GPUCLUSTER_TENSORBOARD_DIR=/fsx/tensorboard/mpi-h100",
        "python", "train.py", "--steps=10",
    ]
    tuned = launcher_command(manifest("tuned"))
    assert tuned[3:7] == ["-np", "12", "-N", "4"]


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


def test_trainjob_against_our_runtime():
    m = manifest("torch-h100")
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    # Pulumi deletes it in the background: Trainer v2.3.0 re-creates the JobSet of a TrainJob deleted in the
    # foreground (trainer.DELETE_IN_BACKGROUND; seen on the local control plane).
    assert m["metadata"]["annotations"] == {"pulumi.com/deletionPropagationPolicy": "background"}
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": "gpucluster-torch-h100-r3"}
    # Kueue's webhook suspends it and adds its own runtime patch (its manager's entry) on create.
    assert "suspend" not in spec
    # Ours labels the node pods like an MPIJob's (Trainer copies no TrainJob label to its pods), and carries the
    # job's placement: 2 x p5.48xlarge prefer one layer-3 domain (tests/test_placement_render.py).
    # A 2-node job of an EFA pool starts with the pre-step check (tests/test_prestep_render.py): its code's volume.
    assert spec["runtimePatches"] == [{"manager": "gpucluster.io/launcher", "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"metadata": {"labels": {
            "app.kubernetes.io/part-of": "gpucluster", "gpucluster.io/job": "torch-h100",
            "gpucluster.io/pool": "h100"}, "annotations": {
            "kueue.x-k8s.io/podset-preferred-topology": "topology.k8s.aws/network-node-layer-3"}},
            "spec": {"volumes": [{"name": "gpucluster-goodput-code",
                                  "configMap": {"name": "gpucluster-goodput-code", "defaultMode": 0o444,
                                                "optional": True}}],
                     "containers": [{"name": "node", "volumeMounts": [{
                         "name": "gpucluster-goodput-code", "mountPath": "/opt/gpucluster/goodput/gpucluster_goodput",
                         "readOnly": True}]}]}}}}}]}}}}]
    assert spec["trainer"] == {
        "numNodes": 2, "numProcPerNode": 8, "image": IMAGE,
        "command": prestep.torchrun_command(["torchrun", "--no-python", "python", "train.py", "--steps=10"], "h100"),
        "env": [{"name": "GPUCLUSTER_JOB", "value": "torch-h100"},
                {"name": "GPUCLUSTER_DATASET_DIR", "value": "/fsx/datasets"},
                {"name": "GPUCLUSTER_CHECKPOINT_DIR", "value": "/fsx/checkpoints"},
                {"name": "GPUCLUSTER_TENSORBOARD_DIR", "value": "/fsx/tensorboard/torch-h100"},
                {"name": "GPUCLUSTER_PRE_STEP_EFA_DEVICES", "value": "32"},
                {"name": "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS", "value": "487"},
                {"name": "GPUCLUSTER_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resourcesPerNode": workers.worker_resources(CFG.pool("h100"), 8),
    }
    assert "activeDeadlineSeconds" not in spec
    tuned = manifest("tuned-torch")
    assert unwrap_pre_step(tuned["spec"]["trainer"]["command"]) == ["torchrun", "train.py"]
    assert tuned["spec"]["runtimeRef"]["name"] == "gpucluster-torch-h100-r7-m" + __import__(
        "hashlib").sha256(b"/data").hexdigest()[:6]
    assert manifest("torch-l40s")["spec"]["trainer"]["numProcPerNode"] == 1


def test_runtime_is_the_trainer_node_with_a_whole_gang_restart():
    rt = runtime_of(manifest("tuned-torch"))
    assert rt["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "torch"
    assert rt["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}  # no numProcPerNode since Trainer 2.2
    jobset = rt["spec"]["template"]["spec"]
    assert jobset["failurePolicy"] == {"maxRestarts": 7}
    (node,) = jobset["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    assert node["template"]["spec"]["backoffLimit"] == 0
    pod = node["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    assert container["name"] == "node"


def test_a_job_with_its_own_mount_path_gets_its_own_runtime():
    tuned = manifest("tuned-torch")
    # The mount is the runtime's: our patch carries pod metadata (labels, a topology request) and, as a 4-node job
    # of an EFA pool, the pre-step check's code; never the file system's volume.
    (patch,) = tuned["spec"]["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [v["name"] for v in node["template"]["spec"]["template"]["spec"]["volumes"]] == ["gpucluster-goodput-code"]
    mounts = {m["mountPath"]: m["name"] for m in worker_container(tuned)["volumeMounts"]}
    assert mounts == {"/dev/shm": "dshm", "/data": "fsx"}
    assert trainer.runtime_name(CFG.pool("h100"), 3) == "gpucluster-torch-h100-r3"


def test_run_policy_and_deadlines():
    assert manifest("mpi-h100")["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 3}
    assert manifest("tuned")["spec"]["runPolicy"] == {
        "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60, "backoffLimit": 0, "activeDeadlineSeconds": 7200}
    # maxCostUsd 1000 on 4 x p5.48xlarge at $55.04/h buys 16,351 s, shorter than activeDeadlineSeconds 36000:
    # the TrainJob's deadline and Kueue's admitted-time bound.
    tuned = manifest("tuned-torch")
    assert tuned["spec"]["activeDeadlineSeconds"] == 16351
    assert tuned["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "16351"
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in manifest("mpi-h100")["metadata"]["labels"]


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_job_is_queued_with_its_priority(name):
    labels = manifest(name)["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == queueing.LOCAL_QUEUE == "gpu"
    assert labels["kueue.x-k8s.io/priority-class"] == "gpucluster-training"
    assert labels["gpucluster.io/job"] == name


@pytest.mark.parametrize("name", ["mpi-h100", "torch-b300", "torch-l40s", "tuned", "tuned-torch"])
def test_worker_pod_placement_security_volumes_and_scale_down_protection(name):
    m = manifest(name)
    job = JOBS[name]
    pod = worker_pod(m)
    assert pod["nodeSelector"] == {"gpucluster.io/pool": job.pool}
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    templates = pod_templates(m)
    template = templates.get("Worker") or templates["Node"]
    # Next to the job's Kueue topology request, if any (tests/test_placement_render.py).
    assert template["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    container = worker_container(m)
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {v["mountPath"]: v["name"] for v in container["volumeMounts"]}
    shm = volumes[mounts["/dev/shm"]]["emptyDir"]
    assert shm["medium"] == "Memory"
    assert shm["sizeLimit"] == f"{int(CFG.pool(job.pool).instance.memory_gib * 0.25)}Gi"
    claim_mount = mounts.get(job.mount_path) or mounts["/fsx"]
    assert volumes[claim_mount]["persistentVolumeClaim"] == {"claimName": CLAIM}


def test_launcher_pods_are_not_protected_from_scale_down():
    # They run on the fixed-size system nodes; only GPU workers hold nodes that scale.
    launcher_template = pod_templates(manifest("mpi-h100"))["Launcher"]
    assert "annotations" not in launcher_template["metadata"]


def test_nccl_tests_mpijob_uses_every_gpu_and_efa_device_and_goes_first():
    pool = CFG.pool("h100")
    m = launcher.nccl_test_mpijob(pool, NAMESPACE)
    assert m["metadata"] == {"name": "nccl-tests-h100", "namespace": NAMESPACE,
                             "labels": {**workers.labels("nccl-tests-h100", pool),
                                        "kueue.x-k8s.io/queue-name": "gpu",
                                        "kueue.x-k8s.io/priority-class": "gpucluster-fabric-test",
                                        "kueue.x-k8s.io/max-exec-time-seconds": "1800"}}
    assert m["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    cmd = launcher_command(m)
    assert cmd[3:7] == ["-np", "16", "-N", "8"]
    assert cmd[-13:] == ["/usr/local/bin/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "1",
                         "-c", "1", "-n", "100"]
    res = worker_container(m)["resources"]["limits"]
    assert (res["nvidia.com/gpu"], res["vpc.amazonaws.com/efa"]) == ("8", "32")
    assert worker_container(m)["image"] == launcher.FABRIC_TEST_IMAGE
    assert launcher.FABRIC_TEST_IMAGE == "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"
    assert "persistentVolumeClaim" not in str(worker_pod(m)["volumes"])
    p4d = launcher_command(launcher.nccl_test_mpijob(CFG.pool("a100"), NAMESPACE, nodes=4))
    assert p4d[3:7] == ["-np", "32", "-N", "8"]
    assert "FI_EFA_USE_DEVICE_RDMA=1" in p4d


def test_mpirun_has_one_mapping_directive():
    # Open MPI refuses -N together with -map-by ("Conflicting directives for mapping policy").
    command = launcher.mpirun_command(2, 8, {"NCCL_DEBUG": "INFO"}, ["python", "train.py"])
    mapping = [a for a in command if a in ("-N", "-npernode", "-map-by", "--map-by", "-ppr", "--ppr")]
    assert mapping == ["-N"]
    assert command[0] == "/opt/amazon/openmpi/bin/mpirun"  # orted is not on PATH over ssh (mpi-operator #488)
