"""Service quota checks of `bootstrap preflight`: vCPUs per EC2 family, VPC and Elastic IPs, EKS, FSx.

Each compares what the stack needs (bootstrap/account/quotas.py) plus what the
account uses already with the quota's applied value (or AWS's default).
"""

from __future__ import annotations

from collections import Counter

from bootstrap.account import quotas
from bootstrap.account.checks import FAIL, PASS, UNKNOWN, Check, Context, error_code


def quota_value(sq, service: str, code: str) -> float:
    """The applied value of a quota, or AWS's default when the account has none applied."""
    try:
        return float(sq.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
    except Exception as err:
        if error_code(err) != "NoSuchResourceException":
            raise
        return float(sq.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])


def _running_vcpus(ec2) -> Counter:
    """vCPUs of running and pending instances per (family group, ON_DEMAND | SPOT)."""
    used: Counter = Counter()
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                cpu = inst.get("CpuOptions") or {}
                vcpus = int(cpu.get("CoreCount", 0)) * int(cpu.get("ThreadsPerCore", 1))
                purchase = "SPOT" if inst.get("InstanceLifecycle") == "spot" else "ON_DEMAND"
                used[(quotas.family_group(inst["InstanceType"]), purchase)] += vcpus
    return used


def vcpu_quotas(ctx: Context) -> list[Check]:
    needs, skipped = quotas.vcpu_needs(ctx.cfg)
    sq, used = ctx.client("service-quotas"), _running_vcpus(ctx.client("ec2"))
    checks = []
    for need in needs:
        service, code, name = need.quota
        value, running = quota_value(sq, service, code), used[(need.group, need.purchase)]
        detail = (f"{name} ({code}) is {value:g} vCPUs; the stack needs {need.vcpus} at maxNodes "
                  f"({'; '.join(need.parts)}) and {running} run already")
        if need.vcpus + running > value:
            detail += (f": request at least {need.vcpus + running}: `aws service-quotas request-service-quota-increase "
                       f"--service-code {service} --quota-code {code} --desired-value {need.vcpus + running}`")
        checks.append(Check(f"vCPU quota: {name}", FAIL if need.vcpus + running > value else PASS, detail))
    if skipped:
        checks.append(Check("vCPU quota: Capacity Block pools", UNKNOWN,
                            f"{', '.join(skipped)} run in a Capacity Block; not counted against a vCPU quota here"))
    return checks


def _compare(name: str, value: float, used: int, need: int, what: str, service: str, code: str | None) -> Check:
    detail = f"{value:g} allowed, {used} in use, the stack adds {need} ({what})"
    if used + need <= value:
        return Check(name, PASS, detail)
    where = f"--service-code {service} --quota-code {code}" if code else f"the {service} quota {name!r}"
    return Check(name, FAIL, f"{detail}: request {used + need} ({where})")


def network_quotas(ctx: Context) -> list[Check]:
    ec2, sq = ctx.client("ec2"), ctx.client("service-quotas")
    zone_count = len(ctx.plan.zones) if ctx.plan else ctx.cfg.network.az_count
    nats = quotas.nat_gateways(ctx.cfg, zone_count)
    checks = []
    for (service, code, name), used, need, what in (
            (quotas.VPCS, len(ec2.describe_vpcs()["Vpcs"]), 1, "its VPC"),
            (quotas.INTERNET_GATEWAYS, len(ec2.describe_internet_gateways()["InternetGateways"]), 1, "one"),
            (quotas.ELASTIC_IPS, len(ec2.describe_addresses()["Addresses"]), nats, f"one per NAT gateway, {nats}")):
        checks.append(_compare(name, quota_value(sq, service, code), used, need, what, service, code))
    service, code, name = quotas.NAT_PER_AZ
    checks.append(_compare(name, quota_value(sq, service, code), _busiest_nat_zone(ec2), 1, "one per zone",
                           service, code))
    return checks


def _busiest_nat_zone(ec2) -> int:
    gateways = ec2.describe_nat_gateways(Filter=[{"Name": "state", "Values": ["pending", "available"]}])["NatGateways"]
    subnets = {g["SubnetId"] for g in gateways}
    if not subnets:
        return 0
    zone_of = {s["SubnetId"]: s["AvailabilityZone"] for s in ec2.describe_subnets(SubnetIds=sorted(subnets))["Subnets"]}
    return max(Counter(zone_of[g["SubnetId"]] for g in gateways).values())


def _by_name(sq, service: str) -> dict[str, dict]:
    """A service's quotas by name (AWS defaults, then the account's applied values over them)."""
    out: dict[str, dict] = {}
    for op in ("list_aws_default_service_quotas", "list_service_quotas"):
        for page in sq.get_paginator(op).paginate(ServiceCode=service):
            out.update({q["QuotaName"]: q for q in page["Quotas"]})
    return out


def eks_quotas(ctx: Context) -> list[Check]:
    sq, cfg = ctx.client("service-quotas"), ctx.cfg
    known = _by_name(sq, "eks")
    clusters = ctx.client("eks").list_clusters()["clusters"]
    exists = cfg.cluster_name in clusters
    wanted = [(quotas.EKS_CLUSTERS, len(clusters) - exists, 0 if exists else 1, "this cluster"),
              (quotas.EKS_NODE_GROUPS, 0, len(cfg.gpu_pools) + 1, "a group per GPU pool and the system nodes"),
              (quotas.EKS_NODES_PER_GROUP, 0, max([p.max_nodes for p in cfg.gpu_pools] + [cfg.system_nodes.count]),
               "the largest group at maxNodes")]
    checks = []
    for name, used, need, what in wanted:
        quota = known.get(name)
        if quota is None:
            checks.append(Check(f"EKS {name}", UNKNOWN, "Service Quotas lists no EKS quota of that name"))
            continue
        checks.append(_compare(f"EKS {name}", float(quota["Value"]), used, need, what, "eks", quota.get("QuotaCode")))
    return checks


def fsx_quota(ctx: Context) -> list[Check]:
    """FSx for Lustre storage: the quota whose name names Lustre storage capacity, if Service Quotas has one."""
    fs = ctx.cfg.storage.fsx
    known = _by_name(ctx.client("service-quotas"), "fsx")
    kind = fs.deployment_type.split("_")[0].lower()  # scratch | persistent
    matches = [q for n, q in known.items() if "lustre" in n.lower() and "storage capacity" in n.lower()
               and kind in n.lower()]
    if len(matches) != 1:
        return [Check("FSx for Lustre storage capacity", UNKNOWN,
                      f"no single Service Quotas entry for Lustre {kind} storage capacity "
                      f"({len(matches)} found); the stack asks for {fs.storage_capacity_gib} GiB")]
    (quota,) = matches
    used = 0
    for page in ctx.client("fsx").get_paginator("describe_file_systems").paginate():
        used += sum(f.get("StorageCapacity", 0) for f in page["FileSystems"] if f.get("FileSystemType") == "LUSTRE"
                    and f.get("LustreConfiguration", {}).get("DeploymentType", "").lower().startswith(kind))
    return [_compare(quota["QuotaName"], float(quota["Value"]), used, fs.storage_capacity_gib, "GiB", "fsx",
                     quota.get("QuotaCode"))]
