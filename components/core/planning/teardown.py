"""When a job's nodes stop billing: its run deadline, its worst-case cost, the idle tail (pure).

A job ends at the earliest of its own end, `runPolicy.activeDeadlineSeconds`
and the deadline `maxCostUsd` buys (nodes x the pool's hourly price); its
pods are then cleaned up and its pool's idle nodes are removed after
`idleMinutes` (removal_minutes below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.core.config import CpuPoolConfig, GpuPoolConfig, JobConfig, StackConfig
from components.core.hardware import catalog

# A cost bound that buys less than this is a mistake, not a bound.
MIN_DEADLINE_SECONDS = 600


def job_price_per_hour(job: JobConfig, pool: GpuPoolConfig, prices: dict[str, float] | None = None,
                       ps_pool: CpuPoolConfig | None = None) -> float:
    """Its GPU nodes, and for a parameter-server job its parameter servers' CPU nodes too."""
    price = job.nodes * catalog.price(pool.instance_type, prices)
    if ps_pool is not None:
        price += job.ps_replicas * catalog.price(ps_pool.instance_type, prices)
    return price


def cost_deadline_seconds(job: JobConfig, pool: GpuPoolConfig, prices: dict[str, float] | None = None,
                          ps_pool: CpuPoolConfig | None = None) -> int | None:
    """The run time `maxCostUsd` buys, in whole seconds (None without a bound)."""
    if job.max_cost_usd is None:
        return None
    return math.floor(job.max_cost_usd / job_price_per_hour(job, pool, prices, ps_pool) * 3600)


def deadline_seconds(job: JobConfig, pool: GpuPoolConfig, prices: dict[str, float] | None = None,
                     ps_pool: CpuPoolConfig | None = None) -> int | None:
    """The earliest of activeDeadlineSeconds and the cost bound's deadline; None: no deadline."""
    found = [s for s in (job.run_policy.active_deadline_seconds, cost_deadline_seconds(job, pool, prices, ps_pool))
             if s is not None]
    return min(found) if found else None


@dataclass(frozen=True)
class Teardown:
    """What the plan says of a job's end."""

    deadline_seconds: int | None
    deadline_from: str | None  # "activeDeadlineSeconds" | "maxCostUsd" | None
    worst_case_cost_usd: float | None  # None: unbounded (no deadline)
    idle_removal_minutes: int
    clean_pod_policy: str

    def to_dict(self) -> dict:
        return {"deadlineSeconds": self.deadline_seconds, "deadlineFrom": self.deadline_from,
                "worstCaseCostUsd": self.worst_case_cost_usd, "idleRemovalMinutes": self.idle_removal_minutes,
                "cleanPodPolicy": self.clean_pod_policy}


def teardown(job: JobConfig, cfg: StackConfig) -> Teardown:
    pool, ps_pool = cfg.pool(job.pool), cfg.ps_pool_of(job)
    deadline = deadline_seconds(job, pool, cfg.prices, ps_pool)
    source = None
    if deadline is not None:
        source = ("maxCostUsd" if deadline == cost_deadline_seconds(job, pool, cfg.prices, ps_pool)
                  else "activeDeadlineSeconds")
    tail_minutes = removal_minutes(pool)
    worst = None
    if deadline is not None:
        worst = round(job_price_per_hour(job, pool, cfg.prices, ps_pool) * (deadline / 3600 + tail_minutes / 60), 2)
    return Teardown(deadline, source, worst, tail_minutes, job.run_policy.clean_pod_policy)


def removal_minutes(pool: GpuPoolConfig) -> int:
    """Roughly how long an idle node of the pool keeps billing: idleMinutes, then drain and termination.

    The autoscaler scans every 10 s; draining a node without training pods
    is quick, and EC2 takes a minute or two to terminate a GPU instance.
    """
    return pool.idle_minutes + 2
