"""`python -m bootstrap preflight --stack S`: what the account must allow before `pulumi up`, checked first.

A 30-minute `pulumi up` should not fail at minute 25 on a quota. Each
check says pass, fail, warn or unknown (an API this identity may not call,
or a fact the account cannot tell), never a traceback:

- credentials; the deploy-time keys the stack still lacks;
- the GPU zone the program will pick, and that it offers every pool's type;
  the zone IDs EKS refuses;
- EC2 vCPU quotas per family (On-Demand and Spot) for the pools at maxNodes
  and the system nodes, with what already runs;
- capacity reservations and Capacity Blocks: state, type, zone, size, window;
- VPC, internet gateway, NAT gateway and Elastic IP quotas; EKS cluster,
  node group and node quotas; FSx for Lustre storage;
- admin principals exist; the public endpoint admits this machine;
- training images in ECR exist.

- the pinned AMI release and add-on versions exist for the Kubernetes version;
- on a deployed cluster, the running and queued jobs the next `pulumi up` would
  strand or re-provision (a pool gaining a network topology or the atomic
  scale-up check under them), and a pool topology it cannot change
  (bootstrap/jobs/upgrade_gate.py). The cluster is the stack's (its
  `kubeconfig` output), --kubeconfig's or $KUBECONFIG's; with --stack-file,
  only the latter two. No cluster yet passes; one that cannot be reached is
  unknown; without the account it is not read.

`--json` prints {"ok": bool, "checks": [{"name", "status", "detail"}]}.
Exit 0 when nothing fails; 1 if any check fails (an AccessDenied on one check
is unknown, not a failure) or the stack is bad; 2 if it could not run: the
stack file cannot be read, or the account could not be reached (the
credentials check is not a pass: no, expired or invalid credentials, no
network). Without the account, the deploy-time keys the stack lacks are
still listed as failures, but the exit is 2: nothing else was checked.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from bootstrap import stackfile
from bootstrap.account.checklist import public_ip, run
from bootstrap.account.checks import FAIL, PASS, UNKNOWN, Check
from bootstrap.cluster import kinds
from bootstrap.cluster.api import ClusterUnreachable, Kube, KubeError, NotDeployed
from bootstrap.cluster.connect import connect
from bootstrap.jobs import ops, upgrade_gate
from bootstrap.jobs.render import MANAGED_BY, PULUMI
from components.core import config

CREDENTIALS = "credentials"  # checks.identity's check: GetCallerIdentity answered


def render(results: list[Check]) -> str:
    lines = [f"{c.status.upper():<8}{c.name}: {c.detail}" for c in results]
    counts = Counter(c.status for c in results)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("pass", "warn", "unknown", "fail") if counts[s])
    return "\n".join([*lines, "", summary])


def live_jobs(cfg: config.StackConfig, stack: str, kube: Callable[[], Kube]) -> list[Check]:
    """upgrade_gate's verdicts on the cluster `kube()` reaches: its flavors, queues, the Workloads of the
    namespaces Kueue manages for the stack (the training namespace, the teams') and which jobs Pulumi made."""
    name = upgrade_gate.NAME
    try:
        client = kube()
        flavors, queues = client.list(kinds.RESOURCE_FLAVOR), client.list(kinds.CLUSTER_QUEUE)
        namespaces = [cfg.training_namespace, *(t.namespace for t in cfg.teams)]
        workloads = [wl for namespace in namespaces for wl in client.list(kinds.WORKLOAD, namespace)]
        pulumi_jobs = [job["metadata"].get("uid") for namespace in namespaces for job in ops.jobs(client, namespace)
                       if (job["metadata"].get("labels") or {}).get(MANAGED_BY) == PULUMI]
    except NotDeployed as err:
        return [Check(name, PASS, f"no cluster yet: {err}")]
    except ClusterUnreachable as err:
        return [Check(name, UNKNOWN, f"cannot reach the cluster: {err}; on a deployed stack, run preflight where "
                                     "kubectl reaches it (--kubeconfig)")]
    except KubeError as err:
        if err.not_found:  # Kueue's CRDs are not served: nothing of it runs yet
            return [Check(name, PASS, f"no Kueue on the cluster yet ({err.message})")]
        return [Check(name, UNKNOWN, f"the cluster said {err.status} {err.reason}: {err.message}")]
    except Exception as err:  # a check never ends preflight in a traceback
        return [Check(name, UNKNOWN, f"{type(err).__name__}: {err}")]
    return upgrade_gate.checks(cfg, stack, flavors, queues, workloads, pulumi_jobs)


def main(argv: list[str], client_factory: Callable | None = None, ip: Callable[[], str | None] = public_ip,
         kube: Callable[[], Kube] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap preflight", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="stack name: Pulumi.<stack>.yaml")
    parser.add_argument("--profile", help="AWS profile (default: the stack's aws:profile, else the environment)")
    parser.add_argument("--json", action="store_true", help='print {"ok": ..., "checks": [...]}')
    parser.add_argument("--stack-file", type=Path, help="read this stack file instead")
    parser.add_argument("--kubeconfig", help="the deployed cluster's kubeconfig, for the live-jobs check (default: "
                                             "$KUBECONFIG, else the stack's `kubeconfig` output)")
    args = parser.parse_args(argv)
    try:
        cfg, _, standins = stackfile.load_stack(args.stack, stack_file=args.stack_file, standins=True)
    except (stackfile.StackFileError, config.ConfigError) as err:
        return stackfile.report(err)
    if client_factory is None:
        import boto3
        import botocore.exceptions

        try:
            session = boto3.Session(profile_name=args.profile or cfg.aws_profile, region_name=cfg.region)
        except botocore.exceptions.ProfileNotFound as err:
            print(f"gpucluster: {err}", file=sys.stderr)
            return 2

        def client_factory(service: str, region: str | None = None):
            return session.client(service, region_name=region or cfg.region)
    results = run(cfg, standins, client_factory, ip)
    # Every other check needs the account; a check that needs none (the endpoint's address) is no sign of it.
    checked = any(c.name == CREDENTIALS and c.status == PASS for c in results)
    if checked:  # the cluster too: an EKS kubeconfig signs in with the same credentials (aws eks get-token)
        # A --stack-file need not be the deployed stack's: its cluster is only the one named.
        results += live_jobs(cfg, args.stack, kube or (lambda: connect(None if args.stack_file else args.stack,
                                                                       args.kubeconfig)))
    failed = any(c.status == FAIL for c in results)
    if args.json:
        print(json.dumps({"ok": checked and not failed, "checks": [c.to_dict() for c in results]}, indent=2))
    else:
        print(render(results))
    if not checked:
        print("gpucluster: the account could not be checked: are AWS credentials set (`aws sts "
              "get-caller-identity`)?", file=sys.stderr)
    return 2 if not checked else 1 if failed else 0
