"""Time to ready: the critical path through the recorded graph, the parallel bound, and the real program's."""

from __future__ import annotations

import dataclasses

import pytest

from bootstrap.offline import time_to_ready as ttr
from bootstrap.offline.recording import Registration
from components.core.storage import fsx
from tests.conftest import recording as shared_recording

# -- small hand-made graphs ----------------------------------------------------------------------

TYPES = {"eks": "aws:eks/cluster:Cluster", "addon": "aws:eks/addon:Addon", "nodes": "aws:eks/nodeGroup:NodeGroup",
         "chart": "kubernetes:helm.sh/v3:Release", "ns": "kubernetes:core/v1:Namespace",
         "fsx": "aws:fsx/lustreFileSystem:LustreFileSystem",
         "dra": "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation", "role": "aws:iam/role:Role"}


def res(name: str, kind: str, deps: tuple[str, ...] = (), **inputs) -> Registration:
    return Registration(urn=f"urn:{name}", type=TYPES[kind], name=name, parent="", custom=True, inputs=inputs,
                        dependencies=[f"urn:{d}" for d in deps])


def cluster(kueue_after: tuple[str, ...] = ("nodes",)) -> list[Registration]:
    """EKS 9, three node add-ons 1, system nodes 4, the EBS CSI driver 1, kube-prometheus-stack 5, Kueue 2;
    FSx 10 + 7."""
    return [
        res("role", "role"),
        res("eks", "eks", ("role",)),
        res("vpc-cni", "addon", ("eks",), addonName="vpc-cni"),
        res("kube-proxy", "addon", ("eks",), addonName="kube-proxy"),
        res("agent", "addon", ("eks",), addonName="eks-pod-identity-agent"),
        res("nodes", "nodes", ("eks", "role", "vpc-cni", "kube-proxy", "agent"), scalingConfig={"desiredSize": 2}),
        res("ebs-csi", "addon", ("eks", "nodes"), addonName="aws-ebs-csi-driver"),
        res("monitoring-ns", "ns", ("nodes",)),
        res("kps", "chart", ("monitoring-ns", "nodes", "ebs-csi"), chart="kube-prometheus-stack"),
        res("kueue", "chart", kueue_after, chart="oci://registry.k8s.io/kueue/charts/kueue"),
        res("fsx", "fsx"),
        res("dra", "dra", ("fsx",)),
    ]


def test_the_longest_path_and_its_steps():
    result = ttr.compute(cluster())
    # EKS 9, the add-ons 1 (in parallel), the nodes 4, the EBS CSI driver 1 (Prometheus' volume),
    # kube-prometheus-stack 5; FSx 17 beside it.
    assert result.modelled == 20 and result.bound == 20 and result.ratio == 1.0 and result.unneeded == ()
    assert [(s.name, s.minutes, s.finish) for s in result.steps] == [
        ("eks", 9, 9), ("agent", 1, 10), ("nodes", 4, 14), ("ebs-csi", 1, 15), ("kps", 5, 20)]
    assert result.steps[1].alongside == ("kube-proxy", "vpc-cni")  # the same length, side by side
    assert result.steps[0].why is None and "aws-node" in result.steps[2].why


def test_a_planted_unneeded_wait_raises_the_ratio_and_is_named():
    result = ttr.compute(cluster(kueue_after=("nodes", "kps")))
    # Kueue needs nodes, not the metrics stack: 22 min modelled, 20 with only the needed waits.
    assert (result.modelled, result.bound, result.ratio) == (22, 20, 1.1)
    assert result.unneeded == (("kueue", "kps"),)
    assert [s.name for s in result.steps][-2:] == ["kps", "kueue"] and result.steps[-1].why is None


def test_a_wait_through_seconds_long_steps_is_judged_against_the_timed_step_before():
    # Kueue after its namespace, which waits for kube-prometheus-stack: the chain is what lengthens the path.
    graph = [*cluster(kueue_after=("kueue-ns", "nodes")), res("kueue-ns", "ns", ("kps",))]
    result = ttr.compute(graph)
    assert result.unneeded == (("kueue", "kps"),) and result.ratio == 1.1
    # The bound keeps a need met through a chain: Kueue still needs the nodes behind the namespace.
    graph = [*cluster(kueue_after=("kueue-ns",)), res("kueue-ns", "ns", ("nodes",))]
    assert ttr.needed_edges(ttr.graph(graph))["urn:kueue"] == {"urn:kueue-ns", "urn:nodes", "urn:role"}


def test_a_provider_is_waited_for():
    provider = Registration(urn="urn:k8s", type="pulumi:providers:kubernetes", name="k8s", parent="", custom=True,
                            inputs={}, dependencies=["urn:eks"])
    ns = dataclasses.replace(res("ns", "ns"), provider="urn:k8s::id")
    result = ttr.compute([res("eks", "eks"), provider, ns])
    assert ttr.graph([res("eks", "eks"), provider, ns])["urn:ns"].waits_for == {"urn:k8s"}
    assert result.modelled == 9 and result.unneeded == ()


def test_durations_by_kind():
    nodes = ttr.graph([*cluster(), res("empty", "nodes", scalingConfig={"desiredSize": 0})])
    minutes = {n.name: n.minutes for n in nodes.values()}
    assert minutes["eks"] == ttr.EKS_MINUTES == 9  # FACTS.md "Provisioning times"
    assert (minutes["fsx"], minutes["dra"]) == (fsx.FILE_SYSTEM_MINUTES, fsx.ASSOCIATION_MINUTES) == (10, 7)
    assert (minutes["nodes"], minutes["empty"]) == (4, 1)
    assert (minutes["kps"], minutes["kueue"], minutes["role"], minutes["monitoring-ns"]) == (5, 2, 0, 0)


def test_the_needed_table():
    assert ttr.needed("node-group", "addon:vpc-cni") and ttr.needed("node-group", "addon:eks-pod-identity-agent")
    assert ttr.needed("addon:coredns", "node-group") and ttr.needed("chart:kueue", "node-group")
    assert ttr.needed("k8s:ServiceMonitor", "chart:kube-prometheus-stack")
    assert ttr.needed("chart:dcgm-exporter", "chart:kube-prometheus-stack")  # its chart renders a ServiceMonitor
    assert ttr.needed("addon:vpc-cni", "addon:eks-pod-identity-agent") is None
    for chart in ("kueue", "cluster-autoscaler", "kubeflow-trainer", "nvidia-device-plugin"):
        assert ttr.needed(f"chart:{chart}", "chart:kube-prometheus-stack") is None, chart
    assert ttr.needed("node-group", "fsx") is None and ttr.needed("fsx", "eks-cluster") is None


def test_a_cycle_is_refused():
    with pytest.raises(ValueError, match="cycle"):
        ttr.compute([res("a", "ns", ("b",)), res("b", "ns", ("a",))])


# -- the real program ---------------------------------------------------------------------------

def expected_path(stack: str) -> list[str]:
    return [f"gpucluster-{stack}-{step}" for step in (
        "eks", "eks-pod-identity-agent", "system-nodes", "aws-ebs-csi-driver", "monitoring-stack",
        "monitoring-dcgm-exporter")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_program_is_ready_within_its_parallel_bound(stack):
    result = ttr.compute(shared_recording(stack).resources)
    assert result.unneeded == ()  # a wait named here is one no step needs: remove it or say why it is needed
    assert result.ratio <= 1.0 and result.modelled == result.bound == 21
    assert [s.name for s in result.steps] == expected_path(stack)
    # vpc-cni and kube-proxy beside the Pod Identity agent; CoreDNS beside the EBS CSI driver.
    assert set(result.steps[1].alongside) == {f"gpucluster-{stack}-kube-proxy", f"gpucluster-{stack}-vpc-cni"}
    assert f"gpucluster-{stack}-coredns" in result.steps[3].alongside
    assert all(s.why for s in result.steps[1:])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_only_monitors_and_dcgm_exporter_wait_for_the_metrics_stack(stack):
    rec = shared_recording(stack)
    stack_release = rec.named(f"gpucluster-{stack}-monitoring-stack")
    waiting = sorted(r.name for r in rec.resources if r.custom and rec.depends_on(r, stack_release))
    assert waiting == sorted([f"gpucluster-{stack}-monitoring-dcgm-exporter", *(
        r.name for r in rec.resources if r.type.startswith("kubernetes:monitoring.coreos.com/"))])
    addons = {r.inputs["addonName"]: r for r in rec.of_type("aws:eks/addon:Addon")}
    assert not rec.depends_on(addons["vpc-cni"], addons["eks-pod-identity-agent"])
    system = rec.named(f"gpucluster-{stack}-system-nodes")
    assert all(rec.depends_on(system, addons[a]) for a in ("vpc-cni", "kube-proxy", "eks-pod-identity-agent"))


def test_kueue_waiting_for_the_metrics_stack_again_is_caught():
    """The drift the bound is for: Kueue after kube-prometheus-stack lengthens the path by a minute: it ends at 22."""
    rec = shared_recording("dev")
    kueue, stack = rec.named("gpucluster-dev-queue-kueue"), rec.named("gpucluster-dev-monitoring-stack")
    planted = [dataclasses.replace(r, dependencies=[*r.dependencies, stack.urn]) if r is kueue else r
               for r in rec.resources]
    result = ttr.compute(planted)
    assert result.ratio > 1.0 and (result.modelled, result.bound) == (22, 21)
    assert result.unneeded == (("gpucluster-dev-queue-kueue", "gpucluster-dev-monitoring-stack"),)
