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

Exit 0: submitted. Exit 1: the stack or the job file has problems (each
listed, as `plan` lists them), the job does not fit its team's budget, or
--over-budget from one who is no admin.
Exit 2: not submitted for another reason (on stderr: the job exists, the
cluster or Prometheus cannot be reached, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import budget, ops, render
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
    common.add_prometheus_args(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    if (args.job is None) == (args.file is None):
        print(f"{PROG}: error: give a job name or --file, one of them", file=sys.stderr)
        return 2
    try:
        cfg = common.load_stack(args)
        # Checked before connecting, so a bad job file fails fast; rendered again with the image cache.
        first = _render(args, cfg)
        kube, namespace = common.cluster(args, cfg)
        sub = _render(args, cfg, ops.image_cache(kube, *filter(None, (args.namespace, first.namespace, namespace))))
        verdict = check_budget(args, cfg, kube, sub, now or datetime.now(UTC))
        done = ops.submit(kube, sub, **({"sleep": sleep} if sleep else {}))
    except (render.SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    position = done.position
    report = {"kind": sub.kind, "name": sub.name, "namespace": sub.namespace, "pool": sub.pool.name,
              "nodes": sub.job.nodes, "instanceType": sub.pool.instance_type,
              "pricePerHour": round(sub.price_per_hour, 2), "deadlineSeconds": sub.deadline_seconds,
              "created": list(done.created),
              "queue": None if position is None else {"clusterQueue": position.cluster_queue,
                                                      "position": position.position, "pending": position.pending,
                                                      "ahead": list(position.ahead)},
              "admitted": done.workload is not None and position is None}
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
