"""ClusterAutoscaler: scales the GPU pools up from zero for pending jobs and back down when idle.

The upstream chart (pinned in components.core.versions) on the system
nodes, with AWS access through an EKS Pod Identity association whose role
may change only this cluster's Auto Scaling groups. Values, flags and the
policy are pure functions in components.core.kube.autoscaling. Its
ServiceMonitor is ours (components.core.observability.scrape), created after
the Prometheus Operator's CRDs: the release itself does not wait for them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam
from components.core import versions as v
from components.core.kube import autoscaling, nodepool
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.observability import scrape
from components.kubernetes.objects import KubernetesObject


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    cluster_name: str
    cluster: pulumi.Input[str]  # the EKS cluster's name output: the association waits for the cluster
    region: str
    account_id: str
    partition: str
    kubernetes_version: str
    pools: Sequence[nodepool.Pool]  # GPU and CPU: the shortest idle time of any sets the scale-down delay
    provider: k8s.Provider
    # The system nodes to run on and the Pod Identity agent that hands out the role.
    depends_on: Sequence[pulumi.Resource] = field(default_factory=tuple)
    tags: dict[str, str] = field(default_factory=dict)
    # Monitoring.crds_ready when the metrics stack is on: the autoscaler's ServiceMonitor (ours, the chart's
    # off) waits for it; the release does not, so GPU pools can scale before the metrics stack is up.
    metrics_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # Operators.provisioning_crds: the ProvisioningRequest CRD when a pool is atomic. The release waits for it: with
    # --enable-provisioning-requests the autoscaler waits at start until its ProvisioningRequest informer has synced
    # (provisioningrequest/provreqclient/client.go newPRsLister at 1.35.2), which it cannot without the CRD.
    provisioning_crds: Sequence[pulumi.Resource] = field(default_factory=tuple)


class ClusterAutoscaler(pulumi.ComponentResource):
    """cluster-autoscaler (Helm) with a least-privilege Pod Identity role."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:ClusterAutoscaler", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        role, _ = iam.service_role(
            f"{name}-role", iam.POD_IDENTITY, [], args.tags, self,
            cluster_arn=iam.cluster_arn(args.cluster, args.partition, args.region, args.account_id),
            namespace=autoscaling.NAMESPACE, service_account=autoscaling.SERVICE_ACCOUNT)
        policy = aws.iam.RolePolicy(
            f"{name}-role-policy", role=role.name,
            policy=autoscaling.iam_policy(args.cluster_name, args.account_id, args.region, args.partition),
            opts=child)
        association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity", cluster_name=args.cluster, namespace=autoscaling.NAMESPACE,
            service_account=autoscaling.SERVICE_ACCOUNT, role_arn=role.arn, tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=autoscaling.RELEASE_NAME,
            chart=v.CLUSTER_AUTOSCALER_CHART,
            version=v.CLUSTER_AUTOSCALER_CHART_VERSION,
            repository_opts={"repo": v.CLUSTER_AUTOSCALER_CHART_REPO},
            namespace=autoscaling.NAMESPACE,
            values=autoscaling.helm_values(args.cluster_name, args.region, args.kubernetes_version, args.pools,
                                           SYSTEM_NODE_LABEL, metrics=False),
            # The pod must find its role the moment it starts: without the
            # association it would fall back to the node role, which may not scale groups.
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[association, *args.depends_on, *args.provisioning_crds]),
        )
        if args.metrics_crds:
            KubernetesObject(f"{name}-monitor", scrape.autoscaler_service_monitor(), pulumi.ResourceOptions(
                parent=self, provider=args.provider, depends_on=[self.release, *args.metrics_crds]))
        self.register_outputs({"roleArn": role.arn, "release": self.release.name,
                               "image": f"{v.CLUSTER_AUTOSCALER_IMAGE}:{autoscaling.image_tag(args.kubernetes_version)}"})
