"""Read a stack's config the way the Pulumi CLI hands it to the program.

The CLI merges the project defaults of Pulumi.yaml with Pulumi.<stack>.yaml
and passes every value as a string (structured values as JSON). The offline
plan and the tests do the same, so the program parses exactly what it would
get from `pulumi up`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

PROJECT_DIR = Path(__file__).resolve().parent.parent


class StackFileError(Exception):
    pass


def project_name(project_dir: Path = PROJECT_DIR) -> str:
    return _load_yaml(project_dir / "Pulumi.yaml")["name"]


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise StackFileError(f"{path}: no such file") from None
    except yaml.YAMLError as exc:
        raise StackFileError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise StackFileError(f"{path}: must be a YAML mapping")
    return data


def _as_engine_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value)


def project_defaults(project_dir: Path = PROJECT_DIR) -> dict[str, Any]:
    """`config:` defaults of Pulumi.yaml, keys qualified with the project name."""
    project = _load_yaml(project_dir / "Pulumi.yaml")
    name = project["name"]
    out = {}
    for key, spec in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(spec, dict) and "default" in spec:
            out[full] = spec["default"]
        elif not isinstance(spec, dict):
            out[full] = spec
    return out


def read_stack_config(stack: str, project_dir: Path = PROJECT_DIR,
                      overrides: dict[str, Any] | None = None, stack_file: Path | None = None) -> dict[str, str]:
    """The merged raw config of `stack` (or of `stack_file`) as the engine would pass it."""
    path = stack_file or project_dir / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in project_dir.glob("Pulumi.*.yaml"))
        raise StackFileError(f"no stack {stack!r}: {path.name} not found; stacks: {', '.join(stacks)}")
    stack_file = _load_yaml(path)
    merged: dict[str, Any] = project_defaults(project_dir)
    for key, value in (stack_file.get("config") or {}).items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            # Encrypted secrets cannot be read offline; the program must not need them.
            value = "[secret]"
        merged[key] = value
    merged.update(overrides or {})
    return {k: _as_engine_string(v) for k, v in merged.items()}
