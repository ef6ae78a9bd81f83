"""What the job verbs share: which cluster and namespace, the stack when given, durations as people read them."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bootstrap import stackfile
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError
from bootstrap.cluster.connect import connect
from components.core import config

DEFAULT_NAMESPACE = "training"


def add_cluster_args(parser: argparse.ArgumentParser, stack_required: bool = False) -> None:
    parser.add_argument("--stack", required=stack_required,
                        help="the stack: its jobs, prices, training namespace and `kubeconfig` output")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else the stack's output)")
    parser.add_argument("--namespace", help=f"the jobs' namespace (default: the stack's, else {DEFAULT_NAMESPACE})")


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
    """The one way a job verb says it could not run (exit 2), or that its --stack is bad (exit 1, every problem)."""
    if isinstance(err, (stackfile.StackFileError, config.ConfigError)):
        return stackfile.report(err)
    if isinstance(err, KubeError):
        message = f"the cluster said {err.status} {err.reason}: {err.message}"
    elif isinstance(err, ClusterUnreachable):
        message = f"cannot reach the cluster: {err}"
    else:
        message = str(err)
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


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
