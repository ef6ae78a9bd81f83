"""gpucluster: config -> network -> cluster | storage -> GPU and CPU pools -> plugins, volume, image cache,
monitoring, goodput controller -> autoscaler, operators -> queue -> jobs; delete hooks keep data on the way out."""

import pulumi
import pulumi_aws as aws

from components.aws import lookups
from components.aws.cluster import Cluster, ClusterArgs
from components.aws.cpu_pool import CpuNodePool, CpuNodePoolArgs
from components.aws.gpu_pool import GpuNodePool, GpuNodePoolArgs
from components.aws.image_cache import ImageCache, ImageCacheArgs
from components.aws.job_identity import JobIdentity, JobIdentityArgs
from components.aws.network import Network, NetworkArgs
from components.aws.node_group import NodeGroupSettings
from components.aws.storage import Storage, StorageArgs
from components.core import job_identity as job_identity_lib
from components.core import system_nodes
from components.core.config.values import is_admin
from components.core.fleet import manager as fleet_manager
from components.core.fleet import names as fleet_names
from components.core.fleet import queues as fleet_queues
from components.core.fleet.workers import load_workers
from components.core.observability import access, dashboards
from components.core.planning import cost, efa_env
from components.core.problems import ConfigError, raise_problems
from components.core.storage import team_data
from components.hooks import HookSettings, StackHooks
from components.kubernetes.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.kubernetes.device_plugins import DevicePlugins, DevicePluginsArgs
from components.kubernetes.fleet import Fleet, FleetArgs
from components.kubernetes.fsx_volume import FsxVolume, FsxVolumeArgs
from components.kubernetes.goodput import GoodputController, GoodputControllerArgs
from components.kubernetes.monitoring import Monitoring, MonitoringArgs
from components.kubernetes.operators import Operators, OperatorsArgs
from components.kubernetes.queue import Queue, QueueArgs
from components.kubernetes.training_job import FabricTest, FabricTestArgs, TrainingJob, TrainingJobArgs
from components.stack import load as load_stack_config

# Everything that can be wrong with the inputs is found before any resource registers.
try:
    cfg = load_stack_config()
    zones = lookups.lookup_zones(cfg)
    blocks = lookups.lookup_capacity_blocks(cfg)
    kept_bucket = lookups.lookup_bucket(cfg)
    fleet_members = ()
    if fleet_manager.enabled(cfg):  # its workers' stack files, each checked against this manager
        from components.stack import load_stack_file  # noqa: PLC0415 - only a manager reads other stacks
        fleet_members = load_workers(cfg, load_stack_file)
    raise_problems([p for pool in cfg.gpu_pools if pool.name in blocks
                                 for p in lookups.reservation_problems(pool, zones.gpu_zone, blocks[pool.name])])
except ConfigError as err:
    raise pulumi.RunError(err.render()) from None

caller = aws.get_caller_identity()
partition = aws.get_partition().partition
if not is_admin(caller.arn, cfg.admin_principal_arns):
    # A warning, never a resource: who runs pulumi does not change the access entries.
    pulumi.log.warn(f"the deploying identity {caller.arn} is not in gpucluster:adminPrincipalArns; the Kubernetes "
                    "provider acts as it and will be refused unless its role or user is added there")
if kept_bucket is not None and kept_bucket.region != cfg.region:
    pulumi.log.warn(f"storage.bucketName {kept_bucket.name} is in {kept_bucket.region}, not {cfg.region}: FSx links "
                    "to it across regions, and its traffic bypasses the VPC's S3 endpoint (transfer charges)")
if (warning := system_nodes.image_disk_warning(cfg)) is not None:
    pulumi.log.warn(warning)
for warning in efa_env.env_warnings(cfg):  # a job env that takes NCCL off EFA: the key and what it costs
    pulumi.log.warn(warning)
name = cfg.cluster_name
# Registered on every run (destroy included): export to S3 before unlinking, bucket guard, leftover ENIs.
hooks = StackHooks(HookSettings.of(cfg))

network = Network(name, NetworkArgs(config=cfg.network, cluster_name=name, region=cfg.region, zones=zones,
                                    tags=cfg.tags, hooks=hooks))

# EKS and FSx are the two slow creations: neither waits for the other.
cluster = Cluster(name, ClusterArgs(config=cfg, subnet_ids=network.cluster_subnet_ids,
                                    log_group_exists=lookups.log_group_exists(f"/aws/eks/{name}/cluster"),
                                    hooks=hooks))
storage = Storage(f"{name}-storage", StorageArgs(
    config=cfg.storage, cluster_name=name, vpc_id=network.vpc_id, subnet_id=network.gpu_subnet_id,
    client_security_group_ids=[network.node_security_group_id], tags=cfg.tags, existing_bucket=kept_bucket,
    system_security_group_id=cluster.cluster_security_group_id if cfg.observability.tensorboard_on else None,
    hooks=hooks))
# Every pod of the training namespace is the jobs' role to AWS: the stack's bucket, and the stack's policies.
job_identity = JobIdentity(f"{name}-job-identity", JobIdentityArgs(
    cluster=cluster.name, namespace=cfg.training_namespace, bucket_arn=storage.bucket_arn,
    policy_arns=cfg.job_policy_arns, tags=cfg.tags, depends_on=cluster.core_addons))
# And every pod of a team's namespace the team's role: its prefix of the bucket, and the team's own policies.
team_identities = {team.name: JobIdentity(job_identity_lib.team_identity_name(name, team.name), JobIdentityArgs(
    cluster=cluster.name, namespace=team.namespace, bucket_arn=storage.bucket_arn,
    prefix=team_data.s3_prefix(team.name), policy_arns=team.job_policy_arns, tags=cfg.tags,
    depends_on=cluster.core_addons)) for team in cfg.teams}

# Every pool in the GPU zone: EFA does not cross zones, and parameter servers sit beside their workers.
node_groups = NodeGroupSettings(
    cluster_name=cluster.name, kubernetes_version=cfg.kubernetes_version,
    ami_release_version=cfg.versions.ami_release_version, subnet_id=network.gpu_subnet_id,
    node_role_arn=cluster.node_role.arn, hooks=hooks, tags=cfg.tags, depends_on=cluster.node_prerequisites,
    paused=cfg.paused)
node_security_groups = [cluster.cluster_security_group_id, network.node_security_group_id]
pools: dict[str, GpuNodePool | CpuNodePool] = {pool.name: GpuNodePool(f"{name}-{pool.name}", GpuNodePoolArgs(
    pool=pool, node_group=node_groups, vpc_id=network.vpc_id, security_group_ids=node_security_groups,
)) for pool in cfg.gpu_pools}
pools.update({pool.name: CpuNodePool(f"{name}-{pool.name}", CpuNodePoolArgs(
    pool=pool, node_group=node_groups, security_group_ids=node_security_groups)) for pool in cfg.cpu_pools})

plugins = DevicePlugins(f"{name}-device-plugins", DevicePluginsArgs(
    pools=cfg.gpu_pools, region=cfg.region, provider=cluster.provider, depends_on=[cluster.system_nodes]))
volume = FsxVolume(f"{name}-fsx", FsxVolumeArgs(
    storage=storage, cluster_name=cluster.name, provider=cluster.provider, namespace=cfg.training_namespace,
    namespace_resource=cluster.training_namespace, addon_version=cfg.versions.addons["aws-fsx-csi-driver"],
    depends_on=[cluster.system_nodes, *cluster.core_addons], tags=cfg.tags, teams=cluster.team_namespaces))
# Public ECR images (the Deep Learning Containers, jobs' own) come from the account's registry in the region.
image_cache = ImageCache(f"{name}-image-cache", ImageCacheArgs(
    cluster_name=name, region=cfg.region, account_id=caller.account_id, partition=partition,
    node_role_name=cluster.node_role.name, provider=cluster.provider, namespace=cfg.training_namespace,
    namespace_resource=cluster.training_namespace, hooks=hooks, depends_on=[cluster.system_nodes],
    team_namespaces=cluster.team_namespaces,
)) if cfg.image_cache else None
cached = [image_cache] if image_cache is not None else []
cache_base = image_cache.base if image_cache is not None else None

# The metrics stack beside the controllers, not before them: only monitors (ServiceMonitor, PodMonitor,
# PrometheusRule) wait for its CRDs (`crds_ready`); no chart but dcgm-exporter's renders one.
monitoring = Monitoring(f"{name}-monitoring", MonitoringArgs(
    config=cfg, cluster=cluster.name, provider=cluster.provider, file_system_id=storage.file_system_id,
    claim_name=volume.claim_name, claim=volume, training_namespace=cluster.training_namespace,
    team_namespaces=cluster.team_namespaces,
    depends_on=[cluster.system_nodes, *cluster.core_addons, *cached],
    image_cache=cache_base)) if cfg.observability.enabled else None
metrics_crds = monitoring.crds_ready if monitoring is not None else []
# The goodput loop's controller reads the metrics stack's alerts (not waiting for it: it retries), quarantines
# per pool mode and accounts every job.
if monitoring is not None:
    GoodputController(f"{name}-goodput", GoodputControllerArgs(
        config=cfg, provider=cluster.provider, training_namespace=cluster.training_namespace,
        team_namespaces=cluster.team_namespaces, depends_on=[monitoring.namespace, cluster.system_nodes],
        metrics_crds=metrics_crds))
operators = Operators(f"{name}-operators", OperatorsArgs(
    provider=cluster.provider, pools=cfg.gpu_pools, jobs=cfg.jobs, claim_name=volume.claim_name,
    image_cache=cache_base, depends_on=[cluster.system_nodes, *cached], metrics_crds=metrics_crds))
# The autoscaler after the ProvisioningRequest CRD (Operators.provisioning_crds) when a pool is atomic.
autoscaler = ClusterAutoscaler(f"{name}-autoscaler", ClusterAutoscalerArgs(
    cluster_name=name, cluster=cluster.name, region=cfg.region, account_id=caller.account_id, partition=partition,
    kubernetes_version=cfg.kubernetes_version, pools=cfg.all_pools, provider=cluster.provider,
    depends_on=[cluster.system_nodes, *cluster.core_addons], tags=cfg.tags, metrics_crds=metrics_crds,
    provisioning_crds=operators.provisioning_crds))
queue = Queue(f"{name}-queue", QueueArgs(
    pools=cfg.all_pools, system_nodes=cfg.system_nodes, namespace=cfg.training_namespace,
    namespace_resource=cluster.training_namespace, provider=cluster.provider, stop_policy=cfg.stop_policy,
    depends_on=operators.ready, metrics_crds=metrics_crds, teams=cfg.teams, team_namespaces=cluster.team_namespaces,
    multi_kueue=fleet_manager.multi_kueue(cfg),
    fleet_namespaces=fleet_queues.manager_queues(cfg, fleet_members).namespaces if fleet_members else ()))
# A fleet's worker: the manager's account and token here; its manager: the workers' queues behind MultiKueue.
fleet = Fleet(f"{name}-fleet", FleetArgs(
    config=cfg, provider=cluster.provider, members=fleet_members, kubeconfig=cluster.kubeconfig,
    kueue=[queue.release], depends_on=[cluster.system_nodes, *operators.ready],
    namespaces={cfg.training_namespace: cluster.training_namespace,
                **{t.namespace: cluster.team_namespaces[t.name] for t in cfg.teams}})) if cfg.fleet else None

for index, job in enumerate(cfg.jobs):
    # A team's job runs in its namespace: the team's queue, file system directory and role.
    identity = team_identities[job.team] if job.team is not None else job_identity
    TrainingJob(f"{name}-{job.name}", TrainingJobArgs(
        job=job, pool=cfg.pool(job.pool), namespace=cfg.namespace_of(job), claim_name=volume.claim_name,
        provider=cluster.provider, storage=cfg.storage, prices=cfg.prices,
        secret_env={k: job.env[k] for k in cfg.secret_env(index)}, ps_pool=cfg.ps_pool_of(job),
        image_cache=cache_base, depends_on=[*operators.ready, *queue.ready, volume, plugins, pools[job.pool],
                                            identity, *cached,
                                            *([pools[job.ps_pool]] if job.launcher == "ps" else [])]))
fabric_tests = {pool.name: FabricTest(f"{name}-{pool.name}-fabric-test", FabricTestArgs(
    pool=pool, namespace=cfg.training_namespace, provider=cluster.provider, image_cache=cache_base,
    depends_on=[*operators.ready, *queue.ready, plugins, pools[pool.name], cluster.training_namespace, *cached],
)) for pool in cfg.gpu_pools if pool.fabric_test}

reserved = {pool: block.instance_count for pool, block in blocks.items()}
estimate = cost.estimate(cfg, reserved, len(zones.zones))
pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("region", cfg.region)
pulumi.export("gpuAvailabilityZone", zones.gpu_zone)
pulumi.export("zones", zones.describe())
pulumi.export("vpcId", network.vpc_id)
pulumi.export("gpuNodeGroups", {p.name: pools[p.name].node_group_name for p in cfg.gpu_pools})
if cfg.cpu_pools:
    pulumi.export("cpuNodeGroups", {p.name: pools[p.name].node_group_name for p in cfg.cpu_pools})
pulumi.export("bucketName", storage.bucket_name)
pulumi.export("jobRoleArn", job_identity.role_arn)
if team_identities:
    pulumi.export("teamJobRoleArns", {team: identity.role_arn for team, identity in team_identities.items()})
pulumi.export("bucketRetainedOnDestroy", storage.bucket_adopted or cfg.storage.retain_on_destroy)
pulumi.export("paused", {"paused": cfg.paused, "stopPolicy": cfg.stop_policy})
pulumi.export("fileSystemId", storage.file_system_id)
pulumi.export("fileSystemDnsName", storage.dns_name)
pulumi.export("fileSystemMountName", storage.mount_name)
pulumi.export("fsxClaimName", volume.claim_name)
pulumi.export("imageCache", cache_base)
pulumi.export("localQueue", f"{cfg.training_namespace}/{queue.local_queue_name}")
pulumi.export("expectedBusBandwidthGBps", {n: t.expected_busbw_gbps for n, t in fabric_tests.items()})
if monitoring is not None:
    pulumi.export("monitoring", {**monitoring.footprint.to_dict(), "grafana": access.GRAFANA,
                                 "dashboards": list(dashboards.dashboard_keys(cfg))})
if fleet is not None and fleet.access is not None:
    pulumi.export(fleet_names.ACCESS_OUTPUT, fleet.access)
if fleet_members:  # Kueue and the rotator reach each worker's API endpoint from these: its publicAccessCidrs
    pulumi.export("natPublicIps", network.nat_public_ips)
pulumi.export("estimatedCostPerHourUsd", {**estimate.to_dict(),
                                          "paused": cost.paused_per_hour(cfg, reserved, len(zones.zones))})
