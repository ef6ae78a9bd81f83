"""Every instance type that launches in the GPU zone, checked against what the zone offers.

The GPU zone is chosen for the GPU pools' `instanceType` (zones.choose_zones).
CPU pools and every Spot pool's `extraInstanceTypes` launch in the same
subnet (one subnet, one zone: EFA does not cross zones, and parameter servers
sit beside their workers), so a type the zone does not offer (EC2
DescribeInstanceTypeOfferings, location type availability-zone) can never
launch a node there. Those types are checked against the zone, never used to
pick it: adding a CPU pool or a Spot fallback type must not move the GPU zone
of a deployed stack, which would replace its GPU subnet, node groups and file
system. Pure: `components.aws.lookups.lookup_zones` and `bootstrap preflight`
ask AWS and call `plan_zones`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from components.core.hardware.zones import GPU_AZ_KEY, ZONE_ID_PATTERN, Zone, ZonePlan, choose_zones
from components.core.problems import ConfigError, Problem


def gpu_pool_types(gpu_pools: Iterable[Any]) -> list[str]:
    """The types that choose the GPU zone: each GPU pool's instanceType."""
    return sorted({pool.instance_type for pool in gpu_pools})


def zone_bound_types(gpu_pools: Sequence[Any], cpu_pools: Sequence[Any]) -> list[tuple[str, str]]:
    """(key path, type) of every other type that launches in the GPU zone: CPU pools' instanceType and every
    pool's extraInstanceTypes."""
    bound = []
    for section, pools in (("gpuPools", gpu_pools), ("cpuPools", cpu_pools)):
        for i, pool in enumerate(pools):
            if section == "cpuPools":
                bound.append((f"gpucluster:{section}[{i}].instanceType", pool.instance_type))
            bound += [(f"gpucluster:{section}[{i}].extraInstanceTypes[{j}]", name)
                      for j, name in enumerate(pool.extra_instance_types)]
    return bound


def plan_zones(available: list[Zone], offered: dict[str, set[str]], gpu_types: list[str], requested: str | None,
               count: int, bound: list[tuple[str, str]]) -> tuple[ZonePlan | None, list[Problem]]:
    """The zone plan (None when there is none) and every problem: the GPU pools' (choose_zones) and each bound
    type the GPU zone does not offer, reported with its key path.

    `offered` maps every type (GPU pools' and bound ones) to the zone names offering it. When the zone choice
    itself fails, the bound types are still checked against a requested zone that exists.
    """
    plan, problems = None, []
    try:
        plan = choose_zones(available, {t: offered.get(t, set()) for t in gpu_types}, requested, count)
        gpu = next(z for z in available if z.name == plan.gpu_zone)
    except ConfigError as err:
        problems += err.problems
        gpu = _requested(available, requested)
    if gpu is not None:
        problems += _bound_problems(gpu, available, offered, gpu_types, bound)
    return plan, problems


def _requested(available: list[Zone], requested: str | None) -> Zone | None:
    if requested is None:
        return None
    key = "zone_id" if re.fullmatch(ZONE_ID_PATTERN, requested) else "name"
    return next((z for z in available if getattr(z, key) == requested), None)


def _bound_problems(gpu: Zone, available: list[Zone], offered: dict[str, set[str]], gpu_types: list[str],
                    bound: list[tuple[str, str]]) -> list[Problem]:
    missing = [(path, name) for path, name in bound if gpu.name not in offered.get(name, set())]
    if not missing:
        return []
    every = [z for z in available
             if all(z.name in offered.get(t, set()) for t in {*gpu_types, *(name for _, name in bound)})]
    if every:
        fix = (f"set {GPU_AZ_KEY} to a zone offering every pool's type ({', '.join(map(str, every))}; on a deployed "
               f"stack that replaces the GPU pools and the file system), or pick a type {gpu.name} offers")
    else:
        fix = f"no zone offers every pool's type: pick a type {gpu.name} offers"
    problems = []
    for path, name in missing:
        zones = ", ".join(str(z) for z in available if z.name in offered.get(name, set())) or "none"
        problems.append(Problem(path, f"got {name!r}, which the GPU zone {gpu} does not offer (every pool launches "
                                      f"in the GPU zone); zones offering it: {zones}; {fix}"))
    return problems
