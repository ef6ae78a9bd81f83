"""Run the real Pulumi program under Pulumi's mock runtime.

One implementation for the offline plan and the tests: `run_program()` sets
up a fresh event loop, mock monitor and stack config, runs `__main__.py` (or
any callable), and returns every registration with its parent, options and
dependencies. `GpuClusterMocks` answers resources and invokes with realistic
fake values (camelCase keys, as the engine returns them). The fakes live
here and in tests only; nothing in components/ knows about them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from bootstrap.offline.aws_data import moto_offerings, moto_zones
from bootstrap.offline.recording import Recording, RecordingMonitor, _LogCatcher
from components.core.hardware.partitions import dns_suffix, partition_of

PROJECT_DIR = Path(__file__).resolve().parents[2]
# The mock account: all zeros, no one's. The deployer is the plan's stand-in admin.
ACCOUNT_ID = "000000000000"
DEPLOYER_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/gpucluster-admin"
# Resource types whose mock id is AWS's prefix and a hash, as AWS shapes them (vpc-0123..., fs-0123...).
ID_PREFIXES = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:fsx/lustreFileSystem:LustreFileSystem": "fs",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra",
}


def _hex(*parts: str, n: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


class GpuClusterMocks(pulumi_mocks.Mocks):
    """Realistic fake answers for the AWS and Kubernetes calls we make."""

    def __init__(self, region: str = "us-east-1"):
        self.region = region
        zones = moto_zones(region)
        self.partition = partition_of(region)  # every ARN the mocks make is in the region's partition
        self.zones = [name for name, _ in zones]
        self.zone_ids = [zone_id for _, zone_id in zones]
        self.offerings = moto_offerings(region)
        self.capacity_block_zone: str | None = None
        self.capacity_block_type = "p5.48xlarge"
        self.capacity_block_count = 2
        self.existing_log_groups: list[str] = []
        # Buckets storage.bucketName may adopt: any name exists (in the stack's region) unless listed here.
        self.missing_buckets: set[str] = set()
        self.missing_reservations: set[str] = set()  # Capacity Blocks that ended and are gone
        self.bucket_regions: dict[str, str] = {}
        self.metrics_volume_zone: str | None = None  # where a live Prometheus volume is, if one is
        self.system_group_zone: str | None = None  # the deployed system node group's zone; None: no cluster yet

    # -- invokes -------------------------------------------------------------

    def call(self, args: pulumi_mocks.MockCallArgs):
        token, a = args.token, args.args
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            # A session of DEPLOYER_ROLE, as STS names one (the role's path is not in it).
            role = DEPLOYER_ROLE.rsplit("/", 1)[-1]
            return {"accountId": ACCOUNT_ID, "userId": "AROAEXAMPLE:plan",
                    "arn": f"arn:{self.partition}:sts::{ACCOUNT_ID}:assumed-role/{role}/plan", "id": ACCOUNT_ID}
        if token == "aws:index/getPartition:getPartition":
            return {"partition": self.partition, "dnsSuffix": dns_suffix(self.partition), "id": self.partition}
        if token == "aws:index/getRegion:getRegion":
            return {"region": self.region, "name": self.region, "id": self.region}
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": self.zones, "zoneIds": self.zone_ids, "id": self.region, "state": "available"}
        if token == "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings":
            return self._offerings(a)
        if token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation" and \
                a.get("id") in self.missing_reservations:
            return {}, [("id", f"reading EC2 Capacity Block Reservation ({a.get('id')}): empty result")]
        if token == "aws:ec2/getCapacityBlockReservation:getCapacityBlockReservation":
            # A Capacity Block in the first zone for the type most asked for; tests override.
            return {"id": a.get("id"), "availabilityZone": self.capacity_block_zone or self.zones[0],
                    "instanceType": self.capacity_block_type, "instanceCount": self.capacity_block_count,
                    "state": "active", "reservationType": "capacity-block"}
        if token == "aws:cloudwatch/getLogGroups:getLogGroups":
            prefix = a.get("logGroupNamePrefix") or ""
            names = [g for g in self.existing_log_groups if g.startswith(prefix)]
            return {"logGroupNames": names, "arns": [f"arn:{self.partition}:logs:{self.region}:{ACCOUNT_ID}:log-group:{g}"
                                                      for g in names], "id": self.region}
        if token == "aws:s3/getBucket:getBucket":
            name = a.get("bucket")
            if name in self.missing_buckets:
                # As the provider fails: the invoke raises with this reason.
                return {}, [("bucket", f"reading S3 Bucket ({name}): couldn't find resource")]
            region = self.bucket_regions.get(name, self.region)
            return {"bucket": name, "arn": f"arn:{self.partition}:s3:::{name}", "bucketRegion": region, "region": self.region,
                    "bucketDomainName": f"{name}.s3.amazonaws.com",
                    "bucketRegionalDomainName": f"{name}.s3.{region}.amazonaws.com", "id": name}
        if token == "aws:ebs/getEbsVolumes:getEbsVolumes":
            ids = [f"vol-{_hex('metrics', self.metrics_volume_zone)}"] if self.metrics_volume_zone else []
            return {"ids": ids, "id": self.region}
        if token == "aws:ebs/getVolume:getVolume" and self.metrics_volume_zone:
            return {"id": f"vol-{_hex('metrics', self.metrics_volume_zone)}",
                    "availabilityZone": self.metrics_volume_zone, "volumeType": "gp3"}
        if token == "aws:eks/getNodeGroups:getNodeGroups":
            if self.system_group_zone is None:  # as the provider fails for a cluster not there yet
                return {}, [("clusterName", f"reading EKS Node Groups ({a.get('clusterName')}): couldn't find "
                                            "resource")]
            return {"clusterName": a.get("clusterName"), "names": ["system-20261206000000000000000001"],
                    "id": a.get("clusterName")}
        if token == "aws:eks/getNodeGroup:getNodeGroup":
            return {"clusterName": a.get("clusterName"), "nodeGroupName": a.get("nodeGroupName"),
                    "subnetIds": [f"subnet-{_hex('system', str(self.system_group_zone))}"],
                    "id": f"{a.get('clusterName')}:{a.get('nodeGroupName')}"}
        if token == "aws:ec2/getSubnet:getSubnet":
            return {"id": a.get("id"), "availabilityZone": self.system_group_zone}
        # An invoke the mocks do not know would answer with nothing and let the
        # program go on with None: fail instead, so a new lookup gets a real answer.
        raise NotImplementedError(f"GpuClusterMocks has no answer for invoke {token}")

    def _offerings(self, a: dict[str, Any]):
        wanted: list[str] = []
        for f in a.get("filters") or []:
            if f.get("name") == "instance-type":
                wanted = list(f.get("values") or [])
        locations, types = [], []
        for az in self.zones:
            offered = self.offerings.get(az, [])
            for t in wanted:
                if t in offered:
                    locations.append(az)
                    types.append(t)
        return {"locations": locations, "instanceTypes": types,
                "locationTypes": ["availability-zone"] * len(types), "id": self.region}

    # -- resources -----------------------------------------------------------

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        t, name, inputs = args.typ, args.name, dict(args.inputs)
        h = _hex(t, name)
        arn_name = inputs.get("name") or name
        out: dict[str, Any] = dict(inputs)
        rid = f"{name}-{h[:8]}"
        if t.startswith("aws:"):
            service = t.split(":")[1].split("/")[0]
            out.setdefault("arn", f"arn:{self.partition}:{service}:{self.region}:{ACCOUNT_ID}:{t.split(':')[-1].lower()}/{arn_name}")
        if t in ID_PREFIXES:
            rid = f"{ID_PREFIXES[t]}-{h}"
        if t == "aws:ec2/vpc:Vpc":
            out["defaultSecurityGroupId"] = f"sg-{_hex(h, 'default')}"
        elif t == "aws:ec2/eip:Eip":
            out["publicIp"] = f"198.51.100.{int(h[:2], 16) % 250 + 1}"
        elif t == "aws:ec2/launchTemplate:LaunchTemplate":
            out["latestVersion"] = 1
            out["defaultVersion"] = 1
        elif t == "aws:ec2/placementGroup:PlacementGroup":
            rid = inputs.get("name", name)
            out["placementGroupId"] = f"pg-{h}"
        elif t == "aws:iam/role:Role":
            role = inputs.get("name") or f"{name}-{h[:7]}"
            rid = role
            out.update(name=role, arn=f"arn:{self.partition}:iam::{ACCOUNT_ID}:role/{role}", uniqueId=f"AROA{h.upper()}")
        elif t == "aws:iam/policy:Policy":
            out["arn"] = f"arn:{self.partition}:iam::{ACCOUNT_ID}:policy/{arn_name}"
        elif t == "aws:kms/key:Key":
            rid = f"{h[:8]}-{h[8:12]}-{_hex(h, '1', n=4)}-{_hex(h, '2', n=4)}-{_hex(h, '3', n=12)}"
            out.update(keyId=rid, arn=f"arn:{self.partition}:kms:{self.region}:{ACCOUNT_ID}:key/{rid}")
        elif t == "aws:eks/cluster:Cluster":
            cluster = inputs.get("name") or name
            rid = cluster
            vpc = dict(inputs.get("vpcConfig") or {})
            vpc.update(clusterSecurityGroupId=f"sg-{_hex(h, 'cluster')}", vpcId="vpc-mock")
            out.update(
                name=cluster,
                arn=f"arn:{self.partition}:eks:{self.region}:{ACCOUNT_ID}:cluster/{cluster}",
                endpoint=f"https://{h.upper()}.gr7.{self.region}.eks.amazonaws.com",
                certificateAuthority={"data": base64.b64encode(b"-----BEGIN CERTIFICATE-----mock").decode()},
                vpcConfig=vpc,
                identities=[{"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/{h.upper()}"}]}],
                platformVersion="eks.1", status="ACTIVE", version=inputs.get("version"),
            )
        elif t == "pulumi:pulumi:StackReference":
            # A fleet's worker as the manager reads it: its `fleetAccess` output, a stand-in (the offline plan
            # reaches no backend); the real one is the worker's endpoint, CA and its manager's bootstrap token.
            stack = inputs.get("name") or name
            rid = stack
            out.update(name=stack, secretOutputNames=["fleetAccess"], outputs={"fleetAccess": {
                "server": f"https://{_hex(stack, 'endpoint').upper()}.gr7.{self.region}.eks.amazonaws.com",
                "certificateAuthorityData": base64.b64encode(b"-----BEGIN CERTIFICATE-----mock").decode(),
                "token": "offline-plan-stand-in"}})
        elif t == "aws:eks/nodeGroup:NodeGroup":
            ng = inputs.get("nodeGroupName") or name
            rid = f"{inputs.get('clusterName')}:{ng}"
            out.update(nodeGroupName=ng, status="ACTIVE",
                       resources=[{"autoscalingGroups": [{"name": f"eks-{ng}-{_hex(h, 'asg', n=8)}"}],
                                   "remoteAccessSecurityGroupId": ""}])
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            out.update(dnsName=f"{rid}.fsx.{self.region}.amazonaws.com", mountName=h[:8],
                       networkInterfaceIds=[f"eni-{_hex(h, 'eni', n=17)}"])
        elif t == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
            out["associationId"] = rid
        elif t == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket") or f"{name}-{h[:8]}"
            rid = bucket
            out.update(bucket=bucket, arn=f"arn:{self.partition}:s3:::{bucket}",
                       bucketRegionalDomainName=f"{bucket}.s3.{self.region}.amazonaws.com")
        elif t == "random:index/randomId:RandomId":
            n = int(inputs.get("byteLength", 4))
            out.update(hex=h[: 2 * n], b64Url=base64.urlsafe_b64encode(bytes.fromhex(h[: 2 * n])).decode().rstrip("="))
            rid = out["b64Url"]
        elif t == "aws:amp/workspace:Workspace":
            # As AMP shapes them: ws-<uuid>, and the workspace's endpoint with a trailing slash
            # (AMP API reference, WorkspaceDescription.prometheusEndpoint).
            rid = f"ws-{h[:8]}-{h[8:12]}-{_hex(h, '1', n=4)}-{_hex(h, '2', n=4)}-{_hex(h, '3', n=12)}"
            out.update(arn=f"arn:{self.partition}:aps:{self.region}:{ACCOUNT_ID}:workspace/{rid}",
                       prometheusEndpoint=f"https://aps-workspaces.{self.region}.amazonaws.com/workspaces/{rid}/")
        elif t == "random:index/randomPassword:RandomPassword":
            n = int(inputs.get("length", 16))
            out["result"] = (h * 4)[:n]
            rid = "none"  # the provider's id for a password
        elif t == "random:index/randomString:RandomString":
            n = int(inputs.get("length", 8))
            out["result"] = (h * 4)[:n]
            rid = out["result"]
        elif t.startswith("kubernetes:"):
            meta = dict(inputs.get("metadata") or {})
            meta.setdefault("name", name)
            out["metadata"] = meta
            rid = f"{meta.get('namespace', '')}/{meta['name']}".lstrip("/")
        return rid, out


def run_program(raw_config: dict[str, str], stack: str, project: str = "gpucluster",
                program: Callable[[], Any] | None = None, region: str | None = None,
                secret_keys: tuple[str, ...] = ()) -> Recording:
    """Run `program` (default: the project's __main__.py) under mocks; `secret_keys` as the engine marks them."""
    region = region or raw_config.get("aws:region") or "us-east-1"
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = GpuClusterMocks(region)
    monitor = RecordingMonitor(mocks)
    logs = _LogCatcher()
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor,
                             logger=logs)
    pulumi.runtime.set_all_config(dict(raw_config), list(secret_keys))
    if program is None:
        program = _main_program
    exported: dict[str, Any] = {}
    secret_keys: set[str] = set()

    def run_and_collect() -> None:
        program()
        root = pulumi.runtime.get_root_resource()
        outputs = {key: pulumi.Output.from_input(value) for key, value in dict(getattr(root, "outputs", {})).items()}

        async def collect() -> None:
            # One pump of the loop for every export: _sync_await pads the loop's ready list back after each call,
            # so awaiting the exports one by one cost ~40% of a run.
            for key, out in outputs.items():
                exported[key] = await out.future()
                if await out.is_secret():
                    secret_keys.add(key)

        _sync_await(collect())

    try:
        pulumi_mocks.SETTINGS.rpc_manager.clear()
        pulumi_mocks.SETTINGS.outputs.clear()
        _sync_await(run_pulumi_func(run_and_collect))
    except Exception as err:
        # What got registered before the failure, for "nothing half-way" checks.
        err.recording = Recording(resources=list(monitor.registrations), stack_outputs={}, secret_outputs=set(),
                                  logs=logs.records)
        raise
    finally:
        pulumi.runtime.reset_options()
        pulumi.runtime.set_all_config({}, [])
        loop.run_until_complete(loop.shutdown_default_executor())
        monitor.thread_loops.discard(loop)
        monitor.close_thread_loops()
        asyncio.set_event_loop(None)
        loop.close()

    resources = monitor.registrations
    for r in resources:
        r.component_outputs = monitor.outputs_by_urn.get(r.urn, {})
    return Recording(resources=resources, stack_outputs=exported, secret_outputs=secret_keys, logs=logs.records)


def _main_program() -> None:
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    runpy.run_path(str(PROJECT_DIR / "__main__.py"), run_name="__main__")
