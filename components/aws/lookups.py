"""What the program asks AWS before it registers anything (invokes only, no resources).

Every answer that can make the config unusable (a zone that does not
offer a pool's type, a Capacity Block in another zone) is turned into
config problems here, so a bad stack stops before the first resource.
The choices themselves are pure functions in components.core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pulumi_aws as aws

from components.core.config import ConfigError, GpuPoolConfig, StackConfig
from components.core.hardware import offerings
from components.core.hardware.zones import Zone, ZonePlan
from components.core.problems import Problem

# `python -m bootstrap destroy` sets it: the program then runs only so that its
# delete hooks can, and a reservation that has ended or an adopted bucket that
# is gone must not keep the stack from being destroyed.
DESTROYING_ENV = "GPUCLUSTER_DESTROYING"


def destroying() -> bool:
    return os.environ.get(DESTROYING_ENV) == "1"


def lookup_zones(cfg: StackConfig) -> ZonePlan:
    """The region's zones (names and IDs) and which offer each pool's types; raises ConfigError.

    While `bootstrap destroy` runs the program, a CPU pool's or Spot fallback type the zone stopped offering
    does not stop the destroy (the GPU pools' own types still choose the zone, as they did at creation).
    """
    result = aws.get_availability_zones(
        state="available",
        # Regular zones only: Local Zones and Wavelength Zones need an opt-in.
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
    )
    available = [Zone(name, zone_id) for name, zone_id in zip(result.names, result.zone_ids)]
    # The GPU pools' types choose the zone; CPU pools' and Spot fallback types are checked against it.
    gpu_types = offerings.gpu_pool_types(cfg.gpu_pools)
    bound = offerings.zone_bound_types(cfg.gpu_pools, cfg.cpu_pools)
    types = sorted({*gpu_types, *(name for _, name in bound)})
    offered: dict[str, set[str]] = {t: set() for t in types}
    if types:
        found = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone",
            filters=[{"name": "instance-type", "values": types}],
        )
        for zone, itype in zip(found.locations, found.instance_types):
            offered.setdefault(itype, set()).add(zone)
    plan, problems = offerings.plan_zones(available, offered, gpu_types, cfg.gpu_availability_zone,
                                          cfg.network.az_count, [] if destroying() else bound)
    if problems:
        raise ConfigError(problems)
    assert plan is not None
    return plan


@dataclass(frozen=True)
class Reservation:
    """What a Capacity Block reserves (ec2.get_capacity_block_reservation)."""

    availability_zone: str
    instance_type: str
    instance_count: int


def lookup_capacity_blocks(cfg: StackConfig) -> dict[str, Reservation]:
    """The Capacity Block of every CAPACITY_BLOCK pool, by pool name.

    pulumi-aws has an invoke for Capacity Blocks only; an On-Demand Capacity
    Reservation has none, so a targeted ODCR is checked by preflight instead.
    """
    out = {}
    if destroying():
        return out
    problems = []
    for pool in cfg.gpu_pools:
        if pool.capacity_type == "CAPACITY_BLOCK":
            try:
                block = aws.ec2.get_capacity_block_reservation(id=pool.capacity_reservation_id)
            except Exception as err:  # the invoke's own error: no such reservation, or access denied
                problems.append(Problem(f"gpucluster:gpuPools[name={pool.name}].capacityReservationId",
                                        f"got {pool.capacity_reservation_id!r}; it cannot be read as a Capacity "
                                        f"Block ({_reason(err)})"))
                continue
            out[pool.name] = Reservation(block.availability_zone, block.instance_type, int(block.instance_count))
    if problems:
        raise ConfigError(problems)
    return out


def _reason(err: Exception) -> str:
    """The last line of an invoke's error: the provider's own words."""
    return str(err).strip().splitlines()[-1]


def reservation_problems(pool: GpuPoolConfig, availability_zone: str, reservation: Reservation) -> list[Problem]:
    """A reservation outside the GPU zone (or for another type) can never launch a node.

    Found before anything registers: otherwise it fails only at scale-up,
    long after `pulumi up` said it succeeded.
    """
    path = f"gpucluster:gpuPools[name={pool.name}].capacityReservationId"
    problems = []
    if reservation.availability_zone != availability_zone:
        problems.append(Problem(path, f"{pool.capacity_reservation_id} is in {reservation.availability_zone}, but "
                                      f"the GPU zone is {availability_zone}; set gpucluster:gpuAvailabilityZone to "
                                      f"{reservation.availability_zone} or use a reservation in {availability_zone}"))
    if reservation.instance_type != pool.instance_type:
        problems.append(Problem(path, f"{pool.capacity_reservation_id} reserves {reservation.instance_type}, "
                                      f"not the pool's {pool.instance_type}"))
    return problems


def log_group_exists(name: str) -> bool:
    """Whether a CloudWatch log group of exactly this name exists (EKS re-creates its own, see Cluster)."""
    result = aws.cloudwatch.get_log_groups(log_group_name_prefix=name)
    return name in (result.log_group_names or [])


@dataclass(frozen=True)
class BucketRef:
    """An existing bucket the stack links to instead of creating one (storage.bucketName)."""

    name: str
    arn: str
    region: str


def lookup_bucket(cfg: StackConfig) -> BucketRef | None:
    """The bucket storage.bucketName names, looked up; raises ConfigError when it cannot be read.

    An invoke, not `Bucket.get`: nothing about the bucket enters the state,
    so no `pulumi destroy` can delete or change it.
    """
    name = cfg.storage.bucket_name
    if name is None:
        return None
    if destroying():
        return BucketRef(name=name, arn=f"arn:{aws.get_partition().partition}:s3:::{name}", region=cfg.region)
    try:
        found = aws.s3.get_bucket(bucket=name)
    except Exception as err:  # the invoke's own error: not found, or access denied
        raise ConfigError([Problem("gpucluster:storage.bucketName", f"got {name!r}; no such bucket is readable by "
                                   f"the deploying identity ({_reason(err)})")]) from None
    return BucketRef(name=found.bucket, arn=found.arn, region=found.bucket_region)
