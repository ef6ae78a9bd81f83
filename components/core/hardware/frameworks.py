"""Framework presets of mpirun jobs: the guide's Horovod and TensorFlow knobs that still apply (pure).

Horovod 0.28.1 (horovod/horovod, its last release, 2023-06; docs/tensor-fusion.rst,
docs/autotune.rst, horovod/common/common.h) still reads both knobs the guide
sets: HOROVOD_FUSION_THRESHOLD, the tensor-fusion buffer in bytes (the guide's
64 MiB; Horovod's default has been 128 MiB since 0.21), and HOROVOD_CYCLE_TIME,
the milliseconds between fusion cycles (the guide's 5; the default has been 1
since 0.21). A job's `env` overrides either.

TensorFlow: the guide's TF_ENABLE_AUTO_MIXED_PRECISION was read only by
NVIDIA's TensorFlow 1 containers; TensorFlow 2 does mixed precision in code
(`tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")`), so the
variable is not set: it would do nothing. `tensorflow` means TensorFlow with
Horovod under mpirun, hence the Horovod knobs.
"""

from __future__ import annotations

MIB = 1024 * 1024
HOROVOD = {
    "HOROVOD_FUSION_THRESHOLD": str(64 * MIB),
    "HOROVOD_CYCLE_TIME": "5",
}
PRESETS: dict[str, dict[str, str]] = {"pytorch": {}, "horovod": HOROVOD, "tensorflow": HOROVOD}
# Set by the guide, no longer read by current releases: named in the README, never set.
OBSOLETE = {"TF_ENABLE_AUTO_MIXED_PRECISION": "TensorFlow 2: tf.keras.mixed_precision.set_global_policy()"}


def preset_env(framework: str) -> dict[str, str]:
    return dict(PRESETS[framework])
