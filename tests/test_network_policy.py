"""NetworkPolicies: the exact rules, what they let through (Kubernetes' semantics, evaluated here), their
validity, their registration, and the vpc-cni add-on setting that makes the VPC CNI enforce them."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from components.aws import cluster as cluster_mod
from components.core.kube import network_policy as np
from components.kubernetes import monitoring, operators
from tests import k8s
from tests.conftest import recording as shared_recording
from tests.test_charts import CHARTS, unknown_keys

NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
POLICIES = np.training_policies("training", "monitoring")
ALL = [*POLICIES, operators.mpi_operator_ingress(), monitoring.efa_counters_ingress()]
JOB_EXISTS = {"matchExpressions": [{"key": "gpucluster.io/job", "operator": "Exists"}]}
PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
              "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}


def spec(name: str) -> dict[str, Any]:
    (policy,) = [p for p in ALL if p["metadata"]["name"] == name]
    return policy["spec"]


def test_the_training_namespace_s_rules_exactly():
    assert [(p["metadata"]["name"], p["metadata"]["namespace"]) for p in POLICIES] == [
        ("gpucluster-default-deny", "training"), ("gpucluster-dns", "training"), ("gpucluster-job-pods", "training"),
        ("gpucluster-metrics-scrape", "training"), ("gpucluster-job-https-egress", "training"),
        ("gpucluster-job-credentials", "training")]
    assert spec("gpucluster-default-deny") == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert spec("gpucluster-dns") == {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{
        "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]}
    assert spec("gpucluster-job-pods") == {
        "podSelector": JOB_EXISTS, "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"podSelector": JOB_EXISTS}]}], "egress": [{"to": [{"podSelector": JOB_EXISTS}]}]}
    assert spec("gpucluster-metrics-scrape") == {
        "podSelector": {"matchExpressions": [{"key": "gpucluster.io/metrics-port", "operator": "Exists"}]},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [PROMETHEUS], "ports": [{"protocol": "TCP", "port": 1024, "endPort": 65535}]}]}
    assert spec("gpucluster-job-https-egress") == {
        "podSelector": JOB_EXISTS, "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": [
            "10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16"]}}],
            "ports": [{"protocol": "TCP", "port": 443}]}]}
    # The EKS Pod Identity agent's two addresses, port 80 (EKS User Guide, pod-id-how-it-works).
    assert spec("gpucluster-job-credentials") == {
        "podSelector": JOB_EXISTS, "policyTypes": ["Egress"],
        "egress": [{"to": [{"ipBlock": {"cidr": "169.254.170.23/32"}}, {"ipBlock": {"cidr": "fd00:ec2::23/128"}}],
                    "ports": [{"protocol": "TCP", "port": 80}]}]}


def test_the_operator_and_the_efa_counters_accept_only_prometheus():
    assert spec("mpi-operator-ingress") == {
        "podSelector": {"matchLabels": {"app": "mpi-operator"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [PROMETHEUS], "ports": [{"protocol": "TCP", "port": 9090}]}]}
    assert spec("efa-counters-ingress") == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "efa-counters"}}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [PROMETHEUS], "ports": [{"protocol": "TCP", "port": 9100}]}]}


@pytest.mark.parametrize("policy", ALL, ids=lambda p: p["metadata"]["name"])
@pytest.mark.parametrize("version", ["1.33", "1.35", "1.36"])
def test_valid_for_the_supported_kubernetes_versions(policy, version):
    k8s.validate_core(policy, version)


def test_the_private_ranges_cover_any_vpc_the_config_accepts():
    # The VPC CIDR is a private /16-/20 (config: check_vpc_cidr): inside RFC 1918, so never "internet".
    excluded = [ipaddress.ip_network(c) for c in np.NOT_INTERNET]
    for vpc in ("10.10.0.0/16", "172.31.0.0/16", "192.168.0.0/20"):
        assert any(ipaddress.ip_network(vpc).subnet_of(e) for e in excluded)


# -- what gets through ---------------------------------------------------------------------------------------
# Kubernetes NetworkPolicy semantics (networking.k8s.io/v1): a pod selected by no policy of a direction is
# open in it; one selected by any is allowed only what some selecting policy's rule allows; a connection needs
# the source's egress and the destination's ingress. The node's own traffic (kubelet probes, port-forward) is
# always allowed by the VPC CNI's agent and is not modelled.


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    ip: str = "10.10.1.10"  # a pod address in the VPC


@dataclass(frozen=True)
class Address:
    ip: str


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        ok = {"Exists": e["key"] in labels, "DoesNotExist": e["key"] not in labels,
              "In": labels.get(e["key"]) in e.get("values", []),
              "NotIn": labels.get(e["key"]) not in e.get("values", [])}[e["operator"]]
        if not ok:
            return False
    return True


def peer_matches(peer: dict[str, Any], other: Pod | Address, policy_namespace: str) -> bool:
    if "ipBlock" in peer:
        ip = ipaddress.ip_address(other.ip)
        block = peer["ipBlock"]
        return ip in ipaddress.ip_network(block["cidr"]) and not any(
            ip in ipaddress.ip_network(e) for e in block.get("except", []))
    if isinstance(other, Address):
        return False
    if "namespaceSelector" in peer:
        if not selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}):
            return False
    elif other.namespace != policy_namespace:
        return False
    return selects(peer.get("podSelector", {}), other.labels)


def port_matches(ports: list[dict[str, Any]] | None, protocol: str, port: int) -> bool:
    return not ports or any(p.get("protocol", "TCP") == protocol and (
        p["port"] == port or p["port"] <= port <= p.get("endPort", p["port"])) for p in ports)


def direction_allows(pod: Pod, other: Pod | Address, protocol: str, port: int, direction: str) -> bool:
    kind, peers = ("Ingress", "from") if direction == "ingress" else ("Egress", "to")
    selecting = [p for p in ALL if p["metadata"]["namespace"] == pod.namespace
                 and selects(p["spec"]["podSelector"], pod.labels) and kind in p["spec"]["policyTypes"]]
    if not selecting:
        return True
    return any((not rule.get(peers) or any(peer_matches(peer, other, pod.namespace) for peer in rule[peers]))
               and port_matches(rule.get("ports"), protocol, port)
               for p in selecting for rule in p["spec"].get(direction, []))


def allowed(src: Pod, dst: Pod | Address, port: int, protocol: str = "TCP") -> bool:
    egress = direction_allows(src, dst, protocol, port, "egress")
    ingress = isinstance(dst, Address) or direction_allows(dst, src, protocol, port, "ingress")
    return egress and ingress


WORKER_A = Pod("training", {"gpucluster.io/job": "a", "gpucluster.io/pool": "h100"}, "10.10.1.11")
WORKER_A2 = Pod("training", {"gpucluster.io/job": "a", "gpucluster.io/pool": "h100"}, "10.10.1.12")
LAUNCHER_A = Pod("training", {"gpucluster.io/job": "a", "gpucluster.io/pool": "h100"}, "10.10.0.20")
METRICS_A = Pod("training", {"gpucluster.io/job": "a", "gpucluster.io/metrics-port": "9400"}, "10.10.1.13")
WORKER_B = Pod("training", {"gpucluster.io/job": "b"}, "10.10.1.14")
TENSORBOARD = Pod("training", {"app.kubernetes.io/name": "tensorboard"}, "10.10.0.30")
DEBUG = Pod("training", {"run": "debug"}, "10.10.0.31")
ELSEWHERE = Pod("default", {"app": "x"}, "10.10.0.32")
PROMETHEUS_POD = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"}, "10.10.0.40")
GRAFANA = Pod("monitoring", {"app.kubernetes.io/name": "grafana"}, "10.10.0.41")
COREDNS = Pod("kube-system", {"k8s-app": "kube-dns"}, "10.10.0.2")
OPERATOR = Pod("mpi-operator", {"app": "mpi-operator", "app.kubernetes.io/name": "mpi-operator"}, "10.10.0.50")
EFA_COUNTERS = Pod("monitoring", {"app.kubernetes.io/name": "efa-counters"}, "10.10.1.60")
S3 = Address("52.216.8.1")
IMDS = Address("169.254.169.254")
FSX_ENI = Address("10.10.1.200")


def test_a_job_s_pods_reach_each_other_on_any_port_and_protocol():
    assert allowed(WORKER_A, WORKER_A2, 43125)  # NCCL bootstrap, an ephemeral port
    assert allowed(LAUNCHER_A, WORKER_A, 22)  # mpirun's ssh
    assert allowed(WORKER_A2, LAUNCHER_A, 51234)  # the daemons' callback
    assert allowed(WORKER_A, WORKER_A2, 29500)  # torchrun's rendezvous
    assert allowed(WORKER_A, WORKER_A2, 5000, "UDP")


def test_jobs_share_the_namespace_boundary():
    # Decided (components/core/kube/network_policy.py): the namespace, not the job, is the boundary.
    assert allowed(WORKER_A, WORKER_B, 43125) and allowed(WORKER_B, WORKER_A, 22)


def test_nothing_else_gets_in():
    for src in (TENSORBOARD, DEBUG, ELSEWHERE, GRAFANA, COREDNS, OPERATOR):
        assert not allowed(src, WORKER_A, 22), src
        assert not allowed(src, METRICS_A, 9400), src
    assert not allowed(PROMETHEUS_POD, TENSORBOARD, 6006)  # read through kubectl port-forward
    assert not allowed(ELSEWHERE, TENSORBOARD, 6006)


def test_prometheus_scrapes_what_serves_metrics_on_a_metrics_port_only():
    assert allowed(PROMETHEUS_POD, METRICS_A, 9400)
    assert allowed(PROMETHEUS_POD, METRICS_A, 65535) and not allowed(PROMETHEUS_POD, METRICS_A, 80)
    assert not allowed(PROMETHEUS_POD, WORKER_A, 9400)  # no metrics-port label: not a target
    assert not allowed(PROMETHEUS_POD, METRICS_A, 9400, "UDP")


def test_dns_for_every_pod_of_the_namespace():
    for pod in (WORKER_A, TENSORBOARD, DEBUG):
        assert allowed(pod, COREDNS, 53, "UDP") and allowed(pod, COREDNS, 53, "TCP")
        assert not allowed(pod, COREDNS, 9153)


def test_job_pods_reach_the_internet_on_https_only():
    assert allowed(WORKER_A, S3, 443) and allowed(LAUNCHER_A, Address("18.239.50.1"), 443)
    assert not allowed(WORKER_A, S3, 80)
    assert not allowed(WORKER_A, IMDS, 80) and not allowed(WORKER_A, IMDS, 443)
    assert not allowed(WORKER_A, FSX_ENI, 988)  # Lustre is the node's traffic, not the pod's
    assert not allowed(WORKER_A, Address("10.10.0.100"), 443)  # in-VPC endpoints: the API server's, say
    assert not allowed(WORKER_A, OPERATOR, 9090) and not allowed(WORKER_A, ELSEWHERE, 443)
    assert not allowed(TENSORBOARD, S3, 443) and not allowed(DEBUG, S3, 443)


POD_IDENTITY_AGENT = Address("169.254.170.23")
POD_IDENTITY_AGENT_V6 = Address("fd00:ec2::23")


def test_a_job_pod_s_path_to_its_credentials_is_open():
    for pod in (WORKER_A, LAUNCHER_A, WORKER_B):
        assert allowed(pod, POD_IDENTITY_AGENT, 80) and allowed(pod, POD_IDENTITY_AGENT_V6, 80)
    # Only a job's pods: the namespace's other pods have no egress but DNS.
    assert not allowed(TENSORBOARD, POD_IDENTITY_AGENT, 80) and not allowed(DEBUG, POD_IDENTITY_AGENT, 80)


@pytest.mark.parametrize("address, port", [
    ("169.254.170.23", 443), ("169.254.170.23", 8080), ("169.254.170.23", 2703),  # the agent, other ports
    ("169.254.170.22", 80), ("169.254.170.24", 80),  # its neighbours
    ("169.254.169.254", 80), ("169.254.169.254", 443),  # instance metadata: the node role's credentials
    ("169.254.169.253", 53), ("169.254.169.123", 123),  # the Amazon DNS resolver, Time Sync
    ("169.254.0.1", 80), ("169.254.255.254", 80),  # anywhere else on link-local
    ("fd00:ec2::254", 80), ("fd00:ec2::23", 443),  # IMDS on IPv6; the agent on another port
])
def test_nothing_else_on_link_local_is(address, port):
    assert not allowed(WORKER_A, Address(address), port)
    assert not allowed(WORKER_A, Address(address), port, "UDP")
    assert not allowed(WORKER_A, POD_IDENTITY_AGENT, 80, "UDP")


def test_the_operator_and_the_counters_take_prometheus_only():
    assert allowed(PROMETHEUS_POD, OPERATOR, 9090) and not allowed(PROMETHEUS_POD, OPERATOR, 8080)
    assert not allowed(GRAFANA, OPERATOR, 9090) and not allowed(ELSEWHERE, OPERATOR, 9090)
    assert allowed(PROMETHEUS_POD, EFA_COUNTERS, 9100) and not allowed(GRAFANA, EFA_COUNTERS, 9100)
    # Their egress is not restricted: the operator still reaches the API server.
    assert allowed(OPERATOR, Address("10.10.0.100"), 443)


# -- registration and enforcement ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prod():
    from tests.conftest import prod_started

    return shared_recording("prod", prod_started())


def with_a_team_job():
    """prod's jobs started, gpt-pretrain in team vision's namespace: a team job is held by its policies too."""
    from tests.conftest import prod_started

    overrides = prod_started()
    overrides["gpucluster:jobs"] = [{**job, "team": "vision"} if job["name"] == "gpt-pretrain" else job
                                    for job in overrides["gpucluster:jobs"]]
    return shared_recording("prod", overrides)


def test_registered_in_both_stacks_before_any_job(prod, run_stack):
    team_run = with_a_team_job()
    # Each job namespace has the same policies: training, and in prod each team's (vision, language).
    # The metrics namespace's: the EFA counters' (EFA pools only) and the goodput controller's (with observability).
    goodput = "gpucluster-goodput-ingress"
    for rec, namespaces, extra in ((prod, ("training", "vision", "language"), {"efa-counters-ingress", goodput}),
                                   (team_run, ("training", "vision", "language"), {"efa-counters-ingress", goodput}),
                                   (shared_recording("dev"), ("training",), {goodput})):
        in_namespace = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
                        for r in rec.of_type(NETPOL)}
        assert len(in_namespace) == len(rec.of_type(NETPOL))
        assert set(in_namespace) == {(ns, p["metadata"]["name"]) for ns in namespaces for p in POLICIES} | {
            ("mpi-operator", "mpi-operator-ingress")} | {("monitoring", name) for name in extra}
        (queue,) = [r for r in rec.resources if r.type == "gpucluster:index:Queue"]
        for ns in namespaces:
            (namespace,) = [r for r in rec.of_type("kubernetes:core/v1:Namespace")
                            if r.inputs["metadata"]["name"] == ns]
            for policy in np.training_policies(ns, "monitoring"):
                registered = in_namespace[(ns, policy["metadata"]["name"])]
                assert {k: v for k, v in registered.inputs.items() if not k.startswith("__")} == policy
                assert rec.depends_on(registered, namespace) and registered.parent == queue.urn
    # Every job (and fabric test) depends on the Queue component, which holds the policies of its namespace.
    for rec in (prod, team_run):
        jobs = [r for r in rec.resources if r.type in ("kubernetes:kubeflow.org/v2beta1:MPIJob",
                                                       "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")]
        assert len(jobs) == 3  # llama-70b, gpt-pretrain, the fabric test
        held = {job.name: job.inputs["metadata"]["namespace"] for job in jobs}
        for job in jobs:
            for policy in rec.of_type(NETPOL):
                if policy.inputs["metadata"]["namespace"] == held[job.name]:
                    assert rec.depends_on(job, policy), (job.name, policy.name)
    assert {name.removeprefix("gpucluster-prod-"): ns for name, ns in held.items()} == {
        "llama-70b-trainjob": "training", "gpt-pretrain-mpijob": "vision", "h100-fabric-test-mpijob": "training"}


def test_the_vpc_cni_enforces_them(prod):
    (cni,) = [r for r in prod.of_type("aws:eks/addon:Addon") if r.inputs["addonName"] == "vpc-cni"]
    configuration = json.loads(cni.inputs["configurationValues"])
    assert configuration == {"enableNetworkPolicy": "true"}
    # The key is the chart's at the add-on's version, a string like its default.
    chart = k8s.yaml.safe_load((CHARTS / "aws-vpc-cni-v1.22.4" / "values.yaml").read_text())
    assert unknown_keys(configuration, chart) == [] and chart["enableNetworkPolicy"] == "false"
    assert cni.inputs["addonVersion"].startswith("v1.22.4-")
    assert configuration == cluster_mod.VPC_CNI_CONFIGURATION
