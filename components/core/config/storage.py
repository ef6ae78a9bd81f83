"""gpucluster:storage: the bucket's prefixes, the S3 link and the FSx for Lustre file system."""

from typing import Annotated, Any

from pydantic import Field, model_validator

from components.core.config.base import Bool, Checked, Choice, Int, Model, Number, Text, given, or_engine_int, rule
from components.core.config.describe import DefaultText
from components.core.config.text.patterns import BUCKET_NAME
from components.core.config.values import BUCKET_NAME_ALLOWED, S3_PREFIX, bucket_name_problem
from components.core.problems import show

# FSx for Lustre User Guide, "Managing storage capacity" and "Throughput".
FSX_DEPLOYMENT_TYPES = ("SCRATCH_2", "PERSISTENT_2")
FSX_PERSISTENT_2_THROUGHPUT = (125, 250, 500, 1000)
FSX_PERSISTENT_2_DEFAULT_THROUGHPUT = 250
FSX_SCRATCH_2_THROUGHPUT = 200
FSX_MAX_CAPACITY_GIB = 2_400 * 1_000
FSX_CAPACITIES = (1200, *range(2400, FSX_MAX_CAPACITY_GIB + 1, 2400))
# FSx counts 1,200 GiB as 1.2 TiB when it quotes throughput per TiB.
FSX_GIB_PER_TIB = 1000
# Metadata IOPS for USER_PROVISIONED mode (FSx Lustre User Guide,
# "Lustre metadata performance configuration").
FSX_METADATA_IOPS = (1500, 3000, 6000, 12000) + tuple(range(24000, 192001, 12000))

# storage.exportTimeoutMinutes: how long destroy waits for the export to S3
# before it gives up and keeps the file system.
EXPORT_TIMEOUT_DEFAULT_MINUTES = 60
EXPORT_TIMEOUT_MAX_MINUTES = 24 * 60


def _capacity_problem(gib: int) -> str | None:
    return None if gib in FSX_CAPACITIES else "allowed: 1200, 2400, or a multiple of 2400"


def _throughput_problem(value: int) -> str | None:
    if value in FSX_PERSISTENT_2_THROUGHPUT:
        return None
    return f"allowed: {', '.join(map(str, FSX_PERSISTENT_2_THROUGHPUT))} (MB/s/TiB)"


def _metadata_iops_problem(value: int) -> str | None:
    if value in FSX_METADATA_IOPS:
        return None
    return "allowed: 1500, 3000, 6000, 12000 or a multiple of 12000 up to 192000 (omit for AUTOMATIC)"


S3Prefix = Text(S3_PREFIX, "an S3 key prefix such as datasets/ (no leading /, ending in /)",
                short="S3 key prefix ending in `/`")


class FsxConfig(Model):
    """The FSx for Lustre file system in the GPU zone."""

    deployment_type: Choice(*FSX_DEPLOYMENT_TYPES) = Field("SCRATCH_2", description="FSx for Lustre deployment type")
    storage_capacity_gib: Checked(Int(ge=1200, le=FSX_MAX_CAPACITY_GIB), _capacity_problem,
                                  short="1200, 2400 or n x 2400", json_schema=or_engine_int({
                                      "type": "integer", "maximum": FSX_MAX_CAPACITY_GIB,
                                      "anyOf": [{"enum": [1200]}, {"multipleOf": 2400, "minimum": 2400}]},
                                      FSX_CAPACITIES)) = Field(
        1200, description="capacity")
    throughput_per_tib: Annotated[
        Checked(Int(), _throughput_problem, short="125 \\| 250 \\| 500 \\| 1000",
                json_schema=or_engine_int({"enum": list(FSX_PERSISTENT_2_THROUGHPUT)}, FSX_PERSISTENT_2_THROUGHPUT)) | None,
        DefaultText(f"`{FSX_PERSISTENT_2_DEFAULT_THROUGHPUT}` (PERSISTENT_2 only)")] = Field(
        None, description="MB/s per TiB, `deploymentType` PERSISTENT_2 only (SCRATCH_2 has 200); aggregate = capacity "
                          "x tier")
    efa_enabled: Bool = Field(False, description="EFA-enabled file system (`deploymentType` PERSISTENT_2 only)")
    metadata_iops: Annotated[
        Checked(Int(), _metadata_iops_problem, short="1500, 3000, 6000, 12000, n x 12000 <= 192000",
                json_schema=or_engine_int({"enum": list(FSX_METADATA_IOPS)}, FSX_METADATA_IOPS)) | None,
        DefaultText("AUTOMATIC")] = Field(
        None, description="user-provisioned metadata IOPS (`deploymentType` PERSISTENT_2 only)")
    backup_retention_days: Int(ge=0, le=90) = Field(
        0, description="automatic daily backups (`deploymentType` PERSISTENT_2 with `s3Link: false`)")
    final_backup_on_delete: Bool = Field(
        False, description="a final backup when the file system is deleted (`deploymentType` PERSISTENT_2 with "
                           "`s3Link: false`)")

    @model_validator(mode="before")
    @classmethod
    def _persistent_throughput(cls, data: Any) -> Any:
        # PERSISTENT_2 has a throughput tier; 250 MB/s/TiB unless the stack names one.
        if (isinstance(data, dict) and given(data, cls, "deployment_type") == "PERSISTENT_2"
                and given(data, cls, "throughput_per_tib") is None):
            return {**data, "throughputPerTiB": FSX_PERSISTENT_2_DEFAULT_THROUGHPUT}
        return data

    @property
    def persistent(self) -> bool:
        return self.deployment_type == "PERSISTENT_2"

    @property
    def aggregate_throughput_mbps(self) -> float:
        """Capacity (TiB) x per-unit throughput; SCRATCH_2 is 200 MB/s/TiB.

        FSx counts 1,200 GiB as 1.2 TiB (FSx Lustre User Guide, "Amazon FSx for
        Lustre performance": 1.2 TiB SCRATCH_2 gives 240 MB/s), so TiB = GiB / 1000.
        """
        per_tib = self.throughput_per_tib if self.throughput_per_tib is not None else FSX_SCRATCH_2_THROUGHPUT
        return self.storage_capacity_gib / FSX_GIB_PER_TIB * per_tib

    @rule("deployment_type", "throughput_per_tib", "efa_enabled", "metadata_iops", "backup_retention_days",
          "final_backup_on_delete")
    def _persistent_only(self):
        if self.persistent:
            return
        kind = self.deployment_type
        if self.throughput_per_tib is not None:
            yield "throughputPerTiB", (f"got {self.throughput_per_tib}; applies to PERSISTENT_2 only; {kind} has a "
                                       f"fixed {FSX_SCRATCH_2_THROUGHPUT} MB/s/TiB, remove the key")
        if self.efa_enabled:
            yield "efaEnabled", f"got true; EFA-enabled FSx needs deploymentType PERSISTENT_2, not {kind}"
        if self.metadata_iops is not None:
            yield "metadataIops", f"got {self.metadata_iops}; applies to PERSISTENT_2 only"
        if self.backup_retention_days:
            yield "backupRetentionDays", f"got {self.backup_retention_days}; backups need PERSISTENT_2; use 0 or omit"
        if self.final_backup_on_delete:
            yield "finalBackupOnDelete", "got true; backups need PERSISTENT_2; use false or omit"


class StorageConfig(Model):
    """The data bucket and its link to the file system."""

    fsx: FsxConfig = Field(default_factory=FsxConfig, description="the file system")
    dataset_prefix: S3Prefix = Field("datasets/", description="where datasets live in the bucket; appears at "
                                                              "`<mount>/datasets` (jobs get `GPUCLUSTER_DATASET_DIR`)")
    checkpoint_prefix: S3Prefix = Field(
        "checkpoints/", description="where checkpoints live; `<mount>/checkpoints` (`GPUCLUSTER_CHECKPOINT_DIR`); must "
                                    "not overlap `datasetPrefix`")
    retain_on_destroy: Bool = Field(
        True, description="keep the bucket, with every object, on destroy; `false` deletes it (and, with `bootstrap "
                          "destroy --delete-bucket-data`, what it holds); not with `bucketName`")
    read_target_mbps_per_gpu: Number(ge=0) = Field(
        100.0, description="the plan warns when FSx throughput per GPU at max scale is below this")
    s3_link: Bool = Field(
        True, description="link the file system to the bucket: one data repository association, the bucket at `/`, "
                          "with automatic import and export of new, changed and deleted files (both deployment types, "
                          "Lustre 2.15; ~7 min after the file system). FSx cannot back up S3-linked file systems, so "
                          "backups need `s3Link: false`; `teams` need `true` (each team's directory is its prefix)")
    # An existing bucket to use instead of creating one (the one a previous
    # destroy kept): the stack neither creates nor deletes it.
    bucket_name: Text(allowed=BUCKET_NAME_ALLOWED, short="S3 bucket name", check=bucket_name_problem,
                      json_pattern=BUCKET_NAME) | None = Field(
        None, description="link this existing bucket (the one a previous destroy kept) instead of creating one: looked "
                          "up, never created or deleted by the stack (`bootstrap destroy` prints the line that sets it)")
    export_timeout_minutes: Int(ge=5, le=EXPORT_TIMEOUT_MAX_MINUTES) = Field(
        EXPORT_TIMEOUT_DEFAULT_MINUTES,
        description="on destroy (or when the link is replaced), how long the export of the file system to S3 may take "
                    "before it is cancelled and the delete fails, keeping the data")

    @property
    def adopts_bucket(self) -> bool:
        return self.bucket_name is not None

    @rule("dataset_prefix", "checkpoint_prefix")
    def _prefixes(self):
        dataset, checkpoint = self.dataset_prefix, self.checkpoint_prefix
        if dataset.startswith(checkpoint) or checkpoint.startswith(dataset):
            yield "checkpointPrefix", (f"got {show(checkpoint)}; must not overlap datasetPrefix {dataset!r} "
                                       "(one S3 link each)")

    @rule("bucket_name", "retain_on_destroy")
    def _adopted_bucket(self):
        if self.bucket_name is not None and self.retain_on_destroy is False:
            # The stack never deletes a bucket it did not create.
            yield "retainOnDestroy", ("got false; does not apply with storage.bucketName: an adopted bucket is never "
                                      "deleted by the stack; remove retainOnDestroy (or bucketName, to let the stack "
                                      "create and delete its own bucket)")

    @rule("fsx", "s3_link")
    def _backups(self):
        if self.s3_link and (self.fsx.backup_retention_days or self.fsx.final_backup_on_delete):
            # FSx Lustre User Guide, "Working with backups": backups are for persistent
            # file systems not linked to an S3 data repository; S3 is the durable copy.
            key = "backupRetentionDays" if self.fsx.backup_retention_days else "finalBackupOnDelete"
            yield f"fsx.{key}", ("FSx cannot back up a file system linked to S3 (the versioned bucket is the durable "
                                 "copy); remove the backup settings or set storage.s3Link: false")

