"""`python -m bootstrap report [--stack S] JOB [--json]`: where a job's paid GPU-hours went, goodput, cost per step.

Splits the job's life, from its creation to its end (its nodes gone after it
finished; now while it runs), into queued, scaling up, pulling the image,
initialising, training, checkpointing, lost to restarts and idle tail, which
add up to its wall-clock time exactly (components/core/goodput/accounting.py
defines each). Goodput is training over paid GPU-seconds: all but queued,
unless the pool's nodes bill while the job waits (a capacity reservation,
minNodes). Training and lost work come from the job's step lines
(`gpucluster-step ...`, examples/train_synthetic.py prints them; README,
Goodput): useful steps, and with --stack the cost at the pool's price and per
useful step. Then what the goodput controller's remediation did to the job.

Reads the controller's record of the job (ConfigMap gpucluster-goodput-job-JOB in
its namespace: what it saw of every attempt) and what is live now (the job,
its Workload, pods, nodes, rank 0's log: bootstrap/jobs/goodput.py); a job
deleted since is reported from its record. A team's job is in its team's
namespace: `--team T`, or found there for a stack job with `team:`.

Exit 0; 1 when there is no such job nor a record of it, or the --stack is bad;
2 when the cluster or the stack file could not be read.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import goodput
from bootstrap.jobs.render import SubmitError
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config
from components.core.goodput import names

PROG = "python -m bootstrap report"
UNPAID = "not paid"  # queued, on a pool that bills only running nodes


class NoSuchJob(SubmitError):
    """Neither the job nor a record of it: nothing could be read (exit 2, as `logs` and `cancel` of a missing job)."""


def find(kube, args: argparse.Namespace, cfg: config.StackConfig | None, now: datetime) -> goodput.Goodput:
    try:
        job = common.find_job(kube, args, cfg)
    except SubmitError as err:
        namespace = common.job_namespace(args, cfg, args.job)
        if (record := goodput.read_record(kube, namespace, args.job)) is None:
            raise NoSuchJob(f"{err}; no goodput record of it either (ConfigMap {goodput.record_name(args.job)})") \
                from None
        return goodput.of_record(record, now)
    return goodput.of_job(kube, job, now, cfg)


def _hours(gpu_seconds: float) -> str:
    return f"{gpu_seconds / 3600:,.2f}"


def _when(iso: str | None) -> str:
    return iso.replace("T", " ").replace("Z", " UTC") if iso else "-"


def render(g: dict[str, Any]) -> str:
    phases, gpu_seconds, wall = g["phases"], g["gpu_seconds"], g["wall_clock_seconds"]
    state = g["outcome"] or "running"
    if not g["live"]:
        state += " (the job is gone: from the goodput controller's record)"
    lines = [f"{g['name']} ({g['kind']} in {g['namespace']}): {state}; {g['nodes']} nodes x {g['gpus_per_node']} "
             f"GPUs = {g['gpus']} GPUs",
             f"from {_when(g['created'])} to {_when(g['end'])}: {common.duration(wall)} ({wall:,} s)", ""]
    table = [("PHASE", "SECONDS", "GPU-HOURS", "SHARE", "")]
    for phase in names.PHASES:
        unpaid = UNPAID if phase == "queued" and not g["bills_while_queued"] else ""
        table.append((phase, f"{phases[phase]:,}", _hours(gpu_seconds[phase]),
                      f"{phases[phase] / wall:.1%}" if wall else "-", unpaid))
    table.append(("total", f"{wall:,}", _hours(sum(gpu_seconds.values())), "100.0%" if wall else "-", ""))
    widths = [max(len(row[i]) for row in table) for i in range(5)]
    for row in table:
        cells = [row[0].ljust(widths[0]), *(cell.rjust(w) for cell, w in zip(row[1:4], widths[1:4], strict=True)),
                 row[4]]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    if g["goodput"] is None:
        lines.append("goodput: - (no paid time yet)")
    else:
        lines.append(f"goodput {g['goodput']:.1%}: {_hours(gpu_seconds['training'])} of "
                     f"{_hours(g['paid_gpu_seconds'])} paid GPU-hours trained the model")
    if not g["step_lines"]:
        lines.append("no step lines seen: training counts every second its containers ran (an upper bound); print "
                     "`gpucluster-step step=N time=T` on rank 0 after each step (README, Goodput)")
    steps = f"{g['steps']:,} useful steps" if g["steps"] else "no steps yet"
    if g["cost_usd"] is None:
        lines.append(f"{steps}; cost: give --stack for the pool's price")
    else:
        per_step = f": ${g['cost_per_useful_step_usd']:,.4f} per useful step" if g["steps"] else ""
        lines.append(f"cost ${g['cost_usd']:,.2f} at ${g['gpu_hour_usd']:,.2f} per GPU-hour; {steps}{per_step}")
    causes = "; ".join(f"{_when(f['at'])}: {f['reason']}" for f in g["failures"])
    lines.append(f"restarts: {g['restarts']}" + (f" ({causes})" if causes else ""))
    if g["remediations"]:
        lines.append("remediations (the goodput controller's, on the job):")
        for r in g["remediations"]:
            lines.append(f"  {r.get('at', '-')}  {r.get('action', '-')}  {r.get('node', '-')}  {r.get('reason', '-')}"
                         f"  (remediation {r.get('mode', '-')})")
    return "\n".join(lines)


def main(argv: list[str], now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("job", help="the MPIJob, TrainJob or JobSet")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    common.add_cluster_args(parser)
    common.add_team_arg(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    now = now or datetime.now(UTC)
    try:
        cfg = common.load_stack(args)
        kube, _ = common.cluster(args, cfg)
        found = find(kube, args, cfg, now).to_dict()
    except (SubmitError, config.ConfigError, StackFileError, ClusterUnreachable, KubeError,
            common.BadArgument) as err:
        return common.fail(PROG, err)
    print(json.dumps(found, indent=2) if args.json else render(found))
    return 0
