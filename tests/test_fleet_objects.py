"""Every Kubernetes object the fleet's stacks render, valid: core kinds for the cluster's version (strict), custom
ones against Kueue v0.19.2's, Trainer's and JobSet's CRDs, MultiKueueCluster and MultiKueueConfig included."""

from __future__ import annotations

import pytest

from bootstrap.offline.plan_report import kubernetes_objects
from tests.conftest import recording, stack_config
from tests.k8s import validate_all
from tests.test_program import CRD_FILES

FLEET_CRDS = {**CRD_FILES, "MultiKueueCluster": "kueue.x-k8s.io_multikueueclusters.yaml",
              "MultiKueueConfig": "kueue.x-k8s.io_multikueueconfigs.yaml"}


@pytest.mark.parametrize("stack, fleet_kinds", [
    ("fleet", {"MultiKueueCluster", "MultiKueueConfig", "AdmissionCheck", "CronJob", "Secret", "Topology"}),
    ("fleet-east", {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret"}),
])
def test_every_object_of_a_fleet_stack_is_valid(stack, fleet_kinds):
    cfg = stack_config(stack)
    kinds = validate_all(kubernetes_objects(recording(stack)), cfg.kubernetes_version, FLEET_CRDS)
    assert fleet_kinds <= kinds, fleet_kinds - kinds
