"""A stack's config, read end to end: the schema's validation, then the checks that need planning.

The one entry point for the program (`load()`) and the verbs (`parse()`):
every problem at once, before any resource registers.
"""

from typing import Any

from components.core.config import StackConfig
from components.core.config.engine import read
from components.core.planning import checks
from components.core.problems import raise_problems


def parse(raw: dict[str, Any], project: str = "gpucluster", stack: str = "dev") -> StackConfig:
    """Validate a stack's raw config (`{"gpucluster:network": "<json>", ...}`); raises ConfigError."""
    reading = read(raw, project, stack)
    raise_problems(reading.problems + checks.problems(reading.config, reading.valid))
    return reading.config


def raw_from_engine() -> dict[str, Any]:
    """Every config key the Pulumi engine gave this program, as strings."""
    from pulumi.runtime import config as runtime_config

    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    return raw


def load() -> StackConfig:
    """The current stack's config, validated (raises ConfigError)."""
    import pulumi

    return parse(raw_from_engine(), pulumi.get_project(), pulumi.get_stack())
