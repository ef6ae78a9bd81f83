"""Placement: a gang gets all of its nodes or none (atomic scale-up), close together in the EC2 network
(Kueue topology-aware scheduling); the Kueue objects, the stack's rules and the plan's view of both."""
