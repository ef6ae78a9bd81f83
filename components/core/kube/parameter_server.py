"""`launcher: ps`: TensorFlow parameter-server training as a JobSet v1alpha2 of chief, ps and workers (pure).

TensorFlow 2's ParameterServerStrategy needs three task types (tensorflow.org,
"Parameter server training with ParameterServerStrategy"): a coordinator
(`chief`) that runs the training loop, parameter servers (`ps`) that hold
the variables, and `worker`s that compute; ps and workers only serve
(`server.join()`) and never exit, so the JobSet succeeds when the chief
does (successPolicy targetReplicatedJobs [chief]). Parameter servers and
workers start together (their nodes scale up in parallel); the chief is
created once every parameter server and worker is ready (dependsOn ps and
worker Ready). Every task runs the job's command and reads TF_CONFIG:

    {"cluster": {"chief": [...], "ps": [...], "worker": [...]},
     "task": {"type": "ps", "index": 1}}

Addresses are the pods' stable DNS names under the JobSet's headless
Service (JobSet v0.12.0: `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.
<subdomain>`, subdomain the JobSet's name; one Indexed Job per replicated
job, so the pod index is the task index, read from the Job's
batch.kubernetes.io/job-completion-index annotation through the downward
API) on the job's `psPort`. GRPC_FAIL_FAST=use_caller lets the coordinator
see a lost worker or ps (the tutorial's setting).

The chief runs on the system nodes (it dispatches, it does not compute),
each parameter server on a whole node of `psPool` (tolerating the CPU
pools' taint), each worker on a whole GPU node of `pool`, its Job's pod template carrying the job's Kueue
topology request (the JobSet's pod sets are its replicated jobs' pod templates: Kueue v0.19.2
pkg/controller/jobs/jobset/jobset_controller.go PodSets). A failed pod fails its Job, and the JobSet restarts
the whole gang (Recreate) up to `maxRestarts` times.
"""

from __future__ import annotations

import json
from typing import Any

from components.core.config import CpuPoolConfig, GpuPoolConfig, JobConfig, StorageConfig
from components.core.kube import network_policy, nodepool, queueing, workers
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement.topology import Placement

API_VERSION = "jobset.x-k8s.io/v1alpha2"
KIND = "JobSet"
ROLES = ("chief", "ps", "worker")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
TASK_INDEX_ENV = "GPUCLUSTER_TASK_INDEX"
CHIEF_RESOURCES = {"requests": {"cpu": "500m", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}
# The chief's first contact (below the chief's own requests: Kueue and the scheduler count the larger).
FIRST_CONTACT_RESOURCES = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}


def addresses(job: JobConfig, namespace: str) -> dict[str, list[str]]:
    """TF_CONFIG's cluster: every task's host:port by its stable DNS name."""
    counts = {"chief": 1, "ps": job.ps_replicas, "worker": job.nodes}
    return {role: [f"{job.name}-{role}-0-{i}.{job.name}.{namespace}.svc:{job.ps_port}" for i in range(n)]
            for role, n in counts.items()}


def tf_config(job: JobConfig, namespace: str, role: str) -> str:
    """The TF_CONFIG of one role, its index left to the pod: `$(GPUCLUSTER_TASK_INDEX)` (Kubernetes expands it)."""
    cluster = json.dumps(addresses(job, namespace), separators=(",", ":"), sort_keys=True)
    return f'{{"cluster":{cluster},"task":{{"type":"{role}","index":$({TASK_INDEX_ENV})}}}}'


def _env(job: JobConfig, namespace: str, role: str, base: dict[str, str],
         secret: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    index = {"name": TASK_INDEX_ENV,
             "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    named = [workers.env_var(k, v, job.name, secret) for k, v in base.items()]
    return [index, *named, {"name": "GRPC_FAIL_FAST", "value": "use_caller"},
            {"name": "TF_CONFIG", "value": tf_config(job, namespace, role)}]


def _replicated_job(role: str, count: int, pod_spec: dict[str, Any], labels: dict[str, str],
                    deadline: int | None, after: tuple[str, ...] = (),
                    annotations: dict[str, str] = workers.POD_ANNOTATIONS) -> dict[str, Any]:
    spec: dict[str, Any] = {"parallelism": count, "completions": count, "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {"metadata": {"labels": labels, "annotations": dict(annotations)},
                                         "spec": {**pod_spec, "restartPolicy": "Never"}}}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    out: dict[str, Any] = {"name": role, "replicas": 1, "template": {"spec": spec}}
    if after:
        # Created once every parameter server and worker listens (their readiness probes): the chief does
        # not start its training loop against a server that is not up yet, nor wait out its first-contact
        # bound while GPU nodes still boot. Workers only serve (server.join()), so they start with the
        # parameter servers: their nodes scale up in parallel, not after.
        out["dependsOn"] = [{"name": name, "status": "Ready"} for name in after]
    return out


def jobset(job: JobConfig, pool: GpuPoolConfig, ps_pool: CpuPoolConfig, namespace: str, claim_name: str | None,
           storage: StorageConfig | None, deadline: int | None, secret: frozenset[str] = frozenset(),
           placement: Placement | None = None) -> dict[str, Any]:
    """`placement`: the GPU workers' Kueue topology request (workers.worker_annotations); the chief and the
    parameter servers ask for none: their flavors (system, CPU pool) have no topology, and a pod set asking for
    one there gets no flavor."""
    env = workers.job_env(job, pool, storage)
    mount = job.mount_path if claim_name else None
    grace = job.termination_grace_period_seconds

    def container(name: str, role: str, resources: dict[str, Any]) -> dict[str, Any]:
        mounts = [{"name": workers.DATA_VOLUME, "mountPath": mount}] if mount else []
        return {"name": name, "image": job.image, "command": list(job.command),
                "env": _env(job, namespace, role, env, secret),
                "ports": [{"name": "grpc", "containerPort": job.ps_port}], "resources": resources,
                **({"volumeMounts": mounts} if mounts else {})}

    volumes = [v for v in workers.worker_volumes(pool, claim_name) if v["name"] == workers.DATA_VOLUME]
    extra = {"terminationGracePeriodSeconds": grace} if grace is not None else {}
    # The chief's first gRPC to each task, from a brand-new pod, may be dropped while the network policy
    # agent reconciles it: an init container, in the same network namespace, connects first, retrying.
    tasks = addresses(job, namespace)
    first_contact = {"name": "first-contact", "image": job.image, "resources": FIRST_CONTACT_RESOURCES,
                     "command": network_policy.tcp_first_contact([*tasks["ps"], *tasks["worker"]])}
    chief = {"nodeSelector": dict(SYSTEM_NODE_LABEL), "initContainers": [first_contact],
             "containers": [container("chief", "chief", CHIEF_RESOURCES)],
             **({"volumes": volumes} if volumes else {}), **extra}
    # The role label keeps Kueue from giving the parameter servers the system flavor (nodepool.CPU_POOL_ROLE).
    ps_container = container("ps", "ps", workers.cpu_node_resources(ps_pool))
    # Ready when its gRPC server accepts connections (server.join() listens on psPort).
    ps_container["readinessProbe"] = {"tcpSocket": {"port": job.ps_port}, "periodSeconds": 5}
    ps = {"nodeSelector": {nodepool.POOL_LABEL: ps_pool.name, **nodepool.CPU_POOL_ROLE},
          "tolerations": [nodepool.CPU_POOL_TAINT.toleration()],
          "containers": [ps_container],
          **({"volumes": volumes} if volumes else {}), **extra}
    gpu_container = workers.worker_container("worker", job.image, pool, workers.gpus_per_node(job, pool), mount)
    gpu_container.update({"command": list(job.command), "env": _env(job, namespace, "worker", env, secret),
                          "ports": [{"name": "grpc", "containerPort": job.ps_port}],
                          "readinessProbe": {"tcpSocket": {"port": job.ps_port}, "periodSeconds": 5}})
    worker = workers.worker_pod_spec(pool, gpu_container, claim_name, grace)
    if job.scripts:
        for pod in (chief, ps, worker):
            pod["volumes"] = [*pod.get("volumes", []), workers.scripts_volume(job.name)]
            container_spec = pod["containers"][0]
            container_spec["volumeMounts"] = [*container_spec.get("volumeMounts", []), dict(workers.SCRIPTS_MOUNT)]
    base = workers.labels(job.name, pool)
    by_role = {"chief": {k: v for k, v in base.items() if k != nodepool.POOL_LABEL},
               "ps": {**base, nodepool.POOL_LABEL: ps_pool.name},
               "worker": workers.worker_labels(job.name, pool, job.metrics_port)}
    return {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": job.name, "namespace": namespace,
                     "labels": {**base, **queueing.workload_labels(job.priority_class, deadline)}},
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["chief"]},
            "failurePolicy": {"maxRestarts": job.max_restarts, "restartStrategy": "Recreate"},
            # dependsOn may name only a replicated job listed earlier (JobSet v0.12.0 API): ps first.
            "replicatedJobs": [
                _replicated_job("ps", job.ps_replicas, ps, by_role["ps"], deadline),
                _replicated_job("worker", job.nodes, worker, by_role["worker"], deadline,
                                annotations=workers.worker_annotations(placement, pool)),
                _replicated_job("chief", 1, chief, by_role["chief"], deadline, after=("ps", "worker")),
            ],
        },
    }
