"""From the Pulumi engine's raw config to a StackConfig, and from pydantic's errors to our problems.

`read()` takes the raw keys of a stack (`{"gpucluster:network": "<json>",
"aws:region": "us-east-1", ...}`: strings, structured values as JSON,
exactly as the engine hands them to the program), checks the namespaces
and the region, and validates the gpucluster:* keys against the schema
(stack.py). Every problem comes back at once, each with its key path, the
value and what is allowed; nothing here touches the cloud.
"""

import functools
import json
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from components.core.config.base import ERROR, Model, error_locs, partial_model
from components.core.config.describe import Slot, missing_message, slot_at, unwrap, what
from components.core.config.stack import KNOWN_NAMESPACES, NAMESPACE, StackConfig, StackKeys
from components.core.problems import Problem, show

# StackConfig's fields that are not gpucluster:* keys: the engine layer fills them.
CONTEXT_FIELDS = ("project", "stack", "region", "aws_profile", "aws_role_arn", "secret_keys", "secret_paths")


class Reading:
    """What `read()` found: the config (partial where `problems` is not empty), its valid fields, the problems."""

    def __init__(self, config: StackConfig, valid: set[str], problems: list[Problem]):
        self.config = config
        self.valid = valid
        self.problems = problems


def read(raw: dict[str, Any], project: str = NAMESPACE, stack: str = "dev",
         secret_keys: tuple[str, ...] = (), secret_paths: tuple[str, ...] | None = None) -> Reading:
    """`secret_keys`: the raw keys the engine holds encrypted (their values arrive decrypted);
    `secret_paths`: where in them (`gpucluster:jobs[0].env.TOKEN`), when known (None: not known)."""
    problems: list[Problem] = []
    region = raw.get("aws:region")
    if not isinstance(region, str) or region not in eks_regions():
        problems.append(Problem("aws:region", f"got {show(region)}; must be set to an AWS region that has EKS, such "
                                              "as us-east-1" if region in (None, "") else
                                f"got {show(region)}; not a region with EKS; regions: {', '.join(eks_regions())}"))
        region = ""

    keys: dict[str, Any] = {}
    unreadable: set[str] = set()
    for key, value in raw.items():
        ns, colon, name = key.partition(":")
        if not colon:
            problems.append(Problem(key, f"unknown key: stack config keys carry a namespace; did you mean "
                                         f"{NAMESPACE}:{key}?"))
            continue
        if ns not in KNOWN_NAMESPACES:
            problems.append(Problem(key, f"unknown namespace {ns!r}; this program reads {NAMESPACE}:* and the "
                                         f"providers' keys ({', '.join(KNOWN_NAMESPACES[1:])})"))
            continue
        if ns != NAMESPACE or value == "":
            # "" is how the engine passes a key set to nothing.
            continue
        if name in _context_aliases():
            problems.append(Problem(key, f"unknown key; known keys: {', '.join(stack_keys())}"))
            continue
        if name in structured_keys() and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(Problem(key, f"got {show(value)}; must be structured YAML (a list or mapping)"))
                unreadable.add(name)
        keys[name] = value

    profile, role_arn = _aws_identity(raw, problems)
    data = {**keys, "project": project, "stack": stack, "region": region, "aws_profile": profile,
            "aws_role_arn": role_arn, "secret_keys": tuple(secret_keys),
            "secret_paths": tuple(secret_keys if secret_paths is None else secret_paths)}
    try:
        config = StackConfig.model_validate(data)
        valid = set(StackConfig.model_fields)
    except ValidationError as err:
        for error in err.errors(include_url=False):
            # An unreadable key is reported once, above, not again as the wrong type.
            if tuple(error["loc"]) not in {(key,) for key in unreadable}:
                problems.append(to_problem(error, StackConfig))
        config, valid = partial_model(StackConfig, data, error_locs(err))
    return Reading(config, valid, problems)


@functools.cache
def eks_regions() -> tuple[str, ...]:
    """Regions with EKS, from botocore's endpoint data (the commercial, China and GovCloud partitions)."""
    import botocore.session

    session = botocore.session.get_session()
    return tuple(sorted({r for partition in ("aws", "aws-cn", "aws-us-gov")
                         for r in session.get_available_regions("eks", partition_name=partition)}))


@functools.cache
def stack_keys() -> tuple[str, ...]:
    """The gpucluster:* keys, sorted."""
    return tuple(sorted(f.alias for f in StackKeys.model_fields.values()))


@functools.cache
def structured_keys() -> frozenset[str]:
    """Keys whose values are lists or mappings (the engine passes them as JSON)."""
    out = set()
    for field in StackKeys.model_fields.values():
        tp = unwrap(field.annotation, tuple(field.metadata)).type
        if get_origin(tp) in (tuple, list, dict) or (isinstance(tp, type) and issubclass(tp, BaseModel)):
            out.add(field.alias)
    return frozenset(out)


@functools.cache
def _context_aliases() -> frozenset[str]:
    return frozenset(StackConfig.model_fields[name].alias for name in CONTEXT_FIELDS) | frozenset(CONTEXT_FIELDS)


def _aws_identity(raw: dict[str, Any], problems: list[Problem]) -> tuple[str | None, str | None]:
    """aws:profile and the last role of aws:assumeRoles: the identity `aws eks get-token` must use too."""
    profile = raw.get("aws:profile") or None
    roles = raw.get("aws:assumeRoles")
    if isinstance(roles, str) and roles:
        try:
            roles = json.loads(roles)
        except json.JSONDecodeError:
            roles = None
    role_arn = None
    if isinstance(roles, list) and roles:
        last = roles[-1] if isinstance(roles[-1], dict) else {}
        role_arn = last.get("roleArn") or None
        if last.get("externalId"):
            # `aws eks get-token --role-arn` has no external ID option.
            problems.append(Problem(f"aws:assumeRoles[{len(roles) - 1}].externalId",
                                    "the Kubernetes provider authenticates with `aws eks get-token --role-arn`, which "
                                    "cannot pass an external ID; assume that role in an aws:profile instead"))
    return (profile if isinstance(profile, str) else None), role_arn


# -- pydantic's errors, in our words --------------------------------------------------------


def key_path(loc: tuple[Any, ...]) -> str:
    """("gpuPools", 0, "maxNodes") -> "gpucluster:gpuPools[0].maxNodes"."""
    out = ""
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f"{NAMESPACE}:{part}" if not out else f".{part}"
    return out


def to_problem(error: dict[str, Any], root: type[Model]) -> Problem:
    """One pydantic error as a problem: key path, the value as written, what is allowed."""
    loc, kind, value = tuple(error["loc"]), error["type"], error.get("input")
    path = key_path(loc)
    if loc and loc[-1] == "[key]" and not (kind == ERROR and error["ctx"]["message"].startswith("key ")):
        slot = slot_at(root, loc)
        return Problem(path, f"key {show(value)} is not {what(slot) if slot else 'allowed'}")
    if kind == ERROR:
        return Problem(path, error["ctx"]["message"])
    if kind == "extra_forbidden":
        parent = slot_at(root, loc[:-1])
        return Problem(path, f"unknown key; known keys: {', '.join(_known_keys(parent))}")
    slot = slot_at(root, loc)
    if slot is None:
        return Problem(path, f"got {show(value)}; {error['msg']}")
    if kind == "missing":
        return Problem(path, missing_message(slot))
    if kind == "literal_error":
        return Problem(path, f"got {show(value)}; allowed: {', '.join(map(str, get_args(slot.type)))}")
    return Problem(path, f"got {show(value)}; must be {what(slot)}")


def _known_keys(parent: Slot | None) -> list[str]:
    if parent is None or not (isinstance(parent.type, type) and issubclass(parent.type, BaseModel)):
        return []
    if parent.type is StackConfig:
        return list(stack_keys())
    return sorted(f.alias for f in parent.type.model_fields.values())
