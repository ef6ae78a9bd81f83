"""Storage: the S3 bucket (created, or adopted by name) and FSx for Lustre linked to it.

The AWS side only: it needs the VPC, the GPU subnet and the client security
groups, so FSx (~10 min, +~7 min for its one S3 link) is created while EKS
is. `components.kubernetes.fsx_volume.FsxVolume` is the cluster side. On the way out,
the link's delete hook exports the file system to S3 first
(components.hooks), and a bucket the stack may delete is guarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_random as random

from components.aws.lookups import BucketRef
from components.core.config import StorageConfig
from components.core.storage import bucket as bucketlib
from components.core.storage import fsx as fsxlib
from components.hooks import StackHooks


@dataclass(frozen=True)
class StorageArgs:
    config: StorageConfig
    cluster_name: str
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]  # the GPU zone's private subnet: FSx lives in one zone, with the GPUs
    client_security_group_ids: list[pulumi.Input[str]]  # groups of the nodes that mount the file system
    # The EKS cluster security group: the system nodes' only group (their node group has no launch
    # template), for TensorBoard's read-only mount. Its rules wait for the cluster; the file system does not.
    system_security_group_id: pulumi.Input[str] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # storage.bucketName, looked up (lookups.lookup_bucket): linked, never created or deleted.
    existing_bucket: BucketRef | None = None
    # The program's delete hooks (export before unlinking, bucket guard); None in component tests.
    hooks: StackHooks | None = None


class Storage(pulumi.ComponentResource):
    """S3 bucket + FSx for Lustre in the GPU zone, linked both ways."""

    bucket_name: pulumi.Output[str]
    bucket_arn: pulumi.Output[str]
    bucket_adopted: bool  # storage.bucketName: linked, never created or deleted by the stack
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

        if args.existing_bucket is not None:
            # Adopted by name: no resource, so no `pulumi destroy` can touch it.
            bucket_name, bucket_arn = (pulumi.Output.from_input(args.existing_bucket.name),
                                       pulumi.Output.from_input(args.existing_bucket.arn))
            bucket_settings: list[pulumi.CustomResource] = []
        else:
            bucket, bucket_settings = self._bucket(name, args, tags("data"))
            bucket_name, bucket_arn = bucket.bucket, bucket.arn
        hooks = args.hooks

        sg = aws.ec2.SecurityGroup(f"{name}-fsx-sg", vpc_id=args.vpc_id,
                                   description=f"FSx for Lustre of {args.cluster_name}", tags=tags("fsx"),
                                   opts=child)
        sg_rules = self._rules(name, sg.id, args.client_security_group_ids, cfg.fsx.efa_enabled)
        if args.system_security_group_id is not None:
            self._client_rules(name, sg.id, "system", args.system_security_group_id, cfg.fsx.efa_enabled)

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
            **fsxlib.lustre_args(cfg),
            # FSx refuses to create a file system whose group does not admit
            # Lustre (or, with EFA, all) traffic ("Creating an FSx for Lustre
            # file system fails"); the bucket's settings must be in place
            # before FSx reads or writes objects. DeleteFileSystem fails while
            # a data repository task runs: the hook waits for it.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*sg_rules, *bucket_settings],
                hooks=hooks.before_delete(hooks.wait_for_fsx_tasks) if hooks else None),
        )

        # One association, the whole bucket at /, on both deployment types
        # (components.core.storage.fsx.BucketLink): automatic import and export of new,
        # changed and deleted files, so checkpoints reach S3 as they are written.
        self.link = fsxlib.BucketLink() if cfg.s3_link else None
        associations = []
        if self.link is not None:
            events = list(fsxlib.DRA_EVENTS)
            associations.append(aws.fsx.DataRepositoryAssociation(
                f"{name}-dra",
                file_system_id=fs.id,
                file_system_path=self.link.file_system_path,
                data_repository_path=bucket_name.apply(fsxlib.BucketLink.data_repository_path),
                batch_import_meta_data_on_create=self.link.batch_import,
                # Never let a deleted link take files with it; S3 keeps the data.
                delete_data_in_filesystem=False,
                s3={"auto_import_policy": {"events": events}, "auto_export_policy": {"events": events}},
                tags=tags("fsx-s3-link"),
                # Before the link goes (destroy, or a new bucket or file system),
                # everything on the file system is exported to S3, or the delete
                # fails and the data stays. An association at / must be the file
                # system's only one, so a replacement is deleted first.
                opts=pulumi.ResourceOptions(
                    parent=self, delete_before_replace=True,
                    hooks=hooks.before_delete(hooks.export_to_s3) if hooks else None),
            ))

        self.bucket_name = bucket_name
        self.bucket_arn = bucket_arn
        self.bucket_adopted = args.existing_bucket is not None
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
            "bucketAdopted": self.bucket_adopted,
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
        suffix = random.RandomId(f"{name}-bucket-suffix", byte_length=bucketlib.BUCKET_SUFFIX_BYTES, opts=child)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=suffix.hex.apply(lambda h: bucketlib.bucket_name(args.cluster_name, h)),
            # A retained bucket must never be emptied by Pulumi; a throwaway dev
            # bucket may be, or `pulumi destroy` fails on a non-empty bucket.
            force_destroy=not retain,
            tags=tags,
            # retain_on_delete keeps checkpoints through `pulumi destroy` while
            # the destroy itself still succeeds. protect would make destroy fail
            # until someone runs `pulumi state unprotect`: too strong a default
            # for a stack whose whole life cycle is up/destroy. A bucket that may
            # go is guarded: objects in it go only when a confirmation names it.
            opts=pulumi.ResourceOptions(
                parent=self, retain_on_delete=retain,
                hooks=args.hooks.before_delete(args.hooks.keep_bucket_data) if args.hooks and not retain else None),
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
            f"{name}-bucket-lifecycle", bucket=bucket.id, rules=bucketlib.lifecycle_rules(),
            # S3 rejects lifecycle rules on noncurrent versions racing the versioning call.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning], retain_on_delete=retain))
        policy = aws.s3.BucketPolicy(
            f"{name}-bucket-policy", bucket=bucket.id, policy=bucket.arn.apply(bucketlib.tls_only_policy),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[public_block], retain_on_delete=retain))
        return bucket, [ownership, public_block, versioning, encryption, lifecycle, policy]

    def _rules(self, name: str, sg_id: pulumi.Output[str], clients: list[pulumi.Input[str]],
               efa: bool) -> list[pulumi.CustomResource]:
        """The file system group's rules (returned: FSx waits for them) and the clients' ingress."""
        child = pulumi.ResourceOptions(parent=self)
        own = [self._file_system_rule(name, sg_id, "self", sg_id, rule, child) for rule in fsxlib.file_system_rules(efa)]
        for i, client in enumerate(clients):
            own += self._client_rules(name, sg_id, f"client{i}", client, efa)
        return own

    def _client_rules(self, name: str, sg_id: pulumi.Output[str], peer: str, client: pulumi.Input[str],
                      efa: bool) -> list[pulumi.CustomResource]:
        """The file system group's rules towards one client group (returned), and the client's ingress."""
        child = pulumi.ResourceOptions(parent=self)
        own = [self._file_system_rule(name, sg_id, peer, client, rule, child) for rule in fsxlib.file_system_rules(efa)]
        for rule in fsxlib.client_rules(efa):
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-{peer}-{rule.slug}-fsx", security_group_id=client, referenced_security_group_id=sg_id,
                ip_protocol=rule.protocol, from_port=rule.from_port, to_port=rule.to_port,
                description=f"{rule.description} (FSx for Lustre)", opts=child)
        return own

    @staticmethod
    def _file_system_rule(name: str, sg_id: pulumi.Output[str], peer: str, peer_id: pulumi.Input[str],
                          rule: fsxlib.SgRule, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
        cls = aws.vpc.SecurityGroupIngressRule if rule.direction == "ingress" else aws.vpc.SecurityGroupEgressRule
        return cls(f"{name}-fsx-{rule.slug}-{peer}", security_group_id=sg_id, referenced_security_group_id=peer_id,
                   ip_protocol=rule.protocol, from_port=rule.from_port, to_port=rule.to_port,
                   description=f"{rule.description} ({peer})", opts=opts)
