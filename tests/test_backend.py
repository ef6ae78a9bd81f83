"""`bootstrap backend` on moto: created once, verified after, drift repaired, clean refusals."""

from __future__ import annotations

import json

import boto3
import pytest

from bootstrap.account import github_oidc, state_backend
from bootstrap.verbs import backend

BUCKET = "acme-pulumi-state"


@pytest.fixture
def aws(moto_account):
    return moto_account


def run(capsys, *args: str) -> tuple[int, dict | str, str]:
    code = backend.main([*args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in args and out else out), err


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_first_run_creates_a_hardened_bucket_and_a_rotating_key(aws, capsys, region):
    code, report, err = run(capsys, "--bucket", BUCKET, "--region", region, "--json")
    assert (code, err) == (0, "")
    assert report["login"] == f"pulumi login 's3://{BUCKET}?region={region}&awssdk=v2'"
    assert report["stackInit"] == f'pulumi stack init <stack> --secrets-provider "awskms://alias/pulumi-secrets?region={region}"'
    assert report["steps"][0] == f"bucket s3://{BUCKET}: created ({region})" and report["changed"] is True
    s3 = boto3.client("s3", region_name=region)
    assert s3.get_bucket_location(Bucket=BUCKET).get("LocationConstraint") == (None if region == "us-east-1" else region)
    assert s3.get_bucket_versioning(Bucket=BUCKET)["Status"] == "Enabled"
    assert all(s3.get_public_access_block(Bucket=BUCKET)["PublicAccessBlockConfiguration"].values())
    assert s3.get_bucket_ownership_controls(Bucket=BUCKET)["OwnershipControls"]["Rules"] == [
        {"ObjectOwnership": "BucketOwnerEnforced"}]
    rule = s3.get_bucket_encryption(Bucket=BUCKET)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    (statement,) = json.loads(s3.get_bucket_policy(Bucket=BUCKET)["Policy"])["Statement"]
    assert statement["Effect"] == "Deny" and statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    rules = {r["ID"]: r for r in s3.get_bucket_lifecycle_configuration(Bucket=BUCKET)["Rules"]}
    assert rules["expire-old-state-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == 90
    kms = boto3.client("kms", region_name=region)
    key = kms.describe_key(KeyId="alias/pulumi-secrets")["KeyMetadata"]
    assert (key["KeySpec"], key["KeyUsage"]) == ("SYMMETRIC_DEFAULT", "ENCRYPT_DECRYPT")
    assert kms.get_key_rotation_status(KeyId=key["KeyId"])["KeyRotationEnabled"] is True


def test_a_second_run_changes_nothing_and_makes_no_second_key(aws, capsys):
    run(capsys, "--bucket", BUCKET, "--region", "eu-west-1", "--kms-alias", "alias/team/pulumi")
    code, text, _ = run(capsys, "--bucket", BUCKET, "--region", "eu-west-1", "--kms-alias", "alias/team/pulumi")
    assert code == 0
    lines = text.splitlines()
    assert lines[0] == f"bucket s3://{BUCKET}: verified (exists and is yours)"
    assert all(": verified" in line for line in lines[:lines.index("")])
    assert "Nothing to change. Next:" in text
    assert len(boto3.client("kms", region_name="eu-west-1").list_keys()["Keys"]) == 1


def test_drift_is_repaired_and_other_policy_statements_are_kept(aws, capsys):
    run(capsys, "--bucket", BUCKET, "--region", "us-east-1")
    s3, kms = boto3.client("s3", region_name="us-east-1"), boto3.client("kms", region_name="us-east-1")
    s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Suspended"})
    s3.put_public_access_block(Bucket=BUCKET, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": False, "RestrictPublicBuckets": True})
    theirs = {"Sid": "AuditRead", "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::210987654321:root"},
              "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}
    s3.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": [theirs]}))
    kms.disable_key_rotation(KeyId=kms.describe_key(KeyId="alias/pulumi-secrets")["KeyMetadata"]["KeyId"])
    code, text, _ = run(capsys, "--bucket", BUCKET, "--region", "us-east-1")
    assert code == 0
    assert "versioning: fixed (was not Enabled)" in text
    assert "public access block: fixed (not every public access setting was blocked)" in text
    assert "TLS-only bucket policy: fixed (statement added)" in text
    assert "key rotation: fixed (was off)" in text
    assert "Done. Next:" in text
    statements = json.loads(s3.get_bucket_policy(Bucket=BUCKET)["Policy"])["Statement"]
    assert [s["Sid"] for s in statements] == ["AuditRead", "DenyInsecureTransport"]
    assert s3.get_bucket_versioning(Bucket=BUCKET)["Status"] == "Enabled"


def test_a_key_pending_deletion_is_refused(aws, capsys):
    run(capsys, "--bucket", BUCKET, "--region", "us-east-1")
    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.describe_key(KeyId="alias/pulumi-secrets")["KeyMetadata"]["KeyId"]
    kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=7)
    code, _, err = run(capsys, "--bucket", BUCKET, "--region", "us-east-1")
    assert code == 1
    assert err == (f"gpucluster: alias/pulumi-secrets points at key {key_id}, which is PendingDeletion: enable it (or "
                   f"cancel its deletion: `aws kms cancel-key-deletion --key-id {key_id}`), or pass another "
                   "--kms-alias; secrets encrypted with it cannot be read while it is not enabled\n")
    assert len(kms.list_keys()["Keys"]) == 1


@pytest.mark.parametrize(("call", "code", "message"), [
    ("head_bucket", "403", "exists but belongs to another account, or your credentials may not read it"),
    ("create_bucket", "BucketAlreadyExists", "is taken by another AWS account"),
])
def test_a_bucket_name_someone_else_holds_is_refused(monkeypatch, call, code, message):
    # moto shares buckets across its accounts, so S3's answers are stubbed (botocore Stubber).
    from botocore.stub import Stubber

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    s3 = boto3.client("s3", region_name="us-east-1")
    with Stubber(s3) as stub:
        if call == "create_bucket":
            stub.add_client_error("head_bucket", "404", "Not Found")
        stub.add_client_error(call, code, "denied")
        with pytest.raises(state_backend.BackendError, match=f"s3://{BUCKET} {message}; choose another name"):
            state_backend.ensure_bucket(s3, BUCKET, "us-east-1")


def test_bad_arguments_stop_before_any_call(capsys):
    # No moto here: a call to AWS would fail differently.
    code = backend.main(["--bucket", "Bad_Bucket", "--region", "mars-1", "--kms-alias", "alias/aws/x",
                         "--github-repo", "not a repo"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [
        "gpucluster: --bucket 'Bad_Bucket': must be 3-63 lowercase letters, digits, dots and hyphens, starting and "
        "ending with a letter or digit (S3 general purpose bucket naming rules)",
        "gpucluster: --region 'mars-1': not an AWS region (e.g. us-east-1)",
        "gpucluster: --kms-alias 'alias/aws/x': must be alias/<name> (letters, digits, /, _, -), not under alias/aws/",
        "gpucluster: --github-repo 'not a repo': must be OWNER/REPO, as in github.com/OWNER/REPO",
    ]


def test_github_preview_role_trusts_only_the_repositorys_pull_requests(aws, capsys):
    code, report, _ = run(capsys, "--bucket", BUCKET, "--region", "us-east-1", "--github-repo", "acme/gpu-infra",
                          "--json")
    assert code == 0
    iam = boto3.client("iam")
    role = iam.get_role(RoleName="gpucluster-preview-acme-gpu-infra")["Role"]
    assert report["previewRoleArn"] == role["Arn"]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].endswith(":oidc-provider/token.actions.githubusercontent.com")
    assert statement["Condition"] == {"StringEquals": {
        "token.actions.githubusercontent.com:aud": "sts.amazonaws.com",
        "token.actions.githubusercontent.com:sub": "repo:acme/gpu-infra:pull_request"}}
    assert [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"]] \
        == ["arn:aws:iam::aws:policy/ReadOnlyAccess"]
    inline = iam.get_role_policy(RoleName=role["RoleName"], PolicyName="pulumi-state-backend")["PolicyDocument"]
    assert {s["Sid"]: s["Resource"] for s in inline["Statement"]} == {
        "ListState": f"arn:aws:s3:::{BUCKET}", "ReadWriteStateAndLocks": f"arn:aws:s3:::{BUCKET}/*",
        "StackSecrets": report["keyArn"]}
    (provider,) = iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]
    assert iam.get_open_id_connect_provider(OpenIDConnectProviderArn=provider["Arn"])["ClientIDList"] == [
        "sts.amazonaws.com"]
    code, again, _ = run(capsys, "--bucket", BUCKET, "--region", "us-east-1", "--github-repo", "acme/gpu-infra",
                         "--json")
    assert again["changed"] is False and len(iam.list_open_id_connect_providers()["OpenIDConnectProviderList"]) == 1


def test_role_names_fit_iam_and_stay_distinct():
    assert github_oidc.role_name("acme/gpu-infra") == "gpucluster-preview-acme-gpu-infra"
    long_a, long_b = github_oidc.role_name("a" * 39 + "/" + "x" * 60), github_oidc.role_name("a" * 39 + "/" + "y" * 60)
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
