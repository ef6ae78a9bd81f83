"""`python -m bootstrap status [--stack S]`: every job with its phase, nodes, elapsed time, cost so far, deadline.

Reads the namespace's MPIJobs and TrainJobs and their Kueue Workloads
(bootstrap/jobs/state.py): Queued (with its place in the queue), Admitted
(nodes coming), Running, Succeeded, Failed, Evicted. Elapsed time runs
from admission; the cost is nodes x the pool's price (the stack's
prices) over it.

Exit 0; 1 when a job failed or the --stack is bad; 2 when the cluster or the
stack file could not be read.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import ops, state
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config

PROG = "python -m bootstrap status"


def rows(kube, namespace: str, cfg: config.StackConfig | None, now: datetime) -> list[dict]:
    workloads = kube.list(kinds.WORKLOAD, namespace)
    out = []
    for job in ops.jobs(kube, namespace):
        workload = state.workload_of(job, workloads)
        pool = (job["metadata"].get("labels") or {}).get(state.POOL_LABEL)
        item = state.row(job, workload, common.price_of(cfg, pool), now)
        position = state.queue_position(workload, workloads) if workload is not None else None
        item["queuePosition"] = position.position if position else None
        out.append(item)
    return out


def render(items: list[dict]) -> str:
    if not items:
        return "no jobs"
    header = ("JOB", "KIND", "PHASE", "POOL", "NODES", "ELAPSED", "COST", "DEADLINE LEFT")
    table = [header]
    for r in items:
        phase = r["phase"] + (f" #{r['queuePosition']}" if r["queuePosition"] else "")
        cost = f"${r['costUsd']:,.2f}" if r["costUsd"] is not None else "-"
        table.append((r["name"], r["kind"], phase, r["pool"] or "-", str(r["nodes"]),
                      common.duration(r["elapsedSeconds"]) if r["startedAt"] else "-", cost,
                      common.duration(r["deadlineLeftSeconds"])))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def main(argv: list[str], now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON list")
    common.add_cluster_args(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    try:
        cfg = common.load_stack(args)
        kube, namespace = common.cluster(args, cfg)
        items = rows(kube, namespace, cfg, now or datetime.now(UTC))
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError) as err:
        return common.fail(PROG, err)
    print(json.dumps(items, indent=2) if args.json else render(items))
    return 1 if any(r["phase"] == state.FAILED for r in items) else 0
