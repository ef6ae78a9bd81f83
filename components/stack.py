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
    raw = raw_from_engine()
    return parse(raw, pulumi.get_project(), pulumi.get_stack(), secret_keys(raw))


def secret_keys(raw: dict[str, Any]) -> tuple[str, ...]:
    """The keys the engine holds encrypted (`pulumi config set --secret`): their values arrive decrypted."""
    listed = set(runtime_config.get_config_secret_keys_env())
    return tuple(k for k in raw if k in listed or runtime_config.is_config_secret(k))
