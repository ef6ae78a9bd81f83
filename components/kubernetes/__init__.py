"""ComponentResources in the cluster: device plugins, autoscaler, FSx volume, operators, queue, training jobs."""
