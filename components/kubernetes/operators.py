"""Operators: the Kubeflow MPI Operator (mpirun) and Kubeflow Trainer v2 with our torchrun runtimes.

`launcher: mpirun` jobs are MPIJobs `kubeflow.org/v2beta1` under the MPI
Operator (components.core.kube.mpi_operator: its upstream manifest, pinned to
v0.8.2); `launcher: torchrun` jobs are TrainJobs `trainer.kubeflow.org/v1alpha1`
under Kubeflow Trainer v2.3.0 (upstream chart, JobSet v0.12.0 with it)
against our ClusterTrainingRuntimes (components.core.kube.trainer). Each CRD has
one definition in the cluster: mpijobs.kubeflow.org from us; the
trainer.kubeflow.org and jobsets.jobset.x-k8s.io CRDs from the Trainer
chart. Kubeflow Training Operator v1 (PyTorchJob) is not installed: Kueue
v0.19 no longer integrates it by default and Trainer v2 succeeds it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.core import versions as v
from components.core.config import GpuPoolConfig, JobConfig
from components.core.kube import mpi_operator, network_policy, trainer
from components.core.observability import prometheus_stack, scrape
from components.core.placement import provisioning
from components.kubernetes.objects import KubernetesObject, release_in_own_namespace

# The CRDs each chart installs (one definition of each in the cluster; tests
# check no two sources overlap): Trainer 2.3.0 templates/crd/ and JobSet 0.12.0
# charts/jobset/crds/ (kubeflow/trainer and kubernetes-sigs/jobset at those tags).
TRAINER_CHART_CRDS = ("clustertrainingruntimes.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org",
                      "trainjobs.trainer.kubeflow.org", "jobsets.jobset.x-k8s.io")


# -- registration -------------------------------------------------------------

_RESOURCE_TYPES = {
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
}
_SHORT_KIND = {
    "CustomResourceDefinition": "crd", "Namespace": "ns", "ServiceAccount": "sa",
    "ClusterRole": "clusterrole", "ClusterRoleBinding": "clusterrolebinding", "Deployment": "deployment",
}
# Created first: everything else of an operator lives in its namespace or needs its CRD.
_FOUNDATION = ("CustomResourceDefinition", "Namespace")


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def register(resource_name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The typed pulumi-kubernetes resource for a plain object (top-level keys to SDK names)."""
    cls = _RESOURCE_TYPES[(obj["apiVersion"], obj["kind"])]
    kwargs = {_snake(k): value for k, value in obj.items() if k not in ("apiVersion", "kind")}
    return cls(resource_name, **kwargs, opts=opts)


@dataclass(frozen=True)
class OperatorsArgs:
    provider: k8s.Provider
    pools: Sequence[GpuPoolConfig] = ()
    jobs: Sequence[JobConfig] = ()  # the torchrun jobs need a runtime for their pool and restart budget
    claim_name: str | None = None  # the FSx claim the runtimes mount
    # Wait for these too (the system node group: the Deployments must have
    # somewhere to run before Pulumi waits for them to become ready).
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Monitoring.crds_ready when the metrics stack is on: the operators' monitors wait for it, nothing else does.
    metrics_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # ImageCache.base: the runtimes' default image (public ECR) is pulled through it, like every job's.
    image_cache: str | None = None


def runtimes_needed(pools: Sequence[GpuPoolConfig],
                    jobs: Sequence[JobConfig]) -> list[tuple[GpuPoolConfig, int, str, int]]:
    """(pool, maxRestarts, mountPath, terminationGracePeriodSeconds) of every torchrun job, each once,
    in the jobs' order."""
    by_name = {p.name: p for p in pools}
    keys = dict.fromkeys((j.pool, j.max_restarts, j.mount_path, j.termination_grace_period_seconds)
                         for j in jobs if j.launcher == "torchrun")
    return [(by_name[pool], restarts, mount, grace) for pool, restarts, mount, grace in keys]


def mpi_operator_ingress() -> dict[str, Any]:
    """The MPI Operator's NetworkPolicy: Prometheus to its metrics port, nothing else in."""
    return network_policy.scrape_only("mpi-operator-ingress", mpi_operator.MPI_OPERATOR_NAMESPACE,
                                      {"app": "mpi-operator"}, mpi_operator.METRICS_PORT, prometheus_stack.NAMESPACE)


class Operators(pulumi.ComponentResource):
    """MPI Operator with its CRD and Kubeflow Trainer (Helm) with our runtimes, on the system nodes.

    Jobs and Kueue wait for `ready`: the CRDs, the MPI Operator and its Deployment, the Trainer release
    and the runtimes. Not for the whole component: its monitors wait for the metrics stack's CRDs.
    """

    crds: dict[str, k8s.apiextensions.v1.CustomResourceDefinition]
    provisioning_crds: list[pulumi.Resource]  # the ProvisioningRequest CRD when a pool is atomic, else none
    deployments: dict[str, k8s.apps.v1.Deployment]
    trainer: k8s.helm.v3.Release
    runtimes: dict[str, pulumi.Resource]
    network_policy: KubernetesObject
    ready: list[pulumi.Resource]  # everything but the monitors

    def __init__(self, name: str, args: OperatorsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Operators", name, None, opts)
        self.crds = {}
        self.deployments = {}
        foundation: list[pulumi.Resource] = []
        rest: list[pulumi.Resource] = []
        objects = mpi_operator.mpi_operator_objects()
        for obj in sorted(objects, key=lambda o: (o["kind"] not in _FOUNDATION, o["kind"] == "Deployment")):
            kind = obj["kind"]
            res_name = f"{name}-mpi-{_SHORT_KIND[kind]}-{obj['metadata']['name']}"
            if kind in _FOUNDATION:
                deps = list(args.depends_on)
            elif kind == "Deployment":
                deps = [*args.depends_on, *foundation, *rest]
            else:
                deps = [*args.depends_on, *foundation]
            res = register(res_name, obj, pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                                 depends_on=deps))
            if kind == "CustomResourceDefinition":
                self.crds[obj["metadata"]["name"]] = res
            if kind == "Deployment":
                self.deployments["mpi"] = res
            (foundation if kind in _FOUNDATION else rest).append(res)

        # Nothing but Prometheus reaches the operator (its metrics port); the kubelet's probes come from the node.
        mpi_namespace = next(r for r in foundation if isinstance(r, k8s.core.v1.Namespace))
        self.network_policy = KubernetesObject(
            f"{name}-mpi-netpol", mpi_operator_ingress(), pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[mpi_namespace]))

        # cluster-autoscaler's ProvisioningRequest CRD (its chart has none), for atomic scale-up. Kueue and the
        # autoscaler must find it when they start: Kueue sets up its provisioning controller only then, and the
        # autoscaler waits for its ProvisioningRequest informer to sync. Kueue waits for `ready`; the autoscaler's
        # release for `provisioning_crds`. After the system nodes, like every object: on destroy it goes (and its
        # ProvisioningRequests with it) while Kueue and the autoscaler still run.
        self.provisioning_crds = []
        if provisioning.needed(args.pools):
            self.crds[provisioning.CRD_NAME] = register(
                f"{name}-crd-{provisioning.CRD_NAME}", provisioning.crd(),
                pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=list(args.depends_on)))
            self.provisioning_crds.append(self.crds[provisioning.CRD_NAME])

        self.trainer = release_in_own_namespace(
            f"{name}-trainer", "kubeflow-trainer", v.TRAINER_CHART, v.TRAINER_CHART_VERSION, trainer.NAMESPACE,
            trainer.helm_values(), args.provider, self, args.depends_on)
        # A runtime must exist before a TrainJob naming it (the TrainJob webhook
        # rejects one whose runtime is missing), and the runtime webhook must run.
        self.runtimes = {}
        for pool, restarts, mount_path, grace in runtimes_needed(args.pools, args.jobs):
            manifest = trainer.runtime(pool, restarts, args.claim_name, mount_path, grace, args.image_cache)
            runtime_name = manifest["metadata"]["name"]
            self.runtimes[runtime_name] = KubernetesObject(
                f"{name}-runtime-{runtime_name}", manifest,
                pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.trainer]))
        self.ready = [*foundation, *rest, *self.provisioning_crds, self.network_policy, self.trainer,
                      *self.runtimes.values()]
        if args.metrics_crds:
            for monitor, owner in ((scrape.mpi_operator_pod_monitor(), mpi_namespace),
                                   (scrape.trainer_service_monitor(), self.trainer),
                                   (scrape.jobset_service_monitor(), self.trainer)):
                KubernetesObject(f"{name}-{monitor['metadata']['name']}-monitor", monitor, pulumi.ResourceOptions(
                    parent=self, provider=args.provider, depends_on=[owner, *args.metrics_crds]))
        self.register_outputs({
            "crds": list(self.crds),
            "mpiOperatorImage": v.MPI_OPERATOR_IMAGE,
            "trainerChartVersion": v.TRAINER_CHART_VERSION,
            "runtimes": list(self.runtimes),
        })
