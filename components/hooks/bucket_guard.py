"""Nothing in S3 is deleted unless someone said so, by name.

A bucket the stack may delete (`storage.retainOnDestroy: false`) is
created with force_destroy, which empties it, every version included,
before deleting it. This guard runs first: a bucket holding any object
version is deleted only when GPUCLUSTER_DELETE_BUCKET_DATA names it (what
`python -m bootstrap destroy --delete-bucket-data` sets); and a bucket the
stack now adopts by name (`storage.bucketName`) is never deleted.
"""

from __future__ import annotations

import os

CONFIRM_ENV = "GPUCLUSTER_DELETE_BUCKET_DATA"


class BucketKept(Exception):
    """The bucket holds data nobody agreed to delete: its deletion must fail."""


def holds_objects(s3, bucket: str) -> bool:
    """Whether the bucket holds any object version or delete marker (force_destroy removes both)."""
    page = s3.list_object_versions(Bucket=bucket, MaxKeys=1)
    return bool(page.get("Versions") or page.get("DeleteMarkers"))


def check_deletable(s3, bucket: str, stack: str, adopted_bucket: str | None,
                    confirmed: str | None = None) -> str:
    """Raise BucketKept unless `bucket` may be deleted; return what is about to happen."""
    confirmed = os.environ.get(CONFIRM_ENV) if confirmed is None else confirmed
    if adopted_bucket == bucket:
        raise BucketKept(
            f"s3://{bucket} is the bucket gpucluster:storage.bucketName adopts, so it must outlive the stack, but the "
            f"stack still holds it as its own. Drop it from the state without deleting it: `pulumi state delete "
            f"<its URN> --target-dependents --stack {stack}` (`pulumi stack --show-urns` lists it), then run again")
    if not holds_objects(s3, bucket):
        return f"s3://{bucket} is empty"
    if confirmed == bucket:
        return f"s3://{bucket} holds objects; deleting them as {CONFIRM_ENV} asks"
    raise BucketKept(
        f"s3://{bucket} holds objects and storage.retainOnDestroy is false. Nothing in it is deleted without a "
        f"confirmation: `python -m bootstrap destroy --stack {stack} --delete-bucket-data` deletes it with every "
        f"object version; to keep it, set gpucluster:storage.retainOnDestroy: true, `pulumi up`, then destroy")
