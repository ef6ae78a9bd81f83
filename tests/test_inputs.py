"""What a stack file says, read as the Pulumi CLI reads it; and what AWS or Kubernetes would refuse later,
refused now with its key path."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import yaml

from bootstrap import stackfile
from bootstrap.offline import mocks
from components.core.config import ConfigError
from components.core.config.text import stack_yaml
from components.core.config.values import image_problem
from tests.conftest import ROOT, stack_config

PINS = stackfile.stack_versions(ROOT / "Pulumi.dev.yaml")
JOB = {"name": "train", "pool": "dev", "nodes": 1, "launcher": "mpirun", "command": ["python", "train.py"],
       "image": "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"}


def read(text: str) -> dict:
    return stack_yaml.parse(text, "gpucluster").config


def problems_of(overrides: dict) -> list[str]:
    with pytest.raises(ConfigError) as err:
        stack_config("dev", overrides)
    return err.value.render().splitlines()[1:]


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bootstrap", "plan", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def stack_file(tmp_path, body: str) -> str:
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n"
                    "  gpucluster:adminPrincipalArns: [arn:aws:iam::210987654321:role/Admin]\n"
                    "  gpucluster:publicAccessCidrs: [52.94.76.10/32]\n"
                    f"  gpucluster:versions: {json.dumps(PINS)}\n" + body)
    return str(path)


# -- YAML as the Pulumi CLI reads it ---------------------------------------------------------------


def test_yaml_1_1_booleans_stay_strings_and_numbers_reach_the_program_as_go_writes_them():
    config = read("config:\n  a: no\n  b: off\n  c: yes\n  d: True\n  e: 1.10\n  f: 1e3\n  g: 1_000\n"
                  "  h: {x: no, y: 4.0, z: 0.5}\n")
    engine = {k: stack_yaml.go_text(v) for k, v in config.items()}
    assert engine == {"gpucluster:a": "no", "gpucluster:b": "off", "gpucluster:c": "yes", "gpucluster:d": "true",
                      "gpucluster:e": "1.1", "gpucluster:f": "1000", "gpucluster:g": "1000",
                      "gpucluster:h": '{"x":"no","y":4,"z":0.5}'}


@pytest.mark.parametrize(("text", "message"), [
    ("config:\n  a: 1\n  a: 2\n", "line 3: mapping key 'a' already defined at line 2"),
    ("config:\n  a:\n    b: 1\n    b: 2\n", "line 4: mapping key 'b' already defined at line 3"),
    ("config:\n  x: 1\n  gpucluster:x: 2\n", "gpucluster:x: set twice, as 'x' and as 'gpucluster:x'"),
    ("config:\n  a: 010\n", "gpucluster:a: got 010, which the Pulumi CLI reads as the number 8"),
    ("config:\n  a: {b: 0x1F}\n", "gpucluster:a.b: got 0x1F, which the Pulumi CLI reads as the number 31"),
    ("config:\n  a: .inf\n", "gpucluster:a: got .inf; the Pulumi CLI cannot load a stack file holding .inf or .nan"),
    ("config:\n  a: 2026-12-05\n", "gpucluster:a: got 2026-12-05, which the Pulumi CLI turns into Go's date text"),
    ("config:\n  a: |\n\n    text\n", "gpucluster:a: a block string starting with a line break or a tab"),
    ("config:\n  a: !!int 3\n", "gpucluster:a: explicit tag 'tag:yaml.org,2002:int' is not supported"),
    ("config:\n  a:b:c: 1\n", "could not parse 'a:b:c' as a configuration key"),
])
def test_what_the_cli_refuses_or_reads_surprisingly_is_refused_with_its_place(text, message):
    with pytest.raises(stack_yaml.StackYamlError) as err:
        read(text)
    assert message in str(err.value)


def test_quoted_values_keep_their_text_and_merges_work():
    config = read('config:\n  a: "010"\n  b: !!str 0x1F\n  c: \'2026-12-05\'\n'
                  "  d: &base {x: 1, y: 2}\n  e: {<<: *base, y: 3}\n")
    assert config == {"gpucluster:a": "010", "gpucluster:b": "0x1F", "gpucluster:c": "2026-12-05",
                      "gpucluster:d": {"x": 1, "y": 2}, "gpucluster:e": {"x": 1, "y": 3}}


def billion_laughs(levels: int = 9) -> str:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    return "\n".join(lines) + f"\nconfig:\n  gpucluster:tags: {{bomb: *{chr(96 + levels)}}}\n"


def test_nine_nested_anchors_end_within_seconds_with_a_short_error(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(billion_laughs())
    started = time.monotonic()
    result = plan("--stack", "x", "--stack-file", str(path))
    assert time.monotonic() - started < 60  # the old reader grew to gigabytes here and never ended
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "too much alias expansion" in line and "excessive aliasing" in line and len(line) < 400


def test_a_file_over_the_size_bound_is_refused(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  aws:region: us-east-1\n" + "# padding\n" * 120_000)
    with pytest.raises(stackfile.StackFileError, match="over 1,048,576 bytes"):
        stackfile.read_stack_config("x", stack_file=path)


def test_the_plan_reads_a_duplicate_key_as_a_bad_stack(tmp_path):
    result = plan("--stack", "x", "--stack-file", stack_file(tmp_path, "  aws:region: us-west-2\n"))
    assert result.returncode == 1 and "Traceback" not in result.stderr  # a bad stack, not an unreadable file
    assert "mapping key 'aws:region' already defined at line 2" in result.stderr


def test_the_shipped_stacks_read_the_same_as_before():
    for stack in ("dev", "prod", "fleet", "fleet-east", "fleet-west"):
        text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
        assert read(text) == yaml.safe_load(text)["config"]  # nothing in them depends on YAML 1.1


# -- the API endpoint's allow list ---------------------------------------------------------------


def test_an_address_alone_is_its_slash_32():
    cfg = stack_config("dev", {"gpucluster:publicAccessCidrs": ["52.94.76.10", "3.5.140.0/22"]})
    assert cfg.public_access_cidrs == ("52.94.76.10/32", "3.5.140.0/22")


def test_repeats_overlaps_and_more_than_40_cidrs_are_refused():
    lines = problems_of({"gpucluster:publicAccessCidrs": ["52.94.76.10/32", "52.94.76.10", "3.5.140.0/22",
                                                          "3.5.141.7/32"]})
    assert lines == ["  - gpucluster:publicAccessCidrs[1]: repeats entry [0] (52.94.76.10/32)",
                     "  - gpucluster:publicAccessCidrs[3]: overlaps entry [2] (3.5.140.0/22); keep only 3.5.140.0/22"]
    many = [f"3.{n}.0.0/16" for n in range(41)]
    assert problems_of({"gpucluster:publicAccessCidrs": many}) == [
        "  - gpucluster:publicAccessCidrs: has 41 entries; EKS accepts at most 40"]


# -- tags, labels, names -------------------------------------------------------------------------


def test_tags_leave_room_for_ours_and_keep_aws_s_lengths():
    ours = 13  # dev's pool's Auto Scaling group: EKS's 5 and 8 node-template tags (no EFA); the stack's go there too
    assert problems_of({"gpucluster:tags": {f"team{n}": "x" for n in range(50 - ours + 1)}}) == [
        f"  - gpucluster:tags: has {50 - ours + 1} tags; with the program's {ours} on a pool's Auto Scaling group that "
        f"is over AWS's 50 per resource: at most {50 - ours}"]
    assert stack_config("dev", {"gpucluster:tags": {f"team{n}": "x" for n in range(50 - ours)}})
    lines = problems_of({"gpucluster:tags": {"Name": "mine", "k" * 129: "v", "ok": "v" * 257}})
    assert "  - gpucluster:tags.Name: is set by the program on each resource (Name = <cluster>-<role>); remove it" \
        in lines
    assert f"  - gpucluster:tags.{'k' * 129}: key '{'k' * 129}' is not a valid AWS tag key (1-128 characters, not " \
           "starting with aws:)" in lines
    assert f"  - gpucluster:tags.ok: got '{'v' * 257}'; must be at most 256 characters" in lines


def test_pool_labels_may_not_override_ours_or_keep_a_node_from_joining():
    pool = {"name": "dev", "instanceType": "g6e.xlarge", "maxNodes": 2}
    lines = problems_of({"gpucluster:gpuPools": [{**pool, "labels": {
        "gpucluster.io/pool": "other", "team.gpucluster.io/x": "y", "kubernetes.io/role": "gpu",
        "node.kubernetes.io/lifecycle": "ok", "example.com/team": "ml"}}]})
    assert sorted(lines) == [
        "  - gpucluster:gpuPools[0].labels.gpucluster.io/pool: key 'gpucluster.io/pool' is the program's own "
        "(plugins, the autoscaler and jobs select on it); use a key of your own domain",
        "  - gpucluster:gpuPools[0].labels.kubernetes.io/role: key 'kubernetes.io/role' is in a domain kubelet may "
        "not label (NodeRestriction): the node would never join; kubernetes.io and k8s.io keys only under "
        "kubelet.kubernetes.io/ or node.kubernetes.io/",
        "  - gpucluster:gpuPools[0].labels.team.gpucluster.io/x: key 'team.gpucluster.io/x' is the program's own "
        "(plugins, the autoscaler and jobs select on it); use a key of your own domain"]


def test_a_job_may_not_take_a_fabric_test_s_name():
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 2, "fabricTest": True}]
    assert problems_of({"gpucluster:gpuPools": pools, "gpucluster:systemNodes": {"instanceType": "m7i.xlarge"},
                        "gpucluster:jobs": [{**JOB, "pool": "h100", "name": "nccl-tests-h100"}]}) == [
        "  - gpucluster:jobs[0].name: got 'nccl-tests-h100'; pool 'h100''s fabric test has that name; choose another"]


def test_kube_namespaces_are_reserved():
    assert problems_of({"gpucluster:trainingNamespace": "kube-jobs"})[0].startswith(
        "  - gpucluster:trainingNamespace: got 'kube-jobs'; is a namespace the cluster's system or operators own; "
        "not kube-* or one of")


# -- images and mount paths ----------------------------------------------------------------------


@pytest.mark.parametrize("image", [
    "registry.internal:5000/ml/train:1.2.0",
    "repo:1.0@sha256:" + "a" * 64,
    "repo@sha256:" + "b" * 64,
    "localhost:5000/team/model_v2:2026.12.05",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/ml-train:v3",
    "nvcr.io/nvidia/pytorch:25.01-py3",
])
def test_valid_image_references_pass(image):
    assert stack_config("dev", {"gpucluster:jobs": [{**JOB, "image": image}]}).jobs[0].image == image


@pytest.mark.parametrize(("image", "reason"), [
    ("Repo/Train:1.0", "is not an image reference ([registry[:port]/]repository[:tag][@digest], lowercase "
                       "repository) (repository names are lowercase)"),
    ("registry.internal:5000/ML/train:1", "(repository names are lowercase)"),
    ("repo/train", "is not pinned: give a version tag (repo:1.2.0) or a digest (repo@sha256:...)"),
    ("repo/train:latest", "is tagged latest"),
    ("repo@sha256:abcd", "is not an image reference"),
    ("repo:1.0:2", "is not an image reference"),
    ("repo/-x:1", "is not an image reference"),
])
def test_invalid_image_references_are_refused(image, reason):
    assert reason in image_problem(image)
    (line,) = problems_of({"gpucluster:jobs": [{**JOB, "image": image}]})
    assert line.startswith(f"  - gpucluster:jobs[0].image: got '{image}'; ")


@pytest.mark.parametrize(("path", "reason"), [
    ("/", "must not be / (the container's root)"),
    ("fsx", "must be an absolute path (/fsx)"),
    ("/dev/shm/data", "overlaps /dev/shm, which the pods mount themselves"),
    ("/dev", "overlaps /dev/shm, which the pods mount themselves"),
    ("/fsx/../etc", "must not contain . or .. components"),
    ("/etc/data", "is under /etc, which the container's system uses; mount the file system elsewhere (/fsx)"),
    ("/usr", "is under /usr, which the container's system uses; mount the file system elsewhere (/fsx)"),
])
def test_bad_mount_paths_are_refused(path, reason):
    (line,) = problems_of({"gpucluster:jobs": [{**JOB, "mountPath": path}]})
    assert line == f"  - gpucluster:jobs[0].mountPath: got '{path}'; {reason}"


def test_good_mount_paths_pass():
    for path in ("/fsx", "/data/shared", "/mnt/fsx/"):
        assert stack_config("dev", {"gpucluster:jobs": [{**JOB, "mountPath": path}]}).jobs[0].mount_path == path


# -- secret env values ---------------------------------------------------------------------------


SECRET_STACK = """\
  gpucluster:gpuPools: [{name: dev, instanceType: g6e.xlarge, maxNodes: 2}]
  gpucluster:jobs:
    - name: mpi
      pool: dev
      nodes: 1
      launcher: mpirun
      image: public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023
      command: [python, train.py]
      env:
        WANDB_API_KEY:
          secure: v1:Kx9aOq8tQm2ReDacted
        WANDB_PROJECT: llm
    - name: torch
      pool: dev
      nodes: 1
      launcher: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023
      command: [python, train.py]
      env: {HF_TOKEN: {secure: v1:Zm9vYmFyRedacted}}
"""


def test_secure_env_values_are_read_and_their_paths_kept(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    stack_file(tmp_path, SECRET_STACK)
    assert stackfile.secure_paths("x", stack_file=path) == ("gpucluster:jobs[0].env.WANDB_API_KEY",
                                                            "gpucluster:jobs[1].env.HF_TOKEN")
    assert stackfile.secure_keys("x", stack_file=path) == ("gpucluster:jobs",)
    cfg, raw, _ = stackfile.load_stack("x", stack_file=path)
    assert cfg.secret_env(0) == {"WANDB_API_KEY"} and cfg.secret_env(1) == {"HF_TOKEN"}
    assert cfg.jobs[0].env["WANDB_API_KEY"] == stackfile.SECRET_PLACEHOLDER  # offline: a stand-in, never the text


def test_a_key_secret_as_a_whole_makes_every_env_value_secret():
    cfg = stack_config("dev", {"gpucluster:jobs": [{**JOB, "env": {"A": "1", "B": "2"}}]})
    whole = cfg.model_copy(update={"secret_keys": ("gpucluster:jobs",), "secret_paths": ("gpucluster:jobs",)})
    assert whole.secret_env(0) == {"A", "B"} and cfg.secret_env(0) == frozenset()


def test_secret_env_values_go_through_a_secret_never_the_manifest(tmp_path):
    path = tmp_path / "Pulumi.x.yaml"
    stack_file(tmp_path, SECRET_STACK)
    raw = stackfile.read_stack_config("x", stack_file=path)
    raw["gpucluster:jobs"] = raw["gpucluster:jobs"].replace(stackfile.SECRET_PLACEHOLDER, "s3cr3t-value", 1)
    rec = mocks.run_program(raw, "x", secret_keys=stackfile.secure_keys("x", stack_file=path))
    # (The program found the paths in the stack file; here, run from the project, it treats the key as a whole.)
    everything = json.dumps([r.inputs for r in rec.resources if not r.type.endswith(":Secret")])
    assert "s3cr3t-value" not in everything
    (mpi,) = [r.inputs for r in rec.resources if r.inputs.get("kind") == "MPIJob" and r.name.endswith("mpi-mpijob")]
    launcher = mpi["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert "-x" in launcher["command"] and "WANDB_API_KEY" in launcher["command"]
    assert {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "mpi-env", "key": "WANDB_API_KEY"}}} \
        in launcher["env"]
    secrets = {r.inputs["metadata"]["name"]: r for r in rec.of_type("kubernetes:core/v1:Secret")}
    assert secrets["mpi-env"].inputs["stringData"]["WANDB_API_KEY"] == "s3cr3t-value"
    assert "stringData" in secrets["mpi-env"].secret_inputs
    (torch,) = [r.inputs for r in rec.resources if r.inputs.get("kind") == "TrainJob"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "torch-env", "key": "HF_TOKEN"}}} \
        in torch["spec"]["trainer"]["env"]
