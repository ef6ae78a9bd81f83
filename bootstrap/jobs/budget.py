"""A team's GPU spend this month, from Prometheus, and whether a job's worst case fits the team's budget.

What fits is the budget less the spend so far and less what the team's unfinished jobs may still
cost (bootstrap/jobs/committed.py). `--over-budget` is an admin's: it is honoured only for a caller
the API server lets do what only the cluster's admins may (ADMIN_CHECK).

Pure but for the two ways to ask Prometheus, each a `Query` (a PromQL text
and the instant to evaluate it at -> the instant vector, or SpendUnknown
with the reason): `proxy_query`, through the API server's service proxy to
kube-prometheus-stack's Prometheus (the default: it needs only the
kubeconfig), and `url_query`, any URL (a port-forward's). The spend is
components.core.observability.spend's per-minute rule summed over exactly
the seconds since 00:00 UTC on the 1st.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from bootstrap.cluster.api import ClusterUnreachable, KubeError
from bootstrap.jobs.committed import Committed, usd
from components.core.config.teams import BUDGET_RETENTION_DAYS
from components.core.observability import prometheus_stack as ps
from components.core.observability import spend

Query = Callable[[str, float], list[dict[str, Any]]]

SERVICE = ps.PROMETHEUS_SERVICE
PORT_NAME = ps.PROMETHEUS_PORT_NAME
PROXY_PATH = f"/api/v1/namespaces/{ps.NAMESPACE}/services/{SERVICE}:{PORT_NAME}/proxy/api/v1/query"
URL_ENV = "GPUCLUSTER_PROMETHEUS_URL"
TIMEOUT_SECONDS = 20
FULL_MONTH_DAYS = BUDGET_RETENTION_DAYS  # retentionDays that hold the month so far (the config requires it)
OVERRIDE = "--over-budget"
# Who may override: one the API server lets create a Kueue ClusterQueue (a SelfSubjectAccessReview). Only the
# cluster's admins may; a team member's Role is namespaced and names no ClusterQueue (components/core/teams/access.py).
ADMIN_CHECK = ("create", "kueue.x-k8s.io", "clusterqueues")
PORT_FORWARD = (f"`kubectl -n {ps.NAMESPACE} port-forward svc/{SERVICE} 9090:9090`, then --prometheus-url "
                "http://localhost:9090")


class SpendUnknown(Exception):
    """Prometheus could not say what the team spent; the message says why."""


@dataclass(frozen=True)
class Spend:
    namespace: str
    usd: float
    gpu_hours: float
    since: datetime  # 00:00 UTC on the 1st
    at: datetime
    partial: str | None = None  # why this is only part of the month (Prometheus no longer holds its start)

    def to_dict(self) -> dict[str, Any]:
        return {"usd": round(self.usd, 2), "gpuHours": round(self.gpu_hours, 2), "since": self.since.isoformat(),
                "at": self.at.isoformat(), "partial": self.partial}


def month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _number(result: list[dict[str, Any]], promql: str) -> float | None:
    """The value of a one-series answer; None when Prometheus has no such series."""
    if not result:
        return None
    try:
        value = sum(float(item["value"][1]) for item in result)
    except (KeyError, IndexError, TypeError, ValueError):
        raise SpendUnknown(f"Prometheus answered {promql!r} with something other than a vector of numbers") from None
    if math.isnan(value):
        raise SpendUnknown(f"Prometheus answered {promql!r} with NaN")
    return value


def read(query: Query, namespace: str, now: datetime, retention_days: int | None = None) -> Spend:
    """What the team (its namespace) spent from the 1st, 00:00 UTC, to `now`."""
    since = month_start(now)
    seconds = int((now - since).total_seconds())
    queries = spend.month_to_date_queries(namespace, seconds)
    values = {key: _number(query(promql, now.timestamp()), promql) for key, promql in queries.items()}
    if values["usd"] is None:  # the rule records a 0 for an idle team: no answer is no rule
        raise SpendUnknown(f"Prometheus has no {spend.TEAM_COST} for namespace {namespace} this month: the stack's "
                           "spend rules are not loaded (`pulumi up` with the team), or were loaded under a minute ago")
    partial = None
    if retention_days is not None and seconds > retention_days * 86400:
        partial = (f"Prometheus keeps {retention_days} days (gpucluster:observability.retentionDays) and this month "
                   f"began {seconds / 86400:.1f} days ago, so what ran before the last {retention_days} days is not "
                   f"counted; set retentionDays to {FULL_MONTH_DAYS} or more to hold a whole month")
    return Spend(namespace, values["usd"], values["gpuHours"] or 0.0, since, now, partial)


def worst_case_usd(nodes: int, node_price_per_hour: float, deadline_seconds: int | None) -> float | None:
    """The most the job's GPU nodes can bill: nodes x the pool's price for its whole bound; None: no bound."""
    if deadline_seconds is None:
        return None
    return nodes * node_price_per_hour * deadline_seconds / 3600


@dataclass(frozen=True)
class Verdict:
    """A job against its team's budget. `problem`: None (it fits), "unbounded" (no deadline), "committed-unbounded"
    (an unfinished job of the team has none), "unreadable" (Prometheus did not answer), "partial" (Prometheus no
    longer holds the month's start) or "over"."""

    team: str
    job: str
    budget_usd: float
    worst_case_usd: float | None
    spend: Spend | None
    unreadable: str | None  # why Prometheus could not say
    overridden: bool = False  # --over-budget, and it was needed
    committed: Committed = Committed(())  # the team's unfinished jobs
    not_admin: bool = False  # --over-budget was needed, and the caller is no admin

    @property
    def problem(self) -> str | None:
        if self.worst_case_usd is None:
            return "unbounded"
        if self.committed.usd is None:
            return "committed-unbounded"
        if self.spend is None:
            return "unreadable"
        if self.spend.partial:
            return "partial"
        return "over" if self.spend.usd + self.committed.usd + self.worst_case_usd > self.budget_usd else None

    @property
    def refused(self) -> bool:
        return self.problem is not None and not self.overridden

    @property
    def exit_code(self) -> int:
        """A refusal's: 2 when Prometheus could not be read (as without a cluster), else 1 (a problem found, or
        --over-budget from one who is no admin)."""
        return 2 if self.problem == "unreadable" and not self.not_admin else 1

    @property
    def after_usd(self) -> float | None:
        if self.spend is None or self.worst_case_usd is None or self.committed.usd is None:
            return None
        return self.spend.usd + self.committed.usd + self.worst_case_usd

    def to_dict(self) -> dict[str, Any]:
        after = self.after_usd
        return {"team": self.team, "budgetUsd": self.budget_usd, "spend": self.spend.to_dict() if self.spend else None,
                "spendUnknown": self.unreadable, "committed": self.committed.to_dict(),
                "worstCaseUsd": None if self.worst_case_usd is None else round(self.worst_case_usd, 2),
                "afterUsd": None if after is None else round(after, 2), "problem": self.problem,
                "overBudget": self.overridden, "overBudgetDenied": self.not_admin,
                "warning": self.warning() if self.overridden else None}

    def _what(self) -> str:
        """The problem, in a sentence."""
        if self.problem == "unbounded":
            return (f"team {self.team} has a monthly budget of {usd(self.budget_usd)} and job {self.job!r} has no "
                    "bound, so its worst case is unlimited")
        if self.problem == "committed-unbounded":
            names = self.committed.unbounded
            which = f"job {names[0]!r} has" if len(names) == 1 else f"jobs {', '.join(map(repr, names))} have"
            return (f"team {self.team} has a monthly budget of {usd(self.budget_usd)} and its unfinished {which} no "
                    f"bound, so what they may still cost is unlimited ({self.committed.phrase()})")
        if self.problem == "unreadable":
            return f"team {self.team}'s budget cannot be checked: its spend this month is unknown: {self.unreadable}"
        assert self.spend is not None and self.worst_case_usd is not None and self.committed.usd is not None
        if self.problem == "partial":
            return (f"team {self.team}'s budget cannot be checked on part of a month: {self.spend.partial} "
                    f"(spend counted: {usd(self.spend.usd)})")
        held = f", is {self.committed.phrase()}," if self.committed.items else ""
        return (f"team {self.team} has spent {usd(self.spend.usd)} this month (since {self.spend.since:%Y-%m-%d} "
                f"UTC){held} and job {self.job!r} may cost up to {usd(self.worst_case_usd)} more: "
                f"{usd(self.spend.usd + self.committed.usd + self.worst_case_usd)}, over its monthly budget of "
                f"{usd(self.budget_usd)}")

    def refusal(self) -> str:
        how = {"unbounded": "bound it with maxCostUsd (USD) or runPolicy.activeDeadlineSeconds in the job",
               "committed-unbounded": "cancel the unfinished jobs with no bound (`python -m bootstrap cancel JOB "
                                      f"--team {self.team}`) or wait until they finish",
               "unreadable": f"reach Prometheus another way ({PORT_FORWARD})",
               "partial": f"raise retentionDays to {FULL_MONTH_DAYS} or more and `pulumi up`",
               "over": "lower the job's bound (maxCostUsd, runPolicy.activeDeadlineSeconds) or its nodes, cancel "
                       "what can wait, or raise teams[].monthlyBudgetUsd and `pulumi up`"}[self.problem or "over"]
        if self.not_admin:
            verb, group, resource = ADMIN_CHECK
            return (f"not submitted: {OVERRIDE} is for the cluster's admins, and the API server says you may not "
                    f"{verb} {resource}.{group}: {self._what()}. Either {how}, or ask an admin to submit it with "
                    f"{OVERRIDE}")
        return f"not submitted: {self._what()}. Either {how}, or, as an admin, submit anyway with {OVERRIDE}"

    def warning(self) -> str:
        return f"OVER BUDGET: submitted anyway ({OVERRIDE}): {self._what()}"

    def summary(self) -> str:
        """The line a job that fits gets."""
        assert self.spend is not None and self.worst_case_usd is not None and self.committed.usd is not None
        left = self.budget_usd - self.spend.usd - self.committed.usd - self.worst_case_usd
        held = f"{self.committed.phrase()}; " if self.committed.items else ""
        return (f"budget: team {self.team} has spent {usd(self.spend.usd)} of {usd(self.budget_usd)} this month; "
                f"{held}this job's worst case {usd(self.worst_case_usd)} leaves {usd(left)}")


def judge(team: str, job: str, budget_usd: float, worst: float | None, read_spend: Callable[[], Spend],
          override: bool, committed: Committed, is_admin: Callable[[], bool]) -> Verdict:
    """Reads the spend and weighs the team's unfinished jobs and this job's worst case against what is left.
    `override` marks a problem as overridden (the caller submits) only when `is_admin()` (asked only then)
    says so; else the verdict is refused for that."""
    spent, unreadable = None, None
    try:
        spent = read_spend()
    except SpendUnknown as err:
        unreadable = str(err)
    verdict = Verdict(team, job, budget_usd, worst, spent, unreadable, committed=committed)
    if not override or verdict.problem is None:
        return verdict
    return replace(verdict, overridden=True) if is_admin() else replace(verdict, not_admin=True)


# -- asking Prometheus ------------------------------------------------------------------------------


def _result(body: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, dict) else None
        raise SpendUnknown(f"{where} answered with an error: {error or str(body)[:200]}")
    data = body.get("data") or {}
    if data.get("resultType") != "vector":
        raise SpendUnknown(f"{where} answered a {data.get('resultType')!r}, not an instant vector")
    return data.get("result") or []


def proxy_query(kube: Any) -> Query:
    """Through the API server: GET services/proxy on the Prometheus Service (RBAC: `get` on `services/proxy`
    in the metrics namespace)."""
    where = f"Prometheus through the API server's proxy to service {ps.NAMESPACE}/{SERVICE}"

    def query(promql: str, at: float) -> list[dict[str, Any]]:
        try:
            body = kube._call("GET", PROXY_PATH, {"query": promql, "time": f"{at:.3f}"})  # Kube's one raw GET
        except KubeError as err:
            hint = f" (reading it needs `get` on services/proxy in namespace {ps.NAMESPACE})" if err.status == 403 else ""
            raise SpendUnknown(f"{where}: the API server said {err.status} {err.reason}: {err.message}{hint}") from None
        except ClusterUnreachable as err:
            raise SpendUnknown(f"{where}: cannot reach the cluster: {err}") from None
        return _result(body, where)

    return query


def url_query(base_url: str, timeout: float = TIMEOUT_SECONDS) -> Query:
    """Prometheus' HTTP API at `base_url` (GET /api/v1/query)."""
    where = f"Prometheus at {base_url}"

    def query(promql: str, at: float) -> list[dict[str, Any]]:
        url = f"{base_url.rstrip('/')}/api/v1/query?{urlencode({'query': promql, 'time': f'{at:.3f}'})}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                return _result(json.loads(response.read()), where)
        except urllib.error.HTTPError as err:
            try:
                body = json.loads(err.read())
            except ValueError:
                body = None
            error = body.get("error") if isinstance(body, dict) else None
            raise SpendUnknown(f"{where} said {err.code} {err.reason}" + (f": {error}" if error else "")) from None
        except (urllib.error.URLError, OSError) as err:
            raise SpendUnknown(f"{where} did not answer: {getattr(err, 'reason', err)}") from None
        except ValueError:
            raise SpendUnknown(f"{where} answered something other than JSON") from None

    return query
