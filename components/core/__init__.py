"""Pure facts and builders: no Pulumi resources, unit-tested on their own.

Config parsing and validation, the instance catalog, EFA layout, NCCL
presets, sizing, cost, node labels and autoscaler tags, FSx facts, zone
choice and the Kubernetes manifests of jobs and queues. The
ComponentResources one level up wire these into resources.
"""
