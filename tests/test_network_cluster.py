"""Network, zone choice and EKS cluster: the exact resource contract under mocks."""

from __future__ import annotations

import json

import pytest

from components import cluster as cluster_mod
from components.network import subnet_layout
from components.spec.validation import ConfigError
from components.spec.zones import choose_zones


@pytest.fixture(scope="module")
def dev(request):
    from bootstrap import mocks
    from tests.conftest import stack_raw

    return mocks.run_program(stack_raw("dev"), "dev")


@pytest.fixture(scope="module")
def prod():
    from bootstrap import mocks
    from tests.conftest import stack_raw

    return mocks.run_program(stack_raw("prod"), "prod")


# -- zones -------------------------------------------------------------------

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]


def test_first_zone_offering_every_pool_type_is_the_gpu_zone():
    plan = choose_zones(ZONES, {"p5.48xlarge": {"us-east-1c", "us-east-1d"}, "g6e.xlarge": set(ZONES)}, None, 2)
    assert plan.gpu_zone == "us-east-1c"
    assert plan.zones == ("us-east-1c", "us-east-1a")


def test_requested_zone_must_offer_the_types():
    with pytest.raises(ConfigError) as info:
        choose_zones(ZONES, {"p5.48xlarge": {"us-east-1c"}}, "us-east-1a", 2)
    assert str(info.value.problems[0]) == (
        "gpucluster:gpuAvailabilityZone: got 'us-east-1a', which does not offer p5.48xlarge; "
        "zones offering it: us-east-1c")


def test_no_common_zone_and_too_many_zones_are_reported_together():
    with pytest.raises(ConfigError) as info:
        choose_zones(ZONES[:2], {"p5.48xlarge": {"us-east-1a"}, "p4d.24xlarge": {"us-east-1b"}}, None, 3)
    assert [str(p) for p in info.value.problems] == [
        "gpucluster:network.azCount: got 3; the region has 2 zones: us-east-1a, us-east-1b",
        "gpucluster:gpuAvailabilityZone: no zone of the region offers every GPU pool's type "
        "(p4d.24xlarge: us-east-1b; p5.48xlarge: us-east-1a); split the pools across stacks or change a type",
    ]


def test_unknown_requested_zone():
    with pytest.raises(ConfigError, match="got 'us-east-1z'; available zones: us-east-1a"):
        choose_zones(ZONES, {}, "us-east-1z", 2)


def test_program_picks_the_zone_offering_the_pool_type(run_stack):
    # AWS's offerings as shipped in moto: p6-b200.48xlarge only in us-east-1c.
    rec = run_stack("dev", {"gpucluster:gpuPools": [{"name": "b200", "instanceType": "p6-b200.48xlarge",
                                                     "maxNodes": 2}], "gpucluster:jobs": []})
    assert rec.stack_outputs["gpuAvailabilityZone"] == "us-east-1c"
    zones = sorted(r.inputs["availabilityZone"] for r in rec.of_type("aws:ec2/subnet:Subnet"))
    assert zones == ["us-east-1a", "us-east-1a", "us-east-1c", "us-east-1c"]


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
    assert vpc["publicAccessCidrs"] == ["203.0.113.0/24"]
    private = [s.id for s in dev.of_type("aws:ec2/subnet:Subnet") if "private" in s.name]
    assert sorted(vpc["subnetIds"]) == sorted(private)
    assert i["upgradePolicy"] == {"supportType": "STANDARD"}
    (log_group,) = dev.of_type("aws:cloudwatch/logGroup:LogGroup")
    assert log_group.inputs["name"] == "/aws/eks/gpucluster-dev/cluster"
    assert dev.depends_on(eks, log_group)


def test_private_only_endpoint_without_public_cidrs(run_stack):
    rec = run_stack("dev", {"gpucluster:publicAccessCidrs": []})
    vpc = rec.of_type("aws:eks/cluster:Cluster")[0].inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is False and "publicAccessCidrs" not in vpc


def test_extended_support_versions_are_marked(run_stack):
    rec = run_stack("dev", {"gpucluster:kubernetesVersion": "1.33"})
    assert rec.of_type("aws:eks/cluster:Cluster")[0].inputs["upgradePolicy"] == {"supportType": "EXTENDED"}


def test_admin_access_entries_include_the_deployer_once(dev):
    from bootstrap.mocks import DEPLOYER_ROLE

    entries = {r.inputs["principalArn"]: r for r in dev.of_type("aws:eks/accessEntry:AccessEntry")}
    assert set(entries) == {"arn:aws:iam::123456789012:role/Admin", DEPLOYER_ROLE}
    policies = dev.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert len(policies) == 2
    for p in policies:
        assert p.inputs["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        assert p.inputs["accessScope"] == {"type": "cluster"}
    assert cluster_mod.admin_principals(["a", "b", "a"], "b") == ["a", "b"]


def test_managed_addons_resolved_for_the_version_and_ordered(dev):
    addons = {r.inputs["addonName"]: r for r in dev.of_type("aws:eks/addon:Addon")}
    assert set(addons) == {"vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent",
                           "eks-node-monitoring-agent", *(set(addons) - {
                               "vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent",
                               "eks-node-monitoring-agent"})}
    for name in ("vpc-cni", "kube-proxy", "coredns", "eks-pod-identity-agent", "eks-node-monitoring-agent"):
        assert addons[name].inputs["addonVersion"].startswith("v")
    (system,) = [r for r in dev.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    for name in cluster_mod.ADDONS_BEFORE_NODES:
        assert dev.depends_on(system, addons[name])
    for name in cluster_mod.ADDONS_AFTER_NODES:
        assert dev.depends_on(addons[name], system)
    cni = addons["vpc-cni"].inputs["podIdentityAssociations"]
    (cni_role,) = [r for r in dev.of_type("aws:iam/role:Role") if r.name.endswith("vpc-cni-role")]
    assert cni == [{"roleArn": cni_role.outputs["arn"], "serviceAccount": "aws-node"}]
    trust = json.loads(cni_role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert trust["Statement"][0]["Action"] == ["sts:AssumeRole", "sts:TagSession"]


def test_system_node_group_contract(dev):
    (system,) = [r for r in dev.of_type("aws:eks/nodeGroup:NodeGroup") if r.name.endswith("system-nodes")]
    i = system.inputs
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
    assert attached == [
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
    ]


def test_kubeconfig_is_a_secret_using_aws_eks_get_token(dev):
    assert "kubeconfig" in dev.secret_outputs
    kube = json.loads(dev.stack_outputs["kubeconfig"])
    user = kube["users"][0]["user"]["exec"]
    assert user["command"] == "aws"
    assert user["args"][:4] == ["eks", "get-token", "--cluster-name", "gpucluster-dev"]
    (eks,) = dev.of_type("aws:eks/cluster:Cluster")
    assert kube["clusters"][0]["cluster"]["server"] == eks.outputs["endpoint"]
    (provider,) = dev.of_type("pulumi:providers:kubernetes")
    assert json.loads(provider.inputs["kubeconfig"]) == kube
    assert "kubeconfig" in provider.secret_inputs


def test_kubernetes_provider_waits_for_admin_access(dev):
    (provider,) = dev.of_type("pulumi:providers:kubernetes")
    for assoc in dev.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation"):
        assert dev.depends_on(provider, assoc)
