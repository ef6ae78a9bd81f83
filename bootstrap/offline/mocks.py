"""Run the real Pulumi program under Pulumi's mock runtime.

One implementation for the offline plan and the tests: `run_program()` sets
up a fresh event loop, mock monitor and stack config, runs `__main__.py` (or
any callable), and returns every registration with its parent, options and
dependencies. `GpuClusterMocks` answers resources and invokes with realistic
fake values (camelCase keys, as the engine returns them). The fakes live
here and in tests only; nothing in components/ knows about them.
"""

from __future__ import annotations

import ast
import asyncio
import base64
import functools
import gzip
import hashlib
import importlib.util
import json
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

PROJECT_DIR = Path(__file__).resolve().parents[2]
# The mock account: all zeros, no one's. The deployer is the plan's stand-in admin.
ACCOUNT_ID = "000000000000"
DEPLOYER_ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/gpucluster-admin"


class PlanDataError(Exception):
    """The offline plan has no AWS data (zones, offerings) for what the stack asks."""


def _unwrap_secrets(value: Any, path: str, secret_paths: set[str]) -> Any:
    """Plain values from the engine's secret envelopes, remembering where they were."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            secret_paths.add(path)
            return _unwrap_secrets(value.get("value"), path, secret_paths)
        return {k: _unwrap_secrets(v, f"{path}.{k}" if path else k, secret_paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap_secrets(v, f"{path}[{i}]", secret_paths) for i, v in enumerate(value)]
    return value


def _hex(*parts: str, n: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:n]


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    outputs: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    dependencies: list[str] = field(default_factory=list)
    protect: bool = False
    retain_on_delete: bool = False
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)
    delete_before_replace: bool = False
    import_id: str = ""
    provider: str = ""
    component_outputs: dict[str, Any] = field(default_factory=dict)
    secret_inputs: set[str] = field(default_factory=set)  # input paths that were secrets
    hooks: dict[str, list[str]] = field(default_factory=dict)  # {"before_delete": [hook names]}, bound hooks only


@dataclass
class Recording:
    resources: list[Registration]
    stack_outputs: dict[str, Any]
    secret_outputs: set[str]
    logs: list[tuple[str, str]]

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> Registration:
        matches = [r for r in self.resources if r.name == name]
        if len(matches) != 1:
            raise KeyError(f"{len(matches)} resources named {name!r}")
        return matches[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.resources if r.urn == urn)

    def depends_on(self, res: Registration, other: Registration) -> bool:
        """True when `res` waits for `other`, directly or through any chain."""
        seen, todo = set(), list(res.dependencies)
        while todo:
            urn = todo.pop()
            if urn == other.urn:
                return True
            if urn in seen:
                continue
            seen.add(urn)
            dep = next((r for r in self.resources if r.urn == urn), None)
            if dep is not None:
                todo.extend(dep.dependencies)
                # A component waits for its children.
                todo.extend(r.urn for r in self.resources if r.parent == urn)
        return False


_HOOK_KINDS = ("before_create", "after_create", "before_update", "after_update", "before_delete", "after_delete")


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The mock monitor, keeping what the stock one throws away."""

    def __init__(self, mocks: pulumi_mocks.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []
        self.outputs_by_urn: dict[str, dict[str, Any]] = {}
        # The stock monitor gives each worker thread an event loop it never
        # closes; we close them when the run ends instead of at garbage collection.
        self.thread_loops: set[asyncio.AbstractEventLoop] = set()

    def _track_thread_loop(self) -> None:
        self.thread_loops.add(pulumi_mocks._ensure_event_loop())

    def close_thread_loops(self) -> None:
        for loop in self.thread_loops:
            if not loop.is_running() and not loop.is_closed():
                loop.close()
        self.thread_loops.clear()

    def Invoke(self, request):
        self._track_thread_loop()
        return super().Invoke(request)

    def RegisterResource(self, request):
        self._track_thread_loop()
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        reg = self.resources[response.urn]
        secret_paths: set[str] = set()
        inputs = _unwrap_secrets(rpc.deserialize_properties(request.object), "", secret_paths)
        self.registrations.append(Registration(
            urn=response.urn,
            type=request.type,
            name=request.name,
            parent=request.parent,
            custom=bool(request.custom),
            inputs=inputs,
            secret_inputs=secret_paths,
            outputs=dict(reg.state),
            id=reg.id or "",
            dependencies=list(request.dependencies),
            protect=bool(request.protect),
            retain_on_delete=bool(request.retainOnDelete),
            ignore_changes=list(request.ignoreChanges),
            replace_on_changes=list(request.replaceOnChanges),
            delete_before_replace=bool(request.deleteBeforeReplace),
            import_id=request.importId,
            provider=request.provider,
            hooks={kind: list(getattr(request.hooks, kind)) for kind in _HOOK_KINDS
                   if request.HasField("hooks") and list(getattr(request.hooks, kind))},
        ))
        return response

    def RegisterResourceOutputs(self, request):
        self._track_thread_loop()
        self.outputs_by_urn[request.urn] = rpc.deserialize_properties(request.outputs)
        return super().RegisterResourceOutputs(request)


class _LogCatcher:
    def __init__(self):
        self.records: list[tuple[str, str]] = []

    def __getattr__(self, level):
        def log(message, *args, **kwargs):
            if level != "debug":
                self.records.append((level, str(message)))
        return log


def moto_data_dir() -> Path:
    """moto's package folder, found without importing moto (its EC2 models take ~0.5 s to import)."""
    spec = importlib.util.find_spec("moto")
    if spec is None or not spec.submodule_search_locations:
        raise PlanDataError("the offline plan reads AWS's zone and offering data from moto, which is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def _moto_zone_table() -> dict[str, list[tuple[str, str]]]:
    """Every region's (zone name, zone ID) of type availability-zone, read from moto's source as data.

    moto keeps them as `Zone(region_name=..., name=..., zone_id=..., zone_type=...)`
    literals in ec2/models/availability_zones_and_regions.py; reading that file
    (rather than importing it, which imports all of moto's EC2) costs milliseconds.
    """
    source = moto_data_dir() / "ec2" / "models" / "availability_zones_and_regions.py"
    table: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Zone":
            fields = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
            if {"region_name", "name", "zone_id"} <= set(fields) and (
                    fields.get("zone_type", "availability-zone") == "availability-zone"):
                table.setdefault(fields["region_name"], []).append((fields["name"], fields["zone_id"]))
    if not table:
        raise PlanDataError(f"{source}: no Zone(...) entries found; moto's zone data has moved")
    return table


def _regular_zones(region: str) -> list[tuple[str, str]]:
    """moto's mapping for a region its table leaves out: zones a-c, IDs <shorthand>-az1..3 (us-gov-west-1: usgw1)."""
    parts = region.split("-")
    shorthand = "usg" if region.startswith("us-gov") else parts[0]
    for cardinal in ("north", "south", "central", "east", "west"):
        if cardinal in region:
            shorthand += cardinal[0]
    shorthand += parts[-1]
    return [(f"{region}{letter}", f"{shorthand}-az{i}") for i, letter in enumerate("abc", start=1)]


def _offerings_path(region: str) -> Path:
    return moto_data_dir() / "ec2/resources/instance_type_offerings/availability-zone" / f"{region}.json.gz"


def moto_zones(region: str) -> list[tuple[str, str]]:
    """(name, zone ID) of the region's availability zones, as moto ships them (one account's mapping)."""
    table = _moto_zone_table()
    if region in table:
        return table[region]
    if _offerings_path(region).exists():
        return _regular_zones(region)
    # moto makes up zones a-c for every other region; without offerings the plan cannot use them.
    raise PlanDataError(f"the offline plan has no instance-type offerings for {region} (moto's data lacks it)")


def moto_offerings(region: str) -> dict[str, list[str]]:
    """AWS's instance-type offerings per zone name as shipped in moto."""
    path = _offerings_path(region)
    if not path.exists():
        raise PlanDataError(f"the offline plan has no instance-type offerings for {region} (moto's data lacks it)")
    by_az: dict[str, list[str]] = {}
    with gzip.open(path) as f:
        rows = json.load(f)
    for row in rows:
        by_az.setdefault(row["Location"], []).append(row["InstanceType"])
    return by_az


class GpuClusterMocks(pulumi_mocks.Mocks):
    """Realistic fake answers for the AWS and Kubernetes calls we make."""

    def __init__(self, region: str = "us-east-1"):
        self.region = region
        zones = moto_zones(region)
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

    # -- invokes -------------------------------------------------------------

    def call(self, args: pulumi_mocks.MockCallArgs):
        token, a = args.token, args.args
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            # A session of DEPLOYER_ROLE, as STS names one (the role's path is not in it).
            role = DEPLOYER_ROLE.rsplit("/", 1)[-1]
            return {"accountId": ACCOUNT_ID, "userId": "AROAEXAMPLE:plan",
                    "arn": f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{role}/plan", "id": ACCOUNT_ID}
        if token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}
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
            return {"logGroupNames": names, "arns": [f"arn:aws:logs:{self.region}:{ACCOUNT_ID}:log-group:{g}"
                                                      for g in names], "id": self.region}
        if token == "aws:s3/getBucket:getBucket":
            name = a.get("bucket")
            if name in self.missing_buckets:
                # As the provider fails: the invoke raises with this reason.
                return {}, [("bucket", f"reading S3 Bucket ({name}): couldn't find resource")]
            region = self.bucket_regions.get(name, self.region)
            return {"bucket": name, "arn": f"arn:aws:s3:::{name}", "bucketRegion": region, "region": self.region,
                    "bucketDomainName": f"{name}.s3.amazonaws.com",
                    "bucketRegionalDomainName": f"{name}.s3.{region}.amazonaws.com", "id": name}
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
            out.setdefault("arn", f"arn:aws:{service}:{self.region}:{ACCOUNT_ID}:{t.split(':')[-1].lower()}/{arn_name}")
        if t == "aws:ec2/vpc:Vpc":
            rid = f"vpc-{h}"
            out["defaultSecurityGroupId"] = f"sg-{_hex(h, 'default')}"
        elif t == "aws:ec2/subnet:Subnet":
            rid = f"subnet-{h}"
        elif t == "aws:ec2/securityGroup:SecurityGroup":
            rid = f"sg-{h}"
        elif t == "aws:ec2/internetGateway:InternetGateway":
            rid = f"igw-{h}"
        elif t == "aws:ec2/natGateway:NatGateway":
            rid = f"nat-{h}"
        elif t == "aws:ec2/eip:Eip":
            rid = f"eipalloc-{h}"
            out["publicIp"] = f"198.51.100.{int(h[:2], 16) % 250 + 1}"
        elif t == "aws:ec2/routeTable:RouteTable":
            rid = f"rtb-{h}"
        elif t == "aws:ec2/vpcEndpoint:VpcEndpoint":
            rid = f"vpce-{h}"
        elif t == "aws:ec2/launchTemplate:LaunchTemplate":
            rid = f"lt-{h}"
            out["latestVersion"] = 1
            out["defaultVersion"] = 1
        elif t == "aws:ec2/placementGroup:PlacementGroup":
            rid = inputs.get("name", name)
            out["placementGroupId"] = f"pg-{h}"
        elif t == "aws:iam/role:Role":
            role = inputs.get("name") or f"{name}-{h[:7]}"
            rid = role
            out.update(name=role, arn=f"arn:aws:iam::{ACCOUNT_ID}:role/{role}", uniqueId=f"AROA{h.upper()}")
        elif t == "aws:iam/policy:Policy":
            out["arn"] = f"arn:aws:iam::{ACCOUNT_ID}:policy/{arn_name}"
        elif t == "aws:kms/key:Key":
            rid = f"{h[:8]}-{h[8:12]}-{_hex(h, '1', n=4)}-{_hex(h, '2', n=4)}-{_hex(h, '3', n=12)}"
            out.update(keyId=rid, arn=f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{rid}")
        elif t == "aws:eks/cluster:Cluster":
            cluster = inputs.get("name") or name
            rid = cluster
            vpc = dict(inputs.get("vpcConfig") or {})
            vpc.update(clusterSecurityGroupId=f"sg-{_hex(h, 'cluster')}", vpcId="vpc-mock")
            out.update(
                name=cluster,
                arn=f"arn:aws:eks:{self.region}:{ACCOUNT_ID}:cluster/{cluster}",
                endpoint=f"https://{h.upper()}.gr7.{self.region}.eks.amazonaws.com",
                certificateAuthority={"data": base64.b64encode(b"-----BEGIN CERTIFICATE-----mock").decode()},
                vpcConfig=vpc,
                identities=[{"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/{h.upper()}"}]}],
                platformVersion="eks.1", status="ACTIVE", version=inputs.get("version"),
            )
        elif t == "aws:eks/nodeGroup:NodeGroup":
            ng = inputs.get("nodeGroupName") or name
            rid = f"{inputs.get('clusterName')}:{ng}"
            out.update(nodeGroupName=ng, status="ACTIVE",
                       resources=[{"autoscalingGroups": [{"name": f"eks-{ng}-{_hex(h, 'asg', n=8)}"}],
                                   "remoteAccessSecurityGroupId": ""}])
        elif t == "aws:fsx/lustreFileSystem:LustreFileSystem":
            rid = f"fs-{h}"
            out.update(dnsName=f"{rid}.fsx.{self.region}.amazonaws.com", mountName=h[:8],
                       networkInterfaceIds=[f"eni-{_hex(h, 'eni', n=17)}"])
        elif t == "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation":
            rid = f"dra-{h}"
            out["associationId"] = rid
        elif t == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket") or f"{name}-{h[:8]}"
            rid = bucket
            out.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}",
                       bucketRegionalDomainName=f"{bucket}.s3.{self.region}.amazonaws.com")
        elif t == "random:index/randomId:RandomId":
            n = int(inputs.get("byteLength", 4))
            out.update(hex=h[: 2 * n], b64Url=base64.urlsafe_b64encode(bytes.fromhex(h[: 2 * n])).decode().rstrip("="))
            rid = out["b64Url"]
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
                program: Callable[[], Any] | None = None, region: str | None = None) -> Recording:
    """Run `program` (default: the project's __main__.py) under mocks."""
    region = region or raw_config.get("aws:region") or "us-east-1"
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    mocks = GpuClusterMocks(region)
    monitor = RecordingMonitor(mocks)
    logs = _LogCatcher()
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor,
                             logger=logs)
    pulumi.runtime.set_all_config(dict(raw_config))
    if program is None:
        program = _main_program
    exported: dict[str, Any] = {}
    secret_keys: set[str] = set()

    def run_and_collect() -> None:
        program()
        root = pulumi.runtime.get_root_resource()
        for key, value in dict(getattr(root, "outputs", {})).items():
            out = pulumi.Output.from_input(value)
            exported[key] = _sync_await(out.future())
            if _sync_await(out.is_secret()):
                secret_keys.add(key)

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
        pulumi.runtime.set_all_config({})
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
