"""What the job verbs share: which cluster, namespace and Prometheus, the stack when given, durations as people
read them."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from typing import Any

from bootstrap import stackfile
from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.cluster.connect import connect
from bootstrap.jobs import budget, ops
from bootstrap.jobs import committed as committed_jobs
from bootstrap.jobs.committed import Committed
from components.core import config
from components.core.config.teams import TeamConfig
from components.core.observability import spend

DEFAULT_NAMESPACE = "training"


class BadArgument(Exception):
    """An argument names what the stack lacks (exit 2, as argparse's usage errors)."""


def add_cluster_args(parser: argparse.ArgumentParser, stack_required: bool = False) -> None:
    parser.add_argument("--stack", required=stack_required,
                        help="the stack: its jobs, prices, training namespace and `kubeconfig` output")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else the stack's output)")
    parser.add_argument("--namespace", help=f"the jobs' namespace (default: the stack's, else {DEFAULT_NAMESPACE})")


def add_prometheus_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus-url", default=os.environ.get(budget.URL_ENV) or None,
                        help="Prometheus' URL, for a team's spend (e.g. http://localhost:9090 through a kubectl "
                             f"port-forward; default: ${budget.URL_ENV}, else the API server's proxy to its Service)")


def prometheus(args: argparse.Namespace, kube: Kube) -> budget.Query:
    return budget.url_query(args.prometheus_url) if args.prometheus_url else budget.proxy_query(kube)


def team_of(cfg: config.StackConfig | None, name: str) -> TeamConfig | None:
    """The stack's team (None without --stack: its namespace is its name); a name the stack lacks is an error."""
    if cfg is None:
        return None
    team = next((t for t in cfg.teams if t.name == name), None)
    if team is None:
        raise BadArgument(f"no team {name!r} in stack {cfg.stack}; its teams: "
                          f"{', '.join(t.name for t in cfg.teams) or '(none)'}")
    return team


def add_team_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--team", help="the job is team T's: in its namespace (a stack job with `team:` is found "
                                       "there without it)")


def team_namespace(args: argparse.Namespace, cfg: config.StackConfig | None) -> str | None:
    """--team's namespace (its name without --stack), None without --team; a --namespace that is not it is an
    error."""
    if not args.team:
        return None
    team = team_of(cfg, args.team)
    namespace = team.namespace if team else args.team
    if args.namespace not in (None, namespace):
        raise BadArgument(f"--namespace {args.namespace} is not team {args.team}'s ({namespace}); give one of them")
    return namespace


def job_namespace(args: argparse.Namespace, cfg: config.StackConfig | None, job: str) -> str:
    """Where job `job` is: --team's namespace, else --namespace, else a stack job's own (cfg.namespace_of: its
    team's when it has `team:`), else the training namespace."""
    if (namespace := team_namespace(args, cfg)) is not None:
        return namespace
    if args.namespace:
        return args.namespace
    if cfg is None:
        return DEFAULT_NAMESPACE
    match = next((j for j in cfg.jobs if j.name == job), None)
    return cfg.namespace_of(match) if match is not None else cfg.training_namespace


def find_job(kube: Kube, args: argparse.Namespace, cfg: config.StackConfig | None) -> dict[str, Any]:
    """`args.job` where job_namespace says it is; not there, the stack's teams are named."""
    namespace = job_namespace(args, cfg, args.job)
    teams = tuple(t.name for t in cfg.teams) if cfg is not None and team_in(cfg, namespace) is None else ()
    return ops.find(kube, args.job, namespace, teams)


def team_in(cfg: config.StackConfig | None, namespace: str) -> str | None:
    """The team whose namespace it is. Without a stack, any but the default training namespace is a team's (a
    team's namespace is its name)."""
    if cfg is None:
        return None if namespace == DEFAULT_NAMESPACE else namespace
    return next((t.name for t in cfg.teams if t.namespace == namespace), None)


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace | int:
    try:
        return parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2


def load_stack(args: argparse.Namespace) -> config.StackConfig | None:
    if not args.stack:
        return None
    cfg, _, _ = stackfile.load_stack(args.stack, standins=True)
    return cfg


def cluster(args: argparse.Namespace, cfg: config.StackConfig | None) -> tuple[Kube, str]:
    namespace = args.namespace or (cfg.training_namespace if cfg else DEFAULT_NAMESPACE)
    return connect(args.stack, args.kubeconfig), namespace


def fail(prog: str, err: Exception) -> int:
    """The one way a job verb says it could not run (exit 2), that its --stack is bad (exit 1, every problem), or
    that it refused (the error's own exit_code: 1 for a rule the job breaks, a team's budget)."""
    if isinstance(err, (stackfile.StackFileError, config.ConfigError)):
        return stackfile.report(err)
    if isinstance(err, KubeError):
        message = f"the cluster said {err.status} {err.reason}: {err.message}"
    elif isinstance(err, ClusterUnreachable):
        message = f"cannot reach the cluster: {err}"
    else:
        message = str(err)
    print(f"{prog}: error: {message}", file=sys.stderr)
    return getattr(err, "exit_code", 2)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    days, rest = divmod(abs(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    text = " ".join(f"{n}{u}" for n, u in ((days, "d"), (hours, "h"), (minutes, "m")) if n) or f"{abs(seconds)}s"
    return f"-{text}" if seconds < 0 else text


def committed(kube: Kube, cfg: config.StackConfig, namespace: str, now: datetime,
              workloads: list[dict[str, Any]] | None = None,
              jobs: list[dict[str, Any]] | None = None) -> Committed:
    """What the namespace's unfinished jobs may still cost at the stack's prices (bootstrap/jobs/committed.py);
    `workloads` and `jobs` when already read."""
    if workloads is None:
        workloads = kube.list(kinds.WORKLOAD, namespace)
    if jobs is None:
        jobs = ops.jobs(kube, namespace)
    dearest_gpu = max(spend.gpu_prices(cfg).values(), default=0.0)
    return committed_jobs.of(workloads, jobs, lambda pool: price_of(cfg, pool), dearest_gpu, now)


def price_of(cfg: config.StackConfig | None, pool: str | None) -> float | None:
    if cfg is None or pool is None:
        return None
    match: Any = next((p for p in cfg.gpu_pools if p.name == pool), None)
    return cfg.price(match.instance_type) if match is not None else None
