"""Queue: Kueue, so a multi-node job starts with all its nodes or waits its turn.

The upstream chart (pinned in components.core.versions) on the system
nodes, then the ResourceFlavors, the ClusterQueue, the training
namespace's LocalQueue and the WorkloadPriorityClasses of
components.core.kube.queueing. Kueue's webhooks reject these objects until the
release is ready, and its finalizers hold them until Kueue removes them:
they are created after the release and, on destroy, deleted before it.

The training namespace's NetworkPolicies (components.core.kube.network_policy)
are registered here too, with the LocalQueue that admits jobs into it: they
need only the namespace, and every job (which waits for `ready`) is created
after them. Kueue's ServiceMonitor is ours, after the Prometheus Operator's
CRDs; nothing else here waits for the metrics stack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from components.core import versions as v
from components.core.config import SystemNodesConfig
from components.core.kube import network_policy, nodepool, queueing
from components.core.observability import prometheus_stack, scrape
from components.kubernetes.objects import KubernetesObject, release_in_own_namespace


@dataclass(frozen=True)
class QueueArgs:
    pools: Sequence[nodepool.Pool]  # GPU and CPU
    system_nodes: SystemNodesConfig
    namespace: str  # the training namespace
    namespace_resource: pulumi.Resource
    provider: k8s.Provider
    # None while running; Hold or HoldAndDrain while the stack is paused (StackConfig.stop_policy).
    stop_policy: str = "None"
    # The operators' CRDs first (Operators.ready): Kueue sets up its MPIJob and TrainJob webhooks at start for
    # the CRDs it finds; a later one is set up only at a poll, and a job created in between would bypass the
    # queue. Not the metrics stack: the chart's own ServiceMonitor is off, ours waits for the CRDs alone.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Monitoring.crds_ready when the metrics stack is on: Kueue's ServiceMonitor waits for it, nothing else does.
    metrics_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)


class Queue(pulumi.ComponentResource):
    """Kueue (Helm) and the queue objects jobs are admitted through."""

    release: k8s.helm.v3.Release
    cluster_queue_name: str
    local_queue_name: str
    network_policies: list[KubernetesObject]
    ready: list[pulumi.Resource]  # what a job waits for: Kueue and the queue objects (not the monitor)

    def __init__(self, name: str, args: QueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Queue", name, None, opts)
        k8s_opts = dict(parent=self, provider=args.provider)
        self.release = release_in_own_namespace(
            f"{name}-kueue", "kueue", v.KUEUE_CHART, v.KUEUE_CHART_VERSION, queueing.NAMESPACE,
            # Its chart's ServiceMonitor off: with it the install would need the Prometheus Operator's CRDs.
            queueing.helm_values(args.namespace, metrics=False), args.provider, self, args.depends_on)

        def custom(res_name: str, obj: dict, depends_on: list[pulumi.Resource], **extra) -> KubernetesObject:
            return KubernetesObject(res_name, obj, pulumi.ResourceOptions(
                **k8s_opts, depends_on=[self.release, *depends_on], **extra))

        flavors = [custom(f"{name}-flavor-{f['metadata']['name']}", f, [])
                   for f in queueing.resource_flavors(args.pools)]
        cluster_queue = custom(f"{name}-cluster-queue",
                               queueing.cluster_queue(args.pools, args.system_nodes, args.namespace,
                                                      args.stop_policy), flavors)
        # spec.clusterQueue is immutable (LocalQueue CRD): a new one replaces it.
        local_queue = custom(f"{name}-local-queue", queueing.local_queue(args.namespace),
                             [cluster_queue, args.namespace_resource],
                             replace_on_changes=["spec.clusterQueue"], delete_before_replace=True)
        priorities = [custom(f"{name}-priority-{wpc['metadata']['name']}", wpc, [])
                      for wpc in queueing.priority_classes()]
        self.network_policies = [
            # After the operators (so the system nodes): on destroy they go while the vpc-cni add-on is still
            # there, whose policy controller removes their finalizer (networking.k8s.aws/resources,
            # aws/amazon-network-policy-controller-k8s policy_controller.go); later, the namespace would hang.
            KubernetesObject(f"{name}-netpol-{policy['metadata']['name']}", policy, pulumi.ResourceOptions(
                **k8s_opts, depends_on=[args.namespace_resource, *args.depends_on]))
            for policy in network_policy.training_policies(args.namespace, prometheus_stack.NAMESPACE)]
        self.ready = [self.release, *flavors, cluster_queue, local_queue, *priorities, *self.network_policies]
        if args.metrics_crds:
            # After the CRDs (and the release, so its Service): a ServiceMonitor needs nothing else.
            KubernetesObject(f"{name}-monitor", scrape.kueue_service_monitor(), pulumi.ResourceOptions(
                **k8s_opts, depends_on=[self.release, *args.metrics_crds]))
        self.cluster_queue_name = queueing.CLUSTER_QUEUE
        self.local_queue_name = queueing.LOCAL_QUEUE
        self.register_outputs({"clusterQueue": self.cluster_queue_name, "localQueue": self.local_queue_name,
                               "stopPolicy": args.stop_policy, "kueueChartVersion": v.KUEUE_CHART_VERSION})
