"""JobIdentity: the jobs' IAM role, handed to every pod of a namespace by EKS Pod Identity: the training
namespace's (the whole bucket), or a team's (its prefix of the bucket). components/core/job_identity.py
says why the namespace's `default` service account."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.aws import iam
from components.core import job_identity


@dataclass(frozen=True)
class JobIdentityArgs:
    cluster: pulumi.Input[str]  # the EKS cluster's name, once it exists
    namespace: str  # gpucluster:trainingNamespace, or a team's namespace
    bucket_arn: pulumi.Input[str]  # the stack's bucket: created, or adopted (storage.bucketName)
    # A team's prefix of the bucket ("teams/<team>/", components.core.storage.team_data): the only keys the role
    # lists and touches. None: the whole bucket.
    prefix: str | None = None
    policy_arns: Sequence[str] = ()  # gpucluster:jobPolicyArns
    tags: dict[str, str] = field(default_factory=dict)
    # The Pod Identity agent add-on: a pod started before it runs has no credentials.
    depends_on: Sequence[pulumi.Resource] = ()


class JobIdentity(pulumi.ComponentResource):
    """`<name>-role` (S3 on the stack's bucket or one prefix of it, plus the stack's policies) and its Pod
    Identity association."""

    role_arn: pulumi.Output[str]
    association: aws.eks.PodIdentityAssociation

    def __init__(self, name: str, args: JobIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:JobIdentity", name, None, opts)
        # Trusted only by this cluster's association for the namespace's default service account.
        role, _ = iam.service_role(f"{name}-role", "pods.eks.amazonaws.com", [], args.tags, self,
                                   cluster_arn=iam.cluster_arn(args.cluster), namespace=args.namespace,
                                   service_account=job_identity.SERVICE_ACCOUNT)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-{slug}", role=role.name, policy_arn=arn,
                                                    opts=pulumi.ResourceOptions(parent=self))
                       for arn, slug in job_identity.attachment_slugs(args.policy_arns).items()]
        bucket_access = aws.iam.RolePolicy(
            f"{name}-bucket-access", role=role.name,
            policy=pulumi.Output.from_input(args.bucket_arn).apply(
                lambda arn: job_identity.bucket_policy(arn, args.prefix)),
            opts=pulumi.ResourceOptions(parent=self))
        # Pods created before the association exists get no credentials (the Pod Identity webhook acts
        # at pod creation): jobs depend on this component.
        self.association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity", cluster_name=args.cluster, namespace=args.namespace,
            service_account=job_identity.SERVICE_ACCOUNT, role_arn=role.arn, tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[bucket_access, *attachments, *args.depends_on]))
        self.role_arn = role.arn
        self.register_outputs({"roleArn": role.arn})
