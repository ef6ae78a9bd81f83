"""Where a job's checkpoints are: GPUCLUSTER_CHECKPOINT_DIR on the file system, and its S3 copy.

The file system is linked to the bucket at its root with automatic export
(components.core.storage.fsx.BucketLink), so <mount>/checkpoints/x reaches
s3://<bucket>/checkpoints/x within minutes of being written: the newest
object there is the newest checkpoint a next run can resume from (a
script like examples/train_synthetic.py keeps them under <dir>/<job>/).
A team's pods see only the team's directory at <mount>, so theirs are under
s3://<bucket>/teams/<team>/checkpoints/.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from components.core.storage import team_data

ENV = "GPUCLUSTER_CHECKPOINT_DIR"


@dataclass(frozen=True)
class Newest:
    key: str
    modified: datetime


def directory(job: dict[str, Any]) -> str | None:
    """The job's GPUCLUSTER_CHECKPOINT_DIR, from its manifest (mpirun's -x or the TrainJob's env)."""
    spec = job.get("spec") or {}
    if job["kind"] == "MPIJob":
        command = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0].get("command") or []
        for arg in command:
            if arg.startswith(f"{ENV}="):
                return arg.split("=", 1)[1]
        return None
    env = (spec.get("trainer") or {}).get("env") or []
    if job["kind"] == "JobSet":
        env = spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0].get("env") or []
    for item in env:
        if item.get("name") == ENV:
            return item.get("value")
    return None


def s3_prefix(checkpoint_dir: str, mount_path: str, prefix: str, team: str | None = None) -> str:
    """<mount>/checkpoints -> checkpoints/ (the bucket is linked at the file system's root); a team's job ->
    teams/<team>/checkpoints/ (its pods mount only the team's directory, /teams/<team>, whose S3 prefix is
    teams/<team>/: components.core.storage.team_data)."""
    relative = checkpoint_dir.rstrip("/").removeprefix(mount_path.rstrip("/")).strip("/")
    within = f"{relative}/" if relative else prefix
    return team_data.s3_prefix(team) + within if team is not None else within


def newest(s3, bucket: str, prefixes: list[str]) -> Newest | None:
    """The most recently written object under the first prefix that holds any."""
    for prefix in prefixes:
        found: Newest | None = None
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents") or []:
                if found is None or obj["LastModified"] > found.modified:
                    found = Newest(obj["Key"], obj["LastModified"])
        if found is not None:
            return found
    return None
