"""Storage (S3 + FSx for Lustre) and FsxVolume (CSI add-on, PV/PVC): the exact resource contract under mocks."""

from __future__ import annotations

import json
import re

import pulumi
import pulumi_kubernetes as k8s
import pytest

from bootstrap.offline import mocks
from components.aws.cluster import Cluster, ClusterArgs
from components.aws.network import Network, NetworkArgs
from components.aws.storage import Storage, StorageArgs
from components.core.hardware.zones import ZonePlan
from components.core.storage import bucket as bucketlib
from components.kubernetes.fsx_volume import FsxVolume, FsxVolumeArgs
from tests.conftest import stack_config, stack_raw
from tests.k8s import validate_core

NODE_SG = "sg-0nodes000000000001"
EFA_SG = "sg-0efa00000000000002"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
EFA_OVERRIDE = {"gpucluster:storage": {
    "fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 4800, "throughputPerTiB": 1000,
            "efaEnabled": True, "metadataIops": 12000},
    "retainOnDestroy": True}}


def _isolated(stack: str, overrides: dict | None = None, clients: tuple[str, ...] = (NODE_SG,)) -> mocks.Recording:
    """Storage + FsxVolume on fake network and cluster inputs."""
    cfg = stack_config(stack, overrides)

    def program() -> None:
        store = Storage("st", StorageArgs(
            config=cfg.storage, cluster_name=cfg.cluster_name, vpc_id=pulumi.Output.from_input("vpc-123"),
            subnet_id=pulumi.Output.from_input("subnet-gpu"),
            client_security_group_ids=[pulumi.Output.from_input(c) for c in clients], tags={"team": "ml"}))
        provider = k8s.Provider("k8s", kubeconfig="{}")
        ns = k8s.core.v1.Namespace("ns", metadata={"name": cfg.training_namespace},
                                   opts=pulumi.ResourceOptions(provider=provider))
        FsxVolume("vol", FsxVolumeArgs(
            storage=store, cluster_name=pulumi.Output.from_input(cfg.cluster_name), provider=provider,
            namespace=cfg.training_namespace, namespace_resource=ns,
            addon_version=cfg.versions.addons["aws-fsx-csi-driver"], tags={"team": "ml"}))

    return mocks.run_program(stack_raw(stack, overrides), stack, program=program)


@pytest.fixture(scope="module")
def dev() -> mocks.Recording:
    return _isolated("dev")


@pytest.fixture(scope="module")
def prod() -> mocks.Recording:
    return _isolated("prod")


@pytest.fixture(scope="module")
def efa() -> mocks.Recording:
    return _isolated("prod", EFA_OVERRIDE, clients=(NODE_SG, EFA_SG))


def _k8s_object(reg: mocks.Registration) -> dict:
    return {k: reg.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}


# -- component shape ---------------------------------------------------------------


def test_children_are_parented_and_named_after_their_component(prod):
    store, vol = prod.named("st"), prod.named("vol")
    assert (store.type, vol.type) == ("gpucluster:index:Storage", "gpucluster:index:FsxVolume")
    for r in prod.resources:
        if r.parent == store.urn:
            assert r.name.startswith("st-")
        elif r.parent == vol.urn:
            assert r.name.startswith("vol-")
    assert store.component_outputs["aggregateThroughputMBps"] == 48000 / 1000 * 500
    assert store.component_outputs["storageCapacityGiB"] == 48000
    assert re.fullmatch(r"fs-[0-9a-f]{17}", store.component_outputs["fileSystemId"])
    assert vol.component_outputs["claimName"] == "fsx"
    assert vol.component_outputs["persistentVolumeName"] == f"training-fsx-{store.component_outputs['fileSystemId']}"


# -- S3 ------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_bucket_is_named_cluster_data_random_suffix(stack, request):
    rec = request.getfixturevalue(stack)
    suffix = rec.named("st-bucket-suffix")
    assert suffix.inputs == {"byteLength": 4}
    name = rec.named("st-bucket").inputs["bucket"]
    assert name == f"gpucluster-{stack}-data-{suffix.outputs['hex']}"
    assert re.fullmatch(rf"gpucluster-{stack}-data-[0-9a-f]{{8}}", name)


def test_bucket_name_is_lowercase_and_fits_s3():
    assert bucketlib.bucket_name("My_Cluster", "0a1b2c3d") == "my-cluster-data-0a1b2c3d"
    long = bucketlib.bucket_name("x" * 100, "0a1b2c3d")
    assert len(long) == 63 and long.endswith("-data-0a1b2c3d")


def test_prod_bucket_is_retained_and_never_force_destroyed(prod):
    bucket = prod.named("st-bucket")
    assert bucket.retain_on_delete is True
    assert bucket.protect is False  # protect would make `pulumi destroy` fail
    assert bucket.inputs["forceDestroy"] is False
    assert bucket.inputs["tags"] == {"team": "ml", "Name": "gpucluster-prod-data"}


def test_dev_bucket_follows_retain_on_destroy_false(dev):
    bucket = dev.named("st-bucket")
    assert (bucket.retain_on_delete, bucket.protect, bucket.inputs["forceDestroy"]) == (False, False, True)


def test_bucket_settings(prod):
    bucket = prod.named("st-bucket").inputs["bucket"]
    assert prod.named("st-bucket-versioning").inputs == {
        "bucket": bucket, "versioningConfiguration": {"status": "Enabled"}}
    assert prod.named("st-bucket-encryption").inputs == {
        "bucket": bucket, "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}
    assert prod.named("st-bucket-public-access").inputs == {
        "bucket": bucket, "blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True,
        "restrictPublicBuckets": True}
    assert prod.named("st-bucket-ownership").inputs == {
        "bucket": bucket, "rule": {"objectOwnership": "BucketOwnerEnforced"}}
    assert prod.named("st-bucket-lifecycle").inputs == {"bucket": bucket, "rules": [
        {"id": "expire-noncurrent-versions", "status": "Enabled", "filter": {},
         "noncurrentVersionExpiration": {"noncurrentDays": 30}},
        {"id": "abort-incomplete-multipart-uploads", "status": "Enabled", "filter": {},
         "abortIncompleteMultipartUpload": {"daysAfterInitiation": 7}},
    ]}
    lifecycle, versioning = prod.named("st-bucket-lifecycle"), prod.named("st-bucket-versioning")
    assert versioning.urn in lifecycle.dependencies


def test_bucket_policy_denies_every_request_without_tls(prod):
    bucket = prod.named("st-bucket").inputs["bucket"]
    policy = prod.named("st-bucket-policy")
    assert policy.inputs["bucket"] == bucket
    assert json.loads(policy.inputs["policy"]) == {"Version": "2012-10-17", "Statement": [{
        "Sid": "DenyInsecureTransport", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }]}
    assert prod.named("st-bucket-public-access").urn in policy.dependencies


# -- FSx -----------------------------------------------------------------------------

COMMON = {"storageType": "SSD", "subnetIds": "subnet-gpu", "fileSystemTypeVersion": "2.15",
          "dataCompressionType": "LZ4"}


def test_dev_scratch_file_system_is_linked_by_an_association_not_import_paths(dev):
    fs = dev.named("st-fsx")
    # No legacy import/export path: it exports nothing by itself, so dev checkpoints would never reach S3.
    assert fs.inputs == {
        **COMMON, "deploymentType": "SCRATCH_2", "storageCapacity": 1200,
        "securityGroupIds": [dev.named("st-fsx-sg").id],
        "tags": {"team": "ml", "Name": "gpucluster-dev-fsx"},
    }
    # SCRATCH_2 defaults to Lustre 2.10, which has no associations: 2.15 is set explicitly.
    assert fs.inputs["fileSystemTypeVersion"] == "2.15"


def test_prod_persistent_file_system(prod):
    fs = prod.named("st-fsx")
    assert fs.inputs == {
        **COMMON, "deploymentType": "PERSISTENT_2", "storageCapacity": 48000, "perUnitStorageThroughput": 500,
        "securityGroupIds": [prod.named("st-fsx-sg").id],
        "metadataConfiguration": {"mode": "AUTOMATIC"}, "efaEnabled": False,
        "automaticBackupRetentionDays": 0, "copyTagsToBackups": True, "skipFinalBackup": True,
        "tags": {"team": "ml", "Name": "gpucluster-prod-fsx"},
    }
    assert fs.retain_on_delete is False  # S3 (versioned, retained) is the durable copy


def test_unlinked_persistent_file_system_is_backed_up_instead():
    rec = _isolated("prod", {"gpucluster:storage": {
        "fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 2400, "throughputPerTiB": 250,
                "backupRetentionDays": 7, "finalBackupOnDelete": True},
        "s3Link": False}, "gpucluster:teams": []})  # teams' directories need the link
    fs = rec.named("st-fsx")
    assert fs.inputs["automaticBackupRetentionDays"] == 7
    assert fs.inputs["skipFinalBackup"] is False
    assert not rec.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    assert "importPath" not in fs.inputs


def test_unlinked_scratch_file_system_has_no_import_path():
    rec = _isolated("dev", {"gpucluster:storage": {"fsx": {"deploymentType": "SCRATCH_2"}, "s3Link": False}})
    fs = rec.named("st-fsx")
    assert "importPath" not in fs.inputs and "exportPath" not in fs.inputs
    assert not rec.of_type(DRA)


def test_efa_file_system_provisions_metadata_iops(efa):
    fs = efa.named("st-fsx").inputs
    assert (fs["efaEnabled"], fs["metadataConfiguration"], fs["perUnitStorageThroughput"]) == (
        True, {"mode": "USER_PROVISIONED", "iops": 12000}, 1000)
    assert (fs["automaticBackupRetentionDays"], fs["skipFinalBackup"]) == (0, True)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_one_association_links_the_whole_bucket_with_every_event(stack, request):
    # One, at /: two created at once fail (terraform-provider-aws #24678), and / must be the only one.
    rec = request.getfixturevalue(stack)
    bucket = rec.named("st-bucket").inputs["bucket"]
    fs = rec.named("st-fsx")
    events = {"events": ["NEW", "CHANGED", "DELETED"]}
    (dra,) = rec.of_type(DRA)
    assert dra.name == "st-dra"
    assert dra.inputs == {
        "fileSystemId": fs.id, "fileSystemPath": "/", "dataRepositoryPath": f"s3://{bucket}/",
        "batchImportMetaDataOnCreate": True, "deleteDataInFilesystem": False,
        "s3": {"autoImportPolicy": events, "autoExportPolicy": events},
        "tags": {"team": "ml", "Name": f"gpucluster-{stack}-fsx-s3-link"},
    }
    assert rec.depends_on(dra, fs)


def test_file_system_waits_for_its_rules_and_the_bucket_settings(prod):
    fs = prod.named("st-fsx")
    rules = [r for r in prod.of_type(INGRESS) + prod.of_type(EGRESS) if r.name.startswith("st-fsx-")]
    settings = [prod.named(f"st-bucket-{s}") for s in
                ("ownership", "public-access", "versioning", "encryption", "lifecycle", "policy")]
    assert len(rules) == 8
    for r in rules + settings:
        assert r.urn in fs.dependencies, r.name


def _rules(rec: mocks.Registration, on: str) -> set[tuple]:
    return {(r.type.split("/")[1].split(":")[0], r.inputs["ipProtocol"], r.inputs.get("fromPort"),
             r.inputs.get("toPort"), r.inputs["referencedSecurityGroupId"])
            for r in rec.of_type(INGRESS) + rec.of_type(EGRESS) if r.inputs["securityGroupId"] == on}


def _lustre(direction: str, peer: str) -> set[tuple]:
    return {(direction, "tcp", 988, 988, peer), (direction, "tcp", 1018, 1023, peer)}


def test_security_groups_admit_lustre_from_clients_and_itself_only(prod):
    sg = prod.named("st-fsx-sg")
    assert sg.inputs["vpcId"] == "vpc-123"
    assert "ingress" not in sg.inputs and "egress" not in sg.inputs  # standalone rule resources only
    assert _rules(prod, sg.id) == (_lustre("securityGroupIngressRule", sg.id) | _lustre("securityGroupEgressRule", sg.id)
                                   | _lustre("securityGroupIngressRule", NODE_SG)
                                   | _lustre("securityGroupEgressRule", NODE_SG))
    assert _rules(prod, NODE_SG) == _lustre("securityGroupIngressRule", sg.id)
    assert len(prod.of_type(INGRESS)) + len(prod.of_type(EGRESS)) == 10


def test_efa_security_groups_add_all_traffic_with_every_peer(efa):
    sg = efa.named("st-fsx-sg").id
    everything = {("securityGroupIngressRule", "-1", None, None, p) for p in (sg, NODE_SG, EFA_SG)} | {
        ("securityGroupEgressRule", "-1", None, None, p) for p in (sg, NODE_SG, EFA_SG)}
    assert everything <= _rules(efa, sg)
    assert len(_rules(efa, sg)) == 3 * 6
    for client in (NODE_SG, EFA_SG):
        assert _rules(efa, client) == _lustre("securityGroupIngressRule", sg) | {
            ("securityGroupIngressRule", "-1", None, None, sg)}


# -- cluster side ----------------------------------------------------------------------


def test_csi_driver_add_on_uses_pod_identity(prod):
    addon = prod.named("vol-csi-driver")
    role = prod.named("vol-csi-role")
    assert addon.inputs == {
        "clusterName": "gpucluster-prod", "addonName": "aws-fsx-csi-driver", "addonVersion": "v1.9.0-eksbuild.1",
        "resolveConflictsOnCreate": "OVERWRITE", "resolveConflictsOnUpdate": "PRESERVE",
        "podIdentityAssociations": [{"roleArn": role.outputs["arn"], "serviceAccount": "fsx-csi-controller-sa"}],
        "tags": {"team": "ml"},
    }
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    # Only the add-on's association: kube-system/fsx-csi-controller-sa (EKS User Guide, pod-id-role).
    tags = statement["Condition"]["StringEquals"]
    assert tags["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert tags["aws:RequestTag/kubernetes-service-account"] == "fsx-csi-controller-sa"
    policy = prod.named("vol-csi-role-policy")
    assert policy.inputs["role"] == role.outputs["name"]
    assert json.loads(policy.inputs["policy"]) == {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}]}
    assert policy.urn in addon.dependencies
    # Least privilege: no managed policy (AmazonFSxFullAccess) on the role.
    assert not [r for r in prod.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                if r.parent == prod.named("vol").urn]


def test_static_persistent_volume(prod):
    store = prod.named("st").component_outputs
    pv = prod.named("vol-pv")
    assert pv.inputs["metadata"] == {"name": f"training-fsx-{store['fileSystemId']}",
                                     "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
    assert pv.inputs["spec"] == {
        "capacity": {"storage": "48000Gi"}, "volumeMode": "Filesystem", "accessModes": ["ReadWriteMany"],
        "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "", "mountOptions": ["flock"],
        "claimRef": {"namespace": "training", "name": "fsx"},
        "csi": {"driver": "fsx.csi.aws.com", "volumeHandle": store["fileSystemId"],
                "volumeAttributes": {"dnsname": store["dnsName"], "mountname": store["mountName"]}},
    }
    assert re.fullmatch(r"fs-[0-9a-f]{17}\.fsx\.us-east-1\.amazonaws\.com", store["dnsName"])
    assert pv.provider.startswith(prod.named("k8s").urn)
    assert prod.named("vol-csi-driver").urn in pv.dependencies
    # A new file system is a new PV name (the CSI source is immutable): a replacement, the new one
    # created before the old one goes.
    assert pv.inputs["metadata"]["name"].endswith(store["fileSystemId"]) and pv.delete_before_replace is False


def test_claim_binds_to_the_volume_by_name(prod):
    pvc = prod.named("vol-pvc")
    assert pvc.inputs["metadata"] == {"name": "fsx", "namespace": "training",
                                      "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
    pv = prod.named("vol-pv")
    # A constant small request: a statically bound claim cannot be resized, so following the file system's
    # capacity would turn every FSx resize into a rejected PVC patch.
    assert pvc.inputs["spec"] == {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                                  "volumeName": pv.inputs["metadata"]["name"],
                                  "resources": {"requests": {"storage": "1Gi"}}}
    assert prod.named("ns").urn in pvc.dependencies and pv.urn in pvc.dependencies
    # It follows its PV: deleted first (fixed name), re-created on the new one.
    assert pvc.replace_on_changes == ["spec"] and pvc.delete_before_replace is True


def test_claim_request_does_not_follow_a_resize():
    big = _isolated("prod", {"gpucluster:storage": {"fsx": {"deploymentType": "PERSISTENT_2",
                                                            "storageCapacityGiB": 96000, "throughputPerTiB": 500}}})
    assert big.named("vol-pvc").inputs["spec"]["resources"] == {"requests": {"storage": "1Gi"}}
    assert big.named("vol-pv").inputs["spec"]["capacity"] == {"storage": "96000Gi"}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pv_and_pvc_are_valid_kubernetes(stack, request):
    rec = request.getfixturevalue(stack)
    version = stack_config(stack).kubernetes_version
    assert version == "1.35"
    for name in ("vol-pv", "vol-pvc"):
        validate_core(_k8s_object(rec.named(name)), version)


def test_volume_waits_for_the_s3_links(prod):
    pv = prod.named("vol-pv")
    for dra in prod.of_type(DRA):
        assert prod.depends_on(pv, dra)


# -- the real wiring -----------------------------------------------------------------


@pytest.fixture(scope="module")
def wired() -> mocks.Recording:
    cfg = stack_config("prod")

    def program() -> None:
        zones = ZonePlan("us-east-1a", ("us-east-1a", "us-east-1b", "us-east-1c"),
                         ("us-east-1a", "us-east-1b", "us-east-1c"),
                         {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"})
        network = Network(cfg.cluster_name, NetworkArgs(config=cfg.network, cluster_name=cfg.cluster_name,
                                                         region=cfg.region, zones=zones, tags=cfg.tags))
        cluster = Cluster(cfg.cluster_name, ClusterArgs(config=cfg, subnet_ids=network.cluster_subnet_ids))
        store = Storage(f"{cfg.cluster_name}-storage", StorageArgs(
            config=cfg.storage, cluster_name=cfg.cluster_name, vpc_id=network.vpc_id,
            subnet_id=network.gpu_subnet_id, client_security_group_ids=[network.node_security_group_id],
            tags=cfg.tags))
        FsxVolume(f"{cfg.cluster_name}-fsx", FsxVolumeArgs(
            storage=store, cluster_name=cluster.name, provider=cluster.provider,
            namespace=cfg.training_namespace, namespace_resource=cluster.training_namespace,
            addon_version=cfg.versions.addons["aws-fsx-csi-driver"],
            depends_on=[cluster.system_nodes, *cluster.core_addons], tags=cfg.tags))

    return mocks.run_program(stack_raw("prod"), "prod", program=program)


def test_file_system_does_not_wait_for_eks_but_the_volume_does(wired):
    eks = wired.named("gpucluster-prod-eks")
    assert eks.type == "aws:eks/cluster:Cluster"
    fs = wired.of_type(FSX)[0]
    assert not wired.depends_on(fs, eks)
    for dra in wired.of_type(DRA):
        assert not wired.depends_on(dra, eks)
    for name in ("gpucluster-prod-fsx-pv", "gpucluster-prod-fsx-pvc", "gpucluster-prod-fsx-csi-driver"):
        assert wired.depends_on(wired.named(name), eks), name
    assert wired.depends_on(wired.named("gpucluster-prod-fsx-pv"), fs)


def test_wired_file_system_sits_in_the_gpu_subnet_and_admits_the_node_group(wired):
    fs = wired.of_type(FSX)[0]
    gpu_subnet = wired.named("gpucluster-prod-private-us-east-1a")
    node_sg = wired.named("gpucluster-prod-node-sg")
    assert fs.inputs["subnetIds"] == gpu_subnet.id
    peers = {r.inputs["referencedSecurityGroupId"] for r in wired.of_type(INGRESS)
             if r.inputs["securityGroupId"] == wired.named("gpucluster-prod-storage-fsx-sg").id}
    cluster_sg = wired.named("gpucluster-prod-eks").outputs["vpcConfig"]["clusterSecurityGroupId"]
    assert node_sg.id in peers and cluster_sg not in peers


def test_retained_bucket_keeps_its_settings_on_destroy(prod, dev):
    kinds = ("bucketVersioning", "bucketPublicAccessBlock", "bucketPolicy", "bucketLifecycleConfiguration",
             "bucketServerSideEncryptionConfiguration", "bucketOwnershipControls")
    for rec, retained in ((prod, True), (dev, False)):
        settings = [r for r in rec.resources if r.type.startswith("aws:s3/") and r.type.split("/")[1].split(":")[0]
                    in kinds]
        assert len(settings) == 6
        assert all(r.retain_on_delete is retained for r in settings)
