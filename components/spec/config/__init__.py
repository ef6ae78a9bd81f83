"""The stack config, parsed and validated into frozen dataclasses (see stack.py).

`components.spec.config` is the one import for the rest of the program:
the types and allowed values (types.py), `parse`, `load` and the helpers.
"""

from components.spec.config.jobs import parse_count
from components.spec.config.stack import eks_regions, load, parse, raise_problems, raw_from_engine
from components.spec.config.types import *  # noqa: F403
from components.spec.validation import ConfigError, show

__all__ = [  # noqa: F405 (re-exported from types)
    "ConfigError", "show", "parse", "load", "raise_problems", "raw_from_engine", "eks_regions", "parse_count",
]
