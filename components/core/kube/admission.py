"""The stack's jobs and fabric tests as Kueue's ClusterQueues will see them, and their start order (pure).

The Kubernetes-side view of planning.schedule: names, node counts and
priority classes come from the objects kube/ builds; run times from the
planning estimates.
"""

from __future__ import annotations

from components.core.config import StackConfig
from components.core.kube import launcher, queueing
from components.core.planning import jobsizing, teardown
from components.core.planning.schedule import Start, Workload, simulate

# How long the fabric test holds its two nodes, for the simulation only.
FABRIC_TEST_HOURS = 0.25


def stack_workloads(cfg: StackConfig) -> list[Workload]:
    """The stack's jobs and fabric tests as Kueue will see them."""
    training = queueing.PRIORITY_CLASSES[queueing.TRAINING_PRIORITY][0]
    fabric = queueing.PRIORITY_CLASSES[queueing.FABRIC_TEST_PRIORITY][0]
    out = [Workload(launcher.nccl_test_name(p), p.name, launcher.FABRIC_TEST_NODES, fabric, FABRIC_TEST_HOURS)
           for p in cfg.gpu_pools if p.fabric_test]
    for job in (j for j in cfg.jobs if j.start_on_up):  # the others start with `bootstrap submit`
        pool = cfg.pool(job.pool)
        hours = None
        if job.model is not None and job.model.tokens is not None:
            days = jobsizing.size_job(job, pool, cfg.prices).training_days
            hours = days * 24 if days is not None else None
        deadline = teardown.deadline_seconds(job, pool, cfg.prices, cfg.ps_pool_of(job))
        if deadline is not None:
            hours = min(hours, deadline / 3600) if hours is not None else deadline / 3600
        out.append(Workload(job.name, job.pool, job.nodes, training, hours))
    return out


def stack_schedule(cfg: StackConfig) -> dict[str, Start]:
    return simulate(stack_workloads(cfg), {p.name: p.max_nodes for p in cfg.gpu_pools})
