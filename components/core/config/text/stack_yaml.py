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

The typing of one value, and its text for the program, are in yaml_v3.py.

Where yaml.v3 reads a value in a way a reader of the file would not expect,
this refuses it with the key path (or line) and the fix instead of guessing: `010`
(octal 8 to yaml.v3), `0x1F`, `0o17`, `0b1` (numbers, not text), unquoted
dates (Go's time text), `.inf`/`.nan` (the CLI cannot load them at all),
block strings starting with a line break or a tab (the CLI's re-encoding
drops or breaks them), keys that are not strings, and `x` beside
`gpucluster:x` (the CLI keeps one of them at random). These are problems of
single values: the reader goes on and raises every one at once
(StackYamlProblems). What stops it at once is a file it cannot read at all
(not YAML, not a mapping, too big, nested too deeply, an alias bomb).

Bounds: a stack file over MAX_BYTES is refused, and alias expansion stops
at yaml.v3's ratio or at MAX_NODES nodes, whichever comes first: nine
nested anchors end in a short error, not gigabytes of memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from components.core.config.text.yaml_v3 import go_text as go_text  # the program's text of a value, for the callers
from components.core.config.text.yaml_v3 import plain

MAX_BYTES = 1024 * 1024  # stack files are a few KB; the Pulumi CLI itself sets no limit
MAX_NODES = 200_000  # values built, aliases expanded; far above any real stack file
# yaml.v3 decode.go: fail when more than 100 of over 1000 decodes come from aliases and their share
# exceeds allowedAliasRatio (0.99 up to 400,000 decodes, falling to 0.10 at 4,000,000).
_ALIAS_MIN, _DECODE_MIN = 100, 1000

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


class StackYamlProblems(StackYamlError):
    """The file reads, but values in it the CLI would refuse or read surprisingly: every one, (place, message)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("\n".join(f"{where}: {message}" for where, message in problems))


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
    def __init__(self, project: str | None = None) -> None:
        self.project = project  # names `config.x` values `<project>:x`, as every other message does
        self.nodes = 0
        self.aliased = 0
        self.seen: set[int] = set()
        self.alias_depth = 0
        self.problems: list[tuple[str, str]] = []
        self.reported: set[int] = set()  # nodes already reported: an alias repeats its anchor's node, not its problem

    def problem(self, node: yaml.Node, path: str, message: str) -> None:
        if id(node) not in self.reported:
            self.reported.add(id(node))
            self.problems.append((self.place(path, node), message))

    def place(self, path: str, node: yaml.Node) -> str:
        if not path:
            return f"line {node.start_mark.line + 1}"
        if self.project and path.startswith("config."):
            rest = path.removeprefix("config.")
            key = re.match(r"[^.\[]+", rest)[0]
            try:
                return namespaced(key, self.project, "") + rest[len(key):]
            except StackYamlError:
                pass  # a key that is no config key: reported by parse(); its values keep the raw path
        return path

    def build(self, node: yaml.Node, path: str) -> Any:
        self.nodes += 1
        revisit = id(node) in self.seen
        if self.alias_depth or revisit:
            self.aliased += 1
        if self.nodes > MAX_NODES or (self.aliased > _ALIAS_MIN and self.nodes > _DECODE_MIN
                                      and self.aliased / self.nodes > _alias_ratio(self.nodes)):
            where = self.place(path, node) if path else "the file"
            raise StackYamlError(f"{where}: too much alias expansion (over {self.nodes:,} values "
                                 f"built, {self.aliased:,} from aliases); the Pulumi CLI refuses it too "
                                 "(\"document contains excessive aliasing\")")
        self.seen.add(id(node))
        if revisit:
            self.alias_depth += 1
        try:
            if isinstance(node, yaml.ScalarNode):
                value, problem = _typed(node)
                if problem:
                    self.problem(node, path, problem)
                return value
            if node.tag not in _COLLECTION_TAGS:
                self.problem(node, path, f"explicit tag {node.tag!r} is not supported here")
            if isinstance(node, yaml.SequenceNode):
                return [self.build(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
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
            key = self._key(key_node)
            if key is None:
                continue
            line = key_node.start_mark.line + 1
            if key in first_line:
                self.problem(key_node, "", f"mapping key {key!r} already defined at line {first_line[key]} "
                                           "(the Pulumi CLI refuses a repeated key)")
                self.build(value_node, _join(path, key))  # its own problems, too; the first value stays
                continue
            first_line[key] = line
            out[key] = self.build(value_node, _join(path, key))
        # Merged keys (`<<: *defaults`) come under the explicit ones; earlier merged maps win (yaml.v3 merge).
        for merged in merges:
            for source in (merged.value if isinstance(merged, yaml.SequenceNode) else [merged]):
                value = self.build(source, path)
                if not isinstance(value, dict):
                    self.problem(source, path, "`<<` must merge a mapping")
                    continue
                for key, item in value.items():
                    out.setdefault(key, item)
        return out

    def _key(self, node: yaml.Node) -> str | None:
        """The key's text, or None (reported) for a key the CLI would not read as a string."""
        if not isinstance(node, yaml.ScalarNode):
            self.problem(node, "", "a mapping key must be a string")
            return None
        value, problem = _typed(node)
        if problem or not isinstance(value, str):
            why = problem or f"read as {type(value).__name__}, not a string; quote it (\"{node.value}\")"
            self.problem(node, "", f"key {node.value!r}: {why}")
            return None
        return value


def _alias_ratio(decodes: int) -> float:
    low, high = 400_000, 4_000_000
    if decodes <= low:
        return 0.99
    if decodes >= high:
        return 0.10
    return 0.99 - 0.89 * (decodes - low) / (high - low)


def _one_line(exc: yaml.YAMLError) -> str:
    """PyYAML's message of several lines as one: where it stopped, what it found, what it was reading."""
    mark, problem = getattr(exc, "problem_mark", None), getattr(exc, "problem", None)
    if mark is None or not problem:
        return " ".join(str(exc).split())
    context, since = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    reading = f" ({context}{f' from line {since.line + 1}' if since else ''})" if context else ""
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}{reading}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _typed(node: yaml.ScalarNode) -> tuple[Any, str | None]:
    """(the scalar as yaml.v3 types it, None), or (None, why that would surprise)."""
    text = node.value
    if node.style in ("|", ">") and text[:1] in ("\n", "\t"):
        return None, ("a block string starting with a line break or a tab is changed by the Pulumi CLI (it drops "
                      "the first line break, and fails on a tab); start it with text")
    if node.tag == PLAIN_TAG:
        return plain(text)
    if node.tag == STR_TAG:  # quoted, a block string, or !!str
        return text, None
    return None, f"explicit tag {node.tag!r} is not supported; write the plain value"


def parse(text: str, project: str, source: str = "the stack file") -> StackDocument:
    """The stack file's top-level mapping and its `config:` keys, namespaced, with secure values marked."""
    if len(text.encode("utf-8")) > MAX_BYTES:
        raise StackYamlError(f"{source}: {len(text.encode()):,} bytes; stack files over {MAX_BYTES:,} bytes are "
                             "refused")
    text = text.removeprefix("\ufeff")
    try:
        root = next(iter(yaml.compose_all(text, Loader=_Loader)), None)  # the first document, as yaml.v3 reads
    except yaml.YAMLError as exc:
        raise StackYamlError(f"{source}: not valid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
    builder = _Builder(project)
    try:
        top = builder.build(root, "") if root is not None else {}
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
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
        try:
            full = namespaced(key, project, source)
        except StackYamlError as err:
            builder.problems.append((f"config.{key}", str(err).removeprefix(f"{source}: ")))
            continue
        if full in origin:
            builder.problems.append((full, f"set twice, as {origin[full]!r} and as {key!r}; the Pulumi CLI would "
                                           "keep one of them at random: remove one"))
            continue
        origin[full] = key
        if value is None:
            document.warnings.append(f"{full}: no value; the Pulumi CLI treats it as an empty string")
        document.config[full] = value
        document.secure_paths += _secure_paths(value, full)
    if builder.problems:
        raise StackYamlProblems(builder.problems)
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
    builder = _Builder()
    try:
        root = next(iter(yaml.compose_all(text.removeprefix("\ufeff"), Loader=_Loader)), None)
        value = builder.build(root, "") if root is not None else None
    except yaml.YAMLError as exc:
        raise StackYamlError(f"{source}: not valid YAML: {_one_line(exc)}") from None
    except RecursionError:
        raise StackYamlError(f"{source}: nested too deeply") from None
    if builder.problems:
        raise StackYamlProblems(builder.problems)
    return value
