"""FsxVolume: the file system in the cluster, the one place that waits for both EKS and FSx.

The FSx CSI add-on (Pod Identity, describe-only role) and a static
PersistentVolume with a ReadWriteMany claim in the training namespace;
manifests and policy are pure functions in components.core.storage.fsx_volume.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components.aws import iam
from components.aws.storage import Storage
from components.core import namespaces
from components.core.storage.fsx_volume import (
    CLAIM_NAME,
    CSI_ADDON,
    CSI_CONTROLLER_SA,
    csi_policy,
    persistent_volume,
    persistent_volume_claim,
    pv_name,
)


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



class FsxVolume(pulumi.ComponentResource):
    """The FSx CSI driver (EKS add-on, Pod Identity) and a ReadWriteMany claim on the file system."""

    claim_name: str
    pv_name: str
    addon: aws.eks.Addon

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
        pv = k8s.core.v1.PersistentVolume(
            f"{name}-pv",
            metadata={"name": self.pv_name, "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider, depends_on=[self.addon]),
        )
        # The claim follows its PV: when the file system is replaced, the claim
        # (fixed name, spec immutable once bound) is deleted and re-created on the
        # new PV, which lets the old PV go (pv-protection holds a bound PV).
        k8s.core.v1.PersistentVolumeClaim(
            f"{name}-pvc",
            metadata={"name": CLAIM_NAME, "namespace": args.namespace,
                      "labels": {"app.kubernetes.io/part-of": "gpucluster"}},
            spec=self.pv_name.apply(persistent_volume_claim),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider,
                                        depends_on=[args.namespace_resource, pv],
                                        replace_on_changes=["spec"], delete_before_replace=True),
        )
        self.register_outputs({"claimName": self.claim_name, "persistentVolumeName": self.pv_name,
                               "csiAddonVersion": self.addon.addon_version})
