"""Cluster: the EKS control plane, its access, add-ons, system nodes and k8s Provider."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam
from components.aws.system_node_group import system_node_group
from components.core import cluster_access, namespaces
from components.core.cluster_access import principal_slug
from components.core.config import StackConfig, support_type
from components.core.hardware.zones import ZonePlan
from components.hooks import StackHooks, metrics_volumes

ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"
LOG_TYPES = ("api", "audit", "authenticator")
LOG_RETENTION_DAYS = 90

# Managed add-ons installed before any node joins (the CNI, kube-proxy and the
# Pod Identity agent are DaemonSets that nodes need to become Ready) and after
# the system nodes exist (Deployments that need somewhere to run).
# EKS User Guide, "Amazon EKS add-ons".
ADDONS_BEFORE_NODES = ("vpc-cni", "kube-proxy", "eks-pod-identity-agent")
ADDONS_AFTER_NODES = ("coredns", "eks-node-monitoring-agent")
# The EBS CSI driver's controller gets its volumes' permissions from its own Pod Identity role
# (EKS User Guide, "Store Kubernetes volumes with Amazon EBS": service account ebs-csi-controller-sa).
EBS_CSI_ADDON = "aws-ebs-csi-driver"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
# The add-ons' service accounts live in kube-system (EKS User Guide: ebs-csi, fsx-csi and the VPC CNI's
# IRSA examples name system:serviceaccount:kube-system:<account>), as their Pod Identity roles say.
CNI_SERVICE_ACCOUNT = "aws-node"
# Every volume it creates carries the cluster's name, so one left behind is findable (and the
# metrics volume is deleted before the cluster: components.hooks.metrics_volumes).
VOLUME_TAG = metrics_volumes.CLUSTER_TAG
# The VPC CNI enforces NetworkPolicies (components.core.kube.network_policy) once its add-on is
# configured so: {"enableNetworkPolicy": "true"} (EKS User Guide, "Restrict Pod network traffic with
# Kubernetes network policies", step "Enable the network policy parameter for the add-on"; a string,
# as the guide's example and the amazon-vpc-cni-k8s chart at v1.22.4 have it: values.yaml
# `enableNetworkPolicy: "false"`, rendered into the amazon-vpc-cni ConfigMap's
# enable-network-policy-controller and the node agent's --enable-network-policy). EKS then runs the
# policy controller; the aws-node pods' network policy agent enforces on each node. Standard mode
# (the default NETWORK_POLICY_ENFORCING_MODE): a new pod starts allowed until its policies are in place.
VPC_CNI_CONFIGURATION = {"enableNetworkPolicy": "true"}
# The training namespace's and every team namespace's labels: the same, no Pod Security labels (training
# pods are the jobs' own manifests, components.core.kube.hardening).
NAMESPACE_LABELS = {"app.kubernetes.io/part-of": "gpucluster"}


def access_policy(partition: str, name: str = ADMIN_POLICY) -> str:
    """An EKS access policy's ARN (EKS User Guide, access-policy-permissions): arn:<partition>:eks::aws:..."""
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


def kubeconfig(cluster_name: str, endpoint: str, ca_data: str, region: str, profile: str | None = None,
               role_arn: str | None = None) -> dict:
    """A kubeconfig that authenticates with `aws eks get-token` (no static secret).

    The token is minted as the AWS provider's identity, its aws:profile and
    its assumed role (--role-arn), so the Kubernetes provider acts as the
    same principal as the AWS provider.
    """
    args = ["eks", "get-token", "--cluster-name", cluster_name, "--region", region, "--output", "json"]
    if role_arn:
        args += ["--role-arn", role_arn]
    if profile:
        # --profile, not AWS_PROFILE, which ambient credentials can override (pulumi-eks, generateKubeconfig).
        args += ["--profile", profile]
    exec_config: dict = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": args,
        "interactiveMode": "Never",
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}],
        "current-context": cluster_name,
        "users": [{
            "name": cluster_name,
            "user": {"exec": exec_config},
        }],
    }


@dataclass(frozen=True)
class ClusterArgs:
    config: StackConfig
    # Private subnets in zones EKS accepts (Network.cluster_subnet_ids, in the order of
    # zones.cluster_zones): the control plane's, and one of them the system nodes'.
    subnet_ids: list[pulumi.Input[str]]
    # True when /aws/eks/<name>/cluster exists already (lookups.log_group_exists):
    # EKS re-creates it after a delete, so it is adopted instead of created.
    log_group_exists: bool = False
    # The program's delete hooks: before the cluster goes, the metrics volume the EBS CSI driver left.
    hooks: StackHooks | None = None
    # The zone plan the program chose (lookups.lookup_zones); looked up again when not given.
    zones: ZonePlan | None = None


class Cluster(pulumi.ComponentResource):
    """EKS with API access entries, KMS-encrypted secrets, logs, add-ons and system nodes."""

    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    cluster_security_group_id: pulumi.Output[str]
    node_role: aws.iam.Role
    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    version: str
    system_nodes: aws.eks.NodeGroup
    system_zone: str  # the one zone of the system nodes, and so of the metrics volume
    core_addons: list[aws.eks.Addon]
    node_prerequisites: list[pulumi.Resource]  # what any node group must wait for
    training_namespace: k8s.core.v1.Namespace
    team_namespaces: dict[str, k8s.core.v1.Namespace]  # by team name (= its namespace), gpucluster:teams
    member_access: dict[str, aws.eks.AccessEntry]  # the teams' members, by resource-name slug

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Cluster", name, None, opts)
        cfg = args.config
        tags = cfg.tags
        child = pulumi.ResourceOptions(parent=self)
        self.version = cfg.kubernetes_version
        partition = aws.get_partition().partition
        cluster_arn = iam.cluster_arn(cfg.cluster_name, partition, cfg.region)

        role, role_policies = iam.service_role(f"{name}-role", "eks.amazonaws.com",
                                               [iam.managed_policy(partition, iam.EKS_CLUSTER_POLICY)], tags, self)
        key = aws.kms.Key(f"{name}-secrets-key", description=f"EKS secrets envelope encryption for {cfg.cluster_name}",
                          enable_key_rotation=True, deletion_window_in_days=30, tags=tags, opts=child)
        aws.kms.Alias(f"{name}-secrets-key-alias", name=f"alias/{cfg.cluster_name}-eks-secrets",
                      target_key_id=key.key_id, opts=child)
        # Created first so EKS writes into a group with a retention we chose.
        # EKS re-creates the group while it flushes logs after the cluster is
        # deleted (terraform-aws-eks #2486), so a destroy-then-up would fail with
        # ResourceAlreadyExistsException: the group is kept on destroy (audit
        # logs outlive the cluster, expiring after the retention) and adopted
        # by the next `pulumi up`. An import whose inputs differ from the group
        # (EKS's has no retention) is imported, then updated to them
        # (pulumi/pulumi #19339, in CLI 3.174.0; pulumi/docs #18114).
        log_group_name = f"/aws/eks/{cfg.cluster_name}/cluster"
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", name=log_group_name, retention_in_days=LOG_RETENTION_DAYS, tags=tags,
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True,
                                        import_=log_group_name if args.log_group_exists else None))

        public = bool(cfg.public_access_cidrs)
        cluster = aws.eks.Cluster(
            f"{name}-eks",
            name=cfg.cluster_name,
            version=cfg.kubernetes_version,
            role_arn=role.arn,
            vpc_config={
                "subnet_ids": args.subnet_ids,
                "endpoint_private_access": True,
                "endpoint_public_access": public,
                **({"public_access_cidrs": list(cfg.public_access_cidrs)} if public else {}),
            },
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": False},
            encryption_config={"provider": {"key_arn": key.arn}, "resources": ["secrets"]},
            enabled_cluster_log_types=list(LOG_TYPES),
            # We install the managed add-ons ourselves, pinned per version.
            bootstrap_self_managed_addons=False,
            upgrade_policy={"support_type": support_type(cfg.kubernetes_version)},
            tags=tags,
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[log_group, *role_policies],
                # Every node group depends on the cluster: when it goes, no node is left to pull through the
                # image cache and re-create a repository its rule's hook deleted.
                hooks=args.hooks.before_delete(args.hooks.release_metrics_volumes, args.hooks.sweep_cached_images)
                if args.hooks else None),
        )

        # Exactly the configured admins: who runs `pulumi` (a person, a CI role
        # previewing) never changes the access entries.
        admin_access = []
        for arn in dict.fromkeys(cfg.admin_principal_arns):
            slug = principal_slug(arn)
            # An admin who was a team member keeps the member's entry (one per principal: EKS), and back.
            entry = aws.eks.AccessEntry(f"{name}-admin-{slug}", cluster_name=cluster.name, principal_arn=arn,
                                        type="STANDARD", tags=tags, opts=pulumi.ResourceOptions.merge(
                                            child, pulumi.ResourceOptions(aliases=[pulumi.Alias(
                                                name=f"{name}-member-{slug}")])))
            admin_access.append(aws.eks.AccessPolicyAssociation(f"{name}-admin-{slug}-policy", cluster_name=cluster.name,
                                            principal_arn=entry.principal_arn,
                                            policy_arn=access_policy(partition),
                                            access_scope={"type": "cluster"}, opts=child))
        # Each team member: a Kubernetes group and no access policy, so only the team namespace's Role grants
        # anything (components.core.cluster_access). Not the provider's dependency: the deployer is an admin.
        self.member_access = {entry.slug: aws.eks.AccessEntry(
            f"{name}-{entry.slug}", cluster_name=cluster.name, principal_arn=entry.principal_arn,
            type=cluster_access.ENTRY_TYPE, kubernetes_groups=[entry.group], tags=tags,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(aliases=[pulumi.Alias(
                name=f"{name}-admin-{principal_slug(entry.principal_arn)}")])))
            for entry in cluster_access.member_entries(cfg.teams)}

        # Nodes get only what kubelet needs; the CNI's permissions go to its own
        # Pod Identity role instead of every node.
        self.node_role, node_policies = iam.service_role(
            f"{name}-node-role", "ec2.amazonaws.com", iam.managed_policies(partition, iam.NODE_POLICIES), tags, self)
        cni_role, cni_policies = iam.service_role(
            f"{name}-vpc-cni-role", iam.POD_IDENTITY, [iam.managed_policy(partition, iam.CNI_POLICY)], tags, self,
            cluster_arn=cluster_arn, namespace=namespaces.KUBE_SYSTEM, service_account=CNI_SERVICE_ACCOUNT)

        def addon(addon_name: str, depends_on: list[pulumi.Resource], **extra) -> aws.eks.Addon:
            # Pinned per stack (gpucluster:versions.addons): a later `pulumi up`
            # never updates an add-on under running jobs; bootstrap upgrade moves them.
            return aws.eks.Addon(f"{name}-{addon_name}", cluster_name=cluster.name, addon_name=addon_name,
                                 addon_version=cfg.versions.addons[addon_name], resolve_conflicts_on_create="OVERWRITE",
                                 resolve_conflicts_on_update="PRESERVE", tags=tags,
                                 opts=pulumi.ResourceOptions(parent=self, depends_on=depends_on), **extra)

        # The three DaemonSets nodes need are created side by side, right after the control plane. vpc-cni
        # does not wait for the Pod Identity agent: EKS makes the add-on and its association without it (the
        # "agent first" check is eksctl's own, eksctl-io/eksctl #8346); aws-node asks the agent on its node
        # for credentials only when a node starts, and every node group waits for both (node_prerequisites).
        # The CNI's role must hold its policy before aws-node starts (and, on destroy, keep it until the
        # add-on is gone).
        self.core_addons = [
            addon("vpc-cni", [*cni_policies], pod_identity_associations=[
                {"role_arn": cni_role.arn, "service_account": CNI_SERVICE_ACCOUNT}],
                configuration_values=json.dumps(VPC_CNI_CONFIGURATION)),
            addon("kube-proxy", []),
            addon("eks-pod-identity-agent", []),
        ]

        # What a node group waits for, each needed: vpc-cni (a node turns Ready only once aws-node runs on
        # it; terraform-aws-eks creates it "before_compute" for that, #2820), kube-proxy (aws-node reaches
        # the API server through the kubernetes Service's ClusterIP, which kube-proxy programs), the Pod
        # Identity agent (aws-node's credentials for the CNI role) and the node role's policies (kubelet's
        # join and image pulls).
        self.node_prerequisites = [*self.core_addons, *node_policies]
        self.system_nodes, self.system_zone = system_node_group(
            name, cfg, args.subnet_ids, args.zones, cluster.name, self.node_role.arn, self.node_prerequisites, self,
            args.hooks)
        # CoreDNS (and the EBS CSI controller below) are Deployments: EKS reports the add-on ACTIVE only once
        # their pods run, so before any node it would sit DEGRADED until the timeout (terraform-aws-eks #1801,
        # #3001). The node monitoring agent (a DaemonSet) waits alongside CoreDNS, off the critical path.
        for addon_name in ADDONS_AFTER_NODES:
            self.core_addons.append(addon(addon_name, [self.system_nodes]))
        ebs_role, ebs_policies = iam.service_role(
            f"{name}-ebs-csi-role", iam.POD_IDENTITY, [iam.managed_policy(partition, iam.EBS_CSI_POLICY)], tags, self,
            cluster_arn=cluster_arn, namespace=namespaces.KUBE_SYSTEM, service_account=EBS_CSI_SERVICE_ACCOUNT)
        self.core_addons.append(addon(
            EBS_CSI_ADDON, [self.system_nodes, *ebs_policies],
            pod_identity_associations=[{"role_arn": ebs_role.arn, "service_account": EBS_CSI_SERVICE_ACCOUNT}],
            configuration_values=json.dumps({"controller": {"extraVolumeTags": {VOLUME_TAG: cfg.cluster_name}}})))

        self.name = cluster.name
        self.endpoint = cluster.endpoint
        self.cluster_security_group_id = cluster.vpc_config.cluster_security_group_id
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(
            cluster.name, cluster.endpoint, cluster.certificate_authority.data,
        ).apply(lambda a: json.dumps(kubeconfig(a[0], a[1], a[2], cfg.region, cfg.aws_profile, cfg.aws_role_arn))))
        # The deployer may call the Kubernetes API only once its access policy
        # exists; on destroy, Kubernetes objects go before the access does.
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, enable_server_side_apply=True,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=admin_access))
        self.training_namespace = k8s.core.v1.Namespace(
            f"{name}-training-ns", metadata={"name": cfg.training_namespace, "labels": dict(NAMESPACE_LABELS)},
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider))
        # A team's namespace beside it, labelled alike: its queue, RBAC and NetworkPolicies are the Queue's.
        self.team_namespaces = {team.name: k8s.core.v1.Namespace(
            f"{name}-team-{team.name}-ns", metadata={"name": team.namespace, "labels": dict(NAMESPACE_LABELS)},
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider)) for team in cfg.teams}
        self.register_outputs({
            "clusterName": self.name,
            "endpoint": self.endpoint,
            "clusterSecurityGroupId": self.cluster_security_group_id,
            "nodeRoleArn": self.node_role.arn,
            "kubeconfig": self.kubeconfig,
        })
