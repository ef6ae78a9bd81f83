"""FsxVolume: the file system in the cluster, the one place that waits for both EKS and FSx.

The FSx CSI add-on (Pod Identity, describe-only role) and a static
PersistentVolume with a ReadWriteMany claim in the training namespace; per
team (gpucluster:teams), the team's directory (an S3 directory marker the
link imports) and a PV of that directory only, claimed as `fsx` in the team's
namespace. Manifests and policy are pure functions in
components.core.storage.fsx_volume and components.core.storage.team_data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam
from components.aws.storage import Storage
from components.core import namespaces
from components.core.storage import team_data
from components.core.storage.fsx_volume import (
    CLAIM_NAME,
    CSI_ADDON,
    CSI_CONTROLLER_SA,
    csi_policy,
    persistent_volume,
    persistent_volume_claim,
    pv_name,
    subdirectory_mount_name,
)

LABELS = {"app.kubernetes.io/part-of": "gpucluster"}


@dataclass(frozen=True)
class FsxVolumeArgs:
    storage: Storage
    cluster_name: pulumi.Input[str]
    provider: k8s.Provider
    namespace: str
    namespace_resource: pulumi.Resource  # the training Namespace
    addon_version: str  # gpucluster:versions.addons.aws-fsx-csi-driver
    # What the add-on needs first: the Pod Identity agent and nodes for its controller.
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    # gpucluster:teams: each team's Namespace by team name (= namespace, Cluster.team_namespaces).
    teams: Mapping[str, pulumi.Resource] = field(default_factory=dict)


class FsxVolume(pulumi.ComponentResource):
    """The FSx CSI driver (EKS add-on, Pod Identity) and a ReadWriteMany claim on the file system."""

    claim_name: str
    pv_name: str
    addon: aws.eks.Addon
    team_claims: dict[str, k8s.core.v1.PersistentVolumeClaim]  # by team: its namespace's `fsx` claim

    def __init__(self, name: str, args: FsxVolumeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gpucluster:index:FsxVolume", name, None, opts)
        storage = args.storage
        # The add-on's controller runs in kube-system (EKS User Guide, fsx-csi).
        role, _ = iam.service_role(f"{name}-csi-role", iam.POD_IDENTITY, [], args.tags, self,
                                   cluster_arn=iam.cluster_arn(args.cluster_name), namespace=namespaces.KUBE_SYSTEM,
                                   service_account=CSI_CONTROLLER_SA)
        role_policy = aws.iam.RolePolicy(f"{name}-csi-role-policy", role=role.name, policy=csi_policy(),
                                         opts=pulumi.ResourceOptions(parent=self))
        self.addon = aws.eks.Addon(
            f"{name}-csi-driver",
            cluster_name=args.cluster_name,
            addon_name=CSI_ADDON,
            # Pinned per stack (gpucluster:versions.addons), like the cluster's add-ons.
            addon_version=args.addon_version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            # The add-on authenticates with Pod Identity only (EKS User Guide, fsx-csi-create).
            pod_identity_associations=[{"role_arn": role.arn, "service_account": CSI_CONTROLLER_SA}],
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*args.depends_on, role_policy]),
        )

        self.claim_name = CLAIM_NAME
        self.pv_name = storage.file_system_id.apply(lambda fs_id: pv_name(args.namespace, fs_id))
        spec = pulumi.Output.all(storage.file_system_id, storage.dns_name, storage.mount_name).apply(
            lambda a: persistent_volume(args.namespace, storage.storage_capacity_gib, *a))
        self._claim(name, args, args.namespace, args.namespace_resource, spec, self.pv_name, [self.addon])

        # A team's directory exists once the link imports its marker (the config requires the link with teams).
        self.team_claims = {}
        for team, namespace_resource in args.teams.items():
            # An empty object (no content or source: terraform-provider-aws s3_object). Never deleted
            # (retain_on_delete): a deleted marker is a DELETED event the link would import into the
            # directory; the team's files are objects of their own either way. After the link (depends on
            # Storage): its auto-import brings the marker in. FSx exports the directory's POSIX metadata to
            # this key: left alone (ignore_changes).
            marker = aws.s3.BucketObjectv2(
                f"{name}-team-{team}-dir", bucket=storage.bucket_name, key=team_data.directory_marker_key(team),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[storage], retain_on_delete=True,
                                            ignore_changes=["contentType", "metadata"]))
            mount_name = storage.mount_name.apply(lambda m, t=team: subdirectory_mount_name(m, team_data.directory(t)))
            team_spec = pulumi.Output.all(storage.file_system_id, storage.dns_name, mount_name).apply(
                lambda a, t=team: persistent_volume(t, storage.storage_capacity_gib, *a))
            team_pv_name = storage.file_system_id.apply(lambda fs_id, t=team: pv_name(t, fs_id))
            self.team_claims[team] = self._claim(f"{name}-team-{team}", args, team, namespace_resource, team_spec,
                                                 team_pv_name, [self.addon, marker])
        self.register_outputs({"claimName": self.claim_name, "persistentVolumeName": self.pv_name,
                               "csiAddonVersion": self.addon.addon_version})

    def _claim(self, name: str, args: FsxVolumeArgs, namespace: str, namespace_resource: pulumi.Resource,
               spec: pulumi.Output[dict], volume_name: pulumi.Output[str],
               waits: list[pulumi.Resource]) -> k8s.core.v1.PersistentVolumeClaim:
        """The static PV `<name>-pv` and its claim `fsx` in `namespace`."""
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv", metadata={"name": volume_name, "labels": dict(LABELS)}, spec=spec,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=waits))
        # The claim follows its PV: when the file system is replaced, the claim
        # (fixed name, spec immutable once bound) is deleted and re-created on the
        # new PV, which lets the old PV go (pv-protection holds a bound PV).
        return k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": CLAIM_NAME, "namespace": namespace, "labels": dict(LABELS)},
            spec=volume_name.apply(persistent_volume_claim),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[namespace_resource, pv],
                                        replace_on_changes=["spec"], delete_before_replace=True),
        )
