"""The checks `bootstrap preflight` runs against the account, each turning AWS's answers into pass/fail/warn/unknown.

Every check takes a `Context` (the parsed stack, a boto3 client factory,
what earlier checks found) and returns `Check`s; the runner turns an AWS
error into "unknown" with its code, so a missing permission never hides
the other checks.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from components.core import config
from components.core.hardware import offerings, zones

PASS, FAIL, WARN, UNKNOWN = "pass", "fail", "warn", "unknown"
# EKS User Guide, capacity-blocks-mng: scale a Capacity Block node group to 0 at least 30 minutes before it ends.
BLOCK_END_MARGIN = timedelta(minutes=30)
# The keys of the zone choice itself (its other problems are a pool type's, named by its key path).
_ZONE_KEYS = (zones.GPU_AZ_KEY, zones.AZ_COUNT_KEY)
ECR_IMAGE = re.compile(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/([^:@]+)(?::([\w.-]+)|@(sha256:[0-9a-f]{64}))")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail}


@dataclass
class Context:
    cfg: config.StackConfig
    client: Callable[..., Any]  # client(service, region=None)
    public_ip: Callable[[], str | None]
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    account: str | None = None
    plan: zones.ZonePlan | None = None
    standins: tuple[str, ...] = ()  # keys the stack leaves unset: their own check fails, nothing else reads them


def error_code(err: Exception) -> str:
    return (getattr(err, "response", None) or {}).get("Error", {}).get("Code", "") or type(err).__name__


def identity(ctx: Context) -> list[Check]:
    me = ctx.client("sts").get_caller_identity()
    ctx.account = me["Account"]
    return [Check("credentials", PASS, f"{me['Arn']} in account {me['Account']}")]


def zone_plan(ctx: Context) -> list[Check]:
    ec2 = ctx.client("ec2")
    found = ec2.describe_availability_zones(Filters=[{"Name": "opt-in-status", "Values": ["opt-in-not-required"]},
                                                     {"Name": "state", "Values": ["available"]}])
    available = [zones.Zone(z["ZoneName"], z["ZoneId"]) for z in found["AvailabilityZones"]]
    # As the program asks (components.aws.lookups.lookup_zones): the GPU pools' types choose the zone, CPU
    # pools' and Spot fallback types (extraInstanceTypes) must be offered there too.
    gpu_types = offerings.gpu_pool_types(ctx.cfg.gpu_pools)
    bound = offerings.zone_bound_types(ctx.cfg.gpu_pools, ctx.cfg.cpu_pools)
    types = sorted({*gpu_types, *(name for _, name in bound)})
    offered: dict[str, set[str]] = {t: set() for t in types}
    if types:
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": types}])
        for page in pages:
            for offer in page["InstanceTypeOfferings"]:
                offered[offer["InstanceType"]].add(offer["Location"])
    ctx.plan, problems = offerings.plan_zones(available, offered, gpu_types, ctx.cfg.gpu_availability_zone,
                                              ctx.cfg.network.az_count, bound)
    failed = {p.path for p in problems}
    checks = [Check("GPU zone" if p.path.startswith(_ZONE_KEYS) else f"{p.path} offered in the GPU zone", FAIL,
                    str(p)) for p in problems]
    plan = ctx.plan
    if plan is None:
        return checks
    gpu = f"{plan.gpu_zone} ({plan.zone_ids[plan.gpu_zone]})"
    checks += [Check(f"{t} offered in the GPU zone", PASS, f"{gpu} offers it") for t in gpu_types]
    checks += [Check(f"{path} offered in the GPU zone", PASS, f"{gpu} offers {name}") for path, name in bound
               if path not in failed]
    refused = [z for z in available if not z.eks_supported]
    cluster = ", ".join(f"{z} ({plan.zone_ids[z]})" for z in plan.cluster_zones)
    if plan.gpu_zone not in plan.cluster_zones:
        checks.append(Check("zones EKS accepts", WARN, f"EKS refuses the GPU zone {gpu} for the cluster: the GPU "
                                                       f"pools and FSx live there, the cluster's subnets in {cluster}"))
    else:
        note = f"; EKS refuses {', '.join(map(str, refused))}, which the cluster avoids" if refused else ""
        checks.append(Check("zones EKS accepts", PASS, f"cluster subnets in {cluster}{note}"))
    return checks


def reservations(ctx: Context) -> list[Check]:
    pools = [p for p in ctx.cfg.gpu_pools if p.capacity_reservation_id]
    if not pools:
        return []
    found = {r["CapacityReservationId"]: r for r in ctx.client("ec2").describe_capacity_reservations(
        CapacityReservationIds=[p.capacity_reservation_id for p in pools])["CapacityReservations"]}
    return [_reservation(ctx, pool, found.get(pool.capacity_reservation_id)) for pool in pools]


def _reservation(ctx: Context, pool: config.GpuPoolConfig, found: dict | None) -> Check:
    name, rid = f"reservation of pool {pool.name}", pool.capacity_reservation_id
    if found is None:
        return Check(name, FAIL, f"{rid} does not exist in {ctx.cfg.region}")
    kind = "Capacity Block" if found.get("ReservationType") == "capacity-block" else "On-Demand Capacity Reservation"
    state, zone, itype = found.get("State"), found.get("AvailabilityZone"), found.get("InstanceType")
    count, end, start = int(found.get("TotalInstanceCount", 0)), found.get("EndDate"), found.get("StartDate")
    problems = []
    if state not in ("active", "scheduled", "payment-pending", "pending"):
        problems.append(f"is {state}")
    if itype != pool.instance_type:
        problems.append(f"reserves {itype}, not the pool's {pool.instance_type}")
    if ctx.plan is not None and zone != ctx.plan.gpu_zone:
        problems.append(f"is in {zone}, not the GPU zone {ctx.plan.gpu_zone}: set gpucluster:gpuAvailabilityZone: "
                        f"{zone}")
    if end is not None and end <= ctx.now:
        problems.append(f"ended {end:%Y-%m-%d %H:%M} UTC")
    detail = f"{kind} {rid}: {state}, {count} x {itype} in {zone}"
    if problems:
        return Check(name, FAIL, f"{detail}; it {'; it '.join(problems)}")
    warnings = []
    if count < pool.max_nodes:
        warnings.append(f"holds {count} instances, fewer than maxNodes {pool.max_nodes}: scale-ups past {count} fail")
    if start is not None and start > ctx.now:
        warnings.append(f"starts {start:%Y-%m-%d %H:%M} UTC: nodes cannot launch before")
    if end is not None and kind == "Capacity Block" and end - ctx.now < timedelta(days=1):
        warnings.append(f"ends {end:%Y-%m-%d %H:%M} UTC: pause the stack (or scale the pool to 0) by "
                        f"{end - BLOCK_END_MARGIN:%H:%M} UTC")
    return Check(name, WARN if warnings else PASS, detail + (f"; {'; '.join(warnings)}" if warnings else ""))


def admins(ctx: Context) -> list[Check]:
    """Each admin principal exists (in this account; another account's cannot be looked up from here)."""
    iam, checks = ctx.client("iam"), []
    if f"{config.NAMESPACE}:adminPrincipalArns" in ctx.standins:
        return []
    for arn in ctx.cfg.admin_principal_arns:
        match = re.fullmatch(r"arn:aws[\w-]*:iam::(\d{12}):(role|user)/(.+)", arn)
        name = f"admin {arn}"
        if match is None:
            checks.append(Check(name, FAIL, "not an IAM role or user ARN"))
            continue
        account, kind, path_name = match.groups()
        if ctx.account is not None and account != ctx.account:
            checks.append(Check(name, UNKNOWN, f"in account {account}, not {ctx.account}: not looked up"))
            continue
        short = path_name.rsplit("/", 1)[-1]
        try:
            found = (iam.get_role(RoleName=short)["Role"] if kind == "role" else iam.get_user(UserName=short)["User"])
        except Exception as err:
            if error_code(err) != "NoSuchEntity":
                raise
            checks.append(Check(name, FAIL, f"no such {kind} in account {account}"))
            continue
        if found["Arn"] != arn:
            checks.append(Check(name, FAIL, f"the {kind} is {found['Arn']}: EKS matches the ARN with its path"))
        else:
            checks.append(Check(name, PASS, f"{kind} exists"))
    return checks


def endpoint(ctx: Context) -> list[Check]:
    """The public API endpoint admits where pulumi runs (the Kubernetes provider calls it from here)."""
    cfg = ctx.cfg
    if f"{config.NAMESPACE}:publicAccessCidrs" in ctx.standins:
        return []
    if cfg.deployer_in_vpc and not cfg.public_access_cidrs:
        return [Check("API endpoint reachable", PASS, "deployerInVpc: private endpoint, pulumi runs in the VPC")]
    address = ctx.public_ip()
    if address is None:
        return [Check("API endpoint reachable", UNKNOWN, "could not learn this machine's public address")]
    ip = ipaddress.ip_address(address)
    if any(ip in ipaddress.ip_network(c) for c in cfg.public_access_cidrs):
        return [Check("API endpoint reachable", PASS, f"{address} is in publicAccessCidrs")]
    return [Check("API endpoint reachable", FAIL,
                  f"{address} (this machine) is not in publicAccessCidrs {', '.join(cfg.public_access_cidrs)}: the "
                  f"Kubernetes provider could not reach the cluster; add {address}/32")]


def images(ctx: Context) -> list[Check]:
    """Training images in ECR exist (tag or digest); others cannot be checked from the account."""
    checks = []
    for image in sorted({job.image for job in ctx.cfg.jobs}):
        match = ECR_IMAGE.fullmatch(image)
        if match is None:
            checks.append(Check(f"image {image}", UNKNOWN, "not in a private ECR registry: not checked"))
            continue
        registry, region, repo, tag, digest = match.groups()
        wanted = {"imageTag": tag} if tag else {"imageDigest": digest}
        try:
            ctx.client("ecr", region).describe_images(registryId=registry, repositoryName=repo, imageIds=[wanted])
        except Exception as err:
            if error_code(err) not in ("ImageNotFoundException", "RepositoryNotFoundException"):
                raise
            checks.append(Check(f"image {image}", FAIL, f"{error_code(err)}: push it before the job runs"))
            continue
        checks.append(Check(f"image {image}", PASS, "exists in ECR"))
    return checks
