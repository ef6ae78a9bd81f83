"""`python -m bootstrap destroy --stack S`: export FSx to S3, destroy the stack, keep the bucket.

The safe way to tear a stack down:

1. reads the stack's state and config and prints what will be deleted, in
   which order, and what is kept (the bucket, the EKS log group, the KMS
   key's waiting period);
2. refuses when the bucket would be deleted with objects in it, unless
   --delete-bucket-data says so; asks you to type the stack name (or --yes);
3. a fleet's manager is refused while it has unfinished jobs (queued ones
   exist only on it; its running ones are deleted on their workers with
   it): they are listed, with how to keep them, unless
   --abandon-fleet-jobs; a fleet's worker is drained once confirmed: its
   ClusterQueues get stopPolicy HoldAndDrain and the destroy waits until
   none of its jobs is admitted or has a pod left (evicted pods write
   their checkpoint in their grace period; the manager sends the jobs to
   other workers); a drain that fails, times out (--drain-timeout, 0: no
   wait) or is interrupted puts back each ClusterQueue's stopPolicy and
   stops (--skip-drain goes on without draining);
4. runs `pulumi destroy` with the program (Automation API, run_program), so
   the delete hooks run: every S3 link exports the file system first, and a
   failed or timed-out export stops the destroy with the data in place;
5. prints what was kept, and the exact line that makes the next `pulumi up`
   link the kept bucket instead of creating a new one.

Exit codes: 0 destroyed (or nothing to destroy); 1 a bad stack (every
problem listed: the destroy runs the program, which refuses it), refused or
failed (the pulumi CLI's failure, whatever its cause), a worker's jobs
still there at --drain-timeout, a manager with unfinished jobs; 2 the
stack cannot be read (an unreadable stack file, no CLI, no login, no such
stack), a worker to drain or a manager to list cannot be reached (or is
not the fleet's), a drain interrupted.
"""

from __future__ import annotations

import argparse

from bootstrap.deployed.draining import DRAIN_TIMEOUT_SECONDS
from bootstrap.deployed.teardown import run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap destroy", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="the stack to destroy (Pulumi.<stack>.yaml)")
    parser.add_argument("--yes", action="store_true", help="do not ask; destroy after printing the report")
    parser.add_argument("--delete-bucket-data", action="store_true",
                        help="with storage.retainOnDestroy: false, delete the bucket even if it holds objects")
    parser.add_argument("--skip-export", action="store_true",
                        help="delete the file system without exporting it to S3 first (its unexported files are lost)")
    parser.add_argument("--skip-drain", action="store_true",
                        help="a fleet's worker: destroy without draining its jobs first (the manager requeues them "
                             "only after fleet.workerLostMinutes)")
    parser.add_argument("--drain-timeout", type=float, default=DRAIN_TIMEOUT_SECONDS,
                        help="a fleet's worker: seconds to wait for its jobs to leave, 0 for no wait (default "
                             f"{DRAIN_TIMEOUT_SECONDS})")
    parser.add_argument("--abandon-fleet-jobs", action="store_true",
                        help="a fleet's manager: destroy it though it has unfinished jobs (its queued ones are lost, "
                             "its running ones deleted on their workers)")
    parser.add_argument("--kubeconfig", help="a fleet's worker or manager: kubeconfig with a context named as the "
                                             "stack (default: $KUBECONFIG, else the stack's output)")
    parser.add_argument("--context", help="the kubeconfig's context of the fleet's worker or manager (default: the "
                                          "one named as the stack)")
    return run(parser.parse_args(argv))
