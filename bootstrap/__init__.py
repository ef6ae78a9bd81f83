"""The operator CLI: `python -m bootstrap <verb>` (plan, size, nccl-report)."""
