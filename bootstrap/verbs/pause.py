"""`python -m bootstrap pause|resume --stack S`: stop GPU billing without destroying anything.

pause writes `gpucluster:paused: true` (and `pauseMode`) into the stack
file and runs `pulumi up`: Kueue's ClusterQueue holds (stopPolicy Hold in
`finish` mode: admitted jobs run to completion, nothing new starts;
HoldAndDrain in `drain` mode: running jobs are evicted now) and every GPU
pool's floor drops to 0, so the autoscaler removes each node idleMinutes
after its last pod. The cluster, the file system and the queue of jobs stay;
resume sets `paused: false` and runs `pulumi up`, and queued jobs start.

On a pool with atomic scale-up, pause then cancels the scale-ups Kueue asked
for jobs that now wait (their ProvisioningRequests; --release-scale-ups does
only that, after a `pulumi up` of your own).

A drained job's pods get SIGTERM and their terminationGracePeriodSeconds:
a checkpoint is written only if the training code handles SIGTERM in time.
"""

from __future__ import annotations

import argparse

from bootstrap.deployed.pausing import release_only, run
from components.core import config


def _parser(verb: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m bootstrap {verb}", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="stack name: Pulumi.<stack>.yaml")
    parser.add_argument("--no-up", action="store_true", help="only write the stack file; run `pulumi up` yourself")
    parser.add_argument("--yes", action="store_true", help="apply without asking after the preview")
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: $KUBECONFIG, else the stack's "
                                             "output)")
    return parser


def main(argv: list[str]) -> int:
    parser = _parser("pause")
    parser.add_argument("--mode", choices=tuple(config.PAUSE_MODES),
                        help="finish: admitted jobs run to completion (default, or the stack's pauseMode); "
                             "drain: running jobs are evicted now")
    parser.add_argument("--release-scale-ups", action="store_true",
                        help="only cancel the scale-ups Kueue asked for jobs that wait in the paused queue (after "
                             "your own `pulumi up` of the pause; pause does it after its own)")
    args = parser.parse_args(argv)
    if args.release_scale_ups:
        return release_only(args.stack, args.kubeconfig)
    return run(args.stack, True, args.mode, not args.no_up, args.yes, kubeconfig=args.kubeconfig)


def resume_main(argv: list[str]) -> int:
    args = _parser("resume").parse_args(argv)
    return run(args.stack, False, None, not args.no_up, args.yes, kubeconfig=args.kubeconfig)
