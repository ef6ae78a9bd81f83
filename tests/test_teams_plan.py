"""The plan's Teams section: guaranteed, borrowable and lendable GPUs per team and pool, the training namespace's
remainder, the worst-case month, the warnings; nothing at all for a stack without teams."""

from __future__ import annotations

import json

import pytest
import yaml

from bootstrap.offline import plan_report, plan_text
from components.core.planning import cost
from components.core.teams import plan as planning
from tests.conftest import ROOT, plan, recording, stack_config

P5_GPU_HOUR = 55.04 / 8  # p5.48xlarge, the catalog's us-east-1 list price per node-hour, 8 GPUs
VISION = {"name": "vision", "members": ["arn:aws:iam::210987654321:role/vision-dev"]}
LANGUAGE = {"name": "language", "members": ["arn:aws:iam::210987654321:role/language-dev"]}


def teams_plan(teams: list, **overrides) -> planning.TeamsPlan:
    return planning.plan(stack_config("prod", {"gpucluster:teams": teams, **overrides}))


def share(result: planning.TeamsPlan, team: str, pool: str = "h100") -> planning.PoolShare:
    return next(p for t in result.teams if t.name == team for p in t.pools if p.pool == pool)


def test_prods_two_teams_each_guaranteed_four_nodes_borrowing_the_rest():
    result = planning.plan(stack_config("prod"))
    assert [t.name for t in result.teams] == ["vision", "language"]
    for name in ("vision", "language"):
        # 16 nodes x 8 GPUs = 128; less its own 32; the other team lends all of its 32, the training namespace
        # all of its 64: 96 to borrow.
        assert share(result, name) == planning.PoolShare("h100", 4, 32, 96, 32, None, None, P5_GPU_HOUR)
    assert result.remainder == (planning.Remainder("h100", 8, 64),)
    vision = result.teams[0]
    assert vision.guarantee_monthly_usd == round(32 * P5_GPU_HOUR * cost.HOURS_PER_MONTH, 2) == 160716.8
    assert vision.worst_case_monthly_usd == round(128 * P5_GPU_HOUR * 730, 2) == 642867.2
    assert (vision.monthly_budget_usd, vision.weight, vision.members) == (150000, 1.0, 0)



def test_a_stack_without_teams_has_no_teams_plan():
    assert planning.plan(stack_config("dev")) is None
    assert planning.plan(stack_config("prod", {"gpucluster:teams": []})) is None


def test_lend_and_borrow_limits():
    result = teams_plan([
        {**VISION, "pools": {"h100": {"guaranteedGpus": 32, "lendLimitGpus": 16}}},
        {**LANGUAGE, "pools": {"h100": {"guaranteedGpus": 32, "borrowLimitGpus": 16}}},
        {"name": "robotics", "members": ["arn:aws:iam::210987654321:role/r"]},  # no share: borrowing only
    ])
    # language: the pool's 128 less its 32, less the 16 vision keeps; but its own limit is 16.
    assert share(result, "language") == planning.PoolShare("h100", 4, 32, 16, 32, 16, None, P5_GPU_HOUR)
    # vision: 128 - 32 - 0 (language lends all) = 96; it lends 16 of its 32.
    assert (share(result, "vision").borrowable_gpus, share(result, "vision").lendable_gpus) == (96, 16)
    # robotics: no guarantee; 128 less the 16 vision keeps.
    assert share(result, "robotics") == planning.PoolShare("h100", 0, 0, 112, 0, None, None, P5_GPU_HOUR)
    assert result.remainder == (planning.Remainder("h100", 8, 64),)
    assert result.teams[2].worst_case_monthly_usd == round(112 * P5_GPU_HOUR * 730, 2)


def test_every_pool_per_team_at_its_own_price_a_spot_pool_at_its_dearest_type():
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4},
             {"name": "spot", "instanceType": "p4d.24xlarge", "maxNodes": 2, "capacityType": "SPOT",
              "extraInstanceTypes": ["p4de.24xlarge"]}]
    result = teams_plan([{**VISION, "pools": {"spot": {"guaranteedGpus": 8}}}],
                        **{"gpucluster:gpuPools": pools, "gpucluster:jobs": [],
                           "gpucluster:prices": {"p5.48xlarge": 40.0}})
    h100, spot = result.teams[0].pools
    assert (h100.pool, h100.guaranteed_gpus, h100.borrowable_gpus, h100.price_per_gpu_hour) == ("h100", 0, 32, 5.0)
    from components.core.hardware import catalog
    dearest = max(catalog.price(t) / 8 for t in ("p4d.24xlarge", "p4de.24xlarge"))
    assert dearest == catalog.price("p4de.24xlarge") / 8 > catalog.price("p4d.24xlarge") / 8
    assert (spot.guaranteed_gpus, spot.borrowable_gpus, spot.price_per_gpu_hour) == (8, 8, dearest)
    assert result.teams[0].guarantee_monthly_usd == round(8 * dearest * 730, 2)
    assert result.teams[0].worst_case_monthly_usd == round((32 * 5.0 + 16 * dearest) * 730, 2)
    assert result.remainder == (planning.Remainder("h100", 4, 32), planning.Remainder("spot", 1, 8))


@pytest.mark.parametrize(("teams", "overrides", "expected"), [
    # Guarantees of the whole pool: nothing left to the training namespace, where the fabric test runs.
    ([{**VISION, "pools": {"h100": {"guaranteedShare": 0.5}}}, {**LANGUAGE, "pools": {"h100": {"guaranteedShare": 0.5}}}],
     {"gpucluster:jobs": []},
     ["pool h100: the teams' guarantees (vision 8, language 8 nodes) take all 16 nodes, leaving none to the training "
      "namespace 'training': the fabric test (2 nodes) can run only on what the teams lend, and be preempted when "
      "they take it back"]),
    # One node left: the fabric test needs two.
    ([{**VISION, "pools": {"h100": {"guaranteedGpus": 120}}}], {"gpucluster:jobs": []},
     ["pool h100: the training namespace 'training' keeps 1 of 16 nodes after the teams' guarantees (vision 15 "
      "nodes): the fabric test (2 nodes) needs more and runs only on what the teams lend"]),
    # prod's own jobs without a team: llama-70b is the whole pool.
    ([{**VISION, "pools": {"h100": {"guaranteedGpus": 32}}}], {},
     ["pool h100: the training namespace 'training' keeps 12 of 16 nodes after the teams' guarantees (vision 4 "
      "nodes): job llama-70b (16 nodes) needs more and runs only on what the teams lend"]),
    ([{**VISION, "pools": {"h100": {"guaranteedShare": 0.05}}}], {"gpucluster:jobs": []},
     ["team vision: guaranteedShare 0.05 of pool h100's 16 nodes rounds down to 0 nodes: no guarantee"]),
    ([{"name": "vision"}], {"gpucluster:jobs": []},
     ["team vision: no members (teams[].members): only the admins can run its jobs"]),
    ([{**VISION, "pools": {"h100": {"guaranteedGpus": 32}}, "monthlyBudgetUsd": 100000}], {"gpucluster:jobs": []},
     ["team vision: its guarantee in use all month costs $160,717, more than its monthlyBudgetUsd $100,000: "
      "`bootstrap submit` refuses its jobs before it uses all of its guarantee for a month (informational)"]),
    # A budget the guarantee fits: no warning (its worst case, $642,867, may pass it: that is what submit checks).
    ([{**VISION, "pools": {"h100": {"guaranteedGpus": 32}}, "monthlyBudgetUsd": 200000}], {"gpucluster:jobs": []},
     []),
])
def test_warnings(teams, overrides, expected):
    assert list(teams_plan(teams, **overrides).warnings) == expected


def test_a_guarantee_past_a_capacity_blocks_instances():
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4, "capacityType": "CAPACITY_BLOCK",
              "capacityReservationId": "cr-0123456789abcdef0"}]
    cfg = stack_config("prod", {"gpucluster:gpuPools": pools, "gpucluster:jobs": [],
                                "gpucluster:teams": [{**VISION, "pools": {"h100": {"guaranteedGpus": 24}}}]})
    warning = ("pool h100: the teams' guarantees (vision 3 nodes) add up to 3 nodes, more than its Capacity Block's 2 "
               "instances: the pool launches only into its reservation, so a guarantee past it cannot be met")
    assert warning in planning.plan(cfg, {"h100": 2}).warnings
    assert warning not in planning.plan(cfg, {"h100": 3}).warnings
    assert warning not in planning.plan(cfg).warnings  # not looked up: nothing to compare with


# -- the plan's report and text ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def prod_report():
    result = plan("--stack", "prod", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_prod_report_has_its_teams(prod_report):
    t = prod_report["teams"]
    assert (t["cohort"], t["hoursPerMonth"]) == ("gpucluster", 730)
    vision = t["teams"][0]
    assert vision == {
        "name": "vision", "namespace": "vision", "members": 0, "weight": 1, "priorityClasses":
            ["gpucluster-training", "gpucluster-low"], "monthlyBudgetUsd": 150000, "guaranteeMonthlyUsd": 160716.8,
        "worstCaseMonthlyUsd": 642867.2,
        "pools": [{"pool": "h100", "guaranteedNodes": 4, "guaranteedGpus": 32, "borrowableGpus": 96,
                   "lendableGpus": 32, "borrowLimitGpus": None, "lendLimitGpus": None, "pricePerGpuHour": 6.88}]}
    assert t["trainingNamespace"] == {"namespace": "training", "pools": [{"pool": "h100", "nodes": 8, "gpus": 64}]}
    assert len(t["warnings"]) == 5


def test_the_prod_text_has_a_teams_section():
    out = plan("--stack", "prod").stdout
    section = out.split("\nTeams (", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[:4] == [
        "Kueue cohort gpucluster: a guarantee each, borrowing what the others leave idle, fair sharing by weight; "
        "README, Teams)",
        "  vision: namespace vision, weight 1, 0 members, priority classes gpucluster-training, gpucluster-low",
        "    h100: guaranteed 32 GPUs (4 nodes), borrows up to 96 GPUs, lends up to 32 GPUs; $6.88/GPU-h",
        "    worst case $642,867 a month (its guarantee and all it may borrow, 730 h); budget $150,000 a month",
    ]
    assert "  training (the training namespace: the fabric test, jobs without a team) keeps h100 64 GPUs (8 nodes), " \
           "lent while idle" in section
    assert "  WARNING: team language: no members (teams[].members): only the admins can run its jobs" in section
    # Before the jobs, which queue into the teams' namespaces or the training namespace.
    assert out.index("\nTeams (") < out.index("\nJobs (queued in Kueue")


def test_the_teams_section_is_all_the_text_teams_add():
    """Printed only when teams exist: the prod text without its Teams block is the text of its report without
    `teams`, so a stack without teams prints exactly what it printed before."""
    rec = recording("prod")
    report = plan_report.build_report(stack_config("prod"), rec, [])
    tree = plan_text.resource_tree(rec)
    with_teams = plan_text.render(report, tree)
    start = with_teams.index("\nTeams (")
    end = with_teams.index("\n\nJobs (queued in Kueue")
    without = {k: v for k, v in report.items() if k != "teams"}
    assert with_teams[:start] + with_teams[end + 1:] == plan_text.render(without, tree)


def test_a_stack_without_teams_has_no_teams_in_its_plan():
    report = json.loads(plan("--stack", "dev", "--json").stdout)
    assert "teams" not in report
    assert "Teams" not in plan("--stack", "dev").stdout
    # Its jobs queue as before: the training namespace's queue at the training class.
    assert {(j["queue"], j["priority"]) for j in report["jobs"] if j["launcher"] != "mpirun (fabric test)"} == \
        {("training/gpu", "gpucluster-training")}
    assert plan_report.teams_summary(stack_config("dev"), recording("dev")) is None


def test_a_team_jobs_row_names_its_teams_queue_and_class():
    cfg = stack_config("prod", {"gpucluster:jobs": [
        {"name": "t", "pool": "h100", "nodes": 1, "launcher": "mpirun", "image": "repo/train:1.0",
         "command": ["python", "train.py"], "team": "language", "priorityClass": "gpucluster-high"}]})
    rows = {r["name"]: r for r in plan_report.job_rows(cfg)}
    assert (rows["t"]["queue"], rows["t"]["priority"]) == ("language/gpu", "gpucluster-high")
    assert (rows["nccl-tests-h100"]["queue"], rows["nccl-tests-h100"]["priority"]) == \
        ("training/gpu", "gpucluster-fabric-test")


def test_the_plan_reads_a_capacity_blocks_instances_from_the_cost_estimate(tmp_path):
    path = tmp_path / "Pulumi.block.yaml"
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"].update({
        "gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"],
        "gpucluster:publicAccessCidrs": ["52.94.76.10/32"],
        "gpucluster:gpuPools": [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 4,
                                 "capacityType": "CAPACITY_BLOCK", "capacityReservationId": "cr-0123456789abcdef0"}],
        "gpucluster:jobs": [],
        "gpucluster:teams": [{**VISION, "pools": {"h100": {"guaranteedGpus": 24}}}],
    })
    path.write_text(yaml.safe_dump(document))
    result = plan("--stack", "block", "--stack-file", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # The mocks' Capacity Block holds 2 instances (bootstrap/offline/mocks.py), as the cost line says.
    assert any("reservation of 2 billed whether used or not" in line["item"] for line in report["cost"]["lines"])
    assert ("pool h100: the teams' guarantees (vision 3 nodes) add up to 3 nodes, more than its Capacity Block's 2 "
            "instances: the pool launches only into its reservation, so a guarantee past it cannot be met") \
        in report["teams"]["warnings"]


def test_reserved_nodes_ignores_a_reservation_it_only_assumed():
    class Rec:
        stack_outputs = {"estimatedCostPerHourUsd": {"lines": [
            {"item": "GPU pool odcr 0-4 x p5.48xlarge (reservation of 4 billed whether used or not (assumed maxNodes))"},
            {"item": "GPU pool block 0-4 x p5.48xlarge (reservation of 2 billed whether used or not; Capacity Block "
                     "price is set at purchase: on-demand rate shown)"},
            {"item": "GPU pool h100 0-16 x p5.48xlarge"}]}}

    assert plan_report.reserved_nodes(Rec()) == {"block": 2}


def _gpu_quotas(rec) -> dict[str, dict[str, dict[str, int]]]:
    """Each registered ClusterQueue's nvidia.com/gpu quota on pool h100's flavor, as integers."""
    out = {}
    for r in rec.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"):
        flavors = r.inputs["spec"]["resourceGroups"][0]["flavors"]
        (gpu,) = [x for f in flavors if f["name"] == "pool-h100" for x in f["resources"] if x["name"] == "nvidia.com/gpu"]
        out[r.inputs["metadata"]["name"]] = {k: int(v) for k, v in gpu.items() if k != "name"}
    return out


def test_the_plans_numbers_are_the_registered_queues_quotas():
    """What the plan says a team is guaranteed, may borrow and lend is what Kueue is given: nominal quota,
    borrowingLimit and lendingLimit of its ClusterQueue; the rest of the pool is the training namespace's."""
    teams = [{**VISION, "pools": {"h100": {"guaranteedGpus": 32, "lendLimitGpus": 16}}},
             {**LANGUAGE, "pools": {"h100": {"guaranteedShare": 0.25, "borrowLimitGpus": 16}}}]
    overrides = {"gpucluster:teams": teams}
    quotas = _gpu_quotas(recording("prod", overrides))
    result = planning.plan(stack_config("prod", overrides))
    vision, language = share(result, "vision"), share(result, "language")
    assert quotas["gpucluster-team-vision"] == {"nominalQuota": vision.guaranteed_gpus,
                                                "lendingLimit": vision.lendable_gpus} == {"nominalQuota": 32,
                                                                                          "lendingLimit": 16}
    assert quotas["gpucluster-team-language"] == {"nominalQuota": language.guaranteed_gpus,
                                                  "borrowingLimit": language.borrowable_gpus} == \
        {"nominalQuota": 32, "borrowingLimit": 16}
    assert quotas["gpucluster"] == {"nominalQuota": result.remainder[0].gpus} == {"nominalQuota": 64}
    # What the others lend vision: the cohort's 128 less its own 32 and the 0 language keeps back.
    assert sum(q["nominalQuota"] - q.get("lendingLimit", q["nominalQuota"]) for name, q in quotas.items()
               if name != "gpucluster-team-vision") == 0
    assert vision.borrowable_gpus == 128 - 32 == 96
