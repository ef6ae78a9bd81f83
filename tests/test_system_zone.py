"""The system nodes and Prometheus's EBS volume share one zone, on a new stack and on one whose volume exists."""

from __future__ import annotations

import pytest

from bootstrap.offline import mocks
from components.core.kube.nodepool import SYSTEM_NODE_LABEL
from components.core.system_nodes import system_zone
from tests.conftest import recording, stack_raw

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def run(monkeypatch, volume_zone: str | None, overrides: dict | None = None,
        group_zone: str | None = None) -> mocks.Recording:
    if volume_zone is None and group_zone is None:
        return recording("dev", overrides)  # the mocks' own state: no volume, no group yet (shared run)
    original = mocks.GpuClusterMocks.__init__

    def with_volume(self, region="us-east-1"):
        original(self, region)
        self.metrics_volume_zone = volume_zone
        self.system_group_zone = group_zone

    monkeypatch.setattr(mocks.GpuClusterMocks, "__init__", with_volume)
    return mocks.run_program(stack_raw("dev", overrides), "dev")


def system_zones(rec: mocks.Recording) -> list[str]:
    """The zones of the system node group's subnets."""
    (system,) = [r for r in rec.of_type(NODE_GROUP) if r.name.endswith("system-nodes")]
    zones = {s.id: s.inputs["availabilityZone"] for s in rec.of_type("aws:ec2/subnet:Subnet")}
    return [zones[subnet] for subnet in system.inputs["subnetIds"]]


def cluster_zones(rec: mocks.Recording) -> list[str]:
    return [z["name"] for z in rec.stack_outputs["zones"] if z["cluster"]]


def test_which_zone():
    assert system_zone(("us-east-1a", "us-east-1b"), None) == ("us-east-1a", None)
    # No volume (its claim deleted, monitoring off): the group stays where it is; a move would replace it.
    assert system_zone(("us-east-1a", "us-east-1b"), None, "us-east-1b") == ("us-east-1b", None)
    assert system_zone(("us-east-1a", "us-east-1b"), "us-east-1a", "us-east-1b") == ("us-east-1a", None)
    assert system_zone(("us-east-1a", "us-east-1b"), None, "us-east-1d") == ("us-east-1a", None)
    assert system_zone(("us-east-1a", "us-east-1b"), "us-east-1b") == ("us-east-1b", None)
    zone, warning = system_zone(("us-east-1a", "us-east-1b"), "us-east-1d")
    assert zone == "us-east-1a"
    assert "us-east-1d, where the cluster has no subnet any more" in warning
    assert "kubectl -n monitoring delete pvc --all --wait=false && kubectl -n monitoring delete pod " \
           "prometheus-kps-prometheus-0" in warning


@pytest.mark.parametrize("overrides", [None, {"gpucluster:systemNodes": {"instanceType": "m7i.xlarge", "count": 1},
                                              "gpucluster:network": {"cidr": "10.10.0.0/16", "azCount": 3}}])
def test_a_new_stack_puts_every_system_node_in_the_gpu_zone(monkeypatch, overrides):
    rec = run(monkeypatch, None, overrides)
    assert len(cluster_zones(rec)) == (3 if overrides else 2)  # the control plane keeps its zones
    assert system_zones(rec) == [rec.stack_outputs["gpuAvailabilityZone"]] == cluster_zones(rec)[:1]
    # Prometheus's volume is made where its pod lands (WaitForFirstConsumer), and the pod lands on a
    # system node: so in that zone, and every later system node is there too.
    (storage_class,) = rec.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    (stack,) = [r for r in rec.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "kps"]
    assert stack.inputs["values"]["prometheus"]["prometheusSpec"]["nodeSelector"] == SYSTEM_NODE_LABEL
    labelled = [g.name for g in rec.of_type(NODE_GROUP) if SYSTEM_NODE_LABEL.items() <= (g.inputs.get("labels") or
                                                                                         {}).items()]
    assert labelled == ["gpucluster-dev-system-nodes"]


def test_an_existing_metrics_volume_keeps_its_zone(monkeypatch):
    first = run(monkeypatch, None)
    second_zone = cluster_zones(first)[1]
    rec = run(monkeypatch, second_zone)
    assert system_zones(rec) == [second_zone]
    assert not [m for _, m in rec.logs if "metrics volume" in m]


def test_a_metrics_volume_without_a_cluster_subnet_is_reported(monkeypatch):
    rec = run(monkeypatch, "us-east-1f")
    assert system_zones(rec) == cluster_zones(rec)[:1]
    assert any("systemNodes: the metrics volume is in us-east-1f" in m for _, m in rec.logs)


def test_a_volume_gone_leaves_the_system_nodes_where_they_are(monkeypatch):
    """The group moved to its volume's zone on an upgrade; the volume is gone later: the next `up` keeps the
    group (a zone change replaces it, and every launcher and chief of a running job with it)."""
    moved = run(monkeypatch, "us-east-1b")
    later = run(monkeypatch, None, group_zone="us-east-1b")
    assert system_zones(moved) == system_zones(later) == ["us-east-1b"]
    assert system_zones(run(monkeypatch, None)) == [cluster_zones(later)[0]]  # a new stack: the GPU zone
