"""Which input changes make the provider replace a resource, for the types this program registers (data).

For AWS resources, the properties terraform-provider-aws marks ForceNew (pulumi-aws bridges it; a
Pulumi input is the camelCase of the Terraform attribute), read in the provider's schemas:
internal/service/eks/node_group.go, eks/cluster.go, fsx/lustre_file_system.go and
fsx/data_repository_association.go (hashicorp/terraform-provider-aws, the stored v6 sources), and
for the rest each resource's identifying attributes (names, the parent it belongs to). A property
listed here replaces the resource when it changes at all, or, listed in SHRINK_REPLACES, when it
decreases. Kubernetes objects are replaced when their name or namespace changes. A resource's own
`replaceOnChanges` option (in the plan) adds to these.
"""

from __future__ import annotations

REPLACE_ON: dict[str, tuple[str, ...]] = {
    "aws:eks/cluster:Cluster": ("name", "roleArn", "bootstrapSelfManagedAddons",
                                "accessConfig.bootstrapClusterCreatorAdminPermissions",
                                "kubernetesNetworkConfig.ipFamily", "kubernetesNetworkConfig.serviceIpv4Cidr",
                                "remoteNetworkConfig", "outpostConfig"),
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                                    "launchTemplate.id", "launchTemplate.name", "nodeGroupName",
                                    "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess", "subnetIds"),
    "aws:eks/addon:Addon": ("addonName", "clusterName"),
    "aws:eks/accessEntry:AccessEntry": ("clusterName", "principalArn", "type"),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": ("clusterName", "principalArn", "policyArn",
                                                                "accessScope"),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("clusterName", "namespace", "serviceAccount"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("backupId", "copyTagsToBackups", "deploymentType",
                                                  "driveCacheType", "efaEnabled", "exportPath",
                                                  "fileSystemTypeVersion", "importPath", "importedFileChunkSize",
                                                  "kmsKeyId", "securityGroupIds", "storageType", "subnetIds"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("dataRepositoryPath", "fileSystemId",
                                                                    "fileSystemPath"),
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix", "objectLockEnabled"),
    "aws:ec2/vpc:Vpc": ("cidrBlock", "instanceTenancy"),
    "aws:ec2/subnet:Subnet": ("availabilityZone", "availabilityZoneId", "cidrBlock", "vpcId"),
    "aws:ec2/securityGroup:SecurityGroup": ("name", "namePrefix", "description", "vpcId"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("securityGroupId",),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("securityGroupId",),
    "aws:ec2/natGateway:NatGateway": ("allocationId", "subnetId", "connectivityType"),
    "aws:ec2/eip:Eip": ("domain",),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "gatewayId"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName", "vpcEndpointType", "vpcId"),
    "aws:ec2/placementGroup:PlacementGroup": ("name", "strategy", "partitionCount", "spreadLevel"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("name", "namePrefix"),
    # Only the key: a value or propagateAtLaunch changes in place (autoscaling/group_tag.go).
    "aws:autoscaling/tag:Tag": ("autoscalingGroupName", "tag.key"),
    "aws:kms/key:Key": ("keySpec", "customerMasterKeySpec", "keyUsage", "multiRegion"),
    "aws:kms/alias:Alias": ("name", "namePrefix"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "namePrefix", "logGroupClass"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    "random:index/randomId:RandomId": ("byteLength", "keepers", "prefix"),
    "kubernetes:helm.sh/v3:Release": ("name", "namespace"),
}
# The bucket's settings resources all belong to one bucket.
for _setting in ("BucketOwnershipControls", "BucketPublicAccessBlock", "BucketVersioning",
                 "BucketServerSideEncryptionConfiguration", "BucketLifecycleConfiguration", "BucketPolicy"):
    _module = _setting[0].lower() + _setting[1:]
    REPLACE_ON[f"aws:s3/{_module}:{_setting}"] = ("bucket",)

# Replaced when the value goes down (CustomizeDiff in lustre_file_system.go: FSx cannot shrink).
SHRINK_REPLACES: dict[str, tuple[str, ...]] = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("storageCapacity", "metadataConfiguration.iops"),
}
KUBERNETES_REPLACE_ON = ("metadata.name", "metadata.namespace", "apiVersion", "kind")

# What a replacement costs more than a few minutes: data, running jobs, the cluster itself.
DATA_OR_JOBS: dict[str, str] = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": "a new, empty file system (files not yet in S3 are lost)",
    "aws:s3/bucket:Bucket": "a new bucket (the old one is kept or deleted per retainOnDestroy)",
    "aws:eks/cluster:Cluster": "a new EKS cluster: every node, add-on and job goes",
    "aws:eks/nodeGroup:NodeGroup": "every node of the group is replaced: jobs on it stop",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "the S3 link is exported, deleted and made "
                                                                   "again (minutes without a link)",
    "kubernetes:kubeflow.org/v2beta1:MPIJob": "the job restarts",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob": "the job restarts",
}


# What replaces every node of a managed node group that itself stays: UpdateNodegroupVersion, which
# the provider calls when launch_template (its version), release_version or version changes
# (eks/node_group.go, resourceNodeGroupUpdate), drains and replaces each node, up to maxUnavailable at
# a time (EKS User Guide, "Understand each phase of node updates"). The node group follows its launch
# template's latest version, so any input of the template that makes a new version restarts the nodes:
# every one but these (ec2/ec2_launch_template.go, resourceLaunchTemplateUpdate: tags are set on the
# template, default_version picks a version; name and name_prefix replace it).
NODE_GROUP_ROLLS = ("launchTemplate.version", "releaseVersion", "version")
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
TEMPLATE_WITHOUT_VERSION = ("tags", "tagsAll", "defaultVersion", "updateDefaultVersion", "name", "namePrefix")


def _under(path: str, prefixes) -> bool:
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in prefixes)


def restarts_nodes(type_: str, path: str) -> bool:
    """Whether changing input `path` of a resource of `type_` replaces the nodes of the node groups
    that use it (a launch template's) or that it is (a node group's)."""
    if type_ == LAUNCH_TEMPLATE:
        return not _under(path, TEMPLATE_WITHOUT_VERSION)
    if type_ == "aws:eks/nodeGroup:NodeGroup":
        return _under(path, NODE_GROUP_ROLLS)
    return False


def forces_replacement(type_: str, path: str, old, new, replace_on_changes: list[str]) -> bool:
    """Whether changing input `path` from `old` to `new` replaces a resource of `type_`."""

    def under(prefixes) -> bool:
        return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in prefixes)

    if under(replace_on_changes) or under(REPLACE_ON.get(type_, ())):
        return True
    if type_.startswith("kubernetes:") and not type_.startswith("kubernetes:helm.sh/") and under(
            KUBERNETES_REPLACE_ON):
        return True
    if under(SHRINK_REPLACES.get(type_, ())) and isinstance(old, (int, float)) and isinstance(new, (int, float)):
        return new < old
    return False
