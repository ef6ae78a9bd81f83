"""Kubeflow Trainer v2 for torchrun: chart values, our ClusterTrainingRuntimes, TrainJobs (pure).

Field names are Trainer v2.3.0's (pkg/apis/trainer/v1alpha1 and
tests/upstream/crds/trainer.kubeflow.org_*.yaml):

- mlPolicy.torch keeps only envInjection since v2.2 (#3239 removed
  numProcPerNode there); processes per node are the TrainJob's
  trainer.numProcPerNode (an int32), restarts the runtime's JobSet
  failurePolicy.maxRestarts.
- The trainer is the replicated job `node` with container `node`, marked
  `trainer.kubeflow.org/trainjob-ancestor-step: trainer` on its Job
  template; it must have 1 replica (the TrainJob's numNodes sets the count).
- Trainer injects PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK,
  PET_MASTER_ADDR and PET_MASTER_PORT (plugins/torch/torch.go), which
  torchrun reads: the command runs under torchrun.
- Pod annotations reach pods only from the runtime's pod template
  (TrainJob labels do not propagate): safe-to-evict is set there, and a
  job's Kueue topology request in our runtime patch of it (pod_label_patch).
- runtimeRef, trainer and activeDeadlineSeconds are immutable: a changed
  job is replaced (components/kubernetes/training_job.py).
- No runtimePatches and no suspend of ours: Kueue's webhook sets suspend and
  adds its own patch (manager kueue.x-k8s.io/manager) on create; a job's
  own mount path gets its own runtime instead.
"""

from __future__ import annotations

import hashlib
from typing import Any

from components.core import images, namespaces
from components.core import versions as v
from components.core.config import GpuPoolConfig, JobConfig
from components.core.hardware import nccl
from components.core.kube import hardening, queueing, workers
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import prestep
from components.core.placement.topology import Placement

API_GROUP = "trainer.kubeflow.org"
TRAINJOB_API_VERSION = f"{API_GROUP}/v1alpha1"
NAMESPACE = namespaces.TRAINER
NODE = "node"  # constants.Node: the trainer's replicated job and container
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"  # the SDK lists runtimes by it
DEFAULT_MOUNT_PATH = "/fsx"
SHUTDOWN_TIMEOUT_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"
SHUTDOWN_MARGIN_SECONDS = 5
PATCH_MANAGER = "gpucluster.io/launcher"


# The chart sets none (manager.resources: {}); ours, so the system nodes' capacity check can count it.
MANAGER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
# The JobSet chart's own (charts/jobset/values.yaml at v0.12.0: controller.resources).
JOBSET_RESOURCES = {"requests": {"cpu": "500m", "memory": "128Mi"}}

# The chart's manager.securityContext (allowPrivilegeEscalation false, runAsNonRoot, drop ALL,
# RuntimeDefault) plus the read-only root filesystem the project's own manifest sets
# (manifests/base/manager/manager.yaml at v2.3.0): the manager writes nothing (its webhook certificate
# is a read-only Secret volume). The chart's template has the manager's /healthz and /readyz probes.
MANAGER_SECURITY = {**hardening.container_security_context(), "runAsNonRoot": True,
                    "seccompProfile": dict(hardening.RUNTIME_DEFAULT)}


def helm_values() -> dict[str, Any]:
    """Values of kubeflow-trainer 2.3.0 (charts/kubeflow-trainer/values.yaml: top-level image.*,
    manager.nodeSelector, manager.securityContext, jobset.install and the jobset chart's
    controller.nodeSelector, securityContext, podSecurityContext and image, runtimes.defaultEnabled,
    crds.enabled)."""
    return {
        "image": {"registry": v.TRAINER_IMAGE_REGISTRY, "repository": v.TRAINER_IMAGE_REPOSITORY,
                  "tag": v.TRAINER_IMAGE_TAG},
        "manager": {"nodeSelector": dict(SYSTEM_NODE_LABEL), "resources": MANAGER_RESOURCES,
                    "securityContext": dict(MANAGER_SECURITY)},
        # JobSet v0.12.0 comes with the chart (its CRD is the one definition of
        # jobsets.jobset.x-k8s.io in the cluster). Its security contexts are the
        # chart's defaults (charts/jobset/values.yaml), stated; its template probes it.
        "jobset": {"install": True,
                   "image": {"repository": v.JOBSET_IMAGE, "tag": v.JOBSET_IMAGE_TAG},
                   "controller": {"nodeSelector": dict(SYSTEM_NODE_LABEL),
                                  "securityContext": hardening.container_security_context(),
                                  "podSecurityContext": hardening.pod_security_context()}},
        # No stock runtimes: ours are below. The chart would install them with a
        # post-install hook Job that downloads kubectl from the internet.
        "runtimes": {"defaultEnabled": False},
        "crds": {"enabled": True},
    }


def runtime_name(pool: GpuPoolConfig, max_restarts: int, mount_path: str = DEFAULT_MOUNT_PATH,
                 grace_seconds: int | None = None) -> str:
    """One runtime per pool, restart budget (a JobSet failurePolicy is per runtime), mount path and
    termination grace period (both in the runtime's pod template, which a TrainJob does not patch)."""
    name = f"gpucluster-torch-{pool.name}-r{max_restarts}"
    if mount_path != DEFAULT_MOUNT_PATH:
        name += f"-m{hashlib.sha256(mount_path.encode()).hexdigest()[:6]}"
    if grace_seconds is not None:
        name += f"-g{grace_seconds}"
    return name


def shutdown_timeout_seconds(grace_seconds: int) -> int:
    """How long torchrun waits between its SIGTERM to the training processes and SIGKILL.

    torchrun is the container's entry point, so it gets the pod's SIGTERM and
    passes it on; PyTorch 2.13 waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds
    (default 30) before SIGKILL (torch/distributed/launcher/api.py,
    LaunchConfig.shutdown_timeout). Set it to the pod's grace period less a
    margin for torchrun's own exit, so a checkpoint written on SIGTERM gets
    the whole window. Older PyTorch ignores the variable and keeps 30 s.
    """
    return max(0, grace_seconds - SHUTDOWN_MARGIN_SECONDS)


def runtime(pool: GpuPoolConfig, max_restarts: int, claim_name: str | None,
            mount_path: str = DEFAULT_MOUNT_PATH, grace_seconds: int | None = None,
            image_cache: str | None = None) -> dict[str, Any]:
    """ClusterTrainingRuntime for torchrun on whole nodes of `pool`: every GPU and EFA device,
    huge pages, /dev/shm, the FSx claim at `mount_path`, the NCCL/EFA preset of the type; its default
    image through the pull-through cache at `image_cache` when there is one (components.core.images).

    A failed node fails its Job (backoffLimit 0, restartPolicy Never) and the
    JobSet re-creates the whole gang, up to `max_restarts` times: torchrun's
    static rendezvous cannot take one replaced node.
    """
    # The image is a default: every TrainJob of ours sets its own (trainer.image), so changing it changes
    # no running job; one created by hand without an image runs it.
    container = workers.worker_container(NODE, images.through_cache(v.DLC_PYTORCH_IMAGE, image_cache), pool,
                                         pool.instance.gpu_count, mount_path if claim_name else None)
    env = nccl.preset_env(pool.instance_type, pool.efa_enabled, torch=True)
    if grace_seconds is not None:
        env[SHUTDOWN_TIMEOUT_ENV] = str(shutdown_timeout_seconds(grace_seconds))
    container["env"] = _env_list(env)
    pod_spec = workers.worker_pod_spec(pool, container, claim_name, grace_seconds)
    pod_spec["restartPolicy"] = "Never"
    return {
        "apiVersion": TRAINJOB_API_VERSION,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": runtime_name(pool, max_restarts, mount_path, grace_seconds),
                     "labels": {FRAMEWORK_LABEL: "torch", "app.kubernetes.io/part-of": "gpucluster"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {
                "failurePolicy": {"maxRestarts": max_restarts},
                "replicatedJobs": [{
                    "name": NODE,
                    "template": {
                        "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                        "spec": {
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"annotations": dict(workers.POD_ANNOTATIONS)},
                                "spec": pod_spec,
                            },
                        },
                    },
                }],
            }},
        },
    }


def _env_list(env: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": val} for k, val in env.items()]


def torchrun_command(command: tuple[str, ...] | list[str]) -> list[str]:
    """The job's command under torchrun, which reads Trainer's PET_* variables for its flags.

    --no-python lets the command be any executable (python -m ..., a wrapper).
    """
    if command[0] == "torchrun":
        return list(command)
    return ["torchrun", "--no-python", *command]


def pod_label_patch(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """Our entry of a TrainJob's runtimePatches: the labels of its node pods, and their Kueue topology annotation.

    Trainer does not copy a TrainJob's labels to its pods (the JobSet plugin
    sets only its own, pkg/runtime/framework/plugins/jobset at v2.3.0), so
    the job label `logs` and `cancel` select by comes through the patch of
    the runtime's pod template (TrainJob spec.runtimePatches, keyed by
    manager; Kueue keeps its own entry, "kueue.x-k8s.io/manager"). A pod
    template patch may carry labels and annotations (trainjob_types.go
    PodTemplatePatch: "Only labels and annotations are allowed").

    The topology annotation must be there, on the JobSet's pod template: Kueue
    v0.19.2 builds a TrainJob's pod sets from the JobSet Trainer would create
    (pkg/controller/jobs/trainjob/trainjob_controller.go podSets ->
    getChildJobSet, with Trainer v2.2.1's runtime code, which merges each
    replicated job's patch into the runtime's template: trainingruntime.go
    mergeRuntimePatches), and reads the request from that pod template's
    annotations (pkg/controller/jobs/jobset/jobset_controller.go PodSets ->
    jobframework.NewPodSetTopologyRequest). A TrainJob's own annotations
    reach neither.
    """
    metadata: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": NODE, "template": {"spec": {"template": {"metadata": metadata}}}}]}}}}


# pulumi-kubernetes deletes in the foreground unless this annotation says otherwise (pulumi/pulumi-kubernetes
# #3011, v4.12.0). Trainer v2.3.0 keeps reconciling a TrainJob being deleted (its trainjob_controller.go never
# checks the deletionTimestamp) and re-applies the JobSet the garbage collector removes, so a foreground delete
# (a replaced job, a job removed from the stack, `pulumi destroy`) never ends and the pods come back; seen on the
# local control plane. In the background the TrainJob goes at once and its JobSet, Jobs and pods after it.
DELETE_IN_BACKGROUND = {"pulumi.com/deletionPropagationPolicy": "background"}


def trainjob(job: JobConfig, pool: GpuPoolConfig, namespace: str, env: dict[str, str],
             deadline_seconds: int | None, claim_name: str | None,
             secret: frozenset[str] = frozenset(), placement: Placement | None = None) -> dict[str, Any]:
    """TrainJob against the pool's runtime; the job's env on top of the runtime's preset; `placement` in its
    node pods' patch (pod_label_patch).

    Trainer upserts trainer.env over the runtime's variables, so a preset
    variable the job sets to "" is set empty here, not removed.
    """
    gpus = workers.gpus_per_node(job, pool)
    preset = nccl.preset_env(pool.instance_type, pool.efa_enabled, torch=True)
    overrides = {k: val for k, val in env.items() if preset.get(k) != val}
    overrides.update({k: "" for k in preset if k not in env})
    checked = prestep.applies(job, pool)
    command = torchrun_command(job.command)
    spec_trainer: dict[str, Any] = {
        "numNodes": job.nodes,
        "numProcPerNode": gpus,
        "image": job.image,
        "command": prestep.torchrun_command(command, pool.name) if checked else command,
    }
    trainer_env = [workers.env_var(k, val, job.name, secret) for k, val in overrides.items()]
    if checked:  # what the pre-step check judges by, and the node it runs on (placement.prestep)
        trainer_env += [*_env_list(prestep.env(pool)), dict(prestep.NODE_NAME_ENV)]
    if trainer_env:
        spec_trainer["env"] = trainer_env
    # Everything a node's worker asks for, not just the GPUs: Trainer 2.3.0
    # merges this into the runtime's resources (#3602), but Kueue 0.19.2 counts
    # quota with Trainer 2.2.1's code, which replaces them with it; the two agree
    # only when it is complete.
    spec_trainer["resourcesPerNode"] = workers.worker_resources(pool, gpus)
    spec: dict[str, Any] = {
        "runtimeRef": {"apiGroup": API_GROUP, "kind": "ClusterTrainingRuntime",
                       "name": runtime_name(pool, job.max_restarts, job.mount_path,
                                            job.termination_grace_period_seconds)},
        "trainer": spec_trainer,
    }
    if deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = deadline_seconds
    # The runtime's pod template keeps safe-to-evict (every job of the pool shares it); the patch adds the
    # job's own topology request.
    patch = pod_label_patch(workers.worker_labels(job.name, pool, job.metrics_port),
                            workers.topology_annotations(placement, pool))
    if job.scripts or checked:
        # The job's scripts and the check's code: volumes and mounts patched into the runtime's pod (fields a
        # patch may set).
        pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        pod_spec: dict[str, Any] = {"volumes": []}
        container: dict[str, Any] = {"name": NODE, "volumeMounts": []}
        if job.scripts:
            pod_spec["volumes"].append(workers.scripts_volume(job.name))
            container["volumeMounts"].append(dict(workers.SCRIPTS_MOUNT))
        if checked:
            prestep.add_code(pod_spec, container)
        pod["spec"] = {**pod_spec, "containers": [container]}
    spec["runtimePatches"] = [patch]
    return {
        "apiVersion": TRAINJOB_API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": job.name, "namespace": namespace,
                     "labels": {**workers.labels(job.name, pool),
                                **queueing.workload_labels(job.priority_class, deadline_seconds)},
                     "annotations": dict(DELETE_IN_BACKGROUND)},
        "spec": spec,
    }
