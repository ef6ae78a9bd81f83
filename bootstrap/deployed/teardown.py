"""The destroy of a deployed stack: report, guard the bucket's data, confirm, destroy with the hooks, say what was kept.

Once the destroy has ended, no node of the cluster is left, and nothing can pull through the image cache any
more: the repositories under its prefixes are deleted again. The rule's delete hook deleted them already, but
Pulumi deletes the rule in parallel with the node groups (they do not depend on it, and `submit`ted jobs are
not in the stack at all), and a pull before the rule was gone re-creates a repository, which would bill on.

A fleet's worker is drained first, once the destroy is confirmed (bootstrap/deployed/draining.py, drain_worker):
its ClusterQueues get stopPolicy HoldAndDrain and the destroy waits (--drain-timeout) until none of its jobs is
admitted or has a pod left; a drain that does not end puts their stopPolicy back and stops it (--skip-drain goes
on without); at the end it says to remove the worker from the manager's fleet.workers. A fleet's manager is
refused, before the confirmation, while it has unfinished jobs (draining.manager_jobs; --abandon-fleet-jobs).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bootstrap import stackfile
from bootstrap.deployed import automation, destroy_report
from bootstrap.deployed.draining import drain_worker, manager_jobs
from components.aws.lookups import DESTROYING_ENV
from components.core import config
from components.core.config.cluster import stack_name
from components.hooks import SKIP_EXPORT_ENV, bucket_guard, image_cache


def bucket_holds_objects(cfg: config.StackConfig, bucket: str) -> bool | None:
    """Whether the bucket holds any object version; None when it cannot be told (the hook still guards)."""
    import botocore.exceptions

    from components.hooks.session import aws_session

    try:
        s3 = aws_session(cfg.region, cfg.aws_profile, cfg.aws_role_arn).client("s3")
        return bucket_guard.holds_objects(s3, bucket)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        return None


def ecr_client(cfg: config.StackConfig) -> Any:
    """ECR in the stack's region, as the stack's identity (the hooks' own)."""
    from components.hooks.session import aws_session

    return aws_session(cfg.region, cfg.aws_profile, cfg.aws_role_arn).client("ecr")


def sweep_image_cache(cfg: config.StackConfig, prefixes: list[str], ecr_of: Callable[[config.StackConfig], Any],
                      out: Callable[[str], None]) -> bool:
    """Delete what is cached under `prefixes` now that no node is left; False (and how to do it) when it cannot."""
    import botocore.exceptions

    swept = True
    for prefix in prefixes:
        try:
            image_cache.delete_cached_images(ecr_of(cfg), prefix, log=out)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
            swept = False
            print(f"\ngpucluster: the stack is destroyed, but the repositories cached under {prefix}/ could not be "
                  f"deleted ({err}); they bill for storage until you delete them:\n"
                  f"  for r in $(aws ecr describe-repositories --region {cfg.region} --query "
                  f"\"repositories[?starts_with(repositoryName, '{prefix}/')].repositoryName\" --output text); "
                  f"do aws ecr delete-repository --region {cfg.region} --force --repository-name \"$r\"; done",
                  file=sys.stderr)
    return swept


def fleet_reminder(stack: str, cfg: config.StackConfig) -> str:
    manager = stack_name(cfg.fleet.manager or "")
    return (f"\n{stack} was a worker of fleet {manager}: remove it from gpucluster:fleet.workers in "
            f"Pulumi.{manager}.yaml and run `pulumi up --stack {manager}` (until then the manager keeps a "
            f"MultiKueueCluster for it that cannot connect)")


def run(args: argparse.Namespace, select: Callable[[str], automation.DeployedStack] = automation.select,
        holds_objects: Callable[[config.StackConfig, str], bool | None] = bucket_holds_objects,
        ask: Callable[[str], str] | None = None, out: Callable[[str], None] = print,
        project_dir: Path = stackfile.PROJECT_DIR,
        ecr_of: Callable[[config.StackConfig], Any] = ecr_client,
        drain: Callable[[argparse.Namespace, config.StackConfig, Callable[[str], None]], int] = drain_worker,
        fleet_jobs: Callable[[argparse.Namespace, config.StackConfig, Callable[[str], None]], int] = manager_jobs
        ) -> int:
    try:
        cfg, _, _ = stackfile.load_stack(args.stack, project_dir)
    except (stackfile.StackFileError, config.ConfigError) as err:
        code = stackfile.report(err)  # a bad stack is a problem found (1), an unreadable file could not run (2)
        if code == 1:
            # The destroy runs the program, which stops on the same problems.
            print("fix the stack file first: `pulumi destroy` runs the program, which refuses a bad config",
                  file=sys.stderr)
        return code
    try:
        stack = select(args.stack)
        resources = automation.state_resources(stack)
    except automation.AutomationError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 2

    report = destroy_report.build(resources, cfg)
    if report.resource_count == 0:
        out(f"stack {args.stack} has no resources: nothing to destroy")
        return 0
    out(report.render())
    env = {DESTROYING_ENV: "1"}
    if report.bucket_to_delete:
        holds = holds_objects(cfg, report.bucket_to_delete)
        if holds and not args.delete_bucket_data:
            print(f"\ngpucluster: s3://{report.bucket_to_delete} holds objects and storage.retainOnDestroy is false; "
                  "add --delete-bucket-data to delete them with it, or set storage.retainOnDestroy: true and "
                  "`pulumi up` to keep it", file=sys.stderr)
            return 1
        if holds is None and not args.delete_bucket_data:
            out(f"\nnote: cannot tell whether s3://{report.bucket_to_delete} holds objects; if it does, the destroy "
                "stops before deleting it (add --delete-bucket-data to delete them)")
        if args.delete_bucket_data:
            env[bucket_guard.CONFIRM_ENV] = report.bucket_to_delete
    if args.skip_export:
        out(f"\nWARNING: --skip-export: {', '.join(report.exports) or 'no link'} not exported; what the file "
            "system holds and S3 does not is lost")
        env[SKIP_EXPORT_ENV] = "1"
    if cfg.fleet is not None and cfg.fleet.role == "manager" and (code := fleet_jobs(args, cfg, out)) != 0:
        return code
    if not automation.confirm(f"\nDestroy stack {args.stack}?", args.stack, args.yes, ask):
        print("gpucluster: not confirmed (type the stack name, or pass --yes); nothing was done", file=sys.stderr)
        return 1
    worker = cfg.fleet is not None and cfg.fleet.role == "worker"
    if worker and getattr(args, "skip_drain", False):
        out(f"\nWARNING: --skip-drain: {args.stack}'s admitted jobs are not drained; the manager requeues them only "
            "after fleet.workerLostMinutes")
    elif worker and (code := drain(args, cfg, out)) != 0:
        return code

    try:
        automation.with_env(env, lambda: stack.destroy(run_program=True, on_output=out, color="never"))
    except Exception as err:  # automation.CommandError and kin: the CLI's own message says what stopped
        print(f"\ngpucluster: the destroy stopped: {automation.last_error_line(err)}", file=sys.stderr)
        print("Nothing that holds data was deleted unexported: a failed export keeps the file system and its "
              "S3 link. Fix the cause above and run this again; it resumes where it stopped.", file=sys.stderr)
        return 1
    out(f"\nStack {args.stack} destroyed.")
    swept = sweep_image_cache(cfg, report.cache_prefixes, ecr_of, out)
    if report.kept:
        out("Kept:\n" + "\n".join(f"  - {k}" for k in report.kept))
    if line := report.adopt_line():
        out(f"\nTo use s3://{report.kept_bucket} again (its datasets and checkpoints) in the next `pulumi up`:\n"
            f"  {line}\nor in Pulumi.{args.stack}.yaml under config:\n"
            f"  {config.NAMESPACE}:storage:\n    bucketName: {report.kept_bucket}")
    if worker:
        out(fleet_reminder(args.stack, cfg))
    return 0 if swept else 1
