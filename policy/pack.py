"""The rules as CrossGuard policies (pulumi-policy 1.21.0).

Each Rule becomes a ResourceValidationPolicy or a StackValidationPolicy
whose validate callable turns the SDK's arguments into a plain Resource
and reports what the rule's check returns. How the SDK calls them
(pulumi_policy/policy.py at v1.21.0, _PolicyAnalyzerServicer):

- Analyze (each resource, its inputs): ResourceValidationArgs(type, props,
  urn, name, opts, provider, config), props =
  unknown_checking_proxy(deserialize_properties(MessageToDict(properties))):
  the engine's camelCase names, numbers as floats, wrapped in proxies that
  raise UnknownValueError when an unknown preview value is read.
- AnalyzeStack (every resource, its outputs, at the end of a preview or
  update): StackValidationArgs([PolicyResource(type, props, urn, name,
  opts, provider, parent, dependencies, property_dependencies)], config).
- `args.get_config()` is the policy's own properties from the pack config.

`plain` unwraps the proxies, keeping unknowns as the engine's placeholder
strings, which the rules treat as "not known yet" instead of letting one
unknown value turn the whole policy into "can't run during preview".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import _DictProxy, _ListProxy

from policy.rules import RULES, Resource, Rule, level_for, rule_config

PACK_NAME = "gpucluster"


def plain(value: Any) -> Any:
    """Plain dicts and lists from the SDK's proxies; unknown values stay as the engine's placeholders.

    A proxy's "__target" item is the wrapped container, read without the
    unknown check (pulumi_policy/proxy.py at v1.21.0, _DictProxy and
    _ListProxy; the SDK's own serialize_properties unwraps them the same way).
    """
    if isinstance(value, (_DictProxy, _ListProxy)):
        value = value["__target"]
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [plain(item) for item in value]
    return value


def _resource_validate(rule: Rule):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if not rule.applies_to(args.resource_type):
            return
        res = Resource(type=args.resource_type, name=args.name, urn=args.urn, props=plain(args.props),
                       protect=bool(args.opts.protect) if args.opts is not None else False)
        for message in rule.check(res, rule_config(rule, args.get_config())):
            report_violation(message, None)

    return validate


def _stack_validate(rule: Rule):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = []
        for r in args.resources:
            props = plain(r.props)
            ident = props.get("id") if isinstance(props.get("id"), str) else None
            resources.append(Resource(
                type=r.resource_type, name=r.name, urn=r.urn, props=props,
                protect=bool(r.opts.protect) if r.opts is not None else False, id=ident,
                dependencies=tuple(d.urn for d in r.dependencies),
                property_dependencies={k: tuple(d.urn for d in v) for k, v in r.property_dependencies.items()}))
        for res, message in rule.check(resources, rule_config(rule, args.get_config())):
            report_violation(message, res.urn if res is not None else None)

    return validate


def policies(stack: str) -> list[Policy]:
    """The pack's policies, their levels resolved for `stack` (the pack config can still override them:
    the SDK prefers a policy's configured enforcementLevel)."""
    out: list[Policy] = []
    for rule in RULES:
        level = EnforcementLevel(level_for(rule, stack))
        schema = PolicyConfigSchema(properties=dict(rule.config_schema)) if rule.config_schema else None
        if rule.kind == "resource":
            out.append(ResourceValidationPolicy(name=rule.name, description=rule.description,
                                                validate=_resource_validate(rule), enforcement_level=level,
                                                config_schema=schema, remediation_steps=rule.remediation))
        else:
            out.append(StackValidationPolicy(name=rule.name, description=rule.description,
                                             validate=_stack_validate(rule), enforcement_level=level,
                                             config_schema=schema, remediation_steps=rule.remediation))
    return out
