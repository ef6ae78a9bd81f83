"""The offline plan of a fleet (issue 31): the manager's workers, pools, cost and data transfer; a worker's
manager; and a stack in no fleet planned exactly as before (components.core.planning.fleet)."""

from __future__ import annotations

import hashlib
import json

import pytest

from components.core.fleet.workers import load_workers
from components.core.planning import cost, fleet
from components.core.planning.fleet import transfer
from tests.conftest import ROOT, plan, stack_config

GB_PER_GIB = 1.073741824

# `python -m bootstrap plan --stack dev` and `--stack prod` as they printed before the fleet (commit 371642b,
# checked byte for byte against the plans after it): issue 31's "a stack with no fleet plans exactly as
# before". A later change to what dev or prod plan updates these (`... plan --stack dev | sha256sum`).
BEFORE_THE_FLEET = {"dev": "034bc5e57b4e0d2eeeb18d597fe4a7cf8c9b22870beafdc6d5fe10ee18bc6753",
                    "prod": "96ce8b6270b61d446939c5481c72a2ec436d546c9c231b1631ca37d072b56740"}


def manager_section(overrides: dict | None = None, workers: dict[str, dict] | None = None) -> dict:
    """The manager's `fleet` as the plan builds it, from the example stacks (with overrides)."""
    manager = stack_config("fleet", overrides)
    members = load_workers(manager, lambda name: stack_config(name, (workers or {}).get(name)))
    return fleet.plan(manager, members)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_stack_in_no_fleet_plans_as_before(stack):
    text = plan("--stack", stack)
    assert text.returncode == 0, text.stderr
    assert hashlib.sha256(text.stdout.encode()).hexdigest() == BEFORE_THE_FLEET[stack]
    assert "fleet" not in json.loads(plan("--stack", stack, "--json").stdout)
    assert fleet.plan(stack_config(stack)) is None and fleet.render(None) == []


def test_the_manager_s_plan_lists_each_worker_with_its_region_and_pools():
    f = json.loads(plan("--stack", "fleet", "--json").stdout)["fleet"]
    assert {k: f[k] for k in ("role", "dispatcher", "dispatcherName", "workerLostMinutes", "tokenRotationHours")} == {
        "role": "manager", "dispatcher": "all-at-once", "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
        "workerLostMinutes": 15, "tokenRotationHours": 6}
    pool = {"name": "h100", "instanceType": "p5.48xlarge", "gpuModel": "H100", "gpusPerNode": 8, "minNodes": 0,
            "maxNodes": 2, "capacityType": "ON_DEMAND"}
    assert f["workers"] == [
        {"stack": "fleet-east", "reference": "fleet-east", "cluster": "fleet-east", "region": "us-east-1",
         "paused": False, "pools": [pool], "gpusMax": 16},
        {"stack": "fleet-west", "reference": "fleet-west", "cluster": "fleet-west", "region": "us-west-2",
         "paused": False, "pools": [pool], "gpusMax": 16}]
    assert f["gpusMax"] == {"H100": 32}


def test_the_fleet_s_cost_is_the_manager_s_and_every_worker_s_own_estimate():
    report = json.loads(plan("--stack", "fleet", "--json").stdout)
    c = report["fleet"]["cost"]
    assert c["stacks"] == [
        {"stack": "fleet", "role": "manager", "region": "us-east-1", "minPerHour": 0.5935, "maxPerHour": 0.5935},
        # 2 x m7i.xlarge, NAT, EKS, FSx PERSISTENT_2 4,800 GiB at 250 MB/s/TiB; up to 2 x p5.48xlarge at $55.04
        {"stack": "fleet-east", "role": "worker", "region": "us-east-1", "minPerHour": 1.9458, "maxPerHour": 112.0728},
        {"stack": "fleet-west", "role": "worker", "region": "us-west-2", "minPerHour": 1.9458, "maxPerHour": 112.0728}]
    assert (c["minPerHour"], c["maxPerHour"], c["minPerMonth"], c["maxPerMonth"]) == (4.4851, 224.7391, 3274.12, 164059.54)
    # The same function as each stack's own plan: the manager's own section, each worker's estimate.
    assert (report["cost"]["minPerHour"], report["cost"]["maxPerHour"]) == (0.5935, 0.5935)
    for row in c["stacks"][1:]:
        own = cost.estimate(stack_config(row["stack"]))
        assert (row["minPerHour"], row["maxPerHour"]) == (own.min_per_hour, own.max_per_hour)


def test_a_shared_bucket_costs_a_worker_in_another_region_transfer_and_nat_on_every_read_and_write():
    d = json.loads(plan("--stack", "fleet", "--json").stdout)["fleet"]["data"]
    assert (d["mode"], d["bucketRegion"], d["datasetGiB"], d["estimate"]) == ("shared-bucket", "us-east-1", 2000, True)
    east, west = d["workers"]
    assert (east["crossesRegions"], east["perJobStartUsd"]) == (False, 0.0)
    assert (west["crossesRegions"], west["readPerGB"], west["writePerGB"], west["natPerGB"]) == (True, 0.02, 0.02, 0.045)
    assert west["perJobStartUsd"] == 139.59 == round(2000 * GB_PER_GIB * (0.02 + 0.045), 2)
    # The example job names no checkpoint size and no model: its checkpoints are not priced.
    assert west["jobs"] == [{"job": "pretrain", "checkpointGiB": None, "sizeFrom": None, "everyMinutes": 30,
                             "perCheckpointUsd": None, "perDayUsd": None, "perResumeUsd": None}]


def test_a_checkpoint_crossing_regions_costs_its_size_each_write_and_each_resume():
    sized = {"gpucluster:jobs": json.dumps([{
        "name": "pretrain", "pool": "h100", "nodes": 2, "launcher": "torchrun", "startOnUp": False,
        "image": "public.ecr.aws/deep-learning-containers/pytorch:2.13.0-cu133-amzn2023", "command": ["python", "t.py"],
        "checkpoint": {"everyMinutes": 60, "sizeGiB": 100}}])}
    west = manager_section(workers={"fleet-west": sized})["data"]["workers"][1]
    assert west["jobs"] == [{"job": "pretrain", "checkpointGiB": 100, "sizeFrom": "sizeGiB", "everyMinutes": 60,
                             "perCheckpointUsd": 6.98, "perDayUsd": 167.5, "perResumeUsd": 6.98}]


def test_replicated_data_crosses_once_per_other_region_and_job_starts_read_locally():
    replicated = {"gpucluster:fleet": json.dumps({"role": "manager", "workers": [{"stack": "fleet-east"},
                                                                                 {"stack": "fleet-west"}],
                                                  "data": {"mode": "replicated", "datasetGiB": 2000}})}
    d = manager_section(replicated)["data"]
    assert (d["bucketRegion"], d["regions"]) == ("us-east-1", ["us-east-1", "us-west-2"])  # the manager's region
    assert d["dataset"] == {"from": "us-east-1", "to": [{"to": "us-west-2", "perGB": 0.02}],
                            "onceUsd": round(2000 * GB_PER_GIB * 0.02, 2)} and d["dataset"]["onceUsd"] == 42.95
    assert [(w["stack"], w["replicatesTo"], w["writePerGB"], w["perJobStartUsd"]) for w in d["workers"]] == [
        ("fleet-east", ["us-west-2"], 0.02, 0.0), ("fleet-west", ["us-east-1"], 0.02, 0.0)]


def test_inter_region_prices_are_the_source_region_s_with_a_stated_default():
    assert transfer.per_gb("us-east-1", "us-west-2") == (0.02, True)
    assert transfer.per_gb("us-east-1", "us-east-2") == (0.01, True)  # Virginia-Ohio
    assert transfer.per_gb("us-west-2", "us-west-2") == (0.0, True)
    assert transfer.per_gb("ap-south-1", "us-east-1") == (transfer.DEFAULT_PER_GB, False)
    # A source the table does not know is named in the plan, with the default it assumed.
    other = {"gpucluster:fleet": json.dumps({"role": "manager", "workers": [{"stack": "fleet-east"}],
                                             "data": {"bucketRegion": "eu-north-1", "datasetGiB": 10}})}
    d = manager_section(other)["data"]
    assert d["defaultedSources"] == ["eu-north-1"] and d["workers"][0]["perJobStartUsd"] == round(10 * GB_PER_GIB * 0.065, 2)
    assert "$0.02/GB assumed for eu-north-1" in "\n".join(fleet.render(manager_section(other)))


def test_the_manager_s_text_section():
    text = plan("--stack", "fleet").stdout
    section = text[text.index("\nFleet: "):text.index("\nPolicy pack")].splitlines()
    assert section[1:4] == [
        "Fleet: manager of 2 workers (Kueue MultiKueue; README, A fleet of clusters)",
        "  dispatcher all-at-once (kueue.x-k8s.io/multikueue-dispatcher-all-at-once): a copy of each job to every "
        "worker, the first whose queue admits it runs it",
        "  a worker lost for 15 min (workerLostMinutes) has its jobs requeued for the others; each worker's token is "
        "renewed every 6 h and lives 12 h"]
    for line in ["  fleet-west (us-west-2, cluster fleet-west):", "    h100: p5.48xlarge (8x H100), 0-2 nodes, ON_DEMAND",
                 "  GPUs at maximum scale: 32 H100", "    fleet-west (worker, us-west-2): 1.95 - 112.07",
                 "    total at minimum scale: 4.49 ($3,274 a month)",
                 "    total at maximum scale: 224.74 ($164,060 a month)",
                 "    fleet-east (us-east-1): the bucket's region, no transfer charge",
                 "    fleet-west (us-west-2): reads $0.020/GB (us-east-1 -> us-west-2), writes $0.020/GB (us-west-2 -> "
                 "us-east-1), each + $0.045/GB NAT processing; the 2,000 GiB dataset read at each job start: $139.59"]:
        assert line in section, line


def test_a_worker_s_plan_says_whose_fleet_it_serves():
    result = plan("--stack", "fleet-east", "--json")
    assert json.loads(result.stdout)["fleet"] == {
        "role": "worker", "manager": "fleet", "listedByManager": True, "submittable": ["pretrain"],
        "submit": "python -m bootstrap submit --stack fleet-east --fleet <job>"}
    text = plan("--stack", "fleet-east").stdout.splitlines()
    start = text.index("Fleet: a worker of fleet fleet (README, A fleet of clusters)")
    assert text[start + 1:start + 3] == [
        "  the manager fleet may send this cluster jobs: its queue (Kueue MultiKueue) dispatches them to the first "
        "worker that admits them; its stack file lists this stack among its workers",
        "  `python -m bootstrap submit --stack fleet-east --fleet <job>` queues a job of this stack on the manager "
        "(this stack's: pretrain)"]


def test_a_worker_its_manager_does_not_list_is_warned(tmp_path):
    path = tmp_path / "Pulumi.fleet-south.yaml"
    path.write_text((ROOT / "Pulumi.fleet-west.yaml").read_text())
    result = plan("--stack", "fleet-south", "--stack-file", str(path), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["fleet"]["listedByManager"] is False
    text = plan("--stack", "fleet-south", "--stack-file", str(path)).stdout
    assert ("WARNING: its stack file does not list this stack: add it to the manager's gpucluster:fleet.workers, "
            "or jobs never arrive here") in text


def test_a_manager_listing_a_stack_that_is_not_its_worker_is_refused_naming_the_key(tmp_path):
    text = (ROOT / "Pulumi.fleet.yaml").read_text().replace("      - stack: fleet-west\n",
                                                            "      - stack: dev\n      - stack: nowhere\n")
    path = tmp_path / "Pulumi.fleet.yaml"
    path.write_text(text)
    result = plan("--stack", "fleet", "--stack-file", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert ("gpucluster:fleet.workers[1].stack: got 'dev'; that stack is not a worker: set gpucluster:fleet to "
            "{role: worker, manager: fleet} in Pulumi.dev.yaml") in result.stderr
    assert "gpucluster:fleet.workers[2].stack: got 'nowhere'; " in result.stderr
    assert "Pulumi.nowhere.yaml" in result.stderr


def test_the_readme_shows_the_manager_s_plan_and_the_example_stacks_as_they_are():
    from tests import readme_blocks as rb

    section = "A fleet of clusters: one queue, many clusters"
    body = rb.section(section)
    (block,) = [b for b in rb.blocks() if b.text in body and b.text.startswith("Fleet: manager of 2 workers")]
    shown = block.text.splitlines()
    text = plan("--stack", "fleet").stdout.splitlines()
    start = text.index(shown[0])
    assert text[start:start + len(shown)] == shown
    files = {name: (ROOT / f"Pulumi.{name}.yaml").read_text().splitlines() for name in ("fleet", "fleet-east")}
    yaml_block = rb.block_in(section, "yaml").text.splitlines()
    current = None
    for line in yaml_block:
        if line.startswith("# Pulumi."):
            current = "fleet" if line.startswith("# Pulumi.fleet.yaml") else "fleet-east"
            continue
        assert line in files[current], f"{line!r} is not in Pulumi.{current}.yaml"
