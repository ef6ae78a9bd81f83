"""IAM helpers shared by the components: trust policies and managed policy ARNs."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

MANAGED = "arn:aws:iam::aws:policy/"
EKS_CLUSTER_POLICY = MANAGED + "AmazonEKSClusterPolicy"
# EKS User Guide, "Amazon EKS node IAM role": what a node needs, nothing more.
NODE_POLICIES = (
    MANAGED + "AmazonEKSWorkerNodePolicy",
    MANAGED + "AmazonEC2ContainerRegistryReadOnly",
    MANAGED + "AmazonSSMManagedInstanceCore",
)
CNI_POLICY = MANAGED + "AmazonEKS_CNI_Policy"
EBS_CSI_POLICY = MANAGED + "service-role/AmazonEBSCSIDriverPolicy"


def trust_policy(service: str) -> str:
    """Let an AWS service assume the role. Pod Identity also needs TagSession."""
    actions = ["sts:AssumeRole", "sts:TagSession"] if service == "pods.eks.amazonaws.com" else ["sts:AssumeRole"]
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}],
    })


def service_role(name: str, service: str, policies: tuple[str, ...] | list[str], tags: dict[str, str],
                 parent: pulumi.Resource) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """A role for `service` with managed policies attached (children named `{name}-<n>`)."""
    role = aws.iam.Role(name, assume_role_policy=trust_policy(service), tags=tags,
                        opts=pulumi.ResourceOptions(parent=parent))
    attachments = [
        aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[-1].lower()}", role=role.name, policy_arn=arn,
                                     opts=pulumi.ResourceOptions(parent=parent))
        for arn in policies
    ]
    return role, attachments
