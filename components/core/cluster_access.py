"""Who may call the Kubernetes API, as EKS access entries (pure): the admins, and each team's members.

Admins get an entry with the cluster-admin access policy (components.aws.cluster). A team member
gets an entry of type STANDARD whose only grant is a Kubernetes group, `gpucluster:team:<team>`
(TeamConfig.group), and no access policy: the group is bound to a Role in the team's namespace
(components.core.teams.access), so the member can do there what that Role allows and nothing
cluster-wide. EKS User Guide, "Create access entries": "If an access entry's type is STANDARD, and
you want to use Kubernetes RBAC authorization, you can add one or more group names"; "Amazon EKS
doesn't confirm that any Kubernetes RBAC objects that exist on your cluster include any of the group
names".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

# EKS refuses a group name in the system: namespace: CreateAccessEntry answers "InvalidParameterException:
# The kubernetes group name system:masters is invalid, it cannot start with system:"
# (terraform-aws-modules/terraform-aws-eks #2915; the API reference, CreateAccessEntry kubernetesGroups,
# names no pattern). The User Guide ("Create access entries") reserves these five prefixes for the
# username; a group in any of them is refused here too, so no entry ever leans on an AWS-reserved name.
RESERVED_GROUP_PREFIXES = ("system:", "eks:", "aws:", "amazon:", "iam:")
ENTRY_TYPE = "STANDARD"


def principal_slug(arn: str) -> str:
    """A short, stable resource-name part for an IAM principal: its name and a hash of the whole ARN, so
    that reordering principals renames nothing and two of one name in two accounts stay apart."""
    last = re.sub(r"[^a-z0-9-]", "-", arn.rsplit("/", 1)[-1].lower())[:24].strip("-")
    return f"{last}-{hashlib.sha256(arn.encode()).hexdigest()[:6]}"


def group_problem(group: str) -> str | None:
    """Why EKS would refuse `group` in an access entry's kubernetesGroups, or None."""
    for prefix in RESERVED_GROUP_PREFIXES:
        if group.startswith(prefix):
            return f"Kubernetes group {group!r} starts with {prefix!r}, which EKS reserves"
    return None


@dataclass(frozen=True)
class MemberEntry:
    """One team member's access entry: `slug` names the resource, `group` is its only grant."""

    team: str
    principal_arn: str
    group: str

    @property
    def slug(self) -> str:
        """Named after the principal alone: moving a member to another team updates its entry's group in
        place (EKS allows one access entry per principal, and Pulumi creates a renamed resource before it
        deletes the old one)."""
        return f"member-{principal_slug(self.principal_arn)}"


def member_entries(teams: Iterable) -> list[MemberEntry]:
    """Every member of every team (gpucluster:teams; each ARN in one team only, the config's rule), once,
    mapped to its team's group. Raises ValueError for a group EKS would refuse."""
    entries = []
    for team in teams:
        if (problem := group_problem(team.group)) is not None:
            raise ValueError(f"team {team.name}: {problem}")
        entries += [MemberEntry(team.name, arn, team.group) for arn in dict.fromkeys(team.members)]
    return entries
