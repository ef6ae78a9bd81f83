"""`python -m bootstrap validate --stack S [--pool P]`: is this cluster fit to train? One node, then two.

The guide's staged check, as MPIJobs through Kueue (components/core/kube/
validation.py): one node (GPUs and EFA devices allocatable as the catalog
says, the file system mounted and read, all_reduce over NVLink), then two
nodes (each worker reaches the other, all_reduce over EFA judged against
the bus bandwidth nccl-report expects). It shows what each stage waits for
(the queue, nodes from zero: minutes) and removes what it created, on
Ctrl-C too. A pool's nodes are billed while a stage runs.

Exit 0: every stage passed. Exit 1: a stage failed or timed out, or the
stack is bad. Exit 2: the cluster or the stack file could not be read, no
such --pool, or it was interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import validation
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config
from components.core.kube.validation import STAGES
from components.core.storage.fsx_volume import CLAIM_NAME

PROG = "python -m bootstrap validate"


def main(argv: list[str], sleep=None, clock=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--pool", help="the GPU pool (default: every pool; the two-node stage needs maxNodes >= 2)")
    parser.add_argument("--stage", choices=STAGES, help="one stage only (default: one node, then two)")
    parser.add_argument("--timeout", type=int, default=45, metavar="MIN",
                        help="per stage, from submission: the queue, nodes from zero, the test (default 45)")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    common.add_cluster_args(parser, stack_required=True)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        pools = [p for p in cfg.gpu_pools if args.pool in (None, p.name)]
        if not pools:
            raise KubeError(0, "", f"no pool {args.pool!r}; pools: {', '.join(p.name for p in cfg.gpu_pools)}")
        kube, namespace = common.cluster(args, cfg)
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError) as err:
        return common.fail(PROG, err)
    extra = {k: v for k, v in (("sleep", sleep), ("clock", clock)) if v is not None}
    results = []
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else \
        (lambda line: print(line, flush=True))
    try:
        for pool in pools:
            for stage in [args.stage] if args.stage else list(STAGES):
                if stage == "two-node" and pool.max_nodes < 2:
                    say(f"{pool.name}: two-node skipped (maxNodes {pool.max_nodes})")
                    continue
                say(f"{pool.name}: {stage} stage, {1 if stage == 'one-node' else 2} x {pool.instance_type}")
                result = validation.run_stage(kube, pool, stage, namespace, CLAIM_NAME, args.timeout * 60, say,
                                              **extra)
                results.append((pool.name, result))
                say(f"{pool.name} {stage}: {result.verdict}")
                for line in result.details:
                    say(f"  {line}")
                if result.verdict != "PASS":
                    break  # two nodes are not worth testing when one is not right
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; what it created is removed", file=sys.stderr)
        return 2
    except (ClusterUnreachable, KubeError) as err:
        return common.fail(PROG, err)
    if args.json:
        print(json.dumps([{"pool": p, "stage": r.stage, "verdict": r.verdict, "details": r.details}
                          for p, r in results], indent=2))
    return 0 if results and all(r.verdict == "PASS" for _, r in results) else 1
