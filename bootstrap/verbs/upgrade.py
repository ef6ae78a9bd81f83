"""`python -m bootstrap upgrade --stack S`: resolve newer AMI and add-on pins, show the diff, write them.

The stack pins the AL2023 AMI release of every node group and each EKS
add-on's version (gpucluster:versions), so a `pulumi up` after AWS
publishes new ones changes nothing. This is the explicit way to move:

    python -m bootstrap upgrade --stack dev            # what would change
    python -m bootstrap upgrade --stack dev --write    # write it into Pulumi.dev.yaml
    pulumi preview --stack dev && pulumi up --stack dev

A new AMI release rolls every node of every node group (max_unavailable 1),
so upgrade when no job runs. `--kubernetes-version 1.36` resolves pins for
the next minor and writes kubernetesVersion with them.

Exit 0: the pins shown (and written with --write), or nothing to change.
Exit 1: a problem found: a bad stack file (values the Pulumi CLI would
misread, no aws:region), or AWS answers but has no pin to give (no add-on
version for that Kubernetes version, a parameter not published, AccessDenied
on ssm or eks). Exit 2: it could not run: the stack file or its write
failed, or AWS was never reached (no, expired or invalid credentials, an
unknown aws:profile, no network).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bootstrap import stackfile
from bootstrap.account.identity import cannot_reach_aws
from bootstrap.account.pins import (
    UpgradeError,
    diff,
    resolve,
    rewrite,
)
from components.core import config


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap upgrade", description=__doc__.split("\n")[0])
    parser.add_argument("--stack", required=True, help="stack name: Pulumi.<stack>.yaml")
    parser.add_argument("--kubernetes-version", choices=config.EKS_VERSIONS,
                        help="resolve pins for this version and write it as kubernetesVersion")
    parser.add_argument("--write", action="store_true", help="write the new pins into the stack file")
    args = parser.parse_args(argv)
    import boto3
    import botocore.exceptions

    path = stackfile.stack_path(args.stack)
    try:
        raw = stackfile.read_stack_config(args.stack)
        current = stackfile.stack_versions(path)
    except (stackfile.StackFileError, config.ConfigError) as err:
        return stackfile.report(err)
    version = args.kubernetes_version or raw.get(f"{config.NAMESPACE}:kubernetesVersion") \
        or config.DEFAULT_KUBERNETES_VERSION
    if not raw.get("aws:region"):
        print(f"gpucluster: {path.name} sets no aws:region", file=sys.stderr)
        return 1
    try:
        session = boto3.Session(profile_name=raw.get("aws:profile") or None, region_name=raw["aws:region"])
        pins = resolve(session.client("ssm"), session.client("eks"), version)
    except UpgradeError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 1
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        print(f"gpucluster: cannot resolve the versions for Kubernetes {version}: {err}", file=sys.stderr)
        return 2 if cannot_reach_aws(err) else 1
    changes = diff(current, pins)
    if args.kubernetes_version and args.kubernetes_version != raw.get(f"{config.NAMESPACE}:kubernetesVersion"):
        changes.insert(0, f"kubernetesVersion: {raw.get(f'{config.NAMESPACE}:kubernetesVersion')} -> {version}")
    if not changes:
        print(f"{path.name}: the pins are the newest for Kubernetes {version}; nothing to do")
        return 0
    print(f"{path.name}, Kubernetes {version}:")
    print("\n".join(f"  {line}" for line in changes))
    if args.write:
        try:
            Path(path).write_text(rewrite(Path(path).read_text(), pins, args.kubernetes_version))
        except UpgradeError as err:
            print(f"gpucluster: {err}", file=sys.stderr)
            return 1
        except OSError as err:
            print(f"gpucluster: cannot write {path}: {err.strerror or err}", file=sys.stderr)
            return 2
        print(f"wrote {path.name}; next: pulumi preview --stack {args.stack} (an AMI change rolls every node)")
    else:
        print("(not written: add --write)")
    return 0
