"""gpucluster:storage: the bucket's prefixes, the S3 link and the FSx for Lustre file system."""

from __future__ import annotations

from components.spec import bucket as bucketlib
from components.spec.config.types import (
    EXPORT_TIMEOUT_MAX_MINUTES,
    FSX_DEPLOYMENT_TYPES,
    FSX_MAX_CAPACITY_GIB,
    FSX_METADATA_IOPS,
    FSX_PERSISTENT_2_THROUGHPUT,
    S3_PREFIX,
    FsxConfig,
    StorageConfig,
)
from components.spec.validation import Section


def parse_storage(sec: Section) -> StorageConfig:
    d = StorageConfig()
    fsx = parse_fsx(sec.section("fsx"))
    dataset = sec.string("datasetPrefix", d.dataset_prefix, pattern=S3_PREFIX,
                         allowed="an S3 key prefix such as datasets/ (no leading /, ending in /)")
    checkpoint = sec.string("checkpointPrefix", d.checkpoint_prefix, pattern=S3_PREFIX,
                            allowed="an S3 key prefix such as checkpoints/ (no leading /, ending in /)")
    if dataset and checkpoint and (dataset.startswith(checkpoint) or checkpoint.startswith(dataset)):
        sec.problems.bad(sec.key_path("checkpointPrefix"), checkpoint,
                         f"must not overlap datasetPrefix {dataset!r} (one S3 link each)")
    retain = sec.boolean("retainOnDestroy", d.retain_on_destroy)
    bucket = sec.string("bucketName", allowed=bucketlib.ALLOWED)
    if bucket is not None and (reason := bucketlib.bucket_name_problem(bucket)):
        sec.problems.bad(sec.key_path("bucketName"), bucket, reason)
        bucket = None
    if sec.has("bucketName") and retain is False:
        # The stack never deletes a bucket it did not create.
        sec.problems.bad(sec.key_path("retainOnDestroy"), False,
                         "does not apply with storage.bucketName: an adopted bucket is never deleted by the stack; "
                         "remove retainOnDestroy (or bucketName, to let the stack create and delete its own bucket)")
    export_timeout = sec.integer("exportTimeoutMinutes", d.export_timeout_minutes, minimum=5,
                                 maximum=EXPORT_TIMEOUT_MAX_MINUTES)
    target = sec.number("readTargetMBpsPerGpu", d.read_target_mbps_per_gpu, minimum=0)
    s3_link = sec.boolean("s3Link", d.s3_link)
    if s3_link is not False and (fsx.backup_retention_days or fsx.final_backup_on_delete):
        # FSx Lustre User Guide, "Working with backups": backups are for persistent
        # file systems not linked to an S3 data repository; S3 is the durable copy.
        key = "backupRetentionDays" if fsx.backup_retention_days else "finalBackupOnDelete"
        sec.problems.add(f"{sec.key_path('fsx')}.{key}",
                         "FSx cannot back up a file system linked to S3 (the versioned bucket is the durable "
                         "copy); remove the backup settings or set storage.s3Link: false")
    sec.finish()
    return StorageConfig(fsx=fsx, s3_link=s3_link is not False, dataset_prefix=dataset or d.dataset_prefix,
                         checkpoint_prefix=checkpoint or d.checkpoint_prefix,
                         retain_on_destroy=d.retain_on_destroy if retain is None else retain,
                         read_target_mbps_per_gpu=d.read_target_mbps_per_gpu if target is None else target,
                         bucket_name=bucket, export_timeout_minutes=export_timeout or d.export_timeout_minutes)


def parse_fsx(sec: Section) -> FsxConfig:
    p = sec.problems
    d = FsxConfig()
    kind = sec.enum("deploymentType", FSX_DEPLOYMENT_TYPES, d.deployment_type)
    persistent = kind == "PERSISTENT_2"
    capacity = sec.integer("storageCapacityGiB", d.storage_capacity_gib, minimum=1200, maximum=FSX_MAX_CAPACITY_GIB)
    if capacity is not None and capacity not in (1200, 2400) and capacity % 2400:
        p.bad(sec.key_path("storageCapacityGiB"), capacity, "allowed: 1200, 2400, or a multiple of 2400")
        capacity = None

    throughput = None
    if sec.has("throughputPerTiB") and not persistent:
        p.bad(sec.key_path("throughputPerTiB"), sec.raw["throughputPerTiB"],
              f"applies to PERSISTENT_2 only; {kind} has a fixed 200 MB/s/TiB, remove the key")
        sec.skip("throughputPerTiB")
    elif persistent:
        throughput = sec.integer("throughputPerTiB", 250)
        if throughput is not None and throughput not in FSX_PERSISTENT_2_THROUGHPUT:
            p.bad(sec.key_path("throughputPerTiB"), throughput,
                  f"allowed: {', '.join(map(str, FSX_PERSISTENT_2_THROUGHPUT))} (MB/s/TiB)")
            throughput = None

    efa = sec.boolean("efaEnabled", False)
    if efa and not persistent:
        p.bad(sec.key_path("efaEnabled"), True, f"EFA-enabled FSx needs deploymentType PERSISTENT_2, not {kind}")
    metadata_iops = None
    if sec.has("metadataIops") and not persistent:
        p.bad(sec.key_path("metadataIops"), sec.raw["metadataIops"], "applies to PERSISTENT_2 only")
        sec.skip("metadataIops")
    else:
        metadata_iops = sec.integer("metadataIops")
        if metadata_iops is not None and metadata_iops not in FSX_METADATA_IOPS:
            p.bad(sec.key_path("metadataIops"), metadata_iops,
                  "allowed: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000 (omit for AUTOMATIC)")
            metadata_iops = None

    retention = sec.integer("backupRetentionDays", 0, minimum=0, maximum=90)
    final_backup = sec.boolean("finalBackupOnDelete", False)
    if not persistent:
        if retention:
            p.bad(sec.key_path("backupRetentionDays"), retention, "backups need PERSISTENT_2; use 0 or omit")
        if final_backup:
            p.bad(sec.key_path("finalBackupOnDelete"), True, "backups need PERSISTENT_2; use false or omit")
    sec.finish()
    return FsxConfig(
        deployment_type=kind or d.deployment_type, storage_capacity_gib=capacity or d.storage_capacity_gib,
        throughput_per_tib=throughput, efa_enabled=bool(efa) and persistent, metadata_iops=metadata_iops,
        backup_retention_days=retention or 0, final_backup_on_delete=bool(final_backup) and persistent,
    )
