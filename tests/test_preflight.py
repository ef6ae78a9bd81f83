"""`bootstrap preflight` on moto (STS, EC2 zones and offerings, IAM, ECR, EKS) and botocore Stubber where moto
has no answer (Service Quotas for EC2 and EKS codes, capacity reservations)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from bootstrap import stackfile
from bootstrap.account import checks as preflight_checks
from bootstrap.account import pin_checks
from bootstrap.account.checks import FAIL, PASS, UNKNOWN, WARN, Context
from bootstrap.cluster.api import NotDeployed
from bootstrap.offline import mocks
from bootstrap.verbs import preflight
from tests.conftest import stack_config

ACCOUNT = "210987654321"  # moto's account for these tests (its default is an AWS documentation account)
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/Admin"
ADDRESS = "34.200.10.7"
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("MOTO_ACCOUNT_ID", ACCOUNT)):
        monkeypatch.setenv(key, value)
    with mock_aws():
        boto3.client("iam").create_role(RoleName="Admin", AssumeRolePolicyDocument="{}")
        yield


@pytest.fixture(autouse=True)
def no_cluster(monkeypatch):
    """The live-jobs check finds no deployed cluster here, whatever this machine's kubeconfig or Pulumi login
    (tests/test_upgrade_gate.py serves one)."""
    def not_deployed(stack, kubeconfig):
        raise NotDeployed(f"stack {stack} has no `kubeconfig` output: has it been deployed (`pulumi up`)?")
    monkeypatch.setattr(preflight, "connect", not_deployed)


def stack_file(tmp_path, **config_keys) -> str:
    text = (stackfile.PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    keys = {"gpucluster:adminPrincipalArns": [ADMIN], "gpucluster:publicAccessCidrs": ["34.200.10.0/24"],
            **config_keys}
    for key, value in keys.items():
        text = stackfile.set_scalar(text, key, json.dumps(value))
    path = tmp_path / "Pulumi.prod.yaml"
    path.write_text(text)
    return str(path)


def quota(service: str, code: str, value: float, name: str = "") -> dict:
    return {"ServiceCode": service, "QuotaCode": code, "QuotaName": name or code, "Value": value}


EKS_QUOTAS = [quota("eks", "L-EKS00001", 100, "Clusters"), quota("eks", "L-EKS00002", 30, "Managed node groups per cluster"),
              quota("eks", "L-EKS00003", 450, "Nodes per managed node group")]


def service_quotas(p_vcpus: float = 4000, eks=EKS_QUOTAS) -> tuple[object, Stubber]:
    """Service Quotas as prod asks it, in the order the checks ask."""
    sq = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(sq)
    for code, value in (("L-417A185B", p_vcpus), ("L-1216C47A", 640)):
        stub.add_response("get_service_quota", {"Quota": quota("ec2", code, value)},
                          {"ServiceCode": "ec2", "QuotaCode": code})
    for service, code in (("vpc", "L-F678F1CE"), ("vpc", "L-A4707A72"), ("ec2", "L-0263D0A3"), ("vpc", "L-FE5A380F")):
        stub.add_response("get_service_quota", {"Quota": quota(service, code, 5)},
                          {"ServiceCode": service, "QuotaCode": code})
    for service, listed in (("eks", eks), ("fsx", [])):
        stub.add_response("list_aws_default_service_quotas", {"Quotas": listed}, {"ServiceCode": service})
        stub.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": service})
    stub.activate()
    return sq, stub


PINS = stackfile.stack_versions(stackfile.PROJECT_DIR / "Pulumi.prod.yaml")


def published(ami: bool = True, addons: dict[str, str] | None = None) -> tuple[object, object, list[Stubber]]:
    """SSM and EKS as AWS answers for prod's pins (moto serves neither EKS's AMI parameters nor add-on versions)."""
    ssm, eks = boto3.client("ssm", region_name="us-east-1"), boto3.client("eks", region_name="us-east-1")
    ssm_stub, eks_stub = Stubber(ssm), Stubber(eks)
    release = PINS["amiReleaseVersion"]
    for variant in pin_checks.VARIANTS:
        name = pin_checks.ami_parameter("1.35", variant, release)
        if ami:
            ssm_stub.add_response("get_parameter", {"Parameter": {"Name": name, "Value": release}}, {"Name": name})
        else:
            ssm_stub.add_client_error("get_parameter", "ParameterNotFound", expected_params={"Name": name})
            ssm_stub.add_response("get_parameters_by_path", {"Parameters": [
                {"Name": name.replace(release.rsplit("-", 1)[-1], "20260601"), "Value": "1.35.5-20260601"}]},
                {"Path": pin_checks.AMI_ROOT.format(k8s="1.35", variant=variant), "Recursive": True})
    offered = {**PINS["addons"], **(addons or {})}
    for addon in sorted(PINS["addons"]):
        eks_stub.add_response("describe_addon_versions", {"addons": [{"addonName": addon, "addonVersions": [
            {"addonVersion": offered[addon], "compatibilities": [{"clusterVersion": "1.35"}]},
            {"addonVersion": "v0.0.1-eksbuild.1", "compatibilities": [{"clusterVersion": "1.32"}]}]}]},
            {"addonName": addon, "kubernetesVersion": "1.35"})
    for stub in (ssm_stub, eks_stub):
        stub.activate()
    return ssm, eks, [ssm_stub, eks_stub]


class Split:
    """A client whose `stubbed` operations go to a Stubber's client, the rest to moto's."""

    def __init__(self, stubbed_client, operations: set[str], real):
        self.stubbed_client, self.operations, self.real = stubbed_client, operations, real

    def __getattr__(self, name: str):
        return getattr(self.stubbed_client if name in self.operations else self.real, name)


def factory(sq, pins=None):
    ssm, eks, _ = pins or published()

    def client(service: str, region: str | None = None):
        real = boto3.client(service, region_name=region or "us-east-1")
        if service == "eks":
            return Split(eks, {"describe_addon_versions"}, real)
        return {"service-quotas": sq, "ssm": ssm}.get(service) or real
    return client


def run(capsys, path: str, sq, *extra: str, pins=None) -> tuple[int, dict]:
    code = preflight.main(["--stack", "prod", "--stack-file", path, "--json", *extra],
                          client_factory=factory(sq, pins), ip=lambda: ADDRESS)
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_all_good(aws, tmp_path, capsys):
    sq, stub = service_quotas()
    code, report = run(capsys, stack_file(tmp_path), sq)
    stub.assert_no_pending_responses()
    assert code == 0 and report["ok"] is True
    assert set(report) == {"ok", "checks"}
    assert all(set(c) == {"name", "status", "detail"} for c in report["checks"])
    checks = by_name(report)
    assert checks["credentials"]["status"] == PASS and ACCOUNT in checks["credentials"]["detail"]
    assert checks["p5.48xlarge offered in the GPU zone"] == {
        "name": "p5.48xlarge offered in the GPU zone", "status": PASS, "detail": "us-east-1a (use1-az6) offers it"}
    assert checks["vCPU quota: Running On-Demand P instances"]["detail"] == (
        "Running On-Demand P instances (L-417A185B) is 4000 vCPUs; the stack needs 3072 at maxNodes "
        "(h100: 16 x p5.48xlarge (3072 vCPUs)) and 0 run already")
    assert checks["VPCs per Region"] == {"name": "VPCs per Region", "status": PASS,
                                         "detail": "5 allowed, 1 in use, the stack adds 1 (its VPC)"}
    assert checks["EC2-VPC Elastic IPs"]["detail"] == "5 allowed, 0 in use, the stack adds 3 (one per NAT gateway, 3)"
    assert checks["EKS Nodes per managed node group"]["status"] == PASS
    assert checks["FSx for Lustre storage capacity"]["status"] == UNKNOWN
    assert checks[f"admin {ADMIN}"]["status"] == PASS
    assert checks["API endpoint reachable"]["detail"] == f"{ADDRESS} is in publicAccessCidrs"
    assert checks["image public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"]["status"] == UNKNOWN
    assert checks["AMI release 1.35.6-20260714 (nvidia)"] == {
        "name": "AMI release 1.35.6-20260714 (nvidia)", "status": PASS,
        "detail": "published for Kubernetes 1.35 (AL2023 nvidia)"}
    assert checks["add-on vpc-cni v1.22.4-eksbuild.3"]["status"] == PASS


def test_pins_nobody_publishes_fail_with_the_fix(aws, tmp_path, capsys):
    sq, _ = service_quotas()
    pins = published(ami=False, addons={"coredns": "v1.14.9-eksbuild.1"})
    code, report = run(capsys, stack_file(tmp_path), sq, pins=pins)
    for stub in pins[2]:
        stub.assert_no_pending_responses()
    checks = by_name(report)
    assert code == 1 and report["ok"] is False
    assert checks["AMI release 1.35.6-20260714 (nvidia)"] == {
        "name": "AMI release 1.35.6-20260714 (nvidia)", "status": FAIL,
        "detail": "not published for Kubernetes 1.35 (AL2023 nvidia) in us-east-1; node groups would fail to create; "
                  "`python -m bootstrap upgrade --stack prod --write` pins published ones"}
    assert checks["add-on coredns v1.14.3-eksbuild.3"]["detail"] == (
        "not offered for Kubernetes 1.35 (newest: v1.14.9-eksbuild.1); the add-on would fail to install; "
        "`python -m bootstrap upgrade --stack prod --write` pins published ones")
    assert checks["add-on vpc-cni v1.22.4-eksbuild.3"]["status"] == PASS


def test_the_ami_parameter_is_named_as_eks_names_its_amis():
    assert pin_checks.ami_parameter("1.35", "nvidia", "1.35.6-20260714") == (
        "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/nvidia/"
        "amazon-eks-node-al2023-x86_64-nvidia-1.35-v20260714/release_version")


def test_nothing_checked_is_exit_2_not_a_pass(tmp_path, capsys, monkeypatch):
    def no_credentials(service: str, region: str | None = None):
        raise RuntimeError("Unable to locate credentials")
    code = preflight.main(["--stack", "prod", "--stack-file", stack_file(tmp_path)], client_factory=no_credentials,
                          ip=lambda: None)
    out, err = capsys.readouterr()
    assert code == 2
    assert err == ("gpucluster: the account could not be checked: are AWS credentials set "
                   "(`aws sts get-caller-identity`)?\n")
    assert "PASS" not in out


def test_a_quota_too_low_fails_with_the_numbers_and_the_request(aws, tmp_path, capsys):
    sq, _ = service_quotas(p_vcpus=2000)
    code, report = run(capsys, stack_file(tmp_path), sq)
    assert code == 1 and report["ok"] is False
    check = by_name(report)["vCPU quota: Running On-Demand P instances"]
    assert check["status"] == FAIL
    assert check["detail"].endswith(
        "and 0 run already: request at least 3072: `aws service-quotas request-service-quota-increase --service-code "
        "ec2 --quota-code L-417A185B --desired-value 3072`")


def test_text_output_and_unset_deploy_keys(aws, capsys):
    sq, _ = service_quotas()
    code = preflight.main(["--stack", "prod"], client_factory=factory(sq), ip=lambda: ADDRESS)
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    # The README's form: a failing whoami stops it loudly instead of writing an empty ARN.
    assert out[0] == ("FAIL    gpucluster:adminPrincipalArns set: not set in Pulumi.prod.yaml: admin=$(venv/bin/python "
                      "-m bootstrap whoami) && pulumi config set --path 'gpucluster:adminPrincipalArns[0]' \"$admin\"")
    assert out[1].startswith("FAIL    gpucluster:publicAccessCidrs set: not set in Pulumi.prod.yaml")
    # The stand-ins are not checked as if they were the user's.
    assert not any("API endpoint reachable" in line or line.startswith("UNKNOWN admin") for line in out)
    assert out[-1].endswith("2 fail")


def test_a_type_not_offered_in_the_chosen_zone_fails(aws, tmp_path, capsys):
    # AWS's offerings as moto ships them: p5en.48xlarge is in some us-east-1 zones only.
    offerings = mocks.moto_offerings("us-east-1")
    zone = next(z for z, types in sorted(offerings.items()) if "p5en.48xlarge" not in types)
    pools = [{"name": "h200", "instanceType": "p5en.48xlarge", "maxNodes": 2}]
    sq, _ = service_quotas()
    # Without prod's teams: their guarantees are on pool h100, which this stack does not have.
    code, report = run(capsys, stack_file(tmp_path, **{"gpucluster:gpuAvailabilityZone": zone,
                                                       "gpucluster:gpuPools": pools, "gpucluster:jobs": [],
                                                       "gpucluster:teams": []}), sq)
    (check,) = [c for c in report["checks"] if c["name"] == "GPU zone"]
    assert code == 1 and check["status"] == FAIL
    assert f"gpucluster:gpuAvailabilityZone: got '{zone}'" in check["detail"]
    assert "which does not offer p5en.48xlarge; zones offering it: us-east-1a (use1-az6), us-east-1c" in check["detail"]


def test_access_denied_is_unknown_not_a_traceback(aws, tmp_path, capsys):
    sq = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(sq)
    for _ in range(2):  # the vCPU and the network checks each stop at their first refusal
        stub.add_client_error("get_service_quota", "AccessDeniedException", "not authorized")
    stub.add_client_error("list_aws_default_service_quotas", "AccessDeniedException", "not authorized")
    stub.add_client_error("list_aws_default_service_quotas", "AccessDeniedException", "not authorized")
    stub.activate()
    code, report = run(capsys, stack_file(tmp_path), sq)
    checks = by_name(report)
    for name in ("vcpu quotas", "network quotas", "eks quotas", "fsx quota"):
        assert checks[name]["status"] == UNKNOWN and checks[name]["detail"].startswith("AccessDeniedException")
    assert code == 0  # nothing failed: unknown is not a failure


def test_a_missing_stack_file_is_exit_2(capsys):
    assert preflight.main(["--stack", "nope"]) == 2
    assert capsys.readouterr().err.startswith("gpucluster: no stack 'nope': Pulumi.nope.yaml not found")


# -- single checks ---------------------------------------------------------------------------

RID = "cr-0123456789abcdef0"


def reservation_context(pool_type: str = "p5.48xlarge", capacity: str = "CAPACITY_BLOCK", max_nodes: int = 4):
    cfg = stack_config("prod", {"gpucluster:gpuPools": [
        {"name": "h100", "instanceType": pool_type, "maxNodes": max_nodes, "capacityType": capacity,
         "capacityReservationId": RID}], "gpucluster:jobs": [],
        "gpucluster:teams": []})  # prod's teams are guaranteed 8 nodes, more than this pool's 4
    ec2 = boto3.client("ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    ctx = Context(cfg=cfg, client=lambda service, region=None: ec2, public_ip=lambda: None, now=NOW)
    ctx.plan = mocks_plan()
    return ctx, stub


def mocks_plan():
    from components.core.hardware.zones import ZonePlan

    return ZonePlan(gpu_zone="us-east-1a", zones=("us-east-1a", "us-east-1b"),
                    cluster_zones=("us-east-1a", "us-east-1b"), zone_ids={"us-east-1a": "use1-az6",
                                                                          "us-east-1b": "use1-az1"})


def reservation(**overrides) -> dict:
    base = {"CapacityReservationId": RID, "InstanceType": "p5.48xlarge", "AvailabilityZone": "us-east-1a",
            "TotalInstanceCount": 4, "State": "active", "ReservationType": "capacity-block",
            "StartDate": NOW - timedelta(days=1), "EndDate": NOW + timedelta(days=6)}
    return {**base, **overrides}


@pytest.mark.parametrize(("found", "status", "detail"), [
    (reservation(), PASS, f"Capacity Block {RID}: active, 4 x p5.48xlarge in us-east-1a"),
    (reservation(AvailabilityZone="us-east-1d"), FAIL,
     "it is in us-east-1d, not the GPU zone us-east-1a: set gpucluster:gpuAvailabilityZone: us-east-1d"),
    (reservation(TotalInstanceCount=2), WARN, "holds 2 instances, fewer than maxNodes 4: scale-ups past 2 fail"),
    (reservation(State="expired", EndDate=NOW - timedelta(hours=2)), FAIL, "it is expired; it ended 2026-12-03 10:00 UTC"),
    (reservation(EndDate=NOW + timedelta(hours=3)), WARN,
     "ends 2026-12-03 15:00 UTC: pause the stack (or scale the pool to 0) by 14:30 UTC"),
    (reservation(InstanceType="p5en.48xlarge"), FAIL, "reserves p5en.48xlarge, not the pool's p5.48xlarge"),
])
def test_reservations(found, status, detail):
    ctx, stub = reservation_context()
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": [found]},
                      {"CapacityReservationIds": [RID]})
    with stub:
        (check,) = preflight_checks.reservations(ctx)
    assert (check.name, check.status) == ("reservation of pool h100", status)
    assert detail in check.detail


def test_a_reservation_that_does_not_exist():
    ctx, stub = reservation_context(capacity="ON_DEMAND")
    stub.add_response("describe_capacity_reservations", {"CapacityReservations": []}, {"CapacityReservationIds": [RID]})
    with stub:
        (check,) = preflight_checks.reservations(ctx)
    assert (check.status, check.detail) == (FAIL, f"{RID} does not exist in us-east-1")


def test_ecr_images_are_looked_up(aws):
    ecr = boto3.client("ecr", region_name="us-west-2")
    ecr.create_repository(repositoryName="train")
    ecr.put_image(repositoryName="train", imageTag="1.0",
                  imageManifest=json.dumps({"schemaVersion": 2, "mediaType":
                                            "application/vnd.docker.distribution.manifest.v2+json"}))
    registry = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com"
    jobs = [{"name": n, "pool": "h100", "nodes": 1, "launcher": "torchrun", "image": f"{registry}/{image}",
             "command": ["python", "t.py"]} for n, image in (("a", "train:1.0"), ("b", "train:2.0"), ("c", "none:1"))]
    cfg = stack_config("prod", {"gpucluster:jobs": jobs})
    ctx = Context(cfg=cfg, client=lambda s, region=None: boto3.client(s, region_name=region), public_ip=lambda: None)
    checks = {c.name: (c.status, c.detail) for c in preflight_checks.images(ctx)}
    assert checks == {
        f"image {registry}/train:1.0": (PASS, "exists in ECR"),
        f"image {registry}/train:2.0": (FAIL, "ImageNotFoundException: push it before the job runs"),
        f"image {registry}/none:1": (FAIL, "RepositoryNotFoundException: push it before the job runs"),
    }


def test_an_admin_with_the_wrong_path_fails(aws):
    boto3.client("iam").create_role(RoleName="Ops", Path="/team/", AssumeRolePolicyDocument="{}")
    cfg = stack_config("prod", {"gpucluster:adminPrincipalArns": [f"arn:aws:iam::{ACCOUNT}:role/Ops",
                                                                  f"arn:aws:iam::{ACCOUNT}:role/Gone"]})
    ctx = Context(cfg=cfg, client=lambda s, region=None: boto3.client(s), public_ip=lambda: None, account=ACCOUNT)
    checks = [(c.status, c.detail) for c in preflight_checks.admins(ctx)]
    assert checks == [(FAIL, f"the role is arn:aws:iam::{ACCOUNT}:role/team/Ops: EKS matches the ARN with its path"),
                      (FAIL, f"no such role in account {ACCOUNT}")]


def test_a_cpu_pool_type_the_gpu_zone_does_not_offer_fails_and_cpu_pools_count_in_the_quota(aws, tmp_path, capsys):
    # AWS's offerings as moto ships them: use1-az3 (us-east-1e) offers p5.48xlarge but no c7i.
    sq, _ = service_quotas()
    cpu = [{"name": "ps", "instanceType": "c7i.8xlarge", "maxNodes": 2, "capacityType": "ON_DEMAND"}]
    code, report = run(capsys, stack_file(tmp_path, **{"gpucluster:gpuAvailabilityZone": "use1-az3",
                                                       "gpucluster:cpuPools": cpu}), sq)
    checks = by_name(report)
    check = checks["gpucluster:cpuPools[0].instanceType offered in the GPU zone"]
    assert code == 1 and check["status"] == FAIL
    assert check["detail"].startswith(
        "gpucluster:cpuPools[0].instanceType: got 'c7i.8xlarge', which the GPU zone us-east-1e (use1-az3) does not "
        "offer (every pool launches in the GPU zone); zones offering it: us-east-1a (use1-az6)")
    assert checks["p5.48xlarge offered in the GPU zone"]["status"] == PASS
    standard = checks["vCPU quota: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"]
    assert "ps: 2 x c7i.8xlarge (64 vCPUs)" in standard["detail"]
