"""Jobs outside `pulumi up`: the manifest the stack would render, a job's state in the cluster, its logs,
cancelling it and where its checkpoints are (the logic of the job verbs; the kubernetes client in
bootstrap/cluster)."""
