"""What changes between two offline plans (`plan --json` outputs): added, removed, replaced, updated, and the
node groups whose nodes a `pulumi up` would restart; as Markdown."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bootstrap.offline import replacements
from components.core.kube.nodepool import POOL_LABEL, ROLE_LABEL
from components.core.node_updates import ROLL_NOTE

OPTIONS = ("protect", "retainOnDelete", "deleteBeforeReplace", "ignoreChanges", "replaceOnChanges", "importId",
           "hooks")
SHORT = 80


class PlanError(Exception):
    pass


@dataclass
class Changed:
    row: dict[str, Any]
    properties: list[tuple[str, Any, Any]]  # (path, old, new)
    options: list[tuple[str, Any, Any]]
    replaced_by: list[str] = field(default_factory=list)  # the paths that force the replacement

    @property
    def replaced(self) -> bool:
        return bool(self.replaced_by)


@dataclass
class Restart:
    """A node group that stays but gets every node replaced (replacements.restarts_nodes)."""

    group: str  # the pool's name, "system nodes", or the node group's resource name
    node_group: str
    causes: list[str]  # "`path` of launch template `name`", "`releaseVersion`"


@dataclass
class PlanDiff:
    old: dict[str, Any]
    new: dict[str, Any]
    added: list[dict[str, Any]]
    removed: list[dict[str, Any]]
    changed: list[Changed]
    restarts: list[Restart] = field(default_factory=list)

    @property
    def cost_changed(self) -> bool:
        return any(_cost(self.old, k) != _cost(self.new, k) for k in ("minPerHour", "maxPerHour"))

    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.cost_changed)


def load_plan(path: Path) -> dict[str, Any]:
    try:
        plan = json.loads(path.read_text())
    except FileNotFoundError:
        raise PlanError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise PlanError(f"{path}: cannot be read ({err})") from None
    except json.JSONDecodeError as err:
        raise PlanError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("resources"), list) or "cost" not in plan:
        raise PlanError(f"{path}: not a `python -m bootstrap plan --json` report with resources (a plan made "
                        "before plans listed every resource? render it again)")
    if not isinstance(plan["cost"], dict):
        raise PlanError(f"{path}: `cost` is not an object; render the plan again")
    for i, row in enumerate(plan["resources"]):
        if not isinstance(row, dict):
            raise PlanError(f"{path}: resources[{i}] is not an object; render the plan again")
        for key in ("urn", "type", "name"):
            if not isinstance(row.get(key), str):
                raise PlanError(f"{path}: resources[{i}] has no {key!r}; render the plan again")
        for key, kind in (("inputs", dict), ("dependencies", list), ("replaceOnChanges", list)):
            if row.get(key) is not None and not isinstance(row[key], kind):
                raise PlanError(f"{path}: resources[{i}].{key} is not a{'n object' if kind is dict else ' list'}; "
                                "render the plan again")
    return plan


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaves by path: dicts by key, lists of dicts by index; scalars and lists of scalars whole."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{path}[{i}]"))
        return out
    return {path: value}


def _changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    a, b = flatten(old), flatten(new)
    missing = object()
    out = []
    for path in sorted(set(a) | set(b)):
        before, after = a.get(path, missing), b.get(path, missing)
        if before != after:
            out.append((path, None if before is missing else before, None if after is missing else after))
    return out


def compare(old: dict[str, Any], new: dict[str, Any]) -> PlanDiff:
    before = {r["urn"]: r for r in old["resources"]}
    after = {r["urn"]: r for r in new["resources"]}
    changed = []
    for urn in sorted(set(before) & set(after)):
        o, n = before[urn], after[urn]
        properties = _changes(o.get("inputs") or {}, n.get("inputs") or {})
        options = [(k, o.get(k), n.get(k)) for k in OPTIONS if o.get(k) != n.get(k)]
        if not properties and not options:
            continue
        replaced_by = [p for p, was, now in properties if replacements.forces_replacement(
            n["type"], p, was, now, n.get("replaceOnChanges") or [])]
        changed.append(Changed(n, properties, options, replaced_by))
    return PlanDiff(old, new, added=[after[u] for u in sorted(set(after) - set(before))],
                    removed=[before[u] for u in sorted(set(before) - set(after))], changed=changed,
                    restarts=node_restarts(new, changed))


NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def node_restarts(new: dict[str, Any], changed: list[Changed]) -> list[Restart]:
    """Node groups that stay while a change replaces all their nodes: their own version or release, or a new
    version of the launch template they follow (a node group takes the template's outputs: its dependency)."""
    groups = {r["urn"]: r for r in new["resources"] if r["type"] == NODE_GROUP}
    replaced = {c.row["urn"] for c in changed if c.replaced}
    causes: dict[str, list[str]] = {}
    for c in changed:
        if c.replaced:
            continue
        paths = [p for p, _, _ in c.properties if replacements.restarts_nodes(c.row["type"], p)]
        if not paths:
            continue
        if c.row["type"] == NODE_GROUP:
            causes.setdefault(c.row["urn"], []).extend(f"`{p}`" for p in paths)
            continue
        for urn, group in groups.items():
            if c.row["urn"] in (group.get("dependencies") or []) and urn not in replaced:
                causes.setdefault(urn, []).extend(f"`{p}` of launch template `{c.row['name']}`" for p in paths)
    return sorted((Restart(_group_label(groups[urn]), groups[urn]["name"], found) for urn, found in causes.items()),
                  key=lambda r: (r.group, r.node_group))


def _group_label(row: dict[str, Any]) -> str:
    labels = (row.get("inputs") or {}).get("labels") or {}
    if POOL_LABEL in labels:
        return str(labels[POOL_LABEL])
    return "system nodes" if labels.get(ROLE_LABEL) == "system" else row["name"]


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("`", "'").replace("\n", " ")
    return text if len(text) <= SHORT else text[:SHORT - 1] + "…"


def _cost(plan: dict[str, Any], key: str) -> float:
    return float((plan.get("cost") or {}).get(key) or 0)


def _label(row: dict[str, Any]) -> str:
    return f"`{row['name']}` ({row['type']})"


def render(diff: PlanDiff) -> str:
    """The Markdown report; "" for identical plans."""
    if diff.empty():
        return ""
    old, new = diff.old, diff.new
    stack = new.get("stack")
    heading = f"## Plan diff: stack `{stack}`"
    if old.get("stack") != stack:
        heading += f" (compared with stack `{old.get('stack')}`)"
    replaced = [c for c in diff.changed if c.replaced]
    updated = [c for c in diff.changed if not c.replaced]
    out = [heading, "", f"**{len(diff.added)} to add, {len(updated)} to change, {len(replaced)} to replace, "
                        f"{len(diff.removed)} to remove**", ""]
    out += ["| cost per hour | before | after | change |", "|---|---:|---:|---:|"]
    for label, key in (("at minimum scale", "minPerHour"), ("at maximum scale", "maxPerHour")):
        a, b = _cost(old, key), _cost(new, key)
        out.append(f"| {label} | ${a:,.2f} | ${b:,.2f} | {b - a:+,.2f} |")
    grave = [c for c in replaced if c.row["type"] in replacements.DATA_OR_JOBS]
    if grave:
        out += ["", "> [!WARNING]", "> These replacements cost data or running jobs:"]
        out += [f"> - {_label(c.row)}: {replacements.DATA_OR_JOBS[c.row['type']]} (because of "
                f"{', '.join(f'`{p}`' for p in c.replaced_by)})" for c in grave]
    if diff.restarts:
        out += ["", "> [!WARNING]", "> EKS drains and replaces every node of these node groups, up to maxUnavailable at a "
                "time (a new launch template version, AMI release or Kubernetes version): apply between runs:"]
        out += [f"> - {r.group}: {ROLL_NOTE} (node group `{r.node_group}`; because of {', '.join(r.causes)})"
                for r in diff.restarts]
    if replaced:
        out += ["", "### Replaced"]
        for c in replaced:
            how = "delete, then create" if c.row.get("deleteBeforeReplace") else "create, then delete"
            out.append(f"- {_label(c.row)}, {how}")
            out += _property_lines(c)
            if dependents := _dependents(new, c.row["urn"]):
                names = ", ".join(f"`{d}`" for d in dependents[:5]) + (" …" if len(dependents) > 5 else "")
                out.append(f"  - {len(dependents)} resources that take its outputs may change or be replaced with "
                           f"it (an offline plan keeps ids, so it cannot show them): {names}")
    if updated:
        out += ["", "### Changed in place"]
        for c in updated:
            out.append(f"- {_label(c.row)}")
            out += _property_lines(c)
    if diff.added:
        out += ["", "### Added"] + [f"- {_label(r)}" for r in diff.added]
    if diff.removed:
        out += ["", "### Removed"]
        out += [f"- {_label(r)}" + (" (retained: stays in AWS, no longer managed)" if r.get("retainOnDelete") else "")
                for r in diff.removed]
    return "\n".join(out) + "\n"


def _dependents(plan: dict[str, Any], urn: str) -> list[str]:
    return sorted(r["name"] for r in plan["resources"] if urn in (r.get("dependencies") or []))


def _property_lines(change: Changed) -> list[str]:
    lines = []
    for path, was, now in change.properties:
        mark = " **(forces replacement)**" if path in change.replaced_by else ""
        lines.append(f"  - `{path}`: `{_short(was)}` → `{_short(now)}`{mark}")
    lines += [f"  - option `{name}`: `{_short(was)}` → `{_short(now)}`" for name, was, now in change.options]
    return lines
