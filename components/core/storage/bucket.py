"""The data bucket as facts: our name for it, its TLS-only policy and lifecycle (pure).

S3's naming rules are values the config checks too: components.core.config.values.
"""

from __future__ import annotations

import json
import re

from components.core.config.values import BUCKET_NAME_MAX

BUCKET_SUFFIX_BYTES = 4  # 8 hex characters
NONCURRENT_VERSION_DAYS = 30  # how long an overwritten or deleted checkpoint can be recovered
ABORT_MULTIPART_DAYS = 7
TLS_ONLY_SID = "DenyInsecureTransport"


def bucket_name(cluster_name: str, suffix: str) -> str:
    """`<cluster>-data-<suffix>`, lowercased and cut to S3's 63 characters."""
    tail = f"-data-{suffix}"
    head = re.sub(r"[^a-z0-9-]", "-", cluster_name.lower())[: BUCKET_NAME_MAX - len(tail)].strip("-")
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
