"""The IAM principal behind the caller's credentials: an assumed-role session maps back to its role's ARN."""

from __future__ import annotations

import re

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
