"""FSx for Lustre facts as data: S3 links, security group rules, throughput.

Pure functions, no Pulumi: the Storage component applies them, the offline
plan (`throughput_warning`) and the tests read them directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.spec.config import FSX_GIB_PER_TIB, FSX_PERSISTENT_2_THROUGHPUT, FsxConfig, StorageConfig

# FSx Lustre User Guide, "Linking your file system to an Amazon S3 bucket":
# a data repository association can import and export every kind of change.
DRA_EVENTS = ("NEW", "CHANGED", "DELETED")
# FSx API Reference, CreateFileSystemLustreConfiguration.AutoImportPolicy
# (the legacy, non-DRA link used on SCRATCH_2).
SCRATCH_AUTO_IMPORT_POLICY = "NEW_CHANGED_DELETED"

# FSx Lustre User Guide, "File system access control with Amazon VPC":
# Lustre (LNET) traffic on TCP 988 and 1018-1023, between clients and the
# file system and among the file servers themselves.
LUSTRE_TCP_PORTS = ((988, 988), (1018, 1023))

# FSx Lustre User Guide, "Managing storage capacity": 1,200, 2,400, then
# multiples of 2,400 GiB (SCRATCH_2 and PERSISTENT_2 SSD).
_CAPACITY_STEP_GIB = 2400


@dataclass(frozen=True)
class RepositoryLink:
    """One S3 prefix linked to one file system directory."""

    role: str  # "datasets" | "checkpoints"
    prefix: str  # S3 key prefix, e.g. "datasets/"
    file_system_path: str  # e.g. "/datasets"
    batch_import: bool  # import existing objects' metadata when the link is made


def file_system_path(prefix: str) -> str:
    """The directory an S3 prefix appears under: "datasets/" -> "/datasets".

    The same layout on both deployment types, so a job reads
    <mount>/datasets whether the stack runs SCRATCH_2 or PERSISTENT_2.
    """
    return "/" + prefix.rstrip("/")


def repository_links(storage: StorageConfig) -> tuple[RepositoryLink, ...]:
    """The data repository associations of a PERSISTENT_2 file system.

    Both import existing metadata on creation: the datasets to train on and
    the checkpoints to resume from (after a destroy/up cycle the retained
    bucket still holds them; a fresh file system would show an empty
    directory otherwise).
    """
    return (
        RepositoryLink("datasets", storage.dataset_prefix, file_system_path(storage.dataset_prefix), True),
        RepositoryLink("checkpoints", storage.checkpoint_prefix, file_system_path(storage.checkpoint_prefix), True),
    )


def s3_url(bucket: str, prefix: str = "") -> str:
    return f"s3://{bucket}/{prefix}"


def scratch_paths(bucket: str) -> tuple[str, str]:
    """(import_path, export_path) for the legacy S3 link of SCRATCH_2.

    The legacy link maps the file system root to one import prefix and the
    root to one export prefix; the export path must be in the import path's
    bucket (FSx API Reference, CreateFileSystemLustreConfiguration.ExportPath),
    but need not be under it. Importing datasets/ and exporting to
    checkpoints/ would put the dataset files at the root in dev but under
    /datasets in prod, and a new scratch file system would never see old
    checkpoints. Linking the bucket root both ways (a 1:1 mapping) gives
    the DRA layout of PERSISTENT_2: /datasets and /checkpoints mirror their
    prefixes, and changed files are written back in place, as auto-export
    does there.
    """
    return s3_url(bucket), s3_url(bucket)


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
