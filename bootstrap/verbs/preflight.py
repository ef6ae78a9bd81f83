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
from bootstrap.account.checks import FAIL, PASS, Check
from components.core import config

CREDENTIALS = "credentials"  # checks.identity's check: GetCallerIdentity answered


def render(results: list[Check]) -> str:
    lines = [f"{c.status.upper():<8}{c.name}: {c.detail}" for c in results]
    counts = Counter(c.status for c in results)
    summary = ", ".join(f"{counts[s]} {s}" for s in ("pass", "warn", "unknown", "fail") if counts[s])
    return "\n".join([*lines, "", summary])


def main(argv: list[str], client_factory: Callable | None = None, ip: Callable[[], str | None] = public_ip) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap preflight", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="stack name: Pulumi.<stack>.yaml")
    parser.add_argument("--profile", help="AWS profile (default: the stack's aws:profile, else the environment)")
    parser.add_argument("--json", action="store_true", help='print {"ok": ..., "checks": [...]}')
    parser.add_argument("--stack-file", type=Path, help="read this stack file instead")
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
    failed = any(c.status == FAIL for c in results)
    # Every other check needs the account; a check that needs none (the endpoint's address) is no sign of it.
    checked = any(c.name == CREDENTIALS and c.status == PASS for c in results)
    if args.json:
        print(json.dumps({"ok": checked and not failed, "checks": [c.to_dict() for c in results]}, indent=2))
    else:
        print(render(results))
    if not checked:
        print("gpucluster: the account could not be checked: are AWS credentials set (`aws sts "
              "get-caller-identity`)?", file=sys.stderr)
    return 2 if not checked else 1 if failed else 0
