"""End-to-end tests on the local control plane (make e2e)."""
