"""What the training processes printed: CUDA OOM, NCCL timeouts and transport, loss trouble, slow checkpoints.

Message formats:
- PyTorch c10/cuda/CUDACachingAllocator.cpp (v2.9): `torch.OutOfMemoryError: CUDA out of
  memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.19 GiB of which ...`
  (torch.cuda.OutOfMemoryError before 2.5); a CUDA runtime failure outside the allocator
  surfaces as "CUDA error: out of memory" (c10/cuda/CUDAException.h C10_CUDA_CHECK).
- PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (v2.9) WorkNCCL::checkTimeout:
  "<logPrefix>Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<n>,
  OpType=<op>, NumelIn=<n>, NumelOut=<n>, Timeout(ms)=<ms>) ran for <ms> milliseconds before
  timing out." with logPrefix "[PG ID <i> PG GUID <g> Rank <r>] ", printed through glog as
  "[rank<r>]:[E<mmdd> <time> ProcessGroupNCCL.cpp:<line>] ...".
- NVIDIA/nccl v2.29 src/init.cc "NCCL INFO Using network <name>", src/transport/net_socket.cc
  "NET/Socket : Using ...", src/plugin/plugin_open.cc "NET/Plugin: Could not find: ...";
  aws/aws-ofi-nccl v1.21 include/nccl_ofi_log.h prefixes its lines "NET/OFI " (src/nccl_ofi_net.cpp
  "Initializing aws-ofi-nccl ...", "Selected provider is efa, fabric is efa (found <n> nics)").
  Parsed by bootstrap/offline/nccl_log.py, the same reader nccl-report uses.
- loss and checkpoint lines: bootstrap/doctor/logparse.py (Megatron-LM, torchtitan, HF Trainer).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from bootstrap.doctor import logparse
from bootstrap.doctor.bundle import Bundle, labels, name
from bootstrap.doctor.findings import Evidence, Finding, log_evidence
from bootstrap.offline import nccl_log
from components.core.hardware import catalog

CUDA_OOM = re.compile(r"OutOfMemoryError: CUDA out of memory|CUDA out of memory\. Tried to allocate|"
                      r"CUDA error: out of memory")
WATCHDOG = re.compile(r"Watchdog caught collective operation timeout: (WorkNCCL\((?P<work>.*?)\) ran for)?")
SOCKET_LINES = (re.compile(r"NCCL INFO Using network Socket"), re.compile(r"via NET/Socket/"),
                re.compile(r"NCCL INFO NET/Socket"), re.compile(r"NET/Plugin: Could not find"))
JOB_LABELS = ("gpucluster.io/job", "training.kubeflow.org/job-name", "jobset.sigs.k8s.io/jobset-name")


def ordered_logs(bundle: Bundle) -> Iterator[tuple[str, str, str, bool]]:
    """(pod, container, text, previous): launcher and rank 0 first, a restarted container's earlier log after."""
    order = {name(p): i for i, p in enumerate(bundle.pods)}
    keys = sorted(set(bundle.logs) | set(bundle.previous_logs), key=lambda k: (order.get(k[0], len(order)), k))
    for pod, container in keys:
        if (pod, container) in bundle.logs:
            yield pod, container, bundle.logs[(pod, container)], False
        if (pod, container) in bundle.previous_logs:
            yield pod, container, bundle.previous_logs[(pod, container)], True


def _first_lines(bundle: Bundle, pattern: re.Pattern[str], limit: int = 3) -> list[tuple[Evidence, re.Match]]:
    found = []
    for pod, container, text, previous in ordered_logs(bundle):
        for line in text.splitlines():
            if match := pattern.search(line):
                found.append((log_evidence(pod, container, line, previous), match))
                break
        if len(found) == limit:
            break
    return found


def cuda_oom(bundle: Bundle) -> list[Finding]:
    found = _first_lines(bundle, CUDA_OOM)
    if not found:
        return []
    return [Finding("cuda-oom", "CUDA out of memory: the model does not fit GPU memory as configured",
                    tuple(e for e, _ in found),
                    "shrink what each GPU holds: a smaller micro-batch, activation checkpointing, a higher ZeRO/FSDP "
                    "sharding stage or more tensor/pipeline parallelism (`python -m bootstrap size` estimates the "
                    "memory per GPU); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (set by the launcher) only "
                    "helps fragmentation")]


def nccl_watchdog(bundle: Bundle) -> list[Finding]:
    found = _first_lines(bundle, WATCHDOG)
    if not found:
        return []
    work = dict(re.findall(r"(\w+(?:\(ms\))?)=([^,]+)", found[0][1].group("work") or ""))
    op, timeout = work.get("OpType"), work.get("Timeout(ms)")
    title = "an NCCL collective timed out (the watchdog aborted the job)"
    if op and timeout and timeout.isdigit():
        title = f"NCCL {op} timed out after {int(timeout) / 60000:g} min (the watchdog aborted the job)"
    return [Finding("nccl-watchdog-timeout", title, tuple(e for e, _ in found),
                    "a collective waited for a rank that never joined: a rank that died or hung first (look at "
                    "the other findings: OOM, XID, a crash in one rank's log), ranks calling collectives in a "
                    "different order, or a stalled network. TORCH_NCCL_TRACE_BUFFER_SIZE=2000 with "
                    "TORCH_NCCL_DUMP_ON_TIMEOUT=1 dumps each rank's flight recorder to compare",
                    {"opType": op, "seqNum": work.get("SeqNum"), "timeoutMs": timeout})]


def _job_of(pod: dict[str, Any]) -> str | None:
    return next((labels(pod)[k] for k in JOB_LABELS if k in labels(pod)), None)


def _efa_expected(bundle: Bundle, pod_name: str) -> bool:
    """The pod's job asks for EFA devices or runs on a type with EFA (the launcher reports for its workers)."""
    pods = {name(p): p for p in bundle.of("Pod")}
    job = _job_of(pods[pod_name]) if pod_name in pods else None
    peers = [p for p in pods.values() if job is not None and _job_of(p) == job] or list(pods.values())
    for pod in peers:
        spec = pod.get("spec") or {}
        for container in spec.get("containers") or []:
            if "vpc.amazonaws.com/efa" in ((container.get("resources") or {}).get("limits") or {}):
                return True
        node = bundle.node(spec.get("nodeName"))
        itype = catalog.CATALOG.get(labels(node).get("node.kubernetes.io/instance-type", "")) if node else None
        if itype is not None and itype.efa_supported:
            return True
    return False


def nccl_socket_fallback(bundle: Bundle) -> list[Finding]:
    evidence: list[Evidence] = []
    for pod, container, text, previous in ordered_logs(bundle):
        parsed = nccl_log.parse_log(text)
        if nccl_log.transport_of(parsed, _efa_expected(bundle, pod)) != nccl_log.TRANSPORT_SOCKET_FALLBACK:
            continue
        lines = text.splitlines()
        for pattern in SOCKET_LINES:
            line = next((ln for ln in lines if pattern.search(ln)), None)
            if line:
                evidence.append(log_evidence(pod, container, line, previous))
                if len(evidence) >= 2:
                    break
        if evidence:
            break
    if not evidence:
        return []
    return [Finding("nccl-socket-fallback", "NCCL runs over TCP sockets, not EFA (no NET/OFI provider)",
                    tuple(evidence),
                    "NCCL did not load aws-ofi-nccl, or the pod has no EFA devices: use an image with the EFA "
                    "installer's libfabric and aws-ofi-nccl (the AWS PyTorch DLC has both), keep FI_PROVIDER=efa, "
                    "and check the workers request vpc.amazonaws.com/efa; the log should show "
                    "'NET/OFI Selected provider is efa' and 'Using network Libfabric'")]


def _training_logs(bundle: Bundle):
    for pod, container, text, previous in ordered_logs(bundle):
        yield pod, container, previous, logparse.parse(text)


def loss_trouble(bundle: Bundle) -> list[Finding]:
    out = []
    for pod, container, previous, training in _training_logs(bundle):
        if training.nan_lines and not any(f.cause == "loss-nan" for f in out):
            out.append(Finding("loss-nan", "the training loss became NaN or infinite",
                               (log_evidence(pod, container, training.nan_lines[0], previous),),
                               "lower the learning rate or lengthen warm-up, clip gradients (max-norm 1.0), prefer "
                               "bf16 to fp16; resume from the last good checkpoint, and reproduce on one rank with "
                               "the same batch to find the data or op that overflows"))
        spike = logparse.loss_spike(training.losses)
        if spike and not any(f.cause == "loss-spike" for f in out):
            point, median = spike
            out.append(Finding("loss-spike", f"the loss jumped to {point.value:g} from about {median:g}",
                               (log_evidence(pod, container, point.line, previous),),
                               "clip gradients (max-norm 1.0) and check the learning-rate schedule; skip or "
                               "inspect the batch at that step; check one rank's data order to tell bad data from "
                               "instability", {"step": point.step, "loss": point.value, "median": median}))
    return out


def checkpoint_slow(bundle: Bundle, threshold: float = 0.25) -> list[Finding]:
    for pod, container, previous, training in _training_logs(bundle):
        share = logparse.checkpoint_share(training)
        if share and share[0] >= threshold:
            fraction, save, per_step, between = share
            return [Finding(
                "checkpoint-dominates", f"checkpoint writes take {fraction:.0%} of the run time "
                f"({save.seconds:.3g} s every {between} steps of {per_step:.3g} s)",
                (log_evidence(pod, container, save.line, previous),),
                "write checkpoints less often (a longer save interval), or asynchronously (Megatron --async-save, "
                "torch.distributed.checkpoint.async_save, torchtitan checkpoint.async_mode), to the FSx mount "
                "with enough throughput (storage throughput in the plan)",
                {"share": round(fraction, 3), "saveSeconds": save.seconds, "stepSeconds": per_step,
                 "stepsBetweenSaves": between})]
    return []
