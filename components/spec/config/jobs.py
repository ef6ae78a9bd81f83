"""gpucluster:jobs: each job on a declared pool, sized where it gives a model, with its bounds."""

from __future__ import annotations

from typing import Any

from components.spec.config.types import (
    CLEAN_POD_POLICIES,
    DNS_LABEL,
    ENV_NAME,
    GRACE_PERIOD_MAX_SECONDS,
    LAUNCHERS,
    GpuPoolConfig,
    JobConfig,
    ModelConfig,
    RunPolicyConfig,
)
from components.spec.validation import Problems, Section, unique


def parse_jobs(top: Section, problems: Problems, pools: tuple[GpuPoolConfig, ...],
          declared_pools: set[str] | None, prices: dict[str, float]) -> tuple[JobConfig, ...]:
    by_name = {p.name: p for p in pools}
    jobs = []
    for path, item in top.items("jobs"):
        job = parse_job(Section(item, path, problems), by_name, declared_pools)
        if job is not None:
            jobs.append((path, job))
    unique(problems, [(f"{p}.name", job.name) for p, job in jobs], "job name")
    from components.spec.jobsizing import fit_problem
    from components.spec.teardown import MIN_DEADLINE_SECONDS, cost_deadline_seconds, job_price_per_hour

    for path, job in jobs:
        pool = by_name[job.pool]
        if job.model is not None and (reason := fit_problem(job, pool)):
            problems.add(f"{path}.model", reason)
        seconds = cost_deadline_seconds(job, pool, prices)
        if seconds is not None and seconds < MIN_DEADLINE_SECONDS:
            problems.bad(f"{path}.maxCostUsd", job.max_cost_usd,
                         f"buys {seconds} s of {job.nodes} x {pool.instance_type} "
                         f"(${job_price_per_hour(job, pool, prices):,.2f}/h); at least "
                         f"{MIN_DEADLINE_SECONDS // 60} minutes' worth is needed")
    return tuple(job for _, job in jobs)


def parse_job(sec: Section, pools: dict[str, GpuPoolConfig], declared_pools: set[str] | None) -> JobConfig | None:
    p = sec.problems
    # Pods are named <job>-launcher / <job>-worker-<n>: keep room under 63.
    name = sec.string("name", required=True, pattern=DNS_LABEL, max_len=40,
                      allowed="a lowercase DNS label of at most 40 characters")
    pool_name = sec.string("pool", required=True, allowed="the name of a gpuPools entry")
    pool = pools.get(pool_name) if pool_name else None
    if pool_name and pool is None and declared_pools is not None and pool_name not in declared_pools:
        p.bad(sec.key_path("pool"), pool_name,
              f"no such pool; pools: {', '.join(pools) or '(none defined)'}")
    nodes = sec.integer("nodes", required=True, minimum=1)
    if pool is not None and nodes is not None and nodes > pool.max_nodes:
        p.add(sec.key_path("nodes"), f"got {nodes}; pool {pool.name!r} has maxNodes {pool.max_nodes}")
    launcher = sec.enum("launcher", LAUNCHERS, required=True)
    image = sec.string("image", required=True, pattern=r"[^\s:@]+(:[\w][\w.-]{0,127}|@sha256:[0-9a-f]{64})",
                       allowed="a container image pinned to a tag or digest (repo/name:tag)")
    if image and (image.endswith(":latest")):
        p.bad(sec.key_path("image"), image, "pin a version tag or digest, not latest")
    command = sec.string_list("command")
    if not command and sec.has("command"):
        p.add(sec.key_path("command"), "must be a non-empty list of strings")
    elif not sec.has("command"):
        p.add(sec.key_path("command"), "is required (the training command as a list, e.g. [python, train.py])")
    env = sec.string_map("env", key_pattern=ENV_NAME, key_what="an environment variable name")
    gpus = sec.integer("gpusPerNode", minimum=1)
    if pool is not None and gpus is not None and gpus > pool.instance.gpu_count:
        p.add(sec.key_path("gpusPerNode"),
              f"got {gpus}; {pool.instance_type} has {pool.instance.gpu_count} GPUs per node")
    mount = sec.string("mountPath", "/fsx", pattern=r"/[A-Za-z0-9._/-]*", allowed="an absolute path")
    restarts = sec.integer("maxRestarts", 3, minimum=0, maximum=100)
    if launcher == "mpirun" and sec.has("maxRestarts"):
        p.add(sec.key_path("maxRestarts"), "applies to launcher torchrun (the TrainJob's JobSet restarts); "
                                           "an MPIJob retries with runPolicy.backoffLimit")
    max_cost = sec.number("maxCostUsd", minimum=0, exclusive_minimum=True)
    grace = sec.integer("terminationGracePeriodSeconds", minimum=0, maximum=GRACE_PERIOD_MAX_SECONDS)
    if launcher == "torchrun" and isinstance(sec.raw.get("runPolicy"), dict):
        for key in ("cleanPodPolicy", "backoffLimit", "ttlSecondsAfterFinished"):
            if key in sec.raw["runPolicy"]:
                p.add(f"{sec.key_path('runPolicy')}.{key}",
                      "applies to launcher mpirun (MPIJob) only; a torchrun TrainJob restarts with maxRestarts "
                      "and its pods end with it")
    run_policy = parse_run_policy(sec.section("runPolicy"))
    model = parse_model(sec.section("model")) if sec.has("model") else None
    sec.skip("model")
    sec.finish()
    if None in (name, pool, nodes, launcher, image) or not command:
        return None
    return JobConfig(name=name, pool=pool.name, nodes=nodes, launcher=launcher, image=image,
                     command=command, env=env, gpus_per_node=gpus, model=model, run_policy=run_policy,
                     max_restarts=restarts, mount_path=mount or "/fsx", max_cost_usd=max_cost,
                     termination_grace_period_seconds=grace)


def parse_run_policy(sec: Section) -> RunPolicyConfig:
    d = RunPolicyConfig()
    clean = sec.enum("cleanPodPolicy", CLEAN_POD_POLICIES, d.clean_pod_policy)
    ttl = sec.integer("ttlSecondsAfterFinished", minimum=0)
    deadline = sec.integer("activeDeadlineSeconds", minimum=1)
    backoff = sec.integer("backoffLimit", d.backoff_limit, minimum=0, maximum=100)
    sec.finish()
    return RunPolicyConfig(clean_pod_policy=clean or d.clean_pod_policy,
                           ttl_seconds_after_finished=ttl,
                           active_deadline_seconds=deadline,
                           backoff_limit=d.backoff_limit if backoff is None else backoff)


def parse_count(value: Any) -> float | None:
    """7e9, "7B", "1.5T" -> float; None when unreadable (components.sizing parses)."""
    from components.spec.sizing import parse_quantity

    if isinstance(value, bool):
        return None
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


def parse_model(sec: Section) -> ModelConfig | None:
    p = sec.problems
    d = ModelConfig(params=0)
    values = {}
    for key in ("params", "tokens"):
        raw = sec.value(key)
        if raw is None:
            values[key] = None
            continue
        n = parse_count(raw)
        if n is None or n <= 0:
            p.bad(sec.key_path(key), raw, "must be a positive count such as 7e9 or 7B")
        values[key] = n
    if values["params"] is None and not sec.has("params"):
        p.add(sec.key_path("params"), "is required in model (the parameter count, e.g. 7B)")
    stage = sec.integer("zeroStage", d.zero_stage, minimum=0, maximum=3)
    tp = sec.integer("tp", 1, minimum=1, maximum=64)
    pp = sec.integer("pp", 1, minimum=1, maximum=512)
    mfu = sec.number("mfu", d.mfu, minimum=0, maximum=1, exclusive_minimum=True)
    recompute = sec.boolean("recompute", False)
    sec.finish()
    if values["params"] is None or None in (stage, tp, pp):
        return None
    return ModelConfig(params=values["params"], tokens=values["tokens"], zero_stage=stage, tp=tp, pp=pp,
                       mfu=mfu, recompute=bool(recompute))
