"""Storage: the S3 bucket, FSx for Lustre linked to it, and its mount in the cluster.

`Storage` is the AWS side and needs only the VPC, the GPU subnet and the
client security groups, so FSx (~10 min, +~7 min for its one S3 link) is
created while EKS is. `FsxVolume` is the cluster side: the FSx CSI add-on
and a static PersistentVolume/Claim, the one place that waits for both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import pulumi_random as random

from components import iam
from components.spec import fsx as fsxlib
from components.spec.config import StorageConfig

BUCKET_SUFFIX_BYTES = 4  # 8 hex characters
# S3 User Guide, "General purpose bucket naming rules": 3-63 characters,
# lowercase letters, digits, hyphens and dots.
_BUCKET_MAX = 63
NONCURRENT_VERSION_DAYS = 30  # how long an overwritten or deleted checkpoint can be recovered
ABORT_MULTIPART_DAYS = 7

CSI_ADDON = "aws-fsx-csi-driver"
CSI_DRIVER = "fsx.csi.aws.com"
# The add-on's controller service account (EKS User Guide, "Use high-performance
# app storage with Amazon FSx for Lustre", fsx-csi-create).
CSI_CONTROLLER_SA = "fsx-csi-controller-sa"
CLAIM_NAME = "fsx"
# Lustre flock gives POSIX locks across clients (aws-fsx-csi-driver static
# provisioning example, examples/kubernetes/static_provisioning).
MOUNT_OPTIONS = ("flock",)


def bucket_name(cluster_name: str, suffix: str) -> str:
    """`<cluster>-data-<suffix>`, lowercased and cut to S3's 63 characters."""
    tail = f"-data-{suffix}"
    head = re.sub(r"[^a-z0-9-]", "-", cluster_name.lower())[: _BUCKET_MAX - len(tail)].strip("-")
    return head + tail


def tls_only_policy(bucket_arn: str) -> str:
    """Deny every request that does not use TLS (S3 User Guide, "Security best
    practices for Amazon S3", aws:SecureTransport)."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    })


def lifecycle_rules() -> list[dict]:
    # Empty filter: the whole bucket (S3 User Guide, "Lifecycle configuration elements").
    return [
        {"id": "expire-noncurrent-versions", "status": "Enabled", "filter": {},
         "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_VERSION_DAYS}},
        {"id": "abort-incomplete-multipart-uploads", "status": "Enabled", "filter": {},
         "abort_incomplete_multipart_upload": {"days_after_initiation": ABORT_MULTIPART_DAYS}},
    ]


def lustre_args(config: StorageConfig) -> dict:
    """The deployment-type-specific LustreFileSystem arguments.

    Scratch has no backups or metadata servers to size. Neither type uses
    the legacy import_path/export_path link: it exports nothing by itself,
    and S3 is linked by a data repository association instead.
    """
    f = config.fsx
    if f.deployment_type == "SCRATCH_2":
        return {}
    metadata = ({"mode": "AUTOMATIC"} if f.metadata_iops is None
                else {"mode": "USER_PROVISIONED", "iops": f.metadata_iops})
    return {
        "per_unit_storage_throughput": f.throughput_per_tib,
        # Lustre 2.15 PERSISTENT_2 metadata servers; EFA needs one set at creation
        # (FSx Lustre User Guide, "Lustre metadata performance configuration").
        "metadata_configuration": metadata,
        "efa_enabled": f.efa_enabled,
        "automatic_backup_retention_days": f.backup_retention_days,
        "copy_tags_to_backups": True,
        # The provider skips the final backup unless told otherwise.
        "skip_final_backup": not f.final_backup_on_delete,
    }


@dataclass(frozen=True)
class StorageArgs:
    config: StorageConfig
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # the GPU zone's private subnet: FSx lives in one zone, with the GPUs
    client_security_group_ids: list[pulumi.Input[str]]  # groups of the nodes that mount the file system
    tags: dict[str, str] = field(default_factory=dict)


class Storage(pulumi.ComponentResource):
    """S3 bucket + FSx for Lustre in the GPU zone, linked both ways."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    file_system_id: pulumi.Output[str]  # resolves once every S3 link is in place
    dns_name: pulumi.Output[str]
    mount_name: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    storage_capacity_gib: int
    aggregate_throughput_mbps: float
    link: fsxlib.BucketLink | None

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Storage", name, None, opts)
        cfg = args.config
        child = pulumi.ResourceOptions(parent=self)

        def tags(role: str) -> dict[str, str]:
            return {**args.tags, "Name": f"{args.cluster_name}-{role}"}

        bucket, bucket_settings = self._bucket(name, args, tags("data"))

        sg = aws.ec2.SecurityGroup(f"{name}-fsx-sg", vpc_id=args.vpc_id,
                                   description=f"FSx for Lustre of {args.cluster_name}", tags=tags("fsx"),
                                   opts=child)
        sg_rules = self._rules(name, sg.id, args.client_security_group_ids, cfg.fsx.efa_enabled)

        fs = aws.fsx.LustreFileSystem(
            f"{name}-fsx",
            deployment_type=cfg.fsx.deployment_type,
            storage_type="SSD",
            storage_capacity=cfg.fsx.storage_capacity_gib,
            subnet_ids=args.subnet_id,
            security_group_ids=[sg.id],
            # 2.15 explicitly: SCRATCH_2 defaults to Lustre 2.10, which has no data
            # repository associations (CreateFileSystem FileSystemTypeVersion).
            file_system_type_version="2.15",
            data_compression_type="LZ4",
            tags=tags("fsx"),
            **lustre_args(cfg),
            # FSx refuses to create a file system whose group does not admit
            # Lustre (or, with EFA, all) traffic ("Creating an FSx for Lustre
            # file system fails"); the bucket's settings must be in place
            # before FSx reads or writes objects.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*sg_rules, *bucket_settings]),
        )

        # One association, the whole bucket at /, on both deployment types
        # (components.spec.fsx.BucketLink): automatic import and export of new,
        # changed and deleted files, so checkpoints reach S3 as they are written.
        self.link = fsxlib.BucketLink() if cfg.s3_link else None
        associations = []
        if self.link is not None:
            events = list(fsxlib.DRA_EVENTS)
            associations.append(aws.fsx.DataRepositoryAssociation(
                f"{name}-dra",
                file_system_id=fs.id,
                file_system_path=self.link.file_system_path,
                data_repository_path=bucket.bucket.apply(fsxlib.BucketLink.data_repository_path),
                batch_import_meta_data_on_create=self.link.batch_import,
                # Never let a deleted link take files with it; S3 keeps the data.
                delete_data_in_filesystem=False,
                s3={"auto_import_policy": {"events": events}, "auto_export_policy": {"events": events}},
                tags=tags("fsx-s3-link"),
                opts=child,
            ))

        self.bucket_name = bucket.bucket
        self.bucket_arn = bucket.arn
        # Consumers (the PV) wait for the links too: a pod that mounts before
        # them sees empty directories.
        self.file_system_id = pulumi.Output.all(fs.id, *[a.id for a in associations]).apply(lambda ids: ids[0])
        self.dns_name = fs.dns_name
        self.mount_name = fs.mount_name
        self.security_group_id = sg.id
        self.storage_capacity_gib = cfg.fsx.storage_capacity_gib
        self.aggregate_throughput_mbps = cfg.fsx.aggregate_throughput_mbps
        self.register_outputs({
            "bucketName": self.bucket_name,
            "bucketArn": self.bucket_arn,
            "fileSystemId": self.file_system_id,
            "dnsName": self.dns_name,
            "mountName": self.mount_name,
            "securityGroupId": self.security_group_id,
            "storageCapacityGiB": self.storage_capacity_gib,
            "aggregateThroughputMBps": self.aggregate_throughput_mbps,
        })

    def _bucket(self, name: str, args: StorageArgs,
                tags: dict[str, str]) -> tuple[aws.s3.Bucket, list[pulumi.CustomResource]]:
        child = pulumi.ResourceOptions(parent=self)
        retain = args.config.retain_on_destroy
        suffix = random.RandomId(f"{name}-bucket-suffix", byte_length=BUCKET_SUFFIX_BYTES, opts=child)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=suffix.hex.apply(lambda h: bucket_name(args.cluster_name, h)),
            # A retained bucket must never be emptied by Pulumi; a throwaway dev
            # bucket may be, or `pulumi destroy` fails on a non-empty bucket.
            force_destroy=not retain,
            tags=tags,
            # retain_on_delete keeps checkpoints through `pulumi destroy` while
            # the destroy itself still succeeds. protect would make destroy fail
            # until someone runs `pulumi state unprotect`: too strong a default
            # for a stack whose whole life cycle is up/destroy.
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=retain),
        )
        # The bucket's settings stay with it: deleting BucketVersioning would
        # suspend versioning, deleting the policy would drop the TLS rule.
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=retain)
        # BucketOwnerEnforced: ACLs off, the bucket owner owns every object,
        # including those FSx exports (S3 User Guide, "Controlling ownership of objects").
        ownership = aws.s3.BucketOwnershipControls(
            f"{name}-bucket-ownership", bucket=bucket.id, rule={"object_ownership": "BucketOwnerEnforced"},
            opts=child)
        public_block = aws.s3.BucketPublicAccessBlock(
            f"{name}-bucket-public-access", bucket=bucket.id, block_public_acls=True, block_public_policy=True,
            ignore_public_acls=True, restrict_public_buckets=True, opts=child)
        versioning = aws.s3.BucketVersioning(
            f"{name}-bucket-versioning", bucket=bucket.id, versioning_configuration={"status": "Enabled"},
            opts=child)
        # SSE-S3 rather than SSE-KMS: FSx links to SSE-S3 buckets as is, while
        # SSE-KMS needs a key policy naming FSx's per-file-system service-linked
        # role (AWSServiceRoleForFSxS3Access_<fs-id>), which exists only after the
        # file system does (FSx Lustre User Guide, "Working with server-side
        # encrypted Amazon S3 buckets"). It also spares a KMS call per object
        # FSx lazy-loads or exports.
        encryption = aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-bucket-encryption", bucket=bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}], opts=child)
        lifecycle = aws.s3.BucketLifecycleConfiguration(
            f"{name}-bucket-lifecycle", bucket=bucket.id, rules=lifecycle_rules(),
            # S3 rejects lifecycle rules on noncurrent versions racing the versioning call.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning], retain_on_delete=retain))
        policy = aws.s3.BucketPolicy(
            f"{name}-bucket-policy", bucket=bucket.id, policy=bucket.arn.apply(tls_only_policy),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block], retain_on_delete=retain))
        return bucket, [ownership, public_block, versioning, encryption, lifecycle, policy]

    def _rules(self, name: str, sg_id: pulumi.Output[str], clients: list[pulumi.Input[str]],
               efa: bool) -> list[pulumi.CustomResource]:
        """The file system group's rules (returned: FSx waits for them) and the clients' ingress."""
        child = pulumi.ResourceOptions(parent=self)
        own = []
        peers = [("self", sg_id), *((f"client{i}", c) for i, c in enumerate(clients))]
        for peer, peer_id in peers:
            for rule in fsxlib.file_system_rules(efa):
                cls = aws.vpc.SecurityGroupIngressRule if rule.direction == "ingress" else aws.vpc.SecurityGroupEgressRule
                own.append(cls(
                    f"{name}-fsx-{rule.slug}-{peer}", security_group_id=sg_id, referenced_security_group_id=peer_id,
                    ip_protocol=rule.protocol, from_port=rule.from_port, to_port=rule.to_port,
                    description=f"{rule.description} ({peer})", opts=child))
        for i, client in enumerate(clients):
            for rule in fsxlib.client_rules(efa):
                aws.vpc.SecurityGroupIngressRule(
                    f"{name}-client{i}-{rule.slug}-fsx", security_group_id=client, referenced_security_group_id=sg_id,
                    ip_protocol=rule.protocol, from_port=rule.from_port, to_port=rule.to_port,
                    description=f"{rule.description} (FSx for Lustre)", opts=child)
        return own


@dataclass(frozen=True)
class FsxVolumeArgs:
    storage: Storage
    cluster_name: pulumi.Input[str]
    provider: k8s.Provider
    namespace: str
    namespace_resource: pulumi.Resource  # the training Namespace
    addon_version: str  # gpucluster:versions.addons.aws-fsx-csi-driver
    # What the add-on needs first: the Pod Identity agent and nodes for its controller.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def csi_policy() -> str:
    """What the controller of a statically provisioned volume may call.

    A static PV is mounted by the node plugin with the Lustre client and
    needs no AWS call; the controller only creates, deletes and resizes
    dynamically provisioned file systems, which we never ask it to. The
    AmazonFSxFullAccess policy the EKS guide names would let any pod with
    this service account create or delete every file system in the
    account; read-only describe is all that is left to allow (volume
    validation looks the file system up).
    """
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": ["fsx:DescribeFileSystems"], "Resource": "*"}],
    })


def persistent_volume(namespace: str, capacity_gib: int, file_system_id: str, dns_name: str,
                      mount_name: str) -> dict:
    """Spec of the static PV (aws-fsx-csi-driver, static provisioning)."""
    return {
        "capacity": {"storage": f"{capacity_gib}Gi"},
        "volumeMode": "Filesystem",
        "accessModes": ["ReadWriteMany"],
        # The file system's life cycle belongs to Pulumi, not to the claim.
        "persistentVolumeReclaimPolicy": "Retain",
        "storageClassName": "",
        "mountOptions": list(MOUNT_OPTIONS),
        # Reserved for our claim: no other claim can bind it.
        "claimRef": {"namespace": namespace, "name": CLAIM_NAME},
        "csi": {
            "driver": CSI_DRIVER,
            "volumeHandle": file_system_id,
            "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name},
        },
    }


# What the claim requests: constant and small. A statically bound claim cannot
# be resized, so a request that followed the file system's capacity would make
# every FSx resize a rejected PVC patch; binding needs only request <= the PV's capacity.
CLAIM_REQUEST = "1Gi"


def pv_name(namespace: str, file_system_id: str) -> str:
    """Named after the file system: a new file system gets a new PV (its CSI source is immutable),
    created before the old one is deleted."""
    return f"{namespace}-fsx-{file_system_id}"


def persistent_volume_claim(volume_name: str) -> dict:
    return {
        "accessModes": ["ReadWriteMany"],
        # "" turns off dynamic provisioning; volumeName binds to our PV.
        "storageClassName": "",
        "volumeName": volume_name,
        "resources": {"requests": {"storage": CLAIM_REQUEST}},
    }


class FsxVolume(pulumi.ComponentResource):
    """The FSx CSI driver (EKS add-on, Pod Identity) and a ReadWriteMany claim on the file system."""

    claim_name: str
    pv_name: str
    addon: aws.eks.Addon

    def __init__(self, name: str, args: FsxVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:FsxVolume", name, None, opts)
        storage = args.storage
        role, _ = iam.service_role(f"{name}-csi-role", "pods.eks.amazonaws.com", [], args.tags, self)
        role_policy = aws.iam.RolePolicy(f"{name}-csi-role-policy", role=role.name, policy=csi_policy(),
                                         opts=pulumi.ResourceOptions(parent=self))
        self.addon = aws.eks.Addon(
            f"{name}-csi-driver",
            cluster_name=args.cluster_name,
            addon_name=CSI_ADDON,
            # Pinned per stack (gpucluster:versions.addons), like the cluster's add-ons.
            addon_version=args.addon_version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            # The add-on authenticates with Pod Identity only (EKS User Guide, fsx-csi-create).
            pod_identity_associations=[{"role_arn": role.arn, "service_account": CSI_CONTROLLER_SA}],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, role_policy]),
        )

        self.claim_name = CLAIM_NAME
        self.pv_name = storage.file_system_id.apply(lambda fs_id: pv_name(args.namespace, fs_id))
        spec = pulumi.Output.all(storage.file_system_id, storage.dns_name, storage.mount_name).apply(
            lambda a: persistent_volume(args.namespace, storage.storage_capacity_gib, *a))
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": self.pv_name, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.addon]),
        )
        # The claim follows its PV: when the file system is replaced, the claim
        # (fixed name, spec immutable once bound) is deleted and re-created on the
        # new PV, which lets the old PV go (pv-protection holds a bound PV).
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": CLAIM_NAME, "namespace": args.namespace,
                      "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
            spec=pv.metadata.apply(lambda m: persistent_volume_claim(m["name"])),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[args.namespace_resource, pv],
                                        replace_on_changes=["spec"], delete_before_replace=True),
        )
        self.register_outputs({"claimName": self.claim_name, "persistentVolumeName": self.pv_name,
                               "csiAddonVersion": self.addon.addon_version})
