"""ImageCache: the ECR pull-through cache rule for public.ecr.aws, and what nodes need to pull through it.

The rule (prefix one per cluster, components.core.images), a repository
creation template that bounds what the cached repositories keep, the node
role's right to import an upstream image and create its repository on a
first pull (neither is in AmazonEC2ContainerRegistryPullOnly; ECR User
Guide, "IAM permissions required to sync an upstream registry"), and a
ConfigMap in the training namespace that tells `bootstrap submit` and
`bootstrap validate` where cached images are. Deleting the rule first
deletes the repositories it created (components.hooks.image_cache).

On the way out the node role loses its right to create a cached repository
before that hook runs (the policy depends on the rule), so a node's pull in
between cannot re-create one: ECR needs ecr:CreateRepository from the puller
when the repository does not exist (ECR User Guide, "IAM permissions
required to sync an upstream registry"). IAM is eventually consistent, and
nodes and `submit`ted jobs do not depend on this component, so they can still
be running then: `bootstrap destroy` sweeps the prefix again once the
destroy has ended and no node is left (bootstrap.deployed.teardown).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.core import images
from components.hooks import StackHooks

# What each cached repository keeps: its ten newest images (a node that still
# runs an older one has it on disk; a new node fetches it again through the rule).
KEEP_IMAGES = 10
LIFECYCLE_POLICY = {"rules": [{
    "rulePriority": 1, "description": f"keep the {KEEP_IMAGES} newest cached images",
    "selection": {"tagStatus": "any", "countType": "imageCountMoreThan", "countNumber": KEEP_IMAGES},
    "action": {"type": "expire"}}]}
CONFIG_MAP_NAME, CONFIG_MAP_KEY = images.CONFIG_MAP_NAME, images.CONFIG_MAP_KEY


def node_pull_policy(partition: str, region: str, account_id: str, prefix: str) -> dict:
    """The node role's part: import and create only under this cluster's prefix."""
    return {"Version": "2012-10-17", "Statement": [{
        "Sid": "PullThroughCache", "Effect": "Allow",
        "Action": ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
        "Resource": f"arn:{partition}:ecr:{region}:{account_id}:repository/{prefix}/*"}]}


@dataclass(frozen=True)
class ImageCacheArgs:
    cluster_name: str
    region: str
    account_id: str
    partition: str
    node_role_name: pulumi.Input[str]
    provider: k8s.Provider
    namespace: str  # the training namespace
    namespace_resource: pulumi.Resource
    hooks: StackHooks
    # The system nodes: like every Kubernetes object of the stack, the ConfigMap goes while they still run.
    depends_on: Sequence[pulumi.Resource] = ()
    # gpucluster:teams' namespaces by team (Cluster.team_namespaces): the ConfigMap in each too, which their
    # members may read (they may not read the training namespace's).
    team_namespaces: Mapping[str, pulumi.Resource] = field(default_factory=dict)


class ImageCache(pulumi.ComponentResource):
    """public.ecr.aws through the account's registry: `base` is where cached images are pulled from."""

    base: str
    prefix: str

    def __init__(self, name: str, args: ImageCacheArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:ImageCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.prefix = images.cache_prefix(args.cluster_name)
        self.base = images.cache_base(args.account_id, args.region, args.cluster_name)
        template = aws.ecr.RepositoryCreationTemplate(
            f"{name}-template", prefix=self.prefix, applied_fors=["PULL_THROUGH_CACHE"],
            description=f"public.ecr.aws images cached for EKS cluster {args.cluster_name}",
            lifecycle_policy=json.dumps(LIFECYCLE_POLICY), opts=child)
        # Replacing the rule (a new prefix) deletes the old one's repositories first: the hook.
        rule = aws.ecr.PullThroughCacheRule(
            f"{name}-rule", ecr_repository_prefix=self.prefix, upstream_registry_url=images.PUBLIC_ECR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[template],
                                        hooks=StackHooks.before_delete(args.hooks.delete_cached_images)))
        # After the rule on create; so deleted before it, and its hook, on the way out.
        aws.iam.RolePolicy(f"{name}-node-pull", role=args.node_role_name, policy=json.dumps(
            node_pull_policy(args.partition, args.region, args.account_id, self.prefix)),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[rule]))
        for config_name, namespace, namespace_resource in (
                (f"{name}-config", args.namespace, args.namespace_resource),
                *((f"{name}-team-{team}-config", team, resource) for team, resource in args.team_namespaces.items())):
            k8s.core.v1.ConfigMap(
                config_name, metadata={"name": CONFIG_MAP_NAME, "namespace": namespace,
                                       "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
                data={CONFIG_MAP_KEY: self.base},
                opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                            depends_on=[namespace_resource, *args.depends_on]))
        self.register_outputs({"base": self.base, "prefix": self.prefix, "ruleRegistryId": rule.registry_id})
