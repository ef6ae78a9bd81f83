"""The GPU worker pod every launcher uses: whole nodes, every device, protected from scale-down (pure).

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
- `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`: scale-down never
  drains a node under a running worker (cluster-autoscaler FAQ.md; utils/drain).
- Kueue's pod-set topology annotation on the workers' template only
  (worker_annotations): the job's placement (components.core.placement).
"""

from __future__ import annotations

from typing import Any

from components.core.config import CpuPoolConfig, GpuPoolConfig, JobConfig, StorageConfig
from components.core.config.jobs import SCRIPTS_DIR
from components.core.hardware import catalog, frameworks, nccl
from components.core.kube import nodepool
from components.core.placement import topology
from components.core.storage.fsx import directory

NODE_SHARE = 0.8
SHM_SHARE = 0.25
SHM_VOLUME = "dshm"
DATA_VOLUME = "fsx"
TENSORBOARD_SUBDIR = "tensorboard"
# A worker pod serving metrics carries its port here; the jobs' PodMonitor scrapes <pod IP>:<port>
# (components.core.observability.alerts.job_pod_monitor).
METRICS_PORT_LABEL = "gpucluster.io/metrics-port"
JOB_LABEL = "gpucluster.io/job"
METRICS_PORT_ENV = "GPUCLUSTER_METRICS_PORT"
SCRIPTS_VOLUME = "scripts"
SCRIPTS_ENV = "GPUCLUSTER_SCRIPTS_DIR"
JOB_ENV = "GPUCLUSTER_JOB"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
POD_ANNOTATIONS = {SAFE_TO_EVICT: "false"}
# Kueue v0.19.2 gives a pod set that asks for no topology none of a ClusterQueue's topology flavors unless every
# flavor of the queue has one (pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS:
# "Flavor %q supports only TopologyAwareScheduling"; isTASImplied needs cq.IsTASOnly()), and our queues hold the
# system flavor too. So workers on a pool with a topology that ask for no placement ask for it unconstrained
# (apis/kueue/v1beta2/topology_types.go PodSetUnconstrainedTopologyAnnotation, a boolean: admitted wherever
# there is room); without it they would never be admitted.
UNCONSTRAINED_TOPOLOGY = "kueue.x-k8s.io/podset-unconstrained-topology"


def topology_annotations(placement: topology.Placement | None, pool: GpuPoolConfig) -> dict[str, str]:
    """The Kueue pod-set annotation of a job's GPU workers: its placement's; unconstrained when it has none on a
    pool with a topology; nothing on a pool without one (no TAS flavor: the job renders as it always did)."""
    if placement is not None:
        return placement.annotation
    return {UNCONSTRAINED_TOPOLOGY: "true"} if topology.pool_layers(pool) else {}


def worker_annotations(placement: topology.Placement | None, pool: GpuPoolConfig) -> dict[str, str]:
    """A GPU worker pod template's annotations. Never a launcher's, chief's or parameter server's: they run on
    flavors without a topology, where a pod set asking for one gets no flavor (checkPodSetAndFlavorMatchForTAS:
    "Flavor %q does not support TopologyAwareScheduling"), so the job would never be admitted."""
    return {**POD_ANNOTATIONS, **topology_annotations(placement, pool)}


def gpus_per_node(job: JobConfig, pool: GpuPoolConfig) -> int:
    return job.gpus_per_node or pool.instance.gpu_count


def job_env(job: JobConfig, pool: GpuPoolConfig, storage: StorageConfig | None = None) -> dict[str, str]:
    """The type's NCCL/EFA preset, where the data lives, then the job's env over it (job wins, "" removes)."""
    env = nccl.preset_env(pool.instance_type, pool.efa_enabled, torch=job.launcher == "torchrun")
    if job.launcher == "mpirun":
        env.update(frameworks.preset_env(job.framework))
    env[JOB_ENV] = job.name  # what a script names its checkpoints and runs by
    if storage is not None:
        # The bucket is linked at the file system's root, so its prefixes are
        # directories under the mount (components.core.storage.fsx.BucketLink).
        env["GPUCLUSTER_DATASET_DIR"] = job.mount_path.rstrip("/") + directory(storage.dataset_prefix)
        env["GPUCLUSTER_CHECKPOINT_DIR"] = job.mount_path.rstrip("/") + directory(storage.checkpoint_prefix)
        # Loss curves: the TensorBoard on the system nodes serves <mount>/tensorboard read-only.
        env["GPUCLUSTER_TENSORBOARD_DIR"] = tensorboard_dir(job.mount_path, job.name)
    if job.metrics_port is not None:
        env[METRICS_PORT_ENV] = str(job.metrics_port)
    if job.scripts:
        env[SCRIPTS_ENV] = SCRIPTS_DIR
    return nccl.merge_env(env, job.env)


def scripts_config_map_name(job_name: str) -> str:
    """The ConfigMap holding a job's `scripts`."""
    return f"{job_name}-scripts"


def scripts_volume(job_name: str) -> dict[str, Any]:
    return {"name": SCRIPTS_VOLUME, "configMap": {"name": scripts_config_map_name(job_name), "defaultMode": 0o555}}


SCRIPTS_MOUNT = {"name": "scripts", "mountPath": SCRIPTS_DIR, "readOnly": True}


def secret_env_name(job_name: str) -> str:
    """The Secret holding a job's secret env values (`pulumi config set --secret --path ...env.X`)."""
    return f"{job_name}-env"


def env_var(name: str, value: str, job_name: str, secret: frozenset[str] = frozenset()) -> dict[str, Any]:
    """One container env entry: the value, or a reference to the job's Secret for a secret one."""
    if name in secret:
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_env_name(job_name), "key": name}}}
    return {"name": name, "value": value}


def tensorboard_dir(mount_path: str, job_name: str) -> str:
    """Where a job writes its TensorBoard event files: <mount>/tensorboard/<job>."""
    return f"{mount_path.rstrip('/')}/{TENSORBOARD_SUBDIR}/{job_name}"


def labels(job_name: str, pool: GpuPoolConfig) -> dict[str, str]:
    """Every pod of a job (launcher and workers) and the job object: `logs` and `cancel` find them by these."""
    return {"app.kubernetes.io/part-of": "gpucluster", JOB_LABEL: job_name, nodepool.POOL_LABEL: pool.name}


def worker_labels(job_name: str, pool: GpuPoolConfig, metrics_port: int | None = None) -> dict[str, str]:
    """A worker pod's labels: the job's, and the metrics port when the job serves metrics."""
    out = labels(job_name, pool)
    if metrics_port is not None:
        out[METRICS_PORT_LABEL] = str(metrics_port)
    return out


def node_share(instance: catalog.InstanceType) -> dict[str, str]:
    """The CPU and memory a whole-node pod requests: NODE_SHARE of the node."""
    return {"cpu": f"{int(instance.vcpus * NODE_SHARE * 1000)}m", "memory": f"{int(instance.memory_gib * NODE_SHARE)}Gi"}


def cpu_node_resources(pool: CpuPoolConfig) -> dict[str, dict[str, str]]:
    """A parameter server's: a whole CPU node less kubelet's reserve and the DaemonSets, memory capped alike."""
    amounts = node_share(pool.instance)
    return {"requests": amounts, "limits": {"memory": amounts["memory"]}}


def worker_resources(pool: GpuPoolConfig, gpus: int) -> dict[str, dict[str, str]]:
    amounts = {nodepool.GPU_RESOURCE: str(gpus), **node_share(pool.instance)}
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


def worker_volumes(pool: GpuPoolConfig, claim_name: str | None) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [{
        "name": SHM_VOLUME,
        "emptyDir": {"medium": "Memory", "sizeLimit": f"{int(pool.instance.memory_gib * SHM_SHARE)}Gi"},
    }]
    if claim_name is not None:
        volumes.append({"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim_name}})
    return volumes


def worker_pod_spec(pool: GpuPoolConfig, container: dict[str, Any], claim_name: str | None,
                    grace_seconds: int | None = None) -> dict[str, Any]:
    """Pins the pod to its pool's nodes; `claim_name` None: no shared file system.

    `grace_seconds` is the time between SIGTERM and SIGKILL when the pod is
    drained (pause in drain mode), preempted or its job deleted: the window
    for a checkpoint, if the training code writes one on SIGTERM. None keeps
    Kubernetes' default.
    """
    spec: dict[str, Any] = {
        "nodeSelector": {nodepool.POOL_LABEL: pool.name},
        "tolerations": [t.toleration() for t in nodepool.node_taints(pool)],
        "containers": [container],
        "volumes": worker_volumes(pool, claim_name),
    }
    if grace_seconds is not None:
        spec["terminationGracePeriodSeconds"] = grace_seconds
    return spec
