"""What the job verbs share: which cluster, namespace and Prometheus, the stack when given, durations as people
read them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from bootstrap import stackfile
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.cluster.connect import connect
from bootstrap.jobs import budget
from components.core import config
from components.core.config.teams import TeamConfig

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


def price_of(cfg: config.StackConfig | None, pool: str | None) -> float | None:
    if cfg is None or pool is None:
        return None
    match: Any = next((p for p in cfg.gpu_pools if p.name == pool), None)
    return cfg.price(match.instance_type) if match is not None else None
