"""The IAM principal behind the caller's credentials (an assumed-role session maps back to its role's ARN), and
whether an AWS error means the credentials never reached the account."""

from __future__ import annotations

import re

_ASSUMED_ROLE = r"arn:(aws[\w-]*):sts::(\d{12}):assumed-role/([\w+=,.@-]+)/.+"
_IAM_PRINCIPAL = r"arn:aws[\w-]*:iam::\d{12}:(user|role)/.+"
# AWS's error codes for credentials that did not authenticate (expired, unknown, badly signed, a skewed clock):
# the request never reached the account's resources, unlike AccessDenied on one call.
_NOT_AUTHENTICATED = frozenset({
    "ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "UnrecognizedClientException",
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidSignatureException", "IncompleteSignature",
    "MissingAuthenticationToken", "AuthFailure", "RequestExpired", "InvalidToken", "TokenRefreshRequired",
    "RequestTimeTooSkewed",
})


class WhoamiError(Exception):
    pass


def cannot_reach_aws(err: Exception) -> bool:
    """True when a boto3 call failed before AWS looked at the account: no, expired or invalid credentials, no
    region or profile, no endpoint or network (botocore's own errors). The verb could not run: exit 2. Any other
    AWS answer (AccessDenied on one call, a missing resource) is about the account, for the verb to judge."""
    from botocore import exceptions

    if isinstance(err, exceptions.ClientError):
        return (err.response.get("Error") or {}).get("Code") in _NOT_AUTHENTICATED
    # Not every BotoCoreError: a ParamValidationError or a WaiterError is ours or the account's, not "no AWS".
    unreachable = tuple(getattr(exceptions, name) for name in _NO_AWS if hasattr(exceptions, name))
    return isinstance(err, unreachable)


# botocore's errors raised before a request reaches AWS or gets its answer: credentials, region, profile,
# network, TLS, SSO tokens.
_NO_AWS = ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError", "NoRegionError",
           "ProfileNotFound", "InvalidConfigError", "EndpointConnectionError", "ConnectTimeoutError",
           "ReadTimeoutError", "ConnectionClosedError", "ProxyConnectionError", "SSLError", "TokenRetrievalError",
           "SSOTokenLoadError", "UnauthorizedSSOTokenError", "SSOError")


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
