"""The verbs that act on a live cluster's jobs: submit, status, logs, cancel, report, doctor, validate, fabric-test."""
