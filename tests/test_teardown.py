"""Tear-down and pause under mocks: destroy order, delete hooks, the adopted bucket, pause, grace periods.

Pulumi deletes a resource only after everything that depends on it, so
"A depends on B" is "A is deleted before B".
"""

from __future__ import annotations

import pytest

from bootstrap.offline import mocks
from components.core import config
from components.core.kube import trainer
from components.core.planning import cost
from components.hooks import BUCKET_HOOK, ENI_HOOK, EXPORT_HOOK, FSX_TASKS_HOOK
from tests.conftest import prod_started, stack_config, stack_raw
from tests.conftest import recording as shared_recording
from tests.k8s import validate_custom

DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


@pytest.fixture(scope="module")
def prod() -> mocks.Recording:
    return shared_recording("prod", prod_started())


@pytest.fixture(scope="module")
def teamed() -> mocks.Recording:
    """prod with its jobs started and gpt-pretrain a job of team vision (in the vision namespace)."""
    overrides = prod_started()
    overrides["gpucluster:jobs"] = [{**job, "team": "vision"} if job["name"] == "gpt-pretrain" else job
                                    for job in overrides["gpucluster:jobs"]]
    return shared_recording("prod", overrides)


@pytest.fixture(scope="module")
def dev() -> mocks.Recording:
    return shared_recording("dev")


def one(rec: mocks.Recording, type_: str) -> mocks.Registration:
    (found,) = rec.of_type(type_)
    return found


def gpu_node_groups(rec: mocks.Recording) -> dict[str, mocks.Registration]:
    return {ng.name: ng for ng in rec.of_type(NODE_GROUP) if not ng.name.endswith("system-nodes")}


# -- destroy order ---------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["prod", "teamed"])
def test_jobs_go_before_their_nodes_and_before_the_file_system_is_unlinked(stack, request):
    rec = request.getfixturevalue(stack)
    dra, fs = one(rec, DRA), one(rec, FSX)
    (pool,) = gpu_node_groups(rec).values()
    jobs = [r for r in rec.resources if r.type.endswith((":MPIJob", ":TrainJob"))]
    assert len(jobs) == 3  # llama-70b, gpt-pretrain, the fabric test
    for job in jobs:
        assert rec.depends_on(job, pool), job.name
    # One claim (and its PV) per job namespace: training's, and each team's on its directory.
    claims = {c.inputs["metadata"]["namespace"]: c for c in rec.of_type("kubernetes:core/v1:PersistentVolumeClaim")}
    volumes = {v.name: v for v in rec.of_type("kubernetes:core/v1:PersistentVolume")}
    assert sorted(claims) == ["language", "training", "vision"] and len(volumes) == 3
    mounting = {job.name: job.inputs["metadata"]["namespace"] for job in jobs if "fabric-test" not in job.name}
    assert sorted(mounting.values()) == (["training", "vision"] if stack == "teamed" else ["training", "training"])
    for job, namespace in mounting.items():  # the fabric test mounts no file system
        assert rec.depends_on(rec.named(job), claims[namespace]), job  # no pod mounts it once the jobs are gone
    for pvc in claims.values():
        pv = volumes[pvc.name.removesuffix("-pvc") + "-pv"]
        assert rec.depends_on(pvc, pv) and rec.depends_on(pv, dra), pv.name
    assert rec.depends_on(dra, fs)


@pytest.mark.parametrize("stack", ["prod", "teamed"])
def test_kubernetes_objects_go_while_their_controllers_still_run(stack, request):
    """Kueue, the operators and the CSI driver run on the system nodes and remove their objects' finalizers."""
    rec = request.getfixturevalue(stack)
    system = next(ng for ng in rec.of_type(NODE_GROUP) if ng.name.endswith("system-nodes"))
    objects = [r for r in rec.resources if r.custom and r.type.startswith("kubernetes:")
               and not r.type.startswith("pulumi:providers:")]
    waiting: dict[str, list[str]] = {}
    for r in objects:
        if not rec.depends_on(r, system):
            waiting.setdefault(r.type.rsplit(":", 1)[1], []).append(r.name.removeprefix("gpucluster-prod-"))
    # The job namespaces are emptied by the time they go: everything in them is deleted before them. The
    # teams' RBAC and admission policies have no controller nor finalizer: the API server deletes them alone.
    assert {kind: sorted(names) for kind, names in waiting.items()} == {
        "Namespace": ["team-language-ns", "team-vision-ns", "training-ns"],
        "Role": ["queue-team-language-role", "queue-team-vision-role"],
        "RoleBinding": ["queue-team-language-role-binding", "queue-team-vision-role-binding"],
        "ValidatingAdmissionPolicy": ["queue-team-language-job-policy", "queue-team-pod-policy",
                                      "queue-team-vision-job-policy"],
        "ValidatingAdmissionPolicyBinding": ["queue-team-language-job-policy-binding",
                                             "queue-team-pod-policy-binding", "queue-team-vision-job-policy-binding"],
    }
    queue_release = rec.named("gpucluster-prod-queue-kueue")
    jobs = [r for r in objects if r.type.endswith((":MPIJob", ":TrainJob"))]
    assert len(jobs) == 3
    for r in objects:
        if r.type.startswith("kubernetes:kueue.x-k8s.io/") or r in jobs:
            assert rec.depends_on(r, queue_release), r.name


def test_node_groups_go_before_the_cni_and_the_cluster(prod):
    eks = one(prod, "aws:eks/cluster:Cluster")
    cni = prod.named("gpucluster-prod-vpc-cni")
    for ng in prod.of_type(NODE_GROUP):
        # aws-node releases the pod ENIs of draining nodes while it still runs.
        assert prod.depends_on(ng, cni) and prod.depends_on(ng, eks), ng.name


def test_storage_is_off_the_node_groups_path_both_ways(prod):
    """FSx is created while EKS is, and its link does not wait for nodes: no pod mounts it once the
    jobs and the claim are gone, so the node groups and the file system go in parallel."""
    dra, fs = one(prod, DRA), one(prod, FSX)
    for ng in prod.of_type(NODE_GROUP):
        assert not prod.depends_on(dra, ng) and not prod.depends_on(ng, fs)


# -- delete hooks ----------------------------------------------------------------------------


def test_the_s3_link_exports_before_it_goes_and_is_replaced_delete_first(prod):
    dra = one(prod, DRA)
    assert dra.hooks == {"before_delete": [EXPORT_HOOK]}
    # An association at / must be the file system's only one.
    assert dra.delete_before_replace is True
    assert dra.inputs["deleteDataInFilesystem"] is False
    assert one(prod, FSX).hooks == {"before_delete": [FSX_TASKS_HOOK]}


def test_private_subnets_release_leaked_interfaces_first(prod):
    subnets = prod.of_type("aws:ec2/subnet:Subnet")
    private = [s for s in subnets if "-private-" in s.name]
    assert len(private) == 3
    for s in subnets:
        assert s.hooks == ({"before_delete": [ENI_HOOK]} if s in private else {}), s.name


def test_a_retained_bucket_has_no_guard_and_a_deletable_one_does(prod, dev):
    prod_bucket, dev_bucket = one(prod, "aws:s3/bucket:Bucket"), one(dev, "aws:s3/bucket:Bucket")
    assert (prod_bucket.retain_on_delete, prod_bucket.inputs["forceDestroy"], prod_bucket.hooks) == (True, False, {})
    assert (dev_bucket.retain_on_delete, dev_bucket.inputs["forceDestroy"]) == (False, True)
    assert dev_bucket.hooks == {"before_delete": [BUCKET_HOOK]}


def test_no_other_resource_has_hooks(prod):
    hooked = {r.type for r in prod.resources if r.hooks}
    # The pools' node groups: their bounds hook before an update (components.hooks.node_scaling).
    assert hooked == {DRA, FSX, "aws:ec2/subnet:Subnet", "aws:eks/cluster:Cluster",
                      "aws:ecr/pullThroughCacheRule:PullThroughCacheRule", "aws:eks/nodeGroup:NodeGroup"}


# -- the bucket a previous destroy kept ------------------------------------------------------

KEPT = {"gpucluster:storage": {"bucketName": "gpucluster-prod-data-1a2b3c4d",
                               "fsx": {"deploymentType": "PERSISTENT_2", "storageCapacityGiB": 2400}}}


@pytest.fixture(scope="module")
def adopted() -> mocks.Recording:
    return shared_recording("prod", KEPT)


def test_an_adopted_bucket_is_linked_and_neither_created_nor_deleted(adopted):
    # Nothing of the bucket but the teams' directory markers in it, which no destroy deletes either.
    # (Sorted: the two register in whichever order their bucket name resolves.)
    assert sorted((r.type, r.inputs["bucket"], r.inputs["key"], r.retain_on_delete) for r in adopted.resources
                  if r.type.startswith(("aws:s3/", "random:")) and not r.name.endswith("grafana-password")) == [
        ("aws:s3/bucketObjectv2:BucketObjectv2", "gpucluster-prod-data-1a2b3c4d", f"teams/{team}/", True)
        for team in ("language", "vision")]
    dra = one(adopted, DRA)
    assert dra.inputs["dataRepositoryPath"] == "s3://gpucluster-prod-data-1a2b3c4d/"
    assert adopted.stack_outputs["bucketName"] == "gpucluster-prod-data-1a2b3c4d"
    assert adopted.stack_outputs["bucketRetainedOnDestroy"] is True
    assert adopted.named("gpucluster-prod-storage").component_outputs["bucketAdopted"] is True


def test_a_missing_bucket_is_a_config_error_before_anything_registers(monkeypatch):
    monkeypatch.setattr(mocks.GpuClusterMocks, "__init__", _with_missing_bucket(mocks.GpuClusterMocks.__init__))
    with pytest.raises(Exception) as err:
        mocks.run_program(stack_raw("prod", KEPT), "prod")
    assert "gpucluster:storage.bucketName: got 'gpucluster-prod-data-1a2b3c4d'; no such bucket is readable" in str(
        err.value)
    assert "couldn't find resource" in str(err.value)
    assert err.value.recording.resources == []


def test_a_destroy_runs_even_when_the_adopted_bucket_or_a_capacity_block_is_gone(monkeypatch):
    """The program runs during a destroy only for its hooks: lookups that could fail do not stop it."""
    monkeypatch.setattr(mocks.GpuClusterMocks, "__init__", _with_missing_bucket(mocks.GpuClusterMocks.__init__))
    block = {"gpucluster:gpuPools": [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2,
                                      "capacityType": "CAPACITY_BLOCK",
                                      "capacityReservationId": "cr-0123456789abcdef0"}], "gpucluster:jobs": [],
             "gpucluster:teams": []}  # prod's teams are guaranteed 8 nodes: more than this pool's 2
    with pytest.raises(Exception, match=r"gpucluster:gpuPools\[name=h100\].capacityReservationId: got "
                                        r"'cr-0123456789abcdef0'; it cannot be read as a Capacity Block \(.*empty result"):
        mocks.run_program(stack_raw("prod", block), "prod")
    monkeypatch.setenv("GPUCLUSTER_DESTROYING", "1")
    rec = mocks.run_program(stack_raw("prod", {**KEPT, **block}), "prod")
    assert one(rec, DRA).inputs["dataRepositoryPath"] == "s3://gpucluster-prod-data-1a2b3c4d/"


def _with_missing_bucket(init):
    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.missing_buckets = {"gpucluster-prod-data-1a2b3c4d"}
        self.missing_reservations = {"cr-0123456789abcdef0"}
    return patched


def test_a_bucket_in_another_region_warns(monkeypatch):
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.bucket_regions = {"gpucluster-prod-data-1a2b3c4d": "eu-west-1"}

    original = mocks.GpuClusterMocks.__init__
    monkeypatch.setattr(mocks.GpuClusterMocks, "__init__", init)
    rec = mocks.run_program(stack_raw("prod", KEPT), "prod")
    assert any("gpucluster-prod-data-1a2b3c4d is in eu-west-1, not us-east-1" in m for _, m in rec.logs)


@pytest.mark.parametrize(("storage", "message"), [
    ({"bucketName": "Bad_Name"}, "storage.bucketName: got 'Bad_Name'; must be 3-63 lowercase letters"),
    ({"bucketName": "192.168.5.4"}, "must not be formatted as an IP address"),
    ({"bucketName": "xn--data"}, "must not start with 'xn--'"),
    ({"bucketName": "a..b"}, "must not contain two adjacent dots"),
    ({"bucketName": "kept-data", "retainOnDestroy": False},
     "storage.retainOnDestroy: got false; does not apply with storage.bucketName"),
    ({"exportTimeoutMinutes": 2}, "storage.exportTimeoutMinutes: got 2"),
])
def test_bad_bucket_settings_are_config_errors(storage, message):
    with pytest.raises(config.ConfigError) as err:
        stack_config("dev", {"gpucluster:storage": storage})
    assert message in err.value.render()


# -- pause -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "policy"), [("finish", "Hold"), ("drain", "HoldAndDrain")])
def test_pause_holds_every_cluster_queue_and_lets_the_pools_go_to_zero(mode, policy):
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 2, "maxNodes": 16},
             {"name": "a100", "instanceType": "p4d.24xlarge", "minNodes": 1, "maxNodes": 4}]
    rec = mocks.run_program(stack_raw("prod", {"gpucluster:paused": True, "gpucluster:pauseMode": mode,
                                               "gpucluster:gpuPools": pools}), "prod")
    queues = rec.of_type(CLUSTER_QUEUE)
    assert queues and {q.inputs["spec"]["stopPolicy"] for q in queues} == {policy}
    for queue in queues:
        validate_custom({k: queue.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")},
                        "kueue.x-k8s.io_clusterqueues.yaml")
    groups = gpu_node_groups(rec)
    assert len(groups) == 2
    assert all(ng.inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": ng.inputs["scalingConfig"]
               ["maxSize"]} for ng in groups.values())
    assert rec.stack_outputs["paused"] == {"paused": True, "stopPolicy": policy}


def test_running_stacks_admit_and_keep_their_floor(prod):
    queues = prod.of_type(CLUSTER_QUEUE)
    assert len(queues) == 3 and {q.inputs["spec"]["stopPolicy"] for q in queues} == {"None"}  # training's, 2 teams'
    cfg = stack_config("prod", {"gpucluster:gpuPools": [
        {"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 2, "maxNodes": 16}], "gpucluster:jobs": []})
    from components.core.kube import nodepool

    assert nodepool.scaling_config(cfg.gpu_pools[0]) == {"min_size": 2, "desired_size": 2, "max_size": 16}
    assert nodepool.scaling_config(cfg.gpu_pools[0], paused=True) == {"min_size": 0, "desired_size": 0,
                                                                      "max_size": 16}


def test_pause_keys_are_checked():
    with pytest.raises(config.ConfigError) as err:
        stack_config("dev", {"gpucluster:paused": "maybe", "gpucluster:pauseMode": "stop"})
    text = err.value.render()
    assert "gpucluster:paused: got 'maybe'; must be true or false" in text
    assert "gpucluster:pauseMode: got 'stop'; allowed: finish, drain" in text


def test_cost_while_paused_is_everything_but_gpu_nodes_and_reservations_still_bill(prod):
    cfg = stack_config("prod")
    estimate = prod.stack_outputs["estimatedCostPerHourUsd"]
    # prod's floor is 0 nodes: paused costs what the minimum does.
    assert estimate["paused"] == estimate["min"] == cost.paused_per_hour(cfg, zone_count=3)
    odcr = stack_config("prod", {"gpucluster:gpuPools": [
        {"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 4, "maxNodes": 8,
         "capacityReservationId": "cr-0123456789abcdef0"}], "gpucluster:jobs": []})
    running, paused = cost.estimate(odcr, zone_count=3), cost.paused_per_hour(odcr, zone_count=3)
    price = odcr.price("p5.48xlarge")
    # The ODCR (assumed maxNodes: 8) bills at the floor whether paused or not; only the 4 running nodes'
    # root volumes go with a pause.
    volumes = 4 * 200 * 1.073741824 * 0.08 / 730  # the default rootVolumeGiB
    assert round(running.min_per_hour - paused, 4) == round(volumes, 4)
    assert round(paused - cost.paused_per_hour(stack_config("prod"), zone_count=3), 2) == round(8 * price, 2)


# -- grace period ----------------------------------------------------------------------------


def test_workers_get_their_jobs_grace_period_and_torchrun_waits_for_it():
    cfg = stack_config("prod", {"gpucluster:jobs": [
        {"name": "quick", "pool": "h100", "nodes": 2, "launcher": "torchrun", "image": "repo/t:1",
         "command": ["python", "t.py"]},
        {"name": "slow", "pool": "h100", "nodes": 2, "launcher": "torchrun", "image": "repo/t:1",
         "command": ["python", "t.py"], "terminationGracePeriodSeconds": 600},
        {"name": "mpi", "pool": "h100", "nodes": 2, "launcher": "mpirun", "image": "repo/t:1",
         "command": ["python", "t.py"], "terminationGracePeriodSeconds": 300}]})
    pool = cfg.pool("h100")
    assert [j.termination_grace_period_seconds for j in cfg.jobs] == [None, 600, 300]
    default, slow = trainer.runtime(pool, 3, "fsx"), trainer.runtime(pool, 3, "fsx", grace_seconds=600)
    assert (default["metadata"]["name"], slow["metadata"]["name"]) == ("gpucluster-torch-h100-r3",
                                                                       "gpucluster-torch-h100-r3-g600")

    def pod(runtime):
        return runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]

    # Unset, the spec is what it was before the key existed: upgrading gpucluster replaces no running job.
    assert "terminationGracePeriodSeconds" not in pod(default)
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in {e["name"] for e in pod(default)["containers"][0]["env"]}
    assert pod(slow)["terminationGracePeriodSeconds"] == 600
    env = {e["name"]: e["value"] for e in pod(slow)["containers"][0]["env"]}
    assert env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] == "595"
    from components.core.kube import launcher

    jobs = {j.name: j for j in cfg.jobs}
    assert launcher.job_manifest(jobs["slow"], pool, launcher.JobContext("training", "fsx"))["spec"]["runtimeRef"][
        "name"] == "gpucluster-torch-h100-r3-g600"
    mpi = launcher.job_manifest(jobs["mpi"], pool, launcher.JobContext("training", "fsx"))["spec"]["mpiReplicaSpecs"]
    assert {role: spec["template"]["spec"]["terminationGracePeriodSeconds"] for role, spec in mpi.items()} == {
        "Launcher": 300, "Worker": 300}
    plain = launcher.job_manifest(jobs["mpi"].model_copy(update={"termination_grace_period_seconds": None}), pool,
                                  launcher.JobContext("training", "fsx"))["spec"]["mpiReplicaSpecs"]
    assert all("terminationGracePeriodSeconds" not in spec["template"]["spec"] for spec in plain.values())


@pytest.mark.parametrize("value", [-1, 3601, "soon"])
def test_grace_period_bounds(value):
    with pytest.raises(config.ConfigError, match=r"jobs\[0\]\.terminationGracePeriodSeconds"):
        stack_config("dev", {"gpucluster:jobs": [
            {"name": "smoke", "pool": "dev", "nodes": 1, "launcher": "torchrun", "image": "repo/t:1",
             "command": ["python", "t.py"], "terminationGracePeriodSeconds": value}]})


def test_the_plan_shows_the_pause_and_its_cost_per_hour(tmp_path, capsys):
    import json

    from bootstrap import stackfile
    from bootstrap.verbs import plan

    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 2, "maxNodes": 16, "rootVolumeGiB": 500}]
    text = (stackfile.PROJECT_DIR / "Pulumi.prod.yaml").read_text()
    text = stackfile.set_scalar(text, "gpucluster:paused", "true")
    text = stackfile.set_scalar(text, "gpucluster:gpuPools", json.dumps(pools))
    (tmp_path / "Pulumi.paused.yaml").write_text(text)
    assert plan.main(["--stack", "prod", "--stack-file", str(tmp_path / "Pulumi.paused.yaml"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["paused"] == {"paused": True, "pauseMode": "finish", "stopPolicy": "Hold"}
    cfg = stack_config("prod", {"gpucluster:paused": True, "gpucluster:gpuPools": pools})
    assert report["cost"]["pausedPerHour"] == cost.paused_per_hour(cfg, zone_count=3)
    # Paused, the 2-node floor is gone: the minimum is what a pause costs.
    assert report["cost"]["minPerHour"] == report["cost"]["pausedPerHour"]
    running = cost.estimate(cfg.model_copy(update={"paused": False}), zone_count=3).min_per_hour
    assert round(running - report["cost"]["pausedPerHour"], 2) == round(
        2 * cfg.price("p5.48xlarge") + 2 * 500 * 1.073741824 * 0.08 / 730, 2)  # the nodes and their root volumes
    assert plan.main(["--stack", "prod", "--stack-file", str(tmp_path / "Pulumi.paused.yaml")]) == 0
    text_out = capsys.readouterr().out
    assert "PAUSED (finish): the ClusterQueue has stopPolicy Hold" in text_out
    assert f"total while paused (every GPU pool at 0, reservations still billed): " \
           f"{report['cost']['pausedPerHour']:,.2f}" in text_out
