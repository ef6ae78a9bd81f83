"""FSx for Lustre facts as data: S3 links, security group rules, throughput.

Pure functions, no Pulumi: the Storage component applies them, the offline
plan (`throughput_warning`) and the tests read them directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.core.config import FSX_GIB_PER_TIB, FSX_PERSISTENT_2_THROUGHPUT, FsxConfig, StorageConfig

# FSx Lustre User Guide, "Linking your file system to an Amazon S3 bucket":
# a data repository association can import and export every kind of change.
DRA_EVENTS = ("NEW", "CHANGED", "DELETED")

# FSx Lustre User Guide, "Lustre file system provisioning": about 10 minutes for
# the file system and up to about 7 more for an S3 data repository association
# (FACTS.md "Provisioning times"). Associations of one file system are made one
# at a time: two at once fail (terraform-provider-aws #24678).
FILE_SYSTEM_MINUTES = 10
ASSOCIATION_MINUTES = 7

# FSx Lustre User Guide, "File system access control with Amazon VPC":
# Lustre (LNET) traffic on TCP 988 and 1018-1023, between clients and the
# file system and among the file servers themselves.
LUSTRE_TCP_PORTS = ((988, 988), (1018, 1023))

# FSx Lustre User Guide, "Managing storage capacity": 1,200, 2,400, then
# multiples of 2,400 GiB (SCRATCH_2 and PERSISTENT_2 SSD).
_CAPACITY_STEP_GIB = 2400


@dataclass(frozen=True)
class BucketLink:
    """The one data repository association: the whole bucket at the file system's root.

    One association, not one per prefix: associations of a file system are
    created one after another (a second one at the same time fails, and
    each takes minutes), and an association at `/` must be the file
    system's only one (CreateDataRepositoryAssociation, FileSystemPath). So
    s3://<bucket>/datasets/x is <mount>/datasets/x and checkpoints written
    to <mount>/checkpoints land in s3://<bucket>/checkpoints/, on SCRATCH_2
    and PERSISTENT_2 alike (associations work on Lustre 2.12/2.15 file
    systems of every deployment type but SCRATCH_1, with automatic export;
    the legacy import/export path of SCRATCH_2 exports nothing by itself).
    """

    file_system_path: str = "/"
    # Import the metadata of what the bucket holds when the link is made: the
    # datasets to train on and the checkpoints a previous stack left.
    batch_import: bool = True

    @staticmethod
    def data_repository_path(bucket: str) -> str:
        return s3_url(bucket)


def directory(prefix: str) -> str:
    """Where an S3 prefix appears under the mount: "datasets/" -> "/datasets"."""
    return "/" + prefix.rstrip("/")


def s3_url(bucket: str, prefix: str = "") -> str:
    return f"s3://{bucket}/{prefix}"


def time_to_ready_minutes(storage: StorageConfig) -> int:
    """Minutes until the file system and its S3 link are usable (the link waits for the file system)."""
    return FILE_SYSTEM_MINUTES + (ASSOCIATION_MINUTES if storage.s3_link else 0)


@dataclass(frozen=True)
class SgRule:
    """A rule on one security group towards one peer group."""

    direction: str  # "ingress" | "egress"
    protocol: str  # "tcp" | "-1" (all)
    from_port: int | None
    to_port: int | None
    description: str

    @property
    def slug(self) -> str:
        if self.protocol == "-1":
            return f"{self.direction}-all"
        ports = str(self.from_port) if self.from_port == self.to_port else f"{self.from_port}-{self.to_port}"
        return f"{self.direction}-{self.protocol}-{ports}"


def _lustre(direction: str) -> list[SgRule]:
    verb = "from" if direction == "ingress" else "to"
    return [SgRule(direction, "tcp", lo, hi, f"Lustre LNET {verb} peer") for lo, hi in LUSTRE_TCP_PORTS]


def _all(direction: str) -> SgRule:
    verb = "from" if direction == "ingress" else "to"
    return SgRule(direction, "-1", None, None, f"EFA: all traffic {verb} peer")


def file_system_rules(efa_enabled: bool) -> tuple[SgRule, ...]:
    """Rules on the file system's group, applied once towards itself and once per client group.

    Egress is explicit because the provider deletes a new group's default
    allow-all egress. EFA-enabled file systems need all traffic to and from
    their own group and the clients' (FSx Lustre User Guide, "EFA-enabled
    security groups"; creation fails otherwise, see "Creating an FSx for
    Lustre file system fails").
    """
    rules = _lustre("ingress") + _lustre("egress")
    if efa_enabled:
        rules += [_all("ingress"), _all("egress")]
    return tuple(rules)


def client_rules(efa_enabled: bool) -> tuple[SgRule, ...]:
    """Ingress rules on each client group from the file system's group.

    "Lustre client VPC security group rules" in the same guide: clients
    admit the file servers on the Lustre ports. Client egress is left to
    the client group (the GPU node group allows all outbound), because
    adding egress rules to a group with inline egress makes the two fight.
    """
    rules = _lustre("ingress")
    if efa_enabled:
        rules.append(_all("ingress"))
    return tuple(rules)


def throughput_warning(fsx: FsxConfig, gpus: int, target_mbps_per_gpu: float) -> str | None:
    """A sentence when the file system cannot feed `gpus` at the target read rate, else None."""
    need = gpus * target_mbps_per_gpu
    have = fsx.aggregate_throughput_mbps
    if gpus <= 0 or need <= have:
        return None
    per_tib = have / (fsx.storage_capacity_gib / FSX_GIB_PER_TIB)
    capacity = _capacity_for(need, per_tib)
    advice = f"raise storageCapacityGiB to {capacity}"
    if fsx.deployment_type == "PERSISTENT_2":
        tier = next((t for t in FSX_PERSISTENT_2_THROUGHPUT if fsx.storage_capacity_gib / FSX_GIB_PER_TIB * t >= need), None)
        if tier is not None:
            advice = f"raise throughputPerTiB to {tier} or storageCapacityGiB to {capacity}"
    return (f"FSx {fsx.deployment_type} {fsx.storage_capacity_gib} GiB reads {have:,.0f} MB/s, below the "
            f"{need:,.0f} MB/s that {gpus} GPUs x {target_mbps_per_gpu:g} MB/s need; {advice}")


def _capacity_for(need_mbps: float, per_tib: float) -> int:
    """The smallest allowed capacity (GiB) that reaches `need_mbps` at `per_tib` MB/s/TiB."""
    gib = need_mbps / per_tib * FSX_GIB_PER_TIB
    if gib <= 1200:
        return 1200
    return max(2400, math.ceil(gib / _CAPACITY_STEP_GIB) * _CAPACITY_STEP_GIB)


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
