"""Read a stack file the way the Pulumi CLI does, and refuse what the CLI would read in a way nobody means.

The CLI parses `Pulumi.<stack>.yaml` with Go's yaml.v3 (pulumi/pulumi
sdk/go/common/workspace/loaders.go LoadProjectStackBytes; gopkg.in/yaml.v3
v3.0.1), so, unlike PyYAML's YAML 1.1 loader:

- only true/True/TRUE and false/False/FALSE are booleans: `no`, `off`,
  `yes` stay strings;
- a mapping key given twice, at any depth, is an error (decode.go mapping);
- aliases expand under a ratio limit ("document contains excessive
  aliasing", decode.go allowedAliasRatio);
- floats reach the program through Go's formatting (`1.0` is "1", `1.10`
  is "1.1");
- keys without a namespace get the project's (`x` is `gpucluster:x`).

Where yaml.v3 reads a value in a way a reader of the file would not expect,
this refuses it with the key path and the fix instead of guessing: `010`
(octal 8 to yaml.v3), `0x1F`, `0o17`, `0b1` (numbers, not text), unquoted
dates (Go's time text), `.inf`/`.nan` (the CLI cannot load them at all),
block strings starting with a line break or a tab (the CLI's re-encoding
drops or breaks them), keys that are not strings, and `x` beside
`gpucluster:x` (the CLI keeps one of them at random).

Bounds: a stack file over MAX_BYTES is refused, and alias expansion stops
at yaml.v3's ratio or at MAX_NODES nodes, whichever comes first: nine
nested anchors end in a short error, not gigabytes of memory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import yaml

MAX_BYTES = 1024 * 1024  # stack files are a few KB; the Pulumi CLI itself sets no limit
MAX_NODES = 200_000  # values built, aliases expanded; far above any real stack file
# yaml.v3 decode.go: fail when more than 100 of over 1000 decodes come from aliases and their share
# exceeds allowedAliasRatio (0.99 up to 400,000 decodes, falling to 0.10 at 4,000,000).
_ALIAS_MIN, _DECODE_MIN = 100, 1000

BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
NULLS = ("", "~", "null", "Null", "NULL")
_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # yaml.v3 yamlStyleFloat
_OTHER_INT = re.compile(r"[-+]?0([0-7_]+|[xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+|[0-9_]+)")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
# yaml.v3 resolve.go allowedTimestampFormats, the date-first ones.
_TIMESTAMP = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([Tt ]\d{1,2}:\d{1,2}:\d{1,2}(\.\d*)?\s*(Z|[-+]\d{1,2}(:?\d{2})?)?)?")
STR_TAG = "tag:yaml.org,2002:str"
PLAIN_TAG = "tag:gpucluster,2026:plain"  # an untagged plain scalar, typed here by yaml.v3's rules
_COLLECTION_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """Composes nodes only; an untagged plain scalar keeps its text under PLAIN_TAG (no YAML 1.1 typing)."""

    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return PLAIN_TAG
        return super().resolve(kind, value, implicit)


class StackYamlError(Exception):
    """The file cannot be read as the CLI reads it: the message names the line or key and the fix."""


@dataclass(frozen=True)
class Secure:
    """A `{secure: <ciphertext>}` value (`pulumi config set --secret`): the CLI decrypts it for the program."""

    ciphertext: str


@dataclass
class StackDocument:
    """The file's top level (`config:` keys namespaced), and the paths of its secure values."""

    top: dict[str, Any]
    config: dict[str, Any]
    secure_paths: list[str] = field(default_factory=list)  # "gpucluster:jobs[0].env.WANDB_API_KEY"
    warnings: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self) -> None:
        self.nodes = 0
        self.aliased = 0
        self.seen: set[int] = set()
        self.alias_depth = 0

    def build(self, node: yaml.Node, path: str) -> Any:
        self.nodes += 1
        revisit = id(node) in self.seen
        if self.alias_depth or revisit:
            self.aliased += 1
        if self.nodes > MAX_NODES or (self.aliased > _ALIAS_MIN and self.nodes > _DECODE_MIN
                                      and self.aliased / self.nodes > _alias_ratio(self.nodes)):
            raise StackYamlError(f"{path or 'the file'}: too much alias expansion (over {self.nodes:,} values "
                                 f"built, {self.aliased:,} from aliases); the Pulumi CLI refuses it too "
                                 "(\"document contains excessive aliasing\")")
        self.seen.add(id(node))
        if revisit:
            self.alias_depth += 1
        try:
            if isinstance(node, yaml.ScalarNode):
                return scalar(node, path)
            if isinstance(node, yaml.SequenceNode):
                _collection_tag(node, path)
                return [self.build(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
            _collection_tag(node, path)
            return self.mapping(node, path)
        finally:
            if revisit:
                self.alias_depth -= 1

    def mapping(self, node: yaml.MappingNode, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag == PLAIN_TAG and key_node.value == "<<":
                merges.append(value_node)
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise StackYamlError(f"line {line}: mapping key {key!r} already defined at line {first_line[key]} "
                                     "(the Pulumi CLI refuses a repeated key)")
            first_line[key] = line
            out[key] = self.build(value_node, _join(path, key))
        # Merged keys (`<<: *defaults`) come under the explicit ones; earlier merged maps win (yaml.v3 merge).
        for merged in merges:
            for source in (merged.value if isinstance(merged, yaml.SequenceNode) else [merged]):
                value = self.build(source, path)
                if not isinstance(value, dict):
                    raise StackYamlError(f"{path or 'the file'}: `<<` must merge a mapping")
                for key, item in value.items():
                    out.setdefault(key, item)
        return out

    @staticmethod
    def _key(node: yaml.Node, path: str) -> str:
        where = f"line {node.start_mark.line + 1}"
        if not isinstance(node, yaml.ScalarNode):
            raise StackYamlError(f"{where}: a mapping key must be a string")
        value = scalar(node, path)
        if not isinstance(value, str):
            raise StackYamlError(f"{where}: key {node.value!r} is read as {type(value).__name__}, not a string; "
                                 f"quote it (\"{node.value}\")")
        return value


def _alias_ratio(decodes: int) -> float:
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * (decodes - low) / (high - low)


def _collection_tag(node: yaml.Node, path: str) -> None:
    if node.tag not in _COLLECTION_TAGS:
        raise StackYamlError(f"{path or 'line ' + str(node.start_mark.line + 1)}: explicit tag {node.tag!r} is not "
                             "supported here")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def scalar(node: yaml.ScalarNode, path: str) -> Any:
    """A scalar as yaml.v3 types it, or a StackYamlError where that would surprise."""
    text, where = node.value, path or f"line {node.start_mark.line + 1}"
    if node.style in ("|", ">") and text[:1] in ("\n", "\t"):
        raise StackYamlError(f"{where}: a block string starting with a line break or a tab is changed by the Pulumi "
                             "CLI (it drops the first line break, and fails on a tab); start it with text")
    if node.tag == PLAIN_TAG:
        return resolve(text, where)
    if node.tag == STR_TAG:  # quoted, a block string, or !!str
        return text
    raise StackYamlError(f"{where}: explicit tag {node.tag!r} is not supported; write the plain value")


def resolve(text: str, where: str) -> Any:
    """A plain scalar's value by yaml.v3's rules (resolve.go), refusing its surprising readings."""
    if text in BOOLS:
        return BOOLS[text]
    if text in NULLS:
        return None
    if _SPECIAL_FLOAT.fullmatch(text):
        raise StackYamlError(f"{where}: got {text}; the Pulumi CLI cannot load a stack file holding .inf or .nan "
                             "(quote it if you mean the text)")
    if _DECIMAL_INT.fullmatch(text) and not text.startswith(("_", "-_", "+_")):
        return int(text.replace("_", ""))
    if _OTHER_INT.fullmatch(text) and text.lstrip("+-") not in ("0",):
        meant = _go_int(text)
        shown = f"the number {meant}" if meant is not None else "a number"
        raise StackYamlError(f"{where}: got {text}, which the Pulumi CLI reads as {shown} (YAML 1.1 octal, hex or "
                             f"binary); quote it (\"{text}\") to keep the text, or write {meant if meant is not None else 'the decimal'}")
    if _FLOAT.fullmatch(text.replace("_", "")):
        number = float(text.replace("_", ""))
        if math.isinf(number):
            return text  # overflow: yaml.v3 keeps it a string
        return int(number) if number.is_integer() and abs(number) < 2**63 else number
    if _TIMESTAMP.fullmatch(text):
        raise StackYamlError(f"{where}: got {text}, which the Pulumi CLI turns into Go's date text "
                             f"(\"{text} 00:00:00 +0000 UTC\"); quote it (\"{text}\")")
    return text


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), as yaml.v3 calls it (underscores removed; a leading 0 is octal)."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-").replace("_", "")
    prefixes = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    try:
        if body[:2] in prefixes:
            return sign * int(body[2:], prefixes[body[:2]])
        return sign * int(body, 8)
    except ValueError:
        return None  # 08, 09: yaml.v3 reads them as floats 8 and 9


def go_text(value: Any) -> str:
    """A top-level config value as the program receives it (Pulumi's MarshalString, Go's float formatting)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _go_float(number: float) -> str:
    """encoding/json's float64 text: plain decimals from 1e-6 up to 1e21, exponents outside."""
    if number == 0:
        return "0"
    if 1e-6 <= abs(number) < 1e21:
        text = format(Decimal(repr(number)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = repr(number).partition("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent or 0):+d}"


def parse(text: str, project: str, source: str = "the stack file") -> StackDocument:
    """The stack file's top-level mapping and its `config:` keys, namespaced, with secure values marked."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise StackYamlError(f"{source}: {len(text.encode()):,} bytes; stack files over {MAX_BYTES:,} bytes are "
                             "refused")
    text = text.removeprefix("\ufeff")
    try:
        root = next(iter(yaml.compose_all(text, Loader=_Loader)), None)  # the first document, as yaml.v3 reads
    except yaml.YAMLError as exc:
        raise StackYamlError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
    builder = _Builder()
    try:
        top = builder.build(root, "") if root is not None else {}
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
    except StackYamlError as err:
        # Name a config value by its key, as every other message does (config.x.y -> gpucluster:x.y).
        where, sep, message = str(err).partition(": ")
        if not where.startswith("config.") or not sep:
            raise
        key = re.match(r"[^.\[]+", where.removeprefix("config."))[0]
        try:
            full = namespaced(key, project, source)
        except StackYamlError:
            raise err from None
        raise StackYamlError(f"{full}{where.removeprefix('config.')[len(key):]}: {message}") from None
    if top is None:
        top = {}
    if not isinstance(top, dict):
        raise StackYamlError(f"{source}: must be a YAML mapping, got {type(top).__name__}")
    raw_config = top.get("config")
    if raw_config is None:
        raw_config = {}
    if not isinstance(raw_config, dict):
        raise StackYamlError(f"{source}: `config:` must be a mapping of keys to values")
    document = StackDocument(top=top, config={})
    origin: dict[str, str] = {}
    for key, value in raw_config.items():
        full = namespaced(key, project, source)
        if full in origin:
            raise StackYamlError(f"{source}: config keys {origin[full]!r} and {key!r} are the same key "
                                 f"({full}); the Pulumi CLI would keep one of them at random: remove one")
        origin[full] = key
        if value is None:
            document.warnings.append(f"{full}: no value; the Pulumi CLI treats it as an empty string")
        document.config[full] = value
        document.secure_paths += _secure_paths(value, full)
    return document


def namespaced(key: str, project: str, source: str) -> str:
    """`x` -> `<project>:x`; `ns:config:x` -> `ns:x` (pulumi sdk/go/common/resource/config/key.go ParseKey)."""
    parts = key.split(":")
    if len(parts) == 1:
        return f"{project}:{key}"
    if len(parts) == 2:
        return key
    if len(parts) == 3 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    raise StackYamlError(f"{source}: could not parse {key!r} as a configuration key (namespace:name)")


def is_secure(value: Any) -> bool:
    """`{secure: <ciphertext>}`, anywhere (pulumi object.go isSecureValue)."""
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def _secure_paths(value: Any, path: str) -> list[str]:
    if is_secure(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _secure_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _secure_paths(v, f"{path}[{i}]")]
    return []


def parse_value(text: str, source: str = "the file") -> Any:
    """Any YAML document (a job file, say), by the same rules and bounds as a stack file."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise StackYamlError(f"{source}: over {MAX_BYTES:,} bytes")
    try:
        root = next(iter(yaml.compose_all(text.removeprefix("\ufeff"), Loader=_Loader)), None)
        return _Builder().build(root, "") if root is not None else None
    except yaml.YAMLError as exc:
        raise StackYamlError(f"{source}: not valid YAML: {exc}") from None
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
