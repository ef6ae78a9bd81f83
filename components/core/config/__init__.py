"""The stack config: its schema (the types the program reads), the values AWS accepts, the engine's reading.

`from components.core.config import StackConfig, GpuPoolConfig, ...` for
the types; `components.core.stack_config.parse` to read a stack (it
adds the checks that need planning); docs.py writes the JSON Schema and
the README's reference from the same schema.
"""

from components.core.config.cluster import (
    ADDONS,
    DEFAULT_KUBERNETES_VERSION,
    EKS_VERSIONS,
    NetworkConfig,
    SystemNodesConfig,
    VersionPins,
    support_type,
)
from components.core.config.jobs import (
    CLEAN_POD_POLICIES,
    GRACE_PERIOD_MAX_SECONDS,
    KUBERNETES_DEFAULT_GRACE_SECONDS,
    LAUNCHERS,
    JobConfig,
    ModelConfig,
    RunPolicyConfig,
    parse_count,
)
from components.core.config.pools import (
    CAPACITY_TYPES,
    IDLE_MINUTES_DEFAULT,
    MAX_NODES_PER_MANAGED_NODE_GROUP,
    CpuPoolConfig,
    GpuPoolConfig,
)
from components.core.config.stack import NAMESPACE, PAUSE_MODES, StackConfig, StackKeys
from components.core.config.storage import (
    FSX_GIB_PER_TIB,
    FSX_PERSISTENT_2_THROUGHPUT,
    FsxConfig,
    StorageConfig,
)
from components.core.problems import ConfigError, Problem

__all__ = [
    "ADDONS", "CAPACITY_TYPES", "CLEAN_POD_POLICIES", "DEFAULT_KUBERNETES_VERSION", "EKS_VERSIONS",
    "FSX_GIB_PER_TIB", "FSX_PERSISTENT_2_THROUGHPUT", "GRACE_PERIOD_MAX_SECONDS", "IDLE_MINUTES_DEFAULT",
    "KUBERNETES_DEFAULT_GRACE_SECONDS", "LAUNCHERS", "MAX_NODES_PER_MANAGED_NODE_GROUP", "NAMESPACE", "PAUSE_MODES",
    "ConfigError", "CpuPoolConfig", "FsxConfig", "GpuPoolConfig", "JobConfig", "ModelConfig", "NetworkConfig", "Problem",
    "RunPolicyConfig", "StackConfig", "StackKeys", "StorageConfig", "SystemNodesConfig", "VersionPins",
    "parse_count", "support_type",
]
