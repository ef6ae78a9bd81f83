"""The running program's stack config: what the Pulumi engine passed, read by the pure core's parser."""

from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from components.core.config import StackConfig
from components.core.config.text import stack_files, stack_yaml
from components.core.problems import ConfigError, Problem
from components.core.stack_config import parse


def raw_from_engine() -> dict[str, Any]:
    """Every config key the Pulumi engine gave this program, as strings."""
    raw: dict[str, Any] = dict(runtime_config.get_config_env())
    raw.update(runtime_config.CONFIG.get())
    return raw


def load() -> StackConfig:
    """The current stack's config, validated: every problem at once, before any resource (raises ConfigError)."""
    raw = raw_from_engine()
    keys = secret_keys(raw)
    return parse(raw, pulumi.get_project(), pulumi.get_stack(), keys, secret_paths(keys))


def secret_paths(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """Where in the secret keys the encrypted values are, from the stack file the CLI read.

    The engine says only which keys hold a secret (PULUMI_CONFIG_SECRET_KEYS);
    a job's env with one `--secret --path` value arrives as a whole. The
    stack file names the paths; without it (config from an ESC environment,
    a stack file elsewhere), None: every value of those keys counts as secret.
    """
    if not keys:
        return ()
    path = Path.cwd() / f"Pulumi.{pulumi.get_stack()}.yaml"
    try:
        document = stack_yaml.parse(path.read_text(encoding="utf-8"), pulumi.get_project(), str(path))
    except (OSError, UnicodeDecodeError, stack_yaml.StackYamlError):
        return None
    found = tuple(p for p in document.secure_paths if p.split(".")[0].split("[")[0] in keys)
    return found if {p.split(".")[0].split("[")[0] for p in found} >= set(keys) else None


def secret_keys(raw: dict[str, Any]) -> tuple[str, ...]:
    """The keys the engine holds encrypted (`pulumi config set --secret`): their values arrive decrypted."""
    listed = set(runtime_config.get_config_secret_keys_env())
    return tuple(k for k in raw if k in listed or runtime_config.is_config_secret(k))


def load_stack_file(stack: str) -> StackConfig:
    """Another stack of this project, a fleet's worker, read from its file beside this one's (`pulumi up` runs
    in the project folder) as the CLI reads it. The manager needs only its pools, queues and region: the keys
    only its deployer knows stand in if the file leaves them to an environment. Raises ConfigError."""
    path = Path.cwd() / f"Pulumi.{stack}.yaml"
    project = pulumi.get_project()
    try:
        document = stack_files.read_document(path, project)
    except stack_files.StackFileError as err:
        raise ConfigError([Problem(path.name, str(err))]) from None
    raw, _ = stack_files.with_plan_standins(stack_files.merged_config(document, Path.cwd()))
    paths = tuple(document.secure_paths)
    return parse(raw, project, stack, stack_files.secret_keys_of(paths), paths)
