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

from components.core.config.text.stack_files import (  # noqa: F401 (this module's API, for the verbs)
    PLAN_STANDINS,
    SECRET_PLACEHOLDER,
    SECRET_STANDINS,
    StackFileError,
    StackFileProblems,
    _as_engine_string,
    _standins,
    is_secure,
    merged_config,
    project_defaults,
    project_name,
    read_document,
    secret_keys_of,
    with_plan_standins,
)

PROJECT_DIR = Path(__file__).resolve().parent.parent


def stack_path(stack: str, project_dir: Path = PROJECT_DIR) -> Path:
    return project_dir / f"Pulumi.{stack}.yaml"


def read_stack_config(stack: str, project_dir: Path = PROJECT_DIR,
                      overrides: dict[str, Any] | None = None, stack_file: Path | None = None) -> dict[str, str]:
    """The merged raw config of `stack` (or of `stack_file`) as the engine would pass it."""
    path = stack_file or stack_path(stack, project_dir)
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise StackFileError(f"no stack {stack!r}: {path.name} not found; stacks: {', '.join(stacks)}")
    return merged_config(read_document(path, project_name(project_dir)), project_dir, overrides)


def secure_paths(stack: str, project_dir: Path = PROJECT_DIR, stack_file: Path | None = None) -> tuple[str, ...]:
    """Where the stack file holds encrypted values: keys (`gpucluster:x`) and paths in them (`...jobs[0].env.K`)."""
    path = stack_file or stack_path(stack, project_dir)
    return tuple(read_document(path, project_name(project_dir)).secure_paths) if path.exists() else ()


def secure_keys(stack: str, project_dir: Path = PROJECT_DIR, stack_file: Path | None = None) -> tuple[str, ...]:
    """The keys the engine lists as secret for the program (PULUMI_CONFIG_SECRET_KEYS): any holding a secure value."""
    return secret_keys_of(secure_paths(stack, project_dir, stack_file))


def stack_versions(path: Path) -> dict[str, Any]:
    """The stack file's gpucluster:versions mapping as written ({} when absent or not a mapping)."""
    versions = read_document(path, project_name(path.parent)).config.get("gpucluster:versions")
    return versions if isinstance(versions, dict) else {}


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
    return stack_config.parse(raw, project_name(project_dir), stack, secret_keys_of(paths), paths), raw, filled


def report(err: Exception) -> int:
    """Print a stack file or config error the way every verb does; 2 for an unreadable file, 1 for a bad stack."""
    import sys

    if isinstance(err, StackFileError):
        print(f"gpucluster: {err}", file=sys.stderr)
        return 2
    print(err.render(), file=sys.stderr)
    return 1
