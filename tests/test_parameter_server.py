"""`launcher: ps`: CPU pools, the JobSet of chief, parameter servers and workers, TF_CONFIG, Kueue's flavors,
the config rules, and what `pulumi up` registers for them."""

from __future__ import annotations

import json
import re

import pytest

from bootstrap.offline import mocks
from components.core.kube import launcher, nodepool, parameter_server, queueing, workers
from components.core.system_nodes import system_pods
from tests import k8s
from tests.conftest import stack_config, stack_raw
from tests.test_config import problems

JOBSET_CRD = "jobset.x-k8s.io_jobsets.yaml"
IMAGE = "210987654321.dkr.ecr.us-east-1.amazonaws.com/tf-ps:2.19"
GPU_POOL = {"name": "a100", "instanceType": "p4d.24xlarge", "maxNodes": 4}
CPU_POOL = {"name": "ps", "instanceType": "m7i.4xlarge", "maxNodes": 2, "capacityType": "SPOT", "idleMinutes": 2}
PS_JOB = {"name": "tf-ps", "pool": "a100", "nodes": 2, "launcher": "ps", "psPool": "ps", "psReplicas": 2,
          "image": IMAGE, "command": ["python", "train.py"], "maxRestarts": 2, "maxCostUsd": 500,
          "env": {"TF_CPP_MIN_LOG_LEVEL": "1"}}
OVERRIDES = {"gpucluster:gpuPools": [GPU_POOL], "gpucluster:cpuPools": [CPU_POOL], "gpucluster:jobs": [PS_JOB],
             "gpucluster:systemNodes": {"instanceType": "m7i.xlarge", "count": 2}}
NAMESPACE = "training"


@pytest.fixture(scope="module")
def cfg():
    return stack_config("dev", OVERRIDES)


@pytest.fixture(scope="module")
def jobset(cfg):
    (job,) = cfg.jobs
    return launcher.job_manifest(job, cfg.pool("a100"), launcher.JobContext(
        NAMESPACE, "fsx", cfg.storage, cfg.prices, cfg.cpu_pools))


def replicated(jobset, role):
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == role)


def pod_spec(jobset, role):
    return replicated(jobset, role)["template"]["spec"]["template"]["spec"]


def env_of(jobset, role):
    return {e["name"]: e for e in pod_spec(jobset, role)["containers"][0]["env"]}


# -- the JobSet ---------------------------------------------------------------

def test_the_jobset_is_valid_against_jobset_v0_12_0(jobset):
    k8s.validate_custom(jobset, JOBSET_CRD)
    assert (jobset["apiVersion"], jobset["kind"]) == ("jobset.x-k8s.io/v1alpha2", "JobSet")
    assert launcher.KINDS["ps"] == ("jobset.x-k8s.io/v1alpha2", "JobSet")


def test_one_chief_psreplicas_parameter_servers_and_nodes_workers(jobset):
    counts = {r["name"]: (r["replicas"], r["template"]["spec"]["parallelism"], r["template"]["spec"]["completions"],
                          r["template"]["spec"]["completionMode"]) for r in jobset["spec"]["replicatedJobs"]}
    assert counts == {"chief": (1, 1, 1, "Indexed"), "ps": (1, 2, 2, "Indexed"), "worker": (1, 2, 2, "Indexed")}
    # Parameter servers and workers together (their nodes scale up in parallel); the chief once all of them listen.
    assert [(r["name"], r.get("dependsOn")) for r in jobset["spec"]["replicatedJobs"]] == [
        ("ps", None), ("worker", None),
        ("chief", [{"name": "ps", "status": "Ready"}, {"name": "worker", "status": "Ready"}])]
    for role in ("ps", "worker"):
        assert pod_spec(jobset, role)["containers"][0]["readinessProbe"] == {"tcpSocket": {"port": 12345},
                                                                             "periodSeconds": 5}
    # Succeeds when the chief does (ps and workers serve forever); any failure restarts the gang.
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["chief"]}
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 2, "restartStrategy": "Recreate"}
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}


def test_tf_config_names_every_task_by_its_jobset_dns_name_and_its_own_index(jobset):
    # JobSet v0.12.0 names pods <jobset>-<replicatedJob>-<jobIndex>-<podIndex>, resolvable under the subdomain
    # that defaults to the JobSet's name (api/jobset/v1alpha2 Network.Subdomain; pkg/controllers genSubdomain).
    expected_cluster = {
        "chief": ["tf-ps-chief-0-0.tf-ps.training.svc:12345"],
        "ps": [f"tf-ps-ps-0-{i}.tf-ps.training.svc:12345" for i in range(2)],
        "worker": [f"tf-ps-worker-0-{i}.tf-ps.training.svc:12345" for i in range(2)],
    }
    for role in ("chief", "ps", "worker"):
        env = env_of(jobset, role)
        # Kubernetes expands $(VAR) from an env var defined earlier in the list: the pod's completion index.
        names = list(env)
        assert names.index(parameter_server.TASK_INDEX_ENV) < names.index("TF_CONFIG")
        assert env[parameter_server.TASK_INDEX_ENV]["valueFrom"] == {"fieldRef": {
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
        expanded = env["TF_CONFIG"]["value"].replace(f"$({parameter_server.TASK_INDEX_ENV})", "1")
        tf_config = json.loads(expanded)
        assert tf_config == {"cluster": expected_cluster, "task": {"type": role, "index": 1}}
        assert env["GRPC_FAIL_FAST"]["value"] == "use_caller"
        assert env["TF_CPP_MIN_LOG_LEVEL"]["value"] == "1"
        ports = pod_spec(jobset, role)["containers"][0]["ports"]
        assert ports == [{"name": "grpc", "containerPort": 12345}]
    # The names the pods get are the names TF_CONFIG holds.
    for role, addresses in expected_cluster.items():
        for index, address in enumerate(addresses):
            assert address.startswith(f"{jobset['metadata']['name']}-{role}-0-{index}.{jobset['metadata']['name']}.")


def test_each_role_runs_where_it_belongs(jobset, cfg):
    chief, ps, worker = (pod_spec(jobset, role) for role in ("chief", "ps", "worker"))
    assert chief["nodeSelector"] == {"gpucluster.io/role": "system"}
    assert "tolerations" not in chief
    assert chief["containers"][0]["resources"] == parameter_server.CHIEF_RESOURCES
    # A whole m7i.4xlarge (16 vCPUs, 64 GiB) less the node's share, on the CPU pool, tolerating its taint.
    assert ps["nodeSelector"] == {"gpucluster.io/pool": "ps", "gpucluster.io/role": "cpu-pool"}
    assert ps["tolerations"] == [{"key": "gpucluster.io/cpu-pool", "operator": "Exists", "effect": "NoSchedule"}]
    assert ps["containers"][0]["resources"] == {"requests": {"cpu": "12800m", "memory": "51Gi"},
                                               "limits": {"memory": "51Gi"}}
    # Workers: whole p4d nodes with every GPU and EFA device, like every other launcher's.
    assert worker["nodeSelector"] == {"gpucluster.io/pool": "a100"}
    requests = worker["containers"][0]["resources"]["requests"]
    assert (requests["nvidia.com/gpu"], requests["vpc.amazonaws.com/efa"]) == ("8", "4")
    for spec in (chief, ps, worker):
        assert spec["restartPolicy"] == "Never"
        claims = [v for v in spec["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [{"name": workers.DATA_VOLUME, "persistentVolumeClaim": {"claimName": "fsx"}}]


def test_the_jobset_is_queued_with_its_run_deadline(jobset, cfg):
    labels = jobset["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == queueing.LOCAL_QUEUE
    assert labels["kueue.x-k8s.io/priority-class"] == queueing.TRAINING_PRIORITY
    deadline = int(labels[queueing.MAX_EXEC_TIME_LABEL])
    # maxCostUsd 500 over two p4d.24xlarge and two m7i.4xlarge: the parameter servers bill too.
    per_hour = 2 * cfg.price("p4d.24xlarge") + 2 * cfg.price("m7i.4xlarge")
    assert deadline == int(500 / per_hour * 3600)
    for role in ("chief", "ps", "worker"):
        assert replicated(jobset, role)["template"]["spec"]["activeDeadlineSeconds"] == deadline


def test_scripts_reach_every_role():
    job = {**PS_JOB, "scripts": ["examples/train_synthetic.py"],
           "command": ["python", "/opt/gpucluster/scripts/train_synthetic.py"]}
    cfg = stack_config("dev", {**OVERRIDES, "gpucluster:jobs": [job]})
    (job,) = cfg.jobs
    manifest = launcher.job_manifest(job, cfg.pool("a100"), launcher.JobContext(NAMESPACE, None, None, None,
                                                                                cfg.cpu_pools))
    k8s.validate_custom(manifest, JOBSET_CRD)
    for role in ("chief", "ps", "worker"):
        spec = pod_spec(manifest, role)
        assert workers.scripts_volume("tf-ps") in spec["volumes"]
        assert dict(workers.SCRIPTS_MOUNT) in spec["containers"][0]["volumeMounts"]


# -- Kueue: every pod set gets exactly its own flavor ---------------------------

def _requests(spec):
    return spec["containers"][0]["resources"]["requests"]


def _candidate_flavors(spec, flavors, queue):
    """Kueue 0.19.2's flavor assigner in brief: a flavor is a candidate for a pod set when no node-selector key
    the flavor labels conflicts, the pod set tolerates every nodeTaint, and every requested resource has quota."""
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
             for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    tolerated = {t["key"] for t in spec.get("tolerations", [])}
    out = []
    for flavor in flavors:
        name, fspec = flavor["metadata"]["name"], flavor["spec"]
        selector = spec.get("nodeSelector", {})
        if any(k in selector and selector[k] != v for k, v in fspec.get("nodeLabels", {}).items()):
            continue
        if any(t["key"] not in tolerated for t in fspec.get("nodeTaints", [])):
            continue
        if any(re.fullmatch(r"0\D*", quota[name].get(r, "0")) for r in _requests(spec)):
            continue
        out.append(name)
    return out


def test_kueue_can_give_each_pod_set_only_its_own_flavor(cfg, jobset):
    pools = cfg.all_pools
    flavors = queueing.resource_flavors(pools)
    queue = queueing.cluster_queue(pools, cfg.system_nodes, NAMESPACE)
    for flavor in flavors:
        k8s.validate_custom(flavor, "kueue.x-k8s.io_resourceflavors.yaml")
    k8s.validate_custom(queue, "kueue.x-k8s.io_clusterqueues.yaml")
    assert [f["metadata"]["name"] for f in flavors] == ["system", "pool-a100", "pool-ps"]
    assert {role: _candidate_flavors(pod_spec(jobset, role), flavors, queue) for role in ("chief", "ps", "worker")} \
        == {"chief": ["system"], "ps": ["pool-ps"], "worker": ["pool-a100"]}
    # An MPIJob launcher still gets the system flavor only, never the CPU pool's.
    launcher_pod = {"nodeSelector": dict(nodepool.SYSTEM_NODE_LABEL),
                    "containers": [{"resources": launcher.LAUNCHER_RESOURCES}]}
    assert _candidate_flavors(launcher_pod, flavors, queue) == ["system"]


def test_the_cpu_pool_flavor_and_quota(cfg):
    flavors = {f["metadata"]["name"]: f for f in queueing.resource_flavors(cfg.all_pools)}
    assert flavors["pool-ps"]["spec"] == {
        "nodeLabels": {"gpucluster.io/pool": "ps", "gpucluster.io/role": "cpu-pool"},
        "nodeTaints": [{"key": "gpucluster.io/cpu-pool", "value": "true", "effect": "NoSchedule"}]}
    queue = queueing.cluster_queue(cfg.all_pools, cfg.system_nodes, NAMESPACE)
    quota = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
             for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    # Two parameter servers' worth: maxNodes 2 x a whole node's share.
    assert quota["pool-ps"] == {"cpu": "25600m", "memory": "102Gi", "nvidia.com/gpu": "0",
                                "vpc.amazonaws.com/efa": "0", "hugepages-2Mi": "0"}


def test_the_gpu_plugins_never_land_on_cpu_pool_nodes():
    from components.core.observability import prometheus_stack
    from components.kubernetes import device_plugins

    for values in (device_plugins.nvidia_values(), prometheus_stack.dcgm_values()):
        tolerated = {t["key"] for t in values["tolerations"]}
        assert nodepool.CPU_POOL_TAINT.key not in tolerated


def test_system_nodes_count_each_chief(cfg):
    pods = {p.name: p for p in system_pods(cfg)}
    chiefs = pods["parameter-server chiefs"]
    assert chiefs.replicas == 1
    assert (chiefs.cpu_m, chiefs.memory_mi) == (500, 2048)


# -- config ----------------------------------------------------------------------

def test_bad_parameter_server_config_is_reported_all_at_once():
    jobs = [
        {**PS_JOB, "name": "no-pool"},
        {**PS_JOB, "name": "unknown-pool", "psPool": "nope"},
        {**PS_JOB, "name": "too-many", "psReplicas": 3},
        {**PS_JOB, "name": "bad-port", "psPort": 2222},
        {**{k: v for k, v in PS_JOB.items() if k not in ("psPool", "psReplicas")}, "name": "torch",
         "launcher": "torchrun", "framework": "horovod", "psReplicas": 2},
    ]
    jobs[0] = {k: v for k, v in jobs[0].items() if k != "psPool"}
    cpu_pools = [CPU_POOL, {"name": "a100", "instanceType": "m7i.8xlarge", "maxNodes": 1},
                 {"name": "gpu-type", "instanceType": "p5.48xlarge", "maxNodes": 1}]
    assert problems({**OVERRIDES, "gpucluster:cpuPools": cpu_pools, "gpucluster:jobs": jobs}) == [
        "gpucluster:cpuPools[2].instanceType: got 'p5.48xlarge'; allowed CPU types: m7i (large, xlarge, 2xlarge, "
        "4xlarge, 8xlarge, 16xlarge), r7i (2xlarge, 4xlarge, 8xlarge, 16xlarge), c7i (2xlarge, 4xlarge, 8xlarge, "
        "12xlarge, 16xlarge, 24xlarge), c6i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), m6i (2xlarge, "
        "4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), r6i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, "
        "24xlarge), m7a (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), c7a (2xlarge, 4xlarge, 8xlarge, "
        "12xlarge, 16xlarge, 24xlarge)",
        "gpucluster:jobs[0].psPool: is required with launcher ps: the cpuPools entry the parameter servers run on",
        "gpucluster:jobs[3].psPort: got 2222; must be an integer from 12345 to 12355",
        "gpucluster:jobs[4].framework: applies to launcher mpirun (Horovod and TensorFlow run under mpirun)",
        "gpucluster:jobs[4].psReplicas: applies to launcher ps only (a torchrun job has no parameter servers)",
        "gpucluster:cpuPools[1].name: duplicate pool name 'a100' (first at gpucluster:gpuPools[0].name)",
        "gpucluster:jobs[1].psPool: got 'nope'; no such CPU pool; cpuPools: ps, a100",
        "gpucluster:jobs[2].psReplicas: got 3; one per node, and CPU pool 'ps' has maxNodes 2",
    ]


# -- what `pulumi up` registers ------------------------------------------------------

@pytest.fixture(scope="module")
def recording():
    return mocks.run_program(stack_raw("dev", OVERRIDES), "dev")


def test_the_cpu_pool_is_a_spot_node_group_of_the_standard_ami_in_the_gpu_zone(recording):
    (component,) = [r for r in recording.resources if r.type == "gpucluster:index:CpuNodePool"]
    assert component.name == "gpucluster-dev-ps"
    group = recording.named("gpucluster-dev-ps-node-group")
    gpu_group = recording.named("gpucluster-dev-a100-node-group")
    inputs = group.inputs
    assert inputs["amiType"] == "AL2023_x86_64_STANDARD"
    assert inputs["releaseVersion"] == gpu_group.inputs["releaseVersion"]
    assert (inputs["capacityType"], inputs["instanceTypes"]) == ("SPOT", ["m7i.4xlarge"])
    assert inputs["subnetIds"] == gpu_group.inputs["subnetIds"]
    assert inputs["scalingConfig"] == {"minSize": 0, "desiredSize": 0, "maxSize": 2}
    assert inputs["labels"] == {"gpucluster.io/pool": "ps", "gpucluster.io/instance-type": "m7i.4xlarge",
                                "gpucluster.io/role": "cpu-pool"}
    assert inputs["taints"] == [{"key": "gpucluster.io/cpu-pool", "value": "true", "effect": "NO_SCHEDULE"}]
    template = recording.named("gpucluster-dev-ps-launch-template")
    assert template.inputs["metadataOptions"]["httpTokens"] == "required"
    assert template.inputs["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
    assert "userData" not in template.inputs and "networkInterfaces" not in template.inputs
    assert len(template.inputs["vpcSecurityGroupIds"]) == 2
    assert group.parent == component.urn


def test_the_autoscaler_can_scale_the_cpu_pool_from_zero(recording):
    tags = {r.inputs["tag"]["key"]: r.inputs["tag"]["value"]
            for r in recording.of_type("aws:autoscaling/tag:Tag") if r.name.startswith("gpucluster-dev-ps-asg-tag-")}
    prefix = nodepool.NODE_TEMPLATE_PREFIX
    assert tags == {
        f"{prefix}/label/gpucluster.io/pool": "ps",
        f"{prefix}/label/gpucluster.io/instance-type": "m7i.4xlarge",
        f"{prefix}/label/gpucluster.io/role": "cpu-pool",
        f"{prefix}/taint/gpucluster.io/cpu-pool": "true:NoSchedule",
        nodepool.IDLE_OPTION_TAG: "2m0s",
    }


def test_the_job_waits_for_both_pools_and_is_registered_as_a_jobset(recording):
    (job,) = [r for r in recording.resources if r.type == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"]
    assert job.name == "gpucluster-dev-tf-ps-jobset"
    for pool in ("gpucluster-dev-a100-node-group", "gpucluster-dev-ps-node-group"):
        assert recording.depends_on(job, recording.named(pool))
    k8s.validate_custom({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", **job.inputs}, JOBSET_CRD)
    assert recording.stack_outputs["cpuNodeGroups"].keys() == {"ps"}


def test_a_job_on_a_spot_pool_must_checkpoint_within_the_two_minute_notice():
    spot_gpu = {**GPU_POOL, "capacityType": "SPOT", "extraInstanceTypes": ["p4de.24xlarge"]}
    jobs = [{**PS_JOB, "terminationGracePeriodSeconds": 120},  # its parameter servers are on Spot
            {**PS_JOB, "name": "fits", "terminationGracePeriodSeconds": 90}]
    assert problems({**OVERRIDES, "gpucluster:jobs": jobs}) == [
        "gpucluster:jobs[0].terminationGracePeriodSeconds: got 120; pool 'ps' is SPOT, and EC2 gives a Spot node two "
        "minutes' notice, of which the drain takes a part: at most 90 (checkpoint more often instead)"]
    on_demand_ps = {**CPU_POOL, "capacityType": "ON_DEMAND"}
    assert problems({**OVERRIDES, "gpucluster:gpuPools": [spot_gpu], "gpucluster:cpuPools": [on_demand_ps],
                     "gpucluster:jobs": jobs}) == [
        "gpucluster:jobs[0].terminationGracePeriodSeconds: got 120; pool 'a100' is SPOT, and EC2 gives a Spot node "
        "two minutes' notice, of which the drain takes a part: at most 90 (checkpoint more often instead)"]


def test_a_spot_pool_may_launch_same_layout_types_and_nothing_else():
    bad = [{**GPU_POOL, "capacityType": "SPOT", "extraInstanceTypes": ["p5.48xlarge", "p4d.24xlarge"]},
           {**GPU_POOL, "name": "od", "extraInstanceTypes": ["p4de.24xlarge"]}]
    assert problems({**OVERRIDES, "gpucluster:gpuPools": bad}) == [
        "gpucluster:gpuPools[0].extraInstanceTypes[0]: got 'p5.48xlarge'; it differs from p4d.24xlarge in EFA "
        "interfaces, EFA network cards: a job sized for one would not fit the other (a pool never mixes layouts)",
        "gpucluster:gpuPools[0].extraInstanceTypes[1]: got 'p4d.24xlarge'; a repeat (of instanceType or an earlier "
        "entry)",
        "gpucluster:gpuPools[1].extraInstanceTypes: applies to capacityType SPOT only (got ON_DEMAND): an on-demand "
        "or reserved pool runs one type",
    ]
    cfg = stack_config("dev", {**OVERRIDES, "gpucluster:gpuPools": [
        {**GPU_POOL, "capacityType": "SPOT", "extraInstanceTypes": ["p4de.24xlarge"]}]})
    assert cfg.pool("a100").instance_types == ("p4d.24xlarge", "p4de.24xlarge")


# -- sizing the parameter servers ------------------------------------------------------

def test_ps_memory_and_traffic_follow_the_variables_and_adam_slots():
    from components.core.planning import ps_sizing

    s = ps_sizing.size_ps(1e9, ps_replicas=4, workers=8, ps_instance_type="m7i.8xlarge")
    # 1e9 fp32 variables with two Adam slots: 12 GB over 4 parameter servers.
    assert s.memory_gib_per_ps == round(12e9 / 4 / 2**30, 2) == 2.79
    assert s.fits
    # Each of 8 workers reads 4 bytes and sends 4 bytes per parameter: 64 GB a step, a quarter per PS.
    assert s.bytes_per_ps_per_step == 16e9
    assert s.network_seconds_per_step == round(16e9 * 8 / 12.5e9, 3) == 10.24
    huge = ps_sizing.size_ps(100e9, ps_replicas=2, workers=2, ps_instance_type="m7i.4xlarge")
    assert not huge.fits and huge.memory_gib_per_ps > 64


def test_size_cli_reports_the_parameter_servers(capsys):
    from bootstrap.verbs import size as size_cli

    assert size_cli.main(["--params", "1B", "--instance-type", "p4d.24xlarge", "--nodes", "8", "--ps-replicas", "4",
                          "--ps-instance-type", "m7i.8xlarge", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["parameterServers"]["memory_gib_per_ps"] == 2.79
    assert out["parameterServers"]["workers"] == 8
    assert size_cli.main(["--params", "1B", "--gpus", "8", "--ps-replicas", "0", "--ps-instance-type", "p5.48xlarge"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "size: error: --ps-replicas: got 0; must be at least 1",
        "size: error: --ps-instance-type: got 'p5.48xlarge'; allowed: m7i (large, xlarge, 2xlarge, 4xlarge, 8xlarge, "
        "16xlarge), r7i (2xlarge, 4xlarge, 8xlarge, 16xlarge), c7i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, "
        "24xlarge), c6i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), m6i (2xlarge, 4xlarge, 8xlarge, "
        "12xlarge, 16xlarge, 24xlarge), r6i (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), m7a (2xlarge, "
        "4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge), c7a (2xlarge, 4xlarge, 8xlarge, 12xlarge, 16xlarge, 24xlarge)",
        "size: error: --ps-replicas needs the workers: --instance-type with --nodes (one worker per node)",
    ]


def test_the_plan_shows_each_ps_jobs_parameter_servers():
    from bootstrap.offline import plan_report

    model_job = {**PS_JOB, "model": {"params": "1B"}}
    cfg = stack_config("dev", {**OVERRIDES, "gpucluster:jobs": [model_job]})
    (row,) = plan_report.job_rows(cfg)
    assert row["parameterServers"] == {"pool": "ps", "replicas": 2}
    assert row["psSizing"]["memory_gib_per_ps"] == round(12e9 / 2 / 2**30, 2)
    assert row["psSizing"]["bytes_per_ps_per_step"] == 2 * 8e9 / 2


def test_every_role_carries_the_job_label_the_training_network_policy_allows(jobset):
    from components.core.kube import network_policy

    job_pods = next(p for p in network_policy.training_policies(NAMESPACE, "monitoring")
                    if p["metadata"]["name"] == network_policy.JOB_PODS)
    selector = job_pods["spec"]["podSelector"]
    for role in ("chief", "ps", "worker"):
        labels = replicated(jobset, role)["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels[workers.JOB_LABEL] == "tf-ps"
        for expr in selector.get("matchExpressions", []):
            assert expr["key"] in labels and expr["operator"] == "Exists"
        for key, value in selector.get("matchLabels", {}).items():
            assert labels.get(key) == value


def test_small_system_disks_are_warned_about_when_they_pull_job_images(recording):
    from components.core import system_nodes

    warnings = [msg for level, msg in recording.logs if level in ("warning", "warn")]
    assert ("systemNodes.diskSizeGiB is 50: the launchers and chiefs of mpirun and ps jobs pull 1 job image onto "
            "the system nodes") in " ".join(warnings)
    assert system_nodes.image_disk_warning(stack_config("dev", {**OVERRIDES, "gpucluster:systemNodes": {
        "instanceType": "m7i.xlarge", "count": 2, "diskSizeGiB": 100}})) is None
    assert system_nodes.image_disk_warning(stack_config("dev")) is None  # torchrun only: nothing on the system nodes


def test_a_spot_cpu_pool_may_add_types_at_least_as_large():
    spot = {**CPU_POOL, "extraInstanceTypes": ["r7i.4xlarge", "m7i.2xlarge", "m7i.4xlarge"]}
    assert problems({**OVERRIDES, "gpucluster:cpuPools": [spot]}) == [
        "gpucluster:cpuPools[0].extraInstanceTypes[1]: got 'm7i.2xlarge'; it has fewer vCPUs or less memory than "
        "m7i.4xlarge: a parameter server sized for one would not fit",
        "gpucluster:cpuPools[0].extraInstanceTypes[2]: got 'm7i.4xlarge'; a repeat (of instanceType or an earlier "
        "entry)",
    ]
    assert problems({**OVERRIDES, "gpucluster:cpuPools": [{**CPU_POOL, "capacityType": "ON_DEMAND",
                                                           "extraInstanceTypes": ["r7i.4xlarge"]}]}) == [
        "gpucluster:cpuPools[0].extraInstanceTypes: applies to capacityType SPOT only (got ON_DEMAND): an on-demand "
        "pool runs one type"]
    cfg = stack_config("dev", {**OVERRIDES, "gpucluster:cpuPools": [{**CPU_POOL, "extraInstanceTypes": ["r7i.4xlarge"]}]})
    assert cfg.cpu_pool("ps").instance_types == ("m7i.4xlarge", "r7i.4xlarge")
    rec = mocks.run_program(stack_raw("dev", {**OVERRIDES, "gpucluster:cpuPools": [
        {**CPU_POOL, "extraInstanceTypes": ["r7i.4xlarge"]}]}), "dev")
    assert rec.named("gpucluster-dev-ps-node-group").inputs["instanceTypes"] == ["m7i.4xlarge", "r7i.4xlarge"]
