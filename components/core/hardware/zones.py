"""Choosing the availability zones: one GPU zone, and the zones of the cluster's subnets.

EFA does not cross zones, so every GPU pool and the file system live in a
single zone. Zone *names* map to physical zones differently in every
account; zone *IDs* do not, and EKS refuses some IDs for the cluster's
subnets. Pure: `components.aws.lookups.lookup_zones` asks AWS and calls
`choose_zones`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.problems import ConfigError, Problem

GPU_AZ_KEY = "gpucluster:gpuAvailabilityZone"
AZ_COUNT_KEY = "gpucluster:network.azCount"

# EKS User Guide, "View Amazon EKS networking requirements for VPC and
# subnets" (network-reqs): CreateCluster fails for subnets in these zone IDs
# ("UnsupportedAvailabilityZoneException"). Nodes may still run there.
EKS_UNSUPPORTED_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})

ZONE_ID_PATTERN = r"[a-z]{2,4}\d-az\d+"  # use1-az6, apne1-az4, usgw1-az1


@dataclass(frozen=True)
class Zone:
    name: str  # us-east-1a: this account's label
    zone_id: str  # use1-az6: the physical zone, the same in every account

    @property
    def eks_supported(self) -> bool:
        return self.zone_id not in EKS_UNSUPPORTED_ZONE_IDS

    def __str__(self) -> str:
        return f"{self.name} ({self.zone_id})"


@dataclass(frozen=True)
class ZonePlan:
    gpu_zone: str
    # Every zone that gets subnets, the GPU zone first.
    zones: tuple[str, ...]
    # The zones of the subnets handed to EKS (control plane and system nodes):
    # never a zone ID that EKS refuses. The GPU zone is among them unless EKS refuses it.
    cluster_zones: tuple[str, ...]
    zone_ids: dict[str, str]  # name -> ID, for every zone in `zones`

    def describe(self) -> list[dict[str, object]]:
        """Each zone with its ID and what it holds (for the plan)."""
        return [{"name": z, "zoneId": self.zone_ids[z], "gpu": z == self.gpu_zone,
                 "cluster": z in self.cluster_zones} for z in self.zones]


def _resolve(requested: str, available: list[Zone]) -> Zone | None:
    """A zone given by name (us-east-1a) or by ID (use1-az6)."""
    key = "zone_id" if re.fullmatch(ZONE_ID_PATTERN, requested) else "name"
    return next((z for z in available if getattr(z, key) == requested), None)


def choose_zones(available: list[Zone], offered: dict[str, set[str]], requested: str | None,
                 count: int) -> ZonePlan:
    """The GPU zone (requested, else the first offering every pool's type) and `count` cluster zones.

    `offered` maps each GPU instance type to the zone names that offer it.
    A GPU zone whose ID EKS refuses still gets the GPU subnets, but the
    cluster's subnets are `count` other zones.
    """
    problems = []
    supported = [z for z in available if z.eks_supported]
    refused = [z for z in available if not z.eks_supported]
    if count > len(supported):
        note = f"; EKS refuses {', '.join(map(str, refused))}" if refused else ""
        problems.append(Problem(AZ_COUNT_KEY, f"got {count}; the region has {len(supported)} zones EKS accepts: "
                                              f"{', '.join(map(str, supported))}{note}"))
    gpu: Zone | None = None
    if requested is not None:
        gpu = _resolve(requested, available)
        if gpu is None:
            problems.append(Problem(GPU_AZ_KEY, f"got {requested!r}; available zones: "
                                                f"{', '.join(map(str, available))}"))
        else:
            other = gpu.zone_id if requested == gpu.name else gpu.name
            for itype, zones in sorted(offered.items()):
                if gpu.name not in zones:
                    problems.append(Problem(GPU_AZ_KEY, f"got {requested!r} ({other}), which does not offer {itype}; "
                                                        f"zones offering it: {_names(available, zones)}"))
    else:
        common = [z for z in available if all(z.name in zones for zones in offered.values())]
        # A zone EKS accepts saves a subnet pair; a refused one still serves GPUs.
        common.sort(key=lambda z: not z.eks_supported)
        if not common:
            detail = "; ".join(f"{t}: {_names(available, z)}" for t, z in sorted(offered.items()))
            problems.append(Problem(GPU_AZ_KEY, f"no zone of the region offers every GPU pool's type ({detail}); "
                                                "split the pools across stacks or change a type"))
        else:
            gpu = common[0]
    if problems:
        raise ConfigError(problems)
    assert gpu is not None
    cluster = ([gpu] if gpu.eks_supported else []) + [z for z in supported if z != gpu]
    cluster = cluster[:count]
    zones = [gpu, *(z for z in cluster if z != gpu)]
    return ZonePlan(gpu_zone=gpu.name, zones=tuple(z.name for z in zones),
                    cluster_zones=tuple(z.name for z in cluster), zone_ids={z.name: z.zone_id for z in zones})


def _names(available: list[Zone], names: set[str]) -> str:
    return ", ".join(str(z) for z in available if z.name in names) or "none"
