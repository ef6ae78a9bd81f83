"""The CrossGuard policy pack (policy/): each rule on a compliant and a violating resource, the whole pack on
the dev and prod mock runs, and the pack's own process answering the analyzer protocol.

Validators are called the way pulumi-policy 1.21.0 calls them: resource
rules through `policy.validate(ResourceValidationArgs(...), report_violation)`,
stack rules through `StackValidationArgs([PolicyResource(...)])`, with
`args.props` built as the SDK builds them (a protobuf Struct, so numbers
are floats, deserialized and wrapped in its unknown-checking proxies).
The whole-pack tests go one step further and hand the mock run's
registrations to the SDK's analyzer servicer, the object the CLI talks to.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import os
import subprocess
import sys
import threading

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2, json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy import proxy as sdk_proxy
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from bootstrap.offline import mocks
from components.core.planning import cost
from policy import pack
from policy.rules import RULES, Resource, check_recording, level_for, to_resource
from policy.rules.base import UNKNOWN_VALUES
from policy.rules.fleet import fleet_at_max
from tests.conftest import ROOT, stack_config, stack_raw
from tests.conftest import recording as shared_recording

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # the engine's unknown string
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
CLUSTER = "aws:eks/cluster:Cluster"
ADDON = "aws:eks/addon:Addon"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
RELEASE = "kubernetes:helm.sh/v3:Release"
BUCKET = "aws:s3/bucket:Bucket"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SUBNET = "aws:ec2/subnet:Subnet"


@pytest.fixture(scope="module")
def runs():
    """The program's registrations for both shipped stacks, under the offline plan's mocks (prod's opt-in
    example jobs started, so the rules see a TrainJob and an MPIJob)."""
    from tests.conftest import prod_started

    return {stack: shared_recording(stack, prod_started() if stack == "prod" else None)
            for stack in ("dev", "prod")}


@pytest.fixture(scope="module")
def prod(runs):
    return [to_resource(r) for r in runs["prod"].resources]


def one(resources, type_, name_part=""):
    found = [r for r in resources if r.type == type_ and name_part in r.name]
    assert found, f"no {type_} named *{name_part}*"
    return found[0]


def props_of(resources, type_, name_part=""):
    return copy.deepcopy(dict(one(resources, type_, name_part).props))


# -- calling the SDK's validators -------------------------------------------------------------------------

def struct(value: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def sdk_props(props: dict):
    """args.props as pulumi_policy/policy.py (v1.21.0) builds it from the engine's Struct."""
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct(props))))


def sdk_opts(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def policy(name: str, stack: str = "prod"):
    return {p.name: p for p in pack.policies(stack)}[name]


def validate(name: str, type_: str, props: dict, *, config=None, protect=False, stack="prod") -> list[str]:
    """Run one resource policy's validate on one resource; the messages it reports."""
    found: list[str] = []
    args = ResourceValidationArgs(type_, sdk_props(props), f"urn:pulumi:{stack}::gpucluster::{type_}::r", "r",
                                  sdk_opts(protect), None, config)
    policy(name, stack).validate(args, lambda message, urn=None: found.append(message))
    return found


def validate_stack(name: str, resources: list[Resource], *, config=None) -> list[tuple[str | None, str]]:
    """Run one stack policy's validate on resources; (urn, message) of what it reports.

    AnalyzeStack passes outputs, which carry the provider's `id` (the bridged providers' state has it):
    a known id goes into the props.
    """
    def outputs(r: Resource) -> dict:
        return {**r.props, "id": r.id} if r.id else dict(r.props)

    by_urn = {r.urn: PolicyResource(r.type, sdk_props(outputs(r)), r.urn, r.name, sdk_opts(r.protect), None,
                                    None, [], {}) for r in resources}
    for r in resources:
        by_urn[r.urn].dependencies = [by_urn[u] for u in r.dependencies if u in by_urn]
        by_urn[r.urn].property_dependencies = {k: [by_urn[u] for u in v if u in by_urn]
                                               for k, v in r.property_dependencies.items()}
    found: list[tuple[str | None, str]] = []
    policy(name).validate(StackValidationArgs(list(by_urn.values()), config),
                          lambda message, urn=None: found.append((urn, message)))
    return found


def with_props(res: Resource, **changes) -> Resource:
    props = copy.deepcopy(dict(res.props))
    props.update(changes)
    return dataclasses.replace(res, props=props)


# -- the pack's shape ------------------------------------------------------------------------------------

def test_every_rule_is_a_policy_with_its_level_per_stack():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    for stack in ("dev", "prod"):
        policies = pack.policies(stack)
        assert [p.name for p in policies] == names
        levels = {p.name: p.enforcement_level for p in policies}
        prod_only = {"eks-endpoint-not-public", "s3-bucket-retained"}
        for name, level in levels.items():
            expected = EnforcementLevel.ADVISORY if name in prod_only and stack == "dev" else EnforcementLevel.MANDATORY
            assert level == expected, (stack, name)


def test_pack_config_overrides_levels_like_the_cli():
    endpoint = next(r for r in RULES if r.name == "eks-endpoint-not-public")
    assert level_for(endpoint, "prod") == "mandatory" and level_for(endpoint, "acme/gpucluster/dev") == "advisory"
    assert level_for(endpoint, "dev", {"all": "mandatory"}) == "mandatory"
    assert level_for(endpoint, "prod", {"eks-endpoint-not-public": {"enforcementLevel": "disabled"}}) == "disabled"


def test_rules_are_pure_no_policy_sdk_or_pulumi_imports():
    for path in sorted((ROOT / "policy" / "rules").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in ("pulumi", "pulumi_policy", "pulumi_aws") for n in names), path


def test_unknown_placeholders_are_the_sdks():
    sdk = {v for k, v in vars(sdk_proxy).items() if k.startswith("UNKNOWN_") and k.endswith("_VALUE")}
    assert sdk == set(UNKNOWN_VALUES)


def test_pack_files_pin_the_sdk_and_run_in_the_project_virtualenv():
    project = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": "../venv"}}
    lines = [x.strip() for x in (ROOT / "policy" / "requirements.txt").read_text().splitlines()
             if x.strip() and not x.startswith("#")]
    from importlib.metadata import version
    assert lines == ["-r ../requirements.txt", f"pulumi-policy=={version('pulumi-policy')}"]


def test_the_sdk_hands_validators_camelcase_props_with_float_numbers_and_unknown_proxies():
    props = sdk_props({"scalingConfig": {"maxSize": 16}, "vpcConfig": {"publicAccessCidrs": UNKNOWN}})
    assert props["scalingConfig"]["maxSize"] == 16.0 and isinstance(props["scalingConfig"]["maxSize"], float)
    with pytest.raises(UnknownValueError):
        props["vpcConfig"]["publicAccessCidrs"]  # noqa: B018 (the read is the test)
    assert pack.plain(props) == {"scalingConfig": {"maxSize": 16.0}, "vpcConfig": {"publicAccessCidrs": UNKNOWN}}


# -- resource rules: compliant and violating ------------------------------------------------------------

def test_imdsv2_required(prod):
    lt = props_of(prod, LAUNCH_TEMPLATE)
    assert validate("imdsv2-required", LAUNCH_TEMPLATE, lt) == []
    lt["metadataOptions"]["httpTokens"] = "optional"
    (message,) = validate("imdsv2-required", LAUNCH_TEMPLATE, lt)
    assert "LaunchTemplate r: metadataOptions.httpTokens is 'optional'" in message
    assert "'http_tokens': 'required'" in message
    del lt["metadataOptions"]
    assert len(validate("imdsv2-required", LAUNCH_TEMPLATE, lt)) == 1
    lt["metadataOptions"] = {"httpEndpoint": "disabled"}
    assert validate("imdsv2-required", LAUNCH_TEMPLATE, lt) == []


def test_ebs_encrypted(prod):
    lt = props_of(prod, LAUNCH_TEMPLATE)
    assert lt["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"  # a string in pulumi-aws 7
    assert validate("ebs-encrypted", LAUNCH_TEMPLATE, lt) == []
    lt["blockDeviceMappings"][0]["ebs"]["encrypted"] = "false"
    (message,) = validate("ebs-encrypted", LAUNCH_TEMPLATE, lt)
    assert "/dev/xvda is not encrypted" in message and "Fix:" in message
    lt["blockDeviceMappings"] = []
    assert "declares no EBS block device" in validate("ebs-encrypted", LAUNCH_TEMPLATE, lt)[0]


def test_fsx_encrypted_relies_on_the_default_unless_a_customer_key_is_required(prod):
    fsx = props_of(prod, LUSTRE)
    assert fsx["deploymentType"] == "PERSISTENT_2" and "kmsKeyId" not in fsx
    assert validate("fsx-encrypted", LUSTRE, fsx) == []
    (message,) = validate("fsx-encrypted", LUSTRE, fsx, config={"requireCustomerManagedKey": True})
    assert "PERSISTENT_2 file system without kmsKeyId" in message
    fsx["kmsKeyId"] = "arn:aws:kms:us-east-1:210987654321:key/1"
    assert validate("fsx-encrypted", LUSTRE, fsx, config={"requireCustomerManagedKey": True}) == []
    scratch = {"deploymentType": "SCRATCH_2", "storageCapacity": 1200}  # FSx-managed keys only
    assert validate("fsx-encrypted", LUSTRE, scratch, config={"requireCustomerManagedKey": True}) == []


def test_eks_secrets_encrypted(prod):
    cluster = props_of(prod, CLUSTER)
    assert validate("eks-secrets-encrypted", CLUSTER, cluster) == []
    cluster["encryptionConfig"]["provider"]["keyArn"] = UNKNOWN  # a key created in the same update
    assert validate("eks-secrets-encrypted", CLUSTER, cluster) == []
    del cluster["encryptionConfig"]
    (message,) = validate("eks-secrets-encrypted", CLUSTER, cluster)
    assert "Secrets are not envelope-encrypted" in message


@pytest.mark.parametrize("cidrs, violates", [
    (["1.1.1.1/32"], False), (["203.0.113.0/24", "0.0.0.0/0"], True), (["::/0"], True), (None, True),
    (UNKNOWN, False),
])
def test_eks_endpoint_not_public(prod, cidrs, violates):
    cluster = props_of(prod, CLUSTER)
    if cidrs is None:
        del cluster["vpcConfig"]["publicAccessCidrs"]  # EKS then opens the endpoint to 0.0.0.0/0
    else:
        cluster["vpcConfig"]["publicAccessCidrs"] = cidrs
    assert len(validate("eks-endpoint-not-public", CLUSTER, cluster)) == int(violates)
    cluster["vpcConfig"]["endpointPublicAccess"] = False
    assert validate("eks-endpoint-not-public", CLUSTER, cluster) == []


def test_eks_endpoint_rule_blocks_in_prod_and_advises_in_dev(prod):
    assert policy("eks-endpoint-not-public", "prod").enforcement_level == EnforcementLevel.MANDATORY
    assert policy("eks-endpoint-not-public", "dev").enforcement_level == EnforcementLevel.ADVISORY


def test_addon_version_pinned(prod):
    addon = props_of(prod, ADDON, "vpc-cni")
    assert validate("eks-addon-version-pinned", ADDON, addon) == []
    del addon["addonVersion"]
    (message,) = validate("eks-addon-version-pinned", ADDON, addon)
    assert "add-on vpc-cni has no addonVersion" in message and "gpucluster:versions.addons.vpc-cni" in message


def test_nodegroup_ami_pinned(prod):
    group = props_of(prod, NODE_GROUP, "h100")
    assert validate("nodegroup-ami-pinned", NODE_GROUP, group) == []
    del group["releaseVersion"]
    assert "no releaseVersion" in validate("nodegroup-ami-pinned", NODE_GROUP, group)[0]
    group["amiType"] = "CUSTOM"  # the AMI comes from the launch template
    assert validate("nodegroup-ami-pinned", NODE_GROUP, group) == []


@pytest.mark.parametrize("version, violates", [("9.59.0", False), ("v0.5.29", False), (None, True),
                                               ("^9.0.0", True), ("~9.59", True), ("9.x", True)])
def test_helm_chart_pinned(prod, version, violates):
    release = props_of(prod, RELEASE, "autoscaler")
    release.pop("version")
    if version is not None:
        release["version"] = version
    assert len(validate("helm-chart-pinned", RELEASE, release)) == int(violates)


@pytest.mark.parametrize("image, violates", [
    ("public.ecr.aws/docker/library/busybox:1.37.0", False), ("busybox", True), ("busybox:latest", True),
    ("registry.local:5000/busybox", True), ("registry.local:5000/busybox:1.37.0", False),
    ("busybox@sha256:" + "a" * 64, False),
])
def test_images_pinned_in_kubernetes_objects(prod, image, violates):
    deployment = props_of(prod, "kubernetes:apps/v1:Deployment", "tensorboard")
    deployment["spec"]["template"]["spec"]["containers"][0]["image"] = image
    found = validate("images-pinned", "kubernetes:apps/v1:Deployment", deployment)
    assert len(found) == int(violates)
    if violates:
        assert "spec.template.spec.containers[0].image" in found[0]


def test_images_pinned_in_a_trainjob_and_helm_values(prod):
    trainjob = props_of(prod, "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert validate("images-pinned", "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob", trainjob) == []
    trainjob["spec"]["trainer"]["image"] = "my/trainer"
    assert "at spec.trainer.image" in validate("images-pinned",
                                               "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob", trainjob)[0]
    kueue = props_of(prod, RELEASE, "kueue")
    assert validate("images-pinned", RELEASE, kueue) == []
    kueue["values"]["controllerManager"]["manager"]["image"]["tag"] = "latest"
    (message,) = validate("images-pinned", RELEASE, kueue)
    assert "tagged latest at values.controllerManager.manager.image" in message
    del kueue["values"]["controllerManager"]["manager"]["image"]["tag"]
    assert "has no tag (the chart's default applies)" in validate("images-pinned", RELEASE, kueue)[0]
    kueue["values"]["controllerManager"]["manager"]["image"] = "registry.k8s.io/kueue/kueue"
    assert "has no tag" in validate("images-pinned", RELEASE, kueue)[0]


def test_workload_requests(prod):
    mpijob_type = "kubernetes:kubeflow.org/v2beta1:MPIJob"
    mpijob = props_of(prod, mpijob_type, "gpt-pretrain")
    assert validate("workload-requests", mpijob_type, mpijob) == []
    del mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    (message,) = validate("workload-requests", mpijob_type, mpijob)
    assert "container worker at spec.mpiReplicaSpecs.Worker.template.spec.containers[0]" in message

    deployment = props_of(prod, "kubernetes:apps/v1:Deployment", "tensorboard")
    deployment["spec"]["template"]["spec"]["initContainers"] = [{"name": "init", "image": "busybox:1.37.0"}]
    (message,) = validate("workload-requests", "kubernetes:apps/v1:Deployment", deployment)
    assert "container init" in message and "initContainers[0]" in message

    trainjob_type = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
    trainjob = props_of(prod, trainjob_type)
    # Its runtimePatches mount the scripts (and the pre-step check's code) into the runtime's container: a patch,
    # not a container of its own.
    assert trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "scripts", "mountPath": "/opt/gpucluster/scripts",
                                           "readOnly": True},
                                          {"name": "gpucluster-goodput-code", "readOnly": True,
                                           "mountPath": "/opt/gpucluster/goodput/gpucluster_goodput"}]}]
    assert validate("workload-requests", trainjob_type, trainjob) == []
    del trainjob["spec"]["trainer"]["resourcesPerNode"]
    assert "resourcesPerNode has no requests" in validate("workload-requests", trainjob_type, trainjob)[0]

    jobset = {"spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "w", "image": "busybox:1.37.0"}]}}}}}]}}
    assert len(validate("workload-requests", "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", jobset)) == 1
    # Not a workload: a ConfigMap's data is not checked.
    assert validate("workload-requests", "kubernetes:core/v1:ConfigMap", {"data": {"containers": "x"}}) == []


def test_bucket_retained_through_crossguard_reads_force_destroy(prod):
    bucket = props_of(prod, BUCKET)
    assert bucket["forceDestroy"] is False
    assert validate("s3-bucket-retained", BUCKET, bucket) == []  # CrossGuard never sees retainOnDelete
    bucket["forceDestroy"] = True
    (message,) = validate("s3-bucket-retained", BUCKET, bucket)
    assert "`pulumi destroy` deletes the bucket" in message and "retainOnDestroy: true" in message
    assert validate("s3-bucket-retained", BUCKET, bucket, protect=True) == []


# -- stack rules: compliant and violating ---------------------------------------------------------------

def buckets_and_companions(prod):
    return [r for r in prod if r.type in (BUCKET, SSE, PAB)]


def test_s3_encrypted(prod):
    resources = buckets_and_companions(prod)
    assert validate_stack("s3-encrypted", resources) == []
    without = [r for r in resources if r.type != SSE]
    ((urn, message),) = validate_stack("s3-encrypted", without)
    assert urn == one(prod, BUCKET).urn and "has no BucketServerSideEncryptionConfiguration" in message
    sse = one(resources, SSE)
    bad = with_props(sse, rules=[{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "none"}}])
    assert "with no default algorithm" in validate_stack("s3-encrypted", [*without, bad])[0][1]


def test_s3_companions_match_through_property_dependencies_in_a_preview(prod):
    """In a first preview the bucket's name (random suffix) is unknown: the edge still ties them."""
    bucket, sse, block = one(prod, BUCKET), one(prod, SSE), one(prod, PAB)
    preview = [with_props(bucket, bucket=UNKNOWN)]
    for companion in (sse, block):
        preview.append(dataclasses.replace(with_props(companion, bucket=UNKNOWN), dependencies=(),
                                           property_dependencies={"bucket": (bucket.urn,)}))
    assert validate_stack("s3-encrypted", preview) == []
    assert validate_stack("s3-public-access-blocked", preview) == []


def test_s3_public_access_blocked(prod):
    resources = buckets_and_companions(prod)
    assert validate_stack("s3-public-access-blocked", resources) == []
    block = one(resources, PAB)
    others = [r for r in resources if r.type != PAB]
    open_block = with_props(block, blockPublicPolicy=False, restrictPublicBuckets=False)
    ((urn, message),) = validate_stack("s3-public-access-blocked", [*others, open_block])
    assert urn == one(prod, BUCKET).urn and "leaves blockPublicPolicy, restrictPublicBuckets off" in message
    assert "has no BucketPublicAccessBlock" in validate_stack("s3-public-access-blocked", others)[0][1]
    account = Resource("aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock", "account", "urn:account",
                       {k: True for k in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls",
                                          "restrictPublicBuckets")})
    assert validate_stack("s3-public-access-blocked", [*others, account]) == []


def test_efa_cluster_placement(prod):
    lt, group = one(prod, LAUNCH_TEMPLATE, "h100"), one(prod, PLACEMENT_GROUP)
    assert any(i.get("interfaceType") == "efa-only" for i in lt.props["networkInterfaces"])
    assert validate_stack("efa-cluster-placement", [lt, group]) == []
    spread = with_props(group, strategy="spread")
    assert "of strategy 'spread'" in validate_stack("efa-cluster-placement", [lt, spread])[0][1]
    loose = with_props(lt)
    del loose.props["placement"]
    ((urn, message),) = validate_stack("efa-cluster-placement", [loose])
    assert urn == lt.urn and "32 EFA interfaces and no placement group or reservation" in message
    reserved = with_props(loose, capacityReservationSpecification={
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}})
    block = with_props(loose, instanceMarketOptions={"marketType": "capacity-block"})
    assert validate_stack("efa-cluster-placement", [reserved]) == []
    assert validate_stack("efa-cluster-placement", [block]) == []
    no_efa = with_props(loose, networkInterfaces=[{"deviceIndex": 0, "networkCardIndex": 0}])
    assert validate_stack("efa-cluster-placement", [no_efa]) == []


def test_fsx_and_gpu_pools_in_one_zone(prod):
    subnets = [r for r in prod if r.type == SUBNET]
    fsx, gpus = one(prod, LUSTRE), one(prod, NODE_GROUP, "h100")
    system = one(prod, NODE_GROUP, "system")  # three zones, but not a GPU group
    lt = one(prod, LAUNCH_TEMPLATE, "h100")
    assert validate_stack("fsx-gpu-same-zone", [*subnets, fsx, gpus, system, lt]) == []
    other_zone = next(s for s in subnets if s.props["availabilityZone"] == "us-east-1b" and "private" in s.name)
    moved = dataclasses.replace(with_props(gpus, subnetIds=[other_zone.id]),
                                dependencies=tuple(u for u in gpus.dependencies if ":Subnet::" not in u))
    ((urn, message),) = validate_stack("fsx-gpu-same-zone", [*subnets, fsx, moved, lt])
    assert urn == gpus.urn and "runs in us-east-1b while FSx gpucluster-prod-storage-fsx is in us-east-1a" in message
    # A preview of new subnets knows no ids: the dependency edge finds them.
    preview = dataclasses.replace(with_props(moved, subnetIds=[UNKNOWN]), dependencies=(other_zone.urn,))
    assert len(validate_stack("fsx-gpu-same-zone", [*subnets, fsx, preview, lt])) == 1


def test_gpu_budget(prod):
    assert validate_stack("gpu-budget", prod) == []  # 128 GPUs, ~$904/h: at the default bounds
    ((urn, message),) = validate_stack("gpu-budget", prod, config={"maxGpus": 64})
    assert urn is None and "128 GPUs at maximum scale (gpucluster-prod-h100-node-group 16 x p5.48xlarge = " \
                            "128 GPUs), over maxGpus 64" in message
    ((_, message),) = validate_stack("gpu-budget", prod, config={"maxCostPerHourUsd": 500})
    assert "$905.43/h at maximum scale" in message and "over maxCostPerHourUsd $500.00" in message
    # A negotiated rate in the pack config replaces the catalog's.
    cheap = {"prices": {"p5.48xlarge": 20.0}, "maxCostPerHourUsd": 500}
    assert validate_stack("gpu-budget", prod, config=cheap) == []
    group = one(prod, NODE_GROUP, "h100")
    # Computed and unknown in a preview (a Capacity Block group sets none): the launch template's type counts.
    preview = with_props(group, instanceTypes=UNKNOWN)
    template = with_props(one(prod, LAUNCH_TEMPLATE, "h100"), instanceType="p5.48xlarge")
    ((_, message),) = validate_stack("gpu-budget", [preview, template], config={"maxGpus": 64})
    assert "16 x p5.48xlarge = 128 GPUs" in message
    odd = with_props(group, instanceTypes=["x9.huge"])
    ((urn, message),) = validate_stack("gpu-budget", [odd])
    assert urn == group.urn and "instance type x9.huge is not in components/core/hardware/catalog.py" in message


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_budget_cost_is_the_plans_estimate(runs, stack):
    """The same numbers as the offline plan's cost at maximum scale, less what the pack does not price
    (the Prometheus volume, AMP: cents)."""
    fleet = fleet_at_max([to_resource(r) for r in runs[stack].resources], {})
    estimate = cost.estimate(stack_config(stack))
    expected = sum(line.max_per_hour for line in estimate.lines if "Prometheus" not in line.item)
    assert fleet["costPerHour"] == pytest.approx(expected, abs=0.01)
    assert fleet["unpriced"] == []


# -- the whole pack on the shipped stacks ----------------------------------------------------------------

EXPECTED = {
    # Findings, not failures of the pack: dev keeps no data on purpose (retainOnDestroy: false).
    "dev": [("s3-bucket-retained", "advisory", "gpucluster-dev-storage-bucket")],
    "prod": [],
}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_shipped_stacks_violations(runs, stack):
    violations = check_recording(runs[stack].resources, stack)
    assert [(v.policy, v.level, v.name) for v in violations] == EXPECTED[stack]
    for v in violations:
        assert v.name in v.message and "Fix:" in v.message and v.urn.endswith(f"::{v.name}")


H100 = {"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 0, "maxNodes": 4}
CAPACITY_BLOCK = {**H100, "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}


@pytest.mark.parametrize("overrides, expected", [
    # A Capacity Block fixes placement (no placement group), and names the type in the launch template only.
    # (prod's teams are guaranteed 8 nodes, more than these 4-node pools hold.)
    ({"gpucluster:gpuPools": [CAPACITY_BLOCK], "gpucluster:jobs": [], "gpucluster:teams": []}, []),
    # The config lets an EFA pool opt out of its placement group: the pack does not.
    ({"gpucluster:gpuPools": [{**H100, "placementGroup": "none"}], "gpucluster:jobs": [], "gpucluster:teams": []},
     [("efa-cluster-placement", "mandatory", "gpucluster-prod-h100-launch-template")]),
])
def test_program_variants_the_pack_catches_or_lets_through(overrides, expected):
    rec = mocks.run_program(stack_raw("prod", overrides=overrides), "prod")
    assert [(v.policy, v.level, v.name) for v in check_recording(rec.resources, "prod")] == expected
    if overrides.get("gpucluster:gpuPools") == [CAPACITY_BLOCK]:
        group = next(r for r in rec.resources if r.type == NODE_GROUP and "h100" in r.name)
        assert "instanceTypes" not in group.inputs
        assert fleet_at_max([to_resource(r) for r in rec.resources], {})["gpus"] == 32  # from the template


def _level(value: int) -> str:
    return {analyzer_pb2.ADVISORY: "advisory", analyzer_pb2.MANDATORY: "mandatory"}[value]


def run_analyzer(rec, stack: str, config: dict | None = None) -> set[tuple[str, str, str, str]]:
    """The pack as the CLI runs it: the SDK's analyzer servicer, each registration's inputs as a Struct to
    Analyze, all of them to AnalyzeStack. (policy, level, urn, message) of every diagnostic."""
    servicer = _PolicyAnalyzerServicer(pack.PACK_NAME, "0.1.0", pack.policies(stack), EnforcementLevel.ADVISORY)
    if config:
        servicer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig={
            name: analyzer_pb2.PolicyConfig(enforcementLevel=analyzer_pb2.MANDATORY, properties=struct(props))
            for name, props in config.items()}), None)
    descriptions = {r.name: r.description for r in RULES}
    found = set()

    def collect(diagnostics, urn=""):
        for d in diagnostics:
            message = d.message.removeprefix(descriptions[d.policyName] + "\n")
            found.add((d.policyName, _level(d.enforcementLevel), d.urn or urn, message))

    def options(r):
        return analyzer_pb2.AnalyzerResourceOptions(protect=r.protect)

    for r in rec.resources:
        request = analyzer_pb2.AnalyzeRequest(type=r.type, urn=r.urn, name=r.name, properties=struct(r.inputs),
                                              options=options(r))
        collect(servicer.Analyze(request, None).diagnostics, r.urn)
    request = analyzer_pb2.AnalyzeStackRequest(resources=[
        analyzer_pb2.AnalyzerResource(type=r.type, urn=r.urn, name=r.name, properties=struct(r.inputs),
                                      options=options(r), parent=r.parent, dependencies=r.dependencies)
        for r in rec.resources])
    collect(servicer.AnalyzeStack(request, None).diagnostics)
    return found


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_sdk_analyzer_reports_what_check_recording_reports(runs, stack):
    through_sdk = run_analyzer(runs[stack], stack)
    pure = {(v.policy, v.level, v.urn, v.message) for v in check_recording(runs[stack].resources, stack)}
    assert through_sdk == pure
    assert len(pure) == len(EXPECTED[stack])


def test_pack_config_reaches_the_validators_through_the_analyzer(runs):
    found = run_analyzer(runs["prod"], "prod", {"gpu-budget": {"maxGpus": 8, "maxCostPerHourUsd": 100}})
    budget = sorted(m for p, level, urn, m in found if p == "gpu-budget" and level == "mandatory" and urn == "")
    assert len(budget) == 2 and "over maxGpus 8" in budget[0] and "over maxCostPerHourUsd $100.00" in budget[1]
    config = {"gpu-budget": {"enforcementLevel": "mandatory", "maxGpus": 8, "maxCostPerHourUsd": 100}}
    pure = {(v.policy, v.level, v.urn, v.message) for v in check_recording(runs["prod"].resources, "prod", config)}
    assert pure == found


def test_check_recording_reads_the_plans_json_resources(runs):
    """`plan --json` resources (camelCase options, no ids) give the same findings as the registrations."""
    rec = runs["dev"]
    as_json = [{"type": r.type, "name": r.name, "urn": r.urn, "inputs": r.inputs, "protect": r.protect,
                "retainOnDelete": r.retain_on_delete, "dependencies": r.dependencies} for r in rec.resources]
    assert check_recording(as_json, "dev") == check_recording(rec.resources, "dev")


def test_the_pack_process_serves_the_analyzer_protocol():
    """What `pulumi preview --policy-pack policy` starts: `python -u -m pulumi.policy <engine> .` in policy/,
    the stack's name in PULUMI_STACK. The port comes on stdout; the protocol is gRPC."""
    env = {**os.environ, "PULUMI_STACK": "dev", "PULUMI_PROJECT": "gpucluster", "PULUMI_DRY_RUN": "true"}
    proc = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
                            cwd=ROOT / "policy", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        port = proc.stdout.readline().decode().strip()
        assert port.isdigit(), proc.stderr.read().decode() if proc.poll() is not None else port
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "gpucluster"
            levels = {p.name: _level(p.enforcementLevel) for p in info.policies}
            assert levels["eks-endpoint-not-public"] == "advisory" and levels["imdsv2-required"] == "mandatory"
            response = stub.Analyze(analyzer_pb2.AnalyzeRequest(
                type=CLUSTER, urn="urn:pulumi:dev::gpucluster::aws:eks/cluster:Cluster::c", name="c",
                properties=struct({"vpcConfig": {"publicAccessCidrs": ["0.0.0.0/0"]},
                                   "encryptionConfig": {"provider": {"keyArn": UNKNOWN}, "resources": ["secrets"]}})),
                timeout=30)
            (diagnostic,) = response.diagnostics
            assert diagnostic.policyName == "eks-endpoint-not-public"
            assert "Cluster c: the public API endpoint is open to 0.0.0.0/0" in diagnostic.message
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()



# -- teams: the rules over prod's teams as the program registers them ------------------------------------

TEAM_RULES = ("team-queues", "team-network-default-deny", "team-access-namespaced", "team-job-role-prefix")
MEMBER = "arn:aws:iam::210987654321:role/vision-dev"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
NAMESPACE = "kubernetes:core/v1:Namespace"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def k8s(obj: dict) -> Resource:
    """A Kubernetes object as pulumi-kubernetes registers it: the type token from apiVersion and kind."""
    version = obj["apiVersion"] if "/" in obj["apiVersion"] else f"core/{obj['apiVersion']}"
    token = f"kubernetes:{version}:{obj['kind']}"
    meta = obj["metadata"]
    name = "-".join(p for p in ("extra", meta.get("namespace"), meta["name"], obj["kind"].lower()) if p)
    return Resource(token, name, f"urn:pulumi:prod::gpucluster::{token}::{name}", copy.deepcopy(obj))


@pytest.fixture(scope="module")
def with_members():
    """prod with a member in team vision: the program registers the member's access entry."""
    from components.core.config.text import stack_yaml

    teams = stack_yaml.parse((ROOT / "Pulumi.prod.yaml").read_text(), "gpucluster").config["gpucluster:teams"]
    teams[0] = {**teams[0], "members": [MEMBER]}
    return [to_resource(r) for r in shared_recording("prod", {"gpucluster:teams": teams}).resources]


def swap(resources: list[Resource], match, replacement) -> list[Resource]:
    """`resources` with the one `match` selects replaced (None: removed)."""
    assert len([r for r in resources if match(r)]) == 1
    rest = [r for r in resources if not match(r)]
    return rest if replacement is None else [*rest, replacement]


def named(kind: str, name: str, namespace: str | None = None):
    def match(r: Resource) -> bool:
        meta = r.props.get("metadata") or {}
        return r.type.endswith(f":{kind}") and meta.get("name") == name and meta.get("namespace") == namespace
    return match


def test_the_team_rules_pass_prods_teams(prod, with_members):
    from policy.rules import teams

    for resources in (prod, with_members):
        assert teams.team_names(resources) == ["language", "vision"]
        for rule in TEAM_RULES:
            assert validate_stack(rule, resources) == [], rule


def test_the_team_rules_name_what_the_program_names():
    from components.core.config.teams import TeamConfig
    from components.core.storage import team_data
    from components.core.teams import queues
    from policy.rules import team_roles, teams

    team = TeamConfig(name="vision")
    assert queues.cluster_queue_name(team) == teams.QUEUE_PREFIX + "vision"
    assert team.group == teams.GROUP_PREFIX + "vision" and queues.COHORT == teams.COHORT
    assert team_data.s3_prefix("vision") == team_roles.DATA_PREFIX.format(team="vision") == "teams/vision/"


def test_team_queues(prod):
    ns = one(prod, NAMESPACE, "team-vision")
    queue = one(prod, CLUSTER_QUEUE, "team-vision")

    def findings(resources):
        return validate_stack("team-queues", resources)

    no_queue = swap(prod, named("ClusterQueue", "gpucluster-team-vision"), None)
    assert findings(no_queue) == [(ns.urn, f"Namespace {ns.name}: team vision: no ClusterQueue gpucluster-team-vision. "
                                           "Fix: render components.core.teams.queues.team_cluster_queue for the team.")]
    spec = queue.props["spec"]
    assert (spec["cohortName"], spec["fairSharing"], spec["namespaceSelector"]) == \
        ("gpucluster", {"weight": "1"}, {"matchLabels": {"kubernetes.io/metadata.name": "vision"}})
    for changed, what in [
        ({"cohortName": "solo"}, "team vision's queue is in cohort 'solo', not 'gpucluster': it can neither lend "
                                 "its idle guarantee nor borrow"),
        ({"fairSharing": {"weight": "0"}}, "team vision's queue has spec.fairSharing.weight 0: an infinite share, "
                                           "always last for idle GPUs (Kueue)"),
        ({"fairSharing": {}}, "team vision's queue has no spec.fairSharing.weight (fair sharing then weighs it 1, "
                              "whatever the team's weight)"),
        ({"namespaceSelector": {}}, "team vision's queue admits namespaces other than vision (namespaceSelector {}): "
                                    "another namespace's jobs would take the team's guarantee"),
    ]:
        bad = with_props(queue, spec={**spec, **changed})
        ((urn, message),) = findings(swap(prod, named("ClusterQueue", "gpucluster-team-vision"), bad))
        assert urn == queue.urn and message.startswith(f"ClusterQueue {queue.name}: {what}. Fix: "), message
    assert findings(swap(prod, named("ClusterQueue", "gpucluster-team-vision"),
                         with_props(queue, spec={**spec, "fairSharing": {"weight": "500m"}}))) == []
    no_local = swap(prod, named("LocalQueue", "gpu", "vision"), None)
    assert findings(no_local) == [(ns.urn, f"Namespace {ns.name}: team vision: no LocalQueue in namespace vision "
                                           "points at ClusterQueue gpucluster-team-vision. Fix: render a LocalQueue "
                                           "in namespace vision with spec.clusterQueue: gpucluster-team-vision.")]
    stray = k8s({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": "gpu2", "namespace": "training"}, "spec": {"clusterQueue": "gpucluster-team-vision"}})
    ((urn, message),) = findings([*prod, stray])
    assert urn == stray.urn and "LocalQueue in namespace training points at team vision's ClusterQueue" in message


def test_team_network_default_deny(prod):
    deny = named("NetworkPolicy", "gpucluster-default-deny", "language")
    ((urn, message),) = validate_stack("team-network-default-deny", swap(prod, deny, None))
    assert urn == one(prod, NAMESPACE, "team-language").urn
    assert "team language: no default-deny NetworkPolicy in namespace language" in message
    policy_ = next(r for r in prod if deny(r))
    assert policy_.props["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    allows = with_props(policy_, spec={**policy_.props["spec"], "ingress": [{}]})  # an empty rule allows all
    assert len(validate_stack("team-network-default-deny", swap(prod, deny, allows))) == 1
    ingress_only = with_props(policy_, spec={"podSelector": {}, "policyTypes": ["Ingress"]})
    assert len(validate_stack("team-network-default-deny", swap(prod, deny, ingress_only))) == 1


def test_team_access_namespaced(with_members):
    entry = next(r for r in with_members if r.type == "aws:eks/accessEntry:AccessEntry"
                 and r.props.get("principalArn") == MEMBER)
    assert entry.props["kubernetesGroups"] == ["gpucluster:team:vision"]
    urn = "urn:pulumi:prod::gpucluster::aws:eks/accessPolicyAssociation:AccessPolicyAssociation::member-view"
    assoc = Resource("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", "member-view", urn,
                     {"clusterName": "gpucluster-prod", "principalArn": MEMBER, "accessScope": {"type": "cluster"},
                      "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"})
    ((where, message),) = validate_stack("team-access-namespaced", [*with_members, assoc])
    assert where == urn and message.startswith(
        f"AccessPolicyAssociation member-view: a member of team vision ({MEMBER}) gets "
        "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy on the whole cluster. Fix: drop the association")
    own = with_props(assoc, accessScope={"type": "namespace", "namespaces": ["vision"]})
    assert validate_stack("team-access-namespaced", [*with_members, own]) == []
    wider = with_props(assoc, accessScope={"type": "namespace", "namespaces": ["vision", "training"]})
    assert "on namespaces training" in validate_stack("team-access-namespaced", [*with_members, wider])[0][1]
    binding = one(with_members, "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", "team-vision")
    cluster_wide = k8s({**binding.props, "kind": "ClusterRoleBinding",
                        "metadata": {"name": "gpucluster-team-vision-admin"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"}})
    ((_, message),) = validate_stack("team-access-namespaced", [*with_members, cluster_wide])
    assert "binds team vision's group gpucluster:team:vision cluster-wide" in message
    elsewhere = k8s({**binding.props, "metadata": {"name": "x", "namespace": "language"}})
    ((_, message),) = validate_stack("team-access-namespaced", [*with_members, elsewhere])
    assert "binds team vision's group gpucluster:team:vision in namespace language" in message


def _statements(resource: Resource) -> list[dict]:
    import json
    return json.loads(resource.props["policy"])["Statement"]


def _with_statements(resource: Resource, statements: list[dict]) -> Resource:
    import json
    return with_props(resource, policy=json.dumps({"Version": "2012-10-17", "Statement": statements}))


def test_team_job_role_prefix(prod):
    access = one(prod, ROLE_POLICY, "team-vision-job-bucket-access")
    statements = _statements(access)
    bucket = statements[0]["Resource"]
    assert statements[2]["Resource"] == f"{bucket}/teams/vision/*"  # the program's, as registered

    def findings(changed: list[dict]) -> list[str]:
        bad = _with_statements(access, changed)
        return [m for _, m in validate_stack("team-job-role-prefix", swap(prod, lambda r: r.urn == access.urn, bad))]

    assert findings(statements) == []
    objects = {"Effect": "Allow", "Action": ["s3:GetObject"]}
    assert findings([{**objects, "Resource": f"{bucket}/*"}]) == [
        f"RolePolicy {access.name}: team vision's job role, statement 0: s3:getobject on {bucket}/*: keys outside "
        "teams/vision/. Fix: allow objects under teams/vision/ only, list with an s3:prefix condition inside it "
        "(components.core.job_identity)."]
    assert len(findings([{**objects, "Resource": f"{bucket}/teams/*"}])) == 1
    assert len(findings([{**objects, "Resource": f"{bucket}/teams/visionary/*"}])) == 1
    assert "any bucket" in findings([{**objects, "Resource": "*"}])[0]
    assert "any bucket" in findings([{**objects, "Resource": "arn:aws:s3:::*/teams/vision/*"}])[0]
    listing = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket}
    assert f"s3:listbucket on {bucket} with no s3:prefix condition: lists keys outside teams/vision/" in \
        findings([listing])[0]
    assert "with StringLike s3:prefix ['teams/*']" in findings(
        [{**listing, "Condition": {"StringLike": {"s3:prefix": ["teams/*"]}}}])[0]
    assert findings([{**listing, "Condition": {"StringLike": {"s3:prefix": "teams/vision/*"}}}]) == []
    assert f"s3:* on the bucket {bucket} itself" in findings([{"Effect": "Allow", "Action": "s3:*",
                                                               "Resource": bucket}])[0]
    assert "NotResource" in findings([{"Effect": "Allow", "Action": "s3:GetObject", "NotResource": bucket}])[0]
    # A Deny only narrows; a statement of another service is not the rule's.
    assert findings([*statements, {"Effect": "Deny", "Action": "s3:*", "Resource": "*"},
                     {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*"}]) == []
    # The training namespace's role keeps the whole bucket: no team's, not judged.
    training = one(prod, ROLE_POLICY, "-job-identity-bucket-access")
    assert _statements(training)[1]["Resource"] == f"{bucket}/*"


def test_a_team_listing_is_scoped_by_stringequals_or_stringlike_inside_its_prefix_only(prod):
    """IAM User Guide, "IAM JSON policy elements: Condition operators": a negated operator matches every other
    prefix (and a request without one), ...IfExists a request without the key, ...IgnoreCase the prefix in another
    case; "Single-valued vs. multivalued context keys": ForAllValues: holds without the key, ForAnyValue: tests a
    single value as the plain operator does."""
    access = one(prod, ROLE_POLICY, "team-vision-job-bucket-access")
    bucket = _statements(access)[0]["Resource"]

    def findings(condition: dict) -> list[str]:
        statement = {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket, "Condition": condition}
        bad = _with_statements(access, [statement])
        return [m for _, m in validate_stack("team-job-role-prefix", swap(prod, lambda r: r.urn == access.urn, bad))]

    def why(what: str) -> str:
        return (f"RolePolicy {access.name}: team vision's job role, statement 0: s3:listbucket on {bucket} with "
                f"{what}: lists keys outside teams/vision/. Fix: allow objects under teams/vision/ only, list with an "
                "s3:prefix condition inside it (components.core.job_identity).")

    # Negated: every prefix but language's (or vision's own) is listable.
    assert findings({"StringNotLike": {"s3:prefix": "teams/language/*"}}) == [
        why("StringNotLike s3:prefix ['teams/language/*']")]
    assert findings({"StringNotEquals": {"s3:prefix": ["teams/vision/"]}}) == [
        why("StringNotEquals s3:prefix ['teams/vision/']")]
    assert findings({"StringNotLike": {"s3:prefix": "teams/vision/*"}}) == [
        why("StringNotLike s3:prefix ['teams/vision/*']")]
    for operator in ("StringLikeIfExists", "StringEqualsIgnoreCase", "ForAllValues:StringLike",
                     "ForAnyValue:StringNotLike"):
        assert findings({operator: {"s3:prefix": "teams/vision/*"}}) == [why(f"{operator} s3:prefix ['teams/vision/*']")]
    assert findings({"StringLike": {"s3:prefix": []}}) == [why("StringLike s3:prefix []")]  # nothing to match
    # A statement's operators all hold: a negation narrows a scoped listing, and cannot scope a wide one.
    assert findings({"StringLike": {"s3:prefix": "teams/*"}, "StringNotLike": {"s3:prefix": "teams/language/*"}}) == [
        why("StringLike s3:prefix ['teams/*'], StringNotLike s3:prefix ['teams/language/*']")]
    for scoped in ({"StringEquals": {"s3:prefix": ["teams/vision/", "teams/vision/data/"]}},
                   {"StringLike": {"S3:Prefix": "teams/vision/*"}},  # key names are case-insensitive
                   {"ForAnyValue:StringLike": {"s3:prefix": "teams/vision/*"}},
                   {"ForAnyValue:StringEquals": {"s3:prefix": "teams/vision/"}},
                   {"StringLike": {"s3:prefix": "teams/vision/*"}, "StringNotLike": {"s3:prefix": "teams/vision/x/*"}}):
        assert findings(scoped) == [], scoped


def test_a_team_job_role_is_found_by_its_trust_policy_alone(prod):
    """Without its Pod Identity association (a preview that has not registered it), the role's trust
    policy names the team's namespace."""
    access = one(prod, ROLE_POLICY, "team-vision-job-bucket-access")
    bad = _with_statements(access, [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}])
    resources = [r for r in prod if r.type != "aws:eks/podIdentityAssociation:PodIdentityAssociation"]
    ((urn, message),) = validate_stack("team-job-role-prefix", swap(resources, lambda r: r.urn == access.urn, bad))
    assert urn == access.urn and "team vision's job role" in message
