"""The config checks that need planning: a job's model must fit its nodes, a cost bound must buy some minutes.

Above both the schema and planning: `components.core.stack_config` runs
these after the schema's own rules, on whatever parsed, so one run reports
every problem.
"""

from components.core.config import NAMESPACE, StackConfig
from components.core.config.stack import entries
from components.core.planning.jobsizing import fit_problem
from components.core.planning.teardown import MIN_DEADLINE_SECONDS, cost_deadline_seconds, job_price_per_hour
from components.core.problems import Problem, show

NEEDS = frozenset({"gpu_pools", "jobs", "prices"})


def problems(cfg: StackConfig, valid: set[str]) -> list[Problem]:
    """What planning says of the stack's jobs; nothing unless pools, jobs and prices parsed."""
    if not valid >= NEEDS:
        return []
    pools = {p.name: p for _, p in entries(cfg.gpu_pools)}
    out = []
    for i, job in entries(cfg.jobs):
        pool = pools.get(job.pool)
        if pool is None:
            continue
        path = f"{NAMESPACE}:jobs[{i}]"
        if job.model is not None and (reason := fit_problem(job, pool)):
            out.append(Problem(f"{path}.model", reason))
        ps_pool = cfg.ps_pool_of(job)
        seconds = cost_deadline_seconds(job, pool, cfg.prices, ps_pool)
        if seconds is not None and seconds < MIN_DEADLINE_SECONDS:
            out.append(Problem(f"{path}.maxCostUsd",
                               f"got {show(job.max_cost_usd)}; buys {seconds} s of {job.nodes} x {pool.instance_type} "
                               f"(${job_price_per_hour(job, pool, cfg.prices, ps_pool):,.2f}/h); at least "
                               f"{MIN_DEADLINE_SECONDS // 60} minutes' worth is needed"))
    return out
