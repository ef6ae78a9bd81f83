"""The ECR pull-through cache: its prefix, rule, template and node permissions, which images go through it, the
delete hook that takes its repositories along, and the sweep `bootstrap destroy` makes once no node is left."""

from __future__ import annotations

import json
import random
import re
import string

import boto3
import botocore.exceptions
import botocore.session
import pytest
from moto import mock_aws

from bootstrap.deployed import destroy_report
from components.aws import image_cache
from components.core import images
from components.core import versions as v
from components.core.kube import launcher, trainer
from components.hooks import IMAGES_HOOK, HookWork
from components.hooks import image_cache as cache_hook
from tests.conftest import prod_started, stack_config
from tests.conftest import recording as shared_recording
from tests.test_destroy_hooks import hook_args, settings
from tests.test_teardown_cli import FakeStack, repositories, run_destroy, state_of

ACCOUNT = "000000000000"  # the mocks' caller identity
BASE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/gpucluster-dev"
RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"


# The ECR API's own rule for ecrRepositoryPrefix (botocore's model of CreatePullThroughCacheRule, the source
# of the ECR API Reference's constraints) and the stricter one terraform-provider-aws checks before calling it.
_PREFIX_SHAPE = botocore.session.get_session().get_service_model("ecr").shape_for(
    "PullThroughCacheRuleRepositoryPrefix").metadata
TERRAFORM_PREFIX = r"^((?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*/?|ROOT)$"


def valid_for_ecr(prefix: str) -> bool:
    return (_PREFIX_SHAPE["min"] <= len(prefix) <= _PREFIX_SHAPE["max"] and prefix != "ROOT"
            and re.search(_PREFIX_SHAPE["pattern"], prefix) is not None
            and re.search(TERRAFORM_PREFIX, prefix) is not None)


@pytest.mark.parametrize("cluster, prefix", [
    # A lowercase, single-hyphen name is its own prefix: a deployed stack's rule is not replaced.
    ("gpucluster-dev", "gpucluster-dev"),
    ("gpucluster-prod", "gpucluster-prod"),
    # Past 30 characters: cut, then the hash, exactly as before this rule.
    ("research-team-large-scale-training-cluster-01", "research-team-large-s-d7aee96c"),
    # Anything else: its slug, then a hash of its exact spelling.
    ("GPU_Cluster--Prod", "gpu-cluster-prod-13fd6400"),
    ("a", "a-ca978112"),
    ("run-20250101", "run-20250101-67282c55"),  # ends like a hashed prefix: hashed too
])
def test_the_prefix_is_the_cluster_name_as_ecr_allows_it(cluster, prefix):
    assert images.cache_prefix(cluster) == prefix
    assert valid_for_ecr(prefix) and re.fullmatch(images.PREFIX_PATTERN, prefix)


def test_the_api_rule_is_the_one_we_state():
    assert (_PREFIX_SHAPE["min"], _PREFIX_SHAPE["max"]) == (2, images.PREFIX_MAX)


def test_names_that_differ_only_in_case_or_separators_get_their_own_prefix():
    names = ["gpu-a", "GPU_A", "gpu_a", "GPU-A", "Gpu-A", "gpu--a", "gpu-a_", "gpu_A", "Gpu_a"]
    prefixes = {name: images.cache_prefix(name) for name in names}
    assert len(set(prefixes.values())) == len(names), prefixes
    assert prefixes["gpu-a"] == "gpu-a" and prefixes["GPU_A"] == "gpu-a-1de12775"
    # A name shaped like another's hashed prefix is hashed itself, so the two cannot meet.
    assert images.cache_prefix(prefixes["GPU_A"]) != prefixes["GPU_A"]
    assert images.cache_base(ACCOUNT, "us-east-1", "GPU_A") != images.cache_base(ACCOUNT, "us-east-1", "gpu-a")


def test_every_eks_cluster_name_gets_a_valid_distinct_prefix():
    rng = random.Random(27)
    alphabet = string.ascii_letters + string.digits + "-_"
    names = {"a", "A", "0", "a" * 100, "A" * 100, "a_" * 50, "x-" * 50, "a-b", "gpucluster-dev-1", "gpucluster-Dev-1"}
    while len(names) < 3000:
        size = rng.choice((1, 2, 5, 12, 29, 30, 31, 60, 100))
        head = rng.choice(string.ascii_letters + string.digits)  # EKS: [0-9A-Za-z][A-Za-z0-9-_]*, at most 100
        names.add(head + "".join(rng.choice(alphabet) for _ in range(size - 1)))
    prefixes = {}
    for name in names:
        prefix = images.cache_prefix(name)
        assert valid_for_ecr(prefix), (name, prefix)
        assert prefixes.setdefault(prefix, name) == name, (name, prefixes[prefix], prefix)
        assert images.cache_prefix(name) == prefix  # deterministic


def test_only_public_ecr_images_go_through_the_cache():
    assert images.through_cache(v.DLC_PYTORCH_IMAGE, BASE) == (
        f"{BASE}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023")
    for image in ("nvcr.io/nvidia/pytorch:25.01-py3", "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:1",
                  "docker.io/library/python:3.12", "public.ecr.aws.example.com/x:1"):
        assert images.through_cache(image, BASE) == image
    assert images.through_cache(v.DLC_PYTORCH_IMAGE, None) == v.DLC_PYTORCH_IMAGE
    assert images.registry_host("111122223333", "cn-north-1") == "111122223333.dkr.ecr.cn-north-1.amazonaws.com.cn"


@pytest.fixture(scope="module")
def dev():
    return shared_recording("dev")


def test_the_rule_template_and_node_permissions(dev):
    (rule,) = dev.of_type(RULE)
    assert (rule.name, rule.inputs["ecrRepositoryPrefix"], rule.inputs["upstreamRegistryUrl"]) == (
        "gpucluster-dev-image-cache-rule", "gpucluster-dev", "public.ecr.aws")
    assert rule.hooks == {"before_delete": [IMAGES_HOOK]}
    assert "credentialArn" not in rule.inputs  # public ECR needs none
    (template,) = dev.of_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
    assert (template.inputs["prefix"], template.inputs["appliedFors"]) == ("gpucluster-dev", ["PULL_THROUGH_CACHE"])
    assert json.loads(template.inputs["lifecyclePolicy"]) == image_cache.LIFECYCLE_POLICY
    assert dev.depends_on(rule, template)
    # Deleted before the rule and its hook: no node may create a cached repository once the sweep has begun.
    assert dev.depends_on(dev.named("gpucluster-dev-image-cache-node-pull"), rule)
    policy = dev.named("gpucluster-dev-image-cache-node-pull")
    node_role = dev.named("gpucluster-dev-node-role")
    assert policy.inputs["role"] == node_role.outputs.get("name", node_role.inputs.get("name"))
    assert json.loads(policy.inputs["policy"])["Statement"] == [{
        "Sid": "PullThroughCache", "Effect": "Allow",
        "Action": ["ecr:BatchImportUpstreamImage", "ecr:CreateRepository"],
        "Resource": f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/gpucluster-dev/*"}]
    config_map = dev.named("gpucluster-dev-image-cache-config")
    assert config_map.inputs["data"] == {image_cache.CONFIG_MAP_KEY: BASE}
    assert dev.stack_outputs["imageCache"] == BASE


def test_the_dev_smoke_job_pulls_its_public_ecr_image_through_the_cache(dev):
    (job,) = dev.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert job.inputs["spec"]["trainer"]["image"] == f"{BASE}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"
    assert dev.depends_on(job, dev.named("gpucluster-dev-image-cache-node-pull"))


def test_every_launcher_and_the_fabric_test_use_the_cache():
    cfg = stack_config("prod", prod_started())
    ctx = launcher.JobContext("training", "fsx", cfg.storage, cfg.prices, cfg.cpu_pools, BASE)
    for job in cfg.jobs:
        public = job.model_copy(update={"image": v.DLC_PYTORCH_IMAGE})
        text = json.dumps(launcher.job_manifest(public, cfg.pool(job.pool), ctx))
        assert v.DLC_PYTORCH_IMAGE not in text and f"{BASE}/deep-learning-containers/pytorch" in text
    fabric = launcher.nccl_test_mpijob(cfg.gpu_pools[0], "training", image_cache=BASE)
    assert "public.ecr.aws" not in json.dumps(fabric)


def test_the_torchrun_runtime_defaults_to_the_cached_image():
    pool = stack_config("prod", prod_started()).gpu_pools[0]
    cached = trainer.runtime(pool, 3, "fsx", image_cache=BASE)
    (node,) = cached["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"]
    assert node["image"] == f"{BASE}/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023"
    # Without the cache the runtime is exactly what it was: same image, nothing else differs.
    public = trainer.runtime(pool, 3, "fsx")
    assert json.dumps(public) == json.dumps(cached).replace(f"{BASE}/", "public.ecr.aws/")
    assert "public.ecr.aws" not in json.dumps(cached)


def test_image_cache_false_pulls_from_public_ecr(run_stack):
    rec = run_stack("dev", {"gpucluster:imageCache": False})
    assert rec.of_type(RULE) == []
    (job,) = rec.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert job.inputs["spec"]["trainer"]["image"] == v.DLC_PYTORCH_IMAGE
    assert rec.stack_outputs["imageCache"] is None


def test_deleting_the_rule_deletes_its_repositories_and_nothing_else(monkeypatch):
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(key, value)
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        ecr = session.client("ecr")
        for name in ("gpucluster-dev/deep-learning-containers/pytorch", "gpucluster-dev/docker/library/busybox",
                     "gpucluster-dev-other/x", "gpucluster-prod/deep-learning-containers/pytorch", "team/train"):
            ecr.create_repository(repositoryName=name)
        logs: list[str] = []
        work = HookWork(settings(), session=lambda: session, log=logs.append)
        work.delete_images_now(hook_args("gpucluster-dev", RULE, old_inputs={"ecrRepositoryPrefix": "gpucluster-dev"}))
        left = sorted(r["repositoryName"] for r in ecr.describe_repositories()["repositories"])
        assert left == ["gpucluster-dev-other/x", "gpucluster-prod/deep-learning-containers/pytorch", "team/train"]
        assert logs == ["image cache gpucluster-dev: deleted 2 cached repositories"]
        assert cache_hook.delete_cached_images(ecr, "gpucluster-dev", log=logs.append) == []


# -- once no node is left: `bootstrap destroy` sweeps again ------------------------------------------


@pytest.fixture(scope="module")
def dev_state() -> list[dict]:
    return state_of("dev")


@pytest.fixture
def ecr(moto_ecr):
    return moto_ecr


def test_destroy_sweeps_the_cache_again_once_no_node_is_left(tmp_path, dev_state, ecr):
    for name in ("gpucluster-dev/deep-learning-containers/pytorch", "gpucluster-dev-other/x", "team/train"):
        ecr.create_repository(repositoryName=name)

    def hook_then_a_pull():
        # The rule's hook deleted the cached repositories; a node still running pulled before the rule went.
        ecr.delete_repository(repositoryName="gpucluster-dev/deep-learning-containers/pytorch", force=True)
        ecr.create_repository(repositoryName="gpucluster-dev/docker/library/busybox")

    fake = FakeStack(dev_state, during_destroy=hook_then_a_pull)
    code, out, _ = run_destroy(tmp_path, "dev", dev_state, "--yes", fake=fake)
    assert code == 0 and [c[0] for c in fake.calls] == ["destroy"]
    assert repositories(ecr) == ["gpucluster-dev-other/x", "team/train"]  # another prefix, another team: kept
    assert out.index("Stack dev destroyed.") < out.index("image cache gpucluster-dev: deleted 1 cached repository")
    assert "ECR pull-through cache gpucluster-dev: the repositories cached under gpucluster-dev/ are deleted" in out


def test_a_destroy_that_stopped_sweeps_nothing_yet(tmp_path, dev_state, ecr):
    """Nodes may still run and pull: the run that finishes the destroy sweeps."""
    from pulumi.automation import CommandError

    failing = FakeStack(dev_state, fail=CommandError("code: 255\n stderr: error: export failed"),
                        during_destroy=lambda: ecr.create_repository(repositoryName="gpucluster-dev/x"))
    code, out, _ = run_destroy(tmp_path, "dev", dev_state, "--yes", fake=failing)
    assert code == 1 and repositories(ecr) == ["gpucluster-dev/x"] and "image cache" not in out


def test_a_sweep_that_cannot_reach_ecr_fails_and_says_how(tmp_path, dev_state, capsys):
    def no_credentials(cfg):
        raise botocore.exceptions.NoCredentialsError()

    code, out, _ = run_destroy(tmp_path, "dev", dev_state, "--yes", ecr_of=no_credentials)
    err = capsys.readouterr().err
    assert code == 1 and "Stack dev destroyed." in out
    assert "the repositories cached under gpucluster-dev/ could not be deleted (Unable to locate credentials)" in err
    assert ("aws ecr describe-repositories --region us-east-1 --query \"repositories[?starts_with(repositoryName, "
            "'gpucluster-dev/')].repositoryName\" --output text); do aws ecr delete-repository --region us-east-1 "
            "--force --repository-name \"$r\"; done") in err


def test_the_prefixes_swept_are_the_states_and_the_clusters_own(dev_state):
    rule = destroy_report.CACHE_RULE
    cfg = stack_config("dev")
    assert destroy_report.build(dev_state, cfg).cache_prefixes == ["gpucluster-dev"]
    # A rule from before the prefix rule changed (and one pending deletion): each swept, and the cluster's own.
    old = [{**r, "outputs": {**r["outputs"], "ecrRepositoryPrefix": p}, "delete": d}
           for r in dev_state if r["type"] == rule for p, d in (("gpu-a", False), ("gpu-b", True))]
    state = [r for r in dev_state if r["type"] != rule] + old
    assert destroy_report.build(state, cfg).cache_prefixes == ["gpu-a", "gpu-b", "gpucluster-dev"]
    # A resumed destroy: the rule went on the first run, the sweep still covers the cluster's prefix.
    assert destroy_report.build(state[:-2], cfg).cache_prefixes == ["gpucluster-dev"]
    off = stack_config("dev", {"gpucluster:imageCache": False})
    assert destroy_report.build(state[:-2], off).cache_prefixes == []


# -- time to first step -----------------------------------------------------------------------


def test_time_to_first_step_adds_the_stages_and_the_nat_is_shared_without_the_cache():
    from components.core.planning import startup

    cached = startup.time_to_first_step(16, gpu=True, through_cache=True)
    # 15 GB at 60 MB/s a node: 250 s.
    assert (cached.pull_mbps, cached.image_minutes) == (60.0, 4.2)
    assert cached.total_minutes == round(0.5 + 4 + 1 + 15000 / 60 / 60, 1) == 9.7
    # Sixteen nodes sharing a NAT gateway's first 5 Gbps (625 MB/s): 39 MB/s each.
    nat = startup.time_to_first_step(16, gpu=True, through_cache=False)
    assert (nat.pull_mbps, nat.image_minutes) == (39.1, 6.4)
    # A few nodes do not fill the NAT gateway: the node's own rate bounds them.
    assert startup.time_to_first_step(2, gpu=True, through_cache=False).pull_mbps == 60.0


def test_the_plan_shows_time_to_first_step_per_job():
    from bootstrap.offline import plan_report

    cfg = stack_config("prod", prod_started())
    rows = {r["name"]: r for r in plan_report.job_rows(cfg)}
    llama = rows["llama-70b"]["timeToFirstStep"]
    assert llama["through_cache"] is True and llama["total_minutes"] == 9.7
    private = stack_config("prod", prod_started({"gpucluster:imageCache": False}))
    llama = {r["name"]: r for r in plan_report.job_rows(private)}["llama-70b"]["timeToFirstStep"]
    assert llama["through_cache"] is False and llama["pull_mbps"] == round(625 / 16, 1)


def test_the_efa_counters_pull_busybox_through_the_cache():
    rec = shared_recording("prod")
    daemon = rec.named("gpucluster-prod-monitoring-efa-counters")
    images_used = {c["image"] for c in daemon.inputs["spec"]["template"]["spec"]["containers"]}
    base = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/gpucluster-prod"
    assert f"{base}/docker/library/busybox:1.37.0" in images_used
    assert not any(i.startswith("public.ecr.aws/") for i in images_used)
    assert rec.depends_on(daemon, rec.named("gpucluster-prod-image-cache-node-pull"))
