"""The running program's stack config: what the Pulumi engine passed, read by the pure core's parser."""

from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components.core.config import StackConfig
from components.core.stack_config import parse


def raw_from_engine() -> dict[str, Any]:
    """Every config key the Pulumi engine gave this program, as strings."""
    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    return raw


def load() -> StackConfig:
    """The current stack's config, validated: every problem at once, before any resource (raises ConfigError)."""
    return parse(raw_from_engine(), pulumi.get_project(), pulumi.get_stack())
