"""`bootstrap fabric-test`: one fabric test per network domain of a pool's Ready nodes, and one across two (issue 30).

The cluster is tests/kube_fake.py's API server holding the pool's nodes with
the EKS network-node labels (topology.k8s.aws/network-node-layer-1..3, ids
shaped as EC2's: nn- and 17 hex digits); each case asserts the MPIJobs the
verb creates (names, node selectors, affinity, Kueue annotations, the record
nccl-report reads) and its parsed output.
"""

from __future__ import annotations

import json

import pytest
import yaml

import bootstrap.__main__ as cli
from bootstrap import stackfile
from bootstrap.jobs import fabric_domains
from bootstrap.verbs.jobs import fabric_test
from components.core.kube import launcher
from tests.conftest import ROOT, stack_config
from tests.kube_fake import FakeKube

NS = "training"
LAYER = "topology.k8s.aws/network-node-layer-{}"
A, B, C = "nn-3c9a41f07be2d5c16", "nn-8e04b7a2196cf3d0a", "nn-d15f6e0c3a8b47e29"  # layer-3 domains (blocks)
S1, S2 = "nn-a07c2e5b9d13f4860", "nn-f2b5c8e1a4d7093b6"  # layer 2 (spines): A and B under S1, C under S2
TOP = "nn-0b6e3f9d2c5a81e47"
SAFE_TO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
REQUIRED_3 = {"kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-3"}


def node(name: str, block: str | None = None, spine: str | None = None, ready: bool = True,
         cordoned: bool = False, pool: str = "h100") -> dict:
    labels = {"gpucluster.io/pool": pool, "kubernetes.io/hostname": name}
    if block:
        labels.update({LAYER.format(1): TOP, LAYER.format(2): spine, LAYER.format(3): block})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def prod_nodes() -> list[dict]:
    """Block A: 4 Ready nodes and a NotReady one; B: 3 Ready and a cordoned one; C: 1; one node EKS has not
    labelled yet; a node of another pool."""
    return ([node(f"ip-10-1-0-1{i}", A, S1) for i in range(1, 5)] + [node("ip-10-1-0-15", A, S1, ready=False)]
            + [node(f"ip-10-1-1-2{i}", B, S1) for i in range(1, 4)] + [node("ip-10-1-1-24", B, S1, cordoned=True)]
            + [node("ip-10-1-2-31", C, S2), node("ip-10-1-3-41"), node("ip-10-9-0-1", pool="cpu")])


@pytest.fixture
def fake(tmp_path, monkeypatch):
    server = FakeKube().start()
    monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(tmp_path / "kubeconfig"))
    yield server
    server.stop()


@pytest.fixture
def dev_stack(tmp_path, monkeypatch):
    """Stack `fab`: dev with its pool replaced (name dev, so dev's jobs still name it)."""
    real = stackfile.stack_path

    def make(**pool) -> str:
        raw = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
        raw["config"]["gpucluster:gpuPools"] = [{"name": "dev", "instanceType": "g6e.xlarge", "minNodes": 0,
                                                 "maxNodes": 2, **pool}]
        (tmp_path / "Pulumi.fab.yaml").write_text(yaml.safe_dump(raw))
        return "fab"

    monkeypatch.setattr(stackfile, "stack_path", lambda stack, project_dir=stackfile.PROJECT_DIR:
                        tmp_path / "Pulumi.fab.yaml" if stack == "fab" else real(stack, project_dir))
    return make


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    code = fabric_test.main(list(argv), sleep=lambda _s: None)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def jobs(fake: FakeKube) -> dict[str, dict]:
    return {j["metadata"]["name"]: j for j in fake.objects("MPIJob")}


def worker(job: dict) -> dict:
    return job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]


def record(job: dict) -> dict:
    return json.loads(job["metadata"]["annotations"]["gpucluster.io/fabric-test"])


# -- the verb on prod's p5 pool: three blocks ---------------------------------------------------------------------


def test_one_test_per_domain_with_two_nodes_and_one_pair_across(fake, capsys):
    for obj in prod_nodes():
        fake.add(obj)
    code, lines, err = run(capsys, "--stack", "prod", "--pool", "h100")
    assert (code, err) == (0, "")
    assert lines == [
        "pool h100: 9 Ready nodes in 3 domains of topology.k8s.aws/network-node-layer-3",
        "  3 domains: 2 tested within, and one pair across two",
        "  nn-3c9a41f07be2d5c16: 4 nodes -> nccl-tests-h100-be2d5c16",
        "  nn-8e04b7a2196cf3d0a: 3 nodes -> nccl-tests-h100-96cf3d0a",
        "  nn-d15f6e0c3a8b47e29: 1 node (ip-10-1-2-31): untested, a test needs 2",
        "  across nn-3c9a41f07be2d5c16 and nn-8e04b7a2196cf3d0a: ip-10-1-0-11 and ip-10-1-1-21 -> "
        "nccl-tests-h100-across",
        "  without topology.k8s.aws/network-node-layer-3: ip-10-1-3-41: untested",
        "submitted 3 MPIJobs to training: 2 x p5.48xlarge each, priority gpucluster-fabric-test, each at most 30 min "
        "once it runs",
        "compare them once they finish: python -m bootstrap nccl-report --stack prod --pool h100"]
    created = [r.body["metadata"]["name"] for r in fake.requests if r.method == "POST"]
    assert created == ["nccl-tests-h100-be2d5c16", "nccl-tests-h100-96cf3d0a", "nccl-tests-h100-across"]
    made = jobs(fake)
    for name, domain in (("nccl-tests-h100-be2d5c16", A), ("nccl-tests-h100-96cf3d0a", B)):
        job = made[name]
        assert worker(job)["spec"]["nodeSelector"] == {"gpucluster.io/pool": "h100", LAYER.format(3): domain}
        assert worker(job)["metadata"]["annotations"] == {**SAFE_TO_EVICT, **REQUIRED_3}
        assert "affinity" not in worker(job)["spec"]
    across = made["nccl-tests-h100-across"]
    assert worker(across)["spec"]["nodeSelector"] == {"gpucluster.io/pool": "h100"}
    assert worker(across)["spec"]["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                     "values": ["ip-10-1-0-11", "ip-10-1-1-21"]}]}]}}}
    assert worker(across)["metadata"]["annotations"] == {**SAFE_TO_EVICT,
                                                         "kueue.x-k8s.io/podset-unconstrained-topology": "true"}
    assert [record(made[n]) for n in created] == [
        {"layer": 3, "domains": {A: 4}, "hosts": [], "untested": {C: ["ip-10-1-2-31"]}, "unlabeled": ["ip-10-1-3-41"]},
        {"layer": 3, "domains": {B: 3}, "hosts": [], "untested": {C: ["ip-10-1-2-31"]}, "unlabeled": ["ip-10-1-3-41"]},
        {"layer": 3, "domains": {A: 4, B: 3}, "hosts": ["ip-10-1-0-11", "ip-10-1-1-21"],
         "untested": {C: ["ip-10-1-2-31"]}, "unlabeled": ["ip-10-1-3-41"]}]


def test_each_test_is_the_stack_s_fabric_test_renamed_and_pinned(fake, capsys):
    for obj in prod_nodes():
        fake.add(obj)
    assert run(capsys, "--stack", "prod")[0] == 0
    base = launcher.nccl_test_mpijob(stack_config("prod").pool("h100"), NS)
    job = jobs(fake)["nccl-tests-h100-be2d5c16"]
    for key in ("apiVersion", "kind"):
        assert job[key] == base[key]
    assert job["metadata"]["labels"] == {**base["metadata"]["labels"], "gpucluster.io/job": "nccl-tests-h100-be2d5c16",
                                         "gpucluster.io/fabric-test-layer": "3"}
    assert job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "gpucluster-fabric-test"
    launcher_pod = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    base_launcher = base["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    assert launcher_pod["spec"] == base_launcher["spec"]  # the same mpirun all_reduce_perf, on a system node
    assert launcher_pod["metadata"]["labels"]["gpucluster.io/job"] == "nccl-tests-h100-be2d5c16"
    assert "annotations" not in launcher_pod["metadata"]  # no topology request: the system flavor has none
    assert worker(job)["metadata"]["labels"]["gpucluster.io/job"] == "nccl-tests-h100-be2d5c16"
    assert worker(job)["spec"]["containers"] == worker(base)["spec"]["containers"]
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert job["spec"]["runPolicy"] == base["spec"]["runPolicy"]


def test_layer_2_groups_by_spine(fake, capsys):
    for obj in prod_nodes():
        fake.add(obj)
    code, lines, _ = run(capsys, "--stack", "prod", "--layer", "2", "--json")
    report = json.loads("\n".join(lines))
    assert code == 0
    assert report["label"] == "topology.k8s.aws/network-node-layer-2" and report["layer"] == 2
    assert report["domains"] == [
        {"domain": S1, "nodes": ["ip-10-1-0-11", "ip-10-1-0-12", "ip-10-1-0-13", "ip-10-1-0-14", "ip-10-1-1-21",
                                 "ip-10-1-1-22", "ip-10-1-1-23"], "test": "nccl-tests-h100-d13f4860"},
        {"domain": S2, "nodes": ["ip-10-1-2-31"], "test": None}]
    assert report["tests"] == [
        {"name": "nccl-tests-h100-d13f4860", "domains": [S1], "hosts": []},
        {"name": "nccl-tests-h100-across", "domains": [S1, S2], "hosts": ["ip-10-1-0-11", "ip-10-1-2-31"]}]
    job = jobs(fake)["nccl-tests-h100-d13f4860"]
    assert worker(job)["spec"]["nodeSelector"] == {"gpucluster.io/pool": "h100", LAYER.format(2): S1}
    assert worker(job)["metadata"]["annotations"] == {
        **SAFE_TO_EVICT, "kueue.x-k8s.io/podset-required-topology": "topology.k8s.aws/network-node-layer-2"}
    assert job["metadata"]["labels"]["gpucluster.io/fabric-test-layer"] == "2"


def test_a_second_run_replaces_the_first_and_its_stale_domains(fake, capsys):
    for obj in prod_nodes():
        fake.add(obj)
    assert run(capsys, "--stack", "prod")[0] == 0
    # Block B's nodes went away; a job of the pool that is no fabric test stays.
    for name in ("ip-10-1-1-21", "ip-10-1-1-22", "ip-10-1-1-23"):
        del fake.collections["/api/v1/nodes"][name]
    fake.add({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {
        "name": "pretrain", "namespace": NS, "labels": {"gpucluster.io/pool": "h100"}}})
    code, lines, _ = run(capsys, "--stack", "prod")
    assert code == 0
    assert "removed the previous run: nccl-tests-h100-96cf3d0a, nccl-tests-h100-across, nccl-tests-h100-be2d5c16" \
        in lines
    deleted = [r.path.rsplit("/", 1)[1] for r in fake.requests if r.method == "DELETE"]
    assert deleted == ["nccl-tests-h100-96cf3d0a", "nccl-tests-h100-across", "nccl-tests-h100-be2d5c16"]
    assert sorted(jobs(fake)) == ["nccl-tests-h100-across", "nccl-tests-h100-be2d5c16", "pretrain"]
    assert worker(jobs(fake)["nccl-tests-h100-across"])["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "values"] == ["ip-10-1-0-11", "ip-10-1-2-31"]


def test_a_job_of_that_name_it_did_not_create_is_left_alone(fake, capsys):
    for obj in prod_nodes():
        fake.add(obj)
    fake.add({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {
        "name": "nccl-tests-h100-across", "namespace": NS}})
    code, lines, err = run(capsys, "--stack", "prod")
    assert (code, lines) == (2, [])
    assert err == ("python -m bootstrap fabric-test: error: MPIJob nccl-tests-h100-across exists in training and is "
                   "no fabric test of `fabric-test`: `python -m bootstrap cancel nccl-tests-h100-across` first\n")
    assert [r for r in fake.requests if r.method in ("POST", "DELETE")] == []


def test_no_ready_nodes_submits_nothing(fake, capsys):
    fake.add(node("ip-10-1-0-15", A, S1, ready=False))
    code, lines, _ = run(capsys, "--stack", "prod")
    assert code == 1
    assert lines == ["pool h100: 0 Ready nodes in 0 domains of topology.k8s.aws/network-node-layer-3",
                     "  no Ready nodes: the domains are known once nodes run; start some (a job, or the stack's "
                     "fabric test) and run this again"]
    assert fake.objects("MPIJob") == []


def test_nodes_not_labelled_yet_submit_nothing(fake, capsys):
    fake.add(node("ip-10-1-3-41"))
    fake.add(node("ip-10-1-3-42"))
    code, lines, _ = run(capsys, "--stack", "prod")
    assert code == 1
    assert lines[1] == ("  no Ready node has topology.k8s.aws/network-node-layer-3 yet (EKS labels a node as it "
                        "joins): run this again in a minute")
    assert lines[2] == "  without topology.k8s.aws/network-node-layer-3: ip-10-1-3-41, ip-10-1-3-42: untested"


@pytest.mark.parametrize(("argv", "message"), [
    (["--layer", "4"], "--layer 4: p5.48xlarge nodes have 3 network layers (1 to 3)"),
    (["--pool", "a100"], "no GPU pool 'a100' in stack prod; its pools: h100")])
def test_bad_arguments_exit_2(fake, capsys, argv, message):
    code, lines, err = run(capsys, "--stack", "prod", *argv)
    assert (code, lines, err) == (2, [], f"python -m bootstrap fabric-test: error: {message}\n")


# -- dev-sized pools: one domain, no topology -----------------------------------------------------------------------


def test_a_pool_in_one_domain_gets_one_test(fake, capsys, dev_stack):
    stack = dev_stack()
    for name in ("ip-10-2-0-11", "ip-10-2-0-12"):
        fake.add(node(name, A, S1, pool="dev"))
    code, lines, _ = run(capsys, "--stack", stack)
    assert code == 0
    assert lines[:3] == ["pool dev: 2 Ready nodes in 1 domain of topology.k8s.aws/network-node-layer-3",
                         "  all 2 labeled Ready nodes sit in one domain, nn-3c9a41f07be2d5c16: one test, nothing to "
                         "compare",
                         "  nn-3c9a41f07be2d5c16: 2 nodes -> nccl-tests-dev-be2d5c16"]
    assert sorted(jobs(fake)) == ["nccl-tests-dev-be2d5c16"]


def test_a_pool_without_topology_gets_the_single_test_and_says_why(fake, capsys, dev_stack):
    stack = dev_stack(topology="off")
    fake.add(node("ip-10-2-0-11", A, S1, pool="dev"))
    code, lines, _ = run(capsys, "--stack", stack)
    assert code == 0
    assert lines == [
        "pool dev: no network topology (its `topology` is off): one test over 2 nodes anywhere in the pool",
        "  -> nccl-tests-dev-any",
        "submitted 1 MPIJob to training: 2 x g6e.xlarge each, priority gpucluster-fabric-test, each at most 30 min "
        "once it runs",
        "compare them once they finish: python -m bootstrap nccl-report --stack fab --pool dev"]
    job = jobs(fake)["nccl-tests-dev-any"]
    assert worker(job)["spec"]["nodeSelector"] == {"gpucluster.io/pool": "dev"}
    assert worker(job)["metadata"]["annotations"] == SAFE_TO_EVICT  # as the stack renders it: no TAS flavor
    assert job["metadata"]["labels"]["gpucluster.io/fabric-test-layer"] == "0"
    assert record(job) == {"layer": 0, "domains": {}, "hosts": [], "untested": {}, "unlabeled": []}


def test_layer_on_a_pool_without_topology_exits_2(fake, capsys, dev_stack):
    code, _, err = run(capsys, "--stack", dev_stack(topology="off"), "--layer", "3")
    assert code == 2
    assert err == ("python -m bootstrap fabric-test: error: --layer 3: pool dev has no network topology (its "
                   "`topology` is off)\n")


# -- the plan's names ------------------------------------------------------------------------------------------------


def test_names_fit_a_worker_hostname_for_the_longest_pool_name():
    pool = stack_config("dev", {"gpucluster:gpuPools": [
        {"name": "p" * 32, "instanceType": "p5.48xlarge", "maxNodes": 4}], "gpucluster:jobs": []}).gpu_pools[0]
    nodes = [node(f"n{i}", block, S1, pool=pool.name) for i, block in enumerate((A, A, B))]
    plan = fabric_domains.plan(pool, nodes)
    assert [t.name for t in plan.tests] == [f"nccl-tests-{'p' * 32}-be2d5c16", f"nccl-tests-{'p' * 32}-across"]
    assert max(len(f"{t.name}-worker-1") for t in plan.tests) == 61  # a hostname: at most 63
    assert max(len(f"{t.name}-launcher") for t in plan.tests) == 61  # the launcher Job's name, a label value


def test_suffixes_are_the_ids_last_8_characters_unless_they_collide():
    assert fabric_domains.suffixes([A, B]) == {A: "be2d5c16", B: "96cf3d0a"}
    assert fabric_domains.suffixes(["Block_A.01"]) == {"Block_A.01": "ock-a-01"}  # lower case, a DNS label
    # Two ids ending alike, and ids that would take the pair's or the single test's name: a hash of the id each.
    clash = fabric_domains.suffixes(["nn-aaaa12345678", "nn-bbbb12345678", "across", "any", "--"])
    assert clash == {"nn-aaaa12345678": "5b1a30d0", "nn-bbbb12345678": "ab494b94", "across": "deb538b5",
                     "any": "d6a7cd2a", "--": "d8156bae"}


def test_the_cli_knows_the_verb(fake, capsys):
    assert "  fabric-test  the fabric test in each network domain of a pool, and across" in cli.usage().splitlines()
    assert cli.run(["fabric-test", "--stack", "prod", "--layer", "0"]) == 2
    assert capsys.readouterr().err == ("python -m bootstrap fabric-test: error: --layer 0: p5.48xlarge nodes have 3 "
                                       "network layers (1 to 3)\n")


def test_a_single_labelled_node_is_not_enough(fake, capsys):
    fake.add(node("ip-10-1-0-11", A, S1))
    code, lines, _ = run(capsys, "--stack", "prod")
    assert (code, lines) == (1, [
        "pool h100: 1 Ready node in 1 domain of topology.k8s.aws/network-node-layer-3",
        "  the only labeled Ready node sits in nn-3c9a41f07be2d5c16: a test needs 2 nodes",
        "  nn-3c9a41f07be2d5c16: 1 node (ip-10-1-0-11): untested, a test needs 2"])


def test_two_single_node_domains_get_only_the_pair_across(fake, capsys):
    fake.add(node("ip-10-1-0-11", A, S1))
    fake.add(node("ip-10-1-2-31", C, S2))
    code, lines, _ = run(capsys, "--stack", "prod")
    assert code == 0
    assert lines[1:5] == [
        "  2 domains: 0 tested within, and one pair across two",
        "  nn-3c9a41f07be2d5c16: 1 node (ip-10-1-0-11): untested, a test needs 2",
        "  nn-d15f6e0c3a8b47e29: 1 node (ip-10-1-2-31): untested, a test needs 2",
        "  across nn-3c9a41f07be2d5c16 and nn-d15f6e0c3a8b47e29: ip-10-1-0-11 and ip-10-1-2-31 -> "
        "nccl-tests-h100-across"]
    assert sorted(jobs(fake)) == ["nccl-tests-h100-across"]


def gpu_pod(name: str, on: str, phase: str = "Running", gpus: str = "8", daemonset: bool = False) -> dict:
    owner = [{"kind": "DaemonSet", "name": "dcgm-exporter", "uid": "ds-1"}] if daemonset else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team-a" if not daemonset else "monitoring",
                         "ownerReferences": owner},
            "spec": {"nodeName": on, "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": phase}}


def test_nodes_a_job_holds_are_left_out_so_no_test_waits_for_them(fake, capsys):
    # Two of block A's four Ready nodes run a job (any namespace); a finished pod and a DaemonSet's hold nothing.
    for obj in [*prod_nodes(), gpu_pod("llm-0", "ip-10-1-0-11"), gpu_pod("llm-1", "ip-10-1-0-12"),
                gpu_pod("old-0", "ip-10-1-0-13", phase="Succeeded"), gpu_pod("dcgm", "ip-10-1-0-14", daemonset=True),
                gpu_pod("cpu-0", "ip-10-1-1-21", gpus="0")]:
        fake.add(obj)
    code, lines, err = run(capsys, "--stack", "prod", "--pool", "h100")
    assert (code, err) == (0, "")
    assert lines[:3] == ["pool h100: 7 Ready nodes in 3 domains of topology.k8s.aws/network-node-layer-3",
                         "  3 domains: 2 tested within, and one pair across two",
                         "  nn-3c9a41f07be2d5c16: 2 nodes -> nccl-tests-h100-be2d5c16"]
    assert "  running a job: ip-10-1-0-11, ip-10-1-0-12: untested (a test there would wait for the job)" in lines
    across = jobs(fake)["nccl-tests-h100-across"]
    assert record(across)["hosts"] == ["ip-10-1-0-13", "ip-10-1-1-21"]
    pod_lists = [r for r in fake.requests if r.method == "GET" and r.path == "/api/v1/pods"]
    assert [r.query.get("fieldSelector") for r in pod_lists] == ["status.phase!=Succeeded,status.phase!=Failed"]


def test_every_ready_node_busy_submits_nothing(fake, capsys):
    for obj in [node("ip-10-1-0-11", A, S1), node("ip-10-1-0-12", A, S1), gpu_pod("a", "ip-10-1-0-11"),
                gpu_pod("b", "ip-10-1-0-12")]:
        fake.add(obj)
    code, lines, _ = run(capsys, "--stack", "prod", "--pool", "h100")
    assert code == 1
    assert lines[1] == "  every Ready node runs a job (2): run this again when some are free"


def test_a_rerun_while_the_last_run_s_workers_still_run_tests_their_nodes_again(fake, capsys):
    # The previous run's workers hold block A's nodes (GPU pods of its MPIJob): they are removed first, not busy.
    for obj in prod_nodes():
        fake.add(obj)
    assert run(capsys, "--stack", "prod", "--pool", "h100")[0] == 0
    for i, node_name in enumerate(("ip-10-1-0-11", "ip-10-1-0-12")):
        worker_pod = gpu_pod(f"nccl-tests-h100-be2d5c16-worker-{i}", node_name)
        worker_pod["metadata"].update(namespace=NS, labels={"gpucluster.io/job": "nccl-tests-h100-be2d5c16"})
        fake.add(worker_pod)
    code, lines, _ = run(capsys, "--stack", "prod", "--pool", "h100")
    assert code == 0
    assert "  nn-3c9a41f07be2d5c16: 4 nodes -> nccl-tests-h100-be2d5c16" in lines
    assert not [line for line in lines if line.startswith("  running a job")]
