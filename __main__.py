"""gpucluster: config -> network -> cluster -> storage, GPU pools -> plugins -> jobs -> exports."""

import pulumi
import pulumi_aws as aws

from components import config as stack_config
from components.cluster import Cluster, ClusterArgs
from components.network import Network, NetworkArgs
from components.zones import lookup_zones

try:
    cfg = stack_config.load()
    zones = lookup_zones(cfg)
except stack_config.ConfigError as err:
    # A clean message and exit, no traceback, nothing registered.
    raise pulumi.RunError(err.render()) from None

caller = aws.get_caller_identity()
deployer = aws.iam.get_session_context(arn=caller.arn).issuer_arn

network = Network(cfg.cluster_name, NetworkArgs(
    config=cfg.network, cluster_name=cfg.cluster_name, region=cfg.region, zones=zones.zones, tags=cfg.tags))

cluster = Cluster(cfg.cluster_name, ClusterArgs(
    config=cfg, vpc_id=network.vpc_id, subnet_ids=network.private_subnet_ids, deployer_arn=deployer))

pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("gpuAvailabilityZone", zones.gpu_zone)
