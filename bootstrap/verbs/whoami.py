"""`python -m bootstrap whoami`: the IAM principal ARN of your AWS credentials, for adminPrincipalArns.

An assumed-role session (arn:aws:sts::<account>:assumed-role/<role>/<session>)
is not a principal EKS access entries take: the role's IAM ARN is, with its
path, which only IAM knows (GetRole). Prints the ARN alone, so

    admin=$(venv/bin/python -m bootstrap whoami) && pulumi config set --path 'gpucluster:adminPrincipalArns[0]' "$admin"

writes it into the stack once; who runs pulumi later never changes the access
entries. The `&&` matters: `"$(... whoami)"` inside the pulumi command would
write an empty ARN when whoami fails.

Exit 0: the ARN on stdout. Exit 1: the credentials work but are no IAM role
or user EKS can admit (the root user, a federated user). Exit 2: who you are
cannot be told (no credentials, expired ones, no network, an unknown
--profile): STS's GetCallerIdentity cannot be denied by a policy, so any AWS
error means it could not run. Nothing is printed on stdout unless 0.
"""

from __future__ import annotations

import argparse
import json
import sys

from bootstrap.account.identity import WhoamiError, principal_arn


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bootstrap whoami", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", help="AWS profile (default: the environment's credentials)")
    parser.add_argument("--json", action="store_true", help='print {"arn": ..., "note": ...}')
    args = parser.parse_args(argv)
    import boto3
    import botocore.exceptions

    try:
        session = boto3.Session(profile_name=args.profile)
        arn, note = principal_arn(session.client("sts"), session.client("iam"))
    except WhoamiError as err:
        print(f"gpucluster: {err}", file=sys.stderr)
        return 1
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        print(f"gpucluster: cannot tell who you are: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"arn": arn, "note": note}))
    else:
        print(arn)
        if note:
            print(f"note: {note}", file=sys.stderr)
    return 0
