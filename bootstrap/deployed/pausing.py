"""Pause or resume a deployed stack: write paused/pauseMode to the stack file, preview, confirm, `pulumi up`.

A fleet's manager has no GPU pool: pausing it holds its ClusterQueues (the
manager renders them with StackConfig.stop_policy, as any stack), so jobs
wait in its queue and none is dispatched, while each worker runs what it
admitted already (`finish`); `drain` evicts the manager's admitted jobs,
and MultiKueue deletes their copies on the workers. A paused worker holds
its own queue: the manager dispatches new jobs to the other workers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from bootstrap import stackfile
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.deployed import automation, scaleups
from bootstrap.deployed.draining import job_namespaces
from components.core import config
from components.core.config.cluster import stack_name as stack_name_of
from components.core.kube import trainer
from components.core.planning import cost

PAUSED = f"{config.NAMESPACE}:paused"
PAUSE_MODE = f"{config.NAMESPACE}:pauseMode"


def drain_warning(cfg: config.StackConfig) -> list[str]:
    """What a drain does to each job: who gets SIGTERM, and how long they have."""
    lines = ["drain evicts running jobs now. Each worker gets SIGTERM and its grace period before SIGKILL; a "
             "checkpoint is written only if your training code handles SIGTERM within it:"]
    for job in cfg.jobs:
        grace = job.termination_grace_period_seconds
        if grace is None:
            grace_text = f"{config.KUBERNETES_DEFAULT_GRACE_SECONDS} s, Kubernetes' default"
            waits = "its default 30 s"
        else:
            grace_text = f"{grace} s"
            waits = f"{trainer.SHUTDOWN_TIMEOUT_ENV}={trainer.shutdown_timeout_seconds(grace)} s, PyTorch 2.13"
        via = (f"torchrun passes SIGTERM to the training processes and waits for them ({waits})"
               if job.launcher == "torchrun"
               else "mpirun passes SIGTERM to the ranks and kills them a few seconds later (Open MPI): prefer "
                    "pauseMode finish for MPI jobs that must checkpoint")
        lines.append(f"  - {job.name}: {grace_text} ({via}); jobs[].terminationGracePeriodSeconds sets it")
    lines.append("Evicted jobs wait in the queue and start again, from their last checkpoint if they load one, "
                 "on resume.")
    return lines


def manager_lines(cfg: config.StackConfig, paused: bool) -> list[str]:
    """What pause or resume does on a fleet's manager: its queues, not pools (it has none)."""
    workers = ", ".join(stack_name_of(w.stack) for w in cfg.fleet.workers)
    if not paused:
        return [f"Resuming fleet manager {cfg.stack}: its ClusterQueues admit jobs again and MultiKueue dispatches "
                f"them to the workers ({workers})."]
    lines = [f"Pausing fleet manager {cfg.stack}: its ClusterQueues get stopPolicy {cfg.stop_policy}; jobs wait in "
             "its queue and none is dispatched. It has no GPU pool to scale."]
    if cfg.pause_mode == "finish":
        lines.append(f"The workers ({workers}) keep running what they admitted; pause each to stop its GPU billing.")
    else:
        lines.append(f"drain evicts every job the manager dispatched: MultiKueue deletes its copy on the worker "
                     f"({workers}; SIGTERM and each job's grace period there), and it waits in the manager's queue "
                     "until resume.")
    lines.append(f"While paused the manager costs about ${cost.paused_per_hour(cfg):,.2f}/hour (control plane, NAT, "
                 "system nodes).")
    return lines


def release_scale_ups(cfg: config.StackConfig, kubeconfig: str | None, out: Callable[[str], None],
                      connect: Callable[[str, str | None], Kube] | None = None,
                      release: Callable[..., list[str]] = scaleups.release) -> int:
    """Once the pause is applied: cancel the scale-ups Kueue asked for jobs that now wait in the paused queue
    (bootstrap/deployed/scaleups.py). 0 none left; 1 Kueue still holds quota for some (the pause is not applied
    yet); 2 the cluster cannot be read. Nothing to do without a pool that scales up atomically."""
    if not any(pool.atomic_scale_up for pool in cfg.gpu_pools):
        return 0
    if connect is None:  # the stack's own cluster: its context named as the stack, else the kubeconfig's current
        from bootstrap.cluster.connect import connect_stack

        def connect(stack: str, path: str | None) -> Kube:
            return connect_stack(stack, path, current=True)
    again = f"python -m bootstrap pause --stack {cfg.stack} --release-scale-ups"
    try:
        left = release(connect(cfg.stack, kubeconfig), job_namespaces(cfg), out)
    except (ClusterUnreachable, KubeError) as err:
        print(f"gpucluster: {cfg.stack} is paused, but the scale-ups Kueue asked for its queued jobs could not be "
              f"cancelled ({err}); the autoscaler may still raise their nodes: run `{again}` once the cluster can "
              "be reached", file=sys.stderr)
        return 2
    except scaleups.NotPaused as err:
        print(f"gpucluster: nothing cancelled: {err} in the cluster reached for {cfg.stack}: has `pulumi up --stack "
              f"{cfg.stack}` applied the pause, and is this its cluster (--kubeconfig, or a context named "
              f"{cfg.stack})? Then run `{again}`", file=sys.stderr)
        return 1
    if left:
        print(f"gpucluster: Kueue still holds quota for {', '.join(left)} after {scaleups.SETTLE_SECONDS:.0f} s "
              f"though its queue is stopped: run `{again}` again in a minute", file=sys.stderr)
        return 1
    out("no scale-up is left for a queued job: the autoscaler raises no node while the stack is paused")
    return 0


def release_only(stack_name: str, kubeconfig: str | None, out: Callable[[str], None] = print,
                 project_dir: Path = stackfile.PROJECT_DIR, **seams) -> int:
    """`pause --release-scale-ups`: after a `pulumi up` of your own that applied the pause."""
    try:
        cfg, _, _ = stackfile.load_stack(stack_name, project_dir)
    except (stackfile.StackFileError, config.ConfigError) as err:
        return stackfile.report(err)
    if not cfg.paused:
        print(f"gpucluster: {stack_name} is not paused ({PAUSED} is not true in Pulumi.{stack_name}.yaml): its "
              "queue would ask for the nodes again at once; pause it first", file=sys.stderr)
        return 2
    return release_scale_ups(cfg, kubeconfig, out, **seams)


def set_paused(text: str, paused: bool, mode: str | None) -> str:
    text = stackfile.set_scalar(text, PAUSED, "true" if paused else "false")
    return stackfile.set_scalar(text, PAUSE_MODE, mode) if mode else text


def run(stack_name: str, paused: bool, mode: str | None, apply: bool, assume_yes: bool,
        select: Callable[[str], automation.DeployedStack] = automation.select,
        ask: Callable[[str], str] | None = None, out: Callable[[str], None] = print,
        project_dir: Path = stackfile.PROJECT_DIR, kubeconfig: str | None = None, **seams) -> int:
    path = stackfile.stack_path(stack_name, project_dir)
    try:
        overrides = {PAUSED: paused, **({PAUSE_MODE: mode} if mode else {})}
        cfg, _, _ = stackfile.load_stack(stack_name, project_dir, overrides=overrides)
        text = path.read_text()
    except (stackfile.StackFileError, config.ConfigError) as err:
        return stackfile.report(err)
    verb = "pause" if paused else "resume"
    role = cfg.fleet.role if cfg.fleet is not None else None
    if role == "manager":
        for line in manager_lines(cfg, paused):
            out(line)
    elif paused:
        out(f"Pausing {stack_name}: the ClusterQueue gets stopPolicy {cfg.stop_policy} "
            f"({'admitted jobs finish, nothing new starts' if cfg.pause_mode == 'finish' else 'running jobs are evicted'}"
            f"); every GPU pool may scale to 0.")
        out(f"While paused the stack costs about ${cost.paused_per_hour(cfg):,.2f}/hour (control plane, NAT, system "
            "nodes, FSx and any reservation), once the last GPU node is gone.")
        if cfg.pause_mode == "drain":
            out("\n".join(drain_warning(cfg)))
    else:
        out(f"Resuming {stack_name}: the ClusterQueue admits jobs again and the pools' minNodes apply.")
    if role == "worker":
        out(f"{stack_name} is a worker of fleet {stack_name_of(cfg.fleet.manager)}: "
            + ("while it is paused the manager dispatches new jobs to the other workers."
               if paused else "the manager dispatches jobs to it again."))
    new_text = set_paused(text, paused, mode)
    if new_text != text:
        path.write_text(new_text)
        out(f"wrote {PAUSED}: {'true' if paused else 'false'}" + (f", {PAUSE_MODE}: {mode}" if mode else "")
            + f" to {path.name}")
    if not apply:
        out(f"next: pulumi up --stack {stack_name}")
        if paused and any(pool.atomic_scale_up for pool in cfg.gpu_pools):
            out(f"then: python -m bootstrap pause --stack {stack_name} --release-scale-ups (cancels the scale-ups "
                "Kueue asked for jobs that wait)")
        return 0
    try:
        stack = select(stack_name)
        stack.preview(on_output=out, color="never", diff=True)
    except automation.AutomationError as err:
        print(f"gpucluster: {err}; the stack file is written: run `pulumi up --stack {stack_name}`", file=sys.stderr)
        return 2
    except Exception as err:  # the CLI's preview failed
        print(f"gpucluster: preview failed: {automation.last_error_line(err)}", file=sys.stderr)
        return 1
    if not automation.confirm(f"\nApply the {verb} above to {stack_name}?", stack_name, assume_yes, ask):
        print(f"gpucluster: not applied; the stack file is written: run `pulumi up --stack {stack_name}` when ready",
              file=sys.stderr)
        return 1
    try:
        stack.up(on_output=out, color="never")
    except Exception as err:
        print(f"gpucluster: pulumi up failed: {automation.last_error_line(err)}", file=sys.stderr)
        return 1
    out(f"{stack_name} {'paused' if paused else 'resumed'}.")
    return release_scale_ups(cfg, kubeconfig, out, **seams) if paused else 0
