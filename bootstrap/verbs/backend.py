"""`python -m bootstrap backend --bucket NAME --region R`: a self-managed Pulumi state backend, once.

Creates, or verifies and repairs, what `pulumi login s3://...` and the
awskms secrets provider need:

- an S3 bucket for the state: versioning on (every state write is a new
  version: a bad update can be rolled back), SSE-S3 default encryption, all
  public access blocked, ACLs off (BucketOwnerEnforced), a policy denying
  any request without TLS (added to the bucket's other statements, never
  replacing them), old versions expiring after STATE_HISTORY_DAYS;
- a symmetric KMS key behind an alias, with automatic rotation, that
  encrypts the stacks' secrets;
- with --github-repo OWNER/REPO, the GitHub Actions OIDC provider and a
  read-only role that repository's pull requests can assume for
  `pulumi preview` (bootstrap/account/github_oidc.py).

Every step says created, verified or fixed; a second run changes nothing.
Then it prints the two commands to run.

Exit 0: the backend is there. Exit 1: a problem found in the account (the
alias's key pending deletion, a bucket name another account holds, or AWS
refusing one call: AccessDenied on a create or put is a permission to
fix). Exit 2: it could not run: bad arguments, or AWS was never reached (no,
expired or invalid credentials, an unknown --profile, no network). One line
on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from bootstrap.account import github_oidc
from bootstrap.account.identity import cannot_reach_aws
from bootstrap.account.state_backend import (
    ALIAS,
    DEFAULT_ALIAS,
    BackendError,
    run,
)
from components.core.config.values import bucket_name_problem


def check_arguments(args: argparse.Namespace) -> list[str]:
    import botocore.session

    problems = []
    if reason := bucket_name_problem(args.bucket):
        problems.append(f"--bucket {args.bucket!r}: {reason}")
    session = botocore.session.get_session()
    regions = {r for p in session.get_available_partitions() for r in session.get_available_regions("s3", p)}
    if args.region not in regions:
        problems.append(f"--region {args.region!r}: not an AWS region (e.g. us-east-1)")
    if not ALIAS.fullmatch(args.kms_alias):
        problems.append(f"--kms-alias {args.kms_alias!r}: must be alias/<name> (letters, digits, /, _, -), "
                        "not under alias/aws/")
    if args.github_repo and (reason := github_oidc.repo_problem(args.github_repo)):
        problems.append(f"--github-repo {args.github_repo!r}: {reason}")
    return problems


def main(argv: list[str], session_factory=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap backend", description=__doc__.split("\n")[0])
    parser.add_argument("--bucket", required=True, help="the state bucket's name")
    parser.add_argument("--region", required=True, help="its region, and the KMS key's")
    parser.add_argument("--kms-alias", default=DEFAULT_ALIAS, help=f"the secrets key's alias (default {DEFAULT_ALIAS})")
    parser.add_argument("--profile", help="AWS profile (default: the environment's credentials)")
    parser.add_argument("--github-repo", metavar="OWNER/REPO",
                        help="also create the GitHub OIDC provider and a preview role for this repository")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = parser.parse_args(argv)
    if problems := check_arguments(args):
        print("\n".join(f"gpucluster: {p}" for p in problems), file=sys.stderr)
        return 2
    import boto3
    import botocore.exceptions

    try:
        session = (session_factory or boto3.Session)(profile_name=args.profile, region_name=args.region)
        # Credentials that work first (no policy can deny this call): S3's HEAD answers an expired token with a
        # bare 400, which would read as the account refusing.
        session.client("sts").get_caller_identity()
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        print(f"gpucluster: cannot reach AWS: {err}", file=sys.stderr)
        return 2
    try:
        report = run(args, session)
    except BackendError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 1
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        if cannot_reach_aws(err):
            print(f"gpucluster: cannot reach AWS: {err}", file=sys.stderr)
            return 2
        print(f"gpucluster: AWS refused: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    print("\n".join(report["steps"]))
    print(f"\n{'Done' if report['changed'] else 'Nothing to change'}. Next:")
    print(f"  {report['login']}")
    print(f"  {report['stackInit']}")
    if report["previewRoleArn"]:
        print(f"\nPreview role for GitHub Actions: {report['previewRoleArn']}\n  set it as the repository variable "
              "PULUMI_PREVIEW_ROLE_ARN, and list it in each stack's gpucluster:adminPrincipalArns (the Kubernetes "
              "part of a preview reads the cluster)")
    return 0
