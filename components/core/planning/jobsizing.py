"""Sizing a configured job: does its model fit the pool, how long, how much (pure)."""

from __future__ import annotations

from components.core.config import GpuPoolConfig, JobConfig
from components.core.planning import sizing


def size_job(job: JobConfig, pool: GpuPoolConfig, prices: dict[str, float] | None = None) -> sizing.SizingResult:
    """The sizing of `job` on whole nodes of its pool (raises sizing.SizingError)."""
    model = job.model
    if model is None:
        raise ValueError(f"job {job.name!r} gives no model")
    return sizing.size(sizing.SizingInput(
        params=model.params, tokens=model.tokens, instance_type=pool.instance_type, nodes=job.nodes,
        zero_stage=model.zero_stage, tp=model.tp, pp=model.pp, mfu=model.mfu, recompute=model.recompute,
        price_overrides=prices,
    ))


def fit_problem(job: JobConfig, pool: GpuPoolConfig) -> str | None:
    """Why the job's model cannot train on its nodes, naming the minimum that would; None when it fits."""
    try:
        result = size_job(job, pool)
    except sizing.SizingError as err:
        return "; ".join(err.messages)
    if result.fits:
        return None
    stage = job.model.zero_stage
    if result.min_nodes:
        need = f"the minimum is {result.min_nodes} nodes of {pool.instance_type} at zeroStage {stage}"
        if result.min_nodes > pool.max_nodes:
            need += f" (pool {pool.name!r} has maxNodes {pool.max_nodes})"
    else:
        need = f"no node count fits at zeroStage {stage}; raise zeroStage, tp or pp"
    nodes = f"{job.nodes} node{'s' if job.nodes != 1 else ''}"
    return (f"{result.model_state_gb_per_gpu:.1f} GB of model state per GPU does not fit "
            f"{result.model_state_limit_gb:.1f} GB usable on {pool.instance.gpu_model} with {nodes}; {need}")
