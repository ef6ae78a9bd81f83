"""`bootstrap diff`: hand-made plan pairs, and the shipped prod stack against a changed copy of it."""

from __future__ import annotations

import copy
import json

import pytest

from bootstrap import stackfile
from bootstrap.offline import plan_diff, plan_report
from bootstrap.offline.replacements import forces_replacement
from bootstrap.verbs import diff
from components.core.hardware import catalog
from components.core.stack_config import parse as parse_stack
from tests.conftest import shared_run, stack_raw

NG = "aws:eks/nodeGroup:NodeGroup"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"


def resource(name: str, type_: str, inputs: dict, **options) -> dict:
    return {"urn": f"urn:pulumi:dev::gpucluster::{type_}::{name}", "type": type_, "name": name, "custom": True,
            "inputs": inputs, "dependencies": [], "protect": False, "retainOnDelete": False, "ignoreChanges": [],
            "replaceOnChanges": [], "deleteBeforeReplace": False, "importId": "", "hooks": {}, **options}


def plan(*resources: dict, stack: str = "dev", low: float = 1.0, high: float = 10.0) -> dict:
    return {"stack": stack, "cost": {"minPerHour": low, "maxPerHour": high}, "resources": list(resources)}


BASE = plan(
    resource("pool", NG, {"instanceTypes": ["p5.48xlarge"], "scalingConfig": {"minSize": 0, "maxSize": 4}}),
    resource("fs", FSX, {"deploymentType": "PERSISTENT_2", "storageCapacity": 2400}),
    resource("provider", "pulumi:providers:kubernetes", {"kubeconfig": "[secret]"}),
    resource("bucket", "aws:s3/bucket:Bucket", {"bucket": "data"}, retainOnDelete=True),
)


def report(old: dict, new: dict) -> str:
    return plan_diff.render(plan_diff.compare(old, new))


def changed(**edits) -> dict:
    """BASE with resource inputs edited: changed(pool={"scalingConfig": {...}})."""
    new = copy.deepcopy(BASE)
    for r in new["resources"]:
        r["inputs"].update(edits.get(r["name"], {}))
    return new


def test_identical_plans_give_an_empty_report():
    assert report(BASE, copy.deepcopy(BASE)) == ""


def test_an_in_place_change_lists_the_path_and_both_values():
    text = report(BASE, changed(pool={"scalingConfig": {"minSize": 0, "maxSize": 8}}, ))
    assert "**0 to add, 1 to change, 0 to replace, 0 to remove**" in text
    assert "### Changed in place\n- `pool` (aws:eks/nodeGroup:NodeGroup)\n  - `scalingConfig.maxSize`: `4` → `8`\n" in text
    assert "Replaced" not in text and "WARNING" not in text


def test_a_new_instance_type_replaces_the_node_group_and_says_jobs_stop():
    text = report(BASE, changed(pool={"instanceTypes": ["p5en.48xlarge"]}))
    assert "**0 to add, 0 to change, 1 to replace, 0 to remove**" in text
    assert ("  - `instanceTypes`: `[\"p5.48xlarge\"]` → `[\"p5en.48xlarge\"]` **(forces replacement)**") in text
    assert "> - `pool` (aws:eks/nodeGroup:NodeGroup): every node of the group is replaced: jobs on it stop " \
           "(because of `instanceTypes`)" in text
    assert "- `pool` (aws:eks/nodeGroup:NodeGroup), create, then delete" in text


def test_a_file_system_replacement_is_flagged_as_data_and_growing_it_is_not():
    text = report(BASE, changed(fs={"deploymentType": "SCRATCH_2"}))
    assert "a new, empty file system (files not yet in S3 are lost) (because of `deploymentType`)" in text
    assert "to replace" in text and "1 to replace" in text
    grow = report(BASE, changed(fs={"storageCapacity": 4800}))
    assert "1 to change, 0 to replace" in grow
    shrink = report(BASE, changed(fs={"storageCapacity": 1200}))
    assert "`storageCapacity`: `2400` → `1200` **(forces replacement)**" in shrink


def test_replace_on_changes_of_the_resource_itself_counts():
    job = resource("job", "kubernetes:kubeflow.org/v2beta1:MPIJob", {"spec": {"slotsPerWorker": 8}},
                   replaceOnChanges=["spec"], deleteBeforeReplace=True)
    new = copy.deepcopy(job)
    new["inputs"]["spec"]["slotsPerWorker"] = 4
    text = report(plan(job), plan(new))
    assert "- `job` (kubernetes:kubeflow.org/v2beta1:MPIJob), delete, then create" in text
    assert "> - `job` (kubernetes:kubeflow.org/v2beta1:MPIJob): the job restarts (because of `spec.slotsPerWorker`)" in text


def test_kubernetes_objects_are_replaced_by_a_new_name():
    assert forces_replacement("kubernetes:core/v1:PersistentVolume", "metadata.name", "a", "b", [])
    assert not forces_replacement("kubernetes:core/v1:PersistentVolume", "metadata.labels.x", "a", "b", [])
    assert not forces_replacement("kubernetes:helm.sh/v3:Release", "values.image.tag", "a", "b", [])
    assert forces_replacement("kubernetes:helm.sh/v3:Release", "name", "a", "b", [])


def test_secrets_stay_masked_and_unchanged():
    new = changed(provider={"kubeconfig": "[secret]"})
    assert report(BASE, new) == ""


def test_added_removed_and_retained_removals():
    extra = resource("extra", "aws:ec2/eip:Eip", {"domain": "vpc"})
    new = plan(*copy.deepcopy(BASE["resources"][:3]), extra)
    text = report(BASE, new)
    assert "**1 to add, 0 to change, 0 to replace, 1 to remove**" in text
    assert "### Added\n- `extra` (aws:ec2/eip:Eip)" in text
    assert "### Removed\n- `bucket` (aws:s3/bucket:Bucket) (retained: stays in AWS, no longer managed)" in text


def test_option_changes_are_listed():
    new = copy.deepcopy(BASE)
    new["resources"][3]["retainOnDelete"] = False
    assert "  - option `retainOnDelete`: `true` → `false`" in report(BASE, new)


def test_cost_change_alone_is_a_change_and_is_tabled():
    text = report(BASE, plan(*copy.deepcopy(BASE["resources"]), low=1.5, high=20))
    assert "| at minimum scale | $1.00 | $1.50 | +0.50 |" in text
    assert "| at maximum scale | $10.00 | $20.00 | +10.00 |" in text


def test_different_stacks_say_so():
    assert "## Plan diff: stack `prod` (compared with stack `dev`)" in report(BASE, plan(stack="prod"))


@pytest.mark.parametrize(("content", "message"), [
    (None, "no such file"),
    ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1)"),
    (json.dumps({"stack": "dev", "cost": {}}), "not a `python -m bootstrap plan --json` report with resources"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(BASE))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert diff.main([str(bad), str(good)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpucluster: {bad}: {message}") and err.count("\n") == 1


def test_out_writes_the_report(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps(BASE))
    (tmp_path / "b.json").write_text(json.dumps(changed(pool={"scalingConfig": {"minSize": 1, "maxSize": 4}})))
    assert diff.main([str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "r.md")]) == 0
    assert capsys.readouterr().out == ""
    assert "`scalingConfig.minSize`: `0` → `1`" in (tmp_path / "r.md").read_text()


# -- the real program ------------------------------------------------------------------------


def real_plan(overrides: dict | None = None) -> dict:
    raw = stack_raw("prod", overrides)
    rec = shared_run(raw, "prod")
    report_ = plan_report.build_report(parse_stack(raw, stackfile.project_name(), "prod"), rec, [])
    return json.loads(json.dumps(report_, sort_keys=True, default=str))


@pytest.fixture(scope="module")
def prod_pair() -> tuple[dict, dict]:
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "minNodes": 0, "maxNodes": 20, "capacityType":
              "ON_DEMAND", "rootVolumeGiB": 500, "fabricTest": True, "idleMinutes": 5, "remediation": "on"}]
    return real_plan(), real_plan({"gpucluster:gpuPools": pools})


def test_a_larger_pool_changes_its_node_group_quota_and_cost_and_nothing_else(prod_pair):
    old, new = prod_pair
    result = plan_diff.compare(old, new)
    assert (result.added, result.removed) == ([], [])
    assert {c.row["name"]: [p for p, _, _ in c.properties] for c in result.changed} == {
        # The bounds reach the deployed group through its scaling tag and the hook (node_updates).
        "gpucluster-prod-h100-node-group": ["scalingConfig.maxSize", "tags.gpucluster.io/scaling"],
        "gpucluster-prod-queue-cluster-queue": [
            f"spec.resourceGroups[0].flavors[1].resources[{i}].nominalQuota" for i in range(5)],
        # language's guarantee is a share of the pool (0.25: 4 of 16 nodes, 5 of 20); vision's is 32 GPUs, fixed.
        "gpucluster-prod-queue-team-language-cluster-queue": [
            f"spec.resourceGroups[0].flavors[1].resources[{i}].nominalQuota" for i in range(5)],
        # Prometheus is sized for every pool at maxNodes: four more p5 nodes' series.
        "gpucluster-prod-monitoring-stack": ["values.prometheus.prometheusSpec.resources.limits.memory",
                                             "values.prometheus.prometheusSpec.resources.requests.memory"],
        # The goodput controller caps quarantines at a quarter of each pool's maxNodes (its config, read each pass).
        "gpucluster-prod-goodput-configmap-gpucluster-goodput-config": ["data.config.json"],
    }
    assert not any(c.replaced for c in result.changed)
    gpus = {c.row["name"]: (before, after) for c in result.changed for p, before, after in c.properties
            if p == "spec.resourceGroups[0].flavors[1].resources[2].nominalQuota"}
    # The training namespace keeps what the teams are not guaranteed: 16 - 8 nodes, then 20 - 4 - 5.
    assert gpus == {"gpucluster-prod-queue-cluster-queue": ("64", "88"),
                    "gpucluster-prod-queue-team-language-cluster-queue": ("32", "40")}
    text = plan_diff.render(result)
    # 4 more nodes at maxNodes, and their 500 GiB gp3 root volumes.
    four_more = round(4 * catalog.price("p5.48xlarge") + 4 * 500 * 1.073741824 * 0.08 / 730, 2)
    before = old["cost"]["maxPerHour"]
    assert f"| at maximum scale | ${before:,.2f} | ${before + four_more:,.2f} | +{four_more:,.2f} |" in text
    assert f"| at minimum scale | ${old['cost']['minPerHour']:,.2f} | ${old['cost']['minPerHour']:,.2f} | +0.00 |" in text


def test_plans_carry_every_resource_with_secrets_masked(prod_pair):
    old, _ = prod_pair
    assert len(old["resources"]) == len({r["urn"] for r in old["resources"]}) > 100
    (provider,) = [r for r in old["resources"] if r["type"] == "pulumi:providers:kubernetes"]
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    dra = next(r for r in old["resources"] if r["type"].endswith("DataRepositoryAssociation"))
    assert dra["hooks"] == {"before_delete": ["gpucluster-export-fsx-to-s3"]}
