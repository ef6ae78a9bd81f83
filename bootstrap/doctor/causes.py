"""Every rule, in the order a person should read their findings: what ended or broke the job first, then waits.

A rule is a pure function Bundle -> list[Finding]. CAUSES documents each cause id:
what it matches and where that message format comes from (each rule module's
docstring cites the upstream file). `job-failed` runs only when nothing else matched.
"""

from __future__ import annotations

from collections.abc import Callable

from bootstrap.doctor import rules_goodput, rules_logs, rules_nodes, rules_pods, rules_scaling
from bootstrap.doctor.bundle import Bundle
from bootstrap.doctor.findings import Finding
from bootstrap.doctor.kueue import (
    rules_placement,
    rules_provisioning,
    rules_queue,
    rules_teams,
    rules_unevaluated,
    rules_upgrade,
)
from components.core.goodput import names

Rule = Callable[[Bundle], list[Finding]]

RULES: tuple[Rule, ...] = (
    rules_queue.deadline_exceeded,
    rules_queue.max_execution_time,
    rules_scaling.spot_interruption,
    rules_teams.team_preempted,
    rules_nodes.gpu_xid,
    rules_nodes.node_unhealthy,
    rules_nodes.devices_missing,
    rules_goodput.pre_step_check_failed,
    rules_goodput.node_quarantined,
    rules_pods.oom_killed,
    rules_logs.cuda_oom,
    rules_logs.loss_trouble,
    rules_logs.nccl_socket_fallback,
    rules_logs.nccl_watchdog,
    rules_logs.checkpoint_slow,
    rules_pods.image_pull,
    rules_queue.queue_inactive,
    rules_teams.team_over_share,
    rules_upgrade.created_before_topology,
    rules_placement.network_domain,
    rules_upgrade.unless_stranded(rules_placement.unless_topology(rules_queue.waiting_for_quota)),
    rules_unevaluated.set_aside,
    rules_provisioning.waiting_for_all_nodes,
    rules_teams.team_budget_reached,
    rules_queue.pods_ready_timeout,
    rules_scaling.insufficient_capacity,
    rules_scaling.scale_up,
)

# id: (what it matches, where the format comes from)
CAUSES: dict[str, tuple[str, str]] = {
    "deadline-exceeded": ("MPIJob/TrainJob/JobSet condition Failed, reason DeadlineExceeded",
                          "mpi-operator v0.8.2 mpi_job_controller.go; trainer v2.3.0 trainjob_types.go"),
    "max-execution-time": ("Workload Evicted DeactivatedDueToMaximumExecutionTimeExceeded, event "
                           "MaximumExecutionTimeExceeded", "kueue v0.19.2 workload_controller.go"),
    "spot-interruption": ("scaling activity naming a Spot interruption/rebalance; pod 'terminated in response to "
                          "imminent node shutdown' on a Spot node", "EC2 Auto Scaling; kubelet nodeshutdown"),
    "team-preempted": ("Workload Preempted=True InCohortReclamation/InCohortFairSharing/InCohortReclaimWhileBorrowing, "
                       "Evicted Preempted: 'Preempted to accommodate a workload ...; preemptor path: /<cohort>/<cq>'",
                       "kueue v0.19.2 preemption.go, workload.go, jobframework/reconciler.go"),
    "gpu-xid": ("node condition NvidiaXID<n>Error, event NvidiaXID<n>Warning, log 'NVRM: Xid (PCI:...): <n>,'",
                "eks-node-monitoring-agent dcgm_policies.go; NVIDIA XID catalog"),
    "node-hardware-unhealthy": ("AcceleratedHardwareReady/KernelReady/NetworkingReady/StorageReady/"
                                "ContainerRuntimeReady False", "eks-node-monitoring-agent conditions.go"),
    "node-not-ready": ("node Ready not True", "kube-controller-manager node lifecycle controller"),
    "efa-not-allocatable": ("allocatable vpc.amazonaws.com/efa below the type's EFA devices",
                            "components/core/hardware catalog.py, efa.py; kube-scheduler fit.go"),
    "gpu-not-allocatable": ("allocatable nvidia.com/gpu below the type's GPUs", "components/core/hardware/catalog.py"),
    "pre-step-check-failed": (f"a container terminated with exit code {names.PRE_STEP_EXIT_CODE} and the check's "
                              "verdict as its termination message", "components/core/goodput/precheck.py"),
    "node-quarantined": ("the job's gpucluster.io/remediations annotation (quarantined, or would-quarantine in "
                         "dry-run)", "components/core/goodput/controller.py"),
    "oom-killed": ("container (last) terminated reason OOMKilled", "kubelet"),
    "cuda-oom": ("'torch.OutOfMemoryError: CUDA out of memory' / 'CUDA error: out of memory'",
                 "PyTorch CUDACachingAllocator.cpp"),
    "loss-nan": ("a loss of nan/inf; Megatron 'number of nan iterations' > 0", "Megatron-LM, torchtitan, HF Trainer"),
    "loss-spike": ("a loss at least 2x (and 0.5 above) the median of the 5 before it", "Megatron-LM, torchtitan, HF Trainer"),
    "nccl-socket-fallback": ("'Using network Socket' / 'via NET/Socket' where EFA is expected, no NET/OFI",
                             "NCCL init.cc, net_socket.cc; aws-ofi-nccl nccl_ofi_log.h"),
    "nccl-watchdog-timeout": ("'Watchdog caught collective operation timeout'",
                              "PyTorch ProcessGroupNCCL.cpp WorkNCCL::checkTimeout"),
    "checkpoint-dominates": ("checkpoint saves take >= 25 % of the wall time between saves",
                             "Megatron-LM timers.py/training.py; torchtitan checkpoint.py"),
    "image-pull": ("container waiting ErrImagePull/ImagePullBackOff; event 'Failed to pull image'",
                   "kubelet image_manager.go"),
    "queue-inactive": ("Workload QuotaReserved False Inadmissible 'ClusterQueue <cq> is inactive'; ClusterQueue "
                       "Active False Stopped", "kueue v0.19.2 workload_controller.go, clusterqueue.go"),
    "team-over-share": ("a Workload QuotaReserved False Pending 'insufficient unused quota for nvidia.com/gpu ...' or "
                        "'> maximum capacity' while its cohort ClusterQueue uses its nominalQuota (flavorsReservation); "
                        "or, when Kueue set the job aside unevaluated (no QuotaReserved), its pod sets' GPUs past what "
                        "the cohort has idle", "kueue v0.19.2 flavorassigner.go, clusterqueue_types.go, "
                        "cluster_queue.go, resource_node.go"),
    "waiting-for-quota": ("Workload QuotaReserved False, reason Pending: 'insufficient unused quota ...'; or, set aside "
                          "unevaluated, its pod sets' GPUs past its queue's unused quota",
                          "kueue v0.19.2 scheduler.go, flavorassigner.go, cluster_queue.go, resource_node.go"),
    "created-before-topology": ("a Workload's QuotaReserved=False message with 'Flavor \"<f>\" supports only "
                                "TopologyAwareScheduling' (its pod set asks for no topology)",
                                "kueue v0.19.2 tas_flavorassigner.go, flavorassigner.go, scheduler.go"),
    "network-domain": ("a Workload's QuotaReserved=False message, or its SecondPassFailed event, with 'topology "
                       "\"<t>\" doesn't allow to fit any of <n> pod(s)' / 'allows to fit only <k> out of <n> pod(s)' / "
                       "'no topology domains at level: <label>'", "kueue v0.19.2 tas_flavor_snapshot.go, "
                       "flavorassigner.go, scheduler.go"),
    "waiting-for-all-nodes": ("a Workload with the admission check gpucluster-atomic-scale-up Pending, Retry or "
                              "Rejected (evicted, deactivated), or Ready with a delayed topology request Pending; "
                              "its ProvisioningRequest's conditions", "kueue v0.19.2 admissionchecks/provisioning/"
                              "controller.go, workload_controller.go; cluster-autoscaler 1.35.2 provisioningrequest/"),
    "team-budget-reached": ("the namespace's team's month-to-date spend at or over teams[].monthlyBudgetUsd "
                            "(bundle.json teams, read with --stack)", "gpucluster:teams; bootstrap/doctor/collect.py"),
    "pods-ready-timeout": ("Workload Evicted PodsReadyTimeout / deactivated after RequeuingLimitExceeded",
                           "kueue v0.19.2 workload_controller.go"),
    "insufficient-capacity": ("failed scaling activity with InsufficientInstanceCapacity; NotTriggerScaleUp 'in "
                              "backoff after failed scale-up'", "EC2 API errors; cluster-autoscaler 1.35.2"),
    "ec2-vcpu-quota": ("failed scaling activity with VcpuLimitExceeded", "EC2 API errors"),
    "waiting-for-nodes": ("pending pod with TriggeredScaleUp", "cluster-autoscaler 1.35.2 eventing_scale_up_processor.go"),
    "node-group-at-max-size": ("NotTriggerScaleUp 'max node group size reached'",
                               "cluster-autoscaler 1.35.2 skippedreasons.go"),
    "no-node-group-fits": ("NotTriggerScaleUp with other reasons", "cluster-autoscaler 1.35.2"),
    "job-failed": ("a Failed job or a non-zero exit when nothing above matched", "the operators; kubelet"),
}


def diagnose(bundle: Bundle) -> list[Finding]:
    findings = [finding for rule in RULES for finding in rule(bundle)]
    return findings or rules_pods.job_failed(bundle)
