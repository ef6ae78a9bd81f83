"""NetworkPolicies: what may reach the training namespace's pods, and what they may reach (pure).

Enforced by the VPC CNI's network policy agent (the vpc-cni add-on's
`enableNetworkPolicy`, components/aws/cluster.py): eBPF programs on each
pod's host-side veth (aws/aws-network-policy-agent v1.4.0, the node agent of
vpc-cni v1.22.4: pkg/ebpf/bpf_client.go attaches them to the pod's veth). So
a policy sees the pod's IP traffic on eth0 and nothing else:

- EFA (SRD) traffic is OS-bypass: libfabric writes to the EFA devices the
  pod was given (/dev/infiniband/uverbs*, efa-only interfaces that carry no
  IP address) and the NIC sends it; it never enters the pod's network stack,
  so no policy allows or blocks it. The EFA security group (all traffic
  within itself) and the subnet bound it; whole-node jobs keep jobs apart.
- FSx for Lustre traffic is the kernel Lustre client's, on the network
  namespace LNet was brought up in (Lustre lnet/lnet/config.c,
  lnet_ni_alloc_common: the creating process's), never a training pod's: the
  node mounts the file system (FSx CSI driver) and a pod sees a directory.
  No FSx rule is needed here, and none would apply.
- The agent always allows the node's own IP (pkg/fwruleprocessor: "Traffic
  from the local node should always be allowed"): kubelet probes and
  `kubectl port-forward` (which connects inside the pod) keep working.

Policies are additive: each allows something, and a pod selected by any of
them is denied what none allows. In the training namespace:

- DEFAULT_DENY: every pod, ingress and egress; nothing gets in but what follows.
- DNS: every pod to CoreDNS (kube-system, k8s-app=kube-dns) on UDP and TCP 53.
- JOB_PODS: a job's pods (label gpucluster.io/job) to and from each other on
  any port: NCCL's bootstrap and socket connections, torchrun's rendezvous
  (MASTER_PORT), mpirun's ssh and its daemons' callbacks use ephemeral ports.
  Between all job pods of the namespace, not per job: a policy cannot say
  "the same value as mine", so per-job isolation would need a policy created
  with every job, by `pulumi up`, `bootstrap submit` and anyone's kubectl;
  a job without one would hang in NCCL's bootstrap holding its nodes. And
  the bulk traffic, EFA, is beyond any policy anyway. The namespace is the
  boundary: one team's jobs, one queue.
- METRICS: Prometheus (namespace `monitoring`, its pods'
  app.kubernetes.io/name=prometheus) to pods that serve metrics (label
  gpucluster.io/metrics-port) on TCP 1024-65535, the ports a job's
  metricsPort may take (a policy cannot read the port from the label).
- HTTPS_EGRESS: job pods to addresses outside the VPC on TCP 443 only: S3
  (through the gateway endpoint, public addresses), Hugging Face, Weights &
  Biases, PyPI, GitHub. Not to private, shared or link-local ranges: no other
  namespace, no node port, no instance metadata (the node role's
  credentials), no API server endpoint. Container images are pulled by the
  node, not the pod.
- JOB_CREDENTIALS: job pods to the EKS Pod Identity agent, 169.254.170.23 and
  fd00:ec2::23 on TCP 80 and nothing else on link-local: the jobs' role
  (components/core/job_identity.py). The agent runs on the node's host
  network, so it is an address to the policy, not a pod.

A brand-new pod's first flows may be dropped while the agents reconcile it:
a reply to a flow that left before its own policies applied (aws-network-
policy-agent #345, fixed in agent v1.2.0), and, still open, a peer's ingress
rules that do not know the new pod's address yet, for seconds to minutes
(#487: about three minutes in its report). So each first
contact our pods make retries for a bounded time: the MPIJob launcher's
ssh to every worker (ssh_first_contact), the parameter-server chief's
connection to every task (tcp_first_contact, in an init container that
shares the pod's network), and validate's probes.

TensorBoard (port 6006) gets no rule: it is read through `kubectl
port-forward`. The MPI Operator and the EFA counters accept only Prometheus
(scrape_only); their egress is unchanged.
"""

from __future__ import annotations

import shlex
from typing import Any

from components.core import job_identity
from components.core.kube import workers

API_VERSION = "networking.k8s.io/v1"
PART_OF = {"app.kubernetes.io/part-of": "gpucluster"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace

DEFAULT_DENY = "gpucluster-default-deny"
DNS = "gpucluster-dns"
JOB_PODS = "gpucluster-job-pods"
METRICS = "gpucluster-metrics-scrape"
HTTPS_EGRESS = "gpucluster-job-https-egress"
JOB_CREDENTIALS = "gpucluster-job-credentials"

# CoreDNS of the EKS add-on: Deployment coredns in kube-system, pods labelled k8s-app=kube-dns
# (EKS User Guide, "Manage CoreDNS"). Its Service's port is its container port (53), which the
# agent's controller needs to resolve the Service's ClusterIP to these pods (EKS User Guide,
# "Limit Pod traffic with Kubernetes network policies", Considerations).
COREDNS_NAMESPACE = "kube-system"
COREDNS_POD = {"k8s-app": "kube-dns"}
DNS_PORT = 53
# Prometheus pods as the Prometheus Operator labels them (v0.93, pkg/prometheus/server/operator.go
# makeSelectorLabels: app.kubernetes.io/name=prometheus, the operator kube-prometheus-stack 88.5.3 runs).
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}
# A job's metricsPort (components/core/config/jobs.py: 1024-65535).
METRICS_PORTS = (1024, 65535)
HTTPS_PORT = 443
# Never reached from a job pod: RFC 1918 (the VPC is one of these: the config takes a private CIDR),
# RFC 6598 shared space (VPC secondary ranges, custom networking), link-local (instance metadata,
# the Pod Identity agent, the Amazon DNS resolver's 169.254.169.253).
NOT_INTERNET = ("10.0.0.0/8", "100.64.0.0/10", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16")
# The Pod Identity agent, exactly: one address of each family.
POD_IDENTITY_AGENT = (f"{job_identity.AGENT_IPV4}/32", f"{job_identity.AGENT_IPV6}/128")

JOB_POD_SELECTOR = {"matchExpressions": [{"key": workers.JOB_LABEL, "operator": "Exists"}]}
METRICS_POD_SELECTOR = {"matchExpressions": [{"key": workers.METRICS_PORT_LABEL, "operator": "Exists"}]}


def _policy(name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "NetworkPolicy",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(PART_OF)}, "spec": spec}


def _in_namespace(namespace: str, pods: dict[str, str]) -> dict[str, Any]:
    """A peer: the pods with these labels in that namespace."""
    return {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            "podSelector": {"matchLabels": dict(pods)}}


def _tcp(port: int, end_port: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"protocol": "TCP", "port": port}
    if end_port is not None:
        out["endPort"] = end_port
    return out


def training_policies(namespace: str, monitoring_namespace: str) -> list[dict[str, Any]]:
    """The training namespace's policies (module docstring), default deny first."""
    return [
        _policy(DEFAULT_DENY, namespace, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        _policy(DNS, namespace, {
            "podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"to": [_in_namespace(COREDNS_NAMESPACE, COREDNS_POD)],
                        "ports": [{"protocol": "UDP", "port": DNS_PORT}, _tcp(DNS_PORT)]}]}),
        _policy(JOB_PODS, namespace, {
            "podSelector": dict(JOB_POD_SELECTOR), "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": dict(JOB_POD_SELECTOR)}]}],
            "egress": [{"to": [{"podSelector": dict(JOB_POD_SELECTOR)}]}]}),
        _policy(METRICS, namespace, {
            "podSelector": dict(METRICS_POD_SELECTOR), "policyTypes": ["Ingress"],
            "ingress": [{"from": [_in_namespace(monitoring_namespace, PROMETHEUS_POD)],
                         "ports": [_tcp(*METRICS_PORTS)]}]}),
        _policy(HTTPS_EGRESS, namespace, {
            "podSelector": dict(JOB_POD_SELECTOR), "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NOT_INTERNET)}}],
                        "ports": [_tcp(HTTPS_PORT)]}]}),
        _policy(JOB_CREDENTIALS, namespace, {
            "podSelector": dict(JOB_POD_SELECTOR), "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": cidr}} for cidr in POD_IDENTITY_AGENT],
                        "ports": [_tcp(job_identity.AGENT_PORT)]}]}),
    ]


def scrape_only(name: str, namespace: str, pods: dict[str, str], port: int,
                monitoring_namespace: str) -> dict[str, Any]:
    """Ingress to `pods` from Prometheus on `port` alone (the node's probes are always allowed); egress untouched."""
    return _policy(name, namespace, {
        "podSelector": {"matchLabels": dict(pods)}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [_in_namespace(monitoring_namespace, PROMETHEUS_POD)], "ports": [_tcp(port)]}]})


# -- first contacts -------------------------------------------------------------------------------

# How long a new pod's first contact may take before the pod fails: past the minutes a peer's policies
# may take to admit a new pod (aws-network-policy-agent #487), short of hiding a real fault for long.
# The peers are up by then: the MPI Operator starts the launcher once every worker is Ready, JobSet
# the ps chief once every parameter server and worker is.
FIRST_CONTACT_SECONDS = 300
RETRY_SECONDS = 2
# The MPI Operator's hostfile for Open MPI (mpi-operator v0.8.2, OMPI_MCA_orte_default_hostfile):
# `<host> slots=<n>` lines (Intel MPI's and MPICH's are `<host>:<n>`: the host is cut at either).
MPI_HOSTFILE = "/etc/mpi/hostfile"
# Where a DENY of the policy agent shows, on the node (EKS User Guide, "Troubleshoot network policies").
AGENT_LOG = "/var/log/aws-routed-eni/network-policy-agent.log"

# PID 1 gets no default signal handling: without the trap a delete would wait out the grace period.
_SSH_FIRST_CONTACT = """trap 'exit 143' TERM INT
end=$(( $(date +%s) + {seconds} ))
for host in $(cut -d' ' -f1 "${{OMPI_MCA_orte_default_hostfile:-{hostfile}}}" | cut -d: -f1); do
  until ssh -o BatchMode=yes -o ConnectTimeout=5 "$host" true; do
    if [ "$(date +%s)" -ge "$end" ]; then
      echo "gpucluster: $host did not answer ssh within {seconds} s (its sshd, or a NetworkPolicy: DENY lines in \
{agent_log} on its node)" >&2; exit 1
    fi
    sleep {retry}
  done
done
exec "$@"
"""

_TCP_FIRST_CONTACT = """trap 'exit 143' TERM INT
end=$(( $(date +%s) + {seconds} ))
for address in {addresses}; do
  host=${{address%:*}} port=${{address##*:}}
  until timeout 5 bash -c "</dev/tcp/$host/$port" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$end" ]; then
      echo "gpucluster: $address did not accept a connection within {seconds} s (its server, or a NetworkPolicy: \
DENY lines in {agent_log} on its node)" >&2; exit 1
    fi
    sleep {retry}
  done
done"""


def ssh_first_contact(command: list[str], seconds: int = FIRST_CONTACT_SECONDS) -> list[str]:
    """`command` (mpirun) once every host of the MPI hostfile answers ssh, retried for up to `seconds`.

    The program is exec'd with its arguments as they were, so it stays the container's PID 1 (SIGTERM
    reaches mpirun, and through it the ranks)."""
    script = _SSH_FIRST_CONTACT.format(seconds=seconds, hostfile=MPI_HOSTFILE, retry=RETRY_SECONDS,
                                       agent_log=AGENT_LOG)
    return ["/bin/sh", "-c", script, "gpucluster-first-contact", *command]


def tcp_first_contact(addresses: list[str], seconds: int = FIRST_CONTACT_SECONDS) -> list[str]:
    """A bash command that waits until every host:port accepts a TCP connection, for up to `seconds`."""
    script = _TCP_FIRST_CONTACT.format(seconds=seconds, retry=RETRY_SECONDS, agent_log=AGENT_LOG,
                                       addresses=" ".join(shlex.quote(a) for a in addresses))
    return ["/bin/bash", "-c", script]
