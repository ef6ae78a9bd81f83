"""`python -m bootstrap whoami`: the IAM principal ARN of your AWS credentials, for adminPrincipalArns.

An assumed-role session (arn:aws:sts::<account>:assumed-role/<role>/<session>)
is not a principal EKS access entries take: the role's IAM ARN is, with its
path, which only IAM knows (GetRole). Prints the ARN alone, so

    pulumi config set --path 'gpucluster:adminPrincipalArns[0]' "$(venv/bin/python -m bootstrap whoami)"

writes it into the stack once; who runs pulumi later never changes the access entries.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

_ASSUMED_ROLE = r"arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([\w+=,.@-]+)/.+"
_IAM_PRINCIPAL = r"arn:aws[\w-]*:iam::\d{12}:(user|role)/.+"


class WhoamiError(Exception):
    pass


def principal_arn(sts, iam) -> tuple[str, str | None]:
    """(IAM ARN of the caller, a note or None); raises WhoamiError for identities EKS cannot admit."""
    arn = sts.get_caller_identity()["Arn"]
    if re.fullmatch(_IAM_PRINCIPAL, arn):
        return arn, None
    match = re.fullmatch(_ASSUMED_ROLE, arn)
    if match:
        partition, account, role = match.groups()
        try:
            return iam.get_role(RoleName=role)["Role"]["Arn"], None
        except Exception as err:  # AccessDenied on iam:GetRole: the path cannot be known
            guess = f"arn:{partition}:iam::{account}:role/{role}"
            return guess, (f"iam:GetRole on {role} failed ({_reason(err)}): if the role has a path, "
                           f"the ARN is arn:{partition}:iam::{account}:role/<path>/{role}")
    if arn.endswith(":root"):
        raise WhoamiError(f"{arn} is the account's root user; deploy with an IAM role or user instead")
    raise WhoamiError(f"{arn} is not an IAM role or user session (federated users cannot be EKS admins)")


def _reason(err: Exception) -> str:
    response = getattr(err, "response", None) or {}
    return response.get("Error", {}).get("Code") or type(err).__name__


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
        return 1
    if args.json:
        print(json.dumps({"arn": arn, "note": note}))
    else:
        print(arn)
        if note:
            print(f"note: {note}", file=sys.stderr)
    return 0
