"""Values to judge a key by, for tests/test_schema_agreement.py: derived from the schema file, and from the model.

From the schema (stack.schema.json, as editors read it): each enum member and a miss, each bound, just
inside and just outside it, a match of each pattern at its shortest, its longest and one past it (with
tests/regex_examples.py), each type of a union, empty, one-item and longest lists, the smallest objects.
Which of them the schema accepts, the schema itself says: these are only meant to fall on both sides.

From the model (StackKeys, the pydantic model the schema is generated from): its choices, its bounds and
one past them, the engine's strings of numbers and booleans, and known good values (the shipped stacks')
with variations of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

import jsonschema
from pydantic import BaseModel

from components.core.config import StackKeys, docs
from components.core.config.describe import _bounds, field_slot, unwrap
from tests.regex_examples import examples

SCHEMA = json.loads(docs.SCHEMA_FILE.read_text())
DEFS = SCHEMA["$defs"]
TOP = SCHEMA["properties"]["config"]["properties"]
NS = "gpucluster:"


# -- the schema's keys ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    key: str                # README row: "jobs[].model.params"
    parts: tuple[str, ...]  # where in the file: ("gpucluster:jobs", "[]", "model", "params")
    node: dict              # its schema

    @property
    def top(self) -> bool:
        return len(self.parts) == 1


def _section(node: dict) -> str | None:
    for option in [node, *node.get("anyOf", [])]:
        if "$ref" in option:
            return option["$ref"].rsplit("/", 1)[1]
    return None


def _items_section(node: dict) -> str | None:
    for option in [node, *node.get("anyOf", [])]:
        if option.get("type") == "array" and "items" in option:
            return _section(option["items"])
    return None


def _map_section(node: dict) -> str | None:
    """The section a map's values are (teams[].pools: TeamPoolShare by pool name), or None."""
    for option in [node, *node.get("anyOf", [])]:
        for sub in option.get("patternProperties", {}).values():
            return _section(sub)
    return None


def is_placeholder(part: str) -> bool:
    """A map's entry in a README key (`<pool>` of teams[].pools.<pool>.guaranteedGpus)."""
    return part.startswith("<") and part.endswith(">")


def schema_keys() -> tuple[list[Leaf], list[Leaf]]:
    """The schema's leaf keys (the README's rows), and its sections (`storage.fsx`; `gpuPools[]`, an entry)."""
    leaves: list[Leaf] = []
    sections: list[Leaf] = []

    def walk(node: dict, key: str, parts: tuple[str, ...]) -> None:
        if (name := _section(node)) is not None:
            sections.append(Leaf(key, parts, DEFS[name]))
            for prop, sub in DEFS[name]["properties"].items():
                walk(sub, f"{key}.{prop}", (*parts, prop))
        elif (name := _items_section(node)) is not None:
            sections.append(Leaf(f"{key}[]", (*parts, "[]"), DEFS[name]))
            for prop, sub in DEFS[name]["properties"].items():
                walk(sub, f"{key}[].{prop}", (*parts, "[]", prop))
        elif (name := _map_section(node)) is not None:
            entry = docs.map_placeholder(parts[-1])
            sections.append(Leaf(f"{key}.{entry}", (*parts, entry), DEFS[name]))
            for prop, sub in DEFS[name]["properties"].items():
                walk(sub, f"{key}.{entry}.{prop}", (*parts, entry, prop))
        else:
            leaves.append(Leaf(key, parts, node))

    for full, node in TOP.items():
        if full.startswith(NS):
            walk(node, full.removeprefix(NS), (full,))
    return leaves, sections


def section_values(section: Leaf) -> list[Any]:
    """A section's smallest valid object (its required keys, each its first value the schema accepts), that
    with an unknown key, nothing, and not an object."""
    minimal = {}
    for prop in section.node.get("required", []):
        node = section.node["properties"][prop]
        check = jsonschema.Draft202012Validator({"$defs": DEFS, **node})
        minimal[prop] = next(v for v in schema_values(node) if check.is_valid(v))
    return [minimal, {**minimal, "noSuchKey": 1}, {}, "x", [minimal]]



def describe(key: str) -> str:
    """The schema's description of a key (a README row, or a section such as `gpuPools[]`)."""
    parts = re.findall(r"[^.\[\]]+|\[\]", key)
    node = TOP[NS + parts[0]]
    for part, following in zip(parts, parts[1:], strict=False):
        if following == "[]":
            continue
        if is_placeholder(following):  # an entry of the map: its section, described as the map is
            node = {"$ref": f"#/$defs/{_map_section(node)}", "description": node.get("description", "")}
            continue
        name = _items_section(node) if part == "[]" else _section(node)
        node = DEFS[name]["properties"][following]
    return node.get("description", "")


# -- values, from the schema ----------------------------------------------------------------------


def _resolve(node: dict) -> dict:
    name = node.get("$ref", "").rsplit("/", 1)[-1]
    return {**DEFS[name], **{k: v for k, v in node.items() if k != "$ref"}} if name else node


def schema_values(node: dict, depth: int = 0) -> list[Any]:
    """Values meant to pass `node` and values meant to fail it; which is which, the schema itself says."""
    node = _resolve(node)
    out: list[Any] = []
    for option in node.get("anyOf", []):
        out += schema_values(option, depth)
    if "enum" in node:
        out += list(node["enum"])
        first = node["enum"][0]
        out.append(f"{first}x" if isinstance(first, str) else 9.5 if first is not None else "x")
    kinds = node.get("type", [])
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        out += _typed_values(kind, node, depth)
    if "multipleOf" in node:
        step = node["multipleOf"]
        low = node.get("minimum", step)
        out += [low, low + step, low + step // 2]
    if node.get("required") == ["secure"]:
        out += [{"secure": "v1:ciphertext"}, {"secure": 1}, {"secret": "v1:ciphertext"}]
    return out


def _string_values(node: dict) -> list[Any]:
    pattern, longest = node.get("pattern"), node.get("maxLength")
    if pattern:
        found = examples(pattern, (None, longest, longest + 1) if longest else (None, 64))
    else:
        found = ["", "a", "a" * (longest or 64)] + (["a" * (longest + 1)] if longest else [])
    shortest = found[0] if found else "a"
    return [*found, f"{shortest}!", f"!{shortest}", f" {shortest}", shortest.upper(), "", 7, True]


def _number_values(kind: str, node: dict) -> list[Any]:
    low, high, above = node.get("minimum"), node.get("maximum"), node.get("exclusiveMinimum")
    step = 1 if kind == "integer" else 0.001
    out: list[Any] = []
    if low is not None:
        out += [low, low + step, low - step]
    if above is not None:
        out += [above, above + step, above + 1]
    if high is not None:
        out += [high, high - step, high + step]
    if not out:
        out = [0, 1, -1, 10 ** 6]
    base = low if low is not None else above if above is not None else 0
    return [*out, base + 0.5, "x", True]


def _typed_values(kind: str, node: dict, depth: int) -> list[Any]:
    if kind == "string":
        return [1] if "enum" in node else _string_values(node)
    if kind in ("integer", "number"):
        return _number_values(kind, node)
    if kind == "boolean":
        return [True, False, "yes", 1]
    if kind == "null":
        return [None]
    if kind == "array":
        items = schema_values(node["items"], depth + 1)[:12] if "items" in node else ["a"]
        out: list[Any] = [[], *([v] for v in items), "x"]
        most = node.get("maxItems")
        if most:
            distinct = [f"{items[0]}{i}" if isinstance(items[0], str) else items[0] for i in range(most + 1)]
            out += [distinct[:most], distinct]
        if node.get("uniqueItems"):
            out.append([items[0], items[0]])
        return out
    if kind == "object":
        return _object_values(node, depth)
    return []


def _object_values(node: dict, depth: int) -> list[Any]:
    out: list[Any] = [{}, "x"]
    if "properties" in node:
        minimal = {p: schema_values(node["properties"][p], depth + 1)[0] for p in node.get("required", [])}
        out += [minimal, {**minimal, "noSuchKey": 1}]
        for prop, sub in node["properties"].items():
            out += [{**minimal, prop: v} for v in schema_values(sub, depth + 1)]
    for pattern, sub in node.get("patternProperties", {}).items():
        keys = examples(pattern, (None, 24))
        values = schema_values(sub, depth + 1)
        out += [{k: values[0]} for k in keys] + [{"!bad key": values[0]}, {keys[0]: values[0], "!": values[0]}]
        out += [{keys[0]: v} for v in values]
    if "propertyNames" in node:
        keys = schema_values(node["propertyNames"], depth + 1)
        extra = node.get("additionalProperties")  # False beside patternProperties: their schema holds
        if not isinstance(extra, dict):
            extra = next(iter(node.get("patternProperties", {}).values()), {"type": "string"})
        values = schema_values(extra, depth + 1)
        out += [{k: values[0]} for k in keys if isinstance(k, str)]
        out += [{keys[0]: v} for v in values]
    return out


# -- values, from the model -----------------------------------------------------------------------


def model_slot(key: str):
    """The pydantic slot behind a README row."""
    model: type[BaseModel] = StackKeys
    slot = None
    for part in re.findall(r"[^.\[\]]+", key):
        if is_placeholder(part):  # an entry of a map of sections: the section
            model = unwrap(get_args(slot.type)[1]).type
            continue
        field = next(f for f in model.model_fields.values() if f.alias == part)
        slot = field_slot(field)
        tp = slot.type
        if get_origin(tp) in (tuple, list) and isinstance(unwrap(get_args(tp)[0]).type, type) \
                and issubclass(unwrap(get_args(tp)[0]).type, BaseModel):
            tp = unwrap(get_args(tp)[0]).type
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            model = tp
    return slot


def model_values(key: str, known: list[Any]) -> list[Any]:
    """Values the model's constraints suggest: its choices and bounds, the engine's strings, and `known`
    good values (the shipped stacks', the defaults) with variations of them."""
    slot = model_slot(key)
    out = _slot_values(slot.type, slot.metadata, known)
    field = slot.field
    if field is not None and field.default is None:
        out.append(None)
    return out


def _slot_values(tp: Any, metadata: tuple, known: list[Any]) -> list[Any]:
    bounds = _bounds(metadata)
    origin = get_origin(tp)
    if origin is Literal:
        return [*get_args(tp), f"{get_args(tp)[0]}x", get_args(tp)[0].lower()]
    if tp is bool:
        return [True, False, "true", "False", "TRUE", "yes", "tRuE", "1", 0]
    if tp is int:
        low, high = bounds.get("ge"), bounds.get("le")
        out: list[Any] = []
        for n in (low, high):
            if n is not None:
                out += [n, n - 1, n + 1, str(n), f" {n} ", f"0{n}", f"{n}.0", float(n), f"{n}e0"]
        return [*out, *known, "-0", "٣"]
    if tp is float:
        out = []
        for name in ("ge", "gt", "le"):
            if name in bounds:
                n = bounds[name]
                out += [n, n - 0.001, n + 0.001, str(n), f"{n + 0.001}", f"{n}e0"]
        return [*out, *known, "1.5", ".5", "5.", "1e2", "1E2", "1_0", "+1", "inf", "nan", "-0", "٣", True]
    if origin in (tuple, list):
        item = unwrap(get_args(tp)[0])
        items = [v for k in known if isinstance(k, list) for v in k] + _slot_values(item.type, item.metadata, [])
        most = bounds.get("max_length")
        out = [[], *([v] for v in items[:8])]
        if items:
            out += [[items[0], items[0]], [items[0]] * 11]
        if most:
            out.append([items[0]] * (most + 1))
        return [*out, *known]
    if origin is dict:
        key_slot, value_slot = (unwrap(a) for a in get_args(tp))
        sample = next((k for k in known if isinstance(k, dict) and k), {})
        keys = list(sample) + [v for v in _slot_values(key_slot.type, key_slot.metadata, []) if isinstance(v, str)]
        values = list(sample.values()) + _slot_values(value_slot.type, value_slot.metadata, [])
        first_key = keys[0] if keys else "k"
        first_value = values[0] if values else "v"
        return [{}, *({k: first_value} for k in keys[:8]), *({first_key: v} for v in values[:10]), *known]
    if tp is str:
        out = list(known)
        for value in [k for k in known if isinstance(k, str)][:1]:
            out += [value.upper(), f"{value}x", f" {value}", f"{value}\t", value[:-1], value * 2, f"{value}/"]
        return [*out, "", " ", "a", "A", "a" * 300, 7, True]
    return list(known)

