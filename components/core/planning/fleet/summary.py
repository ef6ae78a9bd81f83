"""The plan's `fleet` key (pure): the manager's workers, their pools and the fleet's cost; a worker's manager.

The cost of each stack is the stack's own estimate (components.core.planning.cost.estimate, as its plan
gives it); the fleet's is their sum: the manager and every worker, at minimum and at maximum scale.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from components.core.config import StackConfig
from components.core.config.cluster import DISPATCHER_NAMES
from components.core.planning import cost
from components.core.planning.fleet.transfer import data_plan


class Member(Protocol):
    """A worker as components.core.fleet.workers.FleetMember gives it."""

    reference: str
    name: str
    cluster: str
    config: StackConfig


def _pools(cfg: StackConfig) -> list[dict[str, Any]]:
    return [{"name": p.name, "instanceType": p.instance_type, "gpuModel": p.instance.gpu_model,
             "gpusPerNode": p.instance.gpu_count, "minNodes": p.min_nodes, "maxNodes": p.max_nodes,
             "capacityType": p.capacity_type} for p in cfg.gpu_pools]


def _cost_row(stack: str, role: str, cfg: StackConfig, per_hour: tuple[float, float] | None = None) -> dict[str, Any]:
    if per_hour is None:
        estimate = cost.estimate(cfg)
        per_hour = (estimate.min_per_hour, estimate.max_per_hour)
    return {"stack": stack, "role": role, "region": cfg.region, "minPerHour": per_hour[0], "maxPerHour": per_hour[1]}


def manager_plan(cfg: StackConfig, members: Sequence[Member],
                 own_per_hour: tuple[float, float] | None = None) -> dict[str, Any]:
    """`own_per_hour`: the manager's own estimate as its plan has it (default: cost.estimate of cfg)."""
    fleet = cfg.fleet
    workers = []
    for m in members:
        pools = _pools(m.config)
        workers.append({"stack": m.name, "reference": m.reference, "cluster": m.cluster, "region": m.config.region,
                        "paused": m.config.paused, "pools": pools,
                        "gpusMax": sum(p["gpusPerNode"] * p["maxNodes"] for p in pools)})
    gpus: Counter[str] = Counter()
    for w in workers:
        for p in w["pools"]:
            gpus[p["gpuModel"]] += p["gpusPerNode"] * p["maxNodes"]
    rows = [_cost_row(cfg.stack, "manager", cfg, own_per_hour)]
    rows += [_cost_row(m.name, "worker", m.config) for m in members]
    low = round(sum(r["minPerHour"] for r in rows), 4)
    high = round(sum(r["maxPerHour"] for r in rows), 4)
    return {
        "role": "manager", "dispatcher": fleet.dispatcher, "dispatcherName": DISPATCHER_NAMES[fleet.dispatcher],
        "workerLostMinutes": fleet.worker_lost_minutes, "tokenRotationHours": fleet.token_rotation_hours,
        "workers": workers, "gpusMax": dict(sorted(gpus.items())),
        "cost": {"stacks": rows, "minPerHour": low, "maxPerHour": high, "hoursPerMonth": cost.HOURS_PER_MONTH,
                 "minPerMonth": round(low * cost.HOURS_PER_MONTH, 2), "maxPerMonth": round(high * cost.HOURS_PER_MONTH, 2),
                 "notIncluded": list(cost.NOT_INCLUDED)},
        "data": data_plan(cfg, [(m.name, m.config) for m in members]),
    }


def worker_plan(cfg: StackConfig, listed: bool | None) -> dict[str, Any]:
    """`listed`: whether the manager's stack file lists this stack among its workers (None: not read here)."""
    return {"role": "worker", "manager": cfg.fleet.manager, "listedByManager": listed,
            "submit": f"python -m bootstrap submit --stack {cfg.stack} --fleet <job>",
            "submittable": [j.name for j in cfg.jobs if not j.start_on_up]}


def plan(cfg: StackConfig, members: Sequence[Member] = (), listed: bool | None = None,
         own_per_hour: tuple[float, float] | None = None) -> dict[str, Any] | None:
    """The report's `fleet`: None for a stack in no fleet (its plan stays as it was)."""
    if cfg.fleet is None:
        return None
    if cfg.fleet.role == "worker":
        return worker_plan(cfg, listed)
    return manager_plan(cfg, members, own_per_hour)
