"""Network, zone choice and EKS cluster: the exact resource contract under mocks."""

from __future__ import annotations

import json

import pytest

from components.aws import cluster as cluster_mod
from components.aws.network import subnet_layout
from components.core.hardware.zones import EKS_UNSUPPORTED_ZONE_IDS, Zone, choose_zones
from components.core.problems import ConfigError
from tests.conftest import recording as shared_recording


@pytest.fixture(scope="module")
def dev(request):
    return shared_recording("dev")


@pytest.fixture(scope="module")
def prod():
    return shared_recording("prod")


# -- zones -------------------------------------------------------------------

# us-east-1 as moto's account sees it: us-east-1e is use1-az3, which EKS refuses.
ZONES = [Zone("us-east-1a", "use1-az6"), Zone("us-east-1b", "use1-az1"), Zone("us-east-1c", "use1-az2"),
         Zone("us-east-1d", "use1-az4"), Zone("us-east-1e", "use1-az3")]
NAMES = [z.name for z in ZONES]


def test_first_zone_offering_every_pool_type_is_the_gpu_zone():
    plan = choose_zones(ZONES, {"p5.48xlarge": {"us-east-1c", "us-east-1d"}, "g6e.xlarge": set(NAMES)}, None, 2)
    assert plan.gpu_zone == "us-east-1c"
    assert plan.zones == plan.cluster_zones == ("us-east-1c", "us-east-1a")
    assert plan.zone_ids == {"us-east-1c": "use1-az2", "us-east-1a": "use1-az6"}


def test_eks_refused_zone_ids_never_carry_the_cluster():
    assert {"use1-az3", "usw1-az2", "cac1-az3"} == EKS_UNSUPPORTED_ZONE_IDS
    # Offered only in use1-az3: GPUs live there, the cluster's subnets elsewhere.
    plan = choose_zones(ZONES, {"p5.48xlarge": {"us-east-1e"}}, None, 2)
    assert plan.gpu_zone == "us-east-1e"
    assert plan.cluster_zones == ("us-east-1a", "us-east-1b")
    assert plan.zones == ("us-east-1e", "us-east-1a", "us-east-1b")
    assert plan.describe()[0] == {"name": "us-east-1e", "zoneId": "use1-az3", "gpu": True, "cluster": False}


def test_a_zone_eks_accepts_is_preferred_for_the_gpus():
    plan = choose_zones([ZONES[4], *ZONES[:4]], {"p5.48xlarge": {"us-east-1e", "us-east-1d"}}, None, 2)
    assert plan.gpu_zone == "us-east-1d" and "us-east-1e" not in plan.zones


def test_requested_zone_by_id():
    plan = choose_zones(ZONES, {"p5.48xlarge": set(NAMES)}, "use1-az4", 3)
    assert plan.gpu_zone == "us-east-1d"
    assert plan.cluster_zones == ("us-east-1d", "us-east-1a", "us-east-1b")


def test_requested_zone_must_offer_the_types():
    with pytest.raises(ConfigError) as info:
        choose_zones(ZONES, {"p5.48xlarge": {"us-east-1c"}}, "us-east-1a", 2)
    assert str(info.value.problems[0]) == (
        "gpucluster:gpuAvailabilityZone: got 'us-east-1a' (use1-az6), which does not offer "
        "p5.48xlarge; zones offering it: us-east-1c (use1-az2)")


def test_no_common_zone_and_too_many_zones_are_reported_together():
    with pytest.raises(ConfigError) as info:
        choose_zones(ZONES[:2], {"p5.48xlarge": {"us-east-1a"}, "p4d.24xlarge": {"us-east-1b"}}, None, 3)
    assert [str(p) for p in info.value.problems] == [
        "gpucluster:network.azCount: got 3; the region has 2 zones EKS accepts: us-east-1a (use1-az6), "
        "us-east-1b (use1-az1)",
        "gpucluster:gpuAvailabilityZone: no zone of the region offers every GPU pool's type "
        "(p4d.24xlarge: us-east-1b (use1-az1); p5.48xlarge: us-east-1a (use1-az6)); split the pools across "
        "stacks or change a type",
    ]


def test_az_count_counts_only_zones_eks_accepts():
    with pytest.raises(ConfigError, match="got 5; the region has 4 zones EKS accepts: .*; EKS refuses "
                                          r"us-east-1e \(use1-az3\)"):
        choose_zones(ZONES, {}, None, 5)


def test_unknown_requested_zone():
    with pytest.raises(ConfigError, match=r"got 'us-east-1z'; available zones: us-east-1a \(use1-az6\)"):
        choose_zones(ZONES, {}, "us-east-1z", 2)


def test_program_picks_the_zone_offering_the_pool_type(run_stack):
    # AWS's offerings as shipped in moto: p6-b200.48xlarge only in us-east-1c.
    rec = run_stack("dev", {"gpucluster:gpuPools": [{"name": "b200", "instanceType": "p6-b200.48xlarge",
                                                     "maxNodes": 2}], "gpucluster:jobs": []})
    assert rec.stack_outputs["gpuAvailabilityZone"] == "us-east-1c"
    zones = sorted(r.inputs["availabilityZone"] for r in rec.of_type("aws:ec2/subnet:Subnet"))
    assert zones == ["us-east-1a", "us-east-1a", "us-east-1c", "us-east-1c"]


def test_mocked_zones_are_awss_names_and_ids_for_the_region():
    from bootstrap.offline.aws_data import PlanDataError
    from bootstrap.offline.mocks import GpuClusterMocks

    mocks = GpuClusterMocks("us-east-1")
    assert list(zip(mocks.zones, mocks.zone_ids))[:5] == [(z.name, z.zone_id) for z in ZONES]
    assert GpuClusterMocks("us-west-1").zone_ids == ["usw1-az3", "usw1-az1"]
    with pytest.raises(PlanDataError, match="no instance-type offerings for xx-north-9"):
        GpuClusterMocks("xx-north-9")


def test_gpus_in_a_zone_eks_refuses_keep_the_cluster_out_of_it(run_stack):
    rec = run_stack("prod", {"gpucluster:gpuAvailabilityZone": "use1-az3"})
    assert rec.stack_outputs["gpuAvailabilityZone"] == "us-east-1e"
    subnets = {s.inputs["availabilityZone"]: s for s in rec.of_type("aws:ec2/subnet:Subnet") if "private" in s.name}
    assert sorted(subnets) == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"]
    (eks,) = rec.of_type("aws:eks/cluster:Cluster")
    assert sorted(eks.inputs["vpcConfig"]["subnetIds"]) == sorted(
        subnets[z].id for z in ("us-east-1a", "us-east-1b", "us-east-1c"))
    (system,) = [r for r in rec.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    assert subnets["us-east-1e"].id not in system.inputs["subnetIds"]
    (gpu,) = [r for r in rec.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("h100-node-group")]
    assert gpu.inputs["subnetIds"] == [subnets["us-east-1e"].id]
    assert [z["zoneId"] for z in rec.stack_outputs["zones"]] == ["use1-az3", "use1-az6", "use1-az1", "use1-az2"]


# -- network -----------------------------------------------------------------

def test_subnet_layout_is_disjoint_and_inside_the_vpc():
    import ipaddress

    layout = subnet_layout("10.0.0.0/16", 3)
    assert layout == [("10.0.0.0/19", "10.0.224.0/22"), ("10.0.32.0/19", "10.0.228.0/22"),
                      ("10.0.64.0/19", "10.0.232.0/22")]
    nets = [ipaddress.IPv4Network(c) for pair in subnet_layout("10.0.0.0/20", 6) for c in pair]
    assert all(a == b or not a.overlaps(b) for a in nets for b in nets)


def test_dev_network_contract(dev):
    (vpc,) = dev.of_type("aws:ec2/vpc:Vpc")
    assert vpc.name == "gpucluster-dev-vpc"
    assert vpc.inputs["cidrBlock"] == "10.10.0.0/16"
    assert vpc.inputs["enableDnsHostnames"] is True
    subnets = dev.of_type("aws:ec2/subnet:Subnet")
    assert sorted(s.name for s in subnets) == [
        "gpucluster-dev-private-us-east-1a", "gpucluster-dev-private-us-east-1b",
        "gpucluster-dev-public-us-east-1a", "gpucluster-dev-public-us-east-1b"]
    for s in subnets:
        tags = s.inputs["tags"]
        assert tags["kubernetes.io/cluster/gpucluster-dev"] == "shared"
        role = "kubernetes.io/role/internal-elb" if "private" in s.name else "kubernetes.io/role/elb"
        assert tags[role] == "1"
    assert len(dev.of_type("aws:ec2/natGateway:NatGateway")) == 1
    (nat,) = dev.of_type("aws:ec2/natGateway:NatGateway")
    assert nat.name == "gpucluster-dev-nat-us-east-1a"  # in the GPU zone
    (endpoint,) = dev.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    private_rts = [r for r in dev.of_type("aws:ec2/routeTable:RouteTable") if "private" in r.name]
    assert sorted(endpoint.inputs["routeTableIds"]) == sorted(r.id for r in private_rts)
    for rt in private_rts:
        assert rt.inputs["routes"] == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": nat.id}]


def test_prod_has_a_nat_gateway_per_zone(prod):
    nats = prod.of_type("aws:ec2/natGateway:NatGateway")
    assert len(nats) == 3
    rts = {r.name: r for r in prod.of_type("aws:ec2/routeTable:RouteTable")}
    for nat in nats:
        zone = nat.name.removeprefix("gpucluster-prod-nat-")
        assert rts[f"gpucluster-prod-private-{zone}-rt"].inputs["routes"][0]["natGatewayId"] == nat.id


# -- cluster -----------------------------------------------------------------

def test_eks_control_plane_contract(dev):
    (eks,) = dev.of_type("aws:eks/cluster:Cluster")
    assert eks.name == "gpucluster-dev-eks"
    i = eks.inputs
    assert i["name"] == "gpucluster-dev" and i["version"] == "1.35"
    assert i["accessConfig"] == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False}
    assert i["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]
    assert i["encryptionConfig"]["resources"] == ["secrets"]
    (key,) = dev.of_type("aws:kms/key:Key")
    assert i["encryptionConfig"]["provider"]["keyArn"] == key.outputs["arn"]
    assert key.inputs["enableKeyRotation"] is True
    vpc = i["vpcConfig"]
    assert vpc["endpointPrivateAccess"] is True and vpc["endpointPublicAccess"] is True
    assert vpc["publicAccessCidrs"] == ["1.1.1.1/32"]  # the plan's stand-in
    private = [s.id for s in dev.of_type("aws:ec2/subnet:Subnet") if "private" in s.name]
    assert sorted(vpc["subnetIds"]) == sorted(private)
    assert i["upgradePolicy"] == {"supportType": "STANDARD"}
    (log_group,) = dev.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert log_group.inputs["name"] == "/aws/eks/gpucluster-dev/cluster"
    assert dev.depends_on(eks, log_group)
    # EKS re-creates it after a delete (terraform-aws-eks #2486): kept on destroy, adopted on the next up.
    assert log_group.retain_on_delete is True and log_group.import_id == ""


def test_an_existing_log_group_is_adopted_not_created(monkeypatch):
    from bootstrap.offline import mocks
    from tests.conftest import stack_raw

    original = mocks.GpuClusterMocks.__init__

    def with_leftover_group(self, region="us-east-1"):
        original(self, region)
        self.existing_log_groups = ["/aws/eks/gpucluster-dev/cluster", "/aws/eks/gpucluster-dev/cluster-other"]

    monkeypatch.setattr(mocks.GpuClusterMocks, "__init__", with_leftover_group)
    rec = mocks.run_program(stack_raw("dev"), "dev")
    (log_group,) = rec.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert log_group.import_id == "/aws/eks/gpucluster-dev/cluster"
    assert log_group.inputs["retentionInDays"] == 90


def test_private_only_endpoint_when_deploying_from_the_vpc(run_stack):
    rec = run_stack("dev", {"gpucluster:publicAccessCidrs": [], "gpucluster:deployerInVpc": True})
    vpc = rec.of_type("aws:eks/cluster:Cluster")[0].inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is False and "publicAccessCidrs" not in vpc


def test_extended_support_versions_are_marked(run_stack):
    versions = {"amiReleaseVersion": "1.33.10-20260714", "addons": {
        "vpc-cni": "v1.22.4-eksbuild.3", "kube-proxy": "v1.33.10-eksbuild.2", "eks-pod-identity-agent": "v1.3.10-eksbuild.3",
        "coredns": "v1.12.4-eksbuild.1", "eks-node-monitoring-agent": "v1.6.4-eksbuild.1",
        "aws-fsx-csi-driver": "v1.9.0-eksbuild.1", "aws-ebs-csi-driver": "v1.63.1-eksbuild.1"}}
    rec = run_stack("dev", {"gpucluster:kubernetesVersion": "1.33", "gpucluster:versions": versions})
    assert rec.of_type("aws:eks/cluster:Cluster")[0].inputs["upgradePolicy"] == {"supportType": "EXTENDED"}


ADMINS = ["arn:aws:iam::210987654321:role/Platform", "arn:aws:iam::345678901234:role/ci/Preview"]


def test_admin_access_entries_are_exactly_the_configured_ones(run_stack):
    rec = run_stack("dev", {"gpucluster:adminPrincipalArns": [*ADMINS, ADMINS[0]]})
    entries = {r.inputs["principalArn"]: r for r in rec.of_type("aws:eks/accessEntry:AccessEntry")}
    assert sorted(entries) == sorted(ADMINS)  # each once; the deployer is not added behind the config's back
    policies = rec.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert len(policies) == 2
    for p in policies:
        assert p.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        assert p.inputs["accessScope"] == {"type": "cluster"}
    # Whoever runs pulumi (here the mocks' deployer) is warned, never made an admin.
    assert any("is not in gpucluster:adminPrincipalArns" in m for _, m in rec.logs)


def test_the_same_admins_whoever_deploys(run_stack, monkeypatch):
    from bootstrap.offline import mocks

    first = run_stack("dev", {"gpucluster:adminPrincipalArns": ADMINS})
    monkeypatch.setattr(mocks, "DEPLOYER_ROLE", "arn:aws:iam::000000000000:role/ci-preview")
    second = run_stack("dev", {"gpucluster:adminPrincipalArns": ADMINS})
    def entries(rec):
        return sorted((r.name, r.inputs["principalArn"]) for r in rec.of_type("aws:eks/accessEntry:AccessEntry"))

    assert entries(first) == entries(second) and len(entries(first)) == 2


def test_managed_addons_pinned_by_the_stack_and_ordered(dev):
    from tests.conftest import stack_config

    addons = {r.inputs["addonName"]: r for r in dev.of_type("aws:eks/addon:Addon")}
    pins = stack_config("dev").versions.addons
    assert set(addons) == set(pins) == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent",
                                        "eks-node-monitoring-agent", "aws-fsx-csi-driver", "aws-ebs-csi-driver"}
    for name, addon in addons.items():
        assert addon.inputs["addonVersion"] == pins[name]  # never a lookup that moves on the next up
    (system,) = [r for r in dev.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    for name in cluster_mod.ADDONS_BEFORE_NODES:
        assert dev.depends_on(system, addons[name])
    for name in (*cluster_mod.ADDONS_AFTER_NODES, cluster_mod.EBS_CSI_ADDON):
        assert dev.depends_on(addons[name], system)
    # The EBS CSI controller's own role, with AWS's managed policy; its volumes tagged with the cluster.
    ebs = addons[cluster_mod.EBS_CSI_ADDON].inputs
    (ebs_role,) = [r for r in dev.of_type("aws:iam/role:Role") if r.name.endswith("ebs-csi-role")]
    assert ebs["podIdentityAssociations"] == [{"roleArn": ebs_role.outputs["arn"],
                                               "serviceAccount": "ebs-csi-controller-sa"}]
    assert [a.inputs["policyArn"] for a in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
            if a.inputs["role"] == ebs_role.outputs["name"]] == [
        "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"]
    assert json.loads(ebs["configurationValues"]) == {
        "controller": {"extraVolumeTags": {"gpucluster:cluster": "gpucluster-dev"}}}
    cni = addons["vpc-cni"].inputs["podIdentityAssociations"]
    (cni_role,) = [r for r in dev.of_type("aws:iam/role:Role") if r.name.endswith("vpc-cni-role")]
    (cni_policy,) = [a for a in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                     if a.inputs["role"] == cni_role.outputs["name"]]
    # aws-node needs its permissions when it starts; on destroy they outlive it.
    assert cni_policy.urn in addons["vpc-cni"].dependencies
    assert cni == [{"roleArn": cni_role.outputs["arn"], "serviceAccount": "aws-node"}]
    trust = json.loads(cni_role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Statement"][0]["Action"] == ["sts:AssumeRole", "sts:TagSession"]


def test_system_node_group_contract(dev):
    (system,) = [r for r in dev.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    i = system.inputs
    # A prefix, not a fixed name: a replacement (type, disk, zones) is created before the old one goes.
    # Short: EKS allows 63 characters and the provider adds 26; names are per cluster anyway.
    assert i["nodeGroupNamePrefix"] == "system-" and "nodeGroupName" not in i
    assert i["releaseVersion"] == "1.35.6-20260714"
    assert i["instanceTypes"] == ["m7i.large"]
    assert i["amiType"] == "AL2023_x86_64_STANDARD"
    assert i["capacityType"] == "ON_DEMAND"
    assert i["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 2}
    assert i["labels"] == {"gpucluster.io/role": "system"}
    assert "taints" not in i


def test_node_role_has_only_the_node_policies(dev):
    (role,) = [r for r in dev.of_type("aws:iam/role:Role") if r.name.endswith("-node-role")]
    attached = sorted(a.inputs["policyArn"] for a in dev.of_type("aws:iam/rolePolicyAttachment:RolePolicyAttachment")
                      if a.inputs["role"] == role.outputs["name"])
    # Pull only (EKS User Guide, create-node-role); the image cache's import and create: components.aws.image_cache.
    assert attached == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]


def test_kubeconfig_is_a_secret_using_aws_eks_get_token(dev):
    assert "kubeconfig" in dev.secret_outputs
    kube = json.loads(dev.stack_outputs["kubeconfig"])
    user = kube["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"] == ["eks", "get-token", "--cluster-name", "gpucluster-dev", "--region", "us-east-1",
                            "--output", "json"]
    (eks,) = dev.of_type("aws:eks/cluster:Cluster")
    assert kube["clusters"][0]["cluster"]["server"] == eks.outputs["endpoint"]
    (provider,) = dev.of_type("pulumi:providers:kubernetes")
    assert json.loads(provider.inputs["kubeconfig"]) == kube
    assert "kubeconfig" in provider.secret_inputs


def test_kubernetes_provider_waits_for_admin_access(dev):
    (provider,) = dev.of_type("pulumi:providers:kubernetes")
    for assoc in dev.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation"):
        assert dev.depends_on(provider, assoc)


def test_kubeconfig_authenticates_as_the_aws_providers_identity(run_stack):
    rec = run_stack("dev", {"aws:profile": "ml-admin", "aws:assumeRoles": [
        {"roleArn": "arn:aws:iam::210987654321:role/Deployer"}]})
    user = json.loads(rec.stack_outputs["kubeconfig"])["users"][0]["user"]["exec"]
    # --profile rather than AWS_PROFILE, which ambient credentials can override (pulumi-eks does the same).
    assert user["args"][-4:] == ["--role-arn", "arn:aws:iam::210987654321:role/Deployer", "--profile", "ml-admin"]
    assert "env" not in user
