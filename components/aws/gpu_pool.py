"""GpuNodePool: one managed node group of GPU nodes with every EFA interface wired.

Per pool: an EFA security group, a cluster placement group (when the pool
uses one), a launch template with the EFA interface layout of
`components.efa`, the EKS managed node group in the single GPU zone, and the
cluster-autoscaler node-template tags on its Auto Scaling group so the pool
can scale up from zero. Labels, taints, tags and user data come from
`components.nodepool`; this module only wires resources together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from components.aws import node_group as ng
from components.core.config import GpuPoolConfig
from components.core.hardware import efa
from components.core.kube import nodepool

# EKS-optimized AL2023 AMI with the NVIDIA driver, container toolkit and the
# EFA driver (EKS User Guide, "Create nodes with optimized accelerated
# Amazon Linux AMIs"); the node group picks it from ami_type.
AMI_TYPE = "AL2023_x86_64_NVIDIA"

def network_interfaces(pool: GpuPoolConfig, security_group_ids: list[pulumi.Input[str]]) -> list[dict[str, Any]]:
    """Launch template network interfaces: the EFA layout, every interface in every security group.

    No subnet here: the managed node group places interfaces in its own
    subnets. Security groups sit on the interfaces because a launch
    template cannot have both vpc_security_group_ids and network_interfaces.
    """
    interfaces = []
    for spec in efa.interface_layout(pool.instance, pool.efa_enabled):
        interface: dict[str, Any] = {
            "device_index": spec.device_index,
            "network_card_index": spec.network_card_index,
            "security_groups": list(security_group_ids),
            "delete_on_termination": "true",
        }
        if spec.is_efa:
            interface["interface_type"] = spec.interface_type
        interfaces.append(interface)
    return interfaces


def capacity_options(pool: GpuPoolConfig) -> dict[str, Any]:
    """Launch template arguments that bind the pool to its reservation.

    A Capacity Block needs market type capacity-block plus the reservation as
    target (EC2 User Guide, "Use Capacity Blocks for ML"; EKS User Guide,
    "Create a managed node group for Capacity Blocks for ML"). On-demand with
    a reservation id targets that ODCR instead of open matching.
    """
    options: dict[str, Any] = {}
    if pool.capacity_reservation_id is not None:
        options["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": pool.capacity_reservation_id}}
    if pool.capacity_type == "CAPACITY_BLOCK":
        options["instance_market_options"] = {"market_type": "capacity-block"}
    return options


@dataclass(frozen=True)
class GpuNodePoolArgs:
    pool: GpuPoolConfig
    node_group: ng.NodeGroupSettings  # cluster, AMI release, subnet (EFA does not cross zones), role, tags
    vpc_id: pulumi.Input[str]
    # Cluster security group + network.node_security_group_id: a launch template
    # with its own security groups replaces EKS's default (the cluster SG), so
    # it must be listed. The pool adds its EFA security group.
    security_group_ids: list[pulumi.Input[str]]


class GpuNodePool(pulumi.ComponentResource):
    """A managed node group of one GPU instance type, EFA on every card, autoscaled from zero."""

    node_group_name: pulumi.Output[str]
    asg_name: pulumi.Output[str]
    efa_security_group_id: pulumi.Output[str] | None
    placement_group_name: pulumi.Output[str] | None
    labels: dict[str, str]
    taints: tuple[nodepool.Taint, ...]
    efa_interfaces: int
    gpus_per_node: int
    hugepages_2mi: str | None

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        pool = args.pool
        super().__init__("gpucluster:index:GpuNodePool", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.labels = nodepool.node_labels(pool)
        self.taints = nodepool.node_taints(pool)
        self.efa_interfaces = nodepool.efa_interfaces(pool)
        self.gpus_per_node = pool.instance.gpu_count
        self.hugepages_2mi = nodepool.hugepages_2mi(pool)

        def tags(role: str) -> dict[str, str]:
            return {**args.node_group.tags, "Name": f"{name}-{role}"}

        security_group_ids = list(args.security_group_ids)
        self.efa_security_group_id = None
        if pool.efa_enabled:
            # EFA traffic must be allowed to and from the group itself (EC2 User
            # Guide, "Prepare an EFA-enabled security group"). Separate rule
            # resources, not inline rules, so rules can change without
            # replacing the group; no other egress, the node group's other
            # security groups grant the rest.
            efa_sg = aws.ec2.SecurityGroup(f"{name}-efa-sg", vpc_id=args.vpc_id,
                                           description=f"EFA traffic among the nodes of GPU pool {pool.name}",
                                           tags=tags("efa"), opts=child)
            aws.vpc.SecurityGroupIngressRule(f"{name}-efa-ingress", security_group_id=efa_sg.id,
                                             referenced_security_group_id=efa_sg.id, ip_protocol="-1",
                                             description="all traffic from EFA peers", opts=child)
            aws.vpc.SecurityGroupEgressRule(f"{name}-efa-egress", security_group_id=efa_sg.id,
                                            referenced_security_group_id=efa_sg.id, ip_protocol="-1",
                                            description="all traffic to EFA peers", opts=child)
            security_group_ids.append(efa_sg.id)
            self.efa_security_group_id = efa_sg.id

        placement = None
        self.placement_group_name = None
        if pool.uses_placement_group:
            # One spine for all nodes: lowest latency between EFA peers (EC2
            # User Guide, "Placement strategies", cluster).
            group = aws.ec2.PlacementGroup(f"{name}-placement", strategy="cluster", tags=tags("placement"),
                                           opts=child)
            # A placement group's id is its name (it is imported by name).
            placement = {"group_name": group.id}
            self.placement_group_name = group.id

        capacity_block = pool.capacity_type == "CAPACITY_BLOCK"
        template = aws.ec2.LaunchTemplate(
            f"{name}-launch-template",
            description=f"GPU pool {pool.name}: {pool.instance_type}, {self.efa_interfaces} EFA interfaces",
            # No image_id: the node group's ami_type picks the EKS AL2023 NVIDIA
            # AMI and EKS adds the bootstrap NodeConfig itself.
            network_interfaces=network_interfaces(pool, security_group_ids),
            placement=placement,
            metadata_options=dict(ng.METADATA_OPTIONS),
            block_device_mappings=ng.root_volume(pool.root_volume_gib),
            instance_type=pool.instance_type if capacity_block else None,
            user_data=nodepool.user_data_base64(pool),
            # The Name only: the stack's tags reach the nodes from the Auto Scaling group (node_group.instance_tags).
            tag_specifications=ng.node_tag_specifications(name),
            tags=tags("launch-template"),
            opts=child,
            **capacity_options(pool),
        )

        # EFA does not cross zones: one subnet, the GPU zone's (NodeGroupSettings.subnet_id). A Capacity
        # Block takes the instance type from the launch template and none on the node group (EKS User
        # Guide, capacity-blocks-mng; terraform-aws-eks sets instance_types to null there); a Spot pool
        # lists its extraInstanceTypes after its own, so EC2 can fill the group from either.
        group = ng.autoscaled_node_group(name, pool, args.node_group, AMI_TYPE, template,
                                         None if capacity_block else list(pool.instance_types), self)
        self.node_group_name, self.asg_name = group.node_group_name, group.asg_name

        self.register_outputs({
            "nodeGroupName": self.node_group_name,
            "asgName": self.asg_name,
            "efaSecurityGroupId": self.efa_security_group_id,
            "placementGroupName": self.placement_group_name,
            "launchTemplateId": template.id,
            "efaInterfaces": self.efa_interfaces,
            "gpusPerNode": self.gpus_per_node,
        })
