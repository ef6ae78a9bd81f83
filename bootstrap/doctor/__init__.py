"""`bootstrap doctor`: why a job waits or failed, from a live cluster or a bundle of what was read.

bundle (the on-disk format, read and written), collect (a live cluster into a
bundle), findings (what a cause looks like, and the report: text and JSON),
logparse (training log lines: loss, steps, checkpoints), cohort (Kueue's
ClusterQueues: whose queue, its quota and use), the rules_* modules (pure
Bundle -> findings, one theme each, every message format cited from upstream)
and causes (all the rules in order).
"""
