"""Teams sharing one cluster (pure): their queues in the cohort (queues.py), their access (access.py), what the
plan says of their shares (plan.py)."""
