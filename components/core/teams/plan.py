"""What the teams' shares come to per GPU pool: guarantees, what each may borrow and lend, worst-case cost (pure).

Every queue of the stack is in one Kueue cohort (components.core.teams.queues):
each team's ClusterQueue holds its guarantee as nominal quota, the training
namespace's holds the rest of each pool at maxNodes, and idle quota is lent
across the cohort. Kueue v0.19.2 (apis/kueue/v1beta2/clusterqueue_types.go,
ResourceQuota): `borrowingLimit` caps what a queue may use past its nominal
quota, `lendingLimit` caps what of its nominal quota others may borrow (unset:
all of it). So what a team can borrow on a pool is the smaller of its borrow
limit and what the others lend: the pool less its own guarantee, less the part
of each other team's guarantee that team keeps (guarantee minus lend limit).
The training namespace's queue sets no lending limit: it lends all it keeps.

Costs are the plan's (components.core.planning.cost): the catalog's or
`gpucluster:prices`' rate, the dearest type a Spot pool may launch, and
HOURS_PER_MONTH hours a month.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.core.config import GpuPoolConfig, StackConfig
from components.core.config.teams import TeamConfig
from components.core.hardware import catalog
from components.core.kube.launcher import FABRIC_TEST_NODES
from components.core.planning.cost import HOURS_PER_MONTH
from components.core.teams.queues import COHORT


@dataclass(frozen=True)
class PoolShare:
    """One team on one GPU pool, in GPUs (whole nodes)."""

    pool: str
    guaranteed_nodes: int
    guaranteed_gpus: int
    borrowable_gpus: int
    lendable_gpus: int
    borrow_limit_gpus: int | None
    lend_limit_gpus: int | None
    price_per_gpu_hour: float

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "guaranteedNodes": self.guaranteed_nodes, "guaranteedGpus": self.guaranteed_gpus,
                "borrowableGpus": self.borrowable_gpus, "lendableGpus": self.lendable_gpus,
                "borrowLimitGpus": self.borrow_limit_gpus, "lendLimitGpus": self.lend_limit_gpus,
                "pricePerGpuHour": round(self.price_per_gpu_hour, 4)}


@dataclass(frozen=True)
class TeamShare:
    name: str
    members: int
    weight: float
    priority_classes: tuple[str, ...]
    monthly_budget_usd: float | None
    pools: tuple[PoolShare, ...]

    @property
    def guarantee_monthly_usd(self) -> float:
        """The guarantee in use all month."""
        return round(sum(p.guaranteed_gpus * p.price_per_gpu_hour for p in self.pools) * HOURS_PER_MONTH, 2)

    @property
    def worst_case_monthly_usd(self) -> float:
        """The guarantee and everything it may borrow, in use all month."""
        return round(sum((p.guaranteed_gpus + p.borrowable_gpus) * p.price_per_gpu_hour for p in self.pools)
                     * HOURS_PER_MONTH, 2)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.name, "members": self.members, "weight": self.weight,
                "priorityClasses": list(self.priority_classes), "monthlyBudgetUsd": self.monthly_budget_usd,
                "guaranteeMonthlyUsd": self.guarantee_monthly_usd, "worstCaseMonthlyUsd": self.worst_case_monthly_usd,
                "pools": [p.to_dict() for p in self.pools]}


@dataclass(frozen=True)
class Remainder:
    """What of a pool the training namespace's queue keeps (lent while idle)."""

    pool: str
    nodes: int
    gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {"pool": self.pool, "nodes": self.nodes, "gpus": self.gpus}


@dataclass(frozen=True)
class TeamsPlan:
    teams: tuple[TeamShare, ...]
    training_namespace: str
    remainder: tuple[Remainder, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"cohort": COHORT, "hoursPerMonth": HOURS_PER_MONTH, "teams": [t.to_dict() for t in self.teams],
                "trainingNamespace": {"namespace": self.training_namespace,
                                      "pools": [r.to_dict() for r in self.remainder]},
                "warnings": list(self.warnings)}


def price_per_gpu_hour(pool: GpuPoolConfig, cfg: StackConfig) -> float:
    """A GPU-hour of the pool: a Spot pool that may launch other types costs at most its dearest (as cost.pool_line)."""
    return max(cfg.price(t) / catalog.get(t).gpu_count for t in pool.instance_types)


def _guaranteed(team: TeamConfig, pool: GpuPoolConfig) -> int:
    share = team.pools.get(pool.name)
    return 0 if share is None else share.guaranteed_nodes(pool.max_nodes, pool.instance.gpu_count) * pool.instance.gpu_count


def _lends(team: TeamConfig, pool: GpuPoolConfig) -> int:
    share = team.pools.get(pool.name)
    guaranteed = _guaranteed(team, pool)
    return guaranteed if share is None or share.lend_limit_gpus is None else min(share.lend_limit_gpus, guaranteed)


def pool_share(team: TeamConfig, pool: GpuPoolConfig, teams: tuple[TeamConfig, ...], price: float) -> PoolShare:
    gpus = pool.max_nodes * pool.instance.gpu_count
    share = team.pools.get(pool.name)
    guaranteed = _guaranteed(team, pool)
    # What the others keep for themselves: their guarantees past their lend limits.
    kept = sum(_guaranteed(other, pool) - _lends(other, pool) for other in teams if other is not team)
    others_lend = gpus - guaranteed - kept
    limit = share.borrow_limit_gpus if share is not None else None
    return PoolShare(pool.name, guaranteed // pool.instance.gpu_count, guaranteed,
                     others_lend if limit is None else min(limit, others_lend), _lends(team, pool),
                     limit, share.lend_limit_gpus if share is not None else None, price)


def plan(cfg: StackConfig, reserved_nodes: dict[str, int] | None = None) -> TeamsPlan | None:
    """The teams' shares of every GPU pool, the training namespace's remainder and the warnings; None without
    teams. `reserved_nodes`: the instance count of each pool's Capacity Block (cost.estimate's)."""
    if not cfg.teams:
        return None
    teams = tuple(cfg.teams)
    prices = {pool.name: price_per_gpu_hour(pool, cfg) for pool in cfg.gpu_pools}
    shares = tuple(TeamShare(t.name, len(t.members), t.weight, tuple(t.priority_classes), t.monthly_budget_usd,
                             tuple(pool_share(t, pool, teams, prices[pool.name]) for pool in cfg.gpu_pools))
                   for t in teams)
    remainder = []
    for pool in cfg.gpu_pools:
        nodes = pool.max_nodes - sum(_guaranteed(t, pool) for t in teams) // pool.instance.gpu_count
        remainder.append(Remainder(pool.name, nodes, nodes * pool.instance.gpu_count))
    warnings = [*_pool_warnings(cfg, remainder, reserved_nodes or {}), *_team_warnings(cfg, shares)]
    return TeamsPlan(shares, cfg.training_namespace, tuple(remainder), tuple(warnings))


def _pool_warnings(cfg: StackConfig, remainder: list[Remainder], reserved: dict[str, int]) -> list[str]:
    out = []
    for pool, rest in zip(cfg.gpu_pools, remainder, strict=True):
        held = [t for t in cfg.teams if _guaranteed(t, pool)]
        guaranteed_nodes = pool.max_nodes - rest.nodes
        who = ", ".join(f"{t.name} {_guaranteed(t, pool) // pool.instance.gpu_count}" for t in held)
        # The training namespace runs the fabric test and the jobs without a team.
        training_jobs = [j for j in cfg.jobs if j.team is None and j.pool == pool.name and j.nodes > rest.nodes]
        needs = ([f"the fabric test ({FABRIC_TEST_NODES} nodes)"] if pool.fabric_test and
                 rest.nodes < FABRIC_TEST_NODES else []) + [f"job {j.name} ({j.nodes} nodes)" for j in training_jobs]
        if rest.nodes == 0:
            out.append(f"pool {pool.name}: the teams' guarantees ({who} nodes) take all {pool.max_nodes} nodes, "
                       f"leaving none to the training namespace {cfg.training_namespace!r}: "
                       f"{', '.join(needs) or 'its jobs'} can run only on what the teams lend, and be preempted "
                       "when they take it back")
        elif needs:
            out.append(f"pool {pool.name}: the training namespace {cfg.training_namespace!r} keeps {rest.nodes} "
                       f"of {pool.max_nodes} nodes after the teams' guarantees ({who} nodes): "
                       f"{', '.join(needs)} " + ("need more and run" if len(needs) > 1 else "needs more and runs")
                       + " only on what the teams lend")
        block = reserved.get(pool.name)
        if pool.capacity_reservation_id is not None and block is not None and guaranteed_nodes > block:
            out.append(f"pool {pool.name}: the teams' guarantees ({who} nodes) add up to {guaranteed_nodes} nodes, "
                       f"more than its Capacity Block's {block} instances: the pool launches only into its "
                       "reservation, so a guarantee past it cannot be met")
        for team in cfg.teams:
            share = team.pools.get(pool.name)
            if share is not None and share.guaranteed_share is not None and not _guaranteed(team, pool):
                out.append(f"team {team.name}: guaranteedShare {share.guaranteed_share:g} of pool {pool.name}'s "
                           f"{pool.max_nodes} nodes rounds down to 0 nodes: no guarantee")
    return out


def _team_warnings(cfg: StackConfig, shares: tuple[TeamShare, ...]) -> list[str]:
    out = []
    for share in shares:
        budget = share.monthly_budget_usd
        if budget is not None and budget < share.guarantee_monthly_usd:
            out.append(f"team {share.name}: its guarantee in use all month costs ${share.guarantee_monthly_usd:,.0f}, "
                       f"more than its monthlyBudgetUsd ${budget:,.0f}: `bootstrap submit` refuses its jobs before it "
                       "uses all of its guarantee for a month (informational)")
        if not share.members:
            out.append(f"team {share.name}: no members (teams[].members): only the admins can run its jobs")
    return out

