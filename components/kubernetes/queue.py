"""Queue: Kueue, so a multi-node job starts with all its nodes or waits its turn.

The upstream chart (pinned in components.core.versions) on the system
nodes, then the ResourceFlavors, the ClusterQueue, the training
namespace's LocalQueue and the WorkloadPriorityClasses of
components.core.kube.queueing; before the flavors and queues that name
them, the network Topologies (components.core.placement.topology) and,
when a pool is atomic, the ProvisioningRequestConfig and AdmissionCheck
(components.core.placement.provisioning). Kueue's webhooks reject these objects until the
release is ready, and its finalizers hold them until Kueue removes them:
they are created after the release and, on destroy, deleted before it.

The training namespace's NetworkPolicies (components.core.kube.network_policy)
are registered here too, with the LocalQueue that admits jobs into it: they
need only the namespace, and every job (which waits for `ready`) is created
after them. So is the pre-step check's code (components.core.placement.prestep),
a ConfigMap in each job namespace while a pool checks its jobs. Kueue's
ServiceMonitor is ours, after the Prometheus Operator's CRDs; nothing else here
waits for the metrics stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.core import versions as v
from components.core.config import SystemNodesConfig
from components.core.config.teams import TeamConfig
from components.core.kube import network_policy, nodepool, queueing
from components.core.observability import prometheus_stack, scrape
from components.core.placement import prestep, provisioning, topology
from components.core.teams import access as team_access
from components.core.teams import queues as team_queues
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
    # queue; its ProvisioningRequest controller only if that CRD is there at start. Not the metrics stack: the chart's own ServiceMonitor is off, ours waits for the CRDs alone.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Monitoring.crds_ready when the metrics stack is on: Kueue's ServiceMonitor waits for it, nothing else does.
    metrics_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # gpucluster:teams, and their namespaces (Cluster.team_namespaces): a queue, access and policies each.
    teams: Sequence[TeamConfig] = ()
    team_namespaces: Mapping[str, pulumi.Resource] = field(default_factory=dict)
    # A fleet's manager (components.core.fleet): Kueue's multiKueue section and every namespace its workers queue
    # jobs in. Its flavors and queues are then the Fleet component's (the workers', mirrored), none of its own.
    multi_kueue: Mapping[str, Any] | None = None
    fleet_namespaces: Sequence[str] = ()


class Queue(pulumi.ComponentResource):
    """Kueue (Helm) and the queue objects jobs are admitted through."""

    release: k8s.helm.v3.Release
    cluster_queue_name: str
    local_queue_name: str
    network_policies: list[KubernetesObject]
    topologies: list[KubernetesObject]  # one per distinct network layer count among the pools
    admission_checks: list[KubernetesObject]  # the ProvisioningRequestConfig and its AdmissionCheck, or none
    ready: list[pulumi.Resource]  # what a job waits for: Kueue and the queue objects (not the monitor)

    def __init__(self, name: str, args: QueueArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Queue", name, None, opts)
        k8s_opts = dict(parent=self, provider=args.provider)
        fair_sharing = team_queues.FAIR_SHARING if args.teams else None
        own_queues = args.multi_kueue is None  # a fleet manager's are the Fleet component's
        managed = [n for n in dict.fromkeys([*team_queues.namespaces(args.teams), *args.fleet_namespaces])
                   if n != args.namespace]
        self.release = release_in_own_namespace(
            f"{name}-kueue", "kueue", v.KUEUE_CHART, v.KUEUE_CHART_VERSION, queueing.NAMESPACE,
            # Its chart's ServiceMonitor off: with it the install would need the Prometheus Operator's CRDs.
            queueing.helm_values(args.namespace, metrics=False, team_namespaces=managed,
                                 fair_sharing=fair_sharing, provisioning_requests=provisioning.needed(args.pools),
                                 multi_kueue=None if own_queues else dict(args.multi_kueue)),
            args.provider, self, args.depends_on)

        def custom(res_name: str, obj: dict, depends_on: list[pulumi.Resource], **extra) -> KubernetesObject:
            return KubernetesObject(res_name, obj, pulumi.ResourceOptions(
                **k8s_opts, depends_on=[self.release, *depends_on], **extra))

        # A flavor names its pool's Topology, a queue the AdmissionCheck, which names the config: each after what
        # it names (Kueue marks a ClusterQueue inactive while a check or flavor it names is missing).
        self.topologies = [custom(f"{name}-topology-{t['metadata']['name']}", t, [])
                           for t in topology.topologies(args.pools)]
        self.admission_checks = []
        for obj in provisioning.kueue_objects(args.pools):
            role = "provisioning-config" if obj["kind"] == "ProvisioningRequestConfig" else "admission-check"
            self.admission_checks.append(custom(f"{name}-{role}", obj, list(self.admission_checks)))
        flavors = [custom(f"{name}-flavor-{f['metadata']['name']}", f, list(self.topologies))
                   for f in queueing.resource_flavors(args.pools)] if own_queues else []
        checked = [*flavors, *self.admission_checks]
        if args.teams:
            training_queue = team_queues.training_cluster_queue(args.pools, args.system_nodes, args.namespace,
                                                                args.teams, args.stop_policy)
        else:
            training_queue = queueing.cluster_queue(args.pools, args.system_nodes, args.namespace, args.stop_policy)
        queues = []
        if own_queues:
            cluster_queue = custom(f"{name}-cluster-queue", training_queue, checked)
            # spec.clusterQueue is immutable (LocalQueue CRD): a new one replaces it.
            queues = [cluster_queue, custom(f"{name}-local-queue", queueing.local_queue(args.namespace),
                                            [cluster_queue, args.namespace_resource],
                                            replace_on_changes=["spec.clusterQueue"], delete_before_replace=True)]
        priorities = [custom(f"{name}-priority-{wpc['metadata']['name']}", wpc, [])
                      for wpc in queueing.priority_classes(teams=bool(args.teams))]
        self.network_policies = [
            # After the operators (so the system nodes): on destroy they go while the vpc-cni add-on is still
            # there, whose policy controller removes their finalizer (networking.k8s.aws/resources,
            # aws/amazon-network-policy-controller-k8s policy_controller.go); later, the namespace would hang.
            KubernetesObject(f"{name}-netpol-{policy['metadata']['name']}", policy, pulumi.ResourceOptions(
                **k8s_opts, depends_on=[args.namespace_resource, *args.depends_on]))
            for policy in network_policy.training_policies(args.namespace, prometheus_stack.NAMESPACE)]
        # The pre-step check's code (components.core.placement.prestep), in each namespace jobs run in.
        code = [self._code(f"{name}-goodput-code", args.namespace, args.namespace_resource, args)
                ] if prestep.needed(args.pools) else []
        team_objects = []
        if args.teams:
            pods = KubernetesObject(f"{name}-team-pod-policy", team_access.pod_policy(args.teams),
                                    pulumi.ResourceOptions(parent=self, provider=args.provider))
            team_objects += [pods, KubernetesObject(
                f"{name}-team-pod-policy-binding", team_access.pod_policy_binding(),
                pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[pods]))]
        for team in args.teams if own_queues else ():
            team_objects += self._team(f"{name}-team-{team.name}", team, args, checked, custom)
        self.ready = [self.release, *self.topologies, *self.admission_checks, *flavors, *queues,
                      *priorities, *self.network_policies, *code, *team_objects]
        if args.metrics_crds:
            # After the CRDs (and the release, so its Service): a ServiceMonitor needs nothing else.
            KubernetesObject(f"{name}-monitor", scrape.kueue_service_monitor(), pulumi.ResourceOptions(
                **k8s_opts, depends_on=[self.release, *args.metrics_crds]))
        self.team_cluster_queues = {t.name: team_queues.cluster_queue_name(t) for t in args.teams}
        self.cluster_queue_name = queueing.CLUSTER_QUEUE
        self.local_queue_name = queueing.LOCAL_QUEUE
        self.register_outputs({"clusterQueue": self.cluster_queue_name, "localQueue": self.local_queue_name,
                               "stopPolicy": args.stop_policy, "kueueChartVersion": v.KUEUE_CHART_VERSION,
                               **({"teamClusterQueues": self.team_cluster_queues} if args.teams else {})})

    def _code(self, name: str, namespace: str, namespace_resource: pulumi.Resource,
              args: QueueArgs) -> k8s.core.v1.ConfigMap:
        """The pre-step check's code in a job namespace; after the system nodes, like the policies, so that every
        object of the namespace is gone before them."""
        obj = prestep.code_config_map(namespace, prestep.enforced_pools(args.pools))
        return k8s.core.v1.ConfigMap(name, metadata=obj["metadata"], data=obj["data"], opts=pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[namespace_resource, *args.depends_on]))

    def _team(self, name: str, team: TeamConfig, args: QueueArgs, named: list[KubernetesObject],
              custom) -> list[pulumi.Resource]:
        """One team's ClusterQueue, LocalQueue, Role and binding, admission policy and NetworkPolicies."""
        namespace = args.team_namespaces[team.name]
        queue = custom(f"{name}-cluster-queue", team_queues.team_cluster_queue(team, args.pools, args.system_nodes,
                                                                               args.stop_policy), named)
        local = custom(f"{name}-local-queue", team_queues.local_queue(team), [queue, namespace],
                       replace_on_changes=["spec.clusterQueue"], delete_before_replace=True)
        plain = pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[namespace])
        role = KubernetesObject(f"{name}-role", team_access.role(team), plain)
        binding = KubernetesObject(f"{name}-role-binding", team_access.role_binding(team),
                                   pulumi.ResourceOptions.merge(plain, pulumi.ResourceOptions(depends_on=[role])))
        policy = KubernetesObject(f"{name}-job-policy", team_access.admission_policy(team),
                                  pulumi.ResourceOptions(parent=self, provider=args.provider))
        policy_binding = KubernetesObject(f"{name}-job-policy-binding", team_access.admission_policy_binding(team),
                                          pulumi.ResourceOptions(parent=self, provider=args.provider,
                                                                 depends_on=[policy]))
        netpols = [KubernetesObject(f"{name}-netpol-{p['metadata']['name']}", p, pulumi.ResourceOptions(
            parent=self, provider=args.provider, depends_on=[namespace, *args.depends_on]))
            for p in network_policy.training_policies(team.namespace, prometheus_stack.NAMESPACE)]
        code = [self._code(f"{name}-goodput-code", team.namespace, namespace, args)
                ] if prestep.needed(args.pools) else []
        return [queue, local, role, binding, policy, policy_binding, *netpols, *code]
