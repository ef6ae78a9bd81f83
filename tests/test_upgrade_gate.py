"""The upgrade gate (bootstrap/jobs/upgrade_gate.py): which live jobs the next `pulumi up` would strand or
re-provision, and `bootstrap preflight`'s check reading them from the cluster (tests/kube_fake.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bootstrap.account.checks import FAIL, PASS, UNKNOWN, WARN, Check
from bootstrap.cluster.api import ClusterUnreachable, NotDeployed
from bootstrap.jobs import upgrade_gate
from bootstrap.verbs import preflight
from components.core.kube import queueing
from components.core.kube.nodepool import POOL_LABEL
from components.core.teams import queues as teams
from tests import k8s
from tests.conftest import stack_config
from tests.kube_fake import FakeKube

# Pulumi.prod.yaml's pool, and as a release without topologies or atomic scale-up deployed it.
H100 = {"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 0, "maxNodes": 16, "capacityType": "ON_DEMAND",
        "rootVolumeGiB": 500, "fabricTest": True, "idleMinutes": 5}
BEFORE = {"gpucluster:gpuPools": [{**H100, "atomicScaleUp": False, "topology": "off"}]}
NEW = stack_config("prod")
OLD = stack_config("prod", BEFORE)
QUEUES = ["gpucluster", "gpucluster-team-language", "gpucluster-team-vision"]
SUBMIT = "or --file with its job file"
CHECK_TEXT = ("Kueue adds the admission check gpucluster-atomic-scale-up (ClusterQueue {queue}) to it though it "
              "runs, and asks cluster-autoscaler for its {n} nodes again (a ProvisioningRequest): where maxNodes "
              "leaves room, {n} more start and bill until they idle out; where not, the request fails after 7 days "
              "and Kueue evicts the job")
TAS_TEXT = ("pool-h100 gets the network topology gpucluster-network-3 and then takes only pod sets that ask for one; "
            "its pod set {ps}, made before, asks none")
EVICTED = ", so after any eviction (a preemption, a node failure, `pause --mode drain`) Kueue never admits it again"


def live(cfg) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ResourceFlavors and ClusterQueues a stack deployed with `cfg` has (what the program renders)."""
    queues = [teams.training_cluster_queue(cfg.gpu_pools, cfg.system_nodes, cfg.training_namespace, cfg.teams),
              *(teams.team_cluster_queue(t, cfg.gpu_pools, cfg.system_nodes) for t in cfg.teams)]
    return queueing.resource_flavors(cfg.gpu_pools), queues


def pod_set(name: str, count: int, topology: dict | None = None) -> dict[str, Any]:
    ps = {"name": name, "count": count, "template": {"spec": {
        "containers": [{"name": name, "resources": {"requests": {"nvidia.com/gpu": "8"}}}],
        "nodeSelector": {POOL_LABEL: "h100"}}}}
    return {**ps, "topologyRequest": topology} if topology else ps


LAUNCHER = {"name": "launcher", "count": 1, "template": {"spec": {
    "containers": [{"name": "launcher", "resources": {"requests": {"cpu": "1"}}}],
    "nodeSelector": {"gpucluster.io/role": "system"}}}}
# What Kueue records for a JobSet's pod set with no topology annotation: no request (IsExplicitlyRequestingTAS).
INDEX_ONLY = {"podIndexLabel": "batch.kubernetes.io/job-completion-index", "subGroupCount": 1,
              "subGroupIndexLabel": "jobset.sigs.k8s.io/job-index"}


def workload(job: str, namespace: str, pod_sets: list[dict], state: str = "queued", queue: str = "gpucluster",
             kind: str = "TrainJob", uid: str | None = None) -> dict[str, Any]:
    conditions: list[dict[str, str]] = []
    status: dict[str, Any] = {"conditions": conditions}
    if state == "running":
        conditions += [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
        status["admission"] = {"clusterQueue": queue, "podSetAssignments": [
            {"name": ps["name"], "count": ps["count"],
             "flavors": {"cpu": "system"} if ps["name"] == "launcher" else
             {"cpu": "pool-h100", "nvidia.com/gpu": "pool-h100"}} for ps in pod_sets]}
    elif state == "finished":
        conditions.append({"type": "Finished", "status": "True"})
    else:
        conditions.append({"type": "QuotaReserved", "status": "False", "reason": "Pending"})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"{kind.lower()}-{job}-1a2b3", "namespace": namespace,
                         "ownerReferences": [{"kind": kind, "name": job, "uid": uid or f"uid-{job}",
                                              "controller": True}]},
            "spec": {"active": state != "deactivated", "podSets": pod_sets, "queueName": "gpu"}, "status": status}


LLAMA = workload("llama-70b", "training", [pod_set("node", 16, INDEX_ONLY)], "running")
GPT = workload("gpt-pretrain", "training", [LAUNCHER, pod_set("worker", 2)], kind="MPIJob")
VIT = workload("vit", "vision", [pod_set("node", 4)], "running", "gpucluster-team-vision")
FABRIC = workload("fabric-test-h100", "training", [LAUNCHER, pod_set("worker", 2)], "running", kind="MPIJob")
DONE = workload("done", "training", [pod_set("node", 2)], "finished")
STUCK = workload("stuck", "language", [pod_set("node", 2)], "deactivated")
# Submitted with this release's CLI before `pulumi up`: it asks for a topology already.
NEWER = workload("newer", "training",
                 [pod_set("node", 2, {**INDEX_ONLY, "preferred": "topology.k8s.aws/network-node-layer-3"})])


def gate(cfg, live_cfg, workloads, pulumi_jobs=()) -> list[Check]:
    flavors, queues = live(live_cfg)
    return upgrade_gate.checks(cfg, "prod", flavors, queues, workloads, pulumi_jobs)


# -- the Kueue fields the gate reads ---------------------------------------------------------------------------------


def test_the_fields_read_are_kueue_s():
    spec = k8s.crd_schema("kueue.x-k8s.io_clusterqueues.yaml", "v1beta2")["properties"]["spec"]["properties"]
    rule = spec["admissionChecksStrategy"]["properties"]["admissionChecks"]["items"]["properties"]
    assert set(rule) == {"name", "onFlavors"}
    flavor = k8s.crd_schema("kueue.x-k8s.io_resourceflavors.yaml", "v1beta2")["properties"]["spec"]
    assert "topologyName" in flavor["properties"]
    assert "topologyName is immutable when topologyName is set" in [r["message"] for r in
                                                                    flavor["x-kubernetes-validations"]]


def test_before_and_after_the_upgrade_the_stack_renders_what_the_gate_compares():
    (old_flavor, new_flavor) = (live(c)[0][1] for c in (OLD, NEW))
    assert "topologyName" not in old_flavor["spec"] and new_flavor["spec"]["topologyName"] == "gpucluster-network-3"
    assert all("admissionChecksStrategy" not in q["spec"] for q in live(OLD)[1])
    assert upgrade_gate.check_gains(NEW, live(OLD)[1]) == {(q, "pool-h100") for q in QUEUES}
    assert upgrade_gate.check_gains(NEW, live(NEW)[1]) == set()


# -- the upgrade of prod from a release without topologies ---------------------------------------------------------


def test_upgrading_prod_names_each_job_it_would_strand_or_re_provision():
    found = gate(NEW, OLD, [LLAMA, GPT, VIT, FABRIC, DONE, STUCK, NEWER], ["uid-fabric-test-h100"])
    assert [(c.name, c.status) for c in found] == [
        ("upgrade: TrainJob training/llama-70b", FAIL), ("upgrade: MPIJob training/gpt-pretrain", FAIL),
        ("upgrade: TrainJob vision/vit", FAIL), ("upgrade: MPIJob training/fabric-test-h100", WARN),
        ("upgrade: TrainJob language/stuck", WARN)]
    llama, gpt, vit, fabric, stuck = (c.detail for c in found)
    assert llama == (
        "it runs on pool h100: " + CHECK_TEXT.format(queue="gpucluster", n=16) + "; " + TAS_TEXT.format(ps="node")
        + EVICTED + ". Let it finish before `pulumi up`, or cancel it (`python -m bootstrap cancel llama-70b --stack "
        f"prod`) and submit it again after (`python -m bootstrap submit --stack prod llama-70b`, {SUBMIT}); or "
        "upgrade now and leave pool h100 as it was (gpuPools[0] atomicScaleUp: false, topology: off) until it ends")
    assert gpt == (
        "it waits for pool h100 and would never start: " + TAS_TEXT.format(ps="worker") + ". Cancel it (`python -m "
        "bootstrap cancel gpt-pretrain --stack prod`) and submit it again after `pulumi up` (`python -m bootstrap "
        f"submit --stack prod gpt-pretrain`, {SUBMIT}); or upgrade now and leave pool h100 as it was (gpuPools[0] "
        "topology: off) until it ends")
    # A team's job: its queue, and the commands with --team.
    assert CHECK_TEXT.format(queue="gpucluster-team-vision", n=4) in vit
    assert "`python -m bootstrap cancel vit --stack prod --team vision`" in vit
    assert "`python -m bootstrap submit --stack prod --team vision vit`" in vit
    assert fabric == ("it runs on pool h100 and `pulumi up` made it (startOnUp: true): its workers now ask for the "
                      "pool's network topology, so `pulumi up` replaces it and it restarts (from its last checkpoint, "
                      "if it writes them). Let it finish first to keep the run whole")
    assert stuck.startswith("Kueue deactivated it; reactivated after `pulumi up` it would never start: ")
    assert "`python -m bootstrap cancel stuck --stack prod --team language`" in stuck


def test_a_queued_job_meets_the_new_check_when_admitted_so_only_its_topology_counts():
    # Atomic scale-up alone (topology off): a running job gets the check, a queued one is not listed.
    cfg = stack_config("prod", {"gpucluster:gpuPools": [{**H100, "topology": "off"}]})
    queued = workload("queued", "training", [pod_set("node", 2)])
    (running,) = gate(cfg, OLD, [LLAMA, queued])
    assert running.status == FAIL
    assert running.detail == (
        "it runs on pool h100: " + CHECK_TEXT.format(queue="gpucluster", n=16) + ". Let it finish before `pulumi up`, "
        "or cancel it (`python -m bootstrap cancel llama-70b --stack prod`) and submit it again after (`python -m "
        f"bootstrap submit --stack prod llama-70b`, {SUBMIT}); or upgrade now and leave pool h100 as it was "
        "(gpuPools[0] atomicScaleUp: false) until it ends")


def test_a_job_pulumi_made_that_only_gains_the_check_is_let_finish():
    cfg = stack_config("prod", {"gpucluster:gpuPools": [{**H100, "topology": "off"}]})
    (check,) = gate(cfg, OLD, [LLAMA], ["uid-llama-70b"])
    assert check.status == FAIL and check.detail.endswith(
        ". Let it finish before `pulumi up`; or upgrade now and leave pool h100 as it was (gpuPools[0] "
        "atomicScaleUp: false) until it ends")


def test_a_queued_job_pulumi_made_is_replaced_with_its_topology_request():
    check, summary = gate(NEW, OLD, [GPT], ["uid-gpt-pretrain"])
    assert summary.status == PASS and summary.name == upgrade_gate.NAME
    assert check == Check("upgrade: MPIJob training/gpt-pretrain", PASS, "`pulumi up` made it (startOnUp: true) and "
                          "replaces it with workers that ask for the topology of pool h100")


def test_nothing_under_the_changes_passes_and_says_what_changes():
    assert gate(NEW, OLD, [DONE, NEWER]) == [Check(upgrade_gate.NAME, PASS, (
        "`pulumi up` adds the network topology gpucluster-network-3 to pool-h100 and the admission check "
        "gpucluster-atomic-scale-up to pool-h100 in gpucluster, gpucluster-team-language, gpucluster-team-vision, "
        "and strands or re-provisions no running or queued job (1 unfinished Workloads read)"))]
    assert gate(NEW, NEW, [LLAMA, GPT]) == [Check(upgrade_gate.NAME, PASS, (
        "`pulumi up` adds no admission check or topology to a live pool (2 unfinished Workloads read)"))]


def test_a_queue_that_runs_the_check_on_every_flavor_already_has_it_and_other_queues_are_not_the_stack_s():
    flavors, queues = live(OLD)
    queues[0]["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "gpucluster-atomic-scale-up"}]}
    stranger = json.loads(json.dumps(queues[1]))
    stranger["metadata"]["name"] = "someone-else"
    assert upgrade_gate.check_gains(NEW, [*queues, stranger]) == {(q, "pool-h100") for q in QUEUES[1:]}


def test_a_pool_that_is_not_deployed_yet_affects_nothing():
    cfg = stack_config("prod", {"gpucluster:gpuPools": [H100, {**H100, "name": "h100b"}]})
    flavors, queues = live(OLD)
    orphan = workload("orphan", "training", [{**pod_set("node", 2), "template": {"spec": {
        "nodeSelector": {POOL_LABEL: "h100b"}}}}])
    assert [p.name for p in upgrade_gate.pools(cfg, flavors)] == ["h100"]
    assert [c.name for c in upgrade_gate.checks(cfg, "prod", flavors, queues, [orphan])] == [upgrade_gate.NAME]


# -- a topology `pulumi up` cannot change ----------------------------------------------------------------------------


def test_taking_a_topology_off_a_deployed_pool_fails_with_the_way_out():
    (check,) = gate(OLD, NEW, [])
    assert check == Check("upgrade: topology of pool h100", FAIL, (
        "ResourceFlavor pool-h100 has the topology gpucluster-network-3 and the stack wants none (topology: off, or a "
        "type EKS labels no layers on): Kueue refuses to change or remove a flavor's topologyName, so `pulumi up` "
        "would fail on it after updating Kueue and the autoscaler. Keep it (gpuPools[0] topology: auto, an "
        "instanceType with the same network layers). No `pulumi up` can change it; by hand, with no job on the pool: "
        "let its jobs finish or cancel them (queued ones too), take pool-h100 out of every ClusterQueue listing it "
        "(gpucluster, gpucluster-team-language, gpucluster-team-vision: spec.resourceGroups[].flavors, and "
        "admissionChecksStrategy onFlavors, dropping a rule left with none, which would mean every flavor), "
        "`kubectl delete resourceflavor pool-h100` (Kueue lets it go once no ClusterQueue lists it), then `pulumi up "
        "--refresh` makes it anew and restores the queues"))


def test_a_type_with_more_layers_changes_the_topology_and_fails_too():
    cfg = stack_config("prod", {"gpucluster:gpuPools": [{**H100, "instanceType": "p6-b200.48xlarge"}],
                                "gpucluster:teams": [], "gpucluster:jobs": []})
    checks = gate(cfg, NEW, [LLAMA])
    assert checks[0].name == "upgrade: topology of pool h100" and checks[0].status == FAIL
    assert checks[0].detail.startswith("ResourceFlavor pool-h100 has the topology gpucluster-network-3 and the stack "
                                       "wants gpucluster-network-4: ")
    assert len(checks) == 1  # the running job is under a topology already: nothing more to say


# -- preflight reads the cluster ---------------------------------------------------------------------------------------


def served(*workloads: dict, jobs: tuple[dict, ...] = ()) -> FakeKube:
    flavors, queues = live(OLD)
    return FakeKube([*flavors, *queues, *json.loads(json.dumps(list(workloads))), *jobs]).start()


def train_job(name: str, managed_by: str) -> dict[str, Any]:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "training", "uid": f"uid-{name}",
                         "labels": {"app.kubernetes.io/part-of": "gpucluster",
                                    "app.kubernetes.io/managed-by": managed_by}}}


def test_preflight_reads_flavors_queues_the_stack_s_namespaces_and_pulumi_s_jobs():
    fake = served(LLAMA, VIT, STUCK, jobs=(train_job("llama-70b", "pulumi"),))
    try:
        found = preflight.live_jobs(NEW, "prod", fake.client)
    finally:
        fake.stop()
    assert [(c.name, c.status) for c in found] == [("upgrade: TrainJob training/llama-70b", WARN),
                                                  ("upgrade: TrainJob vision/vit", FAIL),
                                                  ("upgrade: TrainJob language/stuck", WARN)]
    paths = {r.path for r in fake.requests if r.method == "GET"}
    assert {"/apis/kueue.x-k8s.io/v1beta2/resourceflavors", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
            *(f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads" for ns in ("training", "vision", "language"))
            } <= paths
    assert all(r.method == "GET" for r in fake.requests)  # read-only


@pytest.mark.parametrize("failure, expected", [
    (NotDeployed("stack prod has no `kubeconfig` output: has it been deployed (`pulumi up`)?"),
     Check(upgrade_gate.NAME, PASS, "no cluster yet: stack prod has no `kubeconfig` output: has it been deployed "
                                    "(`pulumi up`)?")),
    (ClusterUnreachable("https://ABC.gr7.us-east-1.eks.amazonaws.com: timed out"),
     Check(upgrade_gate.NAME, UNKNOWN, "cannot reach the cluster: https://ABC.gr7.us-east-1.eks.amazonaws.com: "
                                       "timed out; on a deployed stack, run preflight where kubectl reaches it "
                                       "(--kubeconfig)")),
])
def test_no_cluster_passes_and_an_unreachable_one_is_unknown(failure, expected):
    def kube():
        raise failure
    assert preflight.live_jobs(NEW, "prod", kube) == [expected]


def test_a_cluster_without_kueue_passes_and_a_refusal_is_unknown():
    fake = served()
    fake.fail[("GET", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors")] = (404, "the server could not find the "
                                                                                "requested resource")
    try:
        assert preflight.live_jobs(NEW, "prod", fake.client) == [Check(
            upgrade_gate.NAME, PASS, "no Kueue on the cluster yet (the server could not find the requested resource)")]
        fake.fail[("GET", "/apis/kueue.x-k8s.io/v1beta2/resourceflavors")] = (403, "resourceflavors is forbidden")
        assert preflight.live_jobs(NEW, "prod", fake.client) == [Check(
            upgrade_gate.NAME, UNKNOWN, "the cluster said 403 Forbidden: resourceflavors is forbidden")]
    finally:
        fake.stop()


def _identity_only(service: str, region: str | None = None):
    """An account that answers who we are and nothing else: every other check is unknown, none fails."""
    class Client:
        def get_caller_identity(self):
            return {"Account": "210987654321", "Arn": "arn:aws:iam::210987654321:role/Admin"}

        def __getattr__(self, name):
            raise RuntimeError(f"{service}.{name}: not in this test")
    return Client()


def test_preflight_fails_on_a_stranded_job_through_kubeconfig(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    fake = served(GPT)
    try:
        code = preflight.main(["--stack", "prod", "--kubeconfig", fake.write_kubeconfig(tmp_path / "kc"), "--json"],
                              client_factory=_identity_only, ip=lambda: None)
    finally:
        fake.stop()
    report = json.loads(capsys.readouterr().out)
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses["upgrade: MPIJob training/gpt-pretrain"] == FAIL
    assert code == 1 and report["ok"] is False


def test_with_a_stack_file_the_stack_s_own_cluster_is_not_read(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    asked = []

    def connect(stack, kubeconfig):
        asked.append((stack, kubeconfig))
        raise ClusterUnreachable("no cluster: give --stack, --kubeconfig or set KUBECONFIG")
    monkeypatch.setattr(preflight, "connect", connect)
    stack_file = tmp_path / "Pulumi.prod.yaml"
    stack_file.write_text((preflight.stackfile.PROJECT_DIR / "Pulumi.prod.yaml").read_text())
    preflight.main(["--stack", "prod", "--stack-file", str(stack_file), "--json"], client_factory=_identity_only,
                   ip=lambda: None)
    report = json.loads(capsys.readouterr().out)
    assert asked == [(None, None)]
    assert {c["name"]: c["status"] for c in report["checks"]}[upgrade_gate.NAME] == UNKNOWN


def test_without_the_account_the_cluster_is_not_read(tmp_path, capsys):
    def no_credentials(service: str, region: str | None = None):
        raise RuntimeError("Unable to locate credentials")

    def kube():
        raise AssertionError("the cluster was read")
    code = preflight.main(["--stack", "prod", "--json"], client_factory=no_credentials, ip=lambda: None, kube=kube)
    report = json.loads(capsys.readouterr().out)
    assert code == 2 and upgrade_gate.NAME not in {c["name"] for c in report["checks"]}


@pytest.mark.parametrize("request_, stranded", [
    ({"required": "topology.k8s.aws/network-node-layer-3"}, False),
    ({"preferred": "topology.k8s.aws/network-node-layer-2"}, False),
    ({"unconstrained": True}, False),
    ({"podSetSliceRequiredTopology": "topology.k8s.aws/network-node-layer-3", "podSetSliceSize": 2}, False),
    (INDEX_ONLY, True),
    (None, True),
])
def test_only_a_pod_set_that_asks_for_a_topology_keeps_its_flavor(request_, stranded):
    queued = workload("queued", "training", [pod_set("node", 2, request_)])
    (check,) = gate(NEW, OLD, [queued])
    assert (check.status == FAIL) is stranded
