"""The pre-step check as rendered (components/core/placement/prestep.py): which jobs start with it, their exact
commands, env and code volume, the code's ConfigMap in each training namespace, and every other job unchanged."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from bootstrap.jobs import render
from components.core.goodput import precheck
from components.core.kube import launcher, trainer
from components.core.placement import prestep
from tests import k8s
from tests.conftest import prod_started, recording, stack_config

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "210987654321.dkr.ecr.us-east-1.amazonaws.com/train:1.0"
NAMESPACE = "training"
POOLS = [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4},
         {"name": "h100-unchecked", "instanceType": "p5.48xlarge", "maxNodes": 4, "preStepCheck": False},
         {"name": "h100-no-efa", "instanceType": "p5.48xlarge", "maxNodes": 4, "efa": "disabled"},
         {"name": "l40s", "instanceType": "g6e.xlarge", "maxNodes": 4}]
CPU_POOLS = [{"name": "ps", "instanceType": "m7i.4xlarge", "maxNodes": 2}]


def _job(name: str, pool: str, nodes: int, launcher_name: str, **extra) -> dict:
    return {"name": name, "pool": pool, "nodes": nodes, "launcher": launcher_name, "image": IMAGE,
            "command": ["python", "train.py", "--steps=10"], **extra}


JOBS = [_job("mpi", "h100", 2, "mpirun"), _job("torch", "h100", 2, "torchrun"),
        _job("one-mpi", "h100", 1, "mpirun"), _job("one-torch", "h100", 1, "torchrun"),
        _job("off-mpi", "h100-unchecked", 2, "mpirun"), _job("off-torch", "h100-unchecked", 2, "torchrun"),
        _job("no-efa-torch", "h100-no-efa", 2, "torchrun"), _job("l40s-mpi", "l40s", 2, "mpirun"),
        _job("l40s-torch", "l40s", 2, "torchrun"), _job("ps-job", "h100", 2, "ps", psPool="ps", psReplicas=2)]


def _cfg(pools=None):
    return stack_config("dev", {"gpucluster:gpuPools": pools or POOLS, "gpucluster:cpuPools": CPU_POOLS,
                                "gpucluster:jobs": JOBS,
                                "gpucluster:systemNodes": {"instanceType": "m7i.xlarge", "count": 2}})


CFG = _cfg()


def manifest(name: str, cfg=CFG) -> dict:
    job = next(j for j in cfg.jobs if j.name == name)
    return launcher.job_manifest(job, cfg.pool(job.pool), launcher.JobContext(
        NAMESPACE, "fsx", cfg.storage, cfg.prices, cfg.cpu_pools))


# The wrapper, word for word: the check in the background so PID 1's trap ends the pod at once on SIGTERM,
# its failure (86) ends the container with that code, its own fault (any other code) lets the job run, then
# `exec` of the job's argv as it was.
SCRIPT = """trap 'exit 143' TERM INT
if command -v python3 >/dev/null 2>&1; then
  PYTHONPATH=/opt/gpucluster/goodput${{PYTHONPATH:+:$PYTHONPATH}} GPUCLUSTER_PRE_STEP_POOL=h100 python3 -m gpucluster_goodput.precheck {args} &
  wait $!
  code=$?
  case $code in
    0) ;;
    86|143) exit $code ;;
    *) echo "gpucluster pre-step check: ended with $code (its own fault): the job runs anyway" >&2 ;;
  esac
else
  echo "gpucluster pre-step check: skipped: no python3 in the image" >&2
fi
exec "$@"
"""
CODE_VOLUME = {"name": "gpucluster-goodput-code",
               "configMap": {"name": "gpucluster-goodput-code", "defaultMode": 0o444, "optional": True}}
CODE_MOUNT = {"name": "gpucluster-goodput-code", "mountPath": "/opt/gpucluster/goodput/gpucluster_goodput",
              "readOnly": True}
NODE_NAME = {"name": "GPUCLUSTER_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def test_which_jobs_start_with_the_check():
    checked = {j.name for j in CFG.jobs if prestep.applies(j, CFG.pool(j.pool))}
    assert checked == {"mpi", "torch"}
    assert [p.name for p in CFG.gpu_pools if p.checks_before_start] == ["h100"]
    assert prestep.needed(CFG.all_pools) and not prestep.needed(stack_config("dev").all_pools)


def test_p5_env_is_its_32_efa_devices_and_nccl_reports_487_gbps():
    # p5.48xlarge: 32 EFA interfaces (EC2 User Guide, efa-acc-inst-types; the catalog), 487 GB/s from 2 nodes at
    # 16 GiB (awsome-distributed-training nccl-tests README; hardware/nccl.py).
    assert prestep.env(CFG.pool("h100")) == {"GPUCLUSTER_PRE_STEP_EFA_DEVICES": "32",
                                             "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS": "487"}
    a100 = stack_config("dev", {"gpucluster:gpuPools": [{"name": "a", "instanceType": "p4d.24xlarge", "maxNodes": 2}],
                                "gpucluster:jobs": []}).pool("a")
    assert prestep.env(a100) == {"GPUCLUSTER_PRE_STEP_EFA_DEVICES": "4", "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS": "78"}
    with pytest.raises(ValueError, match="l40s: g6e.xlarge has no EFA"):
        prestep.env(CFG.pool("l40s"))


def test_the_torchrun_command_exactly():
    m = manifest("torch")
    assert m["spec"]["trainer"]["command"] == [
        "/bin/sh", "-c", SCRIPT.format(args="torchrun"), "gpucluster-pre-step",
        "torchrun", "--no-python", "python", "train.py", "--steps=10"]
    env = m["spec"]["trainer"]["env"]
    assert env[-3:] == [{"name": "GPUCLUSTER_PRE_STEP_EFA_DEVICES", "value": "32"},
                        {"name": "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS", "value": "487"}, NODE_NAME]
    # PYTHONPATH only for the check: the job's own command keeps the image's.
    assert "PYTHONPATH" not in {e["name"] for e in env}
    (patch,) = m["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"] == {"volumes": [CODE_VOLUME], "containers": [{"name": "node", "volumeMounts": [CODE_MOUNT]}]}
    # The pool's runtime is every job's, single-node ones too: the check is in the TrainJob alone.
    runtime = json.dumps(trainer.runtime(CFG.pool("h100"), 3, "fsx"))
    assert "gpucluster_goodput" not in runtime and "GPUCLUSTER_PRE_STEP" not in runtime


def test_the_mpirun_command_exactly():
    m = manifest("mpi")
    (launcher_container,) = m["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    command = launcher_container["command"]
    assert command[3] == "gpucluster-first-contact"  # every host answers ssh first, then the check, then the job
    flags = ["--allow-run-as-root", "--tag-output", "-np", "16", "-N", "8", "--bind-to", "none",
             "-x", "PATH", "-x", "LD_LIBRARY_PATH",
             "-x", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "-x", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
             "-x", "AWS_REGION", "-x", "AWS_DEFAULT_REGION"]
    env = ["FI_PROVIDER=efa", "FI_EFA_FORK_SAFE=1", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=^lo,docker",
           "GPUCLUSTER_JOB=mpi", "GPUCLUSTER_DATASET_DIR=/fsx/datasets", "GPUCLUSTER_CHECKPOINT_DIR=/fsx/checkpoints",
           "GPUCLUSTER_TENSORBOARD_DIR=/fsx/tensorboard/mpi"]
    check_env = ["MASTER_ADDR=mpi-worker-0.mpi.training.svc", "MASTER_PORT=29501", *env,
                 "PYTHONPATH=/opt/gpucluster/goodput", "GPUCLUSTER_PRE_STEP_EFA_DEVICES=32",
                 "GPUCLUSTER_PRE_STEP_EXPECTED_GBPS=487"]
    job_env = ["MASTER_ADDR=mpi-worker-0.mpi.training.svc", "MASTER_PORT=29500", *env]
    mpirun = "/opt/amazon/openmpi/bin/mpirun"
    check = [mpirun, *flags, *[w for kv in check_env for w in ("-x", kv)],
             "python3", "-m", "gpucluster_goodput.precheck", "rank"]
    assert command[4:] == [
        "/bin/sh", "-c", SCRIPT.format(args="mpirun " + shlex.join(check)), "gpucluster-pre-step",
        mpirun, *flags, *[w for kv in job_env for w in ("-x", kv)], "python", "train.py", "--steps=10"]
    assert "'NCCL_SOCKET_IFNAME=^lo,docker'" in command[6]  # quoted for the shell
    # The launcher runs the check's driver, the workers its ranks: both mount the code; the workers name their
    # node (the ranks read it from the worker's PID 1 environment: ssh starts them with a fresh one).
    for role in ("Launcher", "Worker"):
        pod = m["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        assert pod["volumes"][-1] == CODE_VOLUME and pod["containers"][0]["volumeMounts"][-1] == CODE_MOUNT
    (worker,) = m["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert worker["env"] == [NODE_NAME]
    assert "env" not in launcher_container


def test_a_secret_env_value_goes_by_name_to_the_check_too():
    job = next(j for j in CFG.jobs if j.name == "mpi").model_copy(update={"env": {"WANDB_API_KEY": "s3cret"}})
    m = launcher.job_manifest(job, CFG.pool("h100"), launcher.JobContext(NAMESPACE, "fsx", CFG.storage),
                              frozenset({"WANDB_API_KEY"}))
    command = m["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
    assert "s3cret" not in json.dumps(m)
    assert "-x WANDB_API_KEY " in command[6]


def test_a_job_with_scripts_mounts_both():
    job = next(j for j in CFG.jobs if j.name == "torch").model_copy(update={"scripts": ("examples/train_synthetic.py",)})
    m = launcher.job_manifest(job, CFG.pool("h100"), launcher.JobContext(NAMESPACE, "fsx", CFG.storage))
    pod = m["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["scripts", "gpucluster-goodput-code"]
    assert [m["name"] for m in pod["containers"][0]["volumeMounts"]] == ["scripts", "gpucluster-goodput-code"]


@pytest.mark.parametrize("name", ["mpi", "torch"])
def test_checked_jobs_are_valid_against_the_upstream_crds(name):
    m = manifest(name)
    k8s.validate_custom(m, {"MPIJob": "kubeflow.org_mpijobs.yaml",
                            "TrainJob": "trainer.kubeflow.org_trainjobs.yaml"}[m["kind"]])


@pytest.mark.parametrize("name", ["one-mpi", "one-torch", "off-mpi", "off-torch", "no-efa-torch", "l40s-mpi",
                                  "l40s-torch", "ps-job"])
def test_every_other_job_renders_as_with_the_check_off(name):
    # Single-node, ps, a pool with preStepCheck false, without EFA, or of a type without EFA: no trace of the check,
    # and the same bytes as with the check off everywhere (recorded before the check existed: identical too).
    off = _cfg([{**p, "preStepCheck": False} for p in POOLS])
    text = json.dumps(manifest(name), sort_keys=True)
    assert text == json.dumps(manifest(name, off), sort_keys=True)
    for trace in ("gpucluster-pre-step", "gpucluster_goodput", "GPUCLUSTER_PRE_STEP", "GPUCLUSTER_NODE_NAME"):
        assert trace not in text


def test_the_configmap_ships_every_file_of_the_package():
    cm = prestep.code_config_map("vision")
    assert cm["metadata"] == {"name": "gpucluster-goodput-code", "namespace": "vision",
                              "labels": {"app.kubernetes.io/part-of": "gpucluster"}}
    package = ROOT / "components" / "core" / "goodput"
    files = {p.name for p in package.iterdir() if p.is_file()}
    assert {"__init__.py", "names.py", "precheck.py"} <= set(cm["data"]) == files
    assert cm["data"]["precheck.py"] == (package / "precheck.py").read_text()
    # Under the 1 MiB a ConfigMap may hold (Kubernetes docs, ConfigMaps).
    assert len(json.dumps(cm).encode()) < 900 * 1024
    k8s.validate_core(cm, "1.35")


def test_the_check_s_names_match_its_code():
    assert prestep.RANK_PROGRAM == ("python3", "-m", "gpucluster_goodput.precheck", "rank")
    assert f"{prestep.PACKAGE}.precheck" == precheck.MODULE
    assert prestep.CODE_MOUNT["mountPath"] == f"{prestep.CODE_ROOT}/gpucluster_goodput"


def test_prod_creates_the_code_in_every_training_namespace_and_dev_in_none():
    prod = recording("prod", prod_started())
    maps = [r for r in prod.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"]["name"] == "gpucluster-goodput-code"]
    assert sorted(r.inputs["metadata"]["namespace"] for r in maps) == ["language", "training", "vision"]
    # The package, and the pools that fail a job on a failed check: prod's h100 has remediation on.
    assert all(r.inputs["data"] == {**prestep.code_files(), "enforced-pools.json": '["h100"]'} for r in maps)
    (queue,) = [r for r in prod.resources if r.type == "gpucluster:index:Queue"]
    jobs = [r for r in prod.resources if r.type in ("kubernetes:kubeflow.org/v2beta1:MPIJob",
                                                    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")]
    for config_map in maps:
        assert config_map.parent == queue.urn
        for job in jobs:
            if job.inputs["metadata"]["namespace"] == config_map.inputs["metadata"]["namespace"]:
                assert prod.depends_on(job, config_map), job.name
    # prod's jobs: llama-70b (16 nodes, torchrun) and gpt-pretrain (2 nodes, mpirun) start with the check; the
    # fabric test does not (it is nccl-tests itself).
    wrapped = {j.name.removeprefix("gpucluster-prod-"): "gpucluster-pre-step" in json.dumps(j.inputs) for j in jobs}
    assert wrapped == {"llama-70b-trainjob": True, "gpt-pretrain-mpijob": True, "h100-fabric-test-mpijob": False}
    dev = recording("dev")
    assert [r for r in dev.of_type("kubernetes:core/v1:ConfigMap")
            if r.inputs["metadata"]["name"] == "gpucluster-goodput-code"] == []


def test_a_submitted_job_file_renders_the_same(tmp_path):
    # `bootstrap submit --file` builds through launcher.job_manifest: the same wrapper and env.
    path = tmp_path / "job.yaml"
    path.write_text("name: file-torch\npool: h100\nnodes: 2\nlauncher: torchrun\n"
                    f"image: {IMAGE}\ncommand: [python, train.py]\n")
    sub = render.from_file("prod", path)
    assert sub.manifest["spec"]["trainer"]["command"][:4] == [
        "/bin/sh", "-c", SCRIPT.format(args="torchrun"), "gpucluster-pre-step"]
    assert sub.manifest["spec"]["trainer"]["command"][4:] == ["torchrun", "--no-python", "python", "train.py"]
