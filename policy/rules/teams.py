"""Stack rules on teams (gpucluster:teams): each team's queue, its network boundary, its access, its data.

The pack sees resources, not the config, so a team is what the program
renders for it: a ClusterQueue `gpucluster-team-<team>`, or a Kubernetes
group `gpucluster:team:<team>` (its members' EKS access entries, its
RoleBinding). The team's namespace is its name (TeamConfig.namespace).
For each team:

- team-queues: a LocalQueue in its namespace points at its ClusterQueue, which
  is in the cohort `gpucluster` (Kueue v0.19.2 v1beta2 spec.cohortName; v1beta1
  spec.cohort), has a fair-sharing weight above 0 (spec.fairSharing.weight,
  default 1: "A zero weight implies infinite share value",
  apis/kueue/v1beta2/fairsharing_types.go), and admits its namespace only
  (spec.namespaceSelector: "If set to an empty selector `{}`, then all namespaces
  are eligible", clusterqueue_types.go); no other namespace's LocalQueue points at it.
- team-network-default-deny: a NetworkPolicy in its namespace selects every pod
  for ingress and egress and allows nothing (Kubernetes docs, "Network
  Policies": default deny all ingress and all egress traffic).
- team-access-namespaced: its members' access entries have no cluster-wide
  EKS access policy association (accessScope.type cluster, or a namespace
  scope beyond the team's: EKS User Guide, "Associate access policies with
  access entries"), and its group is bound by no ClusterRoleBinding and by
  RoleBindings in its namespace only.
- team-job-role-prefix: its job role reaches its prefix of the bucket only
  (policy/rules/team_roles.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import Resource, get, is_list, is_unknown, problem, related, short_type

# components.core.teams.queues (COHORT, cluster_queue_name) and TeamConfig.group.
COHORT = "gpucluster"
QUEUE_PREFIX = "gpucluster-team-"
GROUP_PREFIX = "gpucluster:team:"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every namespace

ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY_ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"

Finding = tuple[Resource | None, str]


def _kind(res: Resource, kind: str) -> bool:
    return res.type.startswith("kubernetes:") and short_type(res.type) == kind


def _name(res: Resource) -> Any:
    return get(res.props, "metadata.name")


def _namespace(res: Resource) -> Any:
    return get(res.props, "metadata.namespace")


def _team_of_group(group: Any) -> str | None:
    return group[len(GROUP_PREFIX):] if isinstance(group, str) and group.startswith(GROUP_PREFIX) else None


def _subjects(binding: Resource) -> list[str]:
    """The teams whose groups a (Cluster)RoleBinding binds."""
    subjects = get(binding.props, "subjects")
    return [team for s in (subjects if is_list(subjects) else []) if get(s, "kind") == "Group"
            and (team := _team_of_group(get(s, "name"))) is not None]


def _entry_teams(entry: Resource) -> list[str]:
    groups = get(entry.props, "kubernetesGroups")
    return [team for g in (groups if is_list(groups) else []) if (team := _team_of_group(g)) is not None]


def team_names(resources: Sequence[Resource]) -> list[str]:
    """Every team the stack renders something for, sorted."""
    found: set[str] = set()
    for res in resources:
        name = _name(res)
        if _kind(res, "ClusterQueue") and isinstance(name, str) and name.startswith(QUEUE_PREFIX):
            found.add(name[len(QUEUE_PREFIX):])
        elif _kind(res, "RoleBinding") or _kind(res, "ClusterRoleBinding"):
            found.update(_subjects(res))
        elif res.type == ACCESS_ENTRY:
            found.update(_entry_teams(res))
    return sorted(found)


def _anchor(resources: Sequence[Resource], team: str) -> Resource | None:
    """What a finding about something missing is reported on: the team's Namespace, if the stack has it."""
    return next((r for r in resources if _kind(r, "Namespace") and _name(r) == team), None)


def _missing(resources: Sequence[Resource], team: str, what: str, fix: str) -> Finding:
    anchor = _anchor(resources, team)
    if anchor is not None:
        return anchor, problem(anchor, f"team {team}: {what}", fix)
    return None, f"team {team}: {what}. Fix: {fix}."


# -- the queues ------------------------------------------------------------------------------------


def _selects_only(selector: Any, namespace: str) -> bool:
    """Whether a namespaceSelector admits `namespace` alone (by its kubernetes.io/metadata.name label)."""
    if is_unknown(selector):
        return True
    if not isinstance(selector, Mapping):
        return False  # null: no namespace at all, which the queue would never admit (a finding of its own)
    labels = selector.get("matchLabels") or {}
    if isinstance(labels, Mapping) and labels.get(NAMESPACE_NAME_LABEL) == namespace:
        return True
    for expression in selector.get("matchExpressions") or []:
        if get(expression, "key") == NAMESPACE_NAME_LABEL and get(expression, "operator") == "In" \
                and get(expression, "values") == [namespace]:
            return True
    return False


_QUANTITY = re.compile(r"^([0-9]*\.?[0-9]+)([munkMGTPE]?|[KMGTPE]i)?$")


def _weight_problem(weight: Any) -> str | None:
    if is_unknown(weight):
        return None
    if weight is None:
        return "no spec.fairSharing.weight (fair sharing then weighs it 1, whatever the team's weight)"
    match = _QUANTITY.match(str(weight).strip())
    if match and float(match[1]) == 0:
        return "spec.fairSharing.weight 0: an infinite share, always last for idle GPUs (Kueue)"
    return None if match else f"spec.fairSharing.weight {weight!r} is not a Kubernetes quantity above 0"


def team_queues(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """Each team: its ClusterQueue in the cohort, weighted, admitting its namespace only, and its LocalQueue."""
    queues = {_name(r): r for r in resources if _kind(r, "ClusterQueue")}
    local = [r for r in resources if _kind(r, "LocalQueue")]
    out: list[Finding] = []
    for team in team_names(resources):
        name = f"{QUEUE_PREFIX}{team}"
        queue = queues.get(name)
        if queue is None:
            out.append(_missing(resources, team, f"no ClusterQueue {name}",
                                "render components.core.teams.queues.team_cluster_queue for the team"))
        else:
            spec = get(queue.props, "spec")
            cohort = get(spec, "cohortName", get(spec, "cohort"))
            if not is_unknown(cohort) and cohort != COHORT:
                out.append((queue, problem(queue, f"team {team}'s queue is in cohort {cohort!r}, not {COHORT!r}: it "
                                                  "can neither lend its idle guarantee nor borrow",
                                           f"set spec.cohortName: {COHORT}")))
            if (why := _weight_problem(get(spec, "fairSharing.weight"))) is not None:
                out.append((queue, problem(queue, f"team {team}'s queue has {why}",
                                           "set spec.fairSharing.weight to the team's weight (teams[].weight)")))
            selector = get(spec, "namespaceSelector") if isinstance(spec, Mapping) else None
            if not _selects_only(selector, team):
                out.append((queue, problem(queue, f"team {team}'s queue admits namespaces other than {team} "
                                                  f"(namespaceSelector {selector!r}): another namespace's jobs "
                                                  "would take the team's guarantee",
                                           f"set spec.namespaceSelector.matchLabels to "
                                           f"{{{NAMESPACE_NAME_LABEL}: {team}}}")))
        targets = [r for r in local if get(r.props, "spec.clusterQueue") == name]
        if not any(_namespace(r) == team for r in targets):
            out.append(_missing(resources, team, f"no LocalQueue in namespace {team} points at ClusterQueue {name}",
                                f"render a LocalQueue in namespace {team} with spec.clusterQueue: {name}"))
        for other in targets:
            if _namespace(other) != team and not is_unknown(_namespace(other)):
                out.append((other, problem(other, f"LocalQueue in namespace {_namespace(other)} points at team "
                                                  f"{team}'s ClusterQueue {name}",
                                           f"point it at its own namespace's queue; only namespace {team} queues "
                                           "into the team's guarantee")))
    return out


# -- the network boundary --------------------------------------------------------------------------


def _denies_all(policy: Resource) -> bool:
    """podSelector {} with policyTypes Ingress and Egress, and no rule: every pod, nothing allowed."""
    spec = get(policy.props, "spec")
    if is_unknown(spec):
        return True
    if not isinstance(spec, Mapping) or spec.get("podSelector") not in ({}, {"matchLabels": {}}):
        return False
    types = spec.get("policyTypes") or []
    return {"Ingress", "Egress"} <= set(types) and not spec.get("ingress") and not spec.get("egress")


def team_network_default_deny(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """Each team's namespace has a NetworkPolicy denying every pod all ingress and egress (others then allow
    DNS, the job's own pods, metrics and egress: components.core.kube.network_policy)."""
    policies = [r for r in resources if _kind(r, "NetworkPolicy")]
    out: list[Finding] = []
    for team in team_names(resources):
        if not any(_namespace(p) == team and _denies_all(p) for p in policies):
            out.append(_missing(resources, team, f"no default-deny NetworkPolicy in namespace {team}: its pods "
                                                 "reach and are reached by every namespace",
                                "render components.core.kube.network_policy.training_policies for the team's "
                                "namespace (gpucluster-default-deny first)"))
    return out


# -- access ----------------------------------------------------------------------------------------


# The one binding of a team's group outside its namespace: the spend reader in the metrics stack's namespace
# (components.core.teams.access.spend_reader_role: `get` on Prometheus's services/proxy, nothing else).
SPEND_READER = ("monitoring", "gpucluster-spend-reader")


def _reads_spend_only(binding: Resource) -> bool:
    role = get(binding.props, "roleRef")
    return (_namespace(binding), get(role, "name") if isinstance(role, Mapping) else None) == SPEND_READER \
        and get(role, "kind") == "Role"


def team_access_namespaced(resources: Sequence[Resource], config: Mapping[str, Any]) -> list[Finding]:
    """Nothing cluster-wide for a team: no cluster-scoped access policy on a member's access entry, no
    ClusterRoleBinding of a team's group, no RoleBinding of it outside its namespace but the spend reader's."""
    entries = [r for r in resources if r.type == ACCESS_ENTRY and _entry_teams(r)]
    out: list[Finding] = []
    for assoc in (r for r in resources if r.type == ACCESS_POLICY_ASSOCIATION):
        mine = related(assoc, "principalArn", entries, known=("principalArn",))
        for entry in mine:
            teams = _entry_teams(entry)
            scope = get(assoc.props, "accessScope.type")
            spaces = get(assoc.props, "accessScope.namespaces")
            if is_unknown(scope):
                continue
            outside = [n for n in (spaces if is_list(spaces) else []) if n not in teams]
            if scope == "cluster" or outside:
                where = "the whole cluster" if scope == "cluster" else f"namespaces {', '.join(outside)}"
                out.append((assoc, problem(assoc, f"a member of team {', '.join(teams)} "
                                                  f"({get(entry.props, 'principalArn')}) gets "
                                                  f"{get(assoc.props, 'policyArn')} on {where}",
                                           "drop the association: a member's only grant is the team's group, bound "
                                           "to a Role in the team's namespace (components.core.cluster_access)")))
    for binding in resources:
        cluster_wide = _kind(binding, "ClusterRoleBinding")
        if not (cluster_wide or _kind(binding, "RoleBinding")):
            continue
        for team in _subjects(binding):
            if cluster_wide:
                out.append((binding, problem(binding, f"binds team {team}'s group {GROUP_PREFIX}{team} cluster-wide",
                                             f"bind it with a RoleBinding in namespace {team}")))
            elif _namespace(binding) != team and not is_unknown(_namespace(binding)) \
                    and not _reads_spend_only(binding):
                out.append((binding, problem(binding, f"binds team {team}'s group {GROUP_PREFIX}{team} in "
                                                      f"namespace {_namespace(binding)}",
                                             f"bind it in namespace {team} only")))
    return out
