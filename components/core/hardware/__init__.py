"""Hardware facts: the GPU instance catalog, EFA interface layout, NCCL presets, zone choice, image registries."""
