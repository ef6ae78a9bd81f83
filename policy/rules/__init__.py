"""gpucluster's guardrails as pure functions over resources, and the one entry point that runs them all.

`RULES` is the list the policy pack turns into CrossGuard policies
(policy/pack.py) and `check_recording` runs on data: a mock run's
registrations (bootstrap.offline.recording.Registration), the offline
plan's JSON resources, or Resource objects. Both use the same functions,
so the plan lists what a preview with `--policy-pack policy` would report.

Levels: "mandatory" blocks a preview or update, "advisory" is reported;
"mandatory-in-prod" is mandatory in the stacks named in PROD_STACKS and
advisory elsewhere. A pack config (the JSON `pulumi preview
--policy-pack-config` reads: {"<policy>": {"enforcementLevel": ...,
<properties>}, "all": ...}) overrides levels and sets properties, for
the pack and for check_recording alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import aws_resources, buckets, fleet, team_roles, teams, workloads
from .base import (
    ADVISORY,
    DISABLED,
    MANDATORY,
    PROD_MANDATORY,
    PROD_STACKS,
    Resource,
    Violation,
)

__all__ = ["RULES", "Resource", "Rule", "Violation", "check_recording", "level_for", "rule_config", "to_resource"]


@dataclass(frozen=True)
class Rule:
    """One policy: its name (the CrossGuard policy name), what it asks, its level and its check.

    A "resource" rule's check takes (Resource, config) -> [message] and runs
    on each resource of `types` (empty: every resource); a "stack" rule's
    takes ([Resource], config) -> [(Resource or None, message)].
    """

    name: str
    description: str
    level: str
    kind: str
    check: Callable[..., Any]
    types: tuple[str, ...] = ()
    remediation: str = ""
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def applies_to(self, type_: str) -> bool:
        return not self.types or type_ in self.types


def _kubernetes(type_: str) -> bool:
    return type_.startswith("kubernetes:")


RULES: tuple[Rule, ...] = (
    Rule("imdsv2-required", "Launch templates require IMDSv2 (metadataOptions.httpTokens: required).",
         MANDATORY, "resource", aws_resources.imdsv2_required, (aws_resources.LAUNCH_TEMPLATE,),
         "metadata_options={'http_tokens': 'required'}"),
    Rule("ebs-encrypted", "Launch templates declare every EBS volume encrypted.",
         MANDATORY, "resource", aws_resources.ebs_encrypted, (aws_resources.LAUNCH_TEMPLATE,),
         "block_device_mappings[].ebs.encrypted: 'true'"),
    Rule("fsx-encrypted", "FSx for Lustre is encrypted at rest (always: AWS-managed or FSx-managed keys; "
                          "requireCustomerManagedKey asks for kmsKeyId on persistent file systems).",
         MANDATORY, "resource", aws_resources.fsx_encrypted, (aws_resources.LUSTRE,),
         "kms_key_id on PERSISTENT_* file systems when a customer-managed key is required",
         {"requireCustomerManagedKey": {"type": "boolean", "default": False,
                                        "description": "Require kmsKeyId on PERSISTENT_* file systems."}}),
    Rule("eks-secrets-encrypted", "EKS envelope-encrypts Kubernetes Secrets with a KMS key.",
         MANDATORY, "resource", aws_resources.eks_secrets_encrypted, (aws_resources.EKS_CLUSTER,),
         "encryption_config={'provider': {'key_arn': ...}, 'resources': ['secrets']}"),
    Rule("eks-endpoint-not-public", "The EKS API endpoint is never open to 0.0.0.0/0 (mandatory in prod).",
         PROD_MANDATORY, "resource", aws_resources.eks_endpoint_not_public, (aws_resources.EKS_CLUSTER,),
         "gpucluster:publicAccessCidrs lists only your CIDRs, or endpoint_public_access=False"),
    Rule("eks-addon-version-pinned", "EKS add-ons name an exact addonVersion.",
         MANDATORY, "resource", aws_resources.addon_version_pinned, (aws_resources.EKS_ADDON,),
         "gpucluster:versions.addons"),
    Rule("nodegroup-ami-pinned", "Managed node groups name their AMI releaseVersion.",
         MANDATORY, "resource", aws_resources.nodegroup_release_pinned, (aws_resources.NODE_GROUP,),
         "gpucluster:versions.amiReleaseVersion"),
    Rule("helm-chart-pinned", "Helm releases name an exact chart version.",
         MANDATORY, "resource", workloads.helm_chart_pinned, (workloads.HELM_RELEASE,),
         "version='X.Y.Z' (components/core/versions.py)"),
    Rule("images-pinned", "Images (Kubernetes objects' specs, Helm values under `image`) have a tag other than "
                          "latest, or a digest.",
         MANDATORY, "resource", workloads.images_pinned, (), "repository:tag or repository@sha256:..."),
    Rule("workload-requests", "Every workload we create (Deployment, DaemonSet, StatefulSet, Job, MPIJob, "
                              "TrainJob, JobSet, training runtimes) requests resources for every container.",
         MANDATORY, "resource", workloads.workload_requests, (), "resources.requests on every container"),
    Rule("s3-bucket-retained", "S3 buckets outlive `pulumi destroy` (retainOnDelete or protect; mandatory in "
                               "prod).",
         PROD_MANDATORY, "resource", buckets.bucket_retained, buckets.BUCKET_TYPES,
         "gpucluster:storage.retainOnDestroy: true"),
    Rule("s3-encrypted", "Every S3 bucket has a server-side encryption configuration.",
         MANDATORY, "stack", buckets.s3_encrypted, (),
         "aws.s3.BucketServerSideEncryptionConfiguration for the bucket"),
    Rule("s3-public-access-blocked", "Every S3 bucket blocks public access (all four settings).",
         MANDATORY, "stack", buckets.s3_public_access_blocked, (),
         "aws.s3.BucketPublicAccessBlock with all four settings true"),
    Rule("efa-cluster-placement", "EFA node pools run in a cluster placement group unless on a capacity "
                                  "reservation.",
         MANDATORY, "stack", fleet.efa_in_cluster_placement_group, (),
         "placement={'group_name': <cluster placement group>}, or a capacity reservation"),
    Rule("fsx-gpu-same-zone", "FSx for Lustre and the GPU node groups are in one Availability Zone.",
         MANDATORY, "stack", fleet.fsx_and_gpu_pools_in_one_zone, (),
         "the GPU node groups' subnets in the FSx zone"),
    Rule("gpu-budget", "GPUs and cost per hour at maximum scale stay within maxGpus and maxCostPerHourUsd.",
         MANDATORY, "stack", fleet.budget, (),
         "lower gpuPools[].maxNodes, or raise the bounds in the pack config",
         {"maxGpus": {"type": "integer", "minimum": 0, "default": fleet.DEFAULT_MAX_GPUS,
                      "description": "Most GPUs the node groups may reach at scalingConfig.maxSize."},
          "maxCostPerHourUsd": {"type": "number", "minimum": 0, "default": fleet.DEFAULT_MAX_COST_PER_HOUR_USD,
                                "description": "Most USD per hour at maximum scale (node groups, EKS, NAT, "
                                               "FSx; on-demand list prices)."},
          "prices": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0},
                     "description": "USD per hour by instance type, over the catalog's (e.g. a negotiated "
                                    "or Capacity Block rate, as gpucluster:prices)."}}),
    Rule("team-queues", "Each team (gpucluster:teams) has a LocalQueue in its namespace and a ClusterQueue "
                        "gpucluster-team-<team> in the cohort gpucluster, with a fair-sharing weight, admitting "
                        "its namespace only.",
         MANDATORY, "stack", teams.team_queues, (),
         "render the team's queues with components.core.teams.queues (team_cluster_queue, local_queue)"),
    Rule("team-network-default-deny", "Each team's namespace has a default-deny NetworkPolicy (every pod, "
                                      "ingress and egress).",
         MANDATORY, "stack", teams.team_network_default_deny, (),
         "the namespace's policies from components.core.kube.network_policy, gpucluster-default-deny first"),
    Rule("team-access-namespaced", "Team members get nothing cluster-wide: no cluster-scoped EKS access policy "
                                   "on their access entries, and their group bound in the team's namespace only.",
         MANDATORY, "stack", teams.team_access_namespaced, (),
         "a member's access entry carries the group gpucluster:team:<team> only, bound by a RoleBinding in "
         "namespace <team>"),
    Rule("team-job-role-prefix", "A team's job role reaches the bucket under teams/<team>/ only (objects under "
                                 "the prefix, listing with an s3:prefix condition inside it).",
         MANDATORY, "stack", team_roles.team_job_role_prefix, (),
         "scope the role's statements to arn:...:s3:::<bucket>/teams/<team>/* and s3:prefix teams/<team>/*"),
)


def _stack_name(stack: str) -> str:
    return stack.rsplit("/", 1)[-1]


def level_for(rule: Rule, stack: str, config: Mapping[str, Any] | None = None) -> str:
    """The rule's level in this stack: the pack config's enforcementLevel (the policy's, else "all"), else
    the rule's own, "mandatory-in-prod" resolved by the stack's name."""
    config = config or {}
    for key in (rule.name, "all"):
        entry = config.get(key)
        if isinstance(entry, str):
            return entry
        if isinstance(entry, Mapping) and entry.get("enforcementLevel"):
            return str(entry["enforcementLevel"])
    if rule.level == PROD_MANDATORY:
        return MANDATORY if _stack_name(stack) in PROD_STACKS else ADVISORY
    return rule.level


def rule_config(rule: Rule, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """A policy's properties: the schema's defaults, then what the pack config gives."""
    merged = {k: v["default"] for k, v in rule.config_schema.items() if "default" in v}
    merged.update({k: v for k, v in (given or {}).items() if k != "enforcementLevel"})
    return merged


def to_resource(item: Any) -> Resource:
    """A Resource from a Registration (bootstrap.offline.recording), a plan-JSON resource or a Resource."""
    if isinstance(item, Resource):
        return item
    if isinstance(item, Mapping):  # `python -m bootstrap plan --json`'s resources
        return Resource(type=item["type"], name=item["name"], urn=item.get("urn", ""),
                        props=item.get("inputs") or {}, protect=bool(item.get("protect")),
                        retain_on_delete=bool(item.get("retainOnDelete")), id=item.get("id") or None,
                        dependencies=tuple(item.get("dependencies") or ()))
    return Resource(type=item.type, name=item.name, urn=item.urn, props=item.inputs or {},
                    protect=bool(item.protect), retain_on_delete=bool(item.retain_on_delete),
                    id=getattr(item, "id", None) or None, dependencies=tuple(item.dependencies or ()))


def check_recording(resources: Iterable[Any], stack: str,
                    config: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every rule over a stack's resources (their inputs, as registered): the violations, sorted.

    `stack` picks the level of the "mandatory-in-prod" rules; `config` is a
    pack config as `--policy-pack-config` reads it (levels and properties).
    """
    config = config or {}
    items: Sequence[Resource] = [to_resource(r) for r in resources]
    out: list[Violation] = []
    for rule in RULES:
        level = level_for(rule, stack, config)
        if level == DISABLED:
            continue
        entry = config.get(rule.name)
        props = rule_config(rule, entry if isinstance(entry, Mapping) else None)
        if rule.kind == "resource":
            for res in items:
                if rule.applies_to(res.type):
                    out.extend(Violation(rule.name, level, res.urn, res.name, message)
                               for message in rule.check(res, props))
        else:
            for res, message in rule.check(items, props):
                out.append(Violation(rule.name, level, res.urn if res else "", res.name if res else "", message))
    return sorted(out)
