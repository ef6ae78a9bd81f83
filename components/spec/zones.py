"""Choosing the availability zones: one GPU zone plus enough for EKS.

EFA does not cross zones, so every GPU pool and the file system live in a
single zone. `choose_zones` is pure; `lookup_zones` asks AWS which zones
exist and which offer each pool's instance type.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.spec.config import StackConfig
from components.spec.validation import ConfigError, Problem

GPU_AZ_KEY = "gpucluster:gpuAvailabilityZone"


@dataclass(frozen=True)
class ZonePlan:
    gpu_zone: str
    zones: tuple[str, ...]  # the GPU zone first


def choose_zones(available: list[str], offered: dict[str, set[str]], requested: str | None,
                 count: int) -> ZonePlan:
    """Pick the GPU zone (requested, else the first offering every type) and `count` zones.

    `offered` maps each GPU instance type to the zones that offer it.
    """
    problems = []
    if count > len(available):
        problems.append(Problem("gpucluster:network.azCount",
                                f"got {count}; the region has {len(available)} zones: {', '.join(available)}"))
    if requested is not None:
        if requested not in available:
            problems.append(Problem(GPU_AZ_KEY, f"got {requested!r}; available zones: {', '.join(available)}"))
        for itype, zones in sorted(offered.items()):
            if requested in available and requested not in zones:
                problems.append(Problem(GPU_AZ_KEY, f"got {requested!r}, which does not offer {itype}; "
                                                    f"zones offering it: {', '.join(sorted(zones)) or 'none'}"))
        gpu_zone = requested
    else:
        common = [z for z in available if all(z in zones for zones in offered.values())]
        if not common:
            detail = "; ".join(f"{t}: {', '.join(sorted(z)) or 'none'}" for t, z in sorted(offered.items()))
            problems.append(Problem(GPU_AZ_KEY, f"no zone of the region offers every GPU pool's type ({detail}); "
                                                "split the pools across stacks or change a type"))
            gpu_zone = available[0] if available else ""
        else:
            gpu_zone = common[0]
    if problems:
        raise ConfigError(problems)
    rest = [z for z in available if z != gpu_zone]
    return ZonePlan(gpu_zone=gpu_zone, zones=(gpu_zone, *rest[: count - 1]))


def lookup_zones(cfg: StackConfig) -> ZonePlan:
    """Ask AWS (invokes, no resources) and choose; raises ConfigError."""
    import pulumi_aws as aws

    available = aws.get_availability_zones(
        state="available",
        filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
    ).names
    types = sorted({p.instance_type for p in cfg.gpu_pools})
    offered: dict[str, set[str]] = {t: set() for t in types}
    if types:
        result = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone",
            filters=[{"name": "instance-type", "values": types}],
        )
        for zone, itype in zip(result.locations, result.instance_types):
            offered.setdefault(itype, set()).add(zone)
    return choose_zones(list(available), offered, cfg.gpu_availability_zone, cfg.network.az_count)
