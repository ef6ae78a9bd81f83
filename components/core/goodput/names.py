"""The names the pieces of the goodput loop agree on: the pre-step check writes them, the controller and
`bootstrap report` read them. Standard library only (this file ships into the cluster)."""

from __future__ import annotations

# -- quarantine -------------------------------------------------------------------------------------------
# A NoSchedule taint no pod of ours tolerates: the scheduler, cluster-autoscaler (scale-down treats the
# node as any other) and Kueue's topology-aware scheduling (TASReplaceNodeOnNodeTaints, beta and on in
# kueue v0.19.2 pkg/features/kube_features.go) all keep the job's pods off the node.
QUARANTINE_TAINT_KEY = "gpucluster.io/quarantine"
QUARANTINE_EFFECT = "NoSchedule"
# On the node: JSON {"reason", "job", "namespace", "at" (RFC 3339), "evidence": {...}}.
EVIDENCE_ANNOTATION = "gpucluster.io/quarantine-evidence"
# On the job object (MPIJob, TrainJob or JobSet): a JSON list, oldest first, of
# {"at", "node", "reason", "action", "mode", "evidence"}.
REMEDIATIONS_ANNOTATION = "gpucluster.io/remediations"

# Why a node is quarantined: the pre-step check, or an alert of ours (observability.goodput_alerts).
REASON_PRE_STEP = "pre-step-check"
REASON_NCCL_ON_SOCKETS = "nccl-on-sockets"
REASON_STRAGGLER = "straggler"
REASON_XID = "xid"
REASONS = (REASON_PRE_STEP, REASON_NCCL_ON_SOCKETS, REASON_STRAGGLER, REASON_XID)

# gpuPools[].remediation
MODE_OFF, MODE_DRY_RUN, MODE_ON = "off", "dry-run", "on"
MODES = (MODE_OFF, MODE_DRY_RUN, MODE_ON)
# What the controller did, in the job's record.
ACTION_QUARANTINED = "quarantined"  # tainted and cordoned, the job's pod on it deleted
ACTION_WOULD_QUARANTINE = "would-quarantine"  # dry-run: nothing changed

# -- the pre-step check -----------------------------------------------------------------------------------
# Exit code of the check when it fails (the job's command is not run): not one Python, a shell or
# torchrun uses (1, 2, 126-128+n), so the controller and doctor tell it from a training failure.
PRE_STEP_EXIT_CODE = 86
# The check's verdict is the container's termination message (/dev/termination-log, read by the
# kubelet into status.containerStatuses[].state.terminated.message, at most 4096 bytes): one JSON
# object under this key, the same in every pod of the job (rank 0 gathers every node's result; an
# MPIJob's workers do not terminate, its launcher does): {"nodes": {<node>: {"verdict", "reason",
# "detail"}}, "busbw_gbps", "expected_gbps", "seconds"}, and "error" when the check could not finish
# (it then blames no node).
PRE_STEP_MESSAGE_KEY = "gpucluster.io/pre-step-check"
# The check fails a job (exit 86) only on a pool whose remediation is `on`: nothing else would keep the job
# off the node, and a restart would land on it again. The pool names are a file of the code ConfigMap (read
# when the check runs, so turning remediation on or off changes no job); elsewhere the check reports and
# the job runs. A check that cannot finish never fails the job.
ENFORCED_POOLS_FILE = "enforced-pools.json"
VERDICT_PASS, VERDICT_FAIL, VERDICT_PEER = "pass", "fail", "peer-failed"

# -- accounting -------------------------------------------------------------------------------------------
# Each second of a job's life is exactly one phase; together they add up to its wall-clock time.
PHASES = ("queued", "scaling_up", "pulling_image", "initialising", "training", "checkpointing",
          "lost_to_restarts", "idle_tail")
# The controller serves these (Prometheus text format) for the Grafana panel.
GPU_SECONDS_METRIC = "gpucluster_job_gpu_seconds"  # gauge {namespace, gpucluster_job, phase}
GOODPUT_METRIC = "gpucluster_job_goodput_ratio"  # gauge {namespace, gpucluster_job}: training / paid
# The controller's record of a job's life (pods and logs go with each restart): a ConfigMap in the
# job's namespace, named this prefix + the job's name, data[RECORD_KEY] = JSON (accounting.py). "-job-" keeps
# it apart from the check's code ConfigMap, gpucluster-goodput-code, whatever the job is called.
RECORD_PREFIX = "gpucluster-goodput-job-"
RECORD_KEY = "record.json"
# On a record whose job is gone, since when (RFC 3339): the record goes recordRetentionDays after it.
RECORD_GONE_ANNOTATION = "gpucluster.io/job-gone-since"
