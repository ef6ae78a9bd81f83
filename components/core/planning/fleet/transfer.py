"""Where a fleet's jobs keep their data and checkpoints, and what moving them between regions costs (pure).

A worker's FSx file system is in its own region and VPC: a job that may run, or resume, on any worker keeps
its dataset and checkpoints in S3. `shared-bucket`: one bucket in `fleet.data.bucketRegion`; a worker
elsewhere reads the dataset across regions at each job start, writes each checkpoint across, and reads
the last one back on a resume, all through its NAT gateway: an S3 gateway endpoint serves only its own
region's buckets (https://docs.aws.amazon.com/AmazonS3/latest/userguide/privatelink-interface-endpoints.html ,
"Types of VPC endpoints for Amazon S3": VPC endpoints do not support cross-Region requests). `replicated`: every region has a bucket and S3 Replication copies what is
written in one to each of the others, once; jobs read and write their own region's bucket.

Inter-region data transfer is billed per GB by the region the data leaves (the destination pays
nothing), for EC2 and S3 alike, and for S3 Replication's copies:
- https://aws.amazon.com/ec2/pricing/on-demand/ , "Data Transfer", "Data Transfer OUT From Amazon EC2 To"
  another AWS Region; https://aws.amazon.com/s3/pricing/ , "Data Transfer" (to another AWS Region) and
  "Replication" (inter-region data transfer OUT to each destination Region);
- those pages render their prices from templates; the values below, as of 2026, agree with
  https://www.redresscompliance.com/aws-inter-region-transfer-costs-multiregion.html : $0.01/GB between
  US East (N. Virginia) and US East (Ohio), $0.02/GB between the other US regions and from them to Europe.
An estimate: the rates change, volume tiers and private pricing are not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.core.config import StackConfig
from components.core.planning import goodput
from components.core.planning.cost import GIB

# USD per GB leaving each source region for another AWS Region (any destination but the pairs below).
TRANSFER_OUT_PER_GB = {"us-east-1": 0.02, "us-east-2": 0.02, "us-west-1": 0.02, "us-west-2": 0.02}
# Pairs priced apart from their source's rate: (from, to).
PAIR_PER_GB = {("us-east-1", "us-east-2"): 0.01, ("us-east-2", "us-east-1"): 0.01}
# A source region the table does not list: most regions' rate; some (South America, the Middle East, Africa,
# parts of Asia Pacific) charge more.
DEFAULT_PER_GB = 0.02
# https://aws.amazon.com/vpc/pricing/ (2026-12), us-east-1: NAT gateway data processing, per GB either way
# (cost.NOT_INCLUDED's figure; the stack's own estimate leaves it out, the fleet's cross-region reads count it).
NAT_PROCESSING_PER_GB = 0.045
SOURCE = ("AWS inter-region data transfer, billed by the region the data leaves: EC2 and S3 pricing pages "
          "(https://aws.amazon.com/ec2/pricing/on-demand/, https://aws.amazon.com/s3/pricing/)")
NOT_INCLUDED = (
    "S3 storage: a replicated fleet stores each object once per region (S3 Standard, about $0.023/GB-month in "
    "us-east-1: https://aws.amazon.com/s3/pricing/)",
    "S3 requests, and S3 Replication's PUTs and Replication Time Control",
)


def per_gb(source: str, destination: str) -> tuple[float, bool]:
    """USD per GB from `source` to `destination` and whether the table knew it (False: DEFAULT_PER_GB)."""
    if source == destination:
        return 0.0, True
    if (source, destination) in PAIR_PER_GB:
        return PAIR_PER_GB[(source, destination)], True
    if source in TRANSFER_OUT_PER_GB:
        return TRANSFER_OUT_PER_GB[source], True
    return DEFAULT_PER_GB, False


def usd(gib: float | None, rate: float) -> float | None:
    """GiB at a rate per GB (AWS bills decimal GB), to the cent; None when the size is unknown."""
    return None if gib is None else round(gib * GIB * rate, 2)


def _checkpoints(worker: StackConfig, write_rate: float, read_rate: float | None) -> list[dict[str, Any]]:
    """Each job of a worker stack: its checkpoint (components.core.planning.goodput.checkpoint_size) and what
    writing one (and reading it back on a resume, shared-bucket) costs across regions."""
    rows = []
    for job in worker.jobs:
        size, size_from = goodput.checkpoint_size(job)
        per_day = goodput.DAY_MINUTES / job.checkpoint.every_minutes
        row = {"job": job.name, "checkpointGiB": None if size is None else round(size, 1), "sizeFrom": size_from,
               "everyMinutes": job.checkpoint.every_minutes, "perCheckpointUsd": usd(size, write_rate),
               "perDayUsd": None if size is None else usd(size * per_day, write_rate)}
        if read_rate is not None:
            row["perResumeUsd"] = usd(size, read_rate)
        rows.append(row)
    return rows


def data_plan(manager: StackConfig, workers: Sequence[tuple[str, StackConfig]]) -> dict[str, Any]:
    """The plan's `fleet.data`: `workers` are (stack name, config) in the manager's order."""
    data = manager.fleet.data
    bucket = data.bucket_region or manager.region
    defaulted: set[str] = set()

    def rate(source: str, destination: str) -> float:
        price, known = per_gb(source, destination)
        if not known:
            defaulted.add(source)
        return price

    out: dict[str, Any] = {"mode": data.mode, "bucketRegion": bucket, "datasetGiB": data.dataset_gib,
                           "estimate": True, "source": SOURCE, "defaultPerGB": DEFAULT_PER_GB,
                           "notIncluded": list(NOT_INCLUDED)}
    if data.mode == "shared-bucket":
        rows = []
        for name, cfg in workers:
            crosses = cfg.region != bucket
            nat = NAT_PROCESSING_PER_GB if crosses else 0.0
            read, write = rate(bucket, cfg.region), rate(cfg.region, bucket)
            rows.append({"stack": name, "region": cfg.region, "crossesRegions": crosses, "readPerGB": read,
                         "writePerGB": write, "natPerGB": nat,
                         "perJobStartUsd": usd(data.dataset_gib, read + nat),
                         "jobs": _checkpoints(cfg, write + nat, read + nat)})
        out["workers"] = rows
    else:
        regions = list(dict.fromkeys([bucket, *(cfg.region for _, cfg in workers)]))
        out["regions"] = regions
        fan_out = [{"to": r, "perGB": rate(bucket, r)} for r in regions if r != bucket]
        out["dataset"] = {"from": bucket, "to": fan_out,
                          "onceUsd": usd(data.dataset_gib, sum(x["perGB"] for x in fan_out))}
        rows = []
        for name, cfg in workers:
            others = [r for r in regions if r != cfg.region]
            write = sum(rate(cfg.region, r) for r in others)
            rows.append({"stack": name, "region": cfg.region, "replicatesTo": others, "writePerGB": round(write, 4),
                         "perJobStartUsd": 0.0, "jobs": _checkpoints(cfg, write, None)})
        out["workers"] = rows
    out["defaultedSources"] = sorted(defaulted)
    return out
