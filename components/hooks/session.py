"""The AWS identity resource hooks act as: the same one the stack's AWS provider uses.

A hook runs inside the program, beside the provider, so it must call AWS as
the stack's `aws:profile` and, like the kubeconfig's `aws eks get-token`,
the last role of `aws:assumeRoles`. An export can outlast an assumed role's
hour, so the role's credentials refresh themselves.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

SESSION_NAME = "gpucluster-hooks"


def aws_session(region: str, profile: str | None = None, role_arn: str | None = None) -> boto3.Session:
    """A boto3 session in `region` as `profile`, then as `role_arn` when given (refreshing)."""
    # Imported when a hook runs (destroy, a replaced link), not by every plan and preview.
    import boto3
    import botocore.credentials
    import botocore.session

    base = boto3.Session(profile_name=profile, region_name=region)
    if role_arn is None:
        return base
    sts = base.client("sts")

    def refresh() -> dict[str, Any]:
        creds = sts.assume_role(RoleArn=role_arn, RoleSessionName=SESSION_NAME)["Credentials"]
        expiry = creds["Expiration"]
        return {"access_key": creds["AccessKeyId"], "secret_key": creds["SecretAccessKey"],
                "token": creds["SessionToken"],
                "expiry_time": expiry.isoformat() if isinstance(expiry, datetime) else str(expiry)}

    core = botocore.session.get_session()
    # botocore has no public setter for a refreshing credentials object; this
    # is the attribute its own credential resolver fills.
    core._credentials = botocore.credentials.RefreshableCredentials.create_from_metadata(
        metadata=refresh(), refresh_using=refresh, method="sts-assume-role")
    core.set_config_variable("region", region)
    return boto3.Session(botocore_session=core, region_name=region)
