"""`python -m bootstrap logs JOB [--rank N] [-f]`: a job's output, MPIJob and TrainJob alike.

An MPIJob's launcher holds every rank's output (mpirun tags each line with
its rank): all of it, or rank N's lines. A TrainJob's node pods each run
torchrun for their ranks: node 0's pod, or the pod of rank N's node
(bootstrap/jobs/logs.py). `-f` follows until the container ends or Ctrl-C.
A team's job is in its team's namespace: `--team T`, or found there for a
stack job with `team:`.

On a fleet's manager (`--stack <manager>`, or a worker's stack with
--fleet) the job is followed to the worker that admitted it (its
Workload's status.clusterName, bootstrap/jobs/fleet.py): the first line
says which (`job J runs on worker W`), then that worker's pods are read as
above, the worker reached at its stack's context (bootstrap.cluster.connect).
A job still in the manager's queue has no pod on any worker: exit 2; so is
a cluster reached that is not the fleet's manager, and a worker the
manager's stack file names no stack for.

Exit 0; 1 when the --stack is bad; 2 when the job, its pod, the cluster or
the stack file cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from bootstrap import stackfile
from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import fleet, logs, ops
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap logs"


def follow(manager, job: dict, manager_cfg: config.StackConfig | None, kubeconfig: str | None,
           manager_stack: str | None = None) -> tuple:
    """The worker's Kube and its copy of the job a manager dispatched; says which worker first (stdout)."""
    placed, health = fleet.where(manager, job)
    name = job["metadata"]["name"]
    if placed.worker is None:
        raise logs.NoPod(fleet.not_started(name, placed))
    print(fleet.runs_on(name, placed.worker), flush=True)
    try:
        worker = fleet.worker_kube(placed.worker, manager_cfg, kubeconfig, manager_stack)
        copy = worker.get(kinds.of(job), name, job["metadata"]["namespace"])
    except ClusterUnreachable as err:
        lost = f" (the manager: {fleet.unreachable(placed.worker, health)})" if health and not health.active else ""
        raise ClusterUnreachable(f"worker {placed.worker}{lost}: {err}") from None
    if copy is None:
        raise logs.NoPod(f"worker {placed.worker} has no {job['kind']} {name} (yet, or any more): MultiKueue "
                         "creates it there on admission and removes it when the job leaves the worker")
    return worker, copy


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", help="the MPIJob, TrainJob or JobSet")
    parser.add_argument("--rank", type=int, help="only rank N (an MPIJob's tagged lines; a TrainJob's node of it)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    parser.add_argument("--tail", type=int, help="the last N lines only")
    common.add_cluster_args(parser)
    common.add_team_arg(parser)
    parser.add_argument("--context", help="the kubeconfig's context (default: the one named as the stack, else its "
                                          "current one)")
    parser.add_argument("--fleet", action="store_true", help="a fleet worker's --stack: the job in its manager's "
                                                             "queue, followed to the worker it runs on")
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        where = fleet.target(cfg, args.kubeconfig, args.context, args.fleet,
                             lambda name: stackfile.load_stack(name, standins=True)[0])
        kube = where.kube
        job = common.find_job(kube, args, cfg)
        if where.on_manager:
            kube, job = follow(kube, job, where.manager, args.kubeconfig, where.manager_stack)
        source, lines = ops.log_lines(kube, job, args.rank, args.follow, args.tail)
        print(f"# {job['kind']} {args.job}: pod {source.pod}, {source.note}", file=sys.stderr)
        for line in lines:
            print(line, flush=args.follow)
    except (SubmitError, logs.NoPod, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    except KeyboardInterrupt:
        return 0
    return 0
