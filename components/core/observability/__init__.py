"""What the cluster shows of itself (pure): the metrics stack's values, the EFA counters, dashboards, alerts, TensorBoard."""
