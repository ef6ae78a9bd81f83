"""Partitions: every ARN the program and bootstrap build is in the partition of the stack's region."""

from __future__ import annotations

import json
import re

import boto3
import botocore.session
import pytest

from bootstrap.offline import mocks
from bootstrap.verbs import backend
from components.aws import lookups
from components.core.hardware import catalog, topology
from components.core.hardware.partitions import dns_suffix, partition_of
from tests.conftest import stack_raw

ARN = re.compile(r"arn:([a-z0-9-]+):")
# moto ships no zone or offering data for these regions: zone IDs as moto names them (cn-north-1 has
# two in its table), and every catalog type offered everywhere. Whether a GPU type is offered there is
# the real account's answer (lookups.lookup_zones refuses the stack when it is not).
ZONES = {"us-gov-west-1": [("us-gov-west-1a", "usgw1-az1"), ("us-gov-west-1b", "usgw1-az2"),
                           ("us-gov-west-1c", "usgw1-az3")],
         "cn-north-1": [("cn-north-1a", "cnn1-az1"), ("cn-north-1b", "cnn1-az2")]}


def pools_for(region: str, stack: str = "dev") -> dict:
    """The stack's GPU pools, with `topology: off` where EC2 describes no topology (China, GovCloud US-East)."""
    raw = json.loads(stack_raw(stack)["gpucluster:gpuPools"])
    off = region not in topology.TOPOLOGY_REGIONS
    return {"gpucluster:gpuPools": [{**pool, "topology": "off"} if off else pool for pool in raw]}


def test_every_region_botocore_knows_has_botocore_s_partition():
    session = botocore.session.get_session()
    regions = {r for p in session.get_available_partitions() for r in session.get_available_regions("ec2", p)}
    assert {"us-gov-west-1", "cn-north-1", "us-east-1"} <= regions
    for region in regions:
        assert partition_of(region) == session.get_partition_for_region(region), region
    assert (dns_suffix("aws-cn"), dns_suffix("aws-us-gov")) == ("amazonaws.com.cn", "amazonaws.com")
    with pytest.raises(ValueError):
        partition_of("mars-1")


def partitions(value, found: set[str]) -> set[str]:
    if isinstance(value, str):
        found.update(ARN.findall(value))
    elif isinstance(value, dict):
        for v in value.values():
            partitions(v, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            partitions(v, found)
    return found


@pytest.mark.parametrize("region, partition, destroying", [
    ("us-gov-west-1", "aws-us-gov", False), ("cn-north-1", "aws-cn", False),
    # `bootstrap destroy` runs the program without reading the adopted bucket: its ARN is built.
    ("us-gov-west-1", "aws-us-gov", True)])
def test_a_stack_in_govcloud_or_china_builds_every_arn_in_its_partition(monkeypatch, region, partition, destroying):
    if destroying:
        monkeypatch.setenv(lookups.DESTROYING_ENV, "1")
    monkeypatch.setattr(mocks, "moto_zones", lambda r: ZONES[r])
    monkeypatch.setattr(mocks, "moto_offerings", lambda r: {z: list(catalog.CATALOG) for z, _ in ZONES[r]})
    admin = f"arn:{partition}:iam::000000000000:role/gpucluster-admin"
    # No pull-through cache rules in these regions (ECR User Guide): the stack turns the cache off.
    rec = mocks.run_program(stack_raw("dev", {"aws:region": region, "gpucluster:adminPrincipalArns": [admin],
                                              "gpucluster:storage": {"bucketName": "kept-data"},
                                              "gpucluster:imageCache": False, **pools_for(region)}), "dev")
    per_resource = {r.name: partitions(r.inputs, set()) for r in rec.resources}
    wrong = {name: found for name, found in per_resource.items() if found - {partition}}
    assert not wrong
    built = {name for name, found in per_resource.items() if found}
    # The managed policies, the access policy, the Pod Identity trust, the autoscaler's policy, the
    # adopted bucket's ARN: each is in there.
    for name in ("gpucluster-dev-role-amazoneksclusterpolicy", "gpucluster-dev-node-role-amazoneksworkernodepolicy",
                 "gpucluster-dev-ebs-csi-role-amazonebscsidriverpolicy", "gpucluster-dev-vpc-cni-role",
                 "gpucluster-dev-autoscaler-role-policy", "gpucluster-dev-fsx-csi-role"):
        assert name in built, name
    assert any(name.endswith("-policy") and "admin" in name for name in built)
    # The adopted bucket's ARN, looked up or (destroying) built.
    assert rec.named("gpucluster-dev-storage").component_outputs["bucketArn"] == f"arn:{partition}:s3:::kept-data"
    assert partitions(rec.stack_outputs, set()) <= {partition}
    # Nothing asked the deployer to add itself: the caller is in the partition too.
    assert not any("is not in gpucluster:adminPrincipalArns" in m for _, m in rec.logs)


def test_the_state_backend_in_china_is_in_aws_cn(moto_account, capsys):
    """moto keeps China's IAM apart (arn:aws-cn:iam::aws:policy/ReadOnlyAccess exists there, arn:aws:... not)."""
    code = backend.main(["--bucket", "acme-state", "--region", "cn-north-1", "--github-repo", "acme/gpu-infra",
                         "--json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    report = json.loads(out)
    s3 = boto3.client("s3", region_name="cn-north-1")
    (statement,) = json.loads(s3.get_bucket_policy(Bucket="acme-state")["Policy"])["Statement"]
    assert statement["Resource"] == ["arn:aws-cn:s3:::acme-state", "arn:aws-cn:s3:::acme-state/*"]
    iam = boto3.client("iam", region_name="cn-north-1")
    role = iam.get_role(RoleName="gpucluster-preview-acme-gpu-infra")["Role"]
    assert role["Arn"] == report["previewRoleArn"] and role["Arn"].startswith("arn:aws-cn:iam::")
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"]["Federated"].startswith("arn:aws-cn:iam::")
    assert [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"]] \
        == ["arn:aws-cn:iam::aws:policy/ReadOnlyAccess"]
    inline = iam.get_role_policy(RoleName=role["RoleName"], PolicyName="pulumi-state-backend")["PolicyDocument"]
    assert {s["Sid"]: s["Resource"] for s in inline["Statement"]} == {
        "ListState": "arn:aws-cn:s3:::acme-state", "ReadWriteStateAndLocks": "arn:aws-cn:s3:::acme-state/*",
        "StackSecrets": report["keyArn"]}
    assert report["keyArn"].startswith("arn:aws-cn:kms:cn-north-1:")
    # A second run finds the provider by its aws-cn ARN and changes nothing.
    assert backend.main(["--bucket", "acme-state", "--region", "cn-north-1", "--github-repo", "acme/gpu-infra",
                         "--json"]) == 0
    assert json.loads(capsys.readouterr()[0])["changed"] is False


@pytest.mark.parametrize("region", ["cn-north-1", "cn-northwest-1", "us-gov-east-1", "us-gov-west-1"])
def test_the_image_cache_is_refused_where_ecr_has_no_pull_through_cache(region):
    from tests.test_config import problems

    admin = f"arn:{'aws-cn' if region.startswith('cn') else 'aws-us-gov'}:iam::000000000000:role/gpucluster-admin"
    found = problems({"aws:region": region, "gpucluster:adminPrincipalArns": [admin], **pools_for(region)})
    assert found == [f"gpucluster:imageCache: is true (the default), but ECR has no pull-through cache rules in "
                     f"{region}; set gpucluster:imageCache: false (nodes then pull public images through NAT)"]
