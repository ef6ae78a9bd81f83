"""gpucluster:teams: the teams that share the cluster, each with a guaranteed share it may lend and borrow past.

A team is a namespace, a Kueue ClusterQueue in the stack's cohort and the
people who may run jobs there. Its guarantee per GPU pool is whole nodes
(given in GPUs, or as a share of the pool's maxNodes); the rest of each
pool stays with the training namespace's queue, lent to whichever team
needs it. What the shares become in Kueue is components.core.teams.queues';
whether they fit the pools is the stack's rule (`stack_problems`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import Field

from components.core.config.base import Choice, Int, Model, Number, Text, rule
from components.core.config.describe import DefaultText
from components.core.config.jobs import TRAINING_PRIORITY
from components.core.config.text.patterns import POLICY_ARN, PRINCIPAL_ARN
from components.core.config.values import (
    DNS_LABEL,
    ROLE_MANAGED_POLICIES_MAX,
    check_policy_arn,
    check_principal_arn,
    policy_list_problems,
)
from components.core.problems import show

# Kueue WorkloadPriorityClasses a team's jobs may name (components.core.kube.queueing.TEAM_PRIORITY_CLASSES).
TEAM_PRIORITIES = ("gpucluster-high", "gpucluster-training", "gpucluster-low")
DEFAULT_TEAM_PRIORITIES = ("gpucluster-training", "gpucluster-low")
TEAMS_MAX = 32
# The team name is its namespace and a part of IAM role and Kueue object names: short, so that
# `<cluster>-team-<name>-job-role` stays within IAM's 64-character role-name prefix budget.
TEAM_NAME_MAX = 24
# Namespaces a team may not take besides the reserved ones: the metrics stack's.
OTHER_TAKEN = ("monitoring",)


class TeamPoolShare(Model):
    """A team's share of one GPU pool: what it is guaranteed, and how far past that it may borrow and lend."""

    guaranteed_gpus: Annotated[Int(ge=0) | None, DefaultText("0, or `guaranteedShare`")] = Field(
        None, description="GPUs the team always gets when it asks, reclaimed from other teams if they borrowed them; "
                          "whole nodes: a multiple of the GPUs per node of the pool's `gpuPools[].instanceType`; not "
                          "with `guaranteedShare`")
    guaranteed_share: Number(gt=0, le=1) | None = Field(
        None, description="the guarantee as a share of the pool's `gpuPools[].maxNodes`, rounded down to whole nodes "
                          "(0.25 of 16 nodes is 4); not with `guaranteedGpus`")
    borrow_limit_gpus: Annotated[Int(ge=0) | None, DefaultText("no limit")] = Field(
        None, description="GPUs the team may use beyond its guarantee while others leave them idle (preempted when "
                          "their owner asks); 0: never past its guarantee; a multiple of the GPUs per node of the "
                          "pool's `gpuPools[].instanceType`")
    lend_limit_gpus: Annotated[Int(ge=0) | None, DefaultText("all of its guarantee")] = Field(
        None, description="GPUs of its idle guarantee other teams may borrow; at most the guarantee "
                          "(`guaranteedGpus`, or `guaranteedShare` of `gpuPools[].maxNodes`); a multiple of the GPUs "
                          "per node of the pool's `gpuPools[].instanceType`")

    @rule("guaranteed_gpus", "guaranteed_share")
    def _one_guarantee(self):
        if self.guaranteed_gpus is not None and self.guaranteed_share is not None:
            yield "guaranteedShare", (f"got {self.guaranteed_share} with guaranteedGpus {self.guaranteed_gpus}; give "
                                      "one of them")

    def guaranteed_nodes(self, max_nodes: int, gpus_per_node: int) -> int:
        if self.guaranteed_share is not None:
            return math.floor(self.guaranteed_share * max_nodes + 1e-9)
        return (self.guaranteed_gpus or 0) // gpus_per_node


class TeamConfig(Model):
    """One team: its namespace, members, guaranteed shares, fair-share weight, budget and priorities."""

    name: Text(DNS_LABEL, f"a lowercase DNS label of at most {TEAM_NAME_MAX} characters",
               short=f"DNS label, at most {TEAM_NAME_MAX}", max_length=TEAM_NAME_MAX) = Field(
        description="the team, and its namespace: unique; not `trainingNamespace`, `monitoring`, `kube-*` nor one the "
                    "program owns")
    members: tuple[Text(allowed="an IAM ARN", short="IAM role/user ARN", check=check_principal_arn,
                        json_pattern=PRINCIPAL_ARN), ...] = Field(
        (), json_schema_extra={"uniqueItems": True},
        description="IAM roles or users who run the team's jobs: each gets an EKS access entry in Kubernetes group "
                    "`gpucluster:team:<name>`, which may create, watch and delete jobs and read pods and logs in the "
                    "team's namespace only; not an admin (`adminPrincipalArns`) nor a member of another team")
    pools: dict[Text(DNS_LABEL, "a gpuPools name", short="GPU pool name", max_length=32), TeamPoolShare] = Field(
        default_factory=dict, description="the team's share of each GPU pool, by `gpuPools[].name`; a pool not "
                                          "listed: no guarantee, borrowing only")
    weight: Number(gt=0) = Field(
        1.0, description="fair-share weight: idle GPUs are shared among borrowing teams in proportion to it (Kueue "
                         "fair sharing)")
    monthly_budget_usd: Annotated[Number(gt=0) | None, DefaultText("none")] = Field(
        None, description="USD per calendar month (UTC) of GPU node time: alerts at 80% and 100%, and `bootstrap "
                          "submit` refuses a job whose worst case would pass it")
    job_policy_arns: tuple[Text(allowed="an IAM managed policy ARN", short="IAM policy ARN",
                                check=check_policy_arn, json_pattern=POLICY_ARN), ...] = Field(
        (), json_schema_extra={"maxItems": ROLE_MANAGED_POLICIES_MAX, "uniqueItems": True},
        description="IAM managed policies for the team's job role, besides read and write on its prefix "
                    "`teams/<name>/` of the stack's bucket, which it always has; the stack's `jobPolicyArns` are the "
                    f"training namespace's only; at most {ROLE_MANAGED_POLICIES_MAX}, no repeats, each in the "
                    "partition of `aws:region`")
    priority_classes: tuple[Choice(*TEAM_PRIORITIES), ...] = Field(
        DEFAULT_TEAM_PRIORITIES, json_schema_extra={"minItems": 1, "uniqueItems": True},
        description="the Kueue priority classes the team's jobs may name (`jobs[].priorityClass`); others are refused "
                    "at creation")

    @property
    def namespace(self) -> str:
        return self.name

    @property
    def group(self) -> str:
        """The Kubernetes group the team's access entries map to."""
        return f"gpucluster:team:{self.name}"

    @rule("job_policy_arns")
    def _job_policies(self):
        for index, reason in policy_list_problems(self.job_policy_arns):
            yield ("jobPolicyArns" if index < 0 else f"jobPolicyArns[{index}]"), reason

    @rule("priority_classes")
    def _priorities(self):
        if not self.priority_classes:
            yield "priorityClasses", f"is empty; name at least one of {', '.join(TEAM_PRIORITIES)}"
        for i, name in enumerate(self.priority_classes):
            if name in self.priority_classes[:i]:
                yield f"priorityClasses[{i}]", f"got {show(name)}; a repeat"


def job_problems(teams: tuple[TeamConfig | None, ...], jobs: tuple[Any, ...],
                 declared: set[str] | None = None) -> Iterator[tuple[str, str]]:
    """A job's team exists and lets it use its priority class; without teams, jobs use the training class.

    `declared`: every team name the stack file declares, valid or not (a job of a declared team with problems
    of its own is not reported again)."""
    by_name: dict[str, TeamConfig] = {}
    for team in teams:
        if team is not None:
            by_name.setdefault(team.name, team)
    for i, job in enumerate(jobs):
        if job is None:
            continue
        if job.team is None:
            if not teams and job.priority_class != TRAINING_PRIORITY:
                yield f"jobs[{i}].priorityClass", (f"got {show(job.priority_class)}; a stack without teams has one "
                                                   f"class for jobs, {TRAINING_PRIORITY}")
            continue
        team = by_name.get(job.team)
        if team is None:
            if declared is None or job.team not in declared:
                yield f"jobs[{i}].team", f"got {show(job.team)}; no such team; teams: {', '.join(by_name) or '(none)'}"
        elif job.priority_class not in team.priority_classes:
            yield f"jobs[{i}].priorityClass", (f"got {show(job.priority_class)}; team {team.name!r} may use "
                                               f"{', '.join(team.priority_classes)}")


def member_problems(teams: tuple[TeamConfig | None, ...], admins: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """One access entry per principal (EKS): no member is an admin or in two teams."""
    seen: dict[str, str] = {}
    for i, team in enumerate(teams):
        for j, arn in enumerate(team.members if team is not None else ()):
            if arn in admins:
                yield f"teams[{i}].members[{j}]", (f"got {show(arn)}; an admin (adminPrincipalArns) already has "
                                                   "cluster admin, and EKS allows one access entry per principal")
            elif seen.get(arn) == f"teams[{i}]":
                yield f"teams[{i}].members[{j}]", f"got {show(arn)}; a repeat"
            elif arn in seen:
                yield f"teams[{i}].members[{j}]", (f"got {show(arn)}; already a member of {seen[arn]} (one access "
                                                   "entry per principal, so one team)")
            else:
                seen[arn] = f"teams[{i}]"


def stack_problems(teams: tuple[TeamConfig | None, ...], pools: dict[str, Any], reserved: tuple[str, ...],
                   training_namespace: str, declared: set[str] | None = None) -> Iterator[tuple[str, str]]:
    """What ties the teams to the rest of the stack: names, pools, whole nodes, guarantees that fit.

    `pools`: the GPU pools that parsed, by name; `declared`: every pool name the stack file declares, valid or
    not (a share of a declared pool with problems of its own is not reported again); `reserved`: namespaces
    no team may take."""
    if len(teams) > TEAMS_MAX:
        yield "teams", f"has {len(teams)} entries; at most {TEAMS_MAX}"
    seen_names: dict[str, int] = {}
    guaranteed: dict[str, int] = {}
    for i, team in enumerate(teams):
        if team is None:
            continue
        where = f"teams[{i}]"
        if team.name in seen_names:
            yield f"{where}.name", f"duplicate team name {show(team.name)} (first at teams[{seen_names[team.name]}])"
        seen_names.setdefault(team.name, i)
        if team.name == training_namespace or team.name in reserved or team.name in OTHER_TAKEN \
                or team.name.startswith("kube-"):
            yield f"{where}.name", (f"got {show(team.name)}; the team's namespace would be one the stack already uses "
                                    f"(trainingNamespace {training_namespace!r}, monitoring, kube-*, "
                                    f"{', '.join(reserved)})")
        for pool_name, share in team.pools.items():
            key = f"{where}.pools.{pool_name}"
            pool = pools.get(pool_name)
            if pool is None:
                if declared is None or pool_name not in declared:
                    yield key, f"no such GPU pool; gpuPools: {', '.join(pools) or '(none defined)'}"
                continue
            per_node = pool.instance.gpu_count
            for field, value in (("guaranteedGpus", share.guaranteed_gpus), ("borrowLimitGpus", share.borrow_limit_gpus),
                                 ("lendLimitGpus", share.lend_limit_gpus)):
                if value is not None and value % per_node:
                    yield f"{key}.{field}", (f"got {value}; whole nodes: a multiple of {per_node} ({pool.instance_type} "
                                             f"has {per_node} GPUs per node)")
            nodes = share.guaranteed_nodes(pool.max_nodes, per_node)
            if share.lend_limit_gpus is not None and share.lend_limit_gpus > nodes * per_node:
                yield f"{key}.lendLimitGpus", (f"got {share.lend_limit_gpus}; a team lends only from its guarantee "
                                               f"({nodes * per_node} GPUs)")
            guaranteed[pool_name] = guaranteed.get(pool_name, 0) + nodes
    for pool_name, nodes in guaranteed.items():
        pool = pools[pool_name]
        if nodes > pool.max_nodes:
            per_node = pool.instance.gpu_count
            yield "teams", (f"the teams' guarantees on pool {pool_name!r} add up to {nodes} nodes "
                            f"({nodes * per_node} GPUs); the pool holds maxNodes {pool.max_nodes} "
                            f"({pool.max_nodes * per_node} GPUs): lower a guarantee or raise maxNodes")


# The longest calendar month and a day to spare: a budget's month-to-date spend is read from Prometheus, which
# must still hold the month's first day (components.core.observability.spend).
BUDGET_RETENTION_DAYS = 32


def budget_problems(teams: tuple[TeamConfig | None, ...], metrics_on: bool,
                    retention_days: int) -> Iterator[tuple[str, str]]:
    """A team's budget is checked against the spend Prometheus recorded this month: it needs the metrics stack,
    keeping at least a whole month."""
    budgeted = [i for i, t in enumerate(teams) if t is not None and t.monthly_budget_usd is not None]
    if not budgeted:
        return
    where = f"teams[{budgeted[0]}].monthlyBudgetUsd"
    if not metrics_on:
        yield "observability.enabled", (f"is false, but {where} needs the metrics stack: a team's month-to-date "
                                        "spend is what Prometheus recorded")
    elif retention_days < BUDGET_RETENTION_DAYS:
        yield "observability.retentionDays", (f"got {retention_days}; {where} needs at least {BUDGET_RETENTION_DAYS} "
                                              "(a whole month of spend), or no monthlyBudgetUsd")

