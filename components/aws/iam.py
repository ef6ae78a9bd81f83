"""IAM helpers shared by the components: trust policies, and managed policy ARNs in the stack's partition."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

POD_IDENTITY = "pods.eks.amazonaws.com"  # the same in aws-cn and aws-us-gov (components.core.hardware.partitions)

EKS_CLUSTER_POLICY = "AmazonEKSClusterPolicy"
# EKS User Guide, "Amazon EKS node IAM role" (create-node-role): what a node needs, nothing more;
# for ECR, AmazonEC2ContainerRegistryPullOnly (pull only: no listing or describing repositories).
# A pull through the image cache also needs ecr:BatchImportUpstreamImage and ecr:CreateRepository:
# components.aws.image_cache grants both on the cluster's prefix only.
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly", "AmazonSSMManagedInstanceCore")
CNI_POLICY = "AmazonEKS_CNI_Policy"
EBS_CSI_POLICY = "service-role/AmazonEBSCSIDriverPolicy"

# EKS Pod Identity assumes a role with these session tags (EKS User Guide, "Create IAM role with trust
# policy required by EKS Pod Identity", pod-id-role: "Setting Conditions"; the list of tags: pod-id-abac).
# They are on unless an association sets disableSessionTags, which ours never do.
CLUSTER_TAG = "aws:RequestTag/eks-cluster-arn"
NAMESPACE_TAG = "aws:RequestTag/kubernetes-namespace"
SERVICE_ACCOUNT_TAG = "aws:RequestTag/kubernetes-service-account"


def managed_policy(partition: str, name: str) -> str:
    """An AWS managed policy's ARN: arn:<partition>:iam::aws:policy/<name>."""
    return f"arn:{partition}:iam::aws:policy/{name}"


def managed_policies(partition: str, names: Sequence[str]) -> list[str]:
    return [managed_policy(partition, n) for n in names]


def cluster_arn(cluster_name: pulumi.Input[str], partition: str | None = None, region: str | None = None,
                account_id: str | None = None) -> pulumi.Output[str]:
    """The EKS cluster's ARN, arn:<partition>:eks:<region>:<account>:cluster/<name> (Service Authorization
    Reference, Amazon EKS resource type `cluster`), as Pod Identity's eks-cluster-arn session tag carries it.
    What the caller does not pass is asked of the provider (its partition, region and account)."""
    partition = partition or aws.get_partition().partition
    region = region or aws.get_region().region
    account_id = account_id or aws.get_caller_identity().account_id
    return pulumi.Output.from_input(cluster_name).apply(
        lambda name: f"arn:{partition}:eks:{region}:{account_id}:cluster/{name}")


def trust_policy(service: str, *, cluster_arn: pulumi.Input[str] | None = None, namespace: str | None = None,
                 service_account: str | None = None) -> pulumi.Output[str]:
    """Let an AWS service assume the role. Pod Identity also needs TagSession, and its roles accept only
    the one cluster, namespace and service account their association names (the session tags)."""
    if service != POD_IDENTITY:
        return pulumi.Output.from_input(json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": service}, "Action": ["sts:AssumeRole"]}]}))
    given = {CLUSTER_TAG: cluster_arn, NAMESPACE_TAG: namespace, SERVICE_ACCOUNT_TAG: service_account}

    def document(arn: str | None) -> str:
        statement: dict = {"Effect": "Allow", "Principal": {"Service": service},
                           "Action": ["sts:AssumeRole", "sts:TagSession"]}
        conditions = {key: value for key, value in {**given, CLUSTER_TAG: arn}.items() if value is not None}
        if conditions:
            statement["Condition"] = {"StringEquals": conditions}
        return json.dumps({"Version": "2012-10-17", "Statement": [statement]})

    return pulumi.Output.from_input(cluster_arn).apply(document)


def service_role(name: str, service: str, policies: Sequence[str], tags: dict[str, str], parent: pulumi.Resource,
                 *, cluster_arn: pulumi.Input[str] | None = None, namespace: str | None = None,
                 service_account: str | None = None) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
    """A role for `service` with managed policies (full ARNs) attached (children named `{name}-<n>`).

    For a Pod Identity role (service "pods.eks.amazonaws.com") pass all three keywords, the values
    of the role's PodIdentityAssociation (or add-on association) exactly:
      cluster_arn      the cluster's ARN: iam.cluster_arn(<the association's cluster_name>)
      namespace        the association's namespace (an add-on's: kube-system)
      service_account  the association's service account
    The trust policy then admits only sessions tagged with them (EKS User Guide, pod-id-role). A
    Pod Identity role without them trusts any association in the account (tests/test_identity.py
    refuses that for every role of the program). Other services ignore the keywords.
    """
    role = aws.iam.Role(name, assume_role_policy=trust_policy(service, cluster_arn=cluster_arn, namespace=namespace,
                                                              service_account=service_account),
                        tags=tags, opts=pulumi.ResourceOptions(parent=parent))
    attachments = [
        aws.iam.RolePolicyAttachment(f"{name}-{arn.rsplit('/', 1)[-1].lower()}", role=role.name, policy_arn=arn,
                                     opts=pulumi.ResourceOptions(parent=parent))
        for arn in policies
    ]
    return role, attachments
