"""The local stand-in for cluster-autoscaler's ProvisioningRequest processing (never on EKS): its rules, from
cluster-autoscaler 1.35.2's source (rules.py), and the controller process that applies them (provisioner.py)."""
