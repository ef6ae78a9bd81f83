"""Goodput: the pre-step check, the remediation controller and per-job GPU-second accounting.

These modules also run inside the cluster, outside this repository: the
controller's pod (a stock Python image) and the pre-step check (in the job's
own image) get them from a ConfigMap as the package `gpucluster_goodput`.
So they import only the standard library and each other, relatively
(tests/test_goodput_shipping.py holds them to that), and sit at the bottom
of the core's layers.
"""
