"""The local control plane's pure parts, offline: node shapes, manager configuration, webhook rewriting.

What the real programs do with them is the e2e tier's (tests/e2e, `make e2e`).
"""

from __future__ import annotations

import base64

import pytest

from components.core.kube import nodepool
from local import controllers, nodes, versions
from tests.conftest import stack_config


def _group_nodes(stack: str, group: str) -> list[dict]:
    cfg = stack_config(stack)
    return [n for n in nodes.nodes(cfg, "us-east-1a", "use1-az6", f"gpucluster-{stack}")
            if n["metadata"]["labels"][nodes.NODEGROUP_LABEL] == f"gpucluster-{stack}-{group}"]


def test_a_p5_node_is_registered_as_eks_registers_it():
    h100 = _group_nodes("prod", "h100")
    cfg = stack_config("prod")
    pool = next(p for p in cfg.gpu_pools if p.name == "h100")
    assert len(h100) == pool.max_nodes
    node = h100[0]
    labels = node["metadata"]["labels"]
    assert node["metadata"]["name"] == "ip-10-0-65-10.ec2.internal"
    assert labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert labels["topology.kubernetes.io/zone"] == "us-east-1a"
    assert labels[nodes.ZONE_ID_LABEL] == "use1-az6"
    assert labels[nodes.CAPACITY_TYPE_LABEL] == "ON_DEMAND"
    assert labels[nodepool.POOL_LABEL] == "h100"
    assert labels[nodepool.EFA_LABEL] == "true"
    assert labels[nodepool.EFA_COUNT_LABEL] == "32"
    # p5 has a three-layer network topology (EC2 topology prerequisites); no fourth layer.
    assert {k for k in labels if k.startswith("topology.k8s.aws/network-node-layer-")} == {
        "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3"}
    assert node["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    capacity = node["status"]["capacity"]
    assert (capacity["nvidia.com/gpu"], capacity["vpc.amazonaws.com/efa"], capacity["hugepages-2Mi"]) == (
        "8", "32", "5120Mi")
    assert (capacity["cpu"], capacity["memory"]) == ("192", "2048Gi")
    assert node["status"]["allocatable"]["cpu"] == "191450m"  # less the EKS AMI's kube-reserved CPU
    assert node["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}


def test_every_node_label_and_resource_is_the_autoscaler_template_of_its_pool():
    cfg = stack_config("prod")
    for pool in (*cfg.gpu_pools, *cfg.cpu_pools):
        tags = nodepool.node_template_tags(pool)
        node = _group_nodes("prod", pool.name)[0]
        for key, value in tags.items():
            kind, _, name = key.removeprefix(f"{nodepool.NODE_TEMPLATE_PREFIX}/").partition("/")
            if kind == "label":
                assert node["metadata"]["labels"][name] == value
            elif kind == "resources":
                assert node["status"]["capacity"][name] == value
            elif kind == "taint":
                assert {"key": name, "value": value.split(":")[0], "effect": value.split(":")[1]} in node["spec"]["taints"]


def test_four_network_layers_on_p6_none_on_g5():
    assert nodes.network_layers("p6-b200.48xlarge") == 4
    assert nodes.network_layers("g6e.xlarge") == 3
    assert nodes.network_layers("g5.48xlarge") == 0


def test_the_system_nodes_carry_the_system_role_and_no_taint():
    system = _group_nodes("dev", "system")
    assert len(system) == stack_config("dev").system_nodes.count
    assert system[0]["metadata"]["labels"][nodepool.ROLE_LABEL] == "system"
    assert system[0]["spec"]["taints"] == []


CHART_KUEUE = [
    {"kind": "ConfigMap", "metadata": {"name": "kueue-manager-config"}, "data": {"controller_manager_config.yaml": (
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\n"
        "internalCertManagement: {enable: true}\nwebhook: {port: 9443}\n"
        "integrations: {frameworks: [batch/job, kubeflow.org/mpijob]}\n")}},
    {"kind": "Deployment", "metadata": {"name": "kueue-controller-manager"}, "spec": {"template": {"spec": {
        "containers": [{"args": ["--config=/controller_manager_config.yaml", "--zap-log-level=2",
                                 "--feature-gates=TopologyAwareScheduling=true"]}]}}}},
]


def test_kueue_runs_with_the_chart_s_configuration_served_on_loopback(tmp_path):
    config, flags = controllers.kueue_config(CHART_KUEUE, tmp_path)
    assert config["integrations"] == {"frameworks": ["batch/job", "kubeflow.org/mpijob"]}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["webhook"] == {"port": controllers.KUEUE.webhook_port, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert config["leaderElection"] == {"leaderElect": False}
    # Feature gates move into the configuration (Kueue refuses both), visibility's off.
    assert config["featureGates"] == {"TopologyAwareScheduling": True, "VisibilityOnDemand": False}
    assert flags == ["--zap-log-level=2"]


def test_webhooks_and_conversion_point_at_the_local_managers_with_our_ca():
    ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    objects = [
        {"kind": "MutatingWebhookConfiguration", "metadata": {"name": "kueue-mutating-webhook-configuration"},
         "webhooks": [{"name": "mjob.kb.io", "clientConfig": {"service": {
             "name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/mutate-batch-v1-job"}}}]},
        {"kind": "CustomResourceDefinition", "metadata": {"name": "workloads.kueue.x-k8s.io"}, "spec": {
            "conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
                "name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/convert"}}}}}},
    ]
    hook, crd = controllers.rewrite_webhooks(objects, ca)
    bundle = base64.b64encode(ca.encode()).decode()
    assert hook["webhooks"][0]["clientConfig"] == {
        "url": f"https://127.0.0.1:{controllers.KUEUE.webhook_port}/mutate-batch-v1-job", "caBundle": bundle}
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": f"https://127.0.0.1:{controllers.KUEUE.webhook_port}/convert", "caBundle": bundle}
    assert objects[0]["webhooks"][0]["clientConfig"]["service"]  # the input is left alone


def test_a_webhook_no_local_manager_serves_is_an_error():
    objects = [{"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "x"},
                "webhooks": [{"name": "v", "clientConfig": {"service": {"name": "other", "namespace": "n"}}}]}]
    with pytest.raises(controllers.ManagerError, match="webhook service other is served by no local manager"):
        controllers.rewrite_webhooks(objects, "ca")


def test_the_controllers_built_are_the_versions_the_product_pins():
    from components.core import versions as product

    assert versions.KUEUE.version == product.KUEUE_IMAGE_TAG == "v0.19.2"
    assert versions.JOBSET.version == product.JOBSET_IMAGE_TAG == "v0.12.0"
    assert versions.TRAINER.version == product.TRAINER_IMAGE_TAG == "v2.3.0"
    assert versions.MPI_OPERATOR.version == product.MPI_OPERATOR_VERSION == "v0.8.2"
    # The control plane's minor is the stacks' kubernetesVersion.
    assert versions.KUBERNETES_VERSION.removeprefix("v").rsplit(".", 1)[0] == stack_config("dev").kubernetes_version
