"""The stack rule on a team's data: its job role reaches its prefix of the stack's bucket only.

team-job-role-prefix: the IAM role EKS Pod Identity gives the pods of a team's
namespace (its association, or a trust policy on that namespace) reaches the
bucket under `teams/<team>/` only: objects under the prefix, listing with an
s3:prefix condition inside it (S3 User Guide, "Bucket policy examples": ListBucket
with the s3:prefix condition key), GetBucketLocation, nothing else of the bucket
and no other bucket. Its inline policies and the stack's own managed policies
attached to it are read; AWS managed policies (gpucluster:jobPolicyArns) are the
stack's choice.

Only a positive string operator scopes a listing (IAM User Guide, "IAM JSON
policy elements: Condition operators"): StringNotEquals/StringNotLike match
every prefix but the ones named, and are true when the key is absent;
...IfExists is true when the key is absent; ...IgnoreCase also matches the
prefix in another case, another prefix (S3 keys are case-sensitive). ForAnyValue:StringEquals/StringLike are
kept: for a key with one value, such as s3:prefix, they test it as the plain
operator does and are false without it ("Single-valued vs. multivalued context
keys"), while ForAllValues: is true without it. A statement's operators must all
hold (IAM User Guide, "IAM JSON policy elements: Condition"), so one scoping
operator inside the prefix bounds the listing, whatever the others say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Resource, get, is_list, is_unknown, problem, related
from .teams import Finding, team_names

# components.core.storage.team_data.s3_prefix: a team's part of the stack's bucket.
DATA_PREFIX = "teams/{team}/"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
# The trust policy's condition on the pods' namespace (components.aws.iam.NAMESPACE_TAG; EKS User Guide,
# pod-id-abac).
NAMESPACE_TAG = "aws:RequestTag/kubernetes-namespace"
# Listing the bucket's keys: scoped with the s3:prefix condition key. Any other bucket-level action but
# GetBucketLocation reads or changes the bucket as a whole.
LISTING = frozenset({"s3:listbucket", "s3:listbucketversions", "s3:listbucketmultipartuploads"})
BUCKET_ACTIONS_ALLOWED = frozenset({"s3:getbucketlocation"})
# The operators that bound s3:prefix (see the module's docstring).
SCOPING_OPERATORS = frozenset({"StringEquals", "StringLike", "ForAnyValue:StringEquals", "ForAnyValue:StringLike"})


def _as_list(value: Any) -> list[Any]:
    return value if is_list(value) else [value] if value is not None else []


def _s3_arn(resource: str) -> tuple[str, str | None] | None:
    """(bucket, key pattern or None for the bucket itself) of an S3 ARN; None for anything else."""
    if resource == "*":
        return "*", "*"
    match = re.match(r"^arn:[^:]+:s3:::([^/]*)(?:/(.*))?$", resource)
    return (match[1], match[2]) if match else None


def _prefix_conditions(statement: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    """(operator, values) of each s3:prefix condition of a statement, in its order."""
    condition = statement.get("Condition")
    out = []
    for operator, block in (condition.items() if isinstance(condition, Mapping) else ()):
        if not isinstance(block, Mapping):
            continue
        for key, value in block.items():
            # Condition key names are case-insensitive (IAM User Guide, "IAM JSON policy elements: Condition");
            # an operator is compared as written: one spelled otherwise is taken as not scoping.
            if str(key).lower() == "s3:prefix":
                out.append((str(operator), _as_list(value)))
    return out


def _scoped(conditions: list[tuple[str, list[Any]]], prefix: str) -> bool:
    """Whether one of these s3:prefix conditions keeps a listing within `prefix`."""
    return any(operator in SCOPING_OPERATORS and values and all(isinstance(v, str) and v.startswith(prefix)
                                                                for v in values)
               for operator, values in conditions)


def statement_problems(statement: Mapping[str, Any], team: str) -> list[str]:
    """How an Allow statement reaches past `teams/<team>/` of a bucket."""
    if statement.get("Effect") != "Allow":
        return []
    prefix = DATA_PREFIX.format(team=team)
    if "NotResource" in statement or "NotAction" in statement:
        return ["an Allow with NotResource or NotAction, which no prefix bounds"]
    actions = [str(a).lower() for a in _as_list(statement.get("Action"))]
    s3 = [a for a in actions if a.startswith("s3:") or a == "*"]
    if not s3:
        return []
    out = []
    for resource in _as_list(statement.get("Resource")):
        if is_unknown(resource) or not isinstance(resource, str):
            continue
        arn = _s3_arn(resource)
        if arn is None:
            continue
        bucket, key = arn
        if "*" in bucket or "?" in bucket:
            out.append(f"{', '.join(s3)} on {resource}: any bucket")
        elif key is not None:
            if not key.startswith(prefix):
                out.append(f"{', '.join(s3)} on {resource}: keys outside {prefix}")
        else:
            wide = [a for a in s3 if "*" in a or a not in LISTING | BUCKET_ACTIONS_ALLOWED]
            object_only = {a for a in wide if "object" in a or a in ("s3:abortmultipartupload",
                                                                       "s3:listmultipartuploadparts")}
            wide = [a for a in wide if a not in object_only]  # no bucket-level effect on the bucket's ARN
            if wide:
                out.append(f"{', '.join(wide)} on the bucket {resource} itself")
            listing = [a for a in s3 if a in LISTING]
            conditions = _prefix_conditions(statement)
            if listing and not _scoped(conditions, prefix):
                what = ", ".join(f"{op} s3:prefix {values}" for op, values in conditions) or "no s3:prefix condition"
                out.append(f"{', '.join(listing)} on {resource} with {what}: lists keys outside {prefix}")
    return out


def _documents(policy: Resource) -> list[Mapping[str, Any]] | None:
    text = get(policy.props, "policy")
    if is_unknown(text) or not isinstance(text, str):
        return None  # not known before the bucket exists: judged by the update's own check
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return [s for s in _as_list(document.get("Statement")) if isinstance(s, Mapping)]


def _team_roles(resources: Sequence[Resource], teams: list[str]) -> dict[str, list[Resource]]:
    """Each team's job roles: the role its namespace's Pod Identity association hands out, or one trusted
    only for pods of its namespace."""
    roles = [r for r in resources if r.type == ROLE]
    out: dict[str, list[Resource]] = {}
    for assoc in (r for r in resources if r.type == POD_IDENTITY):
        team = get(assoc.props, "namespace")
        if team in teams:
            out.setdefault(team, []).extend(related(assoc, "roleArn", roles, known=("arn",)))
    for role in roles:
        trust = get(role.props, "assumeRolePolicy")
        if not isinstance(trust, str) or is_unknown(trust):
            continue
        try:
            statements = _as_list(json.loads(trust).get("Statement"))
        except ValueError:
            continue
        for statement in statements:
            team = get(statement, f"Condition.StringEquals.{NAMESPACE_TAG}") if isinstance(statement, Mapping) \
                else None
            if team in teams and role not in out.get(team, []):
                out.setdefault(team, []).append(role)
    return out


def team_job_role_prefix(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """A team's job role reaches its own prefix of the bucket only (inline policies and the stack's own
    managed policies attached to it; AWS managed policies, gpucluster:jobPolicyArns, are the stack's choice)."""
    teams = team_names(resources)
    by_team = _team_roles(resources, teams)
    policies = [r for r in resources if r.type == POLICY]
    out: list[Finding] = []
    for team, roles in sorted(by_team.items()):
        documents: list[Resource] = [p for p in resources if p.type == ROLE_POLICY
                                     and related(p, "role", roles, known=("name",))]
        for attachment in (r for r in resources if r.type == ATTACHMENT):
            if related(attachment, "role", roles, known=("name",)):
                documents += related(attachment, "policyArn", policies, known=("arn",))
        for document in documents:
            for i, statement in enumerate(_documents(document) or []):
                for why in statement_problems(statement, team):
                    out.append((document, problem(document, f"team {team}'s job role, statement {i}: {why}",
                                                  f"allow objects under {DATA_PREFIX.format(team=team)} only, "
                                                  "list with an s3:prefix condition inside it "
                                                  "(components.core.job_identity)")))
    return out
