"""The goodput controller on the local control plane: the package the stack ships, run as a local process
(controller.py), as the service account the stack renders, against a Prometheus a test stands in for."""
