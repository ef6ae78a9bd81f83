"""What every layer reports a bad input with: a problem (key path and message), and all of them at once.

The bottom of the core: config parsing, zone choice and the program's
lookups raise `ConfigError`; the CLI and the program print `render()`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """Every problem found in a stack's config, reported together."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = list(problems)
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.problems)
        lines = [f"gpucluster: {n} configuration problem{'s' if n != 1 else ''}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def raise_problems(problems: Iterable[Problem]) -> None:
    """Raise ConfigError when there is any problem."""
    problems = list(problems)
    if problems:
        raise ConfigError(problems)


def show(value: Any) -> str:
    """A value as the user wrote it, for messages."""
    if isinstance(value, str):
        return repr(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)
