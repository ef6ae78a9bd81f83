"""Read a stack's config the way the Pulumi CLI hands it to the program.

The CLI merges the project defaults of Pulumi.yaml with Pulumi.<stack>.yaml
and passes every value as a string (structured values as JSON). The offline
plan and the tests do the same, so the program parses exactly what it would
get from `pulumi up`: the file is read with the CLI's YAML rules
(components.core.config.text.stack_yaml: yaml.v3's typing, duplicate keys
refused, bounded alias expansion and size).

Two ways a stack file is wrong, two exit codes (README "A bad stack ..."):
a file that cannot be read at all (missing, a directory, not UTF-8, over
the size bound, not YAML, an alias bomb) raises StackFileError, one line,
exit 2; a file that reads but holds values the CLI would refuse or read in
a way nobody means (a repeated key, `010`, an unquoted date, ...) raises
StackFileProblems with every one of them, a bad stack like any config
problem: exit 1.

Two keys only the deployer can know (who administers the cluster, where
pulumi runs from) are not in the shipped stacks; the README says how to set
them. `with_plan_standins` fills them for the offline plan, which says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.core.config.text import stack_yaml
from components.core.problems import ConfigError, Problem

PROJECT_DIR = Path(__file__).resolve().parent.parent

# Keys a real deploy needs that the shipped stacks leave to the user, with
# what the offline plan assumes in their place. Neither value reaches AWS.
PLAN_STANDINS: dict[str, Any] = {
    "gpucluster:adminPrincipalArns": ["arn:aws:iam::000000000000:role/gpucluster-admin"],
    "gpucluster:publicAccessCidrs": ["1.1.1.1/32"],
}


# Secrets the offline plan cannot decrypt but the program validates: a stand-in of the right shape.
SECRET_STANDINS: dict[str, str] = {
    "gpucluster:alertSlackWebhookUrl": "https://hooks.slack.com/services/T00000000/B00000000/offlineplanstandin",
}
SECRET_PLACEHOLDER = "[secret]"


class StackFileError(Exception):
    """The stack file cannot be read at all: one line, exit 2."""


class StackFileProblems(ConfigError):
    """Values of a readable stack file the Pulumi CLI would refuse or misread: every one, a bad stack (exit 1).

    Reported before, and instead of, the config's own problems: which value a key holds is not known yet."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]):
        self.path = path
        super().__init__(Problem(where, message) for where, message in problems)

    def render(self) -> str:
        n = len(self.problems)
        lines = [f"gpucluster: {self.path}: {n} problem{'s' if n != 1 else ''} reading the stack file "
                 "(the config is checked once they are fixed):"]
        return "\n".join(lines + [f"  - {p}" for p in self.problems])


def project_name(project_dir: Path = PROJECT_DIR) -> str:
    return _read(project_dir / "Pulumi.yaml", "gpucluster").top["name"]


def _read(path: Path, project: str) -> stack_yaml.StackDocument:
    """A project or stack file, read as the Pulumi CLI reads it (bounded, duplicate keys refused)."""
    if path.is_dir():
        raise StackFileError(f"{path}: is a directory, not a stack file")
    try:
        with path.open("rb") as handle:
            data = handle.read(stack_yaml.MAX_BYTES + 1)
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise StackFileError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise StackFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise StackFileError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(data) > stack_yaml.MAX_BYTES:
        raise StackFileError(f"{path}: over {stack_yaml.MAX_BYTES:,} bytes; stack files are a few KB")
    try:
        return stack_yaml.parse(text, project, str(path))
    except stack_yaml.StackYamlProblems as exc:
        raise StackFileProblems(path, exc.problems) from None
    except stack_yaml.StackYamlError as exc:
        message = str(exc)
        raise StackFileError(message if message.startswith(str(path)) else f"{path}: {message}") from None


def _as_engine_string(value: Any) -> str:
    """A value as the engine hands it to the program (Pulumi's MarshalString)."""
    return stack_yaml.go_text(value)


def project_defaults(project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """`config:` defaults of Pulumi.yaml, keys qualified with the project name."""
    project = _read(project_dir / "Pulumi.yaml", "gpucluster").top
    name = project["name"]
    out = {}
    for key, spec in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(spec, dict) and "default" in spec:
            out[full] = spec["default"]
        elif not isinstance(spec, dict):
            out[full] = spec
    return out


def stack_path(stack: str, project_dir: Path = PROJECT_DIR) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str, project_dir: Path = PROJECT_DIR,
                      overrides: dict[str, Any] | None = None, stack_file: Path | None = None) -> dict[str, str]:
    """The merged raw config of `stack` (or of `stack_file`) as the engine would pass it."""
    path = stack_file or stack_path(stack, project_dir)
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise StackFileError(f"no stack {stack!r}: {path.name} not found; stacks: {', '.join(stacks)}")
    document = _read(path, project_name(project_dir))
    merged: dict[str, Any] = project_defaults(project_dir)
    for key, value in document.config.items():
        # Encrypted secrets cannot be read offline; the program must not need their values.
        merged[key] = SECRET_STANDINS.get(key, SECRET_PLACEHOLDER) if is_secure(value) else _standins(value)
    merged.update(overrides or {})
    return {k: _as_engine_string(v) for k, v in merged.items()}


def _standins(value: Any) -> Any:
    """`value` with every nested secure value replaced by the placeholder (a job's secret env, say)."""
    if is_secure(value):
        return SECRET_PLACEHOLDER
    if isinstance(value, dict):
        return {k: _standins(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_standins(v) for v in value]
    return value


def is_secure(value: Any) -> bool:
    """A value `pulumi config set --secret` wrote: `{secure: <ciphertext>}`."""
    return stack_yaml.is_secure(value)


def secure_paths(stack: str, project_dir: Path = PROJECT_DIR, stack_file: Path | None = None) -> tuple[str, ...]:
    """Where the stack file holds encrypted values: keys (`gpucluster:x`) and paths in them (`...jobs[0].env.K`)."""
    path = stack_file or stack_path(stack, project_dir)
    return tuple(_read(path, project_name(project_dir)).secure_paths) if path.exists() else ()


def secure_keys(stack: str, project_dir: Path = PROJECT_DIR, stack_file: Path | None = None) -> tuple[str, ...]:
    """The keys the engine lists as secret for the program (PULUMI_CONFIG_SECRET_KEYS): any holding a secure value."""
    keys = (re.match(r"[^.\[]+", p)[0] for p in secure_paths(stack, project_dir, stack_file))
    return tuple(dict.fromkeys(keys))


def stack_versions(path: Path) -> dict[str, Any]:
    """The stack file's gpucluster:versions mapping as written ({} when absent or not a mapping)."""
    versions = _read(path, project_name(path.parent)).config.get("gpucluster:versions")
    return versions if isinstance(versions, dict) else {}


def with_plan_standins(raw: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """`raw` with PLAN_STANDINS filled in where the stack leaves them unset, and the keys filled."""
    out = dict(raw)
    filled = []
    for key, value in PLAN_STANDINS.items():
        if key == "gpucluster:publicAccessCidrs" and out.get("gpucluster:deployerInVpc") == "true":
            continue  # private-only on purpose
        if out.get(key) in (None, "", "[]"):
            out[key] = _as_engine_string(value)
            filled.append(key)
    return out, filled


def set_key(text: str, key: str, render: Callable[[str], list[str]], after: str | None = None) -> str:
    """The stack file `text` with top-level config `key` (e.g. "gpucluster:paused") written as `render(indent)`
    (its lines, the key's own first) in place of its old value, a block included; or, where it is absent,
    added after the line of config key `after` or under `config:`. Every other line, comments included, kept."""
    lines = text.splitlines()
    pattern = re.compile(rf"^(\s*){re.escape(key)}:(\s.*)?$")
    start = next((i for i, line in enumerate(lines) if pattern.match(line)), None)
    if start is None:
        anchor = None
        if after is not None:
            anchor = next((i for i, line in enumerate(lines) if re.match(rf"^\s*{re.escape(after)}:", line)), None)
        if anchor is None:
            anchor = next((i for i, line in enumerate(lines) if line.rstrip() == "config:"), None)
        if anchor is None:
            raise StackFileError("the stack file has no `config:` mapping")
        lines[anchor + 1:anchor + 1] = render("  ")
    else:
        indent = pattern.match(lines[start]).group(1)
        end = start + 1
        # A block value: the lines indented deeper than the key, and blank lines among them.
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > len(indent)):
            end += 1
        while end > start + 1 and not lines[end - 1].strip():
            end -= 1  # keep the blank lines that separate it from what follows
        lines[start:end] = render(indent)
    return "\n".join(lines) + "\n"


def set_scalar(text: str, key: str, value: str) -> str:
    """`set_key` for a one-line YAML value."""
    return set_key(text, key, lambda indent: [f"{indent}{key}: {value}"])


def load_stack(stack: str, project_dir: Path = PROJECT_DIR, stack_file: Path | None = None,
               overrides: dict[str, Any] | None = None, standins: bool = False):
    """(StackConfig, the raw config as the engine would pass it, the stand-in keys filled) of a stack file.

    Raises StackFileError (unreadable) or config.ConfigError (invalid values: StackFileProblems, then the
    config's problems); `report` turns either into a message on stderr and the verbs' exit code.
    """
    from components.core import stack_config

    raw = read_stack_config(stack, project_dir, overrides=overrides, stack_file=stack_file)
    filled: list[str] = []
    if standins:
        raw, filled = with_plan_standins(raw)
    paths = secure_paths(stack, project_dir, stack_file)
    keys = tuple(dict.fromkeys(re.match(r"[^.\[]+", p)[0] for p in paths))
    return stack_config.parse(raw, project_name(project_dir), stack, keys, paths), raw, filled


def report(err: Exception) -> int:
    """Print a stack file or config error the way every verb does; 2 for an unreadable file, 1 for a bad stack."""
    import sys

    if isinstance(err, StackFileError):
        print(f"gpucluster: {err}", file=sys.stderr)
        return 2
    print(err.render(), file=sys.stderr)
    return 1
