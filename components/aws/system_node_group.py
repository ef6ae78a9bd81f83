"""The system node group: on-demand AL2023 nodes for the add-ons, operators, metrics stack, launchers and
chiefs, in one zone (components.core.system_nodes.system_zone says why and which), from a launch template.

The launch template gives the system nodes what the pools have (components.aws.node_group):
IMDSv2 only with one hop, so a pod cannot take the node role's credentials from the instance
metadata service. The system nodes run user images too (MPIJob launchers, parameter-server
chiefs). AL2023 managed node groups without a launch template get hop limit 1 as well (EKS User
Guide, "Upgrade from Amazon Linux 2 to Amazon Linux 2023", al2023: "the default hop count for
managed node groups is set to 1"; the older launch-templates page says EKS's default template sets
2, which is what AL2 node groups got; terraform-provider-aws #38516 saw 1 on AL2023): the template
makes it ours instead of a default. Everything that runs on the system nodes and calls AWS does so
from the host network (the VPC CNI, kube-proxy, the Pod Identity agent) or with Pod Identity and
an explicit region (the EBS and FSx CSI controllers, the autoscaler, Grafana, Prometheus,
Alertmanager), as on the pools, whose nodes have had hop limit 1 all along.

No security groups in the template: EKS then adds the cluster security group, as it did without
a template (EKS User Guide, launch-templates, "Using custom security groups"). The root volume is
in the template (a node group with a template may not set diskSize: launch-templates), encrypted
gp3 at its baseline 3,000 IOPS and 125 MiB/s.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.aws import lookups
from components.aws.node_group import METADATA_OPTIONS, ROOT_DEVICE, STANDARD_AMI_TYPE, asg_name, instance_tags
from components.core.config import StackConfig
from components.core.hardware.zones import ZonePlan
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.system_nodes import system_zone
from components.hooks import StackHooks, metrics_volumes

# Volumes the cluster's EBS CSI driver made for claims in the metrics namespace (components.hooks.
# metrics_volumes: the driver tags each with our cluster tag and the claim's namespace), not being deleted.
_LIVE = ("creating", "available", "in-use")
NAME_PREFIX = "system-"


def metrics_volume_zone(cluster_name: str) -> str | None:
    """The zone of the cluster's metrics volume (the newest, if the driver left older ones), or None."""
    if lookups.destroying():
        return None
    filters = [{"name": f"tag:{metrics_volumes.CLUSTER_TAG}", "values": [cluster_name]},
               {"name": f"tag:{metrics_volumes.CLAIM_NAMESPACE_TAG}", "values": [metrics_volumes.METRICS_NAMESPACE]},
               {"name": "status", "values": list(_LIVE)}]
    if not aws.ebs.get_ebs_volumes(filters=filters).ids:
        return None
    return aws.ebs.get_volume(filters=filters, most_recent=True).availability_zone


def current_system_zone(cluster_name: str) -> str | None:
    """The zone of the cluster's system node group, when it exists and has one subnet (a group of this
    program's), else None: a first `pulumi up` (no cluster yet), or a group of an older release."""
    if lookups.destroying():
        return None
    try:
        names = [n for n in aws.eks.get_node_groups(cluster_name=cluster_name).names if n.startswith(NAME_PREFIX)]
        if len(names) != 1:
            return None
        subnets = aws.eks.get_node_group(cluster_name=cluster_name, node_group_name=names[0]).subnet_ids
        if len(subnets) != 1:
            return None
        return aws.ec2.get_subnet(id=subnets[0]).availability_zone
    except Exception:  # the invoke's own error: no such cluster yet
        return None


def root_volume(size_gib: int) -> list[dict]:
    """Encrypted gp3 at its baseline (EBS User Guide, "Amazon EBS General Purpose SSD volumes"), gone with the node."""
    return [{"device_name": ROOT_DEVICE, "ebs": {"volume_size": size_gib, "volume_type": "gp3", "encrypted": "true",
                                                  "delete_on_termination": "true"}}]


def system_node_group(name: str, cfg: StackConfig, subnet_ids: list[pulumi.Input[str]], zones: ZonePlan | None,
                      cluster_name: pulumi.Input[str], node_role_arn: pulumi.Input[str],
                      depends_on: list[pulumi.Resource], parent: pulumi.Resource,
                      hooks: StackHooks | None = None) -> tuple[aws.eks.NodeGroup, str]:
    """`<name>-system-nodes` in one zone's subnet, and that zone.

    `subnet_ids` are the cluster's subnets in the order of `zones.cluster_zones`
    (components.aws.network); `zones` is looked up again when not given.
    """
    plan = zones or lookups.lookup_zones(cfg)
    zone, warning = system_zone(plan.cluster_zones, metrics_volume_zone(cfg.cluster_name),
                                current_system_zone(cfg.cluster_name))
    if warning:
        pulumi.log.warn(f"systemNodes: {warning}")
    sys_cfg = cfg.system_nodes
    child = pulumi.ResourceOptions(parent=parent)
    # Only the name in the template: a stack tag there would make a new version, which replaces every system
    # node (launchers and chiefs of running jobs). The stack's tags reach instances from the ASG (instance_tags).
    node_tags = {"Name": f"{cfg.cluster_name}-system"}
    template = aws.ec2.LaunchTemplate(
        f"{name}-system-launch-template",
        description=f"system nodes of {cfg.cluster_name}",
        metadata_options=dict(METADATA_OPTIONS),
        block_device_mappings=root_volume(sys_cfg.disk_size_gib),
        tag_specifications=[{"resource_type": kind, "tags": node_tags} for kind in ("instance", "volume")],
        tags=cfg.tags, opts=child)
    group = aws.eks.NodeGroup(
        f"{name}-system-nodes",
        cluster_name=cluster_name,
        # A prefix, not a fixed name: a change that replaces the group
        # (instance type, zone, launch template) creates the new one before deleting
        # the old, which a fixed name forbids (ResourceInUseException).
        # Node group names are per cluster; EKS allows 63 characters and the
        # provider appends a 26-character unique suffix.
        node_group_name_prefix=NAME_PREFIX,
        version=cfg.kubernetes_version,
        release_version=cfg.versions.ami_release_version,
        node_role_arn=node_role_arn,
        subnet_ids=[subnet_ids[plan.cluster_zones.index(zone)]],
        instance_types=[sys_cfg.instance_type],
        ami_type=STANDARD_AMI_TYPE,
        capacity_type="ON_DEMAND",
        launch_template={"id": template.id, "version": template.latest_version.apply(str)},
        scaling_config={"min_size": sys_cfg.count, "desired_size": sys_cfg.count, "max_size": sys_cfg.count},
        update_config={"max_unavailable": 1},
        labels=SYSTEM_NODE_LABEL,
        tags=cfg.tags,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on),
    )
    instance_tags(f"{name}-system", cfg.tags, group.resources.apply(asg_name), parent, hooks)
    return group, zone
