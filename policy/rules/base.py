"""What every rule works on: a resource as plain data, a violation, and the helpers that read properties.

Pure: no pulumi_policy here, so the offline plan can run the rules
without the policy SDK. Properties are the engine's property names,
camelCase (`metadataOptions.httpTokens`), as pulumi-policy hands them to
validators: pulumi_policy/policy.py at v1.21.0 builds `args.props` with
`deserialize_properties(json_format.MessageToDict(request.properties))`,
the engine's property map as it is (no snake_case translation), every
number a float (a protobuf Struct holds doubles).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MANDATORY = "mandatory"
ADVISORY = "advisory"
DISABLED = "disabled"
# Mandatory in the production stacks, advisory in the others.
PROD_MANDATORY = "mandatory-in-prod"

# Stacks whose "mandatory-in-prod" rules block: the pack reads the stack's
# name from PULUMI_STACK, which the engine sets for the policy pack's process
# (pulumi/pulumi sdk/go/common/resource/plugin/analyzer_plugin.go, constructEnv).
PROD_STACKS = frozenset({"prod"})

# The engine's placeholders for values not known during a preview (an output of
# a resource not yet created). pulumi_policy/proxy.py at v1.21.0,
# UNKNOWN_*_VALUE; tests/test_policy.py checks they match the SDK's.
UNKNOWN_VALUES = frozenset({
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7",  # boolean
    "3eeb2bf0-c639-47a8-9e75-3b44932eb421",  # number
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9",  # string
    "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",  # array
    "030794c1-ac77-496b-92df-f27374a8bd58",  # asset
    "e48ece36-62e2-4504-bad9-02848725956a",  # archive
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",  # object
})

_MISSING = object()


def is_unknown(value: Any) -> bool:
    """True for a value the engine does not know yet (a preview of a resource not yet created)."""
    return isinstance(value, str) and value in UNKNOWN_VALUES


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def get(obj: Any, path: str, default: Any = None) -> Any:
    """The value at a dotted path (`vpcConfig.publicAccessCidrs`); `default` when any step is missing.

    An unknown value met on the way is returned as is, so the caller can tell
    "not set" from "not known yet".
    """
    value = obj
    for key in path.split("."):
        if is_unknown(value):
            return value
        if not isinstance(value, Mapping):
            return default
        value = value.get(key, _MISSING)
        if value is _MISSING or value is None:
            return default
    return value


def truthy(value: Any) -> bool:
    """A boolean as the provider sees it: True, or the string "true" (the launch template's
    `ebs.encrypted` and `deleteOnTermination` are strings in pulumi-aws 7's schema)."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def falsy(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.lower() == "false")


def as_int(value: Any) -> int | None:
    """A count from the engine (a float after the protobuf Struct), None when unknown or absent."""
    if isinstance(value, bool) or value is None or is_unknown(value):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def short_type(type_: str) -> str:
    """aws:ec2/launchTemplate:LaunchTemplate -> LaunchTemplate."""
    return type_.rsplit(":", 1)[-1]


@dataclass(frozen=True)
class Resource:
    """One resource as the rules see it: its type token, name, URN, properties and options.

    `retain_on_delete` is None when it is not known: the analyzer protocol
    never carries it (pulumi/pulumi proto/pulumi/analyzer.proto,
    AnalyzerResourceOptions: protect, ignoreChanges, deleteBeforeReplace,
    aliases, customTimeouts, additionalSecretOutputs, parent), so a
    CrossGuard run cannot see it; the offline plan can.
    """

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    protect: bool = False
    retain_on_delete: bool | None = None
    id: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{short_type(self.type)} {self.name}"


@dataclass(frozen=True, order=True)
class Violation:
    """One finding: the policy, its level for this stack, the resource ("" for the stack) and what to do."""

    policy: str
    level: str
    urn: str
    name: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"policy": self.policy, "level": self.level, "urn": self.urn, "name": self.name,
                "message": self.message}


def problem(res: Resource, what: str, fix: str) -> str:
    """A violation message: which resource, what is wrong, how to fix it."""
    return f"{res.label}: {what}. Fix: {fix}."


def related(res: Resource, prop: str, candidates: Sequence[Resource], known: Sequence[str] = (),
            value_path: str | None = None) -> list[Resource]:
    """The resources among `candidates` that `res.props[prop]` refers to.

    In order of trust: the engine's property dependencies of `prop`
    (CrossGuard's stack validation has them), then a known value (at
    `value_path`, default `prop`) equal to a candidate's id or to one of its
    `known` properties (the offline plan knows ids), then the resource's
    dependencies (a preview of new resources knows neither ids nor names,
    but it knows the edge to the resource they come from).
    """
    urns = set(res.property_dependencies.get(prop, ()))
    found = [c for c in candidates if c.urn in urns]
    if found:
        return found
    value = get(res.props, value_path or prop)
    values = {v for v in (value if is_list(value) else [value]) if isinstance(v, str) and not is_unknown(v)}
    if values:
        found = [c for c in candidates
                 if (c.id and c.id in values) or any(get(c.props, k) in values for k in known)]
        if found:
            return found
    deps = set(res.dependencies)
    return [c for c in candidates if c.urn in deps]


_IMAGE_DIGEST = re.compile(r"@[A-Za-z0-9_+.-]+:[0-9a-fA-F]{32,}$")


def image_problem(ref: str) -> str | None:
    """Why an image reference floats, or None when it is pinned (a tag other than latest, or a digest).

    Kubernetes: "If you don't specify a tag, Kubernetes assumes you mean the
    tag latest" (https://kubernetes.io/docs/concepts/containers/images/#image-names).
    A registry port (`host:5000/repo`) is not a tag: the tag is after the last
    `/`.
    """
    if _IMAGE_DIGEST.search(ref):
        return None
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"image {ref!r} has no tag (Kubernetes pulls :latest)"
    tag = last.split(":", 1)[1]
    if tag == "" or tag == "latest":
        return f"image {ref!r} is tagged latest"
    return None
