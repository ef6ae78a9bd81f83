"""`python -m bootstrap submit --stack S JOB` (or `--file job.yaml`): start a job without `pulumi up`.

Renders the manifest the stack would (the same NCCL/EFA preset, queue,
deadline and cost bound; bootstrap/jobs/render.py), creates it (and a
missing torchrun runtime, a job file's scripts) through the kubernetes
client, and prints where it stands in the queue. A stack job must have
`startOnUp: false` (`pulumi up` owns the others).

A team's job (`--team T`, or the job's own `team:`) goes to the team's
namespace at its priority class, which must be one of the team's. When the
team has a monthly budget, the job's worst case (its nodes at the pool's
price for its whole deadline or cost bound) plus what the team spent this
month (Prometheus, bootstrap/jobs/budget.py) plus what its unfinished jobs
may still cost (bootstrap/jobs/committed.py) must fit it: otherwise, or
when the job or an unfinished one has no bound, it is refused, and so it
is when the spend cannot be read. `--over-budget` submits anyway and says
so, for the cluster's admins only (the API server is asked: a
SelfSubjectAccessReview); anyone else is refused.

`--fleet` (the stack a fleet's worker): the job renders as that worker
renders it (without its image cache: the job may run in another region)
and is created on the fleet's manager, in the same namespace and
LocalQueue, where it waits until MultiKueue dispatches it to the first
worker that admits it. What the job needs on a worker is checked on
every worker the manager lists, each reached at its stack's context
(bootstrap.cluster.connect): the Secret and scripts ConfigMap `pulumi up`
of a stack with that job made, and, created when missing, a torchrun
runtime and a job file's scripts; a worker that cannot be reached is
named on stderr (the job fails there if it lands there before they are).
A team's budget is not checked for a fleet job.

Exit codes follow `python -m bootstrap`'s rule (0 ok, 1 problems found, 2
could not run). Exit 0: submitted. Exit 1: problems found: the stack or the
job file has problems (each listed, as `plan` lists them), the job does not
fit its team's budget, or --over-budget from one who is no admin.
Exit 2: could not run as asked (on stderr: the job exists, the cluster or
Prometheus cannot be reached, an unreadable stack file; with --fleet, a
--stack that is the fleet's manager or in no fleet (a valid stack, the
wrong one to name: give a worker's), a cluster reached that is not the
manager, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from bootstrap import stackfile
from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.cluster.connect import connect_stack
from bootstrap.jobs import budget, fleet, ops, render
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap submit"


def _render(args: argparse.Namespace, cfg: config.StackConfig, cache: str | None = None) -> render.Submission:
    if args.file:
        return render.from_file(args.stack, args.file, image_cache=cache, team=args.team)
    return render.from_stack(cfg, args.job, image_cache=cache, team=args.team)


def check_budget(args: argparse.Namespace, cfg: config.StackConfig, kube, sub: render.Submission,
                 now: datetime) -> budget.Verdict | None:
    """The job against its team's monthly budget; None when it has no team or the team no budget."""
    team = common.team_of(cfg, sub.team) if sub.team else None
    if team is None or team.monthly_budget_usd is None:
        return None
    query = common.prometheus(args, kube)
    worst = budget.worst_case_usd(sub.job.nodes, sub.node_price_per_hour, sub.deadline_seconds)
    verdict = budget.judge(team.name, sub.name, team.monthly_budget_usd, worst,
                           lambda: budget.read(query, team.namespace, now, cfg.observability.retention_days),
                           args.over_budget, common.committed(kube, cfg, team.namespace, now),
                           lambda: kube.may(*budget.ADMIN_CHECK))
    if verdict.refused:
        if args.json:
            print(json.dumps({"submitted": False, "name": sub.name, "namespace": sub.namespace,
                              "budget": verdict.to_dict()}, indent=2))
        raise render.Refused(verdict.refusal(), verdict.exit_code)
    return verdict


def load(stack: str) -> config.StackConfig:
    return stackfile.load_stack(stack, standins=True)[0]


def needs_on(kube: Kube, sub: render.Submission) -> tuple[list[str], list[str]]:
    """On one worker: what `pulumi up` should have made and is missing, and what this creates (a runtime, a job
    file's scripts)."""
    from components.core.kube import workers

    missing, created = [], []
    if sub.secret and kube.get(kinds.SECRET, workers.secret_env_name(sub.job.name), sub.namespace) is None:
        missing.append(f"Secret {workers.secret_env_name(sub.job.name)}")
    scripts = workers.scripts_config_map_name(sub.job.name)
    if sub.job.scripts and sub.config_map is None and kube.get(kinds.CONFIG_MAP, scripts, sub.namespace) is None:
        missing.append(f"ConfigMap {scripts}")
    if missing:
        return missing, created
    if sub.runtime is not None and ops._runtime_missing(kube, sub.runtime["metadata"]["name"]):
        kube.create(kinds.CLUSTER_TRAINING_RUNTIME, sub.runtime)
        created.append(f"ClusterTrainingRuntime {sub.runtime['metadata']['name']}")
    if sub.config_map is not None and kube.get(kinds.CONFIG_MAP, scripts, sub.namespace) is None:
        kube.create(kinds.CONFIG_MAP, sub.config_map)
        created.append(f"ConfigMap {scripts}")
    return missing, created


def prepare_workers(sub: render.Submission, stacks: list[str], kubeconfig: str | None) -> list[str]:
    """What the job needs, on every worker (needs_on); refused when a reachable one lacks what `pulumi up` makes."""
    created, lacking = [], []
    for stack in stacks:
        try:
            missing, made = needs_on(connect_stack(stack, kubeconfig), sub)
        except ClusterUnreachable as err:
            print(f"{PROG}: warning: worker {stack} cannot be reached ({err}); the job fails there if MultiKueue "
                  "sends it there before its runtime and scripts are", file=sys.stderr)
            continue
        created += [f"{what} (worker {stack})" for what in made]
        lacking += [f"{what} on worker {stack}" for what in missing]
    if lacking:
        raise render.SubmitError(f"{', '.join(lacking)} missing, made by `pulumi up` of a stack with job "
                                 f"{sub.job.name} in gpucluster:jobs: add it to each worker's stack and `pulumi up` "
                                 "them, or submit a job file (--file); nothing was submitted")
    return created


def submit_fleet(args: argparse.Namespace, cfg: config.StackConfig, sleep) -> tuple[render.Submission, ops.Submitted,
                                                                                      list[str], str]:
    """The job rendered as worker `cfg` renders it, created on its fleet's manager; what was created where, and
    the manager's stack name."""
    if fleet.is_manager(cfg):
        raise fleet.FleetError(f"--fleet takes a worker's stack (the job renders as that worker renders it); "
                               f"{cfg.stack} is the fleet's manager: give one of its workers, "
                               f"{', '.join(fleet.worker_stacks(cfg).values())}")
    sub = _render(args, cfg)
    where = fleet.target(cfg, args.kubeconfig, args.context, True, load)
    stacks = list(dict.fromkeys(fleet.worker_stacks(where.manager).values())) or [cfg.stack]
    made = prepare_workers(sub, stacks, args.kubeconfig)
    # On the manager the job is only queued: its Secret and scripts are the workers' (checked above).
    bare = dataclasses.replace(sub, job=sub.job.model_copy(update={"scripts": ()}), secret=frozenset(),
                               config_map=None)
    done = ops.submit(where.kube, bare, **({"sleep": sleep} if sleep else {}))
    return sub, done, made, fleet.manager_of(cfg) or ""


def main(argv: list[str], sleep=None, now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", nargs="?", help="a job of the stack (startOnUp: false)")
    parser.add_argument("--file", type=Path, help="a job file: one entry like those of gpucluster:jobs (YAML)")
    parser.add_argument("--team", help="a team of the stack: the job runs as its (namespace, queue, priority "
                                       "classes, budget); a stack job must be the team's already")
    parser.add_argument("--over-budget", action="store_true",
                        help="the cluster's admins: submit even past the team's monthly budget, unbounded, or "
                             "with its spend unknown (said in the output)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_cluster_args(parser, stack_required=True)
    parser.add_argument("--context", help="the kubeconfig's context (default: the one named as the stack, else its "
                                          "current one; with --fleet, the one named as the manager)")
    parser.add_argument("--fleet", action="store_true", help="queue it on the fleet's manager (--stack a worker): it "
                                                             "runs on the first worker that admits it")
    common.add_prometheus_args(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    if (args.job is None) == (args.file is None):
        print(f"{PROG}: error: give a job name or --file, one of them", file=sys.stderr)
        return 2
    if args.fleet:
        return main_fleet(args, sleep)
    try:
        cfg = common.load_stack(args)
        # Checked before connecting, so a bad job file fails fast; rendered again with the image cache.
        first = _render(args, cfg)
        namespace = args.namespace or cfg.training_namespace
        kube = fleet.target(cfg, args.kubeconfig, args.context, False, load).kube
        sub = _render(args, cfg, ops.image_cache(kube, *filter(None, (args.namespace, first.namespace, namespace))))
        verdict = check_budget(args, cfg, kube, sub, now or datetime.now(UTC))
        done = ops.submit(kube, sub, **({"sleep": sleep} if sleep else {}))
    except (render.SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    position = done.position
    report = {**_report(sub, done), "admitted": done.workload is not None and position is None}
    if sub.team:
        report.update({"team": sub.team, "priorityClass": sub.job.priority_class,
                       "budget": verdict.to_dict() if verdict else None})
    if verdict is not None and verdict.overridden:
        print(f"{PROG}: warning: {verdict.warning()}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if verdict is not None and verdict.overridden:
        print(verdict.warning())
    deadline = f"; deadline {common.duration(sub.deadline_seconds)}" if sub.deadline_seconds else "; no deadline"
    print(f"submitted {sub.kind} {sub.name} to {sub.namespace}: {sub.job.nodes} x {sub.pool.instance_type}, "
          f"${sub.price_per_hour:,.2f}/h while it runs{deadline}")
    if verdict is not None and not verdict.overridden:
        print(verdict.summary())
    print(f"created: {', '.join(done.created)}")
    where = f" --namespace {sub.namespace}" if sub.namespace != cfg.training_namespace else ""
    if done.workload is None:
        print("queue: Kueue has not queued it yet (its Workload appears within seconds): `python -m bootstrap "
              f"status{where and f' --stack {args.stack}{where}'}` shows it")
    elif position is None:
        print("queue: admitted at once: its nodes are being added (minutes from zero)")
    else:
        ahead = f" (after {', '.join(position.ahead)})" if position.ahead else ""
        print(f"queue: position {position.position} of {position.pending} waiting in {position.cluster_queue}{ahead}")
    print(f"follow it: python -m bootstrap logs {sub.name} -f --stack {args.stack}{where}")
    return 0


def _report(sub, done) -> dict:
    """What `--json` says of a submitted job, on a cluster or a fleet's manager alike."""
    position = done.position
    return {"kind": sub.kind, "name": sub.name, "namespace": sub.namespace, "pool": sub.pool.name,
            "nodes": sub.job.nodes, "instanceType": sub.pool.instance_type,
            "pricePerHour": round(sub.price_per_hour, 2), "deadlineSeconds": sub.deadline_seconds,
            "created": list(done.created),
            "queue": None if position is None else {"clusterQueue": position.cluster_queue,
                                                    "position": position.position, "pending": position.pending,
                                                    "ahead": list(position.ahead)}}


def main_fleet(args: argparse.Namespace, sleep) -> int:
    """`submit --fleet`: on the manager of the --stack's fleet (submit_fleet)."""
    try:
        cfg = common.load_stack(args)
        if cfg.fleet is None:
            raise fleet.FleetError(fleet.not_in_fleet(cfg.stack))
        sub, done, made, manager = submit_fleet(args, cfg, sleep)
    except (render.SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    position = done.position
    report = {**_report(sub, done), "manager": manager, "createdOnWorkers": made}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    deadline = f"; deadline {common.duration(sub.deadline_seconds)}" if sub.deadline_seconds else "; no deadline"
    print(f"submitted {sub.kind} {sub.name} to {sub.namespace} on the fleet's manager {manager}: {sub.job.nodes} x "
          f"{sub.pool.instance_type}, ${sub.price_per_hour:,.2f}/h while it runs{deadline}")
    print(f"created: {', '.join([*(f'{c} (manager {manager})' for c in done.created), *made])}")
    ahead = f" (after {', '.join(position.ahead)})" if position and position.ahead else ""
    place = f"position {position.position} of {position.pending} in {position.cluster_queue}{ahead}; " \
        if position else ""
    print(f"queue: queued on the fleet's manager {manager}: {place}it runs on the first worker that admits it")
    print(f"follow it: python -m bootstrap status --stack {manager} (its WORKER column), then python -m bootstrap "
          f"logs {sub.name} -f --stack {manager}")
    return 0
