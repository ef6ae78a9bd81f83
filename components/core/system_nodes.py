"""Will the system nodes hold what we put on them? Every system pod's requests against the group's allocatable.

The system node group runs the EKS add-ons, the operators, Kueue, the
autoscaler, the metrics stack, TensorBoard and the MPIJob launchers. A
pod that does not fit stays Pending and nothing says why in `pulumi up`,
so the plan sums the requests (ours, or the chart's or add-on's default
where we set none, each cited) and refuses a group that cannot hold them,
naming the shortfall and a size that would.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from components.core.config import NAMESPACE, StackConfig
from components.core.config.stack import entries
from components.core.hardware import catalog
from components.core.kube import autoscaling, launcher, mpi_operator, parameter_server, trainer
from components.core.observability import goodput_agent, tensorboard
from components.core.observability import prometheus_stack as ps
from components.core.planning.metrics_footprint import footprint
from components.core.problems import Problem

# Max pods per node by the ENI formula (amazon-eks-ami templates/shared/runtime/eni-max-pods.txt):
# ENIs x (IPv4 per ENI - 1) + 2.
MAX_PODS = {"m7i.large": 29, "m7i.xlarge": 58, "m7i.2xlarge": 58}
# Memory the kernel and firmware keep from the instance's nominal GiB before kubelet sees it.
MEMORY_VISIBLE = 0.95
EVICTION_HARD_MIB = 100  # kubelet's memory.available default on the EKS AMIs


@dataclass(frozen=True)
class Pod:
    name: str
    cpu_m: int  # requests
    memory_mi: int
    replicas: int = 1
    per_node: bool = False  # a DaemonSet: one on every system node
    source: str = ""


def quantity_m(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def quantity_mi(memory: str) -> int:
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for unit, factor in units.items():
        if memory.endswith(unit):
            return int(math.ceil(float(memory[: -len(unit)]) * factor))
    return int(math.ceil(int(memory) / 2**20))


def _pod(name: str, resources: dict, **kw) -> Pod:
    requests = resources["requests"]
    return Pod(name, quantity_m(requests.get("cpu", "0m")), quantity_mi(requests.get("memory", "0Mi")), **kw)


# EKS add-ons and charts whose requests we do not set: the defaults they ship.
ADDON_PODS = (
    Pod("aws-node (vpc-cni)", 25, 0, per_node=True, source="amazon-vpc-cni-k8s charts/aws-vpc-cni values: 25m"),
    Pod("kube-proxy", 100, 0, per_node=True, source="EKS kube-proxy add-on DaemonSet: 100m"),
    Pod("eks-pod-identity-agent", 25, 32, per_node=True, source="estimate: the add-on sets no requests"),
    Pod("eks-node-monitoring-agent", 10, 64, per_node=True, source="estimate"),
    Pod("ebs-csi-node", 30, 120, per_node=True,
        source="aws-ebs-csi-driver chart v1.63.1 node.resources 10m/40Mi, x3 containers"),
    Pod("fsx-csi-node", 30, 120, per_node=True, source="estimate: 3 containers like ebs-csi-node"),
    Pod("coredns", 100, 70, replicas=2, source="EKS coredns add-on: requests 100m/70Mi, 2 replicas"),
    Pod("ebs-csi-controller", 60, 240, replicas=2,
        source="aws-ebs-csi-driver chart v1.63.1 controller.resources 10m/40Mi, x6 containers"),
    Pod("fsx-csi-controller", 60, 240, replicas=2, source="estimate: like ebs-csi-controller"),
    Pod("kueue-controller-manager", 500, 512, source="kueue chart 0.19.2 controllerManager.manager.resources"),
)


def system_pods(cfg: StackConfig) -> list[Pod]:
    pods = list(ADDON_PODS) + [
        _pod("jobset-controller", trainer.JOBSET_RESOURCES),
        _pod("trainer-controller-manager", trainer.MANAGER_RESOURCES),
        _pod("mpi-operator", mpi_operator.OPERATOR_RESOURCES),
        _pod("cluster-autoscaler", autoscaling.RESOURCES),
    ]
    launchers = (sum(1 for _, j in entries(cfg.jobs) if j.launcher == "mpirun")
                 + sum(1 for _, p in entries(cfg.gpu_pools) if p.fabric_test))
    if launchers:
        pods.append(_pod("mpijob launchers", launcher.LAUNCHER_RESOURCES, replicas=launchers))
    chiefs = sum(1 for _, j in entries(cfg.jobs) if j.launcher == "ps")
    if chiefs:
        pods.append(_pod("parameter-server chiefs", parameter_server.CHIEF_RESOURCES, replicas=chiefs))
    obs = cfg.observability
    if obs.enabled:
        fp = footprint(cfg)
        pods += [
            _pod("prometheus", fp.prometheus_resources),
            _pod("prometheus-operator", ps.OPERATOR_RESOURCES),
            _pod("alertmanager", ps.ALERTMANAGER_RESOURCES),
            # The Prometheus Operator adds one to the Prometheus pod and one to Alertmanager's.
            _pod("config-reloader sidecars", ps.CONFIG_RELOADER_RESOURCES, replicas=2),
            Pod("grafana", quantity_m(ps.GRAFANA_RESOURCES["requests"]["cpu"])
                + 2 * quantity_m(ps.GRAFANA_SIDECAR_RESOURCES["requests"]["cpu"]),
                quantity_mi(ps.GRAFANA_RESOURCES["requests"]["memory"])
                + 2 * quantity_mi(ps.GRAFANA_SIDECAR_RESOURCES["requests"]["memory"]),
                source="grafana with its dashboards and datasources sidecars"),
            _pod("kube-state-metrics", ps.KUBE_STATE_METRICS_RESOURCES),
            _pod("node-exporter", ps.NODE_EXPORTER_RESOURCES, per_node=True),
        ]
        if obs.tensorboard:
            pods.append(_pod("tensorboard", tensorboard.RESOURCES))
    if goodput_agent.enabled(cfg):
        pods.append(_pod("goodput controller", goodput_agent.RESOURCES))
    return pods


def reserved_cpu_m(vcpus: int) -> int:
    """kube-reserved CPU on the EKS AMIs: 6 % of the first core, 1 % of the second, 0.5 % of the next two,
    0.25 % of the rest (amazon-eks-ami nodeadm, kubelet config)."""
    cores = [60, 10, 5, 5] + [2.5] * max(0, vcpus - 4)
    return int(math.ceil(sum(cores[:vcpus])))


def allocatable(instance_type: str) -> tuple[int, int]:
    """(CPU millicores, memory MiB) kubelet offers pods on one node of the type."""
    node = catalog.get(instance_type)
    max_pods = MAX_PODS.get(instance_type, 110)
    reserved_mi = 255 + 11 * max_pods  # kube-reserved memory, same source
    memory = int(node.memory_gib * 1024 * MEMORY_VISIBLE) - reserved_mi - EVICTION_HARD_MIB
    return node.vcpus * 1000 - reserved_cpu_m(node.vcpus), memory


@dataclass(frozen=True)
class Capacity:
    instance_type: str
    count: int
    allocatable_cpu_m: int
    allocatable_memory_mi: int
    requested_cpu_m: int
    requested_memory_mi: int
    largest: Pod

    def to_dict(self) -> dict:
        return {"nodes": f"{self.count} x {self.instance_type}",
                "allocatable": {"cpu": f"{self.allocatable_cpu_m}m", "memory": f"{self.allocatable_memory_mi}Mi"},
                "requested": {"cpu": f"{self.requested_cpu_m}m", "memory": f"{self.requested_memory_mi}Mi"}}


def capacity(cfg: StackConfig) -> Capacity:
    system = cfg.system_nodes
    cpu, memory = allocatable(system.instance_type)
    pods = system_pods(cfg)
    n = system.count
    req_cpu = sum(p.cpu_m * (n if p.per_node else p.replicas) for p in pods)
    req_mem = sum(p.memory_mi * (n if p.per_node else p.replicas) for p in pods)
    largest = max((p for p in pods if not p.per_node), key=lambda p: p.memory_mi)
    return Capacity(system.instance_type, n, cpu * n, memory * n, req_cpu, req_mem, largest)


def problems(cfg: StackConfig, valid: set[str]) -> list[Problem]:
    """The system node group's shortfall, if any (nothing unless its inputs parsed)."""
    if not valid >= {"system_nodes", "gpu_pools", "jobs", "observability", "prices"}:
        return []
    cap = capacity(cfg)
    short = []
    if cap.requested_cpu_m > cap.allocatable_cpu_m:
        short.append(f"{cap.requested_cpu_m - cap.allocatable_cpu_m}m CPU")
    if cap.requested_memory_mi > cap.allocatable_memory_mi:
        short.append(f"{cap.requested_memory_mi - cap.allocatable_memory_mi}Mi memory")
    per_node_mem = sum(p.memory_mi for p in system_pods(cfg) if p.per_node)
    node_cpu, node_mem = allocatable(cfg.system_nodes.instance_type)
    if cap.largest.memory_mi + per_node_mem > node_mem:
        short.append(f"one node's room for {cap.largest.name} ({cap.largest.memory_mi}Mi on a node with "
                     f"{node_mem - per_node_mem}Mi left after the DaemonSets)")
    if not short:
        return []
    fits = next((f"{count} x {t}" for t in catalog.SYSTEM_TYPES for count in range(cfg.system_nodes.count, 21)
                 if _fits(cfg, t, count)), None)
    return [Problem(f"{NAMESPACE}:systemNodes", (
        f"{cap.count} x {cap.instance_type} offer {cap.allocatable_cpu_m}m CPU and {cap.allocatable_memory_mi}Mi "
        f"allocatable, but the system pods request {cap.requested_cpu_m}m and {cap.requested_memory_mi}Mi: short "
        f"of {', '.join(short)}; " + (f"{fits} would hold them (count, instanceType)" if fits else
                                      "no system node size holds them; lower observability.volumeGiB's series or "
                                      "disable observability"))
    )]


def _fits(cfg: StackConfig, instance_type: str, count: int) -> bool:
    resized = cfg.model_copy(update={"system_nodes": cfg.system_nodes.model_copy(
        update={"instance_type": instance_type, "count": count})})
    cap = capacity(resized)
    per_node_mem = sum(p.memory_mi for p in system_pods(resized) if p.per_node)
    return (cap.requested_cpu_m <= cap.allocatable_cpu_m and cap.requested_memory_mi <= cap.allocatable_memory_mi
            and cap.largest.memory_mi + per_node_mem <= allocatable(instance_type)[1])


def system_zone(cluster_zones: Sequence[str], metrics_volume_zone: str | None,
                current_zone: str | None = None) -> tuple[str, str | None]:
    """The one zone of the system node group, and a warning when the metrics volume cannot follow.

    Prometheus keeps its data on an EBS volume, and an EBS volume attaches only in its own zone
    (EBS User Guide, "Amazon EBS volumes"). With the system nodes spread over zones, a node group
    smaller than the zone count, or any node replaced outside a managed update (auto repair, a
    failed instance, a replaced node group), can leave no system node where the volume is, and
    Prometheus Pending. So the system nodes live in one zone: the first cluster zone (the GPU zone
    whenever EKS accepts it: launchers, chiefs and TensorBoard sit beside the workers and FSx), or,
    on a stack whose metrics volume is in another cluster zone already, that zone, so the volume
    and its metrics are kept. Without a volume, the zone the system node group is in already
    (`current_zone`, when it has one): a volume gone (its claim deleted, monitoring turned off) must
    not move the group, for a new zone replaces it, and with it every launcher and chief. A volume
    in a zone that has no cluster subnet any more cannot be reached: the warning says how to let
    Prometheus start over.
    """
    first = current_zone if current_zone in cluster_zones else cluster_zones[0]
    if metrics_volume_zone is None or metrics_volume_zone in cluster_zones:
        return metrics_volume_zone or first, None
    return first, (f"the metrics volume is in {metrics_volume_zone}, where the cluster has no subnet any more; the "
                   f"system nodes go to {first}, and Prometheus stays Pending until its claim and pod are deleted "
                   f"(its metrics go with the claim; only Prometheus has one in {ps.NAMESPACE}): kubectl -n "
                   f"{ps.NAMESPACE} delete pvc --all --wait=false && kubectl -n {ps.NAMESPACE} delete pod "
                   f"prometheus-{ps.RELEASE}-prometheus-0")


# The launchers of mpirun jobs and the chiefs of ps jobs run the job's image on the system nodes: a Deep
# Learning Container is 15-20 GB, which containerd keeps compressed and unpacked. Below this, kubelet's image
# garbage collection (85 % of the disk) and disk-pressure eviction can reach Kueue, the operators or CoreDNS.
DISK_FOR_JOB_IMAGES_GIB = 100


def image_disk_warning(cfg: StackConfig) -> str | None:
    """A warning when the system nodes' root volume is small for the job images they pull, else None."""
    pulling = sorted({j.image for _, j in entries(cfg.jobs) if j.launcher in ("mpirun", "ps")})
    disk = cfg.system_nodes.disk_size_gib
    if not pulling or disk >= DISK_FOR_JOB_IMAGES_GIB:
        return None
    return (f"systemNodes.diskSizeGiB is {disk}: the launchers and chiefs of mpirun and ps jobs pull "
            f"{len(pulling)} job image{'s' if len(pulling) != 1 else ''} onto the system nodes (a Deep Learning "
            f"Container is 15-20 GB, kept compressed and unpacked); {DISK_FOR_JOB_IMAGES_GIB} GiB keeps kubelet's "
            "image garbage collection and disk-pressure eviction away from Kueue and the operators. Changing it "
            "rolls the system nodes: do it while no MPIJob runs")

