"""The verbs that act on a live cluster's jobs: submit, status, logs, cancel, doctor, validate, fabric-test."""
