"""Network interfaces the VPC CNI leaves behind, which would keep a subnet from being deleted.

The CNI (aws-node) attaches extra ENIs to nodes for pod addresses and
deletes them when it releases them; an ENI it had not yet attached, or one
of a node that vanished mid-way, stays `available` in the subnet, and
DeleteSubnet then fails with DependencyViolation until someone deletes it.
The CNI's own cleanup of such ENIs runs on nodes, which are gone by then.
Only ENIs that are detached and that the CNI tagged as this cluster's are
deleted: nothing attached, nothing of another cluster or tool.
"""

from __future__ import annotations

from collections.abc import Callable

# amazon-vpc-cni-k8s: ENIs the CNI creates carry the cluster's name (CLUSTER_NAME,
# which the EKS add-on sets; the AmazonEKS_CNI_Policy scopes CreateNetworkInterface
# to aws:RequestTag/cluster.k8s.amazonaws.com/name) and a description starting
# "aws-K8S-<instance id>" (node ENIs) or "aws-k8s-branch-eni" (pod branch ENIs).
CLUSTER_TAG = "cluster.k8s.amazonaws.com/name"
DESCRIPTION_PREFIX = "aws-k8s-"  # compared case-insensitively


def leaked_enis(ec2, subnet_id: str, cluster_name: str) -> list[str]:
    """IDs of detached CNI interfaces of `cluster_name` in the subnet."""
    pages = ec2.get_paginator("describe_network_interfaces").paginate(Filters=[
        {"Name": "subnet-id", "Values": [subnet_id]},
        {"Name": "status", "Values": ["available"]},
        {"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_name]},
    ])
    return sorted(eni["NetworkInterfaceId"] for page in pages for eni in page["NetworkInterfaces"]
                  if eni.get("Description", "").lower().startswith(DESCRIPTION_PREFIX))


def release_leaked_enis(ec2, subnet_id: str, cluster_name: str, log: Callable[[str], None] = print) -> list[str]:
    """Delete the detached CNI interfaces of the cluster in the subnet; return their IDs."""
    deleted = []
    for eni_id in leaked_enis(ec2, subnet_id, cluster_name):
        try:
            ec2.delete_network_interface(NetworkInterfaceId=eni_id)
        except Exception as err:  # gone meanwhile: what we wanted
            if (getattr(err, "response", None) or {}).get("Error", {}).get("Code") != \
                    "InvalidNetworkInterfaceID.NotFound":
                raise
        deleted.append(eni_id)
        log(f"{subnet_id}: deleted {eni_id}, left behind by the VPC CNI of {cluster_name}")
    return deleted
