"""The ECR pull-through cache: its rule, template and node permissions, which images go through it, and the
delete hook that takes its repositories along."""

from __future__ import annotations

import json
import re

import boto3
import pytest
from moto import mock_aws

from bootstrap.offline import mocks
from components.aws import image_cache
from components.core import images
from components.core import versions as v
from components.core.kube import launcher
from components.hooks import IMAGES_HOOK, HookWork
from components.hooks import image_cache as cache_hook
from tests.conftest import prod_started, stack_config, stack_raw
from tests.test_destroy_hooks import hook_args, settings

ACCOUNT = "000000000000"  # the mocks' caller identity
BASE = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/gpucluster-dev"
RULE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"


@pytest.mark.parametrize("cluster, prefix", [
    ("gpucluster-dev", "gpucluster-dev"),
    ("GPU_Cluster--Prod", "gpu-cluster-prod"),
    ("a", "a-cache"),
    ("research-team-large-scale-training-cluster-01", "research-team-large-s-"),  # cut, then a hash
])
def test_the_prefix_is_the_cluster_name_as_ecr_allows_it(cluster, prefix):
    got = images.cache_prefix(cluster)
    assert got.startswith(prefix)
    assert 2 <= len(got) <= images.PREFIX_MAX
    assert re.fullmatch(images.PREFIX_PATTERN, got)
    if len(cluster) > images.PREFIX_MAX:
        assert got != images.cache_prefix(cluster + "-2")  # the hash keeps long names apart


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
    return mocks.run_program(stack_raw("dev"), "dev")


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
    rec = mocks.run_program(stack_raw("prod"), "prod")
    daemon = rec.named("gpucluster-prod-monitoring-efa-counters")
    images_used = {c["image"] for c in daemon.inputs["spec"]["template"]["spec"]["containers"]}
    base = f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/gpucluster-prod"
    assert f"{base}/docker/library/busybox:1.37.0" in images_used
    assert not any(i.startswith("public.ecr.aws/") for i in images_used)
    assert rec.depends_on(daemon, rec.named("gpucluster-prod-image-cache-node-pull"))
