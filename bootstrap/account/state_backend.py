"""The Pulumi state backend: an S3 bucket (versioned, encrypted, TLS-only, private) and a KMS secrets key; idempotent."""

from __future__ import annotations

import argparse
import json
import re

from bootstrap.account import github_oidc
from bootstrap.account.steps import Step
from components.core.hardware.partitions import partition_of
from components.core.storage import bucket as bucketlib

DEFAULT_ALIAS = "alias/pulumi-secrets"
# KMS aliases: alias/ then letters, digits, /, _ and -; alias/aws/ is AWS's own (KMS API, CreateAlias).
ALIAS = re.compile(r"alias/(?!aws/)[A-Za-z0-9/_-]{1,250}")
# Pulumi writes a new state object on every update: keep the old ones this long, then let S3 expire them.
STATE_HISTORY_DAYS = 90
ABORT_MULTIPART_DAYS = 7
TAGS = {"app.kubernetes.io/part-of": "gpucluster", "gpucluster:purpose": "pulumi-state"}


class BackendError(Exception):
    pass


def login_command(bucket: str, region: str) -> str:
    return f"pulumi login 's3://{bucket}?region={region}&awssdk=v2'"


def stack_init_command(alias: str, region: str) -> str:
    return f'pulumi stack init <stack> --secrets-provider "awskms://{alias}?region={region}"'


def _code(err: Exception) -> str:
    return (getattr(err, "response", None) or {}).get("Error", {}).get("Code", "")


def lifecycle_rules() -> list[dict]:
    # Empty filter: the whole bucket (S3 User Guide, "Lifecycle configuration elements").
    return [
        {"ID": "expire-old-state-versions", "Status": "Enabled", "Filter": {},
         "NoncurrentVersionExpiration": {"NoncurrentDays": STATE_HISTORY_DAYS}},
        {"ID": "abort-incomplete-multipart-uploads", "Status": "Enabled", "Filter": {},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS}},
    ]


def ensure_bucket(s3, bucket: str, region: str) -> list[Step]:
    """Create the state bucket or bring its settings to what a state backend needs."""
    steps = [_exists_or_create(s3, bucket, region)]
    created = steps[0].outcome == "created"

    def step(item: str, ok: bool, fix, detail: str = "") -> None:
        if ok:
            steps.append(Step(item, "set" if created else "verified"))
            return
        fix()
        steps.append(Step(item, "set") if created else Step(item, "fixed", detail))

    step("versioning", s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled",
         lambda: s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"}),
         "was not Enabled")
    block = _get(s3.get_public_access_block, "NoSuchPublicAccessBlockConfiguration", Bucket=bucket)
    wanted = {k: True for k in ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")}
    step("public access block", (block or {}).get("PublicAccessBlockConfiguration") == wanted,
         lambda: s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=wanted),
         "not every public access setting was blocked")
    ownership = _get(s3.get_bucket_ownership_controls, "OwnershipControlsNotFoundError", Bucket=bucket)
    rules = (ownership or {}).get("OwnershipControls", {}).get("Rules", [])
    step("object ownership", [r.get("ObjectOwnership") for r in rules] == ["BucketOwnerEnforced"],
         lambda: s3.put_bucket_ownership_controls(
             Bucket=bucket, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}),
         "ACLs were on")
    encryption = _get(s3.get_bucket_encryption, "ServerSideEncryptionConfigurationNotFoundError", Bucket=bucket)
    algorithms = [r.get("ApplyServerSideEncryptionByDefault", {}).get("SSEAlgorithm")
                  for r in (encryption or {}).get("ServerSideEncryptionConfiguration", {}).get("Rules", [])]
    # SSE-S3: the state's secrets are encrypted by the KMS secrets provider already; an existing
    # SSE-KMS setting is kept, never downgraded.
    step("default encryption", any(a in ("AES256", "aws:kms", "aws:kms:dsse") for a in algorithms),
         lambda: s3.put_bucket_encryption(Bucket=bucket, ServerSideEncryptionConfiguration={
             "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}), "was off")
    policy, merged = _tls_policy(s3, bucket, partition_of(region))
    step("TLS-only bucket policy", policy == merged,
         lambda: s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(merged)), "statement added")
    current = _get(s3.get_bucket_lifecycle_configuration, "NoSuchLifecycleConfiguration", Bucket=bucket)
    existing = (current or {}).get("Rules", [])
    ours = {r["ID"] for r in lifecycle_rules()}
    kept = [r for r in existing if r.get("ID") not in ours]
    step("lifecycle (old state versions expire after 90 days)", {r.get("ID") for r in existing} >= ours,
         lambda: s3.put_bucket_lifecycle_configuration(
             Bucket=bucket, LifecycleConfiguration={"Rules": kept + lifecycle_rules()}), "rules added")
    return steps


def _get(call, missing_code: str, **kwargs):
    """A getter's answer, or None when S3 says the setting does not exist."""
    try:
        return call(**kwargs)
    except Exception as err:
        if _code(err) == missing_code:
            return None
        raise


def _exists_or_create(s3, bucket: str, region: str) -> Step:
    try:
        s3.head_bucket(Bucket=bucket)
        return Step(f"bucket s3://{bucket}", "verified", "exists and is yours")
    except Exception as err:
        code = _code(err)
        if code in ("403", "AccessDenied", "Forbidden"):
            raise BackendError(f"s3://{bucket} exists but belongs to another account, or your credentials may not "
                               "read it; choose another name") from None
        if code not in ("404", "NoSuchBucket", "NotFound"):
            raise
    kwargs = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    try:
        s3.create_bucket(Bucket=bucket, **kwargs)
    except Exception as err:
        if _code(err) == "BucketAlreadyExists":
            raise BackendError(f"s3://{bucket} is taken by another AWS account; choose another name") from None
        raise
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in TAGS.items()]})
    return Step(f"bucket s3://{bucket}", "created", region)


def _tls_policy(s3, bucket: str, partition: str) -> tuple[dict | None, dict]:
    """(the bucket's policy, that policy with our TLS-only statement in it)."""
    current = _get(s3.get_bucket_policy, "NoSuchBucketPolicy", Bucket=bucket)
    policy = json.loads(current["Policy"]) if current else None
    merged = json.loads(json.dumps(policy)) if policy else {"Version": "2012-10-17", "Statement": []}
    statements = merged.setdefault("Statement", [])
    if isinstance(statements, dict):
        merged["Statement"] = statements = [statements]
    if not any(s.get("Sid") == bucketlib.TLS_ONLY_SID for s in statements):
        statements.append(bucketlib.tls_only_statement(f"arn:{partition}:s3:::{bucket}"))
    return policy, merged


def ensure_key(kms, alias: str) -> tuple[list[Step], str]:
    """The secrets key behind `alias` (created with rotation, or verified); returns its ARN."""
    try:
        key = kms.describe_key(KeyId=alias)["KeyMetadata"]
    except Exception as err:
        if _code(err) != "NotFoundException":
            raise
        key = kms.create_key(Description="Pulumi secrets provider (gpucluster state backend)",
                             KeyUsage="ENCRYPT_DECRYPT", KeySpec="SYMMETRIC_DEFAULT",
                             Tags=[{"TagKey": k, "TagValue": v} for k, v in TAGS.items()])["KeyMetadata"]
        kms.enable_key_rotation(KeyId=key["KeyId"])
        kms.create_alias(AliasName=alias, TargetKeyId=key["KeyId"])
        return [Step(f"KMS key {alias}", "created", f"{key['KeyId']}, automatic rotation on")], key["Arn"]
    if key.get("KeyState") != "Enabled":
        raise BackendError(f"{alias} points at key {key['KeyId']}, which is {key.get('KeyState')}: enable it (or "
                           f"cancel its deletion: `aws kms cancel-key-deletion --key-id {key['KeyId']}`), or pass "
                           "another --kms-alias; secrets encrypted with it cannot be read while it is not enabled")
    steps = [Step(f"KMS key {alias}", "verified", key["KeyId"])]
    if not kms.get_key_rotation_status(KeyId=key["KeyId"]).get("KeyRotationEnabled"):
        kms.enable_key_rotation(KeyId=key["KeyId"])
        steps.append(Step("key rotation", "fixed", "was off"))
    else:
        steps.append(Step("key rotation", "verified"))
    return steps, key["Arn"]


def run(args: argparse.Namespace, session) -> dict:
    """Every step against AWS; the report as a dict (what --json prints)."""
    steps = ensure_bucket(session.client("s3"), args.bucket, args.region)
    key_steps, key_arn = ensure_key(session.client("kms"), args.kms_alias)
    steps += key_steps
    role_arn = None
    if args.github_repo:
        oidc_steps, role_arn = github_oidc.ensure_preview_role(
            session.client("iam"), session.client("sts"), args.github_repo, args.bucket, key_arn,
            partition_of(args.region))
        steps += oidc_steps
    return {"steps": [str(s) for s in steps], "changed": any(s.changed for s in steps),
            "login": login_command(args.bucket, args.region), "stackInit": stack_init_command(args.kms_alias,
                                                                                              args.region),
            "keyArn": key_arn, "previewRoleArn": role_arn}
