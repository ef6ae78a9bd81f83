"""Kubernetes objects as plain dicts: node pools, autoscaling, workers, launchers, Trainer, MPI operator, queueing."""
