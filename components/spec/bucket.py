"""The data bucket as facts: S3's naming rules, our name for it, its TLS-only policy and lifecycle (pure).

S3 User Guide, "General purpose bucket naming rules"
(https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
"""

from __future__ import annotations

import ipaddress
import json
import re

BUCKET_SUFFIX_BYTES = 4  # 8 hex characters
_BUCKET_MAX = 63
NONCURRENT_VERSION_DAYS = 30  # how long an overwritten or deleted checkpoint can be recovered
ABORT_MULTIPART_DAYS = 7
TLS_ONLY_SID = "DenyInsecureTransport"

_CHARS = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
ALLOWED = ("3-63 lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit "
           "(S3 general purpose bucket naming rules)")


def bucket_name_problem(name: str) -> str | None:
    """Why S3 would refuse `name` as a general purpose bucket name, or None."""
    if not 3 <= len(name) <= 63:
        return f"must be 3 to 63 characters long, not {len(name)}"
    if not _CHARS.fullmatch(name):
        return f"must be {ALLOWED}"
    if ".." in name:
        return "must not contain two adjacent dots"
    try:
        ipaddress.IPv4Address(name)
        return "must not be formatted as an IP address"
    except ValueError:
        pass
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"must not start with {prefix!r} (reserved by S3)"
    for suffix in RESERVED_SUFFIXES:
        if name.endswith(suffix):
            return f"must not end with {suffix!r} (reserved by S3)"
    return None


def bucket_name(cluster_name: str, suffix: str) -> str:
    """`<cluster>-data-<suffix>`, lowercased and cut to S3's 63 characters."""
    tail = f"-data-{suffix}"
    head = re.sub(r"[^a-z0-9-]", "-", cluster_name.lower())[: _BUCKET_MAX - len(tail)].strip("-")
    return head + tail


def tls_only_statement(bucket_arn: str) -> dict:
    """Deny every request that does not use TLS (S3 User Guide, "Security best practices for Amazon S3",
    aws:SecureTransport)."""
    return {
        "Sid": TLS_ONLY_SID,
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def tls_only_policy(bucket_arn: str) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [tls_only_statement(bucket_arn)]})


def lifecycle_rules() -> list[dict]:
    # Empty filter: the whole bucket (S3 User Guide, "Lifecycle configuration elements").
    return [
        {"id": "expire-noncurrent-versions", "status": "Enabled", "filter": {},
         "noncurrent_version_expiration": {"noncurrent_days": NONCURRENT_VERSION_DAYS}},
        {"id": "abort-incomplete-multipart-uploads", "status": "Enabled", "filter": {},
         "abort_incomplete_multipart_upload": {"days_after_initiation": ABORT_MULTIPART_DAYS}},
    ]
