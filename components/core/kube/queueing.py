"""Kueue: all-or-nothing admission of jobs against the pools' capacity (pure).

One ResourceFlavor per GPU or CPU pool and one for the system nodes (an
MPIJob's launcher and a parameter-server job's chief are pod sets Kueue
counts too), one ClusterQueue whose quotas are
the pools' capacity, a LocalQueue in the training namespace, and two
WorkloadPriorityClasses. Field names are Kueue v0.19.2's v1beta2 API
(tests/upstream/crds/kueue.x-k8s.io_*.yaml; apis/config/v1beta2 for the
manager configuration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from components.core import namespaces
from components.core import versions as v
from components.core.config import SystemNodesConfig
from components.core.hardware import catalog
from components.core.kube import hardening, nodepool, workers
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.placement import provisioning, topology

API_VERSION = "kueue.x-k8s.io/v1beta2"
NAMESPACE = namespaces.KUEUE
CLUSTER_QUEUE = "gpucluster"
LOCAL_QUEUE = "gpu"
SYSTEM_FLAVOR = "system"

# Labels Kueue reads on the job object itself (pkg/controller/constants/constants.go).
# The CRDs the kueue chart installs (charts/kueue/templates/crd/ at v0.19.2).
CHART_CRDS = tuple(f"{plural}.kueue.x-k8s.io" for plural in (
    "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters", "multikueueconfigs",
    "provisioningrequestconfigs", "resourceflavors", "topologies", "workloadpriorityclasses", "workloads"))

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Seconds a workload may stay admitted, summed over admit/evict cycles; then
# it is deactivated, not requeued. An integer >= 1, as a string.
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

# The fabric test goes first on fresh nodes; training jobs queue behind it.
# No preemption: a higher priority only orders the queue, it never evicts a
# running job.
PRIORITY_CLASSES = {
    "gpucluster-fabric-test": (1000, "nccl-tests over fresh nodes: runs before training jobs queued with it"),
    "gpucluster-training": (100, "training jobs, first come first served within the pools' capacity"),
}
# With teams (gpucluster:teams), two more: a team chooses among these and the training class.
TEAM_PRIORITY_CLASSES = {
    "gpucluster-high": (500, "deadline work: ahead of training jobs in its team's queue"),
    "gpucluster-low": (10, "batch work: behind training jobs, and the first preempted when lent GPUs are reclaimed"),
}
FABRIC_TEST_PRIORITY = "gpucluster-fabric-test"
TRAINING_PRIORITY = "gpucluster-training"

# Launchers only start processes: half the system nodes is room for many.
SYSTEM_SHARE_FOR_LAUNCHERS = 0.5

# waitForPodsReady: an admitted job whose pods are not all ready in time is
# evicted, its pods deleted (the autoscaler then removes the idle nodes) and
# requeued with backoff, instead of holding the nodes that did arrive. The
# timeout must outlast a scale-up from zero: node provisioning (the
# autoscaler's max-node-provision-time, 25 min) plus a multi-GB image pull.
PODS_READY_TIMEOUT = "40m"
# After a running job loses a pod (a node failed), this long for a replacement.
PODS_READY_RECOVERY_TIMEOUT = "30m"
# Five attempts, then the workload is deactivated for a person to look at
# (null would requeue forever, each attempt billing the nodes that arrive).
REQUEUE_LIMIT = 5

# The manager configuration string replaces the chart's whole default
# (charts/kueue/values.yaml at v0.19.2), integrations list included, so it is
# given here: the jobs we emit (MPIJob, TrainJob) and what they are built of
# (JobSet, Job). Not the chart's pod, deployment, statefulset, Ray, AppWrapper
# or LWS integrations: each adds a webhook with failurePolicy Fail (the pod
# one on every pod created outside kube-system and kueue-system), which would
# stop the operators' own pods whenever Kueue is down, for kinds we never queue.
INTEGRATIONS = (
    "batch/job",
    "kubeflow.org/mpijob",
    "jobset.x-k8s.io/jobset",
    "trainer.kubeflow.org/trainjob",
)


def managed_namespaces(namespaces: Sequence[str]) -> dict[str, Any]:
    """Kueue manages jobs in the training namespace only. The chart copies this selector into every job
    webhook's namespaceSelector (charts/kueue/templates/webhook/manifests.yaml at v0.19.2; its default is
    every namespace but kube-system and kueue-system): the batch/job webhook (failurePolicy Fail) would
    otherwise judge kube-prometheus-stack's hook Jobs in `monitoring`, which install beside Kueue and would
    be refused while Kueue's webhook is not serving yet. The cost: a job labelled for a queue in another
    namespace is not suspended by the webhook (there is no LocalQueue there for it anyway); every namespace
    that queues jobs must be listed here."""
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                  "values": list(namespaces)}]}


def manager_config(namespace: str, team_namespaces: Sequence[str] = (),
                   fair_sharing: dict[str, Any] | None = None, admission_checks: bool = False,
                   multi_kueue: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chart's default Configuration (values.yaml managerConfig) plus waitForPodsReady, for jobs in
    `namespace` and the teams' namespaces; `fair_sharing`: the manager's fairSharing section (teams only);
    `admission_checks`: some ClusterQueue runs an admission check (an atomic pool); `multi_kueue`: a fleet
    manager's multiKueue section (components.core.fleet.manager.multi_kueue; apis/config/v1beta2
    configuration_types.go MultiKueue).

    v1beta2 decodes strictly: waitForPodsReady has no `enable` field (it is
    on whenever present, and by default since v0.19).
    """
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 10, "LocalQueue.kueue.x-k8s.io": 5,
            "ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 300, "burst": 500},
        # Not on a fleet's manager: every admitted workload there waits for its pods on some worker, so the
        # block would hold the whole fleet to one job at a time, and the timeout would evict a job slow on one
        # worker; each worker enforces its own (its copy of the job is an ordinary workload there).
        **({} if multi_kueue is not None else {"waitForPodsReady": {
            "timeout": PODS_READY_TIMEOUT,
            "recoveryTimeout": PODS_READY_RECOVERY_TIMEOUT,
            # One job at a time between admission and all pods ready: when GPU
            # capacity is short, two half-started jobs would each hold nodes
            # the other needs until both time out. Not with teams: Kueue waits for
            # every admitted workload of every ClusterQueue (pkg/cache/scheduler/cache.go
            # podsReadyForAllAdmittedWorkloads), so one team's job waiting for nodes
            # would hold every other team's admission, guarantees included. Nor with an admission
            # check: a job whose ProvisioningRequest is pending holds quota without being admitted, and
            # its second (topology) pass runs in the same scheduling loop the block stops
            # (pkg/scheduler/scheduler.go waitForPodsReadyIfNeeded), so two such jobs would evict each
            # other by booking expiry until both are deactivated (kubernetes-sigs/kueue#7656: blockAdmission
            # is "not usable with AdmissionChecks essentially"); atomic admission already keeps a job from
            # holding a partial set of nodes, which is what the block was for.
            "blockAdmission": fair_sharing is None and not admission_checks,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffLimitCount": REQUEUE_LIMIT,
                                  "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        }}),
        "integrations": {"frameworks": list(INTEGRATIONS)},
        # Sorted: reordering gpucluster:teams changes nothing (a new configuration restarts Kueue).
        "managedJobsNamespaceSelector": managed_namespaces([namespace, *sorted(team_namespaces)]),
        # Fair sharing is on whenever the section is present (apis/config/v1beta2 has no `enable`).
        **({"fairSharing": fair_sharing} if fair_sharing is not None else {}),
        **({"multiKueue": multi_kueue} if multi_kueue is not None else {}),
    }


def helm_values(namespace: str, metrics: bool = False, team_namespaces: Sequence[str] = (),
                fair_sharing: dict[str, Any] | None = None, provisioning_requests: bool = False,
                multi_kueue: dict[str, Any] | None = None) -> dict[str, Any]:
    """Values of the kueue chart 0.19.2 (controllerManager.manager.image, controllerManager.nodeSelector,
    managerConfig.controllerManagerConfigYaml, enablePrometheus, controllerManager.manager.podSecurityContext,
    containerSecurityContext and podAnnotations: values.yaml keys at v0.19.2).

    `metrics`: the chart's ServiceMonitor (needs the Prometheus Operator's CRDs). `provisioning_requests`: some
    pool is atomic: provisioning.KUEUE_POD_ANNOTATIONS on the manager's pod (templates/manager/manager.yaml).
    `multi_kueue`: a fleet manager's multiKueue section.

    The security contexts are the chart's own defaults (runAsNonRoot, RuntimeDefault seccomp, a
    read-only root, no capabilities), stated so a chart upgrade cannot loosen them unnoticed; so are
    its requests and limits (500m/512Mi, 2 CPUs/512Mi) and its /healthz and /readyz probes."""
    return {
        "enablePrometheus": metrics,
        "controllerManager": {
            "replicas": 1,
            "manager": {"image": {"repository": v.KUEUE_IMAGE, "tag": v.KUEUE_IMAGE_TAG,
                                  "pullPolicy": "IfNotPresent"},
                        "podSecurityContext": hardening.pod_security_context(),
                        "containerSecurityContext": hardening.container_security_context(),
                        **({"podAnnotations": dict(provisioning.KUEUE_POD_ANNOTATIONS)}
                           if provisioning_requests else {})},
            "nodeSelector": dict(SYSTEM_NODE_LABEL),
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
            manager_config(namespace, team_namespaces, fair_sharing, provisioning_requests, multi_kueue),
            sort_keys=False)},
    }


def flavor_name(pool: nodepool.Pool) -> str:
    return f"pool-{pool.name}"


def covered_resources(pools: Sequence[nodepool.Pool]) -> list[str]:
    """Every resource a pod of ours requests: Kueue's default quota check
    (BlockUndeclared) never admits a workload asking for an uncovered one."""
    resources = ["cpu", "memory", nodepool.GPU_RESOURCE]
    if any(p.efa_enabled for p in pools):
        resources += [nodepool.EFA_RESOURCE, nodepool.HUGEPAGES_RESOURCE]
    return resources


def split_quantity(quantity: str) -> tuple[int, str]:
    """"153600m" -> (153600, "m"); "8" -> (8, "")."""
    number = quantity.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    return int(number), quantity[len(number):]


def _scaled(quantity: str, factor: int) -> str:
    """"153600m" x 16 -> "2457600m"; "5120Mi" x 2 -> "10240Mi"; "8" x 4 -> "32"."""
    number, unit = split_quantity(quantity)
    return f"{number * factor}{unit}"


def pool_quota_nodes(pool: nodepool.Pool, resources: Sequence[str], nodes: int) -> dict[str, str]:
    """`nodes` of the pool: what its workers request per node, times `nodes` (0 where it offers none)."""
    per_node = (workers.cpu_node_resources(pool) if pool.is_cpu
                else workers.worker_resources(pool, pool.instance.gpu_count))["requests"]
    return {r: _scaled(per_node[r], nodes) if r in per_node else "0" for r in resources}


def pool_quota(pool: nodepool.Pool, resources: Sequence[str]) -> dict[str, str]:
    """The pool at maxNodes."""
    return pool_quota_nodes(pool, resources, pool.max_nodes)


def system_quota(system: SystemNodesConfig, resources: Sequence[str]) -> dict[str, str]:
    """Room on the system nodes for MPIJob launchers and parameter-server chiefs (cpu and memory only)."""
    node = catalog.get(system.instance_type)
    cores = int(system.count * node.vcpus * SYSTEM_SHARE_FOR_LAUNCHERS * 1000)
    memory = int(system.count * node.memory_gib * SYSTEM_SHARE_FOR_LAUNCHERS)
    amounts = {"cpu": f"{cores}m", "memory": f"{memory}Gi"}
    return {r: amounts.get(r, "0") for r in resources}


def resource_flavors(pools: Sequence[nodepool.Pool]) -> list[dict[str, Any]]:
    """One flavor per pool, with the pool's node labels and its taint; and one for the system nodes.

    Kueue 0.19.2 matches a pod set's node selector against a flavor only on
    that flavor's own label keys (flavorassigner.go), so labels alone do not
    keep a launcher (role=system) off a pool flavor once the system quota is
    used up. The pool's taint does: a pod set must tolerate a flavor's
    nodeTaints to get it, and launchers do not tolerate the GPU taint while
    workers do. No flavor tolerations: they would make Kueue ignore the taint.
    """
    flavors = [{"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": SYSTEM_FLAVOR},
                "spec": {"nodeLabels": dict(SYSTEM_NODE_LABEL)}}]
    for pool in pools:
        # A CPU pool's flavor also carries the role label: a pod set selecting role=system (a launcher,
        # a chief) conflicts with it, and one selecting role=cpu-pool (a parameter server) with the
        # system flavor, whatever quota is left (nodepool.CPU_POOL_ROLE).
        labels = {nodepool.POOL_LABEL: pool.name, **(nodepool.CPU_POOL_ROLE if pool.is_cpu else {})}
        # Its network topology, if any: the CRD allows topologyName beside nodeTaints, wants a nodeLabel, and
        # makes topologyName and nodeLabels immutable once set (ResourceFlavorSpec's XValidation rules).
        network = topology.pool_topology(pool)
        flavors.append({
            "apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor_name(pool)},
            "spec": {"nodeLabels": labels,
                     "nodeTaints": [{"key": t.key, "value": t.value, "effect": t.effect}
                                    for t in nodepool.node_taints(pool)],
                     **({"topologyName": network} if network else {})},
        })
    return flavors


def admission_checks(pools: Sequence[nodepool.Pool]) -> dict[str, Any]:
    """A ClusterQueue's admissionChecksStrategy: atomic scale-up on the atomic GPU pools' flavors ({}: none)."""
    strategy = provisioning.admission_checks_strategy([flavor_name(p) for p in provisioning.atomic_pools(pools)])
    return {"admissionChecksStrategy": strategy} if strategy else {}


def cluster_queue(pools: Sequence[nodepool.Pool], system: SystemNodesConfig, namespace: str,
                  stop_policy: str = "None") -> dict[str, Any]:
    """The one ClusterQueue: quotas = the pools' capacity, jobs from the training namespace only.

    The system flavor comes first and holds no GPUs, so a launcher (cpu and
    memory) lands there and a worker (GPUs) goes on to its pool's flavor,
    whose taint only workers tolerate. Each flavor lists every covered
    resource, in the same order (CRD rule).
    """
    resources = covered_resources(pools)

    def flavor(name: str, quota: dict[str, str]) -> dict[str, Any]:
        return {"name": name, "resources": [{"name": r, "nominalQuota": quota[r]} for r in resources]}

    return {
        "apiVersion": API_VERSION, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            # A missing selector admits no namespace at all (CRD: "Defaults to null
            # which is a nothing selector").
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            # A job that does not fit yet does not block smaller ones behind it.
            "queueingStrategy": "BestEffortFIFO",
            "stopPolicy": stop_policy,
            **admission_checks(pools),
            "resourceGroups": [{
                "coveredResources": resources,
                "flavors": [flavor(SYSTEM_FLAVOR, system_quota(system, resources)),
                            *(flavor(flavor_name(p), pool_quota(p, resources)) for p in pools)],
            }],
        },
    }


def local_queue(namespace: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE}}


def priority_classes(teams: bool = False) -> list[dict[str, Any]]:
    """The classes; with teams, theirs too. value and description are top-level fields, not spec (CRD v1beta2)."""
    classes = {**PRIORITY_CLASSES, **(TEAM_PRIORITY_CLASSES if teams else {})}
    return [{"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
             "value": value, "description": text} for name, (value, text) in classes.items()]


def workload_labels(priority: str, deadline_seconds: int | None) -> dict[str, str]:
    """What a job needs on its own metadata to be queued (Kueue suspends it until admitted)."""
    labels = {QUEUE_LABEL: LOCAL_QUEUE, PRIORITY_LABEL: priority}
    if deadline_seconds is not None:
        labels[MAX_EXEC_TIME_LABEL] = str(deadline_seconds)
    return labels
