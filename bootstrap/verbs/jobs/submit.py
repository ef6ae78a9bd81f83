"""`python -m bootstrap submit --stack S JOB` (or `--file job.yaml`): start a job without `pulumi up`.

Renders the manifest the stack would (the same NCCL/EFA preset, queue,
deadline and cost bound; bootstrap/jobs/render.py), creates it (and a
missing torchrun runtime, a job file's scripts) through the kubernetes
client, and prints where it stands in the queue. A stack job must have
`startOnUp: false` (`pulumi up` owns the others).

Exit 0: submitted. Exit 1: the stack or the job file has problems (each
listed, as `plan` lists them). Exit 2: not submitted for another reason
(on stderr: the job exists, the cluster cannot be reached, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import ops, render
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap submit"


def main(argv: list[str], sleep=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", nargs="?", help="a job of the stack (startOnUp: false)")
    parser.add_argument("--file", type=Path, help="a job file: one entry like those of gpucluster:jobs (YAML)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_cluster_args(parser, stack_required=True)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    if (args.job is None) == (args.file is None):
        print(f"{PROG}: error: give a job name or --file, one of them", file=sys.stderr)
        return 2
    try:
        cfg = common.load_stack(args)
        # Checked before connecting, so a bad job file fails fast; rendered again with the image cache.
        render.from_file(args.stack, args.file) if args.file else render.from_stack(cfg, args.job)
        kube, namespace = common.cluster(args, cfg)
        cache = ops.image_cache(kube, namespace)
        sub = (render.from_file(args.stack, args.file, image_cache=cache) if args.file
               else render.from_stack(cfg, args.job, image_cache=cache))
        done = ops.submit(kube, sub, **({"sleep": sleep} if sleep else {}))
    except (render.SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError) as err:
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
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    deadline = f"; deadline {common.duration(sub.deadline_seconds)}" if sub.deadline_seconds else "; no deadline"
    print(f"submitted {sub.kind} {sub.name} to {sub.namespace}: {sub.job.nodes} x {sub.pool.instance_type}, "
          f"${sub.price_per_hour:,.2f}/h while it runs{deadline}")
    print(f"created: {', '.join(done.created)}")
    if done.workload is None:
        print("queue: Kueue has not queued it yet (its Workload appears within seconds): `python -m bootstrap "
              "status` shows it")
    elif position is None:
        print("queue: admitted at once: its nodes are being added (minutes from zero)")
    else:
        ahead = f" (after {', '.join(position.ahead)})" if position.ahead else ""
        print(f"queue: position {position.position} of {position.pending} waiting in {position.cluster_queue}{ahead}")
    print(f"follow it: python -m bootstrap logs {sub.name} -f --stack {args.stack}")
    return 0
