"""gpucluster:teams and jobs[].team / priorityClass: defaults, every problem with its key, value and what is
allowed, all at once, and the CLI's plan refusing them without a traceback."""

from __future__ import annotations

import pytest
import yaml

from components.core.config import ConfigError, docs
from components.core.config.teams import DEFAULT_TEAM_PRIORITIES, TEAMS_MAX, TeamConfig, TeamPoolShare
from components.core.stack_config import parse as parse_stack
from tests.conftest import ROOT, plan, stack_config, stack_raw

# prod: one pool h100, p5.48xlarge (8 GPUs per node), maxNodes 16; trainingNamespace training.
JOB = {"name": "t", "pool": "h100", "nodes": 1, "launcher": "mpirun", "image": "repo/train:1.0",
       "command": ["python", "train.py"]}
MEMBER = "arn:aws:iam::210987654321:role/vision-dev"
ADMIN = "arn:aws:iam::000000000000:role/gpucluster-admin"  # the plan's stand-in admin (PLAN_STANDINS)
RESERVED = "default, kube-system, kube-public, kube-node-lease, mpi-operator, kubeflow-system, kueue-system, kubeflow"


def problems(teams: list | None = None, stack: str = "prod", **overrides) -> list[str]:
    given = dict(overrides)
    if teams is not None:
        given["gpucluster:teams"] = teams
    with pytest.raises(ConfigError) as info:
        parse_stack(stack_raw(stack, given), "gpucluster", stack)
    return [str(p) for p in info.value.problems]


def test_prod_ships_two_teams_with_their_defaults():
    cfg = stack_config("prod")
    vision, language = cfg.teams
    assert (vision.name, vision.namespace, vision.group) == ("vision", "vision", "gpucluster:team:vision")
    assert vision.members == () and vision.weight == 1.0 and vision.monthly_budget_usd == 150000
    assert vision.priority_classes == ("gpucluster-training", "gpucluster-low") == DEFAULT_TEAM_PRIORITIES
    assert language.priority_classes == ("gpucluster-high", "gpucluster-training", "gpucluster-low")
    # guaranteedGpus 32 and guaranteedShare 0.25 of 16 nodes: both 4 whole nodes.
    assert vision.pools["h100"].guaranteed_nodes(16, 8) == 4
    assert language.pools["h100"].guaranteed_nodes(16, 8) == 4
    assert cfg.team("language") is language and cfg.jobs[0].team is None
    assert cfg.namespace_of(cfg.jobs[0]) == "training"


def test_dev_has_no_teams_and_jobs_keep_the_training_class():
    cfg = stack_config("dev")
    assert cfg.teams == ()
    assert {(j.team, j.priority_class) for j in cfg.jobs} == {(None, "gpucluster-training")}


@pytest.mark.parametrize(("share", "max_nodes", "per_node", "nodes"), [
    ({"guaranteedShare": 0.25}, 16, 8, 4),
    ({"guaranteedShare": 0.3}, 10, 8, 3),  # 3.0000000000000004 nodes: rounded down, not to 4
    ({"guaranteedShare": 0.7}, 10, 8, 7),  # 7.000000000000001
    ({"guaranteedShare": 0.29}, 100, 8, 29),  # 28.999999999999996: a float's error, not a share below 29
    ({"guaranteedShare": 0.05}, 16, 8, 0),  # 0.8 of a node: none
    ({"guaranteedShare": 1}, 16, 8, 16),
    ({"guaranteedGpus": 32}, 16, 8, 4),
    ({"guaranteedGpus": 0}, 16, 8, 0),
    ({}, 16, 8, 0),
])
def test_guaranteed_nodes_are_whole_nodes_rounded_down(share, max_nodes, per_node, nodes):
    assert TeamPoolShare.model_validate(share).guaranteed_nodes(max_nodes, per_node) == nodes


def test_a_team_with_only_a_name_takes_every_default():
    team = TeamConfig.model_validate({"name": "a"})
    assert (team.members, team.pools, team.weight, team.monthly_budget_usd, team.priority_classes) == \
        ((), {}, 1.0, None, ("gpucluster-training", "gpucluster-low"))
    cfg = stack_config("prod", {"gpucluster:teams": [{"name": "a", "pools": {"h100": {}}}]})
    share = cfg.teams[0].pools["h100"]
    assert (share.guaranteed_gpus, share.guaranteed_share, share.borrow_limit_gpus, share.lend_limit_gpus) == \
        (None, None, None, None)


def test_the_engine_strings_of_numbers_are_read():
    # `pulumi config set --path 'gpucluster:teams[0].weight' 2` stores text.
    cfg = stack_config("prod", {"gpucluster:teams": [{"name": "a", "weight": "2", "monthlyBudgetUsd": "1e4",
                                                      "pools": {"h100": {"guaranteedGpus": "16"}}}]})
    team = cfg.teams[0]
    assert (team.weight, team.monthly_budget_usd, team.pools["h100"].guaranteed_gpus) == (2.0, 10000.0, 16)


# (teams, the problems, exactly)
BAD_TEAMS = [
    ([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 12}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedGpus: got 12; whole nodes: a multiple of 8 (p5.48xlarge has 8 GPUs "
      "per node)"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 32, "guaranteedShare": 0.5}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedShare: got 0.5 with guaranteedGpus 32; give one of them"]),
    ([{"name": "vision", "pools": {"a100": {"guaranteedGpus": 8}}}],
     ["gpucluster:teams[0].pools.a100: no such GPU pool; gpuPools: h100"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedShare": 0.75}}},
      {"name": "language", "pools": {"h100": {"guaranteedShare": 0.5}}}],
     ["gpucluster:teams: the teams' guarantees on pool 'h100' add up to 20 nodes (160 GPUs); the pool holds "
      "maxNodes 16 (128 GPUs): lower a guarantee or raise maxNodes"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 32, "lendLimitGpus": 40}}}],
     ["gpucluster:teams[0].pools.h100.lendLimitGpus: got 40; a team lends only from its guarantee (32 GPUs)"]),
    ([{"name": "vision", "pools": {"h100": {"lendLimitGpus": 8}}}],
     ["gpucluster:teams[0].pools.h100.lendLimitGpus: got 8; a team lends only from its guarantee (0 GPUs)"]),
    ([{"name": "vision", "pools": {"h100": {"borrowLimitGpus": 7}}}],
     ["gpucluster:teams[0].pools.h100.borrowLimitGpus: got 7; whole nodes: a multiple of 8 (p5.48xlarge has 8 "
      "GPUs per node)"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedShare": 0}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedShare: got 0; must be a number > 0 and <= 1"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedShare": 1.5}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedShare: got 1.5; must be a number > 0 and <= 1"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedGpus": -8}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedGpus: got -8; must be an integer >= 0"]),
    ([{"name": "vision", "pools": {"h100": {"guaranteedNodes": 1}}}],
     ["gpucluster:teams[0].pools.h100.guaranteedNodes: unknown key; known keys: borrowLimitGpus, guaranteedGpus, "
      "guaranteedShare, lendLimitGpus"]),
    ([{"name": "vision", "budget": 1}],
     ["gpucluster:teams[0].budget: unknown key; known keys: jobPolicyArns, members, monthlyBudgetUsd, name, pools, "
      "priorityClasses, weight"]),
    ([{"pools": {}}], ["gpucluster:teams[0].name: is required (a lowercase DNS label of at most 24 characters)"]),
    ([{"name": "Vision_1"}], ["gpucluster:teams[0].name: got 'Vision_1'; must be a lowercase DNS label of at most 24 "
                              "characters"]),
    ([{"name": "a" * 25}], [f"gpucluster:teams[0].name: got '{'a' * 25}'; must be at most 24 characters"]),
    ([{"name": "vision"}, {"name": "vision"}],
     ["gpucluster:teams[1].name: duplicate team name 'vision' (first at teams[0])"]),
    ([{"name": "vision", "priorityClasses": []}],
     ["gpucluster:teams[0].priorityClasses: is empty; name at least one of gpucluster-high, gpucluster-training, "
      "gpucluster-low"]),
    ([{"name": "vision", "priorityClasses": ["gpucluster-low", "gpucluster-low"]}],
     ["gpucluster:teams[0].priorityClasses[1]: got 'gpucluster-low'; a repeat"]),
    ([{"name": "vision", "priorityClasses": ["gpucluster-fabric-test"]}],
     ["gpucluster:teams[0].priorityClasses[0]: got 'gpucluster-fabric-test'; allowed: gpucluster-high, "
      "gpucluster-training, gpucluster-low"]),
    ([{"name": "vision", "weight": 0}], ["gpucluster:teams[0].weight: got 0; must be a number > 0"]),
    ([{"name": "vision", "monthlyBudgetUsd": -5}], ["gpucluster:teams[0].monthlyBudgetUsd: got -5; must be a number > 0"]),
    ([{"name": "vision", "members": ["vision-dev"]}],
     ["gpucluster:teams[0].members[0]: got 'vision-dev'; must be an IAM role or user ARN, "
      "arn:aws:iam::<12-digit account>:role/<name> or :user/<name>"]),
    ([{"name": "vision", "members": [ADMIN]}],
     [f"gpucluster:teams[0].members[0]: got '{ADMIN}'; an admin (adminPrincipalArns) already has cluster admin, and "
      "EKS allows one access entry per principal"]),
    ([{"name": "vision", "members": [MEMBER]}, {"name": "language", "members": [MEMBER]}],
     [f"gpucluster:teams[1].members[0]: got '{MEMBER}'; already a member of teams[0] (one access entry per "
      "principal, so one team)"]),
    # A repeat within one team is a repeat (it said "already a member of teams[0]" of teams[0] itself).
    ([{"name": "vision", "members": [MEMBER, MEMBER]}], [f"gpucluster:teams[0].members[1]: got '{MEMBER}'; a repeat"]),
    ("vision", ["gpucluster:teams: got 'vision'; must be structured YAML (a list or mapping)"]),
    # The schema's maxItems, which the program did not hold to.
    ([{"name": f"t{i}"} for i in range(TEAMS_MAX + 1)], ["gpucluster:teams: has 33 entries; at most 32"]),
]


@pytest.mark.parametrize(("teams", "expected"), BAD_TEAMS, ids=lambda x: str(x)[:60])
def test_each_bad_team_is_one_exact_problem(teams, expected):
    assert problems(teams) == expected


@pytest.mark.parametrize("name", ["training", "monitoring", "kube-x", "kubeflow", "default", "kueue-system"])
def test_a_team_may_not_take_a_namespace_the_stack_uses(name):
    assert problems([{"name": name}]) == [
        f"gpucluster:teams[0].name: got '{name}'; the team's namespace would be one the stack already uses "
        f"(trainingNamespace 'training', monitoring, kube-*, {RESERVED})"]


def test_the_training_namespace_the_stack_names_is_the_one_refused():
    found = problems([{"name": "research"}], **{"gpucluster:trainingNamespace": "research"})
    assert found == [f"gpucluster:teams[0].name: got 'research'; the team's namespace would be one the stack "
                     f"already uses (trainingNamespace 'research', monitoring, kube-*, {RESERVED})"]


def test_a_share_of_a_pool_with_problems_of_its_own_is_not_reported_again():
    # The pool is declared; its own problem is the one to fix (as for jobs[].pool).
    pools = [{"name": "h100", "instanceType": "p5.48xlarge", "maxNodes": 0}]
    assert problems([{"name": "vision", "pools": {"h100": {"guaranteedGpus": 8}}}], **{
        "gpucluster:gpuPools": pools, "gpucluster:jobs": []}) == [
        "gpucluster:gpuPools[0].maxNodes: got 0; must be an integer from 1 to 450"]


@pytest.mark.parametrize(("job", "teams", "expected"), [
    ({**JOB, "team": "robotics"}, None,
     "gpucluster:jobs[0].team: got 'robotics'; no such team; teams: vision, language"),
    ({**JOB, "team": "robotics"}, [],
     "gpucluster:jobs[0].team: got 'robotics'; no such team; teams: (none)"),
    ({**JOB, "team": "vision", "priorityClass": "gpucluster-high"}, None,
     "gpucluster:jobs[0].priorityClass: got 'gpucluster-high'; team 'vision' may use gpucluster-training, "
     "gpucluster-low"),
    ({**JOB, "priorityClass": "gpucluster-low"}, [],
     "gpucluster:jobs[0].priorityClass: got 'gpucluster-low'; a stack without teams has one class for jobs, "
     "gpucluster-training"),
    ({**JOB, "priorityClass": "gpucluster-fabric-test"}, None,
     "gpucluster:jobs[0].priorityClass: got 'gpucluster-fabric-test'; allowed: gpucluster-high, gpucluster-training, "
     "gpucluster-low"),
    ({**JOB, "team": "Vision"}, None, "gpucluster:jobs[0].team: got 'Vision'; must be the name of a teams entry"),
])
def test_a_jobs_team_and_priority_class(job, teams, expected):
    given = {"gpucluster:jobs": [job]}
    if teams is not None:
        given["gpucluster:teams"] = teams
    assert problems(**given) == [expected]


def test_a_team_job_and_a_training_job_at_another_class_are_fine_with_teams():
    cfg = stack_config("prod", {"gpucluster:jobs": [
        {**JOB, "team": "language", "priorityClass": "gpucluster-high"},
        {**JOB, "name": "u", "priorityClass": "gpucluster-low"}]})
    team_job, training_job = cfg.jobs
    assert (cfg.namespace_of(team_job), team_job.priority_class) == ("language", "gpucluster-high")
    assert (cfg.namespace_of(training_job), training_job.priority_class) == ("training", "gpucluster-low")


def test_every_problem_at_once():
    found = problems([
        {"name": "vision", "members": [ADMIN], "pools": {"h100": {"guaranteedGpus": 12}}},
        {"name": "training", "pools": {"a100": {}}},
        {"name": "language", "weight": 0},
    ], **{"gpucluster:jobs": [{**JOB, "team": "robotics"}, {**JOB, "name": "u", "team": "language"}]})
    assert found == [
        "gpucluster:teams[2].weight: got 0; must be a number > 0",
        "gpucluster:teams[0].pools.h100.guaranteedGpus: got 12; whole nodes: a multiple of 8 (p5.48xlarge has 8 GPUs "
        "per node)",
        "gpucluster:teams[1].name: got 'training'; the team's namespace would be one the stack already uses "
        f"(trainingNamespace 'training', monitoring, kube-*, {RESERVED})",
        "gpucluster:teams[1].pools.a100: no such GPU pool; gpuPools: h100",
        f"gpucluster:teams[0].members[0]: got '{ADMIN}'; an admin (adminPrincipalArns) already has cluster admin, "
        "and EKS allows one access entry per principal",
        # jobs[1]'s team is declared, with a problem of its own: not "no such team" again (it was).
        "gpucluster:jobs[0].team: got 'robotics'; no such team; teams: vision, training",
    ]


def test_the_reference_documents_each_key_of_a_teams_share():
    rows = {key: (kind, default) for key, kind, default, _ in docs.reference_rows()}
    assert rows["teams[].pools.<pool>.guaranteedGpus"] == ("int >= 0", "0, or `guaranteedShare`")
    assert rows["teams[].pools.<pool>.guaranteedShare"] == ("number > 0, <= 1", "none")
    assert rows["teams[].pools.<pool>.borrowLimitGpus"] == ("int >= 0", "no limit")
    assert rows["teams[].pools.<pool>.lendLimitGpus"] == ("int >= 0", "all of its guarantee")
    assert rows["teams[].weight"] == ("number > 0", "`1`")
    assert rows["teams[].priorityClasses"][1] == '`["gpucluster-training", "gpucluster-low"]`'
    assert rows["jobs[].team"] == ("team name", "none")
    assert rows["jobs[].priorityClass"][1] == "`gpucluster-training`"
    assert "teams[].pools" not in rows  # a map of sections: its entries' keys are the rows


def test_the_plan_cli_prints_every_team_problem_without_a_traceback(tmp_path):
    stack = tmp_path / "Pulumi.teams.yaml"
    document = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())
    document["config"].update({
        "gpucluster:adminPrincipalArns": ["arn:aws:iam::210987654321:role/Admin"],
        "gpucluster:publicAccessCidrs": ["52.94.76.10/32"],
        "gpucluster:teams": [{"name": "vision", "pools": {"h100": {"guaranteedGpus": 12}}},
                             {"name": "language", "priorityClasses": ["urgent"]}],
        "gpucluster:jobs": [{**JOB, "team": "vision", "priorityClass": "gpucluster-high"}],
    })
    stack.write_text(yaml.safe_dump(document))
    result = plan("--stack", "teams", "--stack-file", str(stack))
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "gpucluster: 3 configuration problems:",
        "  - gpucluster:teams[1].priorityClasses[0]: got 'urgent'; allowed: gpucluster-high, gpucluster-training, "
        "gpucluster-low",
        "  - gpucluster:teams[0].pools.h100.guaranteedGpus: got 12; whole nodes: a multiple of 8 (p5.48xlarge has 8 "
        "GPUs per node)",
        "  - gpucluster:jobs[0].priorityClass: got 'gpucluster-high'; team 'vision' may use gpucluster-training, "
        "gpucluster-low",
    ]


@pytest.mark.parametrize(("observability", "expected"), [
    ({"enabled": False}, "gpucluster:observability.enabled: is false, but teams[1].monthlyBudgetUsd needs the metrics "
                         "stack: a team's month-to-date spend is what Prometheus recorded"),
    ({"retentionDays": 31}, "gpucluster:observability.retentionDays: got 31; teams[1].monthlyBudgetUsd needs at "
                            "least 32 (a whole month of spend), or no monthlyBudgetUsd"),
    ({}, "gpucluster:observability.retentionDays: got 15; teams[1].monthlyBudgetUsd needs at least 32 (a whole month "
         "of spend), or no monthlyBudgetUsd"),
])
def test_a_budget_needs_a_month_of_metrics(observability, expected):
    teams = [{"name": "vision"}, {"name": "language", "monthlyBudgetUsd": 1000}]
    # prod's pool remediation reads Prometheus too (its own rule): off here, to see the budget's alone.
    pools = {"gpucluster:gpuPools": [{**p, "remediation": "off"}
                                     for p in yaml.safe_load(stack_raw("prod")["gpucluster:gpuPools"])]}
    assert problems(teams, **{"gpucluster:observability": observability}, **pools) == [expected]
    # Without a budget, any retention will do.
    stack_config("prod", {"gpucluster:teams": [{"name": "vision"}], "gpucluster:observability": observability,
                          **pools})


def test_a_team_s_arns_are_in_the_region_s_partition_and_its_policies_are_listed_once():
    policy = "arn:aws:iam::aws:policy/AmazonSageMakerReadOnly"
    assert problems([{"name": "vision", "jobPolicyArns": [policy, policy]}]) == [
        "gpucluster:teams[0].jobPolicyArns[1]: repeats entry [0]"]
    teams = [{"name": "vision", "members": ["arn:aws-cn:iam::210987654321:role/v"],
              "jobPolicyArns": [policy, "arn:aws-us-gov:iam::aws:policy/X"]}]
    assert problems(teams) == [
        "gpucluster:teams[0].members[0]: got 'arn:aws-cn:iam::210987654321:role/v'; it is in partition aws-cn, but "
        "aws:region us-east-1 is in aws: use arn:aws:...",
        "gpucluster:teams[0].jobPolicyArns[1]: got 'arn:aws-us-gov:iam::aws:policy/X'; it is in partition aws-us-gov, "
        "but aws:region us-east-1 is in aws: use arn:aws:..."]
