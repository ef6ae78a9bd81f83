"""The stack tests/test_schema_agreement.py puts each value into, and the two judges of it.

One rich, valid stack: the shipped prod stack as the CLI reads it, the plan's stand-ins for the keys only
a deployer knows, a CPU pool, a parameter-server job and the Slack webhook as a secret. A value replaces
one key (or one key of every job or pool) and is judged by:

- the schema file, compiled once per top-level key, on the key's value as the stack file holds it;
- the program's validation (components.core.stack_config.parse, every problem at once) on what the Pulumi
  CLI hands it: the file read with the CLI's YAML rules (components.core.config.text.stack_yaml), each value
  as its string, secrets decrypted.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

from bootstrap import stackfile
from components.core.config import StackKeys
from components.core.config.text import stack_yaml
from components.core.problems import ConfigError, Problem
from components.core.stack_config import parse as parse_stack
from tests.schema_agreement_values import DEFS, NS, TOP, Leaf, is_placeholder

WEBHOOK = "https://hooks.slack.com/services/T0AAAAAAA/B0AAAAAAA/abcdefghijklmnop"


# -- the stack ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Secret:
    """A value set with `pulumi config set --secret`: ciphertext in the file, the value for the program."""

    plaintext: Any


def base_document() -> dict[str, Any]:
    path = stackfile.stack_path("prod")
    doc = copy.deepcopy(stack_yaml.parse(path.read_text(), "gpucluster", str(path)).config)
    doc.update(copy.deepcopy(stackfile.PLAN_STANDINS))
    doc["gpucluster:cpuPools"] = [{"name": "ps", "instanceType": "m7i.8xlarge", "maxNodes": 4}]
    doc["gpucluster:jobs"].append({"name": "ps-job", "pool": "h100", "nodes": 3, "launcher": "ps", "psPool": "ps",
                                   "image": "repo/train:1.0", "command": ["python", "train.py"]})
    doc["gpucluster:alertSlackWebhookUrl"] = Secret(WEBHOOK)
    # A fleet's manager, so that every fleet key has a place (a worker's keys are refused on it: CROSS_KEY).
    doc["gpucluster:fleet"] = {"role": "manager", "workers": [{"stack": "fleet-east"}, {"stack": "fleet-west"}],
                               "data": {"mode": "shared-bucket", "bucketRegion": "us-east-1", "datasetGiB": 2000}}
    return doc


BASE = base_document()
SHIPPED = [stack_yaml.parse(stackfile.stack_path(s).read_text(), "gpucluster").config
           for s in ("dev", "prod", "fleet", "fleet-east", "fleet-west")]


def for_file(value: Any) -> Any:
    """A value as the stack file holds it."""
    if isinstance(value, Secret):
        return {"secure": "v1:ciphertext"}
    if isinstance(value, dict):
        return {k: for_file(v) for k, v in value.items()}
    if isinstance(value, list):
        return [for_file(v) for v in value]
    return value


def for_program(key: str, value: Any) -> tuple[str, list[str]]:
    """`key`'s value as the engine hands it to the program (the file read as the CLI reads it, secrets
    decrypted), and where it holds secrets. Raises Problem-carrying ConfigError for what the CLI misreads."""
    # JSON is YAML: strings quoted (text stays text), numbers and booleans plain, typed by the CLI's rules.
    text = json.dumps({"config": {key: for_file(value)}}, ensure_ascii=False)
    try:
        document = stack_yaml.parse(text, "gpucluster")
    except stack_yaml.StackYamlProblems as err:
        raise ConfigError(Problem(where, message) for where, message in err.problems) from None
    read = document.config[key]
    plain = value.plaintext if isinstance(value, Secret) else _decrypted(read, PLAINTEXT.get(key))
    return stack_yaml.go_text(plain), document.secure_paths


def _plaintext(key: str) -> Any:
    """What a top-level secret of `key` decrypts to: the base stack's value, or the key's default."""
    if isinstance(BASE.get(key), Secret):
        return BASE[key].plaintext
    if key in BASE:
        return BASE[key]
    field = next(f for f in StackKeys.model_fields.values() if f.alias == key.removeprefix(NS))
    default = field.default_factory() if field.default_factory is not None else field.default
    return list(default) if isinstance(default, tuple) else default


def _decrypted(value: Any, plaintext: Any = "decrypted") -> Any:
    """A value with its secure parts decrypted: a top-level secret to `plaintext`, a nested one to any text."""
    if stack_yaml.is_secure(value):
        return plaintext
    if isinstance(value, dict):
        return {k: _decrypted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decrypted(v) for v in value]
    return value


PLAINTEXT = {key: _plaintext(key) for key in TOP if key.startswith(NS)}
BASE_RAW = {key: for_program(key, value) for key, value in BASE.items()}
VALIDATORS = {key: jsonschema.Draft202012Validator({"$defs": DEFS, **node}) for key, node in TOP.items()}


def schema_accepts(document: dict[str, Any], changed: str) -> bool:
    """Whether the schema accepts the stack file: BASE with key `changed` replaced (the rest is valid)."""
    return VALIDATORS[changed].is_valid(for_file(document[changed]))


def program_problems(document: dict[str, Any], changed: str) -> list[Problem]:
    """What the program's validation says of BASE with key `changed` replaced."""
    try:
        text, paths = for_program(changed, document[changed])
    except ConfigError as err:  # the CLI would not read the file
        return err.problems
    return _validate(changed, text, tuple(paths))


@functools.cache
def _validate(changed: str, text: str, paths: tuple[str, ...]) -> list[Problem]:
    """The program's problems with BASE's `changed` key passed as `text` (values that read the same to the
    engine, 4 and 4.0, a secret's two ciphertexts, are validated once)."""
    raw = {k: v[0] for k, v in BASE_RAW.items()} | {changed: text}
    secrets = [p for k, v in BASE_RAW.items() if k != changed for p in v[1]] + list(paths)
    keys = tuple(dict.fromkeys(re.match(r"[^.\[]+", p)[0] for p in secrets))
    try:
        parse_stack(raw, "gpucluster", "agreement", keys, tuple(secrets))
    except ConfigError as err:
        return err.problems
    return []


# -- placing a value ------------------------------------------------------------------------------


def placements(leaf: Leaf) -> list[tuple[str, tuple]]:
    """(the key's path in BASE, where to set it) at each place the key has: every job, every pool."""
    out: list[tuple[str, tuple]] = []

    def walk(node: Any, parts: tuple[str, ...], path: str, where: tuple, create: bool) -> None:
        part, rest = parts[0], parts[1:]
        if part == "[]":
            for i, item in enumerate(node):
                if rest:
                    walk(item, rest, f"{path}[{i}]", (*where, i), create)
                else:  # an entry of a list of sections
                    out.append((f"{path}[{i}]", (*where, i)))
            return
        if is_placeholder(part):  # every entry of a map of sections (teams[].pools)
            for name, item in node.items():
                if rest:
                    walk(item, rest, f"{path}.{name}", (*where, name), create)
                else:
                    out.append((f"{path}.{name}", (*where, name)))
            return
        path = part if not path else f"{path}.{part}"
        if not rest:
            out.append((path, (*where, part)))
        elif isinstance(node.get(part), (dict, list)) or create and part not in node:
            walk(node.get(part, {}), rest, path, (*where, part), create)

    walk(BASE, leaf.parts, "", (), False)
    if not out:  # a section the stack leaves to its defaults (observability): set it
        walk(BASE, leaf.parts, "", (), True)
    return out


def put(where: tuple, value: Any) -> dict[str, Any]:
    document = dict(BASE)
    document[where[0]] = copy.deepcopy(BASE.get(where[0], {}))
    node: Any = document
    for part in where[:-1]:
        node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
    node[where[-1]] = value
    return document


# -- values the stacks hold -----------------------------------------------------------------------


def known_values(leaf: Leaf) -> list[Any]:
    """The shipped stacks' values of the key, and its default."""
    out = [v for config in (*SHIPPED, BASE) for v in _values_at(config, leaf.parts)]
    default = leaf.node.get("default")
    if default is not None:
        out.append(default)
    return out


def _values_at(node: Any, parts: tuple[str, ...]) -> list[Any]:
    if not parts:
        return [for_file(node)]
    part, rest = parts[0], parts[1:]
    if part == "[]":
        return [v for item in node for v in _values_at(item, rest)] if isinstance(node, list) else []
    if is_placeholder(part):
        return [v for item in node.values() for v in _values_at(item, rest)] if isinstance(node, dict) else []
    return _values_at(node[part], rest) if isinstance(node, dict) and part in node else []


def top_level_texts(leaf: Leaf, values: list[Any]) -> list[Any]:
    """What `pulumi config set` writes for a top-level scalar: its text."""
    if not leaf.top:
        return []
    return [stack_yaml.go_text(v) for v in values if isinstance(v, (bool, int, float))]


def secret_values(leaf: Leaf) -> list[Any]:
    """A top-level key set with --secret: the engine decrypts its value for the program."""
    return [Secret(PLAINTEXT[leaf.parts[0]])] if leaf.top else []
