"""Read a stack file as the Pulumi CLI hands its config to the program (bootstrap/stackfile.py explains).

Here, for the CLI (bootstrap.stackfile re-exports it) and for the program, which reads a fleet's workers'
stack files beside its own (components.stack.load_stack_file).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from components.core.config.text import stack_yaml
from components.core.problems import ConfigError, Problem

PROJECT_DIR = Path(__file__).resolve().parents[4]

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
    return read_document(project_dir / "Pulumi.yaml", "gpucluster").top["name"]


def read_document(path: Path, project: str) -> stack_yaml.StackDocument:
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
    project = read_document(project_dir / "Pulumi.yaml", "gpucluster").top
    name = project["name"]
    out = {}
    for key, spec in (project.get("config") or {}).items():
        full = key if ":" in key else f"{name}:{key}"
        if isinstance(spec, dict) and "default" in spec:
            out[full] = spec["default"]
        elif not isinstance(spec, dict):
            out[full] = spec
    return out


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


def merged_config(document: stack_yaml.StackDocument, project_dir: Path = PROJECT_DIR,
                  overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """A read stack file's config merged over the project's defaults, as the engine would pass it."""
    merged: dict[str, Any] = project_defaults(project_dir)
    for key, value in document.config.items():
        # Encrypted secrets cannot be read offline; the program must not need their values.
        merged[key] = SECRET_STANDINS.get(key, SECRET_PLACEHOLDER) if is_secure(value) else _standins(value)
    merged.update(overrides or {})
    return {k: _as_engine_string(v) for k, v in merged.items()}


def secret_keys_of(paths: tuple[str, ...]) -> tuple[str, ...]:
    """The keys holding the secure values at `paths` (`gpucluster:jobs[0].env.K` -> `gpucluster:jobs`)."""
    return tuple(dict.fromkeys(re.match(r"[^.\[]+", p)[0] for p in paths))
