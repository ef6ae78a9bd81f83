"""Planning: cluster and job sizing, cost per hour, teardown deadlines, Kueue admission order, config checks."""
