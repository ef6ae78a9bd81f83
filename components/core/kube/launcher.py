"""Pure builders of the job manifests: MPIJob (mpirun), TrainJob (torchrun), the nccl-tests fabric check.

Plain dicts in, plain dicts out, no Pulumi: components/kubernetes/training_job.py
registers them. Workers are the whole-node pods of components.core.kube.workers;
every job is queued in Kueue (components.core.kube.queueing) with its run
deadline, and `launcher: torchrun` jobs are Kubeflow Trainer v2 TrainJobs
(components.core.kube.trainer). A job's GPU workers, and only they, carry its
placement as Kueue's pod-set topology annotation (workers.worker_annotations).

Images: the launchers need what the image provides, not what the
cluster does. An MPIJob v2 image needs an OpenSSH server, root (the
operator's ssh setup), Open MPI at /opt/amazon/openmpi and, on EFA pools,
libfabric with aws-ofi-nccl (the EFA installer puts both in place); a
TrainJob image needs PyTorch with the same EFA libraries. AWS's Deep
Learning Containers for PyTorch (EC2/EKS variant) have all of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.core import images, job_identity
from components.core import versions as v
from components.core.config import (
    CpuPoolConfig,
    GpuPoolConfig,
    JobConfig,
    RunPolicyConfig,
    StorageConfig,
)
from components.core.hardware import nccl
from components.core.kube import network_policy, parameter_server, queueing, trainer, workers
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import prestep
from components.core.placement.topology import Placement, fabric_test_placement, job_placement
from components.core.planning import teardown

MPIJOB_API_VERSION = "kubeflow.org/v2beta1"
KINDS = {"mpirun": (MPIJOB_API_VERSION, "MPIJob"), "torchrun": (trainer.TRAINJOB_API_VERSION, "TrainJob"),
         "ps": (parameter_server.API_VERSION, parameter_server.KIND)}

# mpirun only starts processes over ssh: a little CPU and memory on a system node.
LAUNCHER_RESOURCES = {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}

# By absolute path: over ssh, orted and mpirun are not on PATH (mpi-operator
# #488); awsome-distributed-training's nccl-tests MPIJob calls it so.
MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
MASTER_PORT = "29500"  # torch.distributed's default (torchrun --master-port)

# The fabric test runs nccl-tests from the pinned PyTorch Deep Learning
# Container (components.core.versions): the NCCL, EFA and aws-ofi-nccl that
# training with that image uses.
FABRIC_TEST_IMAGE = v.DLC_PYTORCH_IMAGE
# nccl-tests over every size from 8 B to 16 GiB, doubling, one GPU per rank,
# results checked once, 100 iterations per size (awsome-distributed-training
# nccl-tests.yaml), with the DLC's binary.
ALL_REDUCE_PERF = ["/usr/local/bin/all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "1",
                   "-c", "1", "-n", "100"]
FABRIC_TEST_NODES = 2
# The fabric test runs for minutes; this bounds it should it hang.
FABRIC_TEST_DEADLINE_SECONDS = 1800


@dataclass(frozen=True)
class JobContext:
    """What every job of a stack shares: where it runs and what it mounts."""

    namespace: str
    claim_name: str | None  # the FSx ReadWriteMany claim; None: no shared file system
    storage: StorageConfig | None = None
    prices: dict[str, float] | None = None
    cpu_pools: tuple[CpuPoolConfig, ...] = ()  # where `launcher: ps` jobs put their parameter servers
    image_cache: str | None = None  # images.cache_base(): public ECR images are pulled through it


def run_policy(policy: RunPolicyConfig, deadline_seconds: int | None) -> dict[str, Any]:
    """The MPI Operator's run policy: pods cleaned when the job ends.

    Not `suspend`: Kueue's webhook suspends every queued job on create (its
    failurePolicy Fail means none gets past it) and unsuspends it on
    admission; a suspend of ours would be a field Kueue then changes under
    Pulumi.

    No TTL unless asked for: Pulumi owns the job object, and a TTL deleting it
    behind Pulumi's back would make the next `pulumi up --refresh` re-run it.
    """
    out: dict[str, Any] = {"cleanPodPolicy": policy.clean_pod_policy, "backoffLimit": policy.backoff_limit}
    if policy.ttl_seconds_after_finished is not None:
        out["ttlSecondsAfterFinished"] = policy.ttl_seconds_after_finished
    if deadline_seconds is not None:
        out["activeDeadlineSeconds"] = deadline_seconds
    return out


def mpirun_command(nodes: int, gpus: int, env: dict[str, str], program: list[str] | tuple[str, ...],
                   secret: frozenset[str] = frozenset()) -> list[str]:
    """mpirun, one rank per GPU, every env var passed to the ranks with -x.

    As awslabs/awsome-distributed-ai's nccl-tests MPIJob runs it after #1077:
    no --mca transport settings (AWS's EFA team found them unnecessary);
    -x PATH -x LD_LIBRARY_PATH because processes started over ssh do not get
    the image's environment; -N with no second mapping directive, which Open
    MPI rejects next to it. For the same reason the jobs' AWS credentials
    (job_identity.POD_IDENTITY_ENV, which EKS puts in each pod) are passed on
    by name: each worker pod has the same values, its own token at that path.
    """
    cmd = [MPIRUN, "--allow-run-as-root", "--tag-output", "-np", str(nodes * gpus), "-N", str(gpus),
           "--bind-to", "none", "-x", "PATH", "-x", "LD_LIBRARY_PATH"]
    for key in job_identity.POD_IDENTITY_ENV:
        cmd += ["-x", key]
    for key, value in env.items():
        # A secret goes by name: mpirun exports the launcher's own value (from the job's Secret).
        cmd += ["-x", key if key in secret else f"{key}={value}"]
    return [*cmd, *program]


def _launcher_pod(image: str, command: list[str], grace_seconds: int | None,
                  env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "launcher", "image": image, "command": command,
                                 "resources": LAUNCHER_RESOURCES}
    if env:
        container["env"] = env
    pod: dict[str, Any] = {"nodeSelector": dict(SYSTEM_NODE_LABEL), "containers": [container]}
    if grace_seconds is not None:
        # mpirun is the launcher's PID 1: SIGTERM reaches the ranks through it,
        # so it gets the workers' grace too.
        pod["terminationGracePeriodSeconds"] = grace_seconds
    return pod


def mpijob_manifest(name: str, ctx: JobContext, pool: GpuPoolConfig, nodes: int, gpus: int, image: str,
                    command: list[str], worker: dict[str, Any], claim_name: str | None, policy: RunPolicyConfig,
                    priority: str, deadline: int | None, grace_seconds: int | None = None,
                    metrics_port: int | None = None,
                    launcher_env: list[dict[str, Any]] | None = None,
                    placement: Placement | None = None) -> dict[str, Any]:
    """`placement`: the workers' Kueue topology request (workers.worker_annotations); the launcher asks for none:
    it runs on the system flavor, which has no topology, and a pod set asking for one there gets no flavor."""
    pod_labels = workers.labels(name, pool)
    return {
        "apiVersion": MPIJOB_API_VERSION,
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ctx.namespace,
                     "labels": {**pod_labels, **queueing.workload_labels(priority, deadline)}},
        "spec": {
            "slotsPerWorker": gpus,
            "mpiImplementation": "OpenMPI",
            # Kueue admits launcher and workers together, by quota, before any
            # pod exists, so this does not deadlock the way pod-level gang
            # schedulers do (mpi-operator #608); it keeps the launcher from
            # burning its retries on ssh while the nodes still boot.
            "launcherCreationPolicy": "WaitForWorkersReady",
            "runPolicy": run_policy(policy, deadline),
            "mpiReplicaSpecs": {
                # No topology annotation: Kueue v0.19.2 skips a flavor without spec.topologyName for a pod set
                # asking for one ("Flavor %q does not support TopologyAwareScheduling",
                # pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS), so a
                # launcher asking for one would find no flavor and the job would never be admitted.
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": {
                        "metadata": {"labels": pod_labels},
                        # Its first ssh to each worker retries: a new pod's first flows may be dropped.
                        "spec": _launcher_pod(image, network_policy.ssh_first_contact(command), grace_seconds,
                                              launcher_env),
                    },
                },
                "Worker": {
                    "replicas": nodes,
                    # No command: the MPI Operator runs sshd in workers that set none.
                    "template": {"metadata": {"labels": workers.worker_labels(name, pool, metrics_port),
                                              "annotations": workers.worker_annotations(placement, pool)},
                                 "spec": workers.worker_pod_spec(pool, worker, claim_name, grace_seconds)},
                },
            },
        },
    }


def mpijob(job: JobConfig, pool: GpuPoolConfig, ctx: JobContext,
           secret: frozenset[str] = frozenset()) -> dict[str, Any]:
    """MPIJob kubeflow.org/v2beta1: one launcher on a system node, job.nodes GPU workers.

    Secret env values reach the launcher from the job's Secret and the ranks
    through `mpirun -x NAME`: they are never in the command line."""
    gpus = workers.gpus_per_node(job, pool)
    worker = workers.worker_container("worker", job.image, pool, gpus, job.mount_path)
    # torch.distributed's env:// rendezvous under mpirun: rank 0 runs on worker 0, whose stable name the
    # operator gives it (<job>-worker-0 in the job's headless Service; mpi-operator v0.8 newConfigMap).
    env = {"MASTER_ADDR": f"{job.name}-worker-0.{job.name}.{ctx.namespace}.svc", "MASTER_PORT": MASTER_PORT,
           **workers.job_env(job, pool, ctx.storage)}
    command = mpirun_command(job.nodes, gpus, env, job.command, secret)
    checked = prestep.applies(job, pool)
    if checked:
        # The check's mpirun first: the same flags and env, its own program and port (placement.prestep).
        command = prestep.mpirun_command(command, mpirun_command(job.nodes, gpus, prestep.rank_env(env, pool),
                                                                 prestep.RANK_PROGRAM, secret), pool.name)
        worker["env"] = [dict(prestep.NODE_NAME_ENV)]
    launcher_env = [workers.env_var(k, "", job.name, secret) for k in env if k in secret]
    manifest = mpijob_manifest(job.name, ctx, pool, job.nodes, gpus, job.image, command, worker, ctx.claim_name,
                               job.run_policy, job.priority_class,
                               teardown.deadline_seconds(job, pool, ctx.prices),
                               job.termination_grace_period_seconds, job.metrics_port, launcher_env,
                               job_placement(job, pool))
    for replica in manifest["spec"]["mpiReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        if job.scripts:
            pod.setdefault("volumes", []).append(workers.scripts_volume(job.name))
            pod["containers"][0].setdefault("volumeMounts", []).append(dict(workers.SCRIPTS_MOUNT))
        if checked:  # the launcher runs the check's driver, the workers its ranks
            prestep.add_code(pod, pod["containers"][0])
    return manifest


def job_manifest(job: JobConfig, pool: GpuPoolConfig, ctx: JobContext,
                 secret: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The job's MPIJob, TrainJob or JobSet, per its launcher; `secret`: env names whose values are in its Secret."""
    cached = images.through_cache(job.image, ctx.image_cache)
    if cached != job.image:
        job = job.model_copy(update={"image": cached})
    if job.launcher == "mpirun":
        return mpijob(job, pool, ctx, secret)
    if job.launcher == "ps":
        ps_pool = next(p for p in ctx.cpu_pools if p.name == job.ps_pool)
        return parameter_server.jobset(job, pool, ps_pool, ctx.namespace, ctx.claim_name, ctx.storage,
                                       teardown.deadline_seconds(job, pool, ctx.prices, ps_pool), secret,
                                       job_placement(job, pool))
    return trainer.trainjob(job, pool, ctx.namespace, workers.job_env(job, pool, ctx.storage),
                            teardown.deadline_seconds(job, pool, ctx.prices), ctx.claim_name, secret,
                            job_placement(job, pool))


def nccl_test_name(pool: GpuPoolConfig) -> str:
    return f"nccl-tests-{pool.name}"


def nccl_test_mpijob(pool: GpuPoolConfig, namespace: str, nodes: int = FABRIC_TEST_NODES,
                     image: str = FABRIC_TEST_IMAGE, image_cache: str | None = None) -> dict[str, Any]:
    """all_reduce_perf over `nodes` whole nodes of the pool: every GPU, every EFA device, queued first, preferably
    within one network domain (placement.topology.fabric_test_placement)."""
    image = images.through_cache(image, image_cache)
    gpus = pool.instance.gpu_count
    worker = workers.worker_container("worker", image, pool, gpus, None)
    command = mpirun_command(nodes, gpus, nccl.preset_env(pool.instance_type, pool.efa_enabled), ALL_REDUCE_PERF)
    return mpijob_manifest(nccl_test_name(pool), JobContext(namespace, None), pool, nodes, gpus, image, command,
                           worker, None, RunPolicyConfig(), queueing.FABRIC_TEST_PRIORITY,
                           FABRIC_TEST_DEADLINE_SECONDS, placement=fabric_test_placement(pool))
