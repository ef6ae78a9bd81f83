"""Per-stack pins and who administers: `bootstrap upgrade` (botocore Stubber: moto has no EKS add-on versions
or public SSM parameters) and `bootstrap whoami` (moto's STS and IAM)."""

from __future__ import annotations

import boto3
import pytest
import yaml
from botocore.stub import Stubber
from moto import mock_aws

from bootstrap import stackfile
from bootstrap.account import identity
from bootstrap.account import pins as pin_resolution
from components.core import config
from components.core.config.values import check_principal_arn
from components.core.stack_config import parse as parse_stack
from tests.conftest import ROOT

PINS = stackfile.stack_versions(ROOT / "Pulumi.dev.yaml")


def addon_versions(name: str, *rows: tuple[str, list[str]]) -> dict:
    return {"addons": [{"addonName": name, "addonVersions": [
        {"addonVersion": version, "compatibilities": [{"clusterVersion": c, "defaultVersion": False} for c in cvs]}
        for version, cvs in rows]}]}


def test_newest_compatible_version_compares_builds_numerically():
    response = addon_versions("vpc-cni", ("v1.22.4-eksbuild.3", ["1.35", "1.34"]), ("v1.22.10-eksbuild.1", ["1.35"]),
                              ("v1.23.2-eksbuild.1", ["1.36"]), ("v1.22.4-eksbuild.12", ["1.35"]))
    assert pin_resolution.newest_addon_version(response, "1.35") == "v1.22.10-eksbuild.1"
    with pytest.raises(pin_resolution.UpgradeError, match="no version of the add-on is compatible with Kubernetes 1.32"):
        pin_resolution.newest_addon_version(response, "1.32")


def stubbed(kubernetes_version: str, ami: str, versions: dict[str, str]):
    ssm = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    eks = boto3.client("eks", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    ssm_stub, eks_stub = Stubber(ssm), Stubber(eks)
    name = f"/aws/service/eks/optimized-ami/{kubernetes_version}/amazon-linux-2023/x86_64/nvidia/recommended/" \
           "release_version"
    ssm_stub.add_response("get_parameter", {"Parameter": {"Name": name, "Value": ami, "Type": "String"}},
                          {"Name": name})
    for addon in config.ADDONS:
        eks_stub.add_response("describe_addon_versions",
                              addon_versions(addon, (versions[addon], [kubernetes_version]),
                                             ("v0.0.1-eksbuild.1", [kubernetes_version])),
                              {"addonName": addon, "kubernetesVersion": kubernetes_version})
    return ssm, eks, ssm_stub, eks_stub


NEWER = {**PINS["addons"], "vpc-cni": "v1.23.2-eksbuild.1", "coredns": "v1.14.6-eksbuild.4"}


def test_resolve_asks_ssm_and_eks_and_the_diff_names_each_change():
    ssm, eks, ssm_stub, eks_stub = stubbed("1.35", "1.35.8-20260930", NEWER)
    with ssm_stub, eks_stub:
        pins = pin_resolution.resolve(ssm, eks, "1.35")
    ssm_stub.assert_no_pending_responses()
    eks_stub.assert_no_pending_responses()
    assert pins == {"amiReleaseVersion": "1.35.8-20260930", "addons": NEWER}
    assert pin_resolution.diff(PINS, pins) == [
        "amiReleaseVersion: 1.35.6-20260714 -> 1.35.8-20260930",
        "addons.vpc-cni: v1.22.4-eksbuild.3 -> v1.23.2-eksbuild.1",
        "addons.coredns: v1.14.3-eksbuild.3 -> v1.14.6-eksbuild.4",
    ]
    assert pin_resolution.diff(pins, pins) == []


def test_rewrite_replaces_only_the_pins_and_keeps_the_rest_of_the_file():
    text = (ROOT / "Pulumi.prod.yaml").read_text()
    pins = {"amiReleaseVersion": "1.35.8-20260930", "addons": NEWER}
    new = pin_resolution.rewrite(text, pins)
    assert yaml.safe_load(new)["config"]["gpucluster:versions"] == pins
    before, after = yaml.safe_load(text)["config"], yaml.safe_load(new)["config"]
    assert {k: val for k, val in before.items() if k != "gpucluster:versions"} == \
        {k: val for k, val in after.items() if k != "gpucluster:versions"}
    old_lines = [line for line in text.splitlines() if "versions" not in line and "eksbuild" not in line
                 and "amiReleaseVersion" not in line and "addons:" not in line]
    assert all(line in new.splitlines() for line in old_lines)  # comments and every other line kept
    # The pins the file gets parse as the config expects.
    cfg = parse_stack(stackfile.with_plan_standins(
        {**stackfile.read_stack_config("prod"), "gpucluster:versions": stackfile._as_engine_string(pins)})[0])
    assert cfg.versions.ami_release_version == "1.35.8-20260930"


def test_rewrite_to_the_next_kubernetes_version_adds_the_block_when_missing():
    text = 'config:\n  aws:region: us-east-1\n  gpucluster:kubernetesVersion: "1.35"\n  gpucluster:jobs: []\n'
    pins = {"amiReleaseVersion": "1.36.4-20261003", "addons": {"kube-proxy": "v1.36.0-eksbuild.14"}}
    new = yaml.safe_load(pin_resolution.rewrite(text, pins, "1.36"))["config"]
    assert new["gpucluster:kubernetesVersion"] == "1.36" and new["gpucluster:versions"] == pins
    assert new["gpucluster:jobs"] == []


# -- whoami -------------------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "210987654321")  # not moto's default, AWS's documentation account
    with mock_aws():
        yield boto3.client("sts"), boto3.client("iam")


def test_an_assumed_role_session_becomes_the_roles_arn_with_its_path(aws):
    sts, iam = aws
    role = iam.create_role(RoleName="Deployer", Path="/platform/", AssumeRolePolicyDocument="{}")["Role"]
    creds = sts.assume_role(RoleArn=role["Arn"], RoleSessionName="me")["Credentials"]
    session = boto3.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                            aws_session_token=creds["SessionToken"], region_name="us-east-1")
    arn, note = identity.principal_arn(session.client("sts"), session.client("iam"))
    assert arn == "arn:aws:iam::210987654321:role/platform/Deployer" == role["Arn"] and note is None
    assert check_principal_arn(arn) is None  # what adminPrincipalArns accepts


def test_an_iam_user_is_its_own_arn(aws):
    _, iam = aws
    iam.create_user(UserName="alice")
    key = iam.create_access_key(UserName="alice")["AccessKey"]
    session = boto3.Session(aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"],
                            region_name="us-east-1")
    arn, note = identity.principal_arn(session.client("sts"), session.client("iam"))
    assert arn == "arn:aws:iam::210987654321:user/alice" and note is None


class _DeniedIam:
    def get_role(self, RoleName):  # noqa: N803 (boto3's spelling)
        from botocore.exceptions import ClientError

        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetRole")


class _Sts:
    def __init__(self, arn):
        self.arn = arn

    def get_caller_identity(self):
        return {"Arn": self.arn}


def test_without_iam_get_role_the_path_is_flagged():
    arn, note = identity.principal_arn(_Sts("arn:aws:sts::210987654321:assumed-role/Deployer/me"), _DeniedIam())
    assert arn == "arn:aws:iam::210987654321:role/Deployer"
    assert note == ("iam:GetRole on Deployer failed (AccessDenied): if the role has a path, the ARN is "
                    "arn:aws:iam::210987654321:role/<path>/Deployer")


@pytest.mark.parametrize(("arn", "message"), [
    ("arn:aws:iam::210987654321:root", "is the account's root user"),
    ("arn:aws:sts::210987654321:federated-user/bob", "is not an IAM role or user session"),
])
def test_identities_eks_cannot_admit(arn, message):
    with pytest.raises(identity.WhoamiError, match=message):
        identity.principal_arn(_Sts(arn), _DeniedIam())
