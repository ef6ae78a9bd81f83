"""`python -m bootstrap doctor [JOB]`: why a job waits or failed, with the evidence and the fix.

    doctor [--stack S] [JOB] [--kubeconfig PATH] [--namespace NS] [--collect DIR] [--json] [--tail N]
           [--prometheus-url URL]
    doctor --from DIR [--json]

Reads the job (MPIJob, TrainJob or JobSet; every job of the namespace without
JOB), its Kueue Workloads, pods, events, nodes and the last N lines of each
pod's log (bootstrap/doctor/collect.py), then names each cause it knows
(bootstrap/doctor/causes.py). `--collect DIR` also writes what it read as a
bundle; `--from DIR` diagnoses such a bundle without a cluster. The cluster
is --kubeconfig, else $KUBECONFIG, else the stack's `kubeconfig` output; the
namespace is --namespace, else the stack's trainingNamespace, else
`training`. With --stack and AWS credentials, the pools' Auto Scaling
activities are read too (skipped, and noted, otherwise). With --stack, in a
team's namespace, the team's monthly budget and its spend this month
(bootstrap/jobs/budget.py: Prometheus through the API server's proxy, or
--prometheus-url, else $GPUCLUSTER_PROMETHEUS_URL) go into the bundle too.

Exit 0: no known cause of trouble. Exit 1: causes found, or a bad stack.
Exit 2: the cluster, the stack file or the bundle could not be read, or bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from datetime import UTC, datetime

from bootstrap.doctor import causes, findings
from bootstrap.doctor.bundle import Bundle, BundleError, read_bundle, write_bundle

DEFAULT_NAMESPACE = "training"
PROG = "python -m bootstrap doctor"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Why a training job waits or failed: each cause with its evidence and fix.",
        # Wrapped here, never inside a cause id (argparse would break at its hyphens).
        epilog=textwrap.fill("causes: " + ", ".join(causes.CAUSES), 79, break_on_hyphens=False),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", nargs="?", help="the MPIJob, TrainJob or JobSet (default: every job of the namespace)")
    parser.add_argument("--stack", help="the stack: its kubeconfig output, trainingNamespace, pools, AWS identity")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, else the stack's output)")
    parser.add_argument("--namespace", help="the jobs' namespace (default: the stack's trainingNamespace, "
                        f"else {DEFAULT_NAMESPACE})")
    parser.add_argument("--collect", metavar="DIR", help="also write what was read as a bundle into DIR")
    parser.add_argument("--from", dest="source", metavar="DIR", help="diagnose a bundle instead of a cluster")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--tail", type=int, default=200, metavar="N", help="log lines per container (default 200)")
    parser.add_argument("--prometheus-url", metavar="URL",
                        help="Prometheus' URL for a team's spend (default: $GPUCLUSTER_PROMETHEUS_URL, else the API "
                             "server's proxy to its Service)")
    return parser


def _error(message: str) -> int:
    print(f"doctor: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2) and --help (0) as a return code
        return exit_.code if isinstance(exit_.code, int) else 2
    if args.tail < 1:
        return _error(f"--tail: must be at least 1, got {args.tail}")
    if args.source is not None:
        extra = [flag for flag, value in (("JOB", args.job), ("--stack", args.stack), ("--kubeconfig", args.kubeconfig),
                                          ("--namespace", args.namespace), ("--collect", args.collect)) if value]
        if extra:
            return _error(f"--from reads a bundle; {', '.join(extra)} apply only to a live cluster")
        try:
            bundle = read_bundle(args.source)
        except BundleError as err:
            return _error(f"bundle {args.source}: {err}")
        return _diagnose(bundle, "bundle", args.json)
    try:
        bundle = _collect(args)
    except _Failed as failed:
        return failed.code
    if args.collect:
        try:
            write_bundle(bundle, args.collect)
        except BundleError as err:
            return _error(f"--collect: {err}")
        print(f"doctor: wrote the bundle to {args.collect} (read it back with `doctor --from {args.collect}`)",
              file=sys.stderr)
    return _diagnose(bundle, "cluster", args.json)


class _Failed(Exception):
    def __init__(self, code: int):
        self.code = code


def _collect(args: argparse.Namespace) -> Bundle:
    from bootstrap import stackfile
    from bootstrap.cluster.api import ClusterUnreachable
    from bootstrap.cluster.connect import connect
    from bootstrap.doctor import collect
    from components.core import config

    cfg = None
    if args.stack:
        try:
            cfg, _, _ = stackfile.load_stack(args.stack, standins=True)
        except (stackfile.StackFileError, config.ConfigError) as err:
            raise _Failed(stackfile.report(err)) from None  # every verb's message and code: 1 bad, 2 unreadable
    namespace = args.namespace or (cfg.training_namespace if cfg else DEFAULT_NAMESPACE)
    activities = None
    if cfg is not None:
        def activities():
            try:
                import boto3

                session = boto3.Session(profile_name=cfg.aws_profile or None, region_name=cfg.region)
            except Exception as err:  # no boto3, a bad profile: skipped, noted
                return None, f"skipped: {err}"
            return collect.aws_scaling_activities(session, cfg.cluster_name)
    try:
        kube = connect(args.stack, args.kubeconfig)
        now = datetime.now(UTC)
        teams = collect.team_facts(cfg, namespace, _spend_reader(args, cfg, kube, now), now) if cfg else None
        return collect.collect(kube, namespace, args.job, args.tail,
                               cluster=cfg.cluster_name if cfg else kube.api_client.configuration.host,
                               pools=collect.pool_facts(cfg) if cfg else None, scaling_activities=activities,
                               now=now, teams=teams)
    except (ClusterUnreachable, collect.CollectError) as err:
        raise _Failed(_error(f"cannot read the cluster: {err}")) from None
    except json.JSONDecodeError as err:  # something answered that is not a Kubernetes API server
        raise _Failed(_error(f"cannot read the cluster: its answer is not JSON ({err})")) from None


def _spend_reader(args: argparse.Namespace, cfg, kube, now: datetime):
    """team -> (USD spent this month, how it was read): bootstrap.jobs.budget's, as `status --team` reads it.
    Raises budget.SpendUnknown (collect.team_facts records why)."""
    from bootstrap.jobs import budget

    url = args.prometheus_url or os.environ.get(budget.URL_ENV)
    query = budget.url_query(url) if url else budget.proxy_query(kube)

    def read(team) -> tuple[float, str]:
        spent = budget.read(query, team.namespace, now, cfg.observability.retention_days)
        how = f"Prometheus, since {spent.since:%Y-%m-%d} 00:00 UTC" + (f"; partial: {spent.partial}"
                                                                          if spent.partial else "")
        return spent.usd, how

    return read


def _diagnose(bundle: Bundle, source: str, as_json: bool) -> int:
    found = causes.diagnose(bundle)
    if as_json:
        print(json.dumps(findings.report_json(bundle, found, source), indent=2))
    else:
        print(findings.report_text(bundle, found, source))
    return 1 if found else 0
