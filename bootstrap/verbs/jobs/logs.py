"""`python -m bootstrap logs JOB [--rank N] [-f]`: a job's output, MPIJob and TrainJob alike.

An MPIJob's launcher holds every rank's output (mpirun tags each line with
its rank): all of it, or rank N's lines. A TrainJob's node pods each run
torchrun for their ranks: node 0's pod, or the pod of rank N's node
(bootstrap/jobs/logs.py). `-f` follows until the container ends or Ctrl-C.
A team's job is in its team's namespace: `--team T`, or found there for a
stack job with `team:`.

Exit 0; 1 when the --stack is bad; 2 when the job, its pod, the cluster or
the stack file cannot be read.
"""

from __future__ import annotations

import argparse
import sys

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import logs, ops
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap logs"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", help="the MPIJob, TrainJob or JobSet")
    parser.add_argument("--rank", type=int, help="only rank N (an MPIJob's tagged lines; a TrainJob's node of it)")
    parser.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    parser.add_argument("--tail", type=int, help="the last N lines only")
    common.add_cluster_args(parser)
    common.add_team_arg(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        kube, _ = common.cluster(args, cfg)
        job = common.find_job(kube, args, cfg)
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
