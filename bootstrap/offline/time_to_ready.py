"""Time to ready from the recording: how long `pulumi up` from nothing takes along the real graph (pure).

Every custom resource gets a duration by kind (the *_MINUTES below, each with
its source or labelled an estimate); it starts once everything it waits for is done: its
recorded dependencies (depends_on and inputs, a component expanded to its
children, as the engine records them) and its provider. The longest path is the
critical path. The parallel bound is the same durations over only the waits a
resource inherently needs (NEEDED, each with its reason), taken over everything
it waits for directly or through a chain. ratio = modelled / bound: 1.0 means
no wait that is not needed lengthens the path; above 1, `unneeded` on the
critical path names the waits that do.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from components.core.storage import fsx

# -- durations (minutes; ~seconds is 0) --------------------------------------------------------
# EKS control plane: about 9 min, 8.5-10 in Terraform logs (FACTS.md "Provisioning times").
EKS_MINUTES = 9
# An EKS add-on: estimate. EKS reports it ACTIVE once its objects are applied and, for one whose pods
# need a node (CoreDNS, the CSI controllers), once they run; vpc-cni and kube-proxy return as soon as
# their pods pass readiness (aws-ia/terraform-aws-eks-blueprints #642).
ADDON_MINUTES = 1
# A managed node group with nodes: estimate, EC2 launch, boot and join (FACTS.md: eksctl end to end
# 15-30 min; Terraform logs show managed node groups "Creation complete after 1m48s"-"1m59s",
# DevopsArtFactory/terraform-provisioning #46, without GPU AMIs or our add-ons' pods).
NODE_GROUP_MINUTES = 4
# One at desired size 0 (a GPU pool scaled from zero): estimate, the Auto Scaling group and nothing to join.
EMPTY_NODE_GROUP_MINUTES = 1
# NAT gateway: estimate (it becomes available in a minute or two).
NAT_GATEWAY_MINUTES = 2
# Helm releases: every one here waits (pulumi-kubernetes helm.v3.Release waits for its objects to be
# ready unless skip_await, which none sets; kube-prometheus-stack with a 900 s timeout). Estimates:
# kube-prometheus-stack's admission-webhook Jobs, operator, Grafana, kube-state-metrics and node-exporter
# on every node (the 5 min the plan used before); webhook-backed controllers 2; one Deployment or
# DaemonSet 1 (a DaemonSet on GPU pools at zero nodes is ready at once).
CHART_MINUTES = {"kube-prometheus-stack": 5, "kueue": 2, "kubeflow-trainer": 2, "cluster-autoscaler": 1,
                 "nvidia-device-plugin": 1, "aws-efa-k8s-device-plugin": 1, "dcgm-exporter": 1}
CHART_DEFAULT_MINUTES = 2  # estimate, a chart not listed
# Plain Kubernetes objects pulumi-kubernetes waits for (a Deployment's or DaemonSet's rollout, a
# Service's endpoints): estimate, an image pull and a readiness probe. Every other object: seconds.
WAITED_KINDS = {"Deployment": 1, "DaemonSet": 1, "StatefulSet": 1, "Service": 1}

# -- the waits each kind inherently needs: (waiting kind, what it waits for, why) ---------------
_WORKLOADS = ("k8s:Deployment", "k8s:DaemonSet", "k8s:StatefulSet")
_KUEUE_OBJECTS = ("k8s:ResourceFlavor", "k8s:ClusterQueue", "k8s:LocalQueue", "k8s:WorkloadPriorityClass")
_JOBS = ("k8s:TrainJob", "k8s:MPIJob")
NEEDED: tuple[tuple[str, str, str], ...] = (
    ("*", "aws:iam/*", "a role holds its policies before anything assumes or names it"),
    ("*", "aws:ec2/*", "the VPC, subnets, security groups and launch templates it is placed in"),
    ("*", "aws:vpc/*", "its security group rules"),
    ("*", "aws:kms/*", "the key that encrypts it"),
    ("*", "aws:s3/*", "the bucket it links to or grants"),
    ("*", "aws:cloudwatch/*", "EKS logs into the group created first with our retention"),
    ("*", "random:*", "a generated name or password it carries"),
    ("*", "aws:ecr/*", "the pull-through cache its images come through"),
    ("aws:eks/*", "eks-cluster", "an access entry or Pod Identity association is made in the cluster"),
    ("addon:*", "eks-cluster", "an add-on is installed into the cluster"),
    ("node-group", "eks-cluster", "nodes join the cluster"),
    ("k8s-provider", "eks-cluster", "the kubeconfig is the cluster's endpoint and CA"),
    ("k8s-provider", "aws:eks/accessPolicyAssociation", "the deployer may call the API once its access policy exists"),
    ("k8s:*", "k8s-provider", "the Kubernetes API"),
    ("chart:*", "k8s-provider", "the Kubernetes API"),
    ("node-group", "addon:vpc-cni", "a node turns Ready only once aws-node runs on it (terraform-aws-eks "
     "before_compute, #2820)"),
    ("node-group", "addon:kube-proxy", "aws-node reaches the API server through the kubernetes Service's "
     "ClusterIP, which kube-proxy programs"),
    ("node-group", "addon:eks-pod-identity-agent", "aws-node gets the CNI role's credentials from the Pod "
     "Identity agent on its node"),
    ("addon:coredns", "node-group", "a Deployment: EKS reports it ACTIVE once its pods run on a node "
     "(terraform-aws-eks #1801, #3001)"),
    ("addon:aws-*-csi-driver", "node-group", "its controller Deployment needs a node"),
    ("aws:autoscaling/*", "node-group", "tags the group's Auto Scaling group"),
    ("chart:*", "node-group", "its pods need nodes: Helm waits for them to be ready"),
    *((w, "node-group", "its pods need nodes: pulumi-kubernetes waits for the rollout") for w in _WORKLOADS),
    ("k8s:Service", "node-group", "pulumi-kubernetes waits for a ready pod behind it"),
    ("chart:*", "aws:eks/podIdentityAssociation", "its pods get their role's credentials when they start"),
    ("k8s:*", "aws:eks/podIdentityAssociation", "its pods get their role's credentials when they start"),
    ("chart:*", "k8s:Namespace", "its objects live in the namespace"),
    ("k8s:*", "k8s:Namespace", "it lives in the namespace"),
    ("chart:kube-prometheus-stack", "addon:aws-ebs-csi-driver", "Prometheus' and Alertmanager's volumes "
     "are EBS volumes the driver provisions"),
    ("chart:kube-prometheus-stack", "k8s:StorageClass", "the class of Prometheus' volume"),
    ("chart:kube-prometheus-stack", "k8s:Secret", "Grafana's admin and Alertmanager's receiver secrets"),
    ("k8s:ServiceMonitor", "chart:kube-prometheus-stack", "its CRD comes with kube-prometheus-stack"),
    ("k8s:PodMonitor", "chart:kube-prometheus-stack", "its CRD comes with kube-prometheus-stack"),
    ("k8s:PrometheusRule", "chart:kube-prometheus-stack", "its CRD comes with kube-prometheus-stack"),
    ("chart:dcgm-exporter", "chart:kube-prometheus-stack", "its chart renders its ServiceMonitor: Helm's "
     "install fails without the CRD"),
    *((w, "k8s:*", "its ConfigMaps, ServiceAccount, RBAC, CRD and claim: its pods read or mount them")
      for w in _WORKLOADS),
    ("chart:kueue", "k8s:CustomResourceDefinition", "Kueue sets up its MPIJob and TrainJob webhooks at start for "
     "the CRDs it finds (a later one only at a poll: a job created between would bypass the queue)"),
    ("chart:kueue", "chart:kubeflow-trainer", "the TrainJob and JobSet CRDs come with it (as above)"),
    ("k8s:ClusterTrainingRuntime", "chart:kubeflow-trainer", "its CRD and validating webhook come with the chart"),
    *((k, "chart:kueue", "its CRD and webhooks come with Kueue") for k in _KUEUE_OBJECTS),
    ("k8s:ClusterQueue", "k8s:ResourceFlavor", "it names its flavors"),
    ("k8s:LocalQueue", "k8s:ClusterQueue", "it names its ClusterQueue"),
    *((job, prerequisite, reason) for job in _JOBS for prerequisite, reason in (
        ("chart:kueue", "Kueue's webhook suspends it until admitted"),
        ("k8s:LocalQueue", "it is admitted through the LocalQueue"),
        ("k8s:ClusterQueue", "it is admitted through the ClusterQueue"),
        ("k8s:WorkloadPriorityClass", "its priority class"),
        ("k8s:ClusterTrainingRuntime", "a TrainJob names its runtime (the webhook rejects it otherwise)"),
        ("k8s:CustomResourceDefinition", "an MPIJob's CRD"),
        ("chart:kubeflow-trainer", "a TrainJob's CRD and webhook"),
        ("k8s:PersistentVolumeClaim", "its pods mount the claim"),
        ("k8s:NetworkPolicy", "its namespace's policies are in place before its first pod"),
        ("k8s:ConfigMap", "its pods read it"), ("k8s:Secret", "its pods read it"))),
    ("fsx-link", "fsx", "an association is made on the file system"),
    ("k8s:PersistentVolume", "fsx", "the volume names the file system, its DNS and mount names"),
    ("k8s:PersistentVolume", "fsx-link", "a job must see the bucket's datasets under the mount"),
    ("k8s:PersistentVolume", "addon:aws-fsx-csi-driver", "the volume's driver"),
    ("k8s:PersistentVolumeClaim", "k8s:PersistentVolume", "it binds to it"),
)


def kind_of(res: Any) -> str:
    """eks-cluster, addon:<name>, node-group, fsx, fsx-link, chart:<chart>, k8s:<Kind>, k8s-provider,
    or the type's module/resource (aws:iam/role)."""
    type_ = res.type
    special = {"aws:eks/cluster:Cluster": "eks-cluster", "aws:eks/nodeGroup:NodeGroup": "node-group",
               "aws:fsx/lustreFileSystem:LustreFileSystem": "fsx", "pulumi:providers:kubernetes": "k8s-provider",
               "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "fsx-link"}
    if type_ in special:
        return special[type_]
    if type_ == "aws:eks/addon:Addon":
        return f"addon:{res.inputs.get('addonName')}"
    if type_.startswith("kubernetes:helm.sh/"):
        return f"chart:{str(res.inputs.get('chart', '')).rsplit('/', 1)[-1]}"
    if type_.startswith("kubernetes:"):
        return f"k8s:{type_.rsplit(':', 1)[-1]}"
    return type_.rsplit(":", 1)[0]


def minutes_of(res: Any, kind: str) -> float:
    if kind == "eks-cluster":
        return EKS_MINUTES
    if kind.startswith("addon:"):
        return ADDON_MINUTES
    if kind == "node-group":
        desired = (res.inputs.get("scalingConfig") or {}).get("desiredSize", 0)
        return NODE_GROUP_MINUTES if desired else EMPTY_NODE_GROUP_MINUTES
    if kind == "fsx":
        return fsx.FILE_SYSTEM_MINUTES  # components.core.storage.fsx (FSx Lustre User Guide)
    if kind == "fsx-link":
        return fsx.ASSOCIATION_MINUTES
    if kind == "aws:ec2/natGateway":
        return NAT_GATEWAY_MINUTES
    if kind.startswith("chart:"):
        return CHART_MINUTES.get(kind.removeprefix("chart:"), CHART_DEFAULT_MINUTES)
    if kind.startswith("k8s:"):
        return WAITED_KINDS.get(kind.removeprefix("k8s:"), 0)
    return 0


@functools.cache
def needed(kind: str, prerequisite: str) -> str | None:
    """Why `kind` inherently waits for `prerequisite`, or None when it need not."""
    return next((why for waiting, on, why in NEEDED if fnmatchcase(kind, waiting) and fnmatchcase(prerequisite, on)),
                None)


@dataclass(frozen=True)
class Node:
    urn: str
    name: str
    kind: str
    minutes: float
    waits_for: frozenset[str]  # URNs: recorded dependencies and the provider


def graph(resources: Iterable[Any]) -> dict[str, Node]:
    """The custom resources and what each waits for (dependencies to resources outside the set dropped)."""
    customs = [r for r in resources if r.custom]
    urns = {r.urn for r in customs}
    nodes = {}
    for r in customs:
        waits = {d for d in r.dependencies if d in urns}
        provider = getattr(r, "provider", "") or ""
        if provider.rsplit("::", 1)[0] in urns:
            waits.add(provider.rsplit("::", 1)[0])
        kind = kind_of(r)
        nodes[r.urn] = Node(r.urn, r.name, kind, float(minutes_of(r, kind)), frozenset(waits))
    return nodes


def _finish_times(nodes: dict[str, Node], edges: dict[str, Iterable[str]]) -> dict[str, float]:
    finish: dict[str, float] = {}
    for urn in _topological(nodes, edges):
        finish[urn] = max((finish[d] for d in edges[urn]), default=0.0) + nodes[urn].minutes
    return finish


def _topological(nodes: dict[str, Node], edges: dict[str, Iterable[str]]) -> list[str]:
    """Every resource after what it waits for; a cycle (which the engine would refuse too) is an error."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1: on the current chain, 2: done
    for start in sorted(nodes):
        if state.get(start):
            continue
        state[start] = 1
        stack = [(start, iter(sorted(edges[start])))]
        while stack:
            urn, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                state[urn] = 2
                order.append(urn)
            elif state.get(dep) == 1:
                raise ValueError(f"dependency cycle through {nodes[dep].name}")
            elif not state.get(dep):
                state[dep] = 1
                stack.append((dep, iter(sorted(edges[dep]))))
    return order


def _ancestors(nodes: dict[str, Node]) -> dict[str, set[str]]:
    result: dict[str, set[str]] = {}
    for urn in _topological(nodes, {u: n.waits_for for u, n in nodes.items()}):
        result[urn] = set(nodes[urn].waits_for).union(*(result[d] for d in nodes[urn].waits_for))
    return result


def needed_edges(nodes: dict[str, Node]) -> dict[str, set[str]]:
    """For each resource, what it waits for (directly or through a chain) that it inherently needs."""
    return {urn: {a for a in ancestors if needed(nodes[urn].kind, nodes[a].kind)}
            for urn, ancestors in _ancestors(nodes).items()}


@dataclass(frozen=True)
class Step:
    name: str
    kind: str
    minutes: float
    finish: float
    why: str | None  # why it waits for the step before (None: the first step, or a wait it does not need)
    alongside: tuple[str, ...] = ()  # others it could be swapped for: they take time and end at the same time


@dataclass(frozen=True)
class TimeToReady:
    modelled: float
    bound: float
    steps: tuple[Step, ...]  # the critical path's steps that take time, first to last
    unneeded: tuple[tuple[str, str], ...]  # (step, step before) on the critical path: a wait not needed

    @property
    def ratio(self) -> float:
        return round(self.modelled / self.bound, 3) if self.bound else 1.0


def compute(resources: Sequence[Any]) -> TimeToReady:
    """Modelled time to ready, its critical path, the parallel bound and the waits on the path not needed."""
    nodes = graph(resources)
    if not nodes:
        return TimeToReady(0.0, 0.0, (), ())
    finish = _finish_times(nodes, {u: n.waits_for for u, n in nodes.items()})
    bound = max(_finish_times(nodes, needed_edges(nodes)).values())

    def pick(candidates: Iterable[str], waiting: Node | None) -> tuple[str, tuple[str, ...]]:
        # The latest to finish; among equals a needed wait, then the longer step, then the name.
        best = max(finish[c] for c in candidates)
        tied = sorted((c for c in candidates if finish[c] == best),
                      key=lambda c: (waiting is not None and needed(waiting.kind, nodes[c].kind) is None,
                                     -nodes[c].minutes, nodes[c].name))
        return tied[0], tuple(nodes[c].name for c in tied[1:] if nodes[c].minutes)

    path = [pick(nodes, None)]
    while nodes[path[-1][0]].waits_for:
        path.append(pick(nodes[path[-1][0]].waits_for, nodes[path[-1][0]]))
    # Seconds-long steps add nothing: a step is judged against the timed step before it, which it waits for
    # directly or through them, as the bound judges it.
    timed = [(nodes[urn], alongside) for urn, alongside in reversed(path) if nodes[urn].minutes]
    steps, unneeded = [], []
    for i, (node, alongside) in enumerate(timed):
        why = needed(node.kind, timed[i - 1][0].kind) if i else None
        if i and why is None:
            unneeded.append((node.name, timed[i - 1][0].name))
        steps.append(Step(node.name, node.kind, node.minutes, finish[node.urn], why, alongside))
    return TimeToReady(finish[path[0][0]], bound, tuple(steps), tuple(unneeded))
