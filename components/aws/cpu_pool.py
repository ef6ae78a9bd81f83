"""CpuNodePool: one managed node group of CPU nodes in the GPU zone, autoscaled from zero.

For the jobs' parameter servers (`launcher: ps`): beside the GPU workers,
in the same subnet (no cross-zone traffic between parameter servers and
workers), no EFA, no placement group. Labels, taint and the autoscaler's
node template come from components.core.kube.nodepool, the node group and
launch template's common parts from components.aws.node_group.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws import node_group as ng
from components.core.config import CpuPoolConfig

AMI_TYPE = ng.STANDARD_AMI_TYPE


@dataclass(frozen=True)
class CpuNodePoolArgs:
    pool: CpuPoolConfig
    node_group: ng.NodeGroupSettings
    # The cluster security group and the node security group (what GPU nodes have
    # but EFA): parameter servers and workers talk through the node group rules.
    security_group_ids: list[pulumi.Input[str]]


class CpuNodePool(pulumi.ComponentResource):
    """A managed node group of one CPU instance type, tainted for the jobs that ask for it."""

    node_group_name: pulumi.Output[str]
    asg_name: pulumi.Output[str]

    def __init__(self, name: str, args: CpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        pool = args.pool
        super().__init__("gpucluster:index:CpuNodePool", name, None, opts)

        def tags(role: str) -> dict[str, str]:
            return {**args.node_group.tags, "Name": f"{name}-{role}"}

        template = aws.ec2.LaunchTemplate(
            f"{name}-launch-template",
            description=f"CPU pool {pool.name}: {pool.instance_type}",
            vpc_security_group_ids=list(args.security_group_ids),
            metadata_options=dict(ng.METADATA_OPTIONS),
            block_device_mappings=ng.root_volume(pool.root_volume_gib),
            # The Name only: the stack's tags reach the nodes from the Auto Scaling group (node_group.instance_tags).
            tag_specifications=ng.node_tag_specifications(name),
            tags=tags("launch-template"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        group = ng.autoscaled_node_group(name, pool, args.node_group, AMI_TYPE, template,
                                         list(pool.instance_types), self)
        self.node_group_name, self.asg_name = group.node_group_name, group.asg_name

        self.register_outputs({
            "nodeGroupName": self.node_group_name,
            "asgName": self.asg_name,
            "launchTemplateId": template.id,
        })
