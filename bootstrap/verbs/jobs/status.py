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

On a fleet's manager (`--stack <manager>`, or a worker's stack with
--fleet; the cluster reached must have the fleet's MultiKueueConfig, else
exit 2 naming the context it is), each job also has its WORKER (bootstrap/jobs/fleet.py): "-"
while it waits in the manager's queue, "nominated: a,b" while MultiKueue
offers it to workers, the worker that admitted it, and "(unreachable since
<time>: <reason>)" after it when the manager has lost that worker; its cost
is at that worker's prices. `--json` rows carry worker, workerActive,
nominatedWorkers, workerUnreachable and fleetCheck.

Exit 0; 1 when a job failed, the team is at or past its budget, or the
--stack is bad; 2 when the cluster, the stack file or, with --team,
Prometheus could not be read (the jobs are listed all the same).
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from bootstrap import stackfile
from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs import budget, fleet, goodput, ops, state
from bootstrap.jobs.render import SubmitError
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


class Workers:
    """On a fleet's manager: each worker's health and stack file (for its prices), read once."""

    def __init__(self, kube, cfg: config.StackConfig | None, manager: config.StackConfig | None,
                 manager_stack: str | None = None):
        self.health = fleet.workers_health(kube)
        self.cfg, self.manager, self.manager_stack = cfg, manager, manager_stack
        self._configs: dict[str, config.StackConfig | None] = {}

    def config_of(self, worker: str | None) -> config.StackConfig | None:
        """The worker's stack config (its prices); None until a worker admits the job; the --stack's when the
        worker's file cannot be read or the manager's names no stack for it (the fleet's workers name their pools
        alike)."""
        if worker is None:
            return None
        if worker not in self._configs:
            try:
                stack = fleet.stack_of(worker, self.manager, self.manager_stack)
                self._configs[worker] = stackfile.load_stack(stack, standins=True)[0]
            except (StackFileError, config.ConfigError, fleet.FleetError):
                self._configs[worker] = self.cfg
        return self._configs[worker]


def rows(kube, namespace: str, cfg: config.StackConfig | None, now: datetime,
         read: tuple[list[dict], list[dict]] | None = None, workers: Workers | None = None) -> list[dict]:
    """A row per job; `read`: the namespace's Workloads and jobs when already listed; `workers`: on a manager."""
    workloads, jobs = read or (kube.list(kinds.WORKLOAD, namespace), ops.jobs(kube, namespace))
    recorded = goodput.records(kube, namespace) if jobs else {}
    out = []
    for job in jobs:
        workload = state.workload_of(job, workloads)
        pool = (job["metadata"].get("labels") or {}).get(state.POOL_LABEL)
        placed = fleet.placement(workload) if workers is not None else None
        prices = workers.config_of(placed.worker) if workers is not None else cfg
        item = state.row(job, workload, common.price_of(prices, pool), now)
        position = state.queue_position(workload, workloads) if workload is not None else None
        item["queuePosition"] = position.position if position else None
        item["goodput"] = job_goodput(recorded.get(job["metadata"]["name"]), job, now)
        if placed is not None:
            health = workers.health.get(placed.worker) if placed.worker else None
            if placed.worker and health is None:
                health = fleet.Health(None, None, "", "")
            item.update(fleet.fields(placed, health))
            item["workerCell"] = fleet.worker_cell(placed, health)
        out.append(item)
    return out


def render(items: list[dict], workers: list[str] | None = None) -> str:
    """The table; `workers`: on a fleet's manager, each row's WORKER cell (fleet.worker_cell)."""
    if not items:
        return "no jobs"
    header = ("JOB", "KIND", "PHASE", "POOL", "NODES", "ELAPSED", "COST", "GOODPUT", "DEADLINE LEFT") + \
        (("WORKER",) if workers is not None else ())
    table = [header]
    for i, r in enumerate(items):
        phase = r["phase"] + (f" #{r['queuePosition']}" if r["queuePosition"] else "")
        cost = f"${r['costUsd']:,.2f}" if r["costUsd"] is not None else "-"
        table.append((r["name"], r["kind"], phase, r["pool"] or "-", str(r["nodes"]),
                      common.duration(r["elapsedSeconds"]) if r["startedAt"] else "-", cost,
                      f"{r['goodput']:.1%}" if r.get("goodput") is not None else "-",
                      common.duration(r["deadlineLeftSeconds"])) + ((workers[i],) if workers is not None else ()))
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
    parser.add_argument("--context", help="the kubeconfig's context (default: the one named as the stack, else its "
                                          "current one)")
    parser.add_argument("--fleet", action="store_true", help="a fleet worker's --stack: the jobs in its manager's "
                                                             "queue, with the worker each runs on")
    common.add_prometheus_args(parser)
    args = common.parse(parser, argv)
    if isinstance(args, int):
        return args
    now = now or datetime.now(UTC)
    try:
        cfg = common.load_stack(args)
        team = common.team_of(cfg, args.team) if args.team else None
        args.namespace = common.team_namespace(args, cfg) or args.namespace
        namespace = args.namespace or (cfg.training_namespace if cfg else common.DEFAULT_NAMESPACE)
        where = fleet.target(cfg, args.kubeconfig, args.context, args.fleet,
                             lambda name: stackfile.load_stack(name, standins=True)[0])
        kube = where.kube
        read = (kube.list(kinds.WORKLOAD, namespace), ops.jobs(kube, namespace))
        workers = Workers(kube, cfg, where.manager, where.manager_stack) if where.on_manager else None
        items = rows(kube, namespace, cfg, now, read, workers)
        # What the team's unfinished jobs may still cost, at the stack's prices (none known without --stack).
        held = common.committed(kube, cfg, namespace, now, *read) if args.team and cfg is not None else None
    except (config.ConfigError, StackFileError, ClusterUnreachable, KubeError, common.BadArgument,
            SubmitError) as err:
        return common.fail(PROG, err)
    cells = [item.pop("workerCell") for item in items] if where.on_manager else None
    code = 1 if any(r["phase"] == state.FAILED for r in items) else 0
    if not args.team:
        print(json.dumps(items, indent=2) if args.json else render(items, cells))
        return code
    spent = team_spend(common.prometheus(args, kube), args.team, namespace,
                       team.monthly_budget_usd if team else None, now,
                       cfg.observability.retention_days if cfg else None)
    spent["committed"] = held.to_dict() if held is not None else None
    if args.json:
        print(json.dumps({**spent, "jobs": items}, indent=2))
    else:
        print(render(items, cells))
        print(render_spend(spent))
    if spent["spend"] is None:
        return 2
    over = spent["budgetUsd"] is not None and spent["spend"]["usd"] >= spent["budgetUsd"]
    return 1 if over else code
