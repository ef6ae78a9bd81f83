"""The stack config's schema as documents: a JSON Schema for editors, and the README's configuration reference.

Both come from StackKeys (stack.py), the one description of the config;
`python -m components.core.config.docs --write` regenerates them and
`--check` fails when a file differs (tests/test_config_docs.py runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.core.config.describe import DefaultText, Secret, doc_type, field_slot, marker, unwrap
from components.core.config.stack import KNOWN_NAMESPACES, NAMESPACE, StackKeys
from components.core.config.text import stack_yaml

PROJECT_DIR = Path(__file__).resolve().parents[3]
SCHEMA_FILE = Path(__file__).with_name("stack.schema.json")
README = PROJECT_DIR / "README.md"
# The README's generated table sits between these lines.
BEGIN = "<!-- config-reference -->"
END = "<!-- /config-reference -->"

# The provider keys the program reads besides its own (engine.py).
PROVIDER_ROWS = (
    ("aws:region", "string", "required", "AWS region (one with EKS)"),
    ("aws:profile`, `aws:assumeRoles", "provider config", "none",
     "also used by the kubeconfig's `aws eks get-token` (`--profile`, `--role-arn` of the last role; an "
     "`externalId` is refused: get-token cannot pass one)"),
)


# -- the README's reference ------------------------------------------------------


def reference_rows(model: type[BaseModel] = StackKeys, prefix: str = "",
                   optional_section: str | None = None) -> list[tuple[str, str, str, str]]:
    """(key, type, default, meaning) for every leaf key: sections are walked, lists of sections as `key[]`.

    `optional_section`: the key of the optional section `model` is, whose required keys are required only in it.
    """
    rows = []
    for field in model.model_fields.values():
        key = f"{prefix}{field.alias}"
        slot = field_slot(field)
        tp = slot.type
        if _is_section(tp):
            rows += reference_rows(tp, f"{key}.", None if field.is_required() else field.alias)
        elif get_origin(tp) in (tuple, list) and _is_section(item := unwrap(get_args(tp)[0]).type):
            rows += reference_rows(item, f"{key}[].")
        elif get_origin(tp) is dict and _is_section(value := unwrap(get_args(tp)[1]).type):
            # A map of sections (teams[].pools): a row per key of a section, under its name's placeholder.
            rows += reference_rows(value, f"{key}.{map_placeholder(field.alias)}.")
        else:
            default = default_text(field)
            if default == "required" and optional_section is not None:
                default = f"required in `{optional_section}`"
            rows.append((key, doc_type(slot), default, field.description or ""))
    return rows


def map_placeholder(alias: str) -> str:
    """Where a map of sections names its entry in a README key: `pools` -> `<pool>`."""
    return f"<{alias.removesuffix('s')}>"


def _is_section(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def default_text(field: FieldInfo) -> str:
    """The README's default column: what the program does when the key is absent."""
    if (text := marker(field_slot(field), DefaultText)) is not None:
        return text.text
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is None:
        return "none"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        # Quoted where YAML would read the bare text as something else ("1.35").
        return f"`{value}`" if yaml.safe_load(value) == value else f'`"{value}"`'
    return f"`{json.dumps(value)}`"


def reference_table() -> str:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, kind, default, meaning in (*PROVIDER_ROWS, *reference_rows()):
        lines.append(f"| `{key}` | {kind} | {default} | {_cell(meaning)} |")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def readme_with_reference(readme: str) -> str:
    """The README with the generated table between its markers (ValueError when they are missing)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md lacks the markers {BEGIN!r} ... {END!r}")
    return readme[: start + len(BEGIN)] + "\n" + reference_table() + "\n" + readme[end:]


# -- the JSON Schema ----------------------------------------------------------------

BOUND_KEYWORDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def _for_editors(node: Any, *, names: bool = False) -> Any:
    """pydantic's schema as an editor wants it: JSON Schema's keywords, no generated titles, no null defaults.

    `names`: `node` maps property names to schemas (its keys are names, not keywords).
    """
    if isinstance(node, list):
        return [_for_editors(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _for_editors(value) for key, value in node.items()}
    out = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        # Int() and Number() bounds come out under pydantic's names, not JSON Schema's.
        key = BOUND_KEYWORDS.get(key, key)
        out[key] = _for_editors(value, names=key in ("properties", "$defs", "patternProperties"))
    if "patternProperties" in out and "additionalProperties" not in out:
        # A mapping whose keys have a pattern (tags, labels, env): other keys are refused, as the program does.
        out["additionalProperties"] = False
    return out


# `pulumi config set --secret` writes a top-level key as `{secure: <ciphertext>}`.
SECURE_VALUE = {"type": "object", "properties": {"secure": {"type": "string"}}, "required": ["secure"],
                "additionalProperties": False}
# A top-level key set to nothing (`gpucluster:x:` or `""`): the engine passes "", which leaves it unset.
UNSET_VALUE = {"enum": [None, ""]}


def _top_level(schema: dict[str, Any], field: FieldInfo) -> dict[str, Any]:
    """A top-level key's schema: its value (or YAML's typing of its text), or a secret the engine decrypts,
    or nothing at all where the key has a default. A secret-only key (Secret) is a secret or nothing."""
    meta = {key: schema[key] for key in ("description", "default") if key in schema}
    value = {key: v for key, v in schema.items() if key not in meta}
    # A key's null and "" are UNSET_VALUE's, once.
    branches = [b for b in (value["anyOf"] if set(value) == {"anyOf"} else [value]) if b != {"type": "null"}]
    options = [] if marker(field_slot(field), Secret) is not None else [
        *branches, *(typed for branch in branches for typed in _yaml_scalars(branch))]
    options.append(SECURE_VALUE)
    if not field.is_required():
        options.append(UNSET_VALUE)
    return {"anyOf": options, **meta}


def _yaml_scalars(value: dict[str, Any]) -> list[dict[str, Any]]:
    """What else a top-level text key may hold: the engine passes the text of a YAML number or boolean
    (Go's formatting), so `trainingNamespace: 123` is "123" to the program, and `kubernetesVersion: 1.35`
    is "1.35"."""
    if value.get("type") != "string":
        return []
    if "enum" in value:
        typed = []
        for text in value["enum"]:
            try:
                read = stack_yaml.parse_value(text)
            except stack_yaml.StackYamlError:
                continue
            if not isinstance(read, str) and stack_yaml.go_text(read) == text:
                typed.append(read)
        return [{"enum": typed}] if typed else []
    pattern = re.compile(value.get("pattern", ""))
    longest = value.get("maxLength")
    out: list[dict[str, Any]] = []
    booleans = [b for b in (True, False) if pattern.search(stack_yaml.go_text(b)) and (longest or 5) >= 5]
    if booleans:
        out.append({"enum": booleans} if len(booleans) < 2 else {"type": "boolean"})
    if all(pattern.search(text) for text in ("0", "7", "10", "1234567890")):
        # YAML integers (and floats Go writes as integers: 1e3 is "1000") of at most the key's length.
        out.append({"type": "integer", "minimum": 0, **({"maximum": 10 ** longest - 1} if longest else {})})
    if any(pattern.search(text) for text in ("-1", "1.5", "1e+21")):
        raise NotImplementedError(f"a text key whose pattern takes a YAML number's text: {value}")
    return out


def stack_file_schema() -> dict[str, Any]:
    """A JSON Schema (2020-12) for Pulumi.<stack>.yaml: our keys typed, the providers' passed through."""
    keys = _for_editors(StackKeys.model_json_schema(by_alias=True, mode="validation", ref_template="#/$defs/{model}"))
    fields = {field.alias: field for field in StackKeys.model_fields.values()}
    properties = {f"{NAMESPACE}:{key}": _top_level(value, fields[key]) for key, value in keys["properties"].items()}
    properties["aws:region"] = {"type": "string", "description": "AWS region (one with EKS), e.g. us-east-1"}
    others = "|".join(ns for ns in KNOWN_NAMESPACES if ns != NAMESPACE)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpucluster stack file (Pulumi.<stack>.yaml)",
        "description": "Generated from components/core/config/stack.py by `python -m components.core.config.docs "
                       "--write`; the program validates the same rules and more (relationships between keys).",
        "type": "object",
        # secretsprovider, encryptedkey, encryptionsalt, environment: Pulumi's own.
        "properties": {
            "config": {
                "type": "object",
                "properties": properties,
                "patternProperties": {f"^(?:{others}):": {}},
                "additionalProperties": False,
            },
        },
        # adminPrincipalArns and publicAccessCidrs are often set per deployer (`pulumi config set`),
        # so the file need not hold them; a stack importing a Pulumi ESC environment may take any
        # key from it.
        "if": {"not": {"required": ["environment"]}},
        "then": {"properties": {"config": {"required": ["aws:region", f"{NAMESPACE}:versions"]}},
                 "required": ["config"]},
        "$defs": keys.get("$defs", {}),
    }


def schema_text() -> str:
    return json.dumps(stack_file_schema(), indent=2, sort_keys=False) + "\n"


# -- the command ----------------------------------------------------------------------


def outdated(readme_path: Path = README, schema_path: Path = SCHEMA_FILE) -> list[Path]:
    """The generated files that differ from what the schema yields now."""
    stale = []
    if not schema_path.exists() or schema_path.read_text() != schema_text():
        stale.append(schema_path)
    readme = readme_path.read_text()
    if readme_with_reference(readme) != readme:
        stale.append(readme_path)
    return stale


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m components.core.config.docs", description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the JSON Schema and the README's reference")
    mode.add_argument("--check", action="store_true", help="exit 1 when either is out of date")
    args = parser.parse_args(argv)
    try:
        stale = outdated()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    if args.check:
        for path in stale:
            print(f"out of date: {path.relative_to(PROJECT_DIR)} (run python -m components.core.config.docs --write)")
        return 1 if stale else 0
    SCHEMA_FILE.write_text(schema_text())
    README.write_text(readme_with_reference(README.read_text()))
    for path in stale:
        print(f"wrote {path.relative_to(PROJECT_DIR)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
