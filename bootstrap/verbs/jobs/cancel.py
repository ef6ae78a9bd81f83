"""`python -m bootstrap cancel JOB`: delete a job and its pods, and say which checkpoint the next run finds.

An MPIJob or JobSet goes with foreground deletion (its pods first), a
TrainJob in the background (Trainer would re-create its JobSet otherwise:
bootstrap.jobs.ops.cancel_propagation); either way every pod gets SIGTERM
and the job's grace period, time for a checkpoint. A job file's scripts
ConfigMap goes with it. A job `pulumi up` owns is refused (the next `up`
would re-create it) unless --force. With --bucket, or the stack's
`bucketName` output, the newest object under the job's checkpoint
directory in S3 is named: what a resuming run will find (a team's job:
under teams/<team>/, the team's part of the file system). A team's job is
in its team's namespace: `--team T`, or found there for a stack job with
`team:`.

On a fleet's manager (`--stack <manager>`, or a worker's stack with
--fleet) the job is deleted there, where it was queued: MultiKueue
deletes its copy on the worker that runs it (and its pods), and the
output says which worker that was (bootstrap/jobs/fleet.py); its
checkpoints are named at that worker's stack's mount and bucket (not
looked up when the manager's stack file names no stack for it). A
cluster reached that is not the fleet's manager (no MultiKueueConfig
gpucluster-fleet: the kubeconfig's current context was a worker, say)
is refused before anything is deleted: exit 2.

Exit 0: cancelled. Exit 1: the --stack is bad (every problem listed).
Exit 2: not cancelled (the reason on stderr: no such job, a job `pulumi up`
owns, the cluster cannot be reached, an unreadable stack file).
"""

from __future__ import annotations

import argparse
import sys

from bootstrap import stackfile
from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import checkpoints, fleet, ops
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap cancel"


def stack_bucket(stack: str | None) -> str | None:
    """The stack's `bucketName` output (Automation API), None when it cannot be read."""
    if not stack:
        return None
    from bootstrap.deployed import automation

    try:
        value = automation.select(stack).outputs().get("bucketName")
    except automation.AutomationError:
        return None
    return value.value if value is not None else None


def checkpoint_lines(job: dict, cfg: config.StackConfig | None, bucket: str | None, s3_factory=None,
                     team: str | None = None) -> list[str]:
    """What the next run finds; `team`: the job is that team's (its files are under the team's prefix)."""
    directory = checkpoints.directory(job)
    if directory is None:
        return ["the job had no GPUCLUSTER_CHECKPOINT_DIR (no shared file system)"]
    name = job["metadata"]["name"]
    mount = "/fsx"
    if cfg is not None:
        match = next((j for j in cfg.jobs if j.name == name), None)
        mount = match.mount_path if match else mount
    prefix = checkpoints.s3_prefix(directory, mount, cfg.storage.checkpoint_prefix if cfg else "checkpoints/", team)
    where = f"; team {team}'s, {prefix} of the bucket" if team is not None else ""
    lines = [f"checkpoints: {directory} (the next run of {name} gets the same GPUCLUSTER_CHECKPOINT_DIR{where})"]
    if bucket is None:
        return lines + ["the newest one: give --bucket (or --stack, with the Pulumi CLI) to look in S3"]
    try:
        import boto3

        s3 = (s3_factory or (lambda: boto3.client("s3")))()
        newest = checkpoints.newest(s3, bucket, [f"{prefix}{name}/", prefix])
    except Exception as err:  # no credentials, no access: say so, the job is cancelled all the same
        return lines + [f"the newest one could not be read from s3://{bucket}/{prefix}: {err}"]
    if newest is None:
        return lines + [f"none in s3://{bucket}/{prefix} yet: the next run starts from scratch"]
    path = directory.rstrip("/") + "/" + newest.key.removeprefix(prefix)
    return lines + [f"newest: {path} (s3://{bucket}/{newest.key}, written {newest.modified:%Y-%m-%d %H:%M} UTC; "
                    "files reach S3 minutes after they are written)"]


def load(stack: str) -> config.StackConfig:
    return stackfile.load_stack(stack, standins=True)[0]


def worker_config(stack: str, fallback: config.StackConfig | None) -> config.StackConfig | None:
    """The worker's stack config (its mount and checkpoint prefix); `fallback` when its file cannot be read."""
    try:
        return load(stack)
    except (StackFileError, config.ConfigError):
        return fallback


def ran_on(job: str, placed: fleet.Placement, health: fleet.Health | None) -> str:
    """Which worker ran the job the manager deleted, and what happens there."""
    if placed.worker is None:
        offered = f" (offered to {', '.join(placed.nominated)}: MultiKueue withdraws it)" if placed.nominated else ""
        return f"job {job} had not started on any worker{offered}"
    if health is not None and health.active is False:
        return (f"job {job} ran on worker {fleet.unreachable(placed.worker, health)}: MultiKueue deletes its copy "
                "there once it reaches the worker again; until then its pods may still run")
    return f"job {job} ran on worker {placed.worker}: MultiKueue deletes its copy and its pods there"


def main(argv: list[str], s3_factory=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", help="the MPIJob, TrainJob or JobSet")
    parser.add_argument("--force", action="store_true", help="also a job `pulumi up` made (it will come back)")
    parser.add_argument("--bucket", help="the stack's bucket (default: its bucketName output)")
    common.add_cluster_args(parser)
    common.add_team_arg(parser)
    parser.add_argument("--context", help="the kubeconfig's context (default: the one named as the stack, else its "
                                          "current one)")
    parser.add_argument("--fleet", action="store_true", help="a fleet worker's --stack: the job in its manager's "
                                                             "queue (MultiKueue deletes its copy on the worker)")
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    placed = None
    try:
        cfg = common.load_stack(args)
        where = fleet.target(cfg, args.kubeconfig, args.context, args.fleet, load)
        kube = where.kube
        job = common.find_job(kube, args, cfg)
        if where.on_manager:
            placed, health = fleet.where(kube, job)
        deleted = ops.cancel(kube, job, args.force)
    except (SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    if placed is None:
        print(f"deleted {', '.join(deleted)}")
    else:
        print(f"deleted {', '.join(deleted).replace(' and its pods', '')} on the fleet's manager")
        print(ran_on(args.job, placed, health))
        if placed.worker is not None:  # its checkpoints are where that worker's stack put them
            try:
                worker_stack = fleet.stack_of(placed.worker, where.manager, where.manager_stack)
                cfg, args.stack = worker_config(worker_stack, cfg), worker_stack
            except fleet.FleetError as err:  # not the manager's bucket either: --bucket names it
                print(f"{PROG}: warning: its checkpoints cannot be looked up: {err}", file=sys.stderr)
                args.stack = None
    team = common.team_in(cfg, job["metadata"]["namespace"])
    for line in checkpoint_lines(job, cfg, args.bucket or stack_bucket(args.stack), s3_factory, team):
        print(line)
    sys.stdout.flush()
    return 0
