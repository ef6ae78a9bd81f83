"""`python -m bootstrap status [--stack S] [--team T]`: every job with its phase, nodes, elapsed time, cost so far,
goodput, deadline; with --team, the team's jobs and its spend this month against its budget.

Reads the namespace's MPIJobs and TrainJobs and their Kueue Workloads
(bootstrap/jobs/state.py): Queued (with its place in the queue), Admitted
(nodes coming), Running, Succeeded, Failed, Evicted. Elapsed time runs
from admission; the cost is nodes x the pool's price (the stack's
prices) over it. Goodput is training over paid GPU-seconds so far, from
the goodput controller's record of the job (bootstrap/jobs/goodput.py;
`report JOB` has the breakdown), "-" without one. A team's spend is
Prometheus' (bootstrap/jobs/budget.py): GPU requests of its running pods
at the pools' prices, since 00:00 UTC on the 1st; with --stack, also what
its unfinished jobs may still cost (bootstrap/jobs/committed.py), which
`submit` holds against the budget too.

Exit 0; 1 when a job failed, the team is at or past its budget, or the
--stack is bad; 2 when the cluster, the stack file or, with --team,
Prometheus could not be read (the jobs are listed all the same).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import budget, goodput, ops, state
from bootstrap.stackfile import StackFileError
from bootstrap.verbs.jobs import common
from components.core import config
from components.core.goodput import accounting

PROG = "python -m bootstrap status"


def job_goodput(record: dict | None, job: dict, now: datetime) -> float | None:
    """Training over paid GPU-seconds so far, from the controller's record of this job (not of an earlier job of
    its name); None without one."""
    if record is None or record.get("uid") != job["metadata"].get("uid"):
        return None
    return accounting.breakdown(record, now.timestamp())["goodput"]


def rows(kube, namespace: str, cfg: config.StackConfig | None, now: datetime,
         read: tuple[list[dict], list[dict]] | None = None) -> list[dict]:
    """A row per job; `read`: the namespace's Workloads and jobs when already listed."""
    workloads, jobs = read or (kube.list(kinds.WORKLOAD, namespace), ops.jobs(kube, namespace))
    recorded = goodput.records(kube, namespace) if jobs else {}
    out = []
    for job in jobs:
        workload = state.workload_of(job, workloads)
        pool = (job["metadata"].get("labels") or {}).get(state.POOL_LABEL)
        item = state.row(job, workload, common.price_of(cfg, pool), now)
        position = state.queue_position(workload, workloads) if workload is not None else None
        item["queuePosition"] = position.position if position else None
        item["goodput"] = job_goodput(recorded.get(job["metadata"]["name"]), job, now)
        out.append(item)
    return out


def render(items: list[dict]) -> str:
    if not items:
        return "no jobs"
    header = ("JOB", "KIND", "PHASE", "POOL", "NODES", "ELAPSED", "COST", "GOODPUT", "DEADLINE LEFT")
    table = [header]
    for r in items:
        phase = r["phase"] + (f" #{r['queuePosition']}" if r["queuePosition"] else "")
        cost = f"${r['costUsd']:,.2f}" if r["costUsd"] is not None else "-"
        table.append((r["name"], r["kind"], phase, r["pool"] or "-", str(r["nodes"]),
                      common.duration(r["elapsedSeconds"]) if r["startedAt"] else "-", cost,
                      f"{r['goodput']:.1%}" if r.get("goodput") is not None else "-",
                      common.duration(r["deadlineLeftSeconds"])))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table)


def team_spend(query: budget.Query, team: str, namespace: str, budget_usd: float | None, now: datetime,
               retention_days: int | None) -> dict[str, Any]:
    """The --team part of the report: spend this month (or why it is unknown) against the budget."""
    out: dict[str, Any] = {"team": team, "namespace": namespace, "budgetUsd": budget_usd, "spend": None,
                           "spendUnknown": None, "usedShare": None, "leftUsd": None}
    try:
        spent = budget.read(query, namespace, now, retention_days)
    except budget.SpendUnknown as err:
        out["spendUnknown"] = str(err)
        return out
    out["spend"] = spent.to_dict()
    if budget_usd is not None:
        out["usedShare"] = round(spent.usd / budget_usd, 4)
        out["leftUsd"] = round(budget_usd - spent.usd, 2)
    return out


def committed_phrase(c: dict[str, Any] | None) -> str:
    """"; committed by N unfinished jobs: $X" (Committed.phrase, of its JSON), "" for none or unknown."""
    if not c or not c["jobs"]:
        return ""
    n = c["jobs"]
    amount = budget.usd(c["usd"]) if c["usd"] is not None else f"unlimited ({', '.join(c['unbounded'])} unbounded)"
    return f"; committed by {n} unfinished job{'' if n == 1 else 's'}: {amount}"


def render_spend(t: dict[str, Any]) -> str:
    head = f"team {t['team']} (namespace {t['namespace']})"
    held = committed_phrase(t.get("committed"))
    if t["spend"] is None:
        return f"{head}: spend this month unknown: {t['spendUnknown']}{held}"
    s = t["spend"]
    line = (f"{head}: spent {budget.usd(s['usd'])} this month (since {s['since'][:10]} UTC), "
            f"{s['gpuHours']:,.1f} GPU-hours")
    if t["budgetUsd"] is not None:
        line += (f"; budget {budget.usd(t['budgetUsd'])}: {t['usedShare']:.1%} used, "
                 f"{budget.usd(t['leftUsd'])} left")
    line += held
    if s["partial"]:
        line += f"\n(a lower bound: {s['partial']})"
    return line


def main(argv: list[str], now: datetime | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print a JSON list (with --team, an object)")
    parser.add_argument("--team", help="a team: its namespace's jobs, and its spend this month against its budget")
    common.add_cluster_args(parser)
    common.add_prometheus_args(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    now = now or datetime.now(UTC)
    try:
        cfg = common.load_stack(args)
        team = common.team_of(cfg, args.team) if args.team else None
        args.namespace = common.team_namespace(args, cfg) or args.namespace
        kube, namespace = common.cluster(args, cfg)
        read = (kube.list(kinds.WORKLOAD, namespace), ops.jobs(kube, namespace))
        items = rows(kube, namespace, cfg, now, read)
        # What the team's unfinished jobs may still cost, at the stack's prices (none known without --stack).
        held = common.committed(kube, cfg, namespace, now, *read) if args.team and cfg is not None else None
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError, common.BadArgument) as err:
        return common.fail(PROG, err)
    code = 1 if any(r["phase"] == state.FAILED for r in items) else 0
    if not args.team:
        print(json.dumps(items, indent=2) if args.json else render(items))
        return code
    spent = team_spend(common.prometheus(args, kube), args.team, namespace,
                       team.monthly_budget_usd if team else None, now,
                       cfg.observability.retention_days if cfg else None)
    spent["committed"] = held.to_dict() if held is not None else None
    if args.json:
        print(json.dumps({**spent, "jobs": items}, indent=2))
    else:
        print(render(items))
        print(render_spend(spent))
    if spent["spend"] is None:
        return 2
    over = spent["budgetUsd"] is not None and spent["spend"]["usd"] >= spent["budgetUsd"]
    return 1 if over else code
