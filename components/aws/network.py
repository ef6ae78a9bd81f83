"""Network: VPC, public and private subnets per zone, NAT, S3 endpoint."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.core.config import NetworkConfig
from components.core.hardware.zones import ZonePlan
from components.hooks import StackHooks


def subnet_layout(cidr: str, zones: int) -> list[tuple[str, str]]:
    """(private, public) CIDRs per zone.

    The VPC splits into 8 blocks: blocks 0-5 give one large private subnet
    per zone (pods take VPC addresses with the VPC CNI), and the last block
    is cut into small public subnets for NAT gateways and load balancers.
    """
    net = ipaddress.IPv4Network(cidr)
    blocks = list(net.subnets(prefixlen_diff=3))
    public = list(blocks[-1].subnets(prefixlen_diff=3))
    return [(str(blocks[i]), str(public[i])) for i in range(zones)]


@dataclass(frozen=True)
class NetworkArgs:
    config: NetworkConfig
    cluster_name: str
    region: str
    zones: ZonePlan
    tags: dict[str, str]
    # The program's delete hooks: a private subnet releases the ENIs the VPC CNI left first.
    hooks: StackHooks | None = None


class Network(pulumi.ComponentResource):
    """VPC with a private and a public subnet in each zone."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]  # one per zone, the GPU zone's first
    cluster_subnet_ids: list[pulumi.Output[str]]  # the private subnets EKS accepts (ZonePlan.cluster_zones)
    public_subnet_ids: list[pulumi.Output[str]]
    gpu_subnet_id: pulumi.Output[str]
    node_security_group_id: pulumi.Output[str]
    gpu_zone: str

    def __init__(self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}

        def tags(role: str, **extra: str) -> dict[str, str]:
            return {**args.tags, "Name": f"{args.cluster_name}-{role}", **extra}

        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=args.config.cidr, enable_dns_hostnames=True,
                          enable_dns_support=True, tags=tags("vpc"), opts=child)
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags("igw"), opts=child)
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt", vpc_id=vpc.id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}], tags=tags("public"), opts=child)

        zones = args.zones.zones
        layout = subnet_layout(args.config.cidr, len(zones))
        public_subnets, private_subnets = [], []
        for zone, (private_cidr, public_cidr) in zip(zones, layout):
            public = aws.ec2.Subnet(
                f"{name}-public-{zone}", vpc_id=vpc.id, cidr_block=public_cidr, availability_zone=zone,
                # Load balancer discovery (EKS User Guide, "Subnet requirements").
                tags=tags(f"public-{zone}", **cluster_tag, **{"kubernetes.io/role/elb": "1"}), opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-public-{zone}-rta", subnet_id=public.id,
                                          route_table_id=public_rt.id, opts=child)
            # Nodes live in the private subnets: an interface the VPC CNI left
            # there would fail the subnet's delete (DependencyViolation).
            private = aws.ec2.Subnet(
                f"{name}-private-{zone}", vpc_id=vpc.id, cidr_block=private_cidr, availability_zone=zone,
                tags=tags(f"private-{zone}", **cluster_tag, **{"kubernetes.io/role/internal-elb": "1"}),
                opts=pulumi.ResourceOptions(
                    parent=self,
                    hooks=args.hooks.before_delete(args.hooks.release_leaked_enis) if args.hooks else None))
            public_subnets.append(public)
            private_subnets.append(private)

        # One NAT gateway (dev) sits in the GPU zone so GPU egress stays in-zone;
        # perAz gives each zone its own for availability.
        nat_zones = zones if args.config.nat_gateways == "perAz" else zones[:1]
        nats = {}
        eips = []
        for zone, public in zip(zones, public_subnets):
            if zone not in nat_zones:
                continue
            eip = aws.ec2.Eip(f"{name}-nat-{zone}-eip", domain="vpc", tags=tags(f"nat-{zone}"), opts=child)
            eips.append(eip)
            nats[zone] = aws.ec2.NatGateway(f"{name}-nat-{zone}", allocation_id=eip.id, subnet_id=public.id,
                                            tags=tags(f"nat-{zone}"),
                                            opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]))
        private_rts = []
        for zone, private in zip(zones, private_subnets):
            nat = nats.get(zone, nats[nat_zones[0]])
            rt = aws.ec2.RouteTable(f"{name}-private-{zone}-rt", vpc_id=vpc.id,
                                    routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}],
                                    tags=tags(f"private-{zone}"), opts=child)
            aws.ec2.RouteTableAssociation(f"{name}-private-{zone}-rta", subnet_id=private.id,
                                          route_table_id=rt.id, opts=child)
            private_rts.append(rt)

        # Gateway endpoint: dataset reads and checkpoint writes to S3 skip NAT charges.
        aws.ec2.VpcEndpoint(f"{name}-s3-endpoint", vpc_id=vpc.id, service_name=f"com.amazonaws.{args.region}.s3",
                            vpc_endpoint_type="Gateway", route_table_ids=[rt.id for rt in private_rts],
                            tags=tags("s3"), opts=child)

        # Attached to every GPU node; storage admits Lustre clients from it, so
        # the file system never waits for the EKS cluster's own security group.
        node_sg = aws.ec2.SecurityGroup(
            f"{name}-node-sg", vpc_id=vpc.id, description=f"GPU nodes of {args.cluster_name}",
            egress=[{"protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                     "description": "all outbound"}],
            tags=tags("nodes"), opts=child)

        self.vpc_id = vpc.id
        self.node_security_group_id = node_sg.id
        self.private_subnet_ids = [s.id for s in private_subnets]
        self.cluster_subnet_ids = [s.id for zone, s in zip(zones, private_subnets) if zone in args.zones.cluster_zones]
        self.public_subnet_ids = [s.id for s in public_subnets]
        self.gpu_subnet_id = private_subnets[0].id
        self.gpu_zone = args.zones.gpu_zone
        # Where the cluster's pods reach the internet from: a fleet's workers let its manager's in.
        self.nat_public_ips = [eip.public_ip for eip in eips]
        self.register_outputs({
            "vpcId": self.vpc_id,
            "privateSubnetIds": self.private_subnet_ids,
            "clusterSubnetIds": self.cluster_subnet_ids,
            "publicSubnetIds": self.public_subnet_ids,
            "gpuSubnetId": self.gpu_subnet_id,
            "nodeSecurityGroupId": self.node_security_group_id,
            "gpuAvailabilityZone": self.gpu_zone,
        })
