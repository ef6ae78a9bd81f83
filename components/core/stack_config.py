"""A stack's config, read end to end: the schema's validation, then the checks that need planning.

The one parser for the program (through `components.stack.load()`) and the
verbs: every problem at once, before any resource registers.
"""

from typing import Any

from components.core import limits, system_nodes
from components.core.config import StackConfig
from components.core.config.engine import read
from components.core.planning import checks
from components.core.problems import raise_problems


def parse(raw: dict[str, Any], project: str = "gpucluster", stack: str = "dev",
          secret_keys: tuple[str, ...] = (), secret_paths: tuple[str, ...] | None = None) -> StackConfig:
    """Validate a stack's raw config (`{"gpucluster:network": "<json>", ...}`); raises ConfigError.

    `secret_keys`: the keys set with `pulumi config set --secret`; `secret_paths`: the encrypted values
    inside them, when known (a key known secret without paths is secret as a whole)."""
    reading = read(raw, project, stack, secret_keys, secret_paths)
    raise_problems(reading.problems + checks.problems(reading.config, reading.valid)
                   + limits.problems(reading.config, reading.valid)
                   + system_nodes.problems(reading.config, reading.valid))
    return reading.config

