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

Exit 0: cancelled. Exit 1: the --stack is bad (every problem listed).
Exit 2: not cancelled (the reason on stderr: no such job, a job `pulumi up`
owns, the cluster cannot be reached, an unreadable stack file).
"""

from __future__ import annotations

import argparse
import sys

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import checkpoints, ops
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


def main(argv: list[str], s3_factory=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", help="the MPIJob, TrainJob or JobSet")
    parser.add_argument("--force", action="store_true", help="also a job `pulumi up` made (it will come back)")
    parser.add_argument("--bucket", help="the stack's bucket (default: its bucketName output)")
    common.add_cluster_args(parser)
    common.add_team_arg(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        kube, _ = common.cluster(args, cfg)
        job = common.find_job(kube, args, cfg)
        deleted = ops.cancel(kube, job, args.force)
    except (SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    print(f"deleted {', '.join(deleted)}")
    team = common.team_in(cfg, job["metadata"]["namespace"])
    for line in checkpoint_lines(job, cfg, args.bucket or stack_bucket(args.stack), s3_factory, team):
        print(line)
    sys.stdout.flush()
    return 0
