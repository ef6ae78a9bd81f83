"""ComponentResources on AWS: network, EKS cluster, IAM helpers, GPU node pools, storage, read-only lookups."""
