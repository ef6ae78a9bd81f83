"""gpucluster's building blocks.

core/        pure facts and builders (no Pulumi resources)
aws/         ComponentResources on AWS
kubernetes/  ComponentResources inside the cluster
hooks/       resource hooks that keep data on delete
manifests/   vendored upstream manifests
stack.py     the running program's config, from the Pulumi engine
"""
