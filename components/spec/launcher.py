"""Pure builders of the job manifests: MPIJob (mpirun), PyTorchJob (torchrun), nccl-tests.

Plain dicts in, plain dicts out, no Pulumi: components/training_job.py
registers them. Every worker pod takes a whole node of its pool:

- `nvidia.com/gpu` = the GPUs the job uses per node (all of the type's
  unless the job sets gpusPerNode), `vpc.amazonaws.com/efa` = every EFA
  device of the type and `hugepages-2Mi: 5120Mi` on EFA pools (the nccl-tests
  MPIJob of aws-samples/awsome-distributed-training,
  micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml); requests equal
  limits, as Kubernetes demands for extended resources and huge pages.
- memory and CPU: NODE_SHARE (80 %) of the node, leaving the rest to kubelet's
  reservation and the DaemonSets (CNI, device plugins, FSx CSI node);
  memory limit = request, no CPU limit (CFS throttling would stall NCCL
  proxy threads).
- /dev/shm: a memory-backed emptyDir of SHM_SHARE (25 %) of the node (NCCL's
  intra-node transport and data loader workers; the container default is 64 MiB).
- the FSx claim at job.mountPath; nodeSelector gpucluster.io/pool and a
  toleration for the GPU taint; capability IPC_LOCK, which libfabric's EFA
  provider needs to pin memory (awsome-distributed-training EKS examples).

The NCCL/libfabric environment is components.nccl's preset for the
instance type with the job's env laid over it.
"""

from __future__ import annotations

from typing import Any

from components.spec import nccl, nodepool
from components.spec.config import GpuPoolConfig, JobConfig, RunPolicyConfig
from components.spec.nodepool import SYSTEM_NODE_LABEL

MPIJOB_API_VERSION = "kubeflow.org/v2beta1"
PYTORCHJOB_API_VERSION = "kubeflow.org/v1"
KINDS = {"mpirun": (MPIJOB_API_VERSION, "MPIJob"), "torchrun": (PYTORCHJOB_API_VERSION, "PyTorchJob")}

NODE_SHARE = 0.8
SHM_SHARE = 0.25

# mpirun only starts processes over ssh: a little CPU and memory on a system node.
LAUNCHER_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}

# The nccl-tests image aws-samples/awsome-distributed-training publishes, tagged
# with the versions its micro-benchmarks/nccl-tests/nccl-tests.Dockerfile builds
# (CUDA 12.8.1, EFA installer 1.43.2, aws-ofi-nccl v1.16.3, NCCL v2.27.7-1,
# nccl-tests v2.16.9): NCCL_TUNER_PLUGIN in components.nccl points into it.
NCCL_TESTS_IMAGE = "public.ecr.aws/hpc-cloud/nccl-tests:cuda12.8.1-efa1.43.2-ofiv1.16.3-ncclv2.27.7-1-testsv2.16.9"
# The same repository's MPIJob: 8 B to 16 GiB, doubling, one GPU per rank,
# check results once, 100 iterations per size.
ALL_REDUCE_PERF = ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "1",
                   "-c", "1", "-n", "100"]

# Open MPI over TCP for its own traffic (NCCL carries the data over EFA):
# no UCX, never loopback or the docker bridge (awsome-distributed-training
# nccl-tests.yaml: -np N -N GPUs --bind-to none, and no second mapping
# directive, which Open MPI rejects next to -N; -x PATH -x LD_LIBRARY_PATH:
# processes started over ssh do not get the image's environment).
MPI_TRANSPORT = ["--mca", "pml", "^ucx", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_exclude", "lo,docker0"]

SHM_VOLUME = "dshm"
DATA_VOLUME = "fsx"


def gpus_per_node(job: JobConfig, pool: GpuPoolConfig) -> int:
    return job.gpus_per_node or pool.instance.gpu_count


def job_env(job: JobConfig, pool: GpuPoolConfig) -> dict[str, str]:
    """The type's NCCL/EFA preset, the job's env over it (job wins, "" or null removes)."""
    return nccl.merge_env(nccl.preset_env(pool.instance_type, pool.efa_enabled), job.env)


def labels(job_name: str, pool: GpuPoolConfig) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": "gpucluster", "gpucluster.io/job": job_name,
            nodepool.POOL_LABEL: pool.name}


def run_policy(policy: RunPolicyConfig) -> dict[str, Any]:
    """The operators' run policy: pods cleaned when the job ends, so GPUs free up and pools scale down.

    No TTL unless asked for: Pulumi owns the job object, and a TTL deleting it
    behind Pulumi's back would make the next `pulumi up --refresh` re-run it.
    """
    out: dict[str, Any] = {"cleanPodPolicy": policy.clean_pod_policy, "backoffLimit": policy.backoff_limit}
    if policy.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        out["activeDeadlineSeconds"] = policy.active_deadline_seconds
    return out


def worker_resources(pool: GpuPoolConfig, gpus: int) -> dict[str, dict[str, str]]:
    instance = pool.instance
    amounts = {
        nodepool.GPU_RESOURCE: str(gpus),
        "cpu": f"{int(instance.vcpus * NODE_SHARE * 1000)}m",
        "memory": f"{int(instance.memory_gib * NODE_SHARE)}Gi",
    }
    if pool.efa_enabled:
        amounts[nodepool.EFA_RESOURCE] = str(nodepool.efa_interfaces(pool))
    hugepages = nodepool.hugepages_2mi(pool)
    if hugepages:
        amounts[nodepool.HUGEPAGES_RESOURCE] = hugepages
    limits = {k: v for k, v in amounts.items() if k != "cpu"}
    return {"requests": amounts, "limits": limits}


def worker_container(name: str, image: str, pool: GpuPoolConfig, gpus: int,
                     mount_path: str | None) -> dict[str, Any]:
    """A GPU worker container; `mount_path` None: no shared file system."""
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if mount_path is not None:
        mounts.append({"name": DATA_VOLUME, "mountPath": mount_path})
    return {
        "name": name,
        "image": image,
        "resources": worker_resources(pool, gpus),
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
        "volumeMounts": mounts,
    }


def worker_pod_spec(pool: GpuPoolConfig, container: dict[str, Any], claim_name: str | None) -> dict[str, Any]:
    """Pins the pod to its pool's nodes; `claim_name` None: no shared file system."""
    volumes: list[dict[str, Any]] = [{
        "name": SHM_VOLUME,
        "emptyDir": {"medium": "Memory", "sizeLimit": f"{int(pool.instance.memory_gib * SHM_SHARE)}Gi"},
    }]
    if claim_name is not None:
        volumes.append({"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}})
    return {
        "nodeSelector": {nodepool.POOL_LABEL: pool.name},
        "tolerations": [nodepool.GPU_TAINT.toleration()],
        "containers": [container],
        "volumes": volumes,
    }


def mpirun_command(nodes: int, gpus: int, env: dict[str, str], program: list[str] | tuple[str, ...]) -> list[str]:
    """mpirun, one rank per GPU, every env var passed to the ranks with -x."""
    cmd = ["mpirun", "--allow-run-as-root", "-np", str(nodes * gpus), "-N", str(gpus),
           "--bind-to", "none", "-x", "PATH", "-x", "LD_LIBRARY_PATH"]
    for key, value in env.items():
        cmd += ["-x", f"{key}={value}"]
    return [*cmd, *MPI_TRANSPORT, *program]


def _mpijob(name: str, namespace: str, pool: GpuPoolConfig, nodes: int, gpus: int, image: str,
            command: list[str], worker: dict[str, Any], claim_name: str | None,
            policy: RunPolicyConfig) -> dict[str, Any]:
    meta_labels = labels(name, pool)
    return {
        "apiVersion": MPIJOB_API_VERSION,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
        "spec": {
            "slotsPerWorker": gpus,
            "mpiImplementation": "OpenMPI",
            # Workers may wait minutes for GPU nodes to scale from zero: a
            # launcher started at once would burn its retries on ssh failures.
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": run_policy(policy),
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "metadata": {"labels": meta_labels},
                        "spec": {
                            "nodeSelector": dict(SYSTEM_NODE_LABEL),
                            "containers": [{"name": "launcher", "image": image, "command": command,
                                            "resources": LAUNCHER_RESOURCES}],
                        },
                    },
                },
                "Worker": {
                    "replicas": nodes,
                    # No command: the MPI Operator runs sshd in workers that set none.
                    "template": {"metadata": {"labels": meta_labels},
                                 "spec": worker_pod_spec(pool, worker, claim_name)},
                },
            },
        },
    }


def mpijob(job: JobConfig, pool: GpuPoolConfig, claim_name: str, namespace: str,
           env: dict[str, str]) -> dict[str, Any]:
    """MPIJob kubeflow.org/v2beta1: one launcher on a system node, job.nodes GPU workers."""
    gpus = gpus_per_node(job, pool)
    worker = worker_container("worker", job.image, pool, gpus, job.mount_path)
    command = mpirun_command(job.nodes, gpus, env, job.command)
    return _mpijob(job.name, namespace, pool, job.nodes, gpus, job.image, command, worker, claim_name,
                   job.run_policy)


def torchrun_command(command: tuple[str, ...] | list[str]) -> list[str]:
    """The job's command under torchrun.

    The Training Operator passes the rendezvous, node count, processes per
    node and restarts as PET_* variables, which torchrun reads for its
    flags; --no-python lets the command be any executable (python -m ...,
    a wrapper script).
    """
    if command[0] == "torchrun":
        return list(command)
    return ["torchrun", "--no-python", *command]


def pytorchjob(job: JobConfig, pool: GpuPoolConfig, claim_name: str, namespace: str,
               env: dict[str, str]) -> dict[str, Any]:
    """PyTorchJob kubeflow.org/v1, elastic: Worker replicas only, c10d rendezvous on worker 0.

    With an elasticPolicy the operator needs no Master: it points every
    worker's rendezvous at <job>-worker-0 (Kubeflow Training Operator docs,
    "PyTorchJob", elastic training; the same Worker-only c10d shape as the
    FSDP test case's Kubernetes template in awsome-distributed-training).
    min = max = job.nodes: a fixed-size job that still survives a lost
    worker by re-rendezvous, up to maxRestarts.
    """
    gpus = gpus_per_node(job, pool)
    meta_labels = labels(job.name, pool)
    # The operator requires the container named "pytorch".
    container = worker_container("pytorch", job.image, pool, gpus, job.mount_path)
    container["command"] = torchrun_command(job.command)
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {
        "apiVersion": PYTORCHJOB_API_VERSION,
        "kind": "PyTorchJob",
        "metadata": {"name": job.name, "namespace": namespace, "labels": meta_labels},
        "spec": {
            # spec.nprocPerNode, not the deprecated elasticPolicy.nProcPerNode (CRD, v1.7+).
            "nprocPerNode": str(gpus),
            "elasticPolicy": {
                "rdzvBackend": "c10d",
                "minReplicas": job.nodes,
                "maxReplicas": job.nodes,
                "maxRestarts": job.max_restarts,
            },
            "runPolicy": run_policy(job.run_policy),
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": job.nodes,
                    "restartPolicy": "OnFailure",
                    "template": {"metadata": {"labels": meta_labels},
                                 "spec": worker_pod_spec(pool, container, claim_name)},
                },
            },
        },
    }


def job_manifest(job: JobConfig, pool: GpuPoolConfig, claim_name: str, namespace: str) -> dict[str, Any]:
    """The job's MPIJob or PyTorchJob, per its launcher, with its NCCL environment."""
    build = mpijob if job.launcher == "mpirun" else pytorchjob
    return build(job, pool, claim_name, namespace, job_env(job, pool))


def nccl_test_name(pool: GpuPoolConfig) -> str:
    return f"nccl-tests-{pool.name}"


def nccl_test_mpijob(pool: GpuPoolConfig, namespace: str, nodes: int = 2,
                     image: str = NCCL_TESTS_IMAGE) -> dict[str, Any]:
    """all_reduce_perf over `nodes` whole nodes of the pool: every GPU, every EFA device."""
    gpus = pool.instance.gpu_count
    worker = worker_container("worker", image, pool, gpus, None)
    command = mpirun_command(nodes, gpus, nccl.preset_env(pool.instance_type, pool.efa_enabled), ALL_REDUCE_PERF)
    return _mpijob(nccl_test_name(pool), namespace, pool, nodes, gpus, image, command, worker, None,
                   RunPolicyConfig())
