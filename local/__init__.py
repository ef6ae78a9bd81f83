"""The local control plane: the stack's cluster half on real upstream programs, without AWS.

Built from Go modules at pinned versions (versions, build), started and
stopped by our own code (pki, processes, controlplane, kwok, controllers),
fed the stack's own objects and its charts rendered by helm (charts,
cluster, kubectl), with KWOK nodes shaped as EKS registers each node group
(nodes), and a stand-in for cluster-autoscaler's ProvisioningRequest
processing, which cannot be built here (provisioning, provisioner).
`make local`, `make local-down` and `make e2e` drive it; nothing in
components/, bootstrap/ or policy/ imports it.
"""
