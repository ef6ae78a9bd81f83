"""Device plugins: rendered Helm values, tolerations against the pools' taints, node selection."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
import pytest

from components.core import versions as v
from components.core.config import GpuPoolConfig
from components.core.hardware import registries as ecr
from components.core.kube import nodepool
from components.kubernetes import device_plugins
from components.kubernetes.device_plugins import DevicePlugins, DevicePluginsArgs
from tests.conftest import stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
P5 = GpuPoolConfig(name="h100", instance_type="p5.48xlarge", max_nodes=2)
B300 = GpuPoolConfig(name="b300", instance_type="p6-b300.48xlarge", max_nodes=2)
DEV = GpuPoolConfig(name="dev", instance_type="g6e.xlarge", max_nodes=2)
P4D_NO_EFA = GpuPoolConfig(name="a100", instance_type="p4d.24xlarge", max_nodes=2, efa="disabled")
POOLS = (P5, B300, DEV, P4D_NO_EFA)


def tolerates(tolerations: list[dict], taint: nodepool.Taint) -> bool:
    """Kubernetes toleration matching (core/v1 Toleration semantics)."""
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.effect):
            continue
        if t.get("operator", "Equal") == "Exists" and t.get("key") in (None, "", taint.key):
            return True
        if t.get("operator", "Equal") == "Equal" and t.get("key") == taint.key and t.get("value") == taint.value:
            return True
    return False


def affinity_matches(values: dict, labels: dict[str, str]) -> bool:
    """Does the required node affinity of chart values select a node with these labels?"""
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]

    def expression(e: dict) -> bool:
        if e["operator"] == "Exists":
            return e["key"] in labels
        if e["operator"] == "In":
            return labels.get(e["key"]) in e["values"]
        raise AssertionError(f"unexpected operator {e['operator']}")

    return any(all(expression(e) for e in term["matchExpressions"]) for term in terms)


def kubelet_labels(pool: GpuPoolConfig) -> dict[str, str]:
    """A node's labels: the pool's plus the well-known one kubelet sets."""
    return {**nodepool.node_labels(pool), "node.kubernetes.io/instance-type": pool.instance_type}


def efa_plugin_selects(values: dict, labels: dict[str, str]) -> bool:
    """nodeSelector plus the chart's hard-coded affinity on supportedInstanceLabels."""
    selector_ok = all(labels.get(k) == v for k, v in values["nodeSelector"].items())
    supported = values["supportedInstanceLabels"]
    affinity_ok = any(labels.get(key) in supported["values"] for key in supported["keys"])
    return selector_ok and affinity_ok


def test_pinned_versions():
    assert v.NVIDIA_CHART_VERSION == "0.20.0"
    # The eks-charts index spells it with a "v" (gh-pages index.yaml); plugin v0.5.20.
    assert v.EFA_CHART_VERSION == "v0.5.29" and v.EFA_PLUGIN_IMAGE_TAG == "v0.5.20"
    major, minor, patch = map(int, v.EFA_PLUGIN_IMAGE_TAG.lstrip("v").split("."))
    assert (major, minor, patch) >= (0, 5, 10)  # older plugins miscount p6-b200 devices


def test_nvidia_values():
    assert device_plugins.nvidia_values() == {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpucluster.io/pool", "operator": "Exists"}]}]}}},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "mofedEnabled": False,
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }
    # A real boolean: the chart renders MOFED_ENABLED only for `typeIs "bool"`.
    assert device_plugins.nvidia_values()["mofedEnabled"] is False


def test_efa_values():
    assert device_plugins.efa_values(POOLS, "us-east-1") == {
        "image": {"repository": "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin",
                  "tag": "v0.5.20"},
        "nodeSelector": {"vpc.amazonaws.com/efa.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "supportedInstanceLabels": {"keys": ["node.kubernetes.io/instance-type"],
                                    "values": ["p5.48xlarge", "p6-b300.48xlarge"]},
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}, "limits": {"memory": "128Mi"}},
    }


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p.name)
def test_nvidia_plugin_lands_on_every_gpu_pool_and_tolerates_its_taints(pool):
    values = device_plugins.nvidia_values()
    assert affinity_matches(values, kubelet_labels(pool))
    assert all(tolerates(values["tolerations"], t) for t in nodepool.node_taints(pool))


def test_nvidia_plugin_stays_off_system_nodes():
    from components.core.kube.nodepool import SYSTEM_NODE_LABEL

    assert not affinity_matches(device_plugins.nvidia_values(), SYSTEM_NODE_LABEL)


@pytest.mark.parametrize("pool", POOLS, ids=lambda p: p.name)
def test_efa_plugin_lands_only_on_efa_pools_and_tolerates_their_taints(pool):
    values = device_plugins.efa_values(POOLS, "us-east-1")
    assert efa_plugin_selects(values, kubelet_labels(pool)) is pool.efa_enabled
    if pool.efa_enabled:
        assert all(tolerates(values["tolerations"], t) for t in nodepool.node_taints(pool))


def test_tolerations_do_not_tolerate_other_taints():
    other = nodepool.Taint("dedicated", "infra", "NoSchedule")
    assert not tolerates(device_plugins.efa_values(POOLS, "us-east-1")["tolerations"], other)


@pytest.mark.parametrize(("region", "registry"), [
    ("us-west-2", "602401143452.dkr.ecr.us-west-2.amazonaws.com"),
    ("eu-central-1", "602401143452.dkr.ecr.eu-central-1.amazonaws.com"),
    # EKS User Guide, add-ons-images: regions with their own registry account.
    ("af-south-1", "877085696533.dkr.ecr.af-south-1.amazonaws.com"),
    ("ap-east-1", "800184023465.dkr.ecr.ap-east-1.amazonaws.com"),
    ("ap-east-2", "533267051163.dkr.ecr.ap-east-2.amazonaws.com"),
    ("il-central-1", "066635153087.dkr.ecr.il-central-1.amazonaws.com"),
    ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn"),
])
def test_efa_plugin_image_comes_from_the_stacks_region(region, registry):
    assert ecr.addon_registry(region) == registry
    image = device_plugins.efa_values(POOLS, region)["image"]
    assert image == {"repository": f"{registry}/eks/aws-efa-k8s-device-plugin", "tag": "v0.5.20"}


def plugins_program(pools):
    def program():
        provider = k8s.Provider("k8s", kubeconfig="{}")
        DevicePlugins("plugins", DevicePluginsArgs(pools=pools, region="us-east-1", provider=provider),
                      pulumi.ResourceOptions())
    return program


def test_releases_under_mocks(run_mocked):
    cfg = stack_config("prod")
    recording = run_mocked(plugins_program(cfg.gpu_pools), "prod")
    component = recording.named("plugins")
    assert component.type == "gpucluster:index:DevicePlugins"
    nvidia, efa = recording.named("plugins-nvidia"), recording.named("plugins-efa")
    provider = recording.named("k8s")
    for release in (nvidia, efa):
        assert release.type == RELEASE
        assert release.parent == component.urn
        assert release.inputs["namespace"] == "kube-system"
        assert release.provider.startswith(provider.urn)
    assert nvidia.inputs["chart"] == "nvidia-device-plugin"
    assert nvidia.inputs["version"] == v.NVIDIA_CHART_VERSION
    assert nvidia.inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert nvidia.inputs["values"] == device_plugins.nvidia_values()
    assert efa.inputs["chart"] == "aws-efa-k8s-device-plugin"
    assert efa.inputs["version"] == v.EFA_CHART_VERSION
    assert efa.inputs["repositoryOpts"] == {"repo": "https://aws.github.io/eks-charts"}
    assert efa.inputs["values"]["supportedInstanceLabels"]["values"] == ["p5.48xlarge"]


def test_no_efa_plugin_without_efa_pools(run_mocked):
    cfg = stack_config("dev")  # one g6e.xlarge pool
    recording = run_mocked(plugins_program(cfg.gpu_pools), "dev")
    assert [r.name for r in recording.of_type(RELEASE)] == ["plugins-nvidia"]
