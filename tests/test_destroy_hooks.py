"""The delete hooks: bucket guard and leftover interfaces on moto, and the hook layer that reads the engine's
arguments and calls them as the stack's identity."""

from __future__ import annotations

import boto3
import pulumi
import pytest
from moto import mock_aws

from bootstrap.offline import mocks
from components.hooks import (
    BUCKET_HOOK,
    ENI_HOOK,
    EXPORT_HOOK,
    FSX_TASKS_HOOK,
    IMAGES_HOOK,
    SKIP_EXPORT_ENV,
    SWEEP_IMAGES_HOOK,
    VOLUMES_HOOK,
    HookSettings,
    HookWork,
    StackHooks,
    bucket_guard,
    leaked_enis,
    metrics_volumes,
)
from tests.conftest import recording as shared_recording
from tests.conftest import stack_config, stack_raw

REGION = "us-east-1"
CLUSTER = "gpucluster-dev"


@pytest.fixture
def aws(monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv(bucket_guard.CONFIRM_ENV, raising=False)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


def settings(**overrides) -> HookSettings:
    base = {"stack": "dev", "cluster_name": CLUSTER, "region": REGION, "profile": None, "role_arn": None,
            "export_timeout_minutes": 60, "adopted_bucket": None}
    return HookSettings(**{**base, **overrides})


def hook_args(rid: str, type_: str, old_inputs: dict | None = None, old_outputs: dict | None = None):
    return pulumi.ResourceHookArgs(urn=f"urn:pulumi:dev::gpucluster::{type_}::x", id=rid, name="x", type=type_,
                                   old_inputs=old_inputs, old_outputs=old_outputs)


# -- bucket guard ----------------------------------------------------------------------------


def bucket_with(session, name: str, keys: tuple[str, ...] = (), versioned: bool = False, delete: bool = False):
    s3 = session.client("s3")
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    for key in keys:
        s3.put_object(Bucket=name, Key=key, Body=b"x")
        if delete:
            s3.delete_object(Bucket=name, Key=key)
    return s3


def test_an_empty_bucket_may_go(aws):
    s3 = bucket_with(aws, "dev-data")
    assert bucket_guard.check_deletable(s3, "dev-data", "dev", None) == "s3://dev-data is empty"


def test_a_bucket_with_objects_stays_without_a_confirmation_naming_it(aws):
    s3 = bucket_with(aws, "dev-data", ("checkpoints/step-100.pt",))
    with pytest.raises(bucket_guard.BucketKept) as err:
        bucket_guard.check_deletable(s3, "dev-data", "dev", None)
    assert str(err.value).startswith("s3://dev-data holds objects and storage.retainOnDestroy is false.")
    assert "`python -m bootstrap destroy --stack dev --delete-bucket-data`" in str(err.value)
    with pytest.raises(bucket_guard.BucketKept):
        bucket_guard.check_deletable(s3, "dev-data", "dev", None, confirmed="another-bucket")
    assert bucket_guard.check_deletable(s3, "dev-data", "dev", None, confirmed="dev-data") == (
        f"s3://dev-data holds objects; deleting them as {bucket_guard.CONFIRM_ENV} asks")


def test_old_versions_and_delete_markers_count_as_data(aws):
    # force_destroy deletes every version: a "deleted" checkpoint is still recoverable until then.
    s3 = bucket_with(aws, "dev-data", ("checkpoints/old.pt",), versioned=True, delete=True)
    assert s3.list_objects_v2(Bucket="dev-data").get("KeyCount") == 0
    assert bucket_guard.holds_objects(s3, "dev-data") is True


def test_the_confirmation_comes_from_the_environment(aws, monkeypatch):
    s3 = bucket_with(aws, "dev-data", ("a",))
    monkeypatch.setenv(bucket_guard.CONFIRM_ENV, "dev-data")
    assert "deleting them" in bucket_guard.check_deletable(s3, "dev-data", "dev", None)


def test_an_adopted_bucket_is_never_deleted_even_empty(aws):
    s3 = bucket_with(aws, "kept-data")
    with pytest.raises(bucket_guard.BucketKept, match=r"s3://kept-data is the bucket gpucluster:storage.bucketName "
                                                      r"adopts.*pulumi state delete"):
        bucket_guard.check_deletable(s3, "kept-data", "dev", "kept-data", confirmed="kept-data")


# -- interfaces the VPC CNI left -------------------------------------------------------------


def subnet(session) -> tuple[object, str]:
    ec2 = session.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.10.0.0/16")["Vpc"]["VpcId"]
    return ec2, ec2.create_subnet(VpcId=vpc, CidrBlock="10.10.0.0/19")["Subnet"]["SubnetId"]


def eni(ec2, subnet_id: str, description: str, tags: dict[str, str]) -> str:
    spec = [{"ResourceType": "network-interface", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
    return ec2.create_network_interface(SubnetId=subnet_id, Description=description,
                                        TagSpecifications=spec)["NetworkInterface"]["NetworkInterfaceId"]


def test_only_detached_cni_interfaces_of_this_cluster_are_deleted(aws):
    ec2, subnet_id = subnet(aws)
    ours = eni(ec2, subnet_id, "aws-K8S-i-0123456789abcdef0",
               {leaked_enis.CLUSTER_TAG: CLUSTER, "node.k8s.amazonaws.com/instance_id": "i-0123456789abcdef0"})
    other_cluster = eni(ec2, subnet_id, "aws-K8S-i-0fedcba9876543210", {leaked_enis.CLUSTER_TAG: "someone-else"})
    not_cni = eni(ec2, subnet_id, "my database", {leaked_enis.CLUSTER_TAG: CLUSTER})
    branch = eni(ec2, subnet_id, "aws-k8s-branch-eni", {leaked_enis.CLUSTER_TAG: CLUSTER})
    logs: list[str] = []
    assert leaked_enis.release_leaked_enis(ec2, subnet_id, CLUSTER, log=logs.append) == sorted([ours, branch])
    left = {e["NetworkInterfaceId"] for e in ec2.describe_network_interfaces()["NetworkInterfaces"]}
    assert left == {other_cluster, not_cni}
    assert f"{subnet_id}: deleted {ours}, left behind by the VPC CNI of {CLUSTER}" in logs and len(logs) == 2
    assert leaked_enis.release_leaked_enis(ec2, subnet_id, CLUSTER) == []  # a second run finds nothing


# -- the metrics volume the EBS CSI driver left ------------------------------------------------


def volume(ec2, tags: dict[str, str]) -> str:
    spec = [{"ResourceType": "volume", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else []
    return ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=100, VolumeType="gp3",
                             TagSpecifications=spec)["VolumeId"]


def test_only_detached_metrics_volumes_of_this_cluster_are_deleted(aws):
    ec2 = aws.client("ec2")
    ours = {metrics_volumes.CLUSTER_TAG: CLUSTER, metrics_volumes.CLAIM_NAMESPACE_TAG: "monitoring",
            "kubernetes.io/created-for/pvc/name": "prometheus-kps-prometheus-db-prometheus-kps-prometheus-0"}
    prometheus = volume(ec2, ours)
    users = volume(ec2, {**ours, metrics_volumes.CLAIM_NAMESPACE_TAG: "research"})  # someone's data
    other_cluster = volume(ec2, {**ours, metrics_volumes.CLUSTER_TAG: "gpucluster-prod"})
    untagged = volume(ec2, {})
    attached = volume(ec2, ours)
    vpc = ec2.create_vpc(CidrBlock="10.10.0.0/16")["Vpc"]["VpcId"]
    subnet_id = ec2.create_subnet(VpcId=vpc, CidrBlock="10.10.0.0/19", AvailabilityZone=f"{REGION}a")["Subnet"]
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                                 SubnetId=subnet_id["SubnetId"])["Instances"][0]["InstanceId"]
    ec2.attach_volume(VolumeId=attached, InstanceId=instance, Device="/dev/sdf")
    logs: list[str] = []
    assert metrics_volumes.release_metrics_volumes(ec2, CLUSTER, log=logs.append) == [prometheus]
    left = {v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]}
    assert {users, other_cluster, untagged, attached} <= left and prometheus not in left
    assert logs == [f"{CLUSTER}: deleted {prometheus}, the metrics volume the EBS CSI driver left",
                    f"{CLUSTER}: {attached} (metrics) is still attached and stays; delete it once detached: "
                    f"aws ec2 delete-volume --volume-id {attached}"]


def test_the_cluster_carries_the_volume_hook_and_the_driver_the_tag(run_stack):
    rec = shared_recording("dev")
    (cluster,) = rec.of_type("aws:eks/cluster:Cluster")
    assert cluster.hooks == {"before_delete": [VOLUMES_HOOK, SWEEP_IMAGES_HOOK]}
    # After every node group: they all depend on the cluster, so Pulumi deletes them first.
    for group in rec.of_type("aws:eks/nodeGroup:NodeGroup"):
        assert rec.depends_on(group, cluster), group.name
    (ebs,) = [a for a in rec.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "aws-ebs-csi-driver"]
    import json

    assert json.loads(ebs.inputs["configurationValues"]) == {
        "controller": {"extraVolumeTags": {metrics_volumes.CLUSTER_TAG: CLUSTER}}}


# -- the hook layer --------------------------------------------------------------------------


def test_hooks_have_stable_names_and_are_all_registered():
    registered = []

    def program():
        registered.append(StackHooks(settings(), HookWork(settings(), session=lambda: None)))

    mocks.run_program(stack_raw("dev"), "dev", program=program)
    hooks = registered[0]
    names = {hooks.export_to_s3.name, hooks.wait_for_fsx_tasks.name, hooks.keep_bucket_data.name,
             hooks.release_leaked_enis.name, hooks.release_metrics_volumes.name, hooks.delete_cached_images.name,
             hooks.sweep_cached_images.name}
    # The state records these names: renaming one orphans the hooks of deployed stacks.
    assert names == {EXPORT_HOOK, FSX_TASKS_HOOK, BUCKET_HOOK, ENI_HOOK, VOLUMES_HOOK, IMAGES_HOOK,
                     SWEEP_IMAGES_HOOK} == {
        "gpucluster-export-fsx-to-s3", "gpucluster-wait-for-fsx-tasks", "gpucluster-keep-bucket-data",
        "gpucluster-release-leaked-enis", "gpucluster-release-metrics-volumes", "gpucluster-delete-cached-images",
        "gpucluster-sweep-cached-images"}


def test_settings_come_from_the_stack():
    cfg = stack_config("prod", {"aws:profile": "ml", "aws:assumeRoles": [{"roleArn": "arn:aws:iam::111122223333:role/x"}],
                                "gpucluster:storage": {"bucketName": "kept-data", "exportTimeoutMinutes": 90}})
    assert HookSettings.of(cfg) == HookSettings(
        stack="prod", cluster_name="gpucluster-prod", region="us-east-1", profile="ml",
        role_arn="arn:aws:iam::111122223333:role/x", export_timeout_minutes=90, adopted_bucket="kept-data",
        image_cache_prefix="gpucluster-prod")
    assert HookSettings.of(stack_config("prod", {"gpucluster:imageCache": False})).image_cache_prefix is None


def test_bucket_hook_reads_the_bucket_from_the_old_outputs(aws):
    bucket_with(aws, "dev-data", ("x",))
    work = HookWork(settings(), session=lambda: aws, log=lambda _: None)
    with pytest.raises(bucket_guard.BucketKept):
        work.check_bucket_now(hook_args("dev-data", "aws:s3/bucket:Bucket", old_outputs={"bucket": "dev-data"}))


def test_subnet_hook_releases_leftovers_in_that_subnet(aws):
    ec2, subnet_id = subnet(aws)
    eni(ec2, subnet_id, "aws-K8S-i-0123456789abcdef0", {leaked_enis.CLUSTER_TAG: CLUSTER})
    logs: list[str] = []
    HookWork(settings(), session=lambda: aws, log=logs.append).release_enis_now(
        hook_args(subnet_id, "aws:ec2/subnet:Subnet"))
    assert len(logs) == 1 and ec2.describe_network_interfaces()["NetworkInterfaces"] == []


class _FsxOnly:
    """A session that hands out only an FSx client (the export is replaced in the test)."""

    def client(self, service: str):
        assert service == "fsx"
        return object()


def test_export_hook_restores_the_configured_events_and_can_be_skipped(monkeypatch):
    seen = {}

    def fake_export(fsx, association_id, timeout, restore, log):
        seen.update(association_id=association_id, timeout=timeout, restore=restore)
        from components.hooks.fsx_export import ExportResult

        return ExportResult(association_id, "task-1", 7, "7 files exported")

    monkeypatch.setattr("components.hooks.fsx_export.export_before_unlink", fake_export)
    logs: list[str] = []
    hooks = HookWork(settings(export_timeout_minutes=45), session=_FsxOnly, log=logs.append)
    inputs = {"fileSystemPath": "/", "s3": {"autoExportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}}
    hooks.export_now(hook_args("dra-1", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", inputs))
    assert seen == {"association_id": "dra-1", "timeout": 2700, "restore": ["NEW", "CHANGED", "DELETED"]}
    assert logs == ["dra-1: 7 files exported"]

    seen.clear()
    monkeypatch.setenv(SKIP_EXPORT_ENV, "1")
    hooks.export_now(hook_args("dra-1", "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", inputs))
    assert seen == {} and logs[-1] == f"dra-1: not exported to S3 ({SKIP_EXPORT_ENV}=1)"


def test_the_cluster_s_hook_sweeps_what_a_last_pull_re_created(aws):
    """Between the rule's hook and the last node's end, a pull re-created a repository: the cluster's hook,
    which runs after every node group is gone, deletes it; other prefixes' repositories stay."""
    ecr = aws.client("ecr")
    for name in ("gpucluster-dev/deep-learning-containers/pytorch", "gpucluster-prod/deep-learning-containers/x",
                 "team/app"):
        ecr.create_repository(repositoryName=name)
    logs: list[str] = []
    work = HookWork(settings(image_cache_prefix="gpucluster-dev"), session=lambda: aws, log=logs.append)
    work.sweep_images_now(hook_args(CLUSTER, "aws:eks/cluster:Cluster"))
    left = sorted(r["repositoryName"] for r in ecr.describe_repositories()["repositories"])
    assert left == ["gpucluster-prod/deep-learning-containers/x", "team/app"]
    assert logs == ["image cache gpucluster-dev: deleted 1 cached repository"]
    # With the cache off, nothing is touched.
    HookWork(settings(), session=lambda: aws, log=logs.append).sweep_images_now(hook_args(CLUSTER, "x"))
    assert len(ecr.describe_repositories()["repositories"]) == 2
