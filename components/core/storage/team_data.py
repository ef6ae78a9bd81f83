"""Where a team's data lives (pure): one prefix of the stack's bucket, one directory of the file system.

The file system is linked to the whole bucket at `/` (components.core.storage.fsx.BucketLink), so the
S3 prefix `teams/<team>/` and the FSx directory `/teams/<team>` are the same files seen two ways. A
team's pods get that directory as their `fsx` claim (components.core.storage.fsx_volume) and that
prefix as their AWS identity's scope (components.core.job_identity); the training namespace keeps
the whole bucket and file system.
"""

from __future__ import annotations

from components.core.storage import fsx

TEAMS_PREFIX = "teams/"


def s3_prefix(team: str) -> str:
    """`teams/<team>/`: the team's part of the bucket."""
    return f"{TEAMS_PREFIX}{team}/"


def directory(team: str) -> str:
    """`/teams/<team>`: the team's part of the file system (the same files as s3_prefix)."""
    return fsx.directory(s3_prefix(team))


def directory_marker_key(team: str) -> str:
    """The S3 object that makes the directory exist on the file system.

    FSx Lustre User Guide, "POSIX metadata support for data repositories": FSx imports S3 objects
    with POSIX-compliant keys, and a key ending in "/" maps to a directory ("The S3 object key mydir/
    maps to the FSx for Lustre directory mydir/"). The link imports new objects automatically (its
    auto-import policy, components.aws.storage), and a link created later imports what the bucket
    already holds (batch import on create): the directory appears on every file system linked to
    the bucket, without a pod or a node.
    """
    return s3_prefix(team)
