"""The deployed stack through Pulumi's Automation API: the one place the bootstrap verbs drive the Pulumi CLI.

`destroy`, `pause` and `resume` act on a stack that exists in a backend,
so they need the Pulumi CLI (the Automation API runs it) and the backend
you logged in to. Everything else in bootstrap/ works offline.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from bootstrap.stackfile import PROJECT_DIR

# Resource hooks (the export before an S3 link is deleted) need a CLI that runs
# them, and `destroy --run-program`; see README "Tear down".
MIN_CLI_VERSION = "3.182.0"


class AutomationError(Exception):
    """The stack cannot be reached: no CLI, no login, no such stack."""


class DeployedStack(Protocol):
    """What the verbs use of `pulumi.automation.Stack` (tests pass a fake)."""

    name: str

    def export_stack(self) -> Any: ...

    def preview(self, **kwargs: Any) -> Any: ...

    def up(self, **kwargs: Any) -> Any: ...

    def destroy(self, **kwargs: Any) -> Any: ...


def select(stack: str, project_dir: Path = PROJECT_DIR) -> DeployedStack:
    """The stack `stack` of this project in the current backend (`pulumi login`)."""
    from pulumi import automation as auto

    try:
        return auto.select_stack(stack_name=stack, work_dir=str(project_dir))
    except FileNotFoundError:
        raise AutomationError(f"the Pulumi CLI ({MIN_CLI_VERSION} or newer) is not on PATH: "
                              "https://www.pulumi.com/docs/iac/download-install/") from None
    except auto.StackNotFoundError:
        raise AutomationError(f"no stack {stack!r} in the backend you are logged in to "
                              "(`pulumi whoami -v` shows it; `pulumi stack ls` lists its stacks)") from None
    except auto.InvalidVersionError as err:
        raise AutomationError(f"the Pulumi CLI is too old: {err}") from None
    except auto.CommandError as err:
        raise AutomationError(last_error_line(err)) from None


def state_resources(stack: DeployedStack) -> list[dict[str, Any]]:
    """The resources of the stack's current state (apitype ResourceV3 dicts)."""
    deployment = stack.export_stack().deployment or {}
    return list(deployment.get("resources") or [])


def last_error_line(err: Exception) -> str:
    """The CLI's last `error:` line, without the Automation API's "code/stdout/stderr:" framing."""
    lines = [re.sub(r"^(stdout|stderr):\s*", "", line.strip()) for line in str(err).splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error:")]
    return (errors or lines or [type(err).__name__])[-1]


def with_env(env: Mapping[str, str], action: Callable[[], Any]) -> Any:
    """Run `action` with `env` set: the CLI and the program it runs inherit this process's environment."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return action()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def confirm(question: str, expected: str, assume_yes: bool, ask: Callable[[str], str] | None = None) -> bool:
    """True when --yes was given or the user typed `expected`; False for anything else (or no terminal)."""
    if assume_yes:
        return True
    if ask is None:
        import sys

        if not sys.stdin.isatty():
            return False
        ask = input
    try:
        return ask(f"{question} Type {expected!r} to go on: ").strip() == expected
    except EOFError:
        return False
