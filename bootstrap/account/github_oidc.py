"""The GitHub Actions OIDC provider and a pull-request preview role (bootstrap backend --github-repo).

GitHub's OIDC tokens come from https://token.actions.githubusercontent.com
with audience sts.amazonaws.com (aws-actions/configure-aws-credentials); a
pull_request run's subject is `repo:<owner>/<repo>:pull_request` (GitHub
Docs, "About security hardening with OpenID Connect", example subject
claims). The role trusts exactly that subject: only pull-request runs of
that repository can assume it. It reads the account (AWS managed
ReadOnlyAccess: a preview calls describe and get APIs) and the state
backend: the objects of the state bucket (the S3 backend also writes lock
files under .pulumi/locks/) and the secrets key. Every ARN is in the
partition of the backend's region (components.core.hardware.partitions).
"""

from __future__ import annotations

import hashlib
import json
import re

from bootstrap.account.steps import Step

PROVIDER_HOST = "token.actions.githubusercontent.com"
AUDIENCE = "sts.amazonaws.com"
READ_ONLY = "ReadOnlyAccess"  # AWS managed: arn:<partition>:iam::aws:policy/ReadOnlyAccess
STATE_POLICY = "pulumi-state-backend"
# GitHub owner and repository names: letters, digits, -, _ and . (owner: no _ or .).
REPO = re.compile(r"[A-Za-z0-9-]{1,39}/[A-Za-z0-9_.-]{1,100}")
ROLE_PREFIX = "gpucluster-preview-"
ROLE_NAME_MAX = 64  # IAM CreateRole RoleName


def repo_problem(repo: str) -> str | None:
    return None if REPO.fullmatch(repo) else "must be OWNER/REPO, as in github.com/OWNER/REPO"


def role_name(repo: str) -> str:
    """gpucluster-preview-<owner>-<repo>, within IAM's 64 characters (a hash keeps long names distinct)."""
    slug = re.sub(r"[^A-Za-z0-9+=,.@_-]", "-", repo.replace("/", "-"))
    name = ROLE_PREFIX + slug
    if len(name) <= ROLE_NAME_MAX:
        return name
    digest = hashlib.sha256(repo.encode()).hexdigest()[:8]
    return name[:ROLE_NAME_MAX - 9] + "-" + digest


def trust_policy(provider_arn: str, repo: str) -> dict:
    return {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow",
        "Principal": {"Federated": provider_arn},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {"StringEquals": {f"{PROVIDER_HOST}:aud": AUDIENCE,
                                       f"{PROVIDER_HOST}:sub": f"repo:{repo}:pull_request"}},
    }]}


def read_only_policy(partition: str) -> str:
    return f"arn:{partition}:iam::aws:policy/{READ_ONLY}"


def state_policy(bucket: str, key_arn: str, partition: str = "aws") -> dict:
    bucket_arn = f"arn:{partition}:s3:::{bucket}"
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "ListState", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket_arn},
        {"Sid": "ReadWriteStateAndLocks", "Effect": "Allow",
         "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], "Resource": f"{bucket_arn}/*"},
        {"Sid": "StackSecrets", "Effect": "Allow", "Action": ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey"],
         "Resource": key_arn},
    ]}


def _code(err: Exception) -> str:
    return (getattr(err, "response", None) or {}).get("Error", {}).get("Code", "")


def ensure_provider(iam, account: str, partition: str = "aws") -> tuple[Step, str]:
    arn = f"arn:{partition}:iam::{account}:oidc-provider/{PROVIDER_HOST}"
    try:
        provider = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    except Exception as err:
        if _code(err) != "NoSuchEntity":
            raise
        # No ThumbprintList: IAM then takes the provider's certificate itself (CreateOpenIDConnectProvider).
        arn = iam.create_open_id_connect_provider(Url=f"https://{PROVIDER_HOST}", ClientIDList=[AUDIENCE])[
            "OpenIDConnectProviderArn"]
        return Step("GitHub OIDC provider", "created", arn), arn
    if AUDIENCE not in provider.get("ClientIDList", []):
        iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID=AUDIENCE)
        return Step("GitHub OIDC provider", "fixed", f"audience {AUDIENCE} added"), arn
    return Step("GitHub OIDC provider", "verified", arn), arn


def ensure_preview_role(iam, sts, repo: str, bucket: str, key_arn: str,
                        partition: str = "aws") -> tuple[list[Step], str]:
    account = sts.get_caller_identity()["Account"]
    step, provider_arn = ensure_provider(iam, account, partition)
    steps = [step]
    name, trust = role_name(repo), trust_policy(provider_arn, repo)
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except Exception as err:
        if _code(err) != "NoSuchEntity":
            raise
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust),
                               Description=f"pulumi preview for pull requests of {repo}",
                               MaxSessionDuration=3600)["Role"]
        steps.append(Step(f"role {name}", "created", f"pull requests of {repo} only"))
    else:
        current = role["AssumeRolePolicyDocument"]
        current = json.loads(current) if isinstance(current, str) else current
        if current != trust:
            iam.update_assume_role_policy(RoleName=name, PolicyDocument=json.dumps(trust))
            steps.append(Step(f"role {name}", "fixed", "trust policy reset to this repository's pull requests"))
        else:
            steps.append(Step(f"role {name}", "verified"))
    attached = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]]
    if read_only_policy(partition) in attached:
        steps.append(Step("ReadOnlyAccess on the role", "verified"))
    else:
        iam.attach_role_policy(RoleName=name, PolicyArn=read_only_policy(partition))
        steps.append(Step("ReadOnlyAccess on the role", "set"))
    wanted = state_policy(bucket, key_arn, partition)
    try:
        have = iam.get_role_policy(RoleName=name, PolicyName=STATE_POLICY)["PolicyDocument"]
        have = json.loads(have) if isinstance(have, str) else have
    except Exception as err:
        if _code(err) != "NoSuchEntity":
            raise
        have = None
    if have == wanted:
        steps.append(Step("state backend access on the role", "verified"))
    else:
        iam.put_role_policy(RoleName=name, PolicyName=STATE_POLICY, PolicyDocument=json.dumps(wanted))
        steps.append(Step("state backend access on the role", "set" if have is None else "fixed"))
    return steps, role["Arn"]
